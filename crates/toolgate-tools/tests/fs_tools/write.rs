//! write: atomic replacement, modes, create_only, expected hashes, symlinks.

use std::os::unix::fs::PermissionsExt;

use pretty_assertions::assert_eq;
use serde_json::json;
use toolgate_core::ToolError;
use toolgate_policy::{CallError, Stage};
use toolgate_tools::Limits;

use crate::common::{Fixture, facts, sha256, text};
use crate::{mode_of, names_in, tool_failure};

#[tokio::test]
async fn write_creates_missing_parents() {
    let f = Fixture::new();
    let content = "hello\nworld\n";
    let out = f
        .ok("write", json!({"path": "a/b/c.txt", "content": content}))
        .await;
    assert_eq!(text(&out), "Created `a/b/c.txt` (2 lines, 12 bytes).");
    assert_eq!(
        facts(&out),
        json!({
            "path": "a/b/c.txt", "created": true, "bytes": 12, "lines": 2,
            "sha256": sha256(content.as_bytes()), "previous_sha256": null,
        })
    );
    assert_eq!(f.bytes("a/b/c.txt"), content.as_bytes());
    assert_eq!(names_in(&f.path("a/b")), ["c.txt"]);
}

#[tokio::test]
async fn write_replaces_atomically_and_keeps_the_mode() {
    let f = Fixture::new();
    for (name, mode) in [("secret.env", 0o600), ("run.sh", 0o755), ("odd", 0o640)] {
        let old = format!("old {name}\n");
        let path = f.put(name, &old);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        let new = format!("new {name}\nsecond line\n");
        let out = f.ok("write", json!({"path": name, "content": new})).await;
        assert_eq!(
            text(&out),
            format!("Replaced `{name}` (2 lines, {} bytes).", new.len())
        );
        assert_eq!(
            facts(&out),
            json!({
                "path": name, "created": false, "bytes": new.len(), "lines": 2,
                "sha256": sha256(new.as_bytes()),
                "previous_sha256": sha256(old.as_bytes()),
            })
        );
        assert_eq!(f.bytes(name), new.as_bytes());
        assert_eq!(mode_of(&path), mode, "{name} lost its mode");
    }
    // No temp file is left next to the targets.
    assert_eq!(names_in(&f.root), ["odd", "run.sh", "secret.env"]);
}

#[tokio::test]
async fn write_create_only_refuses_an_existing_file() {
    let f = Fixture::new();
    f.put("keep.txt", "precious\n");
    let error = f
        .call(
            "write",
            json!({"path": "keep.txt", "content": "gone", "create_only": true}),
        )
        .await
        .unwrap_err();
    let ToolError::Failed(message) = tool_failure(&error) else {
        panic!("{error:?}");
    };
    assert!(
        message.starts_with("`keep.txt` already exists and create_only refuses to replace it"),
        "{message}"
    );
    assert_eq!(f.bytes("keep.txt"), b"precious\n");
    assert_eq!(names_in(&f.root), ["keep.txt"]);
    // On a new path it creates.
    let out = f
        .ok(
            "write",
            json!({"path": "fresh.txt", "content": "x", "create_only": true}),
        )
        .await;
    assert_eq!(facts(&out)["created"], json!(true));
}

#[tokio::test]
async fn write_checks_expected_sha256() {
    let f = Fixture::new();
    let old = "version 1\n";
    f.put("doc.txt", old);
    let stale = sha256(b"version 0\n");
    let error = f
        .call(
            "write",
            json!({"path": "doc.txt", "content": "version 2\n", "expected_sha256": stale}),
        )
        .await
        .unwrap_err();
    assert_eq!(
        tool_failure(&error),
        &ToolError::Failed(format!(
            "`doc.txt` changed since it was read: its sha256 is now {}, not {stale}; read it \
             again and redo the change on the current content",
            sha256(old.as_bytes())
        ))
    );
    assert_eq!(f.bytes("doc.txt"), old.as_bytes());

    // The hash read returns is the one write accepts (in either case).
    let read = f.ok("read", json!({"path": "doc.txt"})).await;
    let current = facts(&read)["sha256"].as_str().unwrap().to_uppercase();
    let out = f
        .ok(
            "write",
            json!({"path": "doc.txt", "content": "version 2\n", "expected_sha256": current}),
        )
        .await;
    assert_eq!(f.bytes("doc.txt"), b"version 2\n");
    assert_eq!(
        facts(&out)["previous_sha256"],
        json!(sha256(old.as_bytes()))
    );

    // A hash for a file that does not exist is refused, nothing is created.
    let error = f
        .err(
            "write",
            json!({"path": "ghost.txt", "content": "x", "expected_sha256": stale}),
        )
        .await;
    assert!(error.contains("does not exist"), "{error}");
    assert!(!f.path("ghost.txt").exists());
}

#[tokio::test]
async fn write_refuses_a_malformed_hash_at_validation() {
    let f = Fixture::new();
    f.put("doc.txt", "v1\n");
    for bad in ["abc", "zz".repeat(32).as_str(), &"a".repeat(65)] {
        let error = f
            .call(
                "write",
                json!({"path": "doc.txt", "content": "v2\n", "expected_sha256": bad}),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(&error, CallError::InvalidArguments(e) if e.pointer == "/expected_sha256"),
            "{bad}: {error:?}"
        );
        assert_eq!(error.stage(), Stage::Validate);
    }
    assert_eq!(f.bytes("doc.txt"), b"v1\n");
}

#[tokio::test]
async fn write_refuses_content_over_max_file_bytes() {
    let f = Fixture::with_limits(Limits::default().max_file_bytes(16));
    f.put("small.txt", "small\n");
    let error = f
        .call(
            "write",
            json!({"path": "small.txt", "content": "x".repeat(17)}),
        )
        .await
        .unwrap_err();
    assert_eq!(
        tool_failure(&error),
        &ToolError::InvalidArguments(
            "the content is 17 bytes, over the limit of 16 bytes per file".into()
        )
    );
    let error = f
        .err(
            "write",
            json!({"path": "new.txt", "content": "x".repeat(17)}),
        )
        .await;
    assert!(error.contains("over the limit"), "{error}");
    assert_eq!(names_in(&f.root), ["small.txt"]);
    assert_eq!(f.bytes("small.txt"), b"small\n");
    // Exactly at the limit is fine.
    f.ok(
        "write",
        json!({"path": "new.txt", "content": "x".repeat(16)}),
    )
    .await;
}

#[tokio::test]
async fn symlinks_inside_the_root_are_followed_and_kept() {
    let f = Fixture::new();
    f.put("real/target.txt", "one\n");
    f.symlink("alias.txt", "real/target.txt");
    let out = f.ok("read", json!({"path": "alias.txt"})).await;
    assert_eq!(text(&out), "     1\tone\n");
    f.ok(
        "edit",
        json!({"path": "alias.txt", "old_text": "one", "new_text": "two"}),
    )
    .await;
    f.ok("write", json!({"path": "alias.txt", "content": "three\n"}))
        .await;
    assert_eq!(f.bytes("real/target.txt"), b"three\n");
    assert!(
        std::fs::symlink_metadata(f.path("alias.txt"))
            .unwrap()
            .is_symlink(),
        "the link was replaced by a file"
    );
    // A dangling link inside the root: writing it creates its target, as
    // Jail::write documents, and never blames an option that was not given.
    f.symlink("later.txt", "real/later.txt");
    let out = f
        .ok("write", json!({"path": "later.txt", "content": "new\n"}))
        .await;
    assert_eq!(text(&out), "Created `later.txt` (1 lines, 4 bytes).");
    assert_eq!(facts(&out)["created"], json!(true));
    assert_eq!(f.bytes("real/later.txt"), b"new\n");
    assert!(
        std::fs::symlink_metadata(f.path("later.txt"))
            .unwrap()
            .is_symlink()
    );
    // create_only refuses: something (the link) is already there.
    f.symlink("later2.txt", "real/later2.txt");
    let error = f
        .err(
            "write",
            json!({"path": "later2.txt", "content": "x", "create_only": true}),
        )
        .await;
    assert!(error.contains("already exists"), "{error}");
    assert!(!f.path("real/later2.txt").exists());
}

//! edit: exact and lenient matching, all-or-nothing edits, line endings.

use std::os::unix::fs::PermissionsExt;

use pretty_assertions::assert_eq;
use serde_json::json;
use toolgate_core::ToolError;
use toolgate_policy::CallError;
use toolgate_tools::Limits;

use crate::common::{Fixture, facts, sha256, text};
use crate::{mode_of, names_in, tool_failure};

#[tokio::test]
async fn edit_replaces_once_and_returns_the_diff() {
    let f = Fixture::new();
    let old = "one\ntwo\nthree\n";
    f.put("f.txt", old);
    let out = f
        .ok(
            "edit",
            json!({"path": "f.txt", "old_text": "two", "new_text": "TWO"}),
        )
        .await;
    let diff = "--- a/f.txt\n+++ b/f.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n";
    assert_eq!(
        text(&out),
        format!("Edited `f.txt`: 1 replacement(s), +1 -1 lines.\n{diff}")
    );
    let new = "one\nTWO\nthree\n";
    assert_eq!(
        facts(&out),
        json!({
            "path": "f.txt", "dry_run": false,
            "edits": [{"pass": "exact", "replacements": 1, "lines": [2]}],
            "replacements": 1, "lines_added": 1, "lines_removed": 1,
            "diff": diff, "line_endings": "lf", "bom": false,
            "previous_sha256": sha256(old.as_bytes()), "sha256": sha256(new.as_bytes()),
        })
    );
    assert_eq!(f.bytes("f.txt"), new.as_bytes());
}

#[tokio::test]
async fn edit_without_a_match_shows_the_closest_region_and_changes_nothing() {
    let f = Fixture::new();
    let old = "fn one() {}\nfn two() {}\nfn three() {\n    let x = 1;\n    x + 1\n}\nfn four() {}\nfn five() {}\n";
    f.put("lib.rs", old);
    let error = f
        .call(
            "edit",
            json!({"path": "lib.rs", "old_text": "fn three() {\n    let x = 2;\n    x + 1", "new_text": "gone"}),
        )
        .await
        .unwrap_err();
    assert_eq!(
        tool_failure(&error),
        &ToolError::Failed(
            "old_text was not found in `lib.rs`, not even ignoring whitespace; nothing was \
             changed. Read the file again and copy old_text from it exactly.\n\
             The closest region is lines 3-5:\n\
             \x20    1\tfn one() {}\n\
             \x20    2\tfn two() {}\n\
             \x20    3\tfn three() {\n\
             \x20    4\t    let x = 1;\n\
             \x20    5\t    x + 1\n\
             \x20    6\t}\n\
             \x20    7\tfn four() {}\n"
                .into()
        )
    );
    assert_eq!(f.bytes("lib.rs"), old.as_bytes());
}

#[tokio::test]
async fn edit_refuses_an_ambiguous_match_listing_the_lines() {
    let f = Fixture::new();
    let old = "x = 1\ny = 2\nx = 1\nz = 3\nx = 1\n";
    f.put("v.py", old);
    let error = f
        .call(
            "edit",
            json!({"path": "v.py", "old_text": "x = 1", "new_text": "x = 9"}),
        )
        .await
        .unwrap_err();
    assert_eq!(
        tool_failure(&error),
        &ToolError::Failed(
            "old_text occurs 3 times in `v.py` (exact match), at lines 1, 3, 5; include more \
             surrounding lines to make it unique, or set replace_all to change every one"
                .into()
        )
    );
    assert_eq!(f.bytes("v.py"), old.as_bytes());

    // replace_all changes every one.
    let out = f
        .ok(
            "edit",
            json!({"path": "v.py", "old_text": "x = 1", "new_text": "x = 9", "replace_all": true}),
        )
        .await;
    assert_eq!(f.bytes("v.py"), b"x = 9\ny = 2\nx = 9\nz = 3\nx = 9\n");
    assert_eq!(
        facts(&out)["edits"],
        json!([{"pass": "exact", "replacements": 3, "lines": [1, 3, 5]}])
    );
    assert_eq!(facts(&out)["replacements"], json!(3));
    assert!(text(&out).starts_with("Edited `v.py`: 3 replacement(s), +3 -3 lines.\n"));
}

#[tokio::test]
async fn edit_keeps_crlf_line_endings_byte_exactly() {
    let f = Fixture::new();
    f.put("win.txt", "one\r\ntwo\r\nthree\r\n");
    let out = f
        .ok(
            "edit",
            json!({"path": "win.txt", "old_text": "two\n", "new_text": "2\nand more\n"}),
        )
        .await;
    assert_eq!(f.bytes("win.txt"), b"one\r\n2\r\nand more\r\nthree\r\n");
    assert!(
        text(&out).contains("[CRLF line endings kept]\n"),
        "{}",
        text(&out)
    );
    assert_eq!(facts(&out)["line_endings"], json!("crlf"));
    // old_text copied with CRLF from the file matches too.
    f.ok(
        "edit",
        json!({"path": "win.txt", "old_text": "one\r\n2\r\n", "new_text": "1\r\n"}),
    )
    .await;
    assert_eq!(f.bytes("win.txt"), b"1\r\nand more\r\nthree\r\n");
}

#[tokio::test]
async fn edit_keeps_the_bom() {
    let f = Fixture::new();
    f.put("bom.txt", "\u{feff}hello\nworld\n");
    let out = f
        .ok(
            "edit",
            json!({"path": "bom.txt", "old_text": "world", "new_text": "there"}),
        )
        .await;
    assert_eq!(f.bytes("bom.txt"), "\u{feff}hello\nthere\n".as_bytes());
    assert_eq!(facts(&out)["bom"], json!(true));
    // The diff shows text, not the mark.
    assert!(!facts(&out)["diff"].as_str().unwrap().contains('\u{feff}'));
}

#[tokio::test]
async fn edit_falls_back_to_ignoring_trailing_whitespace_and_says_so() {
    let f = Fixture::new();
    f.put("main.rs", "fn main() {   \n    go();\t\n}\n");
    let out = f
        .ok(
            "edit",
            json!({"path": "main.rs", "old_text": "fn main() {\n    go();", "new_text": "fn main() {\n    run();"}),
        )
        .await;
    assert_eq!(f.bytes("main.rs"), b"fn main() {\n    run();\n}\n");
    assert!(
        text(&out).contains("[old_text matched after ignoring trailing whitespace]\n"),
        "{}",
        text(&out)
    );
    assert_eq!(
        facts(&out)["edits"],
        json!([{"pass": "trailing-whitespace", "replacements": 1, "lines": [1]}])
    );
}

#[tokio::test]
async fn edit_falls_back_to_ignoring_indentation_and_reindents() {
    let f = Fixture::new();
    f.put(
        "a.rs",
        "impl A {\n        fn f() {\n            old();\n        }\n}\n",
    );
    let out = f
        .ok(
            "edit",
            json!({
                "path": "a.rs",
                "old_text": "fn f() {\n    old();\n}",
                "new_text": "fn f() {\n    new();\n    more();\n}",
            }),
        )
        .await;
    assert_eq!(
        f.bytes("a.rs"),
        b"impl A {\n        fn f() {\n            new();\n            more();\n        }\n}\n"
    );
    assert!(
        text(&out).contains(
            "[old_text matched after ignoring indentation; new_text was re-indented to match the file]\n"
        ),
        "{}",
        text(&out)
    );
    assert_eq!(
        facts(&out)["edits"],
        json!([{"pass": "indentation", "replacements": 1, "lines": [2]}])
    );
}

#[tokio::test]
async fn edit_with_several_edits_is_all_or_nothing() {
    let f = Fixture::new();
    let old = "alpha\nbeta\ngamma\n";
    f.put("abc.txt", old);
    let error = f
        .call(
            "edit",
            json!({"path": "abc.txt", "edits": [
                {"old_text": "alpha", "new_text": "ALPHA"},
                {"old_text": "beta", "new_text": "BETA"},
                {"old_text": "delta", "new_text": "DELTA"},
            ]}),
        )
        .await
        .unwrap_err();
    let ToolError::Failed(message) = tool_failure(&error) else {
        panic!("{error:?}");
    };
    assert!(
        message.starts_with("edit 3 of 3: old_text was not found in `abc.txt`"),
        "{message}"
    );
    assert_eq!(f.bytes("abc.txt"), old.as_bytes());
    assert_eq!(names_in(&f.root), ["abc.txt"]);
}

#[tokio::test]
async fn edit_applies_edits_in_order() {
    let f = Fixture::new();
    f.put("seq.txt", "alpha gamma\nomega\n");
    let out = f
        .ok(
            "edit",
            json!({"path": "seq.txt", "edits": [
                {"old_text": "alpha", "new_text": "beta"},
                // Only exists once edit 1 has been applied.
                {"old_text": "beta gamma", "new_text": "delta"},
            ]}),
        )
        .await;
    assert_eq!(f.bytes("seq.txt"), b"delta\nomega\n");
    assert_eq!(
        facts(&out)["edits"],
        json!([
            {"pass": "exact", "replacements": 1, "lines": [1]},
            {"pass": "exact", "replacements": 1, "lines": [1]},
        ])
    );
    assert_eq!(facts(&out)["replacements"], json!(2));
}

#[tokio::test]
async fn edit_dry_run_returns_the_diff_and_writes_nothing() {
    let f = Fixture::new();
    let old = "keep\nchange me\n";
    let path = f.put("d.txt", old);
    let before = std::fs::metadata(&path).unwrap().modified().unwrap();
    let out = f
        .ok(
            "edit",
            json!({"path": "d.txt", "old_text": "change me", "new_text": "changed", "dry_run": true}),
        )
        .await;
    let diff = "--- a/d.txt\n+++ b/d.txt\n@@ -1,2 +1,2 @@\n keep\n-change me\n+changed\n";
    assert_eq!(
        text(&out),
        format!("Would edit `d.txt`: 1 replacement(s), +1 -1 lines.\n{diff}")
    );
    assert_eq!(
        facts(&out),
        json!({
            "path": "d.txt", "dry_run": true,
            "edits": [{"pass": "exact", "replacements": 1, "lines": [2]}],
            "replacements": 1, "lines_added": 1, "lines_removed": 1,
            "diff": diff, "line_endings": "lf", "bom": false,
            "previous_sha256": sha256(old.as_bytes()),
            "sha256": sha256(b"keep\nchanged\n"),
        })
    );
    assert_eq!(f.bytes("d.txt"), old.as_bytes());
    assert_eq!(
        std::fs::metadata(&path).unwrap().modified().unwrap(),
        before
    );
    assert_eq!(names_in(&f.root), ["d.txt"]);
}

#[tokio::test]
async fn edit_checks_expected_sha256() {
    let f = Fixture::new();
    let old = "value = 1\n";
    f.put("cfg.toml", old);
    let stale = sha256(b"value = 0\n");
    let error = f
        .call(
            "edit",
            json!({"path": "cfg.toml", "old_text": "1", "new_text": "2", "expected_sha256": stale}),
        )
        .await
        .unwrap_err();
    let ToolError::Failed(message) = tool_failure(&error) else {
        panic!("{error:?}");
    };
    assert!(
        message.starts_with("`cfg.toml` changed since it was read"),
        "{message}"
    );
    assert_eq!(f.bytes("cfg.toml"), old.as_bytes());
    let out = f
        .ok(
            "edit",
            json!({"path": "cfg.toml", "old_text": "1", "new_text": "2", "expected_sha256": sha256(old.as_bytes())}),
        )
        .await;
    assert_eq!(f.bytes("cfg.toml"), b"value = 2\n");
    assert_eq!(
        facts(&out)["previous_sha256"],
        json!(sha256(old.as_bytes()))
    );
    // A malformed hash never reaches the tool.
    let error = f
        .call(
            "edit",
            json!({"path": "cfg.toml", "old_text": "2", "new_text": "3", "expected_sha256": "nothex"}),
        )
        .await
        .unwrap_err();
    assert!(matches!(error, CallError::InvalidArguments(_)), "{error:?}");
    assert_eq!(f.bytes("cfg.toml"), b"value = 2\n");
}

#[tokio::test]
async fn edit_refuses_binary_and_non_utf8_files() {
    let f = Fixture::new();
    let binary = b"head\0tail text\n".to_vec();
    let latin1 = b"caf\xe9 text\n".to_vec();
    f.put("blob.bin", &binary);
    f.put("latin1.txt", &latin1);
    let error = f
        .call(
            "edit",
            json!({"path": "blob.bin", "old_text": "tail", "new_text": "TAIL"}),
        )
        .await
        .unwrap_err();
    assert_eq!(
        tool_failure(&error),
        &ToolError::Failed("`blob.bin` is a binary file; edit changes text files only".into())
    );
    let error = f
        .call(
            "edit",
            json!({"path": "latin1.txt", "old_text": "text", "new_text": "TEXT"}),
        )
        .await
        .unwrap_err();
    let ToolError::Failed(message) = tool_failure(&error) else {
        panic!("{error:?}");
    };
    assert!(
        message.starts_with(
            "`latin1.txt` is not valid UTF-8 (first bad byte at offset 3); edit changes UTF-8 text only"
        ),
        "{message}"
    );
    assert_eq!(f.bytes("blob.bin"), binary);
    assert_eq!(f.bytes("latin1.txt"), latin1);
}

#[tokio::test]
async fn edit_keeps_the_mode_and_respects_max_file_bytes() {
    let f = Fixture::with_limits(Limits::default().max_file_bytes(64));
    let path = f.put("run.sh", "#!/bin/sh\necho hi\n");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o750)).unwrap();
    f.ok(
        "edit",
        json!({"path": "run.sh", "old_text": "hi", "new_text": "hello"}),
    )
    .await;
    assert_eq!(f.bytes("run.sh"), b"#!/bin/sh\necho hello\n");
    assert_eq!(mode_of(&path), 0o750);
    // A file over the limit is not edited.
    f.put("big.txt", "y".repeat(65));
    let error = f
        .err(
            "edit",
            json!({"path": "big.txt", "old_text": "yy", "new_text": "z", "replace_all": true}),
        )
        .await;
    assert!(error.contains("64"), "{error}");
    assert_eq!(f.bytes("big.txt"), "y".repeat(65).as_bytes());
    // Nor is a file made larger than the limit (write refuses that too).
    f.put("grow.txt", "x\n");
    let error = f
        .call(
            "edit",
            json!({"path": "grow.txt", "old_text": "x", "new_text": "x".repeat(100)}),
        )
        .await;
    let Err(error) = error else {
        panic!(
            "edit wrote {} bytes over max_file_bytes = 64",
            f.bytes("grow.txt").len()
        );
    };
    assert!(
        error.to_string().contains("over the limit of 64 bytes"),
        "{error}"
    );
    assert_eq!(f.bytes("grow.txt"), b"x\n");
}

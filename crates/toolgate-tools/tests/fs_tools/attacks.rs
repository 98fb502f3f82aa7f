//! Escapes from the root, the path policy and protected entries for
//! read, write, edit and ls.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toolgate_policy::Stage;

use crate::common::{CANARY, Fixture, text};
use crate::tree::{Tree, leak};

/// The hostile paths every path-taking tool must refuse. File paths for
/// read/write/edit, directory paths for ls.
fn hostile_paths(f: &Fixture, dirs: bool) -> Vec<String> {
    let outside = f.outside.display().to_string();
    let canary = if dirs { "dir" } else { "dir/canary" };
    vec![
        format!("../outside/{canary}"),
        format!("{outside}/{canary}"),
        // Symlinks inside the root to the outside dir, relative and absolute.
        format!("link/{canary}"),
        format!("abs_link/{canary}"),
        // A symlink to the outside file (or dir, for ls).
        if dirs {
            "dir_link".into()
        } else {
            "file_link".into()
        },
        // `..` after a symlinked dir: lexically inside the root
        // (`root/outside/...`), physically `outside/../outside/...`.
        format!("link/../outside/{canary}"),
        format!("sub/../link/../outside/{canary}"),
        // Lexical escape through a real subdirectory.
        format!("sub/../../outside/{canary}"),
        // NUL: what is checked would not be what is opened.
        format!("ok\0/../../outside/{canary}"),
        if dirs {
            "~/.ssh".into()
        } else {
            "~/.ssh/id_rsa".into()
        },
        // The root's parent.
        "..".into(),
    ]
}

fn plant_links(f: &Fixture) {
    f.put("sub/keep.txt", "keep\n");
    f.symlink("link", "../outside");
    f.symlink("abs_link", &f.outside);
    f.symlink("file_link", f.outside.join("dir/canary"));
    f.symlink("dir_link", f.outside.join("dir"));
}

async fn assert_all_refused(f: &Fixture, tool: &str, args_for: impl Fn(&str) -> Value, dirs: bool) {
    for path in hostile_paths(f, dirs) {
        let outside = f.outside_snapshot();
        let root = f.root_snapshot();
        let args = args_for(&path);
        match f.call(tool, args).await {
            Ok(out) => panic!("{tool} `{}` succeeded: {out:#?}", path.escape_debug()),
            Err(e) => {
                let message = e.to_string();
                assert!(
                    !message.contains("must never change"),
                    "{tool} `{path:?}` leaked the canary: {message}"
                );
            }
        }
        assert_eq!(
            f.outside_snapshot(),
            outside,
            "{tool} `{path:?}` changed outside"
        );
        assert_eq!(
            f.root_snapshot(),
            root,
            "{tool} `{path:?}` changed the root"
        );
    }
    // The canaries are intact.
    assert_eq!(
        std::fs::read_to_string(f.outside.join("canary")).unwrap(),
        CANARY
    );
    assert_eq!(
        std::fs::read_to_string(f.outside.join("dir/canary")).unwrap(),
        CANARY
    );
    assert_eq!(
        std::fs::read_to_string(f.home.join(".ssh/id_rsa")).unwrap(),
        CANARY
    );
}

#[tokio::test]
async fn read_refuses_every_escape() {
    let f = Fixture::new();
    plant_links(&f);
    assert_all_refused(&f, "read", |p| json!({"path": p}), false).await;
}

#[tokio::test]
async fn write_refuses_every_escape() {
    let f = Fixture::new();
    plant_links(&f);
    assert_all_refused(
        &f,
        "write",
        |p| json!({"path": p, "content": "pwned\n"}),
        false,
    )
    .await;
    // Creating a new file out there is refused as well.
    assert_all_refused(
        &f,
        "write",
        |p| json!({"path": p.replace("canary", "planted"), "content": "pwned\n"}),
        false,
    )
    .await;
}

#[tokio::test]
async fn write_never_follows_a_dangling_link_out() {
    let f = Fixture::new();
    f.symlink("dangling", "../outside/planted");
    f.symlink("dangling_abs", f.outside.join("planted2"));
    let outside = f.outside_snapshot();
    for path in ["dangling", "dangling_abs"] {
        for create_only in [false, true] {
            let error = f
                .err(
                    "write",
                    json!({"path": path, "content": "pwned", "create_only": create_only}),
                )
                .await;
            assert!(!error.is_empty());
        }
    }
    assert_eq!(f.outside_snapshot(), outside);
}

#[tokio::test]
async fn edit_refuses_every_escape() {
    let f = Fixture::new();
    plant_links(&f);
    assert_all_refused(
        &f,
        "edit",
        |p| json!({"path": p, "old_text": "canary", "new_text": "pwned"}),
        false,
    )
    .await;
}

#[tokio::test]
async fn ls_refuses_every_escape() {
    let f = Fixture::new();
    plant_links(&f);
    assert_all_refused(&f, "ls", |p| json!({"path": p, "depth": 3}), true).await;
}

#[tokio::test]
async fn the_path_policy_stops_nul_and_home_secrets_before_the_tool() {
    let f = Fixture::new();
    for (tool, args) in [
        ("read", json!({"path": "~/.ssh/id_rsa"})),
        ("write", json!({"path": "~/.ssh/id_rsa", "content": "x"})),
        (
            "edit",
            json!({"path": "~/.ssh/id_rsa", "old_text": "canary", "new_text": "x"}),
        ),
        ("ls", json!({"path": "~/.ssh"})),
        ("read", json!({"path": "a\0b"})),
        ("write", json!({"path": "a\0b", "content": "x"})),
        (
            "edit",
            json!({"path": "a\0b", "old_text": "a", "new_text": "b"}),
        ),
        ("ls", json!({"path": "a\0b"})),
    ] {
        let error = f.call(tool, args.clone()).await.unwrap_err();
        assert_eq!(error.stage(), Stage::Paths, "{tool} {args}: {error}");
    }
    assert!(!f.path("~").exists());
}

// ---------------------------------------------------------------- protected entries

#[tokio::test]
async fn protected_entries_cannot_be_written_or_edited() {
    let f = Fixture::new();
    f.put(".git/config", "[core]\n\tbare = false\n");
    f.put(".git/hooks/pre-commit", "#!/bin/sh\nexit 0\n");
    f.put(".bashrc", "alias ll='ls -l'\n");
    f.put("nested/repo/.git/config", "[core]\n");
    f.symlink("innocent", ".git/config");
    f.symlink("hooks_link", ".git/hooks");
    let targets = [
        (".git/config", "bare"),
        (".git/hooks/pre-commit", "exit 0"),
        (".bashrc", "alias"),
        ("nested/repo/.git/config", "core"),
        ("innocent", "bare"),
        ("hooks_link/pre-commit", "exit 0"),
        ("./.git/../.git/config", "bare"),
    ];
    for (path, present) in targets {
        let outside = f.outside_snapshot();
        let root = f.root_snapshot();
        let write = f
            .err("write", json!({"path": path, "content": "pwned\n"}))
            .await;
        assert!(write.contains("is protected"), "write {path}: {write}");
        let edit = f
            .err(
                "edit",
                json!({"path": path, "old_text": present, "new_text": "pwned"}),
            )
            .await;
        assert!(edit.contains("is protected"), "edit {path}: {edit}");
        assert_eq!(f.root_snapshot(), root, "{path} changed");
        assert_eq!(f.outside_snapshot(), outside);
    }
    // New protected entries are refused too, leaving no directories behind.
    let root = f.root_snapshot();
    for path in [
        ".git/hooks/post-checkout",
        "other/.git",
        ".git/modules/sub/config",
    ] {
        let error = f.err("write", json!({"path": path, "content": "x"})).await;
        assert!(error.contains("is protected"), "write {path}: {error}");
    }
    assert_eq!(f.root_snapshot(), root);
    // Reading them is fine.
    let out = f.ok("read", json!({"path": "innocent"})).await;
    assert_eq!(text(&out), "     1\t[core]\n     2\t\tbare = false\n");
}

#[tokio::test]
async fn a_fifo_is_refused_without_blocking() {
    let f = Fixture::new();
    let status = std::process::Command::new("mkfifo")
        .arg(f.path("pipe"))
        .status()
        .unwrap();
    assert!(status.success());
    let read = f.err("read", json!({"path": "pipe"})).await;
    let edit = f
        .err(
            "edit",
            json!({"path": "pipe", "old_text": "a", "new_text": "b"}),
        )
        .await;
    let write = f
        .err("write", json!({"path": "pipe", "content": "x"}))
        .await;
    for message in [read, edit, write] {
        assert!(message.contains("pipe"), "{message}");
    }
}

// ---------------------------------------------------------------- grep and find

/// Start paths that lead out of the root, by text or by a symlink.
fn search_escapes(t: &Tree) -> Vec<String> {
    let outside = t.f.outside.display().to_string();
    vec![
        "../outside".into(),
        outside.clone(),
        format!("{outside}/dir"),
        "link_to_outside".into(),
        // Physically the root's parent.
        "link_to_outside/..".into(),
        "link_rel_outside".into(),
        "link_rel_outside/dir".into(),
        "link_file_outside".into(),
        "src/mod_1/up".into(),
        "src/../../outside".into(),
        "..".into(),
        "ok\0/../../outside".into(),
        "~/.ssh".into(),
        "~/.ssh/id_rsa".into(),
    ]
}

#[tokio::test]
async fn grep_and_find_refuse_every_escape_and_list_nothing_outside() {
    let t = Tree::new();
    let outside = t.f.outside_snapshot();
    let root = t.f.root_snapshot();
    for path in search_escapes(&t) {
        for (tool, args) in [
            (
                "grep",
                json!({"pattern": "needle|canary|OUTSIDE", "path": path, "hidden": true,
                       "no_ignore": true}),
            ),
            (
                "grep",
                json!({"pattern": "needle", "path": path, "mode": "files_with_matches"}),
            ),
            (
                "find",
                json!({"path": path, "hidden": true, "no_ignore": true}),
            ),
        ] {
            match t.f.call(tool, args.clone()).await {
                Ok(out) => panic!("{tool} {} succeeded: {}", path.escape_debug(), text(&out)),
                Err(e) => {
                    let message = e.to_string();
                    assert_eq!(leak(&message), None, "{tool} {path:?}: {message}");
                }
            }
        }
    }
    // From the root, with every option that widens the walk, nothing
    // behind a symlink shows up.
    for (tool, args) in [
        (
            "grep",
            json!({"pattern": "OUTSIDE|canary|must never", "hidden": true, "no_ignore": true}),
        ),
        (
            "grep",
            json!({"pattern": "needle", "hidden": true, "no_ignore": true,
                   "mode": "files_with_matches", "limit": 100_000}),
        ),
        (
            "find",
            json!({"hidden": true, "no_ignore": true, "limit": 100_000}),
        ),
        (
            "find",
            json!({"pattern": "*secret*", "hidden": true, "no_ignore": true}),
        ),
        (
            "find",
            json!({"pattern": "link_to_outside/**", "hidden": true}),
        ),
    ] {
        let out = t.f.ok(tool, args.clone()).await;
        let shown = format!("{}\n{}", text(&out), out.structured.clone().unwrap());
        assert_eq!(leak(&shown), None, "{tool} {args}: {shown}");
    }
    let out =
        t.f.ok("grep", json!({"pattern": "OUTSIDE|canary", "hidden": true}))
            .await;
    assert!(text(&out).starts_with("No matches. ["), "{}", text(&out));
    assert_eq!(t.f.outside_snapshot(), outside);
    assert_eq!(t.f.root_snapshot(), root);
}

#[tokio::test]
async fn grep_and_find_stop_nul_and_home_secrets_at_the_path_policy() {
    let t = Tree::new();
    for path in ["~/.ssh", "~/.ssh/id_rsa", "a\0b"] {
        for tool in ["grep", "find"] {
            let args = json!({"pattern": "x", "path": path});
            let error = t.f.call(tool, args).await.unwrap_err();
            assert_eq!(error.stage(), Stage::Paths, "{tool} {path:?}: {error}");
        }
    }
}

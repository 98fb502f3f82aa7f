//! What the host sees of the masks where stage 2 cannot guard creations
//! (the placeholder fallback, forced here) while a command runs and after: the
//! placeholders for absent protected names must not break host git, names
//! whose creation is harmless get none, and none survive their run.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::time::Duration;

use pretty_assertions::assert_eq;
use toolgate_sandbox::{Sandbox, SandboxCommand, SandboxSpec};

use common::{git, names};

/// A sandbox that masks absent protected names with placeholders.
fn sandbox(state: &Path) -> Sandbox {
    Sandbox::new(common::config(state).placeholders()).unwrap()
}

/// Waits (bounded) until `path` exists: the command is running then.
async fn until_exists(path: &Path) {
    for _ in 0..200 {
        if path.exists() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{} never appeared", path.display());
}

#[tokio::test]
async fn host_git_works_in_a_subdirectory_root_while_a_command_runs() {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let repo = base.join("repo");
    let root = repo.join("sub");
    std::fs::create_dir_all(&root).unwrap();
    git(&repo, &["init", "-q"]);
    std::fs::write(root.join("tracked.txt"), "x\n").unwrap();
    git(&repo, &["add", "."]);
    let status_before = git(&repo, &["status", "--porcelain"]);
    let sb = sandbox(&base.join("state"));
    let spec = SandboxSpec::for_root(&root);
    let running = sb.run(
        &spec,
        SandboxCommand::shell("touch started; sleep 2; rm started"),
    );
    let host = async {
        until_exists(&root.join("started")).await;
        let in_sub = git(&root, &["rev-parse", "--show-toplevel"]);
        assert_eq!(in_sub.trim(), repo.to_str().unwrap());
        // Placeholders are empty directories: git shows none of them
        // (only the command's own `started`).
        let shown = git(&root, &["status", "--porcelain"]);
        assert_eq!(shown, format!("{status_before}?? sub/started\n"));
        // The root's `.git` is blocked while the command runs: an empty
        // directory, which host git passes over to find the repository
        // above (an empty file there stops it: "invalid gitfile format").
        let dot_git = std::fs::symlink_metadata(root.join(".git")).unwrap();
        assert!(dot_git.is_dir(), "{dot_git:?}");
    };
    let (outcome, ()) = tokio::join!(running, host);
    assert_eq!(outcome.unwrap().outcome.exit_code, 0);
    assert_eq!(
        names(&root),
        vec!["tracked.txt".to_owned()],
        "left on the host"
    );
    assert_eq!(git(&repo, &["status", "--porcelain"]), status_before);
}

#[tokio::test]
async fn names_whose_creation_runs_nothing_get_no_placeholder() {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let root = base.join("root");
    std::fs::create_dir(&root).unwrap();
    git(&root, &["init", "-q"]);
    let sb = sandbox(&base.join("state"));
    let spec = SandboxSpec::for_root(&root);
    let running = sb.run(&spec, SandboxCommand::shell("touch started; sleep 1.5"));
    let host = async {
        until_exists(&root.join("started")).await;
        let seen = names(&root);
        for creatable in [
            ".bashrc",
            ".profile",
            ".zshrc",
            ".envrc",
            ".gitmodules",
            "toolgate.toml",
            // A root with a repository of its own: git never looks for a
            // bare one in it.
            "HEAD",
        ] {
            assert!(
                !seen.iter().any(|n| n == creatable),
                "{creatable} in {seen:?}"
            );
        }
        // Blocked agent configuration shows as empty read-only directories.
        let claude = std::fs::symlink_metadata(root.join(".claude")).unwrap();
        assert!(claude.is_dir());
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&claude.permissions()) & 0o777,
            0o555
        );
        seen
    };
    let (outcome, seen) = tokio::join!(running, host);
    assert_eq!(outcome.unwrap().outcome.exit_code, 0);
    assert!(seen.len() > 2, "{seen:?}");
    assert_eq!(names(&root), vec![".git".to_owned(), "started".to_owned()]);
    // And they are creatable: a command writes them where it can write.
    let o = sb
        .run(
            &SandboxSpec::for_root(&root),
            SandboxCommand::shell(
                "echo 'alias ll=ls' > .bashrc && echo '[sandbox]' > toolgate.toml",
            ),
        )
        .await
        .unwrap();
    assert_eq!(o.outcome.exit_code, 0, "{o:?}");
}

#[tokio::test]
async fn a_placeholder_a_host_program_filled_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let root = base.join("root");
    std::fs::create_dir(&root).unwrap();
    let sb = sandbox(&base.join("state"));
    let spec = SandboxSpec::for_root(&root);
    let running = sb.run(&spec, SandboxCommand::shell("touch started; sleep 1.5"));
    let host = async {
        until_exists(&root.join("started")).await;
        // The user's editor writes its settings into the empty `.vscode`
        // it finds meanwhile (as root, the placeholder's mode is no bar).
        std::fs::write(root.join(".vscode/settings.json"), "{}").unwrap();
    };
    let (outcome, ()) = tokio::join!(running, host);
    assert_eq!(outcome.unwrap().outcome.exit_code, 0);
    assert_eq!(
        std::fs::read_to_string(root.join(".vscode/settings.json")).unwrap(),
        "{}"
    );
    assert_eq!(
        names(&root),
        vec![".vscode".to_owned(), "started".to_owned()]
    );
}

fn lingering(state: &Path, delay: Duration) -> Sandbox {
    Sandbox::new(common::config(state).linger(delay).placeholders()).unwrap()
}

/// A server answers before its command's placeholders are removed. They
/// must still mask for a run that comes meanwhile (which uses them), and go
/// once the delay is over and no run needs them.
#[tokio::test]
async fn lingering_placeholders_mask_the_next_run_and_go_after_the_delay() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap().join("work");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("file.txt"), "x\n").unwrap();
    let before = names(&root);
    let sb = lingering(&dir.path().join("state"), Duration::from_millis(400));
    let spec = SandboxSpec::for_root(&root);
    let first = sb.run(&spec, SandboxCommand::shell("true")).await.unwrap();
    assert_eq!(first.outcome.exit_code, 0, "{first:?}");
    assert!(root.join(".claude").is_dir(), "{:?}", names(&root));
    // Attack in the window: the names are taken, but by empty placeholders.
    let second = sb
        .run(
            &spec,
            SandboxCommand::shell(
                "mkdir .claude/agents; echo '{}' > .claude/settings.json; rmdir .claude; \
                 mkdir .vscode/x; git init -q . ; echo done",
            ),
        )
        .await
        .unwrap();
    assert!(second.outcome.stdout.contains("done"), "{second:?}");
    for path in [
        ".claude/agents",
        ".claude/settings.json",
        ".vscode/x",
        ".git/config",
    ] {
        assert!(!root.join(path).exists(), "{path} was created: {second:?}");
    }
    // Both runs' placeholders go after the delay.
    let mut left = names(&root);
    for _ in 0..100 {
        if left == before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        left = names(&root);
    }
    assert_eq!(left, before);
}

/// A server that shuts down (its runtime dropped) removes the placeholders
/// still lingering, however long the delay.
#[test]
fn a_runtime_that_ends_removes_the_lingering_placeholders() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap().join("work");
    std::fs::create_dir(&root).unwrap();
    let before = names(&root);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let sb = lingering(&dir.path().join("state"), Duration::from_secs(3600));
    let outcome = runtime
        .block_on(sb.run(&SandboxSpec::for_root(&root), SandboxCommand::shell("true")))
        .unwrap();
    assert_eq!(outcome.outcome.exit_code, 0, "{outcome:?}");
    assert!(root.join(".claude").is_dir(), "{:?}", names(&root));
    drop(runtime);
    assert_eq!(names(&root), before);
}

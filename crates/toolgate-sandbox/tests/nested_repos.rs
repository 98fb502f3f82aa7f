//! Attacks on repositories inside a root, below its top: a nested checkout,
//! one in a gitignored directory, a submodule-style `.git` file and the git
//! dir it points to, and a bare repository. A command that could write any
//! of their config or hooks would run code on the host at the user's next
//! `git status` there.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;
use toolgate_sandbox::{PlanError, SandboxCommand, SandboxError, SandboxSpec};

use common::{git, sandbox};

/// Every file under `dir` with its bytes (directories with none).
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                stack.push(path.clone());
                out.push((path, Vec::new()));
            } else {
                out.push((path.clone(), std::fs::read(&path).unwrap_or_default()));
            }
        }
    }
    out.sort();
    out
}

/// A root (itself a repository) holding four more of every kind.
struct Nest {
    _dir: tempfile::TempDir,
    root: PathBuf,
    state: PathBuf,
}

impl Nest {
    fn new() -> Nest {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let root = base.join("root");
        std::fs::create_dir(&root).unwrap();
        git(&root, &["init", "-q"]);
        std::fs::write(root.join(".gitignore"), "node_modules/\n").unwrap();
        for nested in ["vendor/lib", "node_modules/dep"] {
            std::fs::create_dir_all(root.join(nested)).unwrap();
            git(&root.join(nested), &["init", "-q"]);
        }
        // Hooks removed: an absent hooks directory must not be creatable.
        std::fs::remove_dir_all(root.join("node_modules/dep/.git/hooks")).unwrap();
        // A checkout whose `.git` is a file pointing into the root.
        std::fs::create_dir_all(root.join("store")).unwrap();
        std::fs::create_dir_all(root.join("checkout")).unwrap();
        git(
            &root.join("checkout"),
            &["init", "-q", "--separate-git-dir", "../store/checkout.git"],
        );
        git(&root.join("store"), &["init", "-q", "--bare", "mirror.git"]);
        Nest {
            _dir: dir,
            root,
            state: base.join("state"),
        }
    }
}

#[tokio::test]
async fn nested_repositories_keep_their_config_and_hooks() {
    let nest = Nest::new();
    let sb = sandbox(&nest.state);
    let before = snapshot(&nest.root);
    let attacks = [
        "printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' >> vendor/lib/.git/config",
        "echo evil > vendor/lib/.git/hooks/pre-commit",
        "rm -rf vendor/lib/.git/hooks",
        "mv vendor/lib/.git vendor/lib/.git-old",
        "mv vendor/lib vendor/lib2",
        "echo x > vendor/lib/.git/config.worktree",
        "printf '[core]\\n\\tfsmonitor = evil\\n' >> node_modules/dep/.git/config",
        "mkdir -p node_modules/dep/.git/hooks && echo evil > node_modules/dep/.git/hooks/post-checkout",
        "printf '[core]\\n\\tfsmonitor = evil\\n' >> store/checkout.git/config",
        "echo evil > store/checkout.git/hooks/pre-commit",
        "echo 'gitdir: ../evil' > checkout/.git",
        "rm checkout/.git",
        "printf '[core]\\n\\tfsmonitor = evil\\n' >> store/mirror.git/config",
        "echo evil > store/mirror.git/hooks/pre-receive",
    ];
    for script in attacks {
        let o = sb
            .run(
                &SandboxSpec::for_root(&nest.root),
                SandboxCommand::shell(script),
            )
            .await
            .unwrap();
        assert_ne!(o.outcome.exit_code, 0, "`{script}` succeeded: {o:?}");
    }
    assert_eq!(snapshot(&nest.root), before, "the host's tree changed");
    // Host git in each of them runs nothing of the command's.
    for dir in ["vendor/lib", "node_modules/dep", "checkout"] {
        git(&nest.root.join(dir), &["status", "--porcelain"]);
    }
    assert!(!Path::new("/tmp/pwned").exists());
}

#[tokio::test]
async fn a_commondir_made_in_a_nested_repository_is_removed_after_the_run() {
    let nest = Nest::new();
    let sb = sandbox(&nest.state);
    let o = sb
        .run(
            &SandboxSpec::for_root(&nest.root),
            SandboxCommand::shell(
                "mkdir evil && cp -a vendor/lib/.git/. evil/ && echo ../../../evil > vendor/lib/.git/commondir",
            ),
        )
        .await
        .unwrap();
    assert_eq!(o.outcome.exit_code, 0, "{o:?}");
    assert!(!nest.root.join("vendor/lib/.git/commondir").exists());
    assert!(
        o.warnings
            .iter()
            .any(|w| w.contains("vendor/lib/.git/commondir")),
        "{:?}",
        o.warnings
    );
}

#[tokio::test]
async fn git_still_works_inside_nested_repositories() {
    let nest = Nest::new();
    let sb = sandbox(&nest.state);
    let o = sb
        .run(
            &SandboxSpec::for_root(&nest.root),
            SandboxCommand::shell(
                "cd vendor/lib && echo a > a && git add a && git -c user.name=t -c user.email=t@t commit -qm in && git log --oneline | wc -l",
            ),
        )
        .await
        .unwrap();
    assert_eq!(o.outcome.exit_code, 0, "{o:?}");
    assert_eq!(o.outcome.stdout.trim(), "1");
}

#[tokio::test]
async fn a_nested_git_symlink_refuses_the_run() {
    let nest = Nest::new();
    std::fs::create_dir_all(nest.root.join("linked")).unwrap();
    std::os::unix::fs::symlink("../vendor/lib/.git", nest.root.join("linked/.git")).unwrap();
    let sb = sandbox(&nest.state);
    let err = sb
        .run(
            &SandboxSpec::for_root(&nest.root),
            SandboxCommand::shell("true"),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, SandboxError::Plan(PlanError::UnprotectableSymlink { path }) if path.ends_with("linked/.git")),
        "{err}"
    );
}

//! Attacks through the file tools' jail on repositories below the top of a
//! root and on agent configuration: what the sandbox keeps read-only for
//! commands, the jail refuses to write, move or remove.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

use toolgate_sandbox::{Jail, JailError};

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

#[test]
fn nested_git_dirs_and_agent_configs_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir_all(root.join("vendor/lib")).unwrap();
    git(&root.join("vendor/lib"), &["init", "-q"]);
    std::fs::create_dir_all(root.join("store")).unwrap();
    git(&root.join("store"), &["init", "-q", "--bare", "mirror.git"]);
    std::fs::create_dir_all(root.join("checkout")).unwrap();
    git(
        &root.join("checkout"),
        &["init", "-q", "--separate-git-dir", "../store/checkout.git"],
    );
    let before_config = std::fs::read(root.join("store/mirror.git/config")).unwrap();
    let jail = Jail::open(&root).unwrap();
    let evil = b"[core]\n\tfsmonitor = touch /tmp/pwned\n";
    for path in [
        "vendor/lib/.git/config",
        "vendor/lib/.git/hooks/pre-commit",
        "store/mirror.git/config",
        "store/mirror.git/hooks/post-update",
        "store/checkout.git/config",
        "store/checkout.git/hooks/pre-commit",
        "store/checkout.git/commondir",
        "checkout/.git",
        ".gemini/settings.json",
        ".kiro/hooks/on-save.kiro.hook",
        "opencode.json",
        ".aider.conf.yml",
    ] {
        let err = jail.write(Path::new(path), evil).unwrap_err();
        assert!(matches!(err, JailError::Protected { .. }), "{path}: {err}");
    }
    let err = jail
        .rename(Path::new("store/mirror.git/config"), Path::new("moved"))
        .unwrap_err();
    assert!(matches!(err, JailError::Protected { .. }), "{err}");
    let err = jail
        .remove(Path::new("store/mirror.git/hooks"))
        .unwrap_err();
    assert!(matches!(err, JailError::Protected { .. }), "{err}");
    assert_eq!(
        std::fs::read(root.join("store/mirror.git/config")).unwrap(),
        before_config
    );
    assert!(!root.join(".gemini").exists());
    // Ordinary files beside them stay writable.
    jail.write(Path::new("store/mirror.git/description"), b"mirror\n")
        .unwrap();
    jail.write(Path::new("docs/config"), b"not git\n").unwrap();
}

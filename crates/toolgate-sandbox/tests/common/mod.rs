//! Helpers the sandbox's integration tests share.

#![allow(dead_code, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use toolgate_sandbox::{Sandbox, SandboxCommand, SandboxConfig, SandboxOutcome, SandboxSpec};

/// The sandbox with this crate's stage 2 and its state in `state`.
pub fn sandbox(state: &Path) -> Sandbox {
    Sandbox::new(config(state)).unwrap()
}

/// Runs `script` with sh in `sandbox`, `root` its one writable root, within
/// a minute; it must start.
pub async fn run_shell(sandbox: &Sandbox, root: &Path, script: &str) -> SandboxOutcome {
    let command = SandboxCommand::shell(script).timeout(std::time::Duration::from_secs(60));
    sandbox
        .run(&SandboxSpec::for_root(root), command)
        .await
        .unwrap()
}

/// A `core.fsmonitor` that would run a command of the attacker's on the
/// host's next `git status`.
pub const FSMONITOR: &str = "[core]\n\tfsmonitor = touch /tmp/pwned-by-toolgate-test\n";

/// The command in `sandbox` appends `core.fsmonitor` to `config` (relative
/// to `root`); it must be refused as a read-only file and the host's file
/// stay as it was.
pub async fn fsmonitor_refused(sandbox: &Sandbox, root: &Path, config: &str) {
    let path = root.join(config);
    let before = std::fs::read(&path).unwrap();
    let outcome = run_shell(sandbox, root, &format!("printf '{FSMONITOR}' >> {config}")).await;
    assert_ne!(
        outcome.outcome.exit_code, 0,
        "the command wrote {config}: {outcome:?}"
    );
    assert!(
        outcome.outcome.stderr.contains("Read-only file system"),
        "{config}: {outcome:?}"
    );
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "{config} changed on the host"
    );
}

/// The configuration `sandbox` uses, to adjust.
pub fn config(state: &Path) -> SandboxConfig {
    let stage2 = PathBuf::from(env!("CARGO_BIN_EXE_toolgate-sandbox-stage2"));
    SandboxConfig::new(stage2, state.to_owned())
}

/// Host git in `dir`, with no user or system configuration; it must succeed.
/// Returns its output.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?} in {}: {out:?}",
        dir.display()
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The names in `dir`, sorted.
pub fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

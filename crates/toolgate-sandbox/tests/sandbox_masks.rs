//! Attacks on the write-deny masks: renaming what holds them, redirecting
//! git, racing concurrent runs, and toolgate's own files inside a root.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use pretty_assertions::assert_eq;
use toolgate_sandbox::{
    PlanError, Sandbox, SandboxCommand, SandboxConfig, SandboxError, SandboxOutcome, SandboxSpec,
};

fn sandbox(state: &Path) -> Sandbox {
    let stage2 = PathBuf::from(env!("CARGO_BIN_EXE_toolgate-sandbox-stage2"));
    Sandbox::new(SandboxConfig::new(stage2, state.to_owned())).unwrap()
}

fn repo() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap().join("repo");
    std::fs::create_dir(&root).unwrap();
    git(&root, &["init", "-q"]);
    git(
        &root,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "init",
        ],
    );
    (dir, root)
}

fn git(dir: &Path, args: &[&str]) -> std::process::Output {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    out
}

async fn sh(sb: &Sandbox, root: &Path, script: &str) -> SandboxOutcome {
    sb.run(&SandboxSpec::for_root(root), SandboxCommand::shell(script))
        .await
        .unwrap()
}

#[tokio::test]
async fn the_git_dir_cannot_be_renamed_or_replaced() {
    let (dir, root) = repo();
    let sb = sandbox(&dir.path().join("state"));
    let config = std::fs::read(root.join(".git/config")).unwrap();
    for script in [
        "mv .git .git-old",
        "rm -rf .git",
        "mv .git/hooks .git/hooks-old",
        "mv .git/config .git/config-old",
    ] {
        let o = sh(&sb, &root, script).await;
        assert_ne!(o.outcome.exit_code, 0, "`{script}` succeeded");
    }
    assert_eq!(std::fs::read(root.join(".git/config")).unwrap(), config);
    assert!(root.join(".git/hooks").is_dir());
    assert!(!root.join(".git-old").exists());
}

#[tokio::test]
async fn a_commondir_the_command_creates_is_removed_after_the_run() {
    let (dir, root) = repo();
    let sb = sandbox(&dir.path().join("state"));
    let o = sh(
        &sb,
        &root,
        "mkdir evil && cp -a .git/. evil/ && echo ../evil > .git/commondir",
    )
    .await;
    assert_eq!(o.outcome.exit_code, 0, "{o:?}");
    assert!(
        !root.join(".git/commondir").exists(),
        "commondir left behind"
    );
    assert_eq!(o.warnings.len(), 1, "{o:?}");
    assert!(o.warnings[0].contains(".git/commondir"), "{:?}", o.warnings);
    // git on the host still uses the real repository.
    let out = git(&root, &["rev-parse", "--git-common-dir"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), ".git");
}

#[tokio::test]
async fn a_worktree_pointer_cannot_be_rewritten() {
    let (dir, main) = repo();
    let worktree = main.parent().unwrap().join("feature");
    git(
        &main,
        &["worktree", "add", "-q", worktree.to_str().unwrap()],
    );
    let pointer = std::fs::read(worktree.join(".git")).unwrap();
    let sb = sandbox(&dir.path().join("state"));
    let o = sh(&sb, &worktree, "mkdir evil && echo 'gitdir: ./evil' > .git").await;
    assert_ne!(o.outcome.exit_code, 0);
    let o = sh(&sb, &worktree, "rm -f .git").await;
    assert_ne!(o.outcome.exit_code, 0);
    assert_eq!(std::fs::read(worktree.join(".git")).unwrap(), pointer);
}

#[tokio::test]
async fn a_symlinked_protected_name_refuses_the_run() {
    let (dir, root) = repo();
    std::fs::remove_dir_all(root.join(".git/hooks")).unwrap();
    std::fs::create_dir(root.join("githooks")).unwrap();
    std::os::unix::fs::symlink("../githooks", root.join(".git/hooks")).unwrap();
    let sb = sandbox(&dir.path().join("state"));
    let err = sb
        .run(&SandboxSpec::for_root(&root), SandboxCommand::shell("true"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, SandboxError::Plan(PlanError::UnprotectableSymlink { path }) if path.ends_with(".git/hooks")),
        "{err}"
    );
}

#[tokio::test]
async fn concurrent_runs_keep_their_masks_and_the_last_one_cleans_up() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap().join("work");
    std::fs::create_dir(&root).unwrap();
    let sb = sandbox(&dir.path().join("state"));
    // The long run keeps trying to create protected names while short runs
    // in the same root start and end: their clean-up must not take the
    // long run's masks away.
    let attack = sh(
        &sb,
        &root,
        "for i in $(seq 30); do echo evil > .mcp.json 2>/dev/null && echo wrote; mkdir -p .git/hooks 2>/dev/null && echo made; sleep 0.1; done",
    );
    let short_runs = async {
        for _ in 0..3 {
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            let o = sh(&sb, &root, "true").await;
            assert_eq!(o.outcome.exit_code, 0, "{o:?}");
        }
    };
    let (attack, ()) = tokio::join!(attack, short_runs);
    assert_eq!(attack.outcome.exit_code, 0);
    assert_eq!(attack.outcome.stdout, "", "{attack:?}");
    let left: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, Vec::<String>::new(), "placeholders left on the host");
}

#[tokio::test]
async fn toolgate_state_inside_a_root_is_read_only() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let state = root.join(".local/state/toolgate");
    let sb = sandbox(&state);
    let o = sh(&sb, &root, "true").await;
    assert_eq!(o.outcome.exit_code, 0, "{o:?}");
    for script in [
        "echo x > .local/state/toolgate/empty",
        "touch .local/state/toolgate/empty-dir/x",
        "echo '{}' > .local/state/toolgate/probe.json",
        "rm -rf .local/state/toolgate",
        "mv .local .local-old",
    ] {
        let o = sh(&sb, &root, script).await;
        assert_ne!(o.outcome.exit_code, 0, "`{script}` succeeded");
    }
    assert_eq!(std::fs::read(state.join("empty")).unwrap(), b"");
}

#[tokio::test]
async fn environment_values_cannot_smuggle_variables() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let sb = sandbox(&root.join("state"));
    for (name, value) in [("A", "x\0LD_PRELOAD=/evil.so"), ("B=C", "x"), ("", "x")] {
        let err = sb
            .run(
                &SandboxSpec::for_root(&root),
                SandboxCommand::new(["env"]).set_env(name, value),
            )
            .await
            .unwrap_err();
        assert!(err.to_string().contains("names must be non-empty"), "{err}");
    }
}

#[tokio::test]
async fn files_only_root_may_read_stay_unreadable() {
    use toolgate_sandbox::HostView;
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let sb = sandbox(&root.join("state"));
    let private = toolgate_sandbox::RealHost.private_system_paths();
    assert!(
        !private.is_empty(),
        "CI runs as root; /etc/shadow at least is private"
    );
    for path in private {
        let script = if path.is_dir() {
            format!("test -z \"$(ls -A '{}')\"", path.display())
        } else {
            format!("test ! -s '{}'", path.display())
        };
        let o = sh(&sb, &root, &script).await;
        assert_eq!(
            o.outcome.exit_code,
            0,
            "{} is readable inside: {o:?}",
            path.display()
        );
    }
}

#[tokio::test]
async fn the_root_cannot_be_turned_into_a_bare_repository() {
    const BARE: &str = "mkdir -p objects refs && printf '[core]\\n\\tfsmonitor = evil\\n' > config && echo 'ref: refs/heads/master' > HEAD";
    // Without a repository of its own, HEAD is blocked.
    let dir = tempfile::tempdir().unwrap();
    let fresh = std::fs::canonicalize(dir.path()).unwrap().join("fresh");
    std::fs::create_dir(&fresh).unwrap();
    let sb = sandbox(&dir.path().join("state"));
    let o = sh(&sb, &fresh, BARE).await;
    assert_ne!(o.outcome.exit_code, 0, "{o:?}");
    assert!(
        !fresh.join("HEAD").exists(),
        "HEAD placeholder or file left behind"
    );
    // With one, git finds `.git` before it ever looks for a bare
    // repository in the root: HEAD is an ordinary name there.
    let (dir, root) = repo();
    let sb = sandbox(&dir.path().join("state"));
    let o = sh(&sb, &root, BARE).await;
    assert_eq!(o.outcome.exit_code, 0, "{o:?}");
    let out = git(&root, &["rev-parse", "--git-dir"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), ".git");
    let fsmonitor = Command::new("git")
        .args(["config", "core.fsmonitor"])
        .current_dir(&root)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert_eq!(fsmonitor.status.code(), Some(1), "{fsmonitor:?}");
}

#[tokio::test]
async fn linked_worktrees_of_a_repository_cannot_be_redirected() {
    let (dir, main) = repo();
    let worktree = main.parent().unwrap().join("wt");
    git(
        &main,
        &["worktree", "add", "-q", worktree.to_str().unwrap()],
    );
    let sb = sandbox(&dir.path().join("state"));
    let commondir = main.join(".git/worktrees/wt/commondir");
    let before = std::fs::read(&commondir).unwrap();
    let o = sh(&sb, &main, "echo /tmp/evil > .git/worktrees/wt/commondir").await;
    assert_ne!(o.outcome.exit_code, 0);
    assert_eq!(std::fs::read(&commondir).unwrap(), before);
}

#[tokio::test]
async fn a_repository_with_a_commondir_is_refused() {
    let (dir, root) = repo();
    std::fs::write(root.join(".git/commondir"), "../elsewhere\n").unwrap();
    let sb = sandbox(&dir.path().join("state"));
    let err = sb
        .run(&SandboxSpec::for_root(&root), SandboxCommand::shell("true"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains(".git/commondir exists"), "{err}");
}

#[tokio::test]
async fn nested_roots_share_placeholders_safely() {
    let dir = tempfile::tempdir().unwrap();
    let outer = std::fs::canonicalize(dir.path()).unwrap().join("outer");
    let inner = outer.join("sub");
    std::fs::create_dir_all(&inner).unwrap();
    let sb = sandbox(&dir.path().join("state"));
    // A run over both roots creates the inner placeholders; an inner run
    // starts while it lives and keeps trying after it has ended.
    let both = async {
        let spec = SandboxSpec::for_root(&outer).writable_root(&inner);
        sb.run(&spec, SandboxCommand::shell("sleep 1"))
            .await
            .unwrap()
    };
    let attack = async {
        tokio::time::sleep(std::time::Duration::from_millis(400)).await;
        sh(
            &sb,
            &inner,
            "for i in $(seq 25); do echo evil > .mcp.json 2>/dev/null && echo wrote; sleep 0.1; done",
        )
        .await
    };
    let (attack, both) = tokio::join!(attack, both);
    assert_eq!(both.outcome.exit_code, 0, "{both:?}");
    assert_eq!(attack.outcome.stdout, "", "{attack:?}");
    assert!(!inner.join(".mcp.json").exists());
}

#[tokio::test]
async fn roots_holding_home_or_inside_the_state_dir_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir_all(base.join("users/ann")).unwrap();
    let sb = sandbox(&base.join("state")).with_host_env(
        [(
            "HOME".to_owned(),
            base.join("users/ann").display().to_string(),
        )]
        .into(),
    );
    let err = sb
        .run(
            &SandboxSpec::for_root(base.join("users")),
            SandboxCommand::shell("true"),
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("contains the home directory"),
        "{err}"
    );
    std::fs::create_dir_all(base.join("state/inner")).unwrap();
    let err = sb
        .run(
            &SandboxSpec::for_root(base.join("state/inner")),
            SandboxCommand::shell("true"),
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("inside toolgate's state directory"),
        "{err}"
    );
}

/// A file in /etc removed when dropped, also when the test fails.
struct EtcFile(PathBuf);

impl Drop for EtcFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[tokio::test]
async fn a_private_file_created_in_etc_after_the_first_command_is_masked() {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap().join("work");
    std::fs::create_dir(&root).unwrap();
    // One long-lived sandbox, as in the MCP server.
    let sb = sandbox(&dir.path().join("state"));
    let first = sh(&sb, &root, "true").await;
    assert_eq!(first.outcome.exit_code, 0, "{first:?}");
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let secret = EtcFile(PathBuf::from(format!(
        "/etc/toolgate-test-{}-{nanos}.key",
        std::process::id()
    )));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&secret.0)
        .unwrap();
    std::io::Write::write_all(&mut file, b"private key material\n").unwrap();
    drop(file);
    std::fs::set_permissions(&secret.0, std::fs::Permissions::from_mode(0o600)).unwrap();
    let o = sh(&sb, &root, &format!("cat '{}'", secret.0.display())).await;
    assert!(
        !o.outcome.stdout.contains("private key material"),
        "a private /etc file made after the first command was readable: {o:?}"
    );
}

/// Stage 2 mounts the masks after bubblewrap has entered the working
/// directory. Attack: a command whose cwd is a protected directory (or lies
/// in one) writes through that cwd, which was taken before the masks and
/// so still reaches the host's directory below them.
#[tokio::test]
async fn a_working_directory_inside_a_protected_directory_is_masked_too() {
    let (dir, root) = repo();
    let sb = sandbox(&dir.path().join("state"));
    std::fs::create_dir_all(root.join(".vscode/sub")).unwrap();
    std::fs::write(root.join(".vscode/tasks.json"), b"{}").unwrap();
    for cwd in [
        root.join(".vscode"),
        root.join(".vscode/sub"),
        root.join(".git/hooks"),
    ] {
        let spec = SandboxSpec::for_root(&root).cwd(&cwd);
        let script = "echo planted > tasks.json; echo planted > post-checkout; pwd";
        let o = sb
            .run(&spec, SandboxCommand::shell(script))
            .await
            .unwrap()
            .outcome;
        assert_eq!(o.stdout.trim(), cwd.to_str().unwrap(), "{o:?}");
        assert!(
            o.stderr.contains("Read-only file system"),
            "{}: {o:?}",
            cwd.display()
        );
    }
    assert_eq!(
        std::fs::read(root.join(".vscode/tasks.json")).unwrap(),
        b"{}"
    );
    assert!(!root.join(".vscode/sub/tasks.json").exists());
    assert!(!root.join(".vscode/post-checkout").exists());
    assert!(!root.join(".git/hooks/post-checkout").exists());
}

/// The masks are stage 2's, which keeps two capabilities of the sandbox's
/// user namespace to mount them: none of them reaches the command.
#[tokio::test]
async fn the_command_holds_no_capability_after_stage_2_mounted_the_masks() {
    let (dir, root) = repo();
    let sb = sandbox(&dir.path().join("state"));
    let o = sh(
        &sb,
        &root,
        "grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status",
    )
    .await;
    let lines: Vec<&str> = o.outcome.stdout.lines().collect();
    assert_eq!(lines.len(), 5, "{o:?}");
    for line in lines {
        assert!(line.ends_with("0000000000000000"), "{line}");
    }
    // Nor can it undo a mask: no umount, no mount over it.
    let o = sh(
        &sb,
        &root,
        "umount .git/config || umount -l .git/hooks || mount --bind /tmp .git/hooks; echo x > .git/config",
    )
    .await;
    assert_ne!(o.outcome.exit_code, 0, "{o:?}");
    assert!(
        !git(&root, &["config", "--local", "--list"])
            .stdout
            .is_empty()
    );
    assert!(
        !std::fs::read_to_string(root.join(".git/config"))
            .unwrap()
            .starts_with('x')
    );
}

/// A long-lived process keeps the scan of /etc and /opt for private files
/// while nothing there changes (inotify). Attack: once that cache is in
/// place, the host gains private files the cache never saw: one made
/// private by a chmod, one in a new subdirectory, one whose mode changes
/// through a hard link outside /etc. Every one must be masked at the next
/// command, and what was masked stays masked.
#[tokio::test]
async fn private_system_files_follow_the_host_while_the_scan_is_cached() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap().join("work");
    std::fs::create_dir(&root).unwrap();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let tag = format!("toolgate-cache-{}-{nanos}", std::process::id());
    let readable = |path: &Path| {
        std::fs::write(path, b"secret material\n").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
    };
    // World-readable at first: the cached scan does not mask them.
    let chmodded = EtcFile(PathBuf::from(format!("/etc/{tag}.chmod")));
    readable(&chmodded.0);
    let linked = EtcFile(PathBuf::from(format!("/etc/{tag}.linked")));
    readable(&linked.0);
    // Outside /etc, on its file system.
    let other_link = EtcFile(PathBuf::from(format!("/{tag}.link")));
    std::fs::hard_link(&linked.0, &other_link.0).unwrap();
    let subdir = PathBuf::from(format!("/etc/{tag}.d"));
    let _subdir_guard = EtcDir(subdir.clone());
    let sb = sandbox(&dir.path().join("state"));
    // The first scan is not watched, the second is, the third uses it.
    for _ in 0..3 {
        let o = sh(&sb, &root, &format!("cat {}", chmodded.0.display())).await;
        assert!(o.outcome.stdout.contains("secret material"), "{o:?}");
    }
    // Alone, so no other event sets off a fresh scan that would find it.
    std::fs::set_permissions(&other_link.0, std::fs::Permissions::from_mode(0o600)).unwrap();
    let o = sh(&sb, &root, &format!("cat {}", linked.0.display())).await;
    assert!(
        !o.outcome.stdout.contains("secret material"),
        "a file made private through a hard link outside /etc was readable: {o:?}"
    );
    std::fs::set_permissions(&chmodded.0, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::create_dir(&subdir).unwrap();
    let nested = subdir.join("key");
    std::fs::write(&nested, b"secret material\n").unwrap();
    std::fs::set_permissions(&nested, std::fs::Permissions::from_mode(0o600)).unwrap();
    for _ in 0..2 {
        for path in [&chmodded.0, &linked.0, &nested] {
            let o = sh(&sb, &root, &format!("cat {}", path.display())).await;
            assert!(
                !o.outcome.stdout.contains("secret material"),
                "{} was readable after it became private: {o:?}",
                path.display()
            );
        }
    }
}

struct EtcDir(PathBuf);

impl Drop for EtcDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Stage 2 mounts the plan's masks a moment after the plan was made. A
/// read-deny target deleted in between (a private /etc file removed by the
/// host) leaves nothing to read: that mask is skipped and the command runs.
/// Any other mask that cannot be mounted (a placeholder gone) ends the run
/// before the command exists.
#[test]
fn a_read_deny_target_deleted_after_the_plan_is_skipped_and_a_missing_placeholder_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap().join("work");
    std::fs::create_dir(&root).unwrap();
    let secret = root.join("secret.txt");
    std::fs::write(&secret, "secret\n").unwrap();
    // Placeholders (where stage 2 cannot guard creations): the run below
    // has no lifeline, which the guard needs.
    let stage2 = PathBuf::from(env!("CARGO_BIN_EXE_toolgate-sandbox-stage2"));
    let sb =
        Sandbox::new(SandboxConfig::new(stage2, dir.path().join("state")).placeholders()).unwrap();
    let spec = SandboxSpec::for_root(&root).read_deny(&secret);
    let plan = sb
        .plan(&spec, &["sh".into(), "-c".into(), "echo ran".into()])
        .unwrap();
    // What `run` does before bubblewrap: the placeholders the plan needs.
    for point in &plan.created_mount_points {
        if plan.placeholder_files.contains(point) {
            std::fs::write(point, b"").unwrap();
        } else {
            std::fs::create_dir(point).unwrap();
        }
    }
    let mut argv: Vec<std::ffi::OsString> = plan.argv.clone();
    // No lifeline here; the environment comes from /dev/null.
    if let Some(i) = argv.iter().position(|a| a == "--lifeline-fd") {
        argv.drain(i..i + 2);
    }
    let run = |argv: &[std::ffi::OsString]| {
        Command::new("sh")
            .arg("-c")
            .arg(r#"exec "$@" 3</dev/null"#)
            .arg("sh")
            .args(argv)
            .current_dir(&root)
            .output()
            .unwrap()
    };
    let hides = argv
        .windows(3)
        .any(|w| w[0] == "--hide" && w[2] == secret.as_os_str());
    if !hides {
        // Unprivileged, bubblewrap mounts the masks and fails on any.
        assert!(!rustix::process::geteuid().is_root(), "{argv:?}");
        return;
    }
    std::fs::remove_file(&secret).unwrap();
    let o = run(&argv);
    assert_eq!(
        (o.status.code(), String::from_utf8_lossy(&o.stdout).trim()),
        (Some(0), "ran"),
        "{o:?}"
    );
    let placeholder = root.join(".claude");
    assert!(plan.created_mount_points.contains(&placeholder));
    std::fs::remove_dir(&placeholder).unwrap();
    let o = run(&argv);
    assert_eq!(o.status.code(), Some(125), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("cannot mask"),
        "{o:?}"
    );
    assert!(!String::from_utf8_lossy(&o.stdout).contains("ran"), "{o:?}");
}

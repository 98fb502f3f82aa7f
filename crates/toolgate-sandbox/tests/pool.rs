//! Sandboxes started ahead of need (`SandboxConfig::pool`): a pooled
//! sandbox runs one command, and never one for which it went stale between
//! its start and the hand-out. Each attack changes the host after the pool
//! is ready and before the command is handed out: a protected name or a
//! private file appears, a private file is replaced (which detaches its
//! mask), the root is replaced; the command must see what a fresh sandbox
//! shows.
//!
//! Whether a command ran in the pooled sandbox is told by the start time of
//! the sandbox's pid 1 against a moment taken after the pool was ready
//! (clock ticks since boot, 100 ms apart): not a measurement of speed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use pretty_assertions::assert_eq;
use toolgate_sandbox::runner::ExecOutcome;
use toolgate_sandbox::{Sandbox, SandboxCommand, SandboxSpec};

use common::{config, git};

fn pooled_sandbox(state: &Path) -> Sandbox {
    Sandbox::new(config(state).pool()).unwrap()
}

fn root_in(dir: &tempfile::TempDir) -> PathBuf {
    let root = std::fs::canonicalize(dir.path()).unwrap().join("root");
    std::fs::create_dir(&root).unwrap();
    root
}

/// Clock ticks since boot now, as /proc counts a process's start.
fn ticks_now() -> u64 {
    let uptime = std::fs::read_to_string("/proc/uptime").unwrap();
    let seconds: f64 = uptime.split_whitespace().next().unwrap().parse().unwrap();
    // SAFETY: sysconf reads a constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (seconds * hz) as u64
}

/// Waits until the pool holds a ready sandbox for `spec`, then lets a
/// moment pass so that a sandbox started from now on is told apart.
async fn warm(sb: &Sandbox, spec: &SandboxSpec) -> u64 {
    assert!(sb.warm(spec).await.unwrap(), "nothing was pooled");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let now = ticks_now();
    tokio::time::sleep(Duration::from_millis(30)).await;
    now
}

/// Runs `script` with sh; returns its outcome and whether the sandbox was
/// started before `moment` (pooled) or after it (fresh).
async fn run(sb: &Sandbox, spec: &SandboxSpec, script: &str, moment: u64) -> (ExecOutcome, bool) {
    let script = format!("cut -d' ' -f22 /proc/1/stat >&2; {script}");
    let o = sb
        .run(
            spec,
            SandboxCommand::new(["sh", "-c", &script]).timeout(Duration::from_secs(60)),
        )
        .await
        .unwrap()
        .outcome;
    let (first, rest) = o.stderr.split_once('\n').expect("pid 1's start time");
    let started: u64 = first.trim().parse().expect("pid 1's start time");
    let o = ExecOutcome {
        stderr: rest.to_owned(),
        ..o
    };
    (o, started < moment)
}

#[tokio::test]
async fn a_pooled_sandbox_runs_one_command_and_is_used_when_nothing_changed() {
    let dir = tempfile::tempdir().unwrap();
    let root = root_in(&dir);
    git(&root, &["init", "-q"]);
    let sb = pooled_sandbox(&dir.path().join("state"));
    let spec = SandboxSpec::for_root(&root);
    let moment = warm(&sb, &spec).await;
    let (o, pooled) = run(&sb, &spec, "echo ok", moment).await;
    assert_eq!((o.exit_code, o.stdout.as_str()), (0, "ok\n"), "{o:?}");
    assert!(pooled, "the pooled sandbox was not used: {o:?}");
    // The next ones one after the other, each refilling the pool.
    for _ in 0..8 {
        let (o, _) = run(&sb, &spec, "echo ok", 0).await;
        assert_eq!((o.exit_code, o.stdout.as_str()), (0, "ok\n"), "{o:?}");
    }
    // And at once, all alive together (each waits for the others): every
    // command in a sandbox of its own, by its pid namespace.
    let together = 6;
    let script = format!(
        "mktemp -p . started-XXXXXX >/dev/null; while [ $(ls | grep -c started-) -lt {together} ]; do sleep 0.02; done; readlink /proc/self/ns/pid"
    );
    let mut runs = tokio::task::JoinSet::new();
    for _ in 0..together {
        let (sb, spec, script) = (sb.clone(), spec.clone(), script.clone());
        runs.spawn(async move { run(&sb, &spec, &script, 0).await });
    }
    let mut namespaces = std::collections::BTreeSet::new();
    while let Some(done) = runs.join_next().await {
        let (o, _) = done.unwrap();
        assert_eq!(o.exit_code, 0, "{o:?}");
        namespaces.insert(o.stdout);
    }
    assert_eq!(namespaces.len(), together, "{namespaces:?}");
    // What the pooled sandbox is handed decides: the command, its stdin.
    let moment = warm(&sb, &spec).await;
    let o = sb
        .run(
            &spec,
            SandboxCommand::new(["sh", "-c", "cat; echo \"$X\"; cut -d' ' -f22 /proc/1/stat"])
                .stdin("in\n")
                .set_env("X", "x"),
        )
        .await
        .unwrap()
        .outcome;
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(lines[..2], ["in", "x"], "{o:?}");
    assert!(
        lines[2].parse::<u64>().unwrap() < moment,
        "not pooled: {o:?}"
    );
    // Without stdin a command reads /dev/null, as in a fresh sandbox (a pipe
    // would make ripgrep search its stdin).
    let moment = warm(&sb, &spec).await;
    let (o, pooled) = run(&sb, &spec, "readlink /proc/self/fd/0", moment).await;
    assert_eq!((o.stdout.as_str(), pooled), ("/dev/null\n", true), "{o:?}");
}

/// Commands back to back: one that comes while its pooled sandbox is still
/// starting has the next one's sandbox started at once, while it runs (the
/// next command would otherwise wait for the whole setup); at an agent's
/// pace, where the pooled sandbox was ready, the next one is started only
/// after the command, so that the two do not share the processors.
#[tokio::test]
async fn a_command_that_catches_up_with_the_pool_has_the_next_sandbox_started_while_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let root = root_in(&dir);
    let sb = pooled_sandbox(&dir.path().join("state"));
    let spec = SandboxSpec::for_root(&root);
    // Planned twice, so that the next plans are made from what toolgate
    // keeps (a plan is then made well within the time a sandbox takes to
    // start, even in a debug build).
    for _ in 0..2 {
        let (o, _) = run(&sb, &spec, "true", 0).await;
        assert_eq!(o.exit_code, 0, "{o:?}");
    }
    warm(&sb, &spec).await;
    // A command in the ready sandbox, and after it one for the next starts
    // (in the background: made sure of here, it returns once it is forked).
    let (o, pooled) = run(&sb, &spec, "true", u64::MAX).await;
    assert_eq!((o.exit_code, pooled), (0, true), "{o:?}");
    assert!(sb.prestart(&spec).unwrap());
    // At once, while that one is still starting; a moment is taken well
    // into the command and well before its end.
    let ((o, _), moment) = tokio::join!(run(&sb, &spec, "sleep 1", 0), moment_after(600));
    assert_eq!(o.exit_code, 0, "{o:?}");
    let (o, before) = run(&sb, &spec, "true", moment).await;
    assert_eq!(o.exit_code, 0, "{o:?}");
    assert!(
        before,
        "the next sandbox was started only after the command"
    );
    // At an agent's pace: the pooled sandbox is ready when the command comes.
    warm(&sb, &spec).await;
    let ((o, pooled), moment) =
        tokio::join!(run(&sb, &spec, "sleep 1", u64::MAX), moment_after(600));
    assert_eq!((o.exit_code, pooled), (0, true), "{o:?}");
    let (o, before) = run(&sb, &spec, "true", moment).await;
    assert_eq!(o.exit_code, 0, "{o:?}");
    assert!(
        !before,
        "the next sandbox was started while the command ran"
    );
}

/// Clock ticks since boot `ms` milliseconds from now.
async fn moment_after(ms: u64) -> u64 {
    tokio::time::sleep(Duration::from_millis(ms)).await;
    ticks_now()
}

/// Attack: a protected name and a private file appear after the pool is
/// ready; the pooled sandbox had neither masked.
#[tokio::test]
async fn a_protected_name_or_private_file_made_after_the_pool_started_is_masked() {
    let dir = tempfile::tempdir().unwrap();
    let root = root_in(&dir);
    let sb = pooled_sandbox(&dir.path().join("state"));
    let spec = SandboxSpec::for_root(&root).read_deny(root.join("secret.txt"));
    let moment = warm(&sb, &spec).await;
    std::fs::create_dir(root.join(".vscode")).unwrap();
    std::fs::write(root.join(".vscode/tasks.json"), "{}").unwrap();
    std::fs::write(root.join("secret.txt"), "SECRET").unwrap();
    let (o, pooled) = run(
        &sb,
        &spec,
        "cat secret.txt; echo evil > .vscode/tasks.json; echo done",
        moment,
    )
    .await;
    assert!(!pooled, "a stale pooled sandbox ran it: {o:?}");
    assert_eq!(o.stdout, "done\n", "{o:?}");
    assert!(o.stderr.contains("Read-only file system"), "{o:?}");
    assert_eq!(
        std::fs::read_to_string(root.join(".vscode/tasks.json")).unwrap(),
        "{}"
    );
}

/// Attack: a hidden private file is replaced after the pool is ready (a
/// rename over it, as editors and `passwd` write): the mask over the old
/// one is detached, and the new content would be readable.
#[tokio::test]
async fn a_private_file_replaced_after_the_pool_started_stays_hidden() {
    let dir = tempfile::tempdir().unwrap();
    let root = root_in(&dir);
    std::fs::write(root.join("secret.txt"), "OLD-SECRET").unwrap();
    let sb = pooled_sandbox(&dir.path().join("state"));
    let spec = SandboxSpec::for_root(&root).read_deny(root.join("secret.txt"));
    let moment = warm(&sb, &spec).await;
    std::fs::write(root.join("secret.new"), "NEW-SECRET").unwrap();
    std::fs::rename(root.join("secret.new"), root.join("secret.txt")).unwrap();
    let (o, pooled) = run(&sb, &spec, "cat secret.txt; echo done", moment).await;
    assert!(!pooled, "a stale pooled sandbox ran it: {o:?}");
    assert_eq!(o.stdout, "done\n", "{o:?}");
}

/// Attack: the root is moved away and made again after the pool is ready:
/// the pooled sandbox holds the old directory.
#[tokio::test]
async fn a_root_replaced_after_the_pool_started_is_the_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let root = root_in(&dir);
    std::fs::write(root.join("old.txt"), "").unwrap();
    let sb = pooled_sandbox(&dir.path().join("state"));
    let spec = SandboxSpec::for_root(&root);
    let moment = warm(&sb, &spec).await;
    std::fs::rename(&root, dir.path().join("moved")).unwrap();
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("new.txt"), "").unwrap();
    let (o, pooled) = run(&sb, &spec, "ls; touch made", moment).await;
    assert!(!pooled, "a stale pooled sandbox ran it: {o:?}");
    assert_eq!(o.stdout, "new.txt\n", "{o:?}");
    assert!(root.join("made").exists());
    assert!(!dir.path().join("moved/made").exists());
}

/// A server's sandbox (pooled or fresh) has its keeper report the command's
/// end once nothing of it is left, and the run ends on that report: the
/// exit code or signal comes through, all the output is read, nothing the
/// command started is alive after the run, and the command cannot reach
/// the socket to report an end of its own.
#[tokio::test]
async fn the_keepers_report_ends_a_pooled_run_with_everything_the_command_left() {
    let dir = tempfile::tempdir().unwrap();
    let root = root_in(&dir);
    let sb = pooled_sandbox(&dir.path().join("state"));
    let spec = SandboxSpec::for_root(&root);
    let exit_7 = "echo out; echo err >&2; exit 7";
    let exited_7 = |o: &ExecOutcome| {
        assert_eq!(
            (o.exit_code, o.signal, o.stdout.as_str(), o.stderr.as_str()),
            (7, None, "out\n", "err\n")
        );
    };

    // A fresh sandbox of a server's reports the same way: the pooled one
    // went stale (a protected name appeared), so the command gets a fresh one.
    let moment = warm(&sb, &spec).await;
    std::fs::create_dir(root.join(".vscode")).unwrap();
    let (o, pooled) = run(&sb, &spec, exit_7, moment).await;
    assert!(!pooled, "{o:?}");
    exited_7(&o);

    exited_7(&run_pooled(&sb, &spec, exit_7).await);

    let o = run_pooled(&sb, &spec, "kill -KILL $$").await;
    assert_eq!((o.exit_code, o.signal), (137, Some(9)), "{o:?}");

    // More than a pipe holds, written up to the end.
    let o = run_pooled(&sb, &spec, "seq 1 100000").await;
    assert_eq!(
        o.stdout.lines().count(),
        100_000,
        "{:?}",
        o.stdout.get(..200)
    );
    assert!(o.stdout.ends_with("\n99999\n100000\n"));

    // A process left behind is ended before the report: it never writes
    // its marker (checked well after the run).
    let marker = root.join("late");
    let late = "(sleep 0.5; touch late) >/dev/null 2>&1 &";
    let o = run_pooled(&sb, &spec, &format!("{late} echo started")).await;
    assert_eq!((o.exit_code, o.stdout.as_str()), (0, "started\n"));
    // A command that kills its keeper leaves no report: the run ends on the
    // sandbox's own end, and nothing of the command outlives it.
    let o = run_pooled(&sb, &spec, &format!("{late} kill -KILL $PPID; sleep 2")).await;
    assert_ne!(o.exit_code, 0, "{o:?}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!marker.exists(), "a process of a command outlived its run");

    // The socket is the keeper's alone: not among the command's
    // descriptors (3 is `ls`'s own), and none of the keeper's (its parent,
    // not dumpable) can be opened through /proc.
    let o = run_pooled(
        &sb,
        &spec,
        "ls /proc/self/fd; for fd in 3 4 5 6 7 8 9; do (echo x0 >&$fd) 2>/dev/null && echo wrote-$fd; done; \
         for f in /proc/$PPID/fd/*; do (echo x0 > $f) 2>/dev/null && echo wrote-keeper-$f; done; exit 3",
    )
    .await;
    assert_eq!(o.exit_code, 3, "{o:?}");
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(lines, ["0", "1", "2", "3"], "{o:?}");
}

/// Runs `script` in a pooled sandbox, made ready first.
async fn run_pooled(sb: &Sandbox, spec: &SandboxSpec, script: &str) -> ExecOutcome {
    let moment = warm(sb, spec).await;
    let (o, pooled) = run(sb, spec, script, moment).await;
    assert!(pooled, "the pooled sandbox was not used: {o:?}");
    o
}

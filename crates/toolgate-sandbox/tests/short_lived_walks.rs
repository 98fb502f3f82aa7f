//! A short-lived process (`SandboxConfig::short_lived`, a one-shot
//! `toolgate sandbox`) keeps no inotify watches on a small root: closing an
//! instance that holds watches waits for the kernel's fsnotify grace period,
//! which the process would pay as it exits. A large root's walk is still
//! kept, and a small root walked afresh each time is still protected.
//!
//! Its own test binary: being short-lived is a property of the process.
//! As root, where every command is sandboxed by bubblewrap.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tokio::sync::Mutex;
use toolgate_sandbox::Sandbox;
use toolgate_sandbox::repos::watched::walks;

/// The tests count this process's walks: one at a time.
static SERIAL: Mutex<()> = Mutex::const_new(());

/// A temporary directory holding an empty root (`root`) and a short-lived
/// sandbox with its state beside it.
fn world() -> (tempfile::TempDir, PathBuf, Sandbox) {
    assert!(
        rustix::process::geteuid().is_root(),
        "these tests need root: only there is every command sandboxed by bubblewrap with stage 2's masks"
    );
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let root = base.join("root");
    std::fs::create_dir(&root).unwrap();
    let sandbox = Sandbox::new(common::config(&base.join("state")).short_lived()).unwrap();
    (dir, root, sandbox)
}

/// How many walks `script` cost.
async fn walks_of(sandbox: &Sandbox, root: &Path, script: &str) -> u64 {
    let before = walks();
    let outcome = common::run_shell(sandbox, root, script).await;
    assert_eq!(outcome.outcome.exit_code, 0, "{script}: {outcome:?}");
    walks() - before
}

/// How many inotify watches of this process's instances are on `dir`
/// (from /proc/self/fdinfo: `inotify wd:… ino:<hex> sdev:…`).
fn watches_on(dir: &Path) -> usize {
    let ino = format!("ino:{:x} ", std::fs::metadata(dir).unwrap().ino());
    std::fs::read_dir("/proc/self/fdinfo")
        .unwrap()
        .filter_map(|fd| std::fs::read_to_string(fd.unwrap().path()).ok())
        .flat_map(|info| {
            info.lines()
                .filter(|line| line.starts_with("inotify ") && line.contains(&ino))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .count()
}

/// `dir`'s watches once the closer thread has had its time: the instance
/// is closed off the command's path, so the count falls a moment later.
fn settled_watches_on(dir: &Path) -> usize {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let count = watches_on(dir);
        if count == 0 || Instant::now() > deadline {
            return count;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test]
async fn a_small_roots_walk_leaves_no_watches_and_is_made_afresh() {
    let _serial = SERIAL.lock().await;
    let (_dir, root, sandbox) = world();
    std::fs::create_dir_all(root.join("src/deep")).unwrap();

    assert!(walks_of(&sandbox, &root, "true").await >= 1);
    assert_eq!(
        settled_watches_on(&root),
        0,
        "a short-lived process kept watches on a small root"
    );
    assert_eq!(settled_watches_on(&root.join("src/deep")), 0);
    assert!(
        walks_of(&sandbox, &root, "true").await >= 1,
        "a small root's walk was kept"
    );
    assert_eq!(settled_watches_on(&root), 0);

    // Walked afresh, it still sees a repository the host made between
    // commands: the command may not write its config.
    common::git(&root.join("src"), &["init", "-q"]);
    common::fsmonitor_refused(&sandbox, &root, "src/.git/config").await;
}

#[tokio::test]
async fn a_large_roots_walk_is_still_kept() {
    let _serial = SERIAL.lock().await;
    let (_dir, root, sandbox) = world();
    // Past the entries from which a short-lived process keeps a walk: its
    // second walk would cost more than the watches' close.
    for d in 0..50 {
        let sub = root.join(format!("d{d}"));
        std::fs::create_dir_all(&sub).unwrap();
        for f in 0..100 {
            std::fs::File::create(sub.join(format!("f{f}"))).unwrap();
        }
    }
    walks_of(&sandbox, &root, "true").await;
    assert_eq!(
        walks_of(&sandbox, &root, "true").await,
        0,
        "a large root's walk was not kept"
    );
    assert!(watches_on(&root) >= 1);
}

//! Where process logs live: one private directory per process table,
//! `<log dir>/toolgate-proc-<toolgate pid>-<its start time>-<n>/` (mode 0700), made at
//! the table's first start and removed with the table. A toolgate that was killed
//! outright (SIGKILL, a crash) removes nothing: the next toolgate to make a directory
//! in the same place sweeps those of servers that no longer run.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use toolgate_core::ToolError;

use super::host;

const PREFIX: &str = "toolgate-proc-";

/// Makes a fresh directory in `base` that only its owner can enter, after sweeping
/// `base` of the directories of dead servers (once per `base` and process).
pub(super) fn create_private_dir(base: &Path) -> Result<PathBuf, ToolError> {
    use std::os::unix::fs::DirBuilderExt;
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    // The base itself (toolgate's state dir, normally) is made private when it is
    // made here; an existing one is used as it is: the directory below is 0700.
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(base)
        .map_err(|e| cannot_create(base, &e))?;
    sweep_once(base);
    let me = std::process::id();
    let ticks = host::start_ticks(me).unwrap_or_default();
    let mut last = None;
    for _ in 0..16 {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = base.join(format!("{PREFIX}{me}-{ticks}-{n}"));
        // Attack: a name planted in advance in a shared directory (a symlink, or a
        // directory someone else owns). mkdir fails on anything there, so the
        // directory used is always one this call made, 0700: nobody else can read
        // the output or plant names inside it.
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(cannot_create(&dir, &e)),
        }
    }
    let e = last.unwrap_or_else(|| std::io::ErrorKind::AlreadyExists.into());
    Err(cannot_create(base, &e))
}

fn cannot_create(path: &Path, e: &std::io::Error) -> ToolError {
    ToolError::Failed(format!(
        "cannot create the process output directory {}: {e}; check that toolgate's state \
         directory exists and is writable",
        path.display()
    ))
}

fn sweep_once(base: &Path) {
    static SWEPT: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());
    let first = SWEPT
        .lock()
        .map(|mut swept| swept.insert(base.to_owned()))
        .unwrap_or(false);
    if first {
        sweep(base);
    }
}

/// Removes the directories in `base` of toolgate servers that no longer run: the pid
/// in the name is gone, or now belongs to a process started at another time.
pub(super) fn sweep(base: &Path) -> usize {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(base) else {
        return 0;
    };
    let me = rustix::process::geteuid().as_raw();
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some((pid, ticks)) = name.to_str().and_then(owner_of) else {
            continue;
        };
        if host::start_ticks(pid) == Some(ticks) {
            continue;
        }
        // Only real directories of this user: never a symlink (remove_dir_all does
        // not follow one anyway), never another user's files in a shared base.
        let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
            continue;
        };
        if meta.is_dir() && meta.uid() == me && std::fs::remove_dir_all(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// `(pid, start ticks)` of the server that made the directory `name`.
fn owner_of(name: &str) -> Option<(u32, u64)> {
    let mut parts = name.strip_prefix(PREFIX)?.split('-');
    let pid = parts.next()?.parse().ok()?;
    let ticks = parts.next()?.parse().ok()?;
    let _n: u64 = parts.next()?.parse().ok()?;
    parts.next().is_none().then_some((pid, ticks))
}

/// Creates a fresh output file in `dir`, readable by its owner only.
pub(super) fn create_log(dir: &Path) -> Result<(PathBuf, std::fs::File), ToolError> {
    use std::os::unix::fs::OpenOptionsExt;
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let path = dir.join(format!("starting-{n}.log"));
    // create_new: a name planted in advance (a symlink) is never opened.
    std::fs::OpenOptions::new()
        .create_new(true)
        .read(true)
        .write(true)
        .mode(0o600)
        .open(&path)
        .map(|file| (path.clone(), file))
        .map_err(|e| ToolError::Failed(format!("cannot create {}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_say_whose_directory_it_is() {
        let cases = [
            ("toolgate-proc-12-345-0", Some((12, 345))),
            ("toolgate-proc-12-345-7", Some((12, 345))),
            // The old layout (no start time) and anything else are left alone.
            ("toolgate-proc-12-0", None),
            ("toolgate-proc-12-345-0-x", None),
            ("toolgate-output-1", None),
            ("toolgate-proc--1-2", None),
        ];
        for (name, owner) in cases {
            assert_eq!(owner_of(name), owner, "{name}");
        }
    }

    #[test]
    fn the_directories_of_dead_servers_are_swept_and_live_ones_kept() {
        let base = tempfile::tempdir().unwrap();
        let me = std::process::id();
        let ticks = host::start_ticks(me).unwrap();
        let live = base.path().join(format!("{PREFIX}{me}-{ticks}-9"));
        // Same pid, another start time: a server that died, whose pid was reused.
        let reused = base.path().join(format!("{PREFIX}{me}-{}-0", ticks + 1));
        // A pid that does not exist.
        let gone = base.path().join(format!("{PREFIX}{}-1-0", u32::MAX - 1));
        let unrelated = base.path().join("keep-me");
        for dir in [&live, &reused, &gone, &unrelated] {
            std::fs::create_dir(dir).unwrap();
            std::fs::write(dir.join("1.log"), "x").unwrap();
        }
        // A symlink with a dead server's name is never followed.
        let target = tempfile::tempdir().unwrap();
        std::fs::write(target.path().join("precious"), "x").unwrap();
        let link = base.path().join(format!("{PREFIX}{}-2-0", u32::MAX - 1));
        std::os::unix::fs::symlink(target.path(), &link).unwrap();

        assert_eq!(sweep(base.path()), 2);
        assert!(live.join("1.log").exists() && unrelated.join("1.log").exists());
        assert!(!reused.exists() && !gone.exists());
        assert!(target.path().join("precious").exists());
    }
}

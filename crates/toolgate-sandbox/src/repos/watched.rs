//! A root's walk kept while nothing it read has changed.
//!
//! Every plan walks each writable root for nested repositories, and every
//! run walks them again after the command for the repositories it made
//! (`sandbox::new_repos`): two walks per command, 50–100 ms each for a root
//! of 50,000 files. A process keeps each root's last walk and gives it out
//! again only while inotify proves that no listing the walk read could
//! have changed:
//! - a watch on every directory the walk listed, added by its path before
//!   it is opened (whatever is put at that path afterwards, by a rename or
//!   as a symlink, is an event of its parent's, whose watch was added
//!   before the parent was listed), for entries created, deleted, moved in
//!   or out or changed in mode, and the directory itself deleted or moved.
//!   The kernel queues an event
//!   before the syscall that caused it returns, whichever mount namespace
//!   it came from, so a check made after a change (the host's, or a
//!   command's that has exited) sees it;
//! - the root's path still names the directory walked (device and inode,
//!   compared before the events are read: a directory that was removed
//!   has queued its event by then, so its inode number cannot have been
//!   given to another);
//! - `/proc/self/mountinfo`, which polls as changed once the mount table
//!   of toolgate's namespace changed (a mount over a directory of a root);
//! - only filesystems whose every change passes through this kernel
//!   (`LOCAL_FILESYSTEMS`, the root's and every mount's beneath it, by
//!   the mount table read after it was armed): inotify does not see what
//!   another NFS client or a FUSE server changes.
//!
//! Events that cannot change the walk's result are let through: a
//! non-directory's creation, removal or attribute change, unless it is
//! named `.git` or `HEAD` (a creation still counts towards the budget of
//! entries). Anything else (a directory's event, the root's, a full queue,
//! a watch that could not be added, any error) drops the walk, and the
//! next one starts from scratch with fresh watches.

use std::fs::File;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, mpsc};

use rustix::fs::inotify::{self, ReadFlags, WatchFlags};

use super::{DirSource, Listed, RealDirs, RootScan, ScanTooLarge, scan_parallel_with};

/// How many roots a process keeps walks of: each holds an inotify instance,
/// of which a user has 128 by default. The least recently used goes first.
const KEPT_ROOTS: usize = 4;

/// Filesystem types (as the mount table names them) whose every change
/// passes through this kernel: ext2/3/4, xfs, btrfs, tmpfs, f2fs, zfs,
/// bcachefs and overlayfs (what is changed in an overlay's layers beneath
/// it is not seen; the kernel leaves the overlay's view of such a change
/// undefined as well).
const LOCAL_FILESYSTEMS: &[&str] = &[
    "ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "f2fs", "zfs", "bcachefs", "overlay",
];

/// The fewest entries of a walk that a short-lived process keeps: a walk
/// of this many takes about as long (2 to 4 ms, 1 to 2 µs an entry on a
/// few threads) as the fsnotify grace period its instance's close waits
/// for at the process's exit.
const SHORT_LIVED_KEEPS_FROM: usize = 4096;

static KEPT: Mutex<Vec<Kept>> = Mutex::new(Vec::new());
static WALKS: AtomicU64 = AtomicU64::new(0);
/// Set once this process is known to exit soon ([`short_lived`]).
static SHORT_LIVED: AtomicBool = AtomicBool::new(false);
/// The roots a short-lived process found too small to keep a walk of:
/// walked without watches from then on.
static SMALL: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Marks this process as one that exits after a run or a few: from now on
/// it keeps only walks of at least [`SHORT_LIVED_KEEPS_FROM`] entries (see
/// `SandboxConfig::short_lived`).
pub(crate) fn short_lived() {
    SHORT_LIVED.store(true, Ordering::Relaxed);
}

/// How many walks this process made (kept walks given out again do not
/// count).
pub fn walks() -> u64 {
    WALKS.load(Ordering::Relaxed)
}

/// The walk of `root` with at most `budget` entries, as a walk made now
/// would find: the kept one while it still holds (whichever run made it),
/// else a new one, kept when it could be watched.
pub fn scan(root: &Path, budget: usize) -> Result<RootScan, ScanTooLarge> {
    if let Some(scan) = reuse(root, budget) {
        return Ok(scan);
    }
    WALKS.fetch_add(1, Ordering::Relaxed);
    let threads = crate::walk::threads();
    let short_lived = SHORT_LIVED.load(Ordering::Relaxed);
    if short_lived && small().iter().any(|small| small == root) {
        return super::scan_root_parallel(root, budget, threads);
    }
    let Some(watching) = Watching::start(root) else {
        return super::scan_root_parallel(root, budget, threads);
    };
    let scan = match scan_parallel_with(root, budget, threads, &watching) {
        Ok(scan) => scan,
        Err(too_large) => {
            retire(watching.inotify);
            return Err(too_large);
        }
    };
    let Some(kept) = watching.finish(root, &scan) else {
        return Ok(scan);
    };
    if short_lived && kept.entries < SHORT_LIVED_KEEPS_FROM {
        // Closed now, while the command starts, not as the process exits.
        retire(kept.inotify);
        small().push(root.to_owned());
        return Ok(scan);
    }
    let mut all = lock();
    // A walk of the same root made meanwhile is replaced: the newer one
    // holds for every change the older one would have seen.
    if let Some(at) = all.iter().position(|k| k.root == root) {
        retire(all.remove(at).inotify);
    }
    if all.len() >= KEPT_ROOTS {
        retire(all.remove(0).inotify);
    }
    all.push(kept);
    Ok(scan)
}

fn reuse(root: &Path, budget: usize) -> Option<RootScan> {
    let mut all = lock();
    let at = all.iter().position(|k| k.root == root)?;
    let mut kept = all.remove(at);
    if !kept.unchanged(budget) {
        retire(kept.inotify);
        return None;
    }
    let scan = kept.scan.clone();
    all.push(kept);
    Some(scan)
}

/// Closes an inotify instance that is of no use any more (a dropped walk's,
/// or the private-file scan's, `plan::private`) on a thread of its own.
/// Closing an instance that holds watches waits for the kernel's fsnotify
/// grace period (SRCU): 8 to 22 ms per close measured in a server whose
/// command had made a directory, on the thread that answers calls; no call
/// waits for that now. Should the thread not start, the instance is closed
/// here as before.
pub(crate) fn retire(inotify: OwnedFd) {
    static CLOSER: OnceLock<Option<mpsc::Sender<OwnedFd>>> = OnceLock::new();
    let closer = CLOSER.get_or_init(|| {
        let (closer, retired) = mpsc::channel::<OwnedFd>();
        std::thread::Builder::new()
            .name("toolgate-unwatch".to_owned())
            .spawn(move || retired.into_iter().for_each(drop))
            .ok()
            .map(|_| closer)
    });
    if let Some(closer) = closer {
        // A closer that has gone hands the instance back, to close here.
        let _ = closer.send(inotify);
    }
}

fn lock() -> std::sync::MutexGuard<'static, Vec<Kept>> {
    KEPT.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn small() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    SMALL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A kept walk with what tells whether it still holds.
struct Kept {
    root: PathBuf,
    identity: (u64, u64),
    inotify: OwnedFd,
    mounts: MountTable,
    scan: RootScan,
    /// Entries the walk read, and files created since.
    entries: usize,
    grown: usize,
}

impl Kept {
    /// True only while the root is the directory walked, no event that
    /// matters was queued, the mount table is as it was and the entries
    /// are within `budget`. Events that do not matter are consumed.
    fn unchanged(&mut self, budget: usize) -> bool {
        if identity(&self.root) != Some(self.identity) {
            return false;
        }
        let mut buf = [MaybeUninit::<u8>::uninit(); 4096];
        let mut events = inotify::Reader::new(&self.inotify, &mut buf);
        loop {
            match events.next() {
                Ok(event) => {
                    let flags = event.events();
                    let name = event.file_name().map(std::ffi::CStr::to_bytes);
                    let matters = flags.intersects(
                        ReadFlags::QUEUE_OVERFLOW
                            | ReadFlags::IGNORED
                            | ReadFlags::UNMOUNT
                            | ReadFlags::DELETE_SELF
                            | ReadFlags::MOVE_SELF
                            | ReadFlags::ISDIR,
                    ) || matches!(name, None | Some(b".git" | b"HEAD"));
                    if matters {
                        return false;
                    }
                    if flags.intersects(ReadFlags::CREATE | ReadFlags::MOVED_TO) {
                        self.grown += 1;
                    }
                }
                Err(rustix::io::Errno::AGAIN) => break,
                Err(_) => return false,
            }
        }
        self.mounts.unchanged() && self.entries.saturating_add(self.grown) <= budget
    }
}

/// A walk being made, watching each directory before it is listed.
struct Watching {
    inotify: OwnedFd,
    mounts: MountTable,
    identity: (u64, u64),
    /// A directory could not be watched: the walk holds, but is not kept.
    failed: AtomicBool,
    entries: AtomicUsize,
}

impl Watching {
    /// Everything that must be armed before the walk reads anything; `None`
    /// when something cannot be had (the user's inotify instances).
    fn start(root: &Path) -> Option<Watching> {
        let flags = inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK;
        // Armed before the table is read: a mount made from here on shows.
        let mounts = MountTable::open()?;
        if !local_beneath(root)? {
            return None;
        }
        Some(Watching {
            inotify: inotify::init(flags).ok()?,
            mounts,
            identity: identity(root)?,
            failed: AtomicBool::new(false),
            entries: AtomicUsize::new(0),
        })
    }

    fn finish(self, root: &Path, scan: &RootScan) -> Option<Kept> {
        if self.failed.into_inner() {
            retire(self.inotify);
            return None;
        }
        Some(Kept {
            root: root.to_owned(),
            identity: self.identity,
            inotify: self.inotify,
            mounts: self.mounts,
            scan: scan.clone(),
            entries: self.entries.into_inner(),
            grown: 0,
        })
    }

    /// Watches the directory at `path`, before it is opened: whatever is
    /// put at `path` after the watch (a rename, a symlink) is an event of
    /// its parent's, watched before the parent was listed, and the root's
    /// own replacement shows in its identity.
    fn watch(&self, path: &Path) -> bool {
        let events = WatchFlags::CREATE
            | WatchFlags::DELETE
            | WatchFlags::MOVED_FROM
            | WatchFlags::MOVED_TO
            | WatchFlags::ATTRIB
            | WatchFlags::DELETE_SELF
            | WatchFlags::MOVE_SELF
            | WatchFlags::ONLYDIR;
        inotify::add_watch(&self.inotify, path, events | WatchFlags::DONT_FOLLOW).is_ok()
    }
}

impl DirSource for Watching {
    type Dir = OwnedFd;

    fn open_root(&self, path: &Path) -> Option<OwnedFd> {
        RealDirs.open_root(path)
    }

    fn open_child(&self, parent: &OwnedFd, path: &Path, name: &std::ffi::OsStr) -> Option<OwnedFd> {
        RealDirs.open_child(parent, path, name)
    }

    fn entering(&self, path: &Path) {
        if !self.failed.load(Ordering::Relaxed) && !self.watch(path) {
            self.failed.store(true, Ordering::Relaxed);
        }
    }

    fn list(&self, dir: &OwnedFd) -> Option<Vec<Listed>> {
        let listed = RealDirs.list(dir)?;
        self.entries.fetch_add(listed.len(), Ordering::Relaxed);
        Some(listed)
    }
}

/// Whether `root` and every mount beneath it lie on [`LOCAL_FILESYSTEMS`],
/// by this process's mount table; `None` when it cannot be read.
fn local_beneath(root: &Path) -> Option<bool> {
    use std::os::unix::ffi::OsStrExt;
    let table = std::fs::read("/proc/self/mountinfo").ok()?;
    let root = root.as_os_str().as_bytes();
    // The mount `root` lies in: the last of the longest mount points above it.
    let mut holder: Option<(usize, bool)> = None;
    for line in table.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let (mount, fs_type) = mount_point_and_type(line)?;
        let local = LOCAL_FILESYSTEMS.iter().any(|t| t.as_bytes() == fs_type);
        let above = root == mount.as_slice() || below(root, &mount);
        let beneath = below(&mount, root);
        if beneath && !local {
            return Some(false);
        }
        if above && holder.is_none_or(|(len, _)| mount.len() >= len) {
            holder = Some((mount.len(), local));
        }
    }
    Some(holder.is_some_and(|(_, local)| local))
}

/// Whether the path `inner` lies strictly beneath the path `outer`.
fn below(inner: &[u8], outer: &[u8]) -> bool {
    inner.len() > outer.len()
        && inner.starts_with(outer)
        && (outer.ends_with(b"/") || inner.get(outer.len()) == Some(&b'/'))
}

/// The mount point (its octal escapes undone) and the filesystem type of
/// one line of `/proc/self/mountinfo`.
fn mount_point_and_type(line: &[u8]) -> Option<(Vec<u8>, &[u8])> {
    use std::os::unix::ffi::OsStringExt;
    let mut fields = line.split(|b| *b == b' ');
    let point = crate::mountinfo::unescape(fields.nth(4)?);
    let fs_type = fields.skip_while(|f| *f != b"-").nth(1)?;
    Some((point.into_os_string().into_vec(), fs_type))
}

/// Device and inode of `path`, not following a final symlink.
fn identity(path: &Path) -> Option<(u64, u64)> {
    let stat = rustix::fs::lstat(path).ok()?;
    Some((stat.st_dev, stat.st_ino))
}

/// `/proc/self/mountinfo` opened: it polls as changed once the mount table
/// of this process's namespace changed after the open.
pub(crate) struct MountTable(File);

impl MountTable {
    pub(crate) fn open() -> Option<MountTable> {
        File::open("/proc/self/mountinfo").ok().map(MountTable)
    }

    /// False once the table changed (and whenever the poll fails).
    pub(crate) fn unchanged(&self) -> bool {
        let mut poll = libc::pollfd {
            fd: self.0.as_fd().as_raw_fd(),
            events: libc::POLLPRI,
            revents: 0,
        };
        // SAFETY: one pollfd on a descriptor we own, zero timeout.
        let ready = unsafe { libc::poll(&raw mut poll, 1, 0) };
        ready == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        (dir, root)
    }

    /// A walk is kept only where every directory could be watched on a
    /// filesystem whose changes all pass through this kernel: procfs is
    /// not one of them, nor a root with one mounted beneath it.
    #[test]
    fn only_walks_of_local_filesystems_are_kept() {
        let walked = |root: &Path| {
            Watching::start(root).is_some_and(|watching| {
                let scan = scan_parallel_with(root, usize::MAX, 2, &watching).unwrap();
                watching.finish(root, &scan).is_some()
            })
        };
        let (_dir, root) = tree();
        assert!(walked(&root));
        assert!(!walked(Path::new("/proc/sys/fs")));
        assert_eq!(local_beneath(Path::new("/proc/sys/fs")), Some(false));
        assert_eq!(
            local_beneath(Path::new("/")),
            Some(false),
            "/proc is beneath /"
        );
        assert_eq!(local_beneath(&root), Some(true));
        let line =
            b"36 35 98:0 /mnt1 /mnt\\040with\\040space rw,noatime master:1 - nfs4 host:/x rw";
        assert_eq!(
            mount_point_and_type(line),
            Some((b"/mnt with space".to_vec(), &b"nfs4"[..]))
        );
    }

    /// How many inotify instances of this process watch the directory with
    /// inode `ino` (an instance's fdinfo lists each watch's inode in hex).
    fn instances_watching(ino: u64) -> usize {
        let needle = format!(" ino:{ino:x} ");
        std::fs::read_dir("/proc/self/fdinfo")
            .unwrap()
            .filter_map(Result::ok)
            .filter_map(|info| std::fs::read_to_string(info.path()).ok())
            .filter(|info| info.contains(&needle))
            .count()
    }

    /// A walk that no longer holds gives up its instance, and the instance
    /// is closed (on the closer thread), not leaked: each instance counts
    /// against the user's 128.
    #[test]
    fn a_dropped_walk_closes_its_inotify_instance() {
        use std::os::unix::fs::MetadataExt;
        let (_dir, root) = tree();
        let ino = std::fs::metadata(root.join("a")).unwrap().ino();
        scan(&root, usize::MAX).unwrap();
        assert_eq!(instances_watching(ino), 1, "the kept walk watches a");
        // A new directory: the next look drops the walk and walks anew,
        // watching `a` from a new instance.
        std::fs::create_dir(root.join("a/c")).unwrap();
        scan(&root, usize::MAX).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while instances_watching(ino) != 1 {
            assert!(
                std::time::Instant::now() < deadline,
                "{} instances watch a: the dropped walk's is still open",
                instances_watching(ino)
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// Files created after the walk count towards the budget of entries:
    /// a root grown past it is refused as a fresh walk would refuse it.
    #[test]
    fn files_made_since_the_walk_count_towards_the_budget() {
        let (_dir, root) = tree();
        // `a` and `b`: two entries.
        assert!(scan(&root, 4).is_ok());
        for name in ["1", "2", "3"] {
            std::fs::write(root.join("a").join(name), "").unwrap();
        }
        assert!(scan(&root, 4).is_err());
        assert!(scan(&root, 5).is_ok());
    }
}

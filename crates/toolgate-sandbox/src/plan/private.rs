//! The files of /etc and /opt only root may read, which every plan masks
//! when toolgate runs as root: found by a scan of some 1,500 entries, which
//! a long-lived process keeps and re-uses only while nothing changed.
//!
//! A plan must never mask less than the host holds at the moment it is
//! made: a private file created (or a file made private) after the last
//! scan must be masked as well. A cache keyed on directory times would
//! miss a chmod, which changes only the file's own ctime. So the cache is
//! watched instead:
//! - inotify on every directory the scan entered, each watch added before
//!   the directory is read, for entries created, deleted, moved or changed
//!   in mode or owner (`IN_ATTRIB`), and the directory itself removed or
//!   moved (and every file with more than one hard link, whose mode can
//!   change through a link elsewhere); the kernel queues an event before the syscall that caused it
//!   returns, so a plan made after a change sees it;
//! - `/proc/self/mountinfo`, which polls as changed once the mount table
//!   of toolgate's namespace changed (a mount over a file of /etc).
//!
//! Any event at all, a full queue, or any error re-scans from scratch with
//! fresh watches; the cache is only ever used when every check says
//! nothing changed. A process scans without watching the first time, so a
//! one-shot `toolgate` pays nothing for watches it never reads.

use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rustix::fs::inotify;

use crate::repos::watched::{MountTable, retire};
use crate::walk::Stopped;

/// The scanned directories: /usr is not scanned, it is large and what it
/// holds is meant to be read.
const SCANNED: &[&str] = &["/etc", "/opt"];

/// The paths others may not read (files) or enter (directories).
pub(super) fn system_paths() -> Vec<PathBuf> {
    static CACHE: Mutex<Cache> = Mutex::new(Cache {
        scans: 0,
        watched: None,
    });
    let mut cache = CACHE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(watched) = &mut cache.watched
        && watched.unchanged()
    {
        return watched.found.clone();
    }
    if let Some(stale) = cache.watched.take() {
        retire(stale.inotify);
    }
    cache.scans += 1;
    if cache.scans > 1
        && let Some(watched) = Watched::scan()
    {
        let found = watched.found.clone();
        cache.watched = Some(watched);
        return found;
    }
    scan(None).unwrap_or_default()
}

/// The private entries of every scanned directory, on a few threads (see
/// [`scan_dir`]); `None` when a watch could not be added.
fn scan(watch: Option<&OwnedFd>) -> Option<Vec<PathBuf>> {
    let start = SCANNED.iter().map(PathBuf::from).collect();
    let found = crate::walk::parallel(start, crate::walk::threads(), |dir, found| {
        scan_dir(&dir, found, watch)
    })
    .ok()?;
    // In no particular order: the plan sorts its masks.
    Some(found.into_iter().flatten().collect())
}

struct Cache {
    scans: u64,
    watched: Option<Watched>,
}

/// A scan's result with what tells whether it still holds.
struct Watched {
    inotify: OwnedFd,
    mounts: MountTable,
    found: Vec<PathBuf>,
}

impl Watched {
    /// Scans with watches; `None` when a watch cannot be had (the user's
    /// inotify limits), so that the caller scans without a cache.
    fn scan() -> Option<Watched> {
        let inotify =
            inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK).ok()?;
        // Armed before the scan: a mount made during it shows next time.
        let mounts = MountTable::open()?;
        let Some(found) = scan(Some(&inotify)) else {
            retire(inotify);
            return None;
        };
        Some(Watched {
            inotify,
            mounts,
            found,
        })
    }

    /// True only when no watch reported anything and the mount table is as
    /// it was; anything else (an event, an overflowed queue, an error)
    /// counts as a change.
    fn unchanged(&mut self) -> bool {
        let mut buf = [MaybeUninit::<u8>::uninit(); 256];
        match rustix::io::read(&self.inotify, &mut buf) {
            Err(rustix::io::Errno::AGAIN) => {}
            _ => return false,
        }
        self.mounts.unchanged()
    }
}

/// Collects into `found` the entries of `dir` others may not read (files)
/// or enter (directories), and returns the subdirectories to scan next
/// (not the former, and no symlink is followed); with `watch`, adds a watch
/// to `dir` before reading it, and stops when one cannot be added.
///
/// Each entry is looked at relative to its open directory (`statx` on the
/// directory's descriptor, asking only for type and mode), and symlinks,
/// which the listing already names as such, are not looked at: most of the
/// scan's cost was walking every full path again.
fn scan_dir(
    dir: &Path,
    found: &mut Vec<PathBuf>,
    watch: Option<&OwnedFd>,
) -> Result<Vec<PathBuf>, Stopped> {
    use rustix::fs::{AtFlags, FileType, Mode, OFlags, StatxFlags};
    use std::os::unix::ffi::OsStrExt;
    if let Some(inotify) = watch {
        let events = file_events()
            | inotify::WatchFlags::CREATE
            | inotify::WatchFlags::DELETE
            | inotify::WatchFlags::MOVED_FROM
            | inotify::WatchFlags::MOVED_TO
            | inotify::WatchFlags::ONLYDIR;
        if inotify::add_watch(inotify, dir, events).is_err() {
            return Err(Stopped);
        }
    }
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let Ok(fd) = rustix::fs::open(dir, flags, Mode::empty()) else {
        return Ok(Vec::new());
    };
    let Ok(mut entries) = rustix::fs::Dir::new(fd) else {
        return Ok(Vec::new());
    };
    let mut subdirs = Vec::new();
    while let Some(Ok(entry)) = entries.read() {
        let name = entry.file_name();
        if matches!(name.to_bytes(), b"." | b"..") || entry.file_type() == FileType::Symlink {
            continue;
        }
        let Ok(stat) = entries.fd().and_then(|fd| {
            rustix::fs::statx(
                fd,
                name,
                AtFlags::SYMLINK_NOFOLLOW,
                StatxFlags::TYPE | StatxFlags::MODE | StatxFlags::NLINK,
            )
        }) else {
            continue;
        };
        let mode = u32::from(stat.stx_mode);
        let path = dir.join(std::ffi::OsStr::from_bytes(name.to_bytes()));
        // A chmod through another hard link of a file reports to the watch
        // of that link's directory only: such a file is watched itself.
        if let Some(inotify) = watch
            && FileType::from_raw_mode(mode) == FileType::RegularFile
            && stat.stx_nlink > 1
            && inotify::add_watch(inotify, &path, file_events()).is_err()
        {
            return Err(Stopped);
        }
        match FileType::from_raw_mode(mode) {
            FileType::Directory if mode & 0o001 == 0 => found.push(path),
            FileType::Directory => subdirs.push(path),
            FileType::RegularFile if mode & 0o004 == 0 => found.push(path),
            _ => {}
        }
    }
    Ok(subdirs)
}

/// What changes an entry's own mode, owner or place.
fn file_events() -> inotify::WatchFlags {
    inotify::WatchFlags::ATTRIB
        | inotify::WatchFlags::DELETE_SELF
        | inotify::WatchFlags::MOVE_SELF
        | inotify::WatchFlags::DONT_FOLLOW
}

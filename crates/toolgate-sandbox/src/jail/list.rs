//! Directory listings, at one syscall per entry.
//!
//! The directory is opened once (beneath the root, like every path); its
//! entries come from `getdents64` on that handle into a stack buffer, and
//! each one is described by an lstat of its bare name relative to the same
//! handle. Nothing is re-resolved from the root per entry and nothing is
//! opened per entry.

use std::ffi::{CStr, OsStr, OsString};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, UNIX_EPOCH};

use cap_std::fs::{Dir, MetadataExt};
use rustix::fs::{AtFlags, FileType, RawDir, StatxFlags};
use rustix::io::Errno;

use super::{EntryInfo, EntryKind, kind_of, modified};

/// Bytes of directory entries fetched per `getdents64` (a few hundred
/// entries of ordinary names).
const DENTS_BUFFER: usize = 8 * 1024;

/// Where reading a directory failed: at the directory itself (`None`) or at
/// the entry with this name.
pub(super) type ListError = (Option<OsString>, io::Error);

/// The entries of `dir` (opened for reading), sorted by name. Symlinks are
/// described, not followed; an entry removed since `getdents64` saw it is
/// left out.
pub(super) fn entries(dir: &Dir) -> Result<Vec<EntryInfo>, ListError> {
    let mut buf = [MaybeUninit::<u8>::uninit(); DENTS_BUFFER];
    let mut raw = RawDir::new(dir.as_fd(), &mut buf);
    let mut out = Vec::new();
    loop {
        let entry = match raw.next() {
            None => break,
            Some(Ok(entry)) => entry,
            Some(Err(Errno::INTR)) => continue,
            // The directory itself was removed while it was read: what it
            // held is gone too (std's and rustix's readdir end here as well).
            Some(Err(Errno::NOENT)) => break,
            Some(Err(e)) => return Err((None, e.into())),
        };
        let c_name = entry.file_name();
        let name = c_name.to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let name = OsStr::from_bytes(name);
        // Attack: a symlink entry pointing out of the root. A name from
        // getdents64 is one component (no `/`, not `.` or `..`), and it is
        // lstat'ed relative to the handle already inside the root: the link
        // itself is described, never followed.
        let described = match describe(dir, c_name) {
            Ok(described) => described,
            // Removed since getdents64 saw it: not there any more.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err((Some(name.to_owned()), e)),
        };
        out.push(EntryInfo {
            name: name.to_string_lossy().into_owned(),
            ..described
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// An entry described by `statx` of its bare name relative to `dir`, the link
/// itself for a symlink (`name` still empty): one syscall with the name
/// `getdents64` gave, already a C string, asking only for what a listing shows.
/// Where the kernel has no `statx` (or a container's filter refuses it),
/// cap-std's lstat.
fn describe(dir: &Dir, name: &CStr) -> io::Result<EntryInfo> {
    let wanted = StatxFlags::TYPE | StatxFlags::MODE | StatxFlags::SIZE | StatxFlags::MTIME;
    let stat = match rustix::fs::statx(dir, name, AtFlags::SYMLINK_NOFOLLOW, wanted) {
        Ok(stat) => stat,
        Err(Errno::NOSYS | Errno::PERM) => {
            return described_by_lstat(dir, OsStr::from_bytes(name.to_bytes()));
        }
        Err(e) => return Err(e.into()),
    };
    let mode = u32::from(stat.stx_mode);
    let kind = match FileType::from_raw_mode(mode) {
        FileType::Symlink => EntryKind::Symlink,
        FileType::Directory => EntryKind::Dir,
        FileType::RegularFile => EntryKind::File,
        _ => EntryKind::Other,
    };
    let modified = StatxFlags::from_bits_retain(stat.stx_mask)
        .contains(StatxFlags::MTIME)
        .then(|| {
            let since = |secs: u64| Duration::new(secs, stat.stx_mtime.tv_nsec);
            match u64::try_from(stat.stx_mtime.tv_sec) {
                Ok(secs) => UNIX_EPOCH.checked_add(since(secs)),
                Err(_) => UNIX_EPOCH
                    .checked_sub(Duration::from_secs(stat.stx_mtime.tv_sec.unsigned_abs()))
                    .and_then(|t| t.checked_add(Duration::new(0, stat.stx_mtime.tv_nsec))),
            }
        })
        .flatten();
    Ok(EntryInfo {
        name: String::new(),
        kind,
        size: stat.stx_size,
        modified,
        mode,
    })
}

/// [`describe`] by cap-std's lstat.
fn described_by_lstat(dir: &Dir, name: &OsStr) -> io::Result<EntryInfo> {
    let meta = dir.symlink_metadata(name)?;
    Ok(EntryInfo {
        name: String::new(),
        kind: kind_of(meta.file_type()),
        size: meta.len(),
        modified: modified(&meta),
        mode: meta.mode(),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn statx_describes_every_kind_of_entry_as_lstat_does() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::write(root.join("file"), b"twelve bytes").unwrap();
        std::fs::create_dir(root.join("dir")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", root.join("link")).unwrap();
        std::os::unix::fs::symlink("missing", root.join("dangling")).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            root.join("fifo"),
            FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o640),
            0,
        )
        .unwrap();
        // Before the epoch, with nanoseconds: the sign handling of the conversion.
        let old = std::fs::File::open(root.join("file")).unwrap();
        old.set_modified(UNIX_EPOCH - Duration::new(86_400, 250_000_000))
            .unwrap();
        let dir = Dir::open_ambient_dir(root, cap_std::ambient_authority()).unwrap();
        let names = ["file", "dir", "link", "dangling", "fifo"];
        let by_statx: Vec<EntryInfo> = names
            .iter()
            .map(|n| describe(&dir, &std::ffi::CString::new(*n).unwrap()).unwrap())
            .collect();
        let by_lstat: Vec<EntryInfo> = names
            .iter()
            .map(|n| described_by_lstat(&dir, OsStr::new(n)).unwrap())
            .collect();
        assert_eq!(by_statx, by_lstat);
        let kinds: Vec<EntryKind> = by_statx.iter().map(|e| e.kind).collect();
        assert_eq!(
            kinds,
            [
                EntryKind::File,
                EntryKind::Dir,
                EntryKind::Symlink,
                EntryKind::Symlink,
                EntryKind::Other
            ]
        );
        assert_eq!(by_statx[0].size, 12);
        assert_eq!(
            by_statx[0].modified,
            Some(UNIX_EPOCH - Duration::new(86_400, 250_000_000))
        );
        let missing = describe(&dir, c"gone").unwrap_err();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
    }
}

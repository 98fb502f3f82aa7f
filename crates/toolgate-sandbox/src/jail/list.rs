//! Directory listings, at one syscall per entry.
//!
//! The directory is opened once (beneath the root, like every path); its
//! entries come from `getdents64` on that handle into a stack buffer, and
//! each one is described by an lstat of its bare name relative to the same
//! handle. Nothing is re-resolved from the root per entry and nothing is
//! opened per entry.

use std::ffi::{OsStr, OsString};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;

use cap_std::fs::{Dir, MetadataExt};
use rustix::fs::RawDir;
use rustix::io::Errno;

use super::{EntryInfo, kind_of, modified};

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
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let name = OsStr::from_bytes(name);
        // Attack: a symlink entry pointing out of the root. A name from
        // getdents64 is one component (no `/`, not `.` or `..`), and it is
        // lstat'ed relative to the handle already inside the root: the link
        // itself is described, never followed.
        let meta = match dir.symlink_metadata(name) {
            Ok(meta) => meta,
            // Removed since getdents64 saw it: not there any more.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err((Some(name.to_owned()), e)),
        };
        out.push(EntryInfo {
            name: name.to_string_lossy().into_owned(),
            kind: kind_of(meta.file_type()),
            size: meta.len(),
            modified: modified(&meta),
            mode: meta.mode(),
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

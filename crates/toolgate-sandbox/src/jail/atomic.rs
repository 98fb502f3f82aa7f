//! Atomic replacement of one directory entry: a hidden temp file next to it,
//! written and fsynced, then renamed over it (or, for create-only, renamed
//! with `RENAME_NOREPLACE`).
//!
//! Every name handled here is a single path component, and every directory a
//! handle that the jail already opened beneath its root, so the `*at` system
//! calls below never resolve anything but that one name.

use std::ffi::{OsStr, OsString};
use std::io::{self, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use cap_std::fs::{Dir, File, OpenOptions, OpenOptionsExt, Permissions, PermissionsExt};
use rustix::fs::{AtFlags, RenameFlags};
use rustix::io::Errno;

/// Mode of files the jail creates; the process umask still applies.
pub(crate) const NEW_FILE_MODE: u32 = 0o644;

/// Longest slice of the target's name copied into the temp file's name, so
/// that the temp name stays under `NAME_MAX` (255 bytes).
const NAME_PART_MAX: usize = 96;

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// How the temp file is put in place.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Commit {
    /// Rename over whatever is at the name (the entry itself, never a
    /// symlink's target).
    Replace,
    /// Fail with `AlreadyExists` if anything, even a dangling symlink, is there.
    NoReplace,
}

/// The hidden temp name for `name`:
/// `.<name>.toolgate-<pid>-<counter>-<nanos>.tmp`.
pub(crate) fn temp_name(name: &OsStr) -> OsString {
    let bytes = name.as_bytes();
    let part = &bytes[..bytes.len().min(NAME_PART_MAX)];
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let suffix = format!(".toolgate-{}-{count}-{nanos:08x}.tmp", std::process::id());
    let mut out = Vec::with_capacity(1 + part.len() + suffix.len());
    out.push(b'.');
    out.extend_from_slice(part);
    out.extend_from_slice(suffix.as_bytes());
    OsString::from_vec(out)
}

/// Writes `data` to `dir/name` atomically: `mode` is applied exactly when
/// given (an existing file's mode), otherwise the new file gets
/// [`NEW_FILE_MODE`] minus the umask. On any failure the temp file is
/// removed and `dir/name` is left as it was.
pub(crate) fn replace(
    dir: &Dir,
    name: &OsStr,
    data: &[u8],
    mode: Option<u32>,
    commit: Commit,
) -> io::Result<()> {
    let (tmp, file) = create_temp(dir, name)?;
    let result = fill(file, data, mode).and_then(|()| match commit {
        Commit::Replace => dir.rename(&tmp, dir, name),
        Commit::NoReplace => rename_noreplace(dir, &tmp, dir, name),
    });
    if result.is_err() {
        // Best effort: the temp name is ours (O_EXCL), nothing else is there.
        let _ = dir.remove_file(&tmp);
        return result;
    }
    // Durability of the rename itself; the data is already fsynced.
    let _ = rustix::fs::fsync(dir);
    Ok(())
}

/// Creates a fresh temp file next to `name`. `O_EXCL` (`create_new`) means a
/// name planted in advance, symlink or not, is never opened: we retry with
/// the next name instead.
fn create_temp(dir: &Dir, name: &OsStr) -> io::Result<(OsString, File)> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true).mode(NEW_FILE_MODE);
    let mut last = None;
    for _ in 0..8 {
        let tmp = temp_name(name);
        match dir.open_with(&tmp, &options) {
            Ok(file) => return Ok((tmp, file)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::ErrorKind::AlreadyExists.into()))
}

fn fill(mut file: File, data: &[u8], mode: Option<u32>) -> io::Result<()> {
    if let Some(mode) = mode {
        // fchmod is exact (no umask), so an existing 0o600 file stays 0o600.
        file.set_permissions(Permissions::from_mode(mode))?;
    }
    file.write_all(data)?;
    file.sync_all()
}

/// Renames `from_dir/from` to `to_dir/to`, failing with `AlreadyExists`
/// if `to` exists in any form. Both names are single components.
pub(crate) fn rename_noreplace(
    from_dir: &Dir,
    from: &OsStr,
    to_dir: &Dir,
    to: &OsStr,
) -> io::Result<()> {
    // Attack: a file or symlink planted at `to` between a check and the
    // rename. RENAME_NOREPLACE makes "does it exist" and "rename" one step.
    match rustix::fs::renameat_with(from_dir, from, to_dir, to, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(()),
        // A file system without RENAME_NOREPLACE: link(2) fails with EEXIST
        // just as atomically (and never follows a symlink at `to`).
        Err(Errno::INVAL | Errno::NOSYS) => link_then_unlink(from_dir, from, to_dir, to),
        Err(e) => Err(e.into()),
    }
}

fn link_then_unlink(from_dir: &Dir, from: &OsStr, to_dir: &Dir, to: &OsStr) -> io::Result<()> {
    match rustix::fs::linkat(from_dir, from, to_dir, to, AtFlags::empty()) {
        Ok(()) => {
            rustix::fs::unlinkat(from_dir, from, AtFlags::empty())?;
            Ok(())
        }
        // Directories cannot be hard-linked. renameat2's EINVAL was either
        // "moving a directory into itself" or "no RENAME_NOREPLACE here";
        // either way refuse rather than risk replacing the destination.
        Err(Errno::PERM) => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "cannot rename: a directory cannot move into itself, and this file system \
             cannot rename a directory without risking to replace the destination",
        )),
        Err(e) => Err(e.into()),
    }
}

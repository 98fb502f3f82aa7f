//! The plan's masks, mounted by stage 2 itself inside bubblewrap's user and
//! mount namespace, before every capability is dropped.
//!
//! Why here and not as bubblewrap arguments: bubblewrap re-reads the whole
//! of `/proc/self/mountinfo` after each read-only bind (to remount what lies
//! below it), so dozens of masks cost it milliseconds, growing faster than
//! their number. Here each mask is three syscalls of the new mount API:
//! `open_tree` clones the source (with what is mounted below it),
//! `mount_setattr` makes the whole clone read-only, nosuid and nodev (the
//! flags of bubblewrap's `--ro-bind`), and `move_mount` attaches it over the
//! target without following a symlink there.
//!
//! The masks are the same list in the same order, and they are in place
//! before the command exists: stage 2 holds CAP_SYS_ADMIN (and CAP_SETPCAP,
//! to empty the bounding set) of the sandbox's own user namespace only for
//! this, and drops them right after. Any failure ends the run, except for a
//! read-deny mask whose target was deleted since the plan (nothing is left
//! to read).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

use rustix::fs::CWD;
use rustix::mount::{MoveMountFlags, OpenTreeFlags, move_mount, open_tree};

use super::{Stage2Error, StageMask};

/// Mounts each mask's source read-only over its target, in order, then
/// enters the working directory again through them: a cwd taken before the
/// masks would still reach what they hide.
pub(super) fn apply(masks: &[StageMask]) -> Result<(), Stage2Error> {
    if masks.is_empty() {
        return Ok(());
    }
    let cwd = std::env::current_dir()
        .map_err(|e| Stage2Error::Setup(format!("cannot read the working directory: {e}")))?;
    for StageMask {
        source,
        target,
        hides,
    } in masks
    {
        match mask(source, target) {
            Ok(()) => {}
            // Gone since the plan: there is nothing left to read.
            Err(e)
                if *hides
                    && e.kind() == io::ErrorKind::NotFound
                    && rustix::fs::lstat(target).is_err_and(|e| e == rustix::io::Errno::NOENT) => {}
            Err(e) => {
                return Err(Stage2Error::Setup(format!(
                    "cannot mask {} with {}: {e}",
                    target.display(),
                    source.display()
                )));
            }
        }
    }
    std::env::set_current_dir(&cwd).map_err(|e| {
        Stage2Error::Setup(format!(
            "cannot enter the working directory {} again after masking: {e}",
            cwd.display()
        ))
    })
}

fn mask(source: &Path, target: &Path) -> io::Result<()> {
    let tree = open_tree(
        CWD,
        source,
        OpenTreeFlags::OPEN_TREE_CLONE
            | OpenTreeFlags::OPEN_TREE_CLOEXEC
            | OpenTreeFlags::AT_RECURSIVE
            | OpenTreeFlags::AT_SYMLINK_NOFOLLOW,
    )?;
    read_only(&tree)?;
    move_mount(
        &tree,
        "",
        CWD,
        target,
        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
    )?;
    Ok(())
}

/// `mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, ro+nosuid+nodev)`:
/// every mount of the detached tree at once (Linux 5.12).
fn read_only(tree: &OwnedFd) -> io::Result<()> {
    let attr = libc::mount_attr {
        attr_set: libc::MOUNT_ATTR_RDONLY | libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: a plain syscall on a descriptor we own, an empty C string and
    // a fully initialised `mount_attr` whose size we pass with it.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH | libc::AT_RECURSIVE,
            &raw const attr,
            std::mem::size_of::<libc::mount_attr>(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

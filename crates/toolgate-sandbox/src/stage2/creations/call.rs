//! One held call: read from the listener, performed or refused, answered.

use std::os::fd::{AsRawFd, OwnedFd};

use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags};
use rustix::io::Errno;

use super::place::{Caller, Place};
use super::{Beneath, DeniedNames};

/// A held call as the kernel describes it.
pub(super) struct Request(libc::seccomp_notif);

/// Waits for the next held call.
pub(super) fn receive(listener: &OwnedFd) -> Result<Request, Errno> {
    // SAFETY: an all-zero seccomp_notif is valid (plain integers), and the
    // kernel requires it zeroed.
    let mut request: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: the ioctl writes one seccomp_notif into `request`.
    let ret = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_RECV,
            &mut request as *mut libc::seccomp_notif,
        )
    };
    if ret < 0 {
        return Err(Errno::from_io_error(&std::io::Error::last_os_error()).unwrap_or(Errno::IO));
    }
    Ok(Request(request))
}

/// What the caller gets back.
enum Outcome {
    /// The call's return value.
    Value(i64),
    /// A descriptor to install in the caller; its number is the return value.
    Descriptor { fd: OwnedFd, cloexec: bool },
}

/// Performs or refuses the call and answers it. A caller that died
/// meanwhile gets nothing (the kernel has dropped the call).
pub(super) fn answer(listener: &OwnedFd, request: &Request, denied: &DeniedNames) {
    let request = &request.0;
    let outcome = Caller::new(listener, request).and_then(|caller| perform(&caller, denied));
    match outcome {
        Ok(Outcome::Descriptor { fd, cloexec }) => {
            let addfd = libc::seccomp_notif_addfd {
                id: request.id,
                flags: libc::SECCOMP_ADDFD_FLAG_SEND as u32,
                srcfd: fd.as_raw_fd() as u32,
                newfd: 0,
                newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
            };
            // SAFETY: the ioctl reads one seccomp_notif_addfd; installing
            // the descriptor also answers the call with its number.
            let ret = unsafe {
                libc::ioctl(
                    listener.as_raw_fd(),
                    libc::SECCOMP_IOCTL_NOTIF_ADDFD,
                    &addfd as *const libc::seccomp_notif_addfd,
                )
            };
            if ret < 0 {
                // Out of descriptors in the caller (EMFILE), or it died.
                let errno = std::io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EIO);
                send(listener, request.id, 0, errno);
            }
        }
        Ok(Outcome::Value(value)) => send(listener, request.id, value, 0),
        Err(errno) => send(listener, request.id, 0, errno.raw_os_error()),
    }
}

fn send(listener: &OwnedFd, id: u64, val: i64, errno: i32) {
    let response = libc::seccomp_notif_resp {
        id,
        val,
        error: -errno,
        flags: 0,
    };
    // SAFETY: the ioctl reads one seccomp_notif_resp. ENOENT (the caller
    // is gone) needs nothing more.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND,
            &response as *const libc::seccomp_notif_resp,
        );
    }
}

/// `AT_FDCWD` as the kernel sees it in a 64-bit argument register.
fn dirfd(arg: u64) -> i32 {
    arg as i32
}

/// x86_64's older calls as the `*at` calls they equal, with the working
/// directory for each directory argument: one path per kind of call.
#[cfg(target_arch = "x86_64")]
fn at_form(nr: i64, a: [u64; 6]) -> (i64, [u64; 6]) {
    let cwd = libc::AT_FDCWD as u64;
    let creat = (libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC) as u64;
    match nr {
        libc::SYS_mkdir => (libc::SYS_mkdirat, [cwd, a[0], a[1], 0, 0, 0]),
        libc::SYS_mknod => (libc::SYS_mknodat, [cwd, a[0], a[1], a[2], 0, 0]),
        libc::SYS_symlink => (libc::SYS_symlinkat, [a[0], cwd, a[1], 0, 0, 0]),
        libc::SYS_link => (libc::SYS_linkat, [cwd, a[0], cwd, a[1], 0, 0]),
        libc::SYS_rename => (libc::SYS_renameat2, [cwd, a[0], cwd, a[1], 0, 0]),
        libc::SYS_renameat => (libc::SYS_renameat2, [a[0], a[1], a[2], a[3], 0, 0]),
        libc::SYS_creat => (libc::SYS_openat, [cwd, a[0], creat, a[1], 0, 0]),
        libc::SYS_open => (libc::SYS_openat, [cwd, a[0], a[1], a[2], 0, 0]),
        _ => (nr, a),
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn at_form(nr: i64, a: [u64; 6]) -> (i64, [u64; 6]) {
    (nr, a)
}

fn perform(caller: &Caller, denied: &DeniedNames) -> Result<Outcome, Errno> {
    let (nr, a) = at_form(i64::from(caller.nr()), caller.args());
    match nr {
        libc::SYS_mkdirat => make_dir(caller, denied, dirfd(a[0]), a[1], a[2]),
        libc::SYS_mknodat => make_node(caller, denied, dirfd(a[0]), a[1], a[2], a[3]),
        libc::SYS_symlinkat => make_symlink(caller, denied, a[0], dirfd(a[1]), a[2]),
        libc::SYS_linkat => link(
            caller,
            denied,
            (dirfd(a[0]), a[1]),
            (dirfd(a[2]), a[3]),
            a[4] as u32,
        ),
        libc::SYS_renameat2 => rename(
            caller,
            denied,
            (dirfd(a[0]), a[1]),
            (dirfd(a[2]), a[3]),
            a[4] as u32,
        ),
        libc::SYS_openat => open(caller, denied, dirfd(a[0]), a[1], a[2] as u32, a[3]),
        _ => Err(Errno::NOSYS),
    }
}

/// Refuses `place` if it is a protected name in a protected directory, or
/// is or lies beneath a protected entry (an existing one, or one a host
/// program made during the run), and says so once on the command's stderr
/// (it is the keeper's too) where a message helps.
fn check(place: &Place, denied: &DeniedNames) -> Result<(), Errno> {
    let stat = rustix::fs::fstat(&place.parent)?;
    if let Some((path, first)) = denied.find(stat.st_dev, stat.st_ino, &place.name) {
        if first {
            eprintln!(
                "toolgate: refused to create {}: a protected name (the sandbox keeps it from being created)",
                path.display()
            );
        }
        return Err(Errno::ACCESS);
    }
    not_at(place, denied)
}

/// Refuses `place` if it is or lies beneath a protected entry.
fn not_at(place: &Place, denied: &DeniedNames) -> Result<(), Errno> {
    let mut path = fd_path(&place.parent)?;
    if !path.ends_with(b"/") {
        path.push(b'/');
    }
    // String-wise: `..` or `.` as the name stays beneath the parent's path,
    // so a parent beneath a protected entry refuses them too.
    path.extend_from_slice(&place.name);
    refuse_beneath(&path, denied)
}

/// The path the kernel reports for what `fd` is open on.
fn fd_path(fd: &OwnedFd) -> Result<Vec<u8>, Errno> {
    let path = rustix::fs::readlink(format!("/proc/self/fd/{}", fd.as_raw_fd()), Vec::new())?;
    Ok(path.into_bytes())
}

/// Refuses what `fd` is open on if it is, or lies beneath, a protected entry.
fn not_beneath(fd: &OwnedFd, denied: &DeniedNames) -> Result<(), Errno> {
    refuse_beneath(&fd_path(fd)?, denied)
}

/// Refuses `path` if it is or lies beneath a protected entry: an existing
/// one is read-only (`EROFS`, as its mount says while it is attached; a
/// host program that replaced it detached the mount); one a host program
/// made during the run, where a placeholder's mount used to hide it, may
/// not be written either.
fn refuse_beneath(path: &[u8], denied: &DeniedNames) -> Result<(), Errno> {
    match denied.beneath(path) {
        None => Ok(()),
        Some(Beneath::ReadOnly) => Err(Errno::ROFS),
        Some(Beneath::HostMade(path, first)) => {
            if first {
                eprintln!(
                    "toolgate: refused to write in {}: a protected name a host program made during the run (the next command finds it read-only)",
                    path.display()
                );
            }
            Err(Errno::ACCESS)
        }
    }
}

fn make_dir(
    caller: &Caller,
    denied: &DeniedNames,
    at: i32,
    path: u64,
    mode: u64,
) -> Result<Outcome, Errno> {
    let path = caller.string(path)?;
    let place = caller.locate(at, &path)?;
    check(&place, denied)?;
    let mode = caller.masked(mode)?;
    rustix::fs::mkdirat(
        &place.parent,
        place.name_as_given(),
        Mode::from_raw_mode(mode),
    )?;
    Ok(Outcome::Value(0))
}

fn make_node(
    caller: &Caller,
    denied: &DeniedNames,
    at: i32,
    path: u64,
    mode: u64,
    dev: u64,
) -> Result<Outcome, Errno> {
    let path = caller.string(path)?;
    let place = caller.locate(at, &path)?;
    check(&place, denied)?;
    let mode = caller.masked(mode)?;
    let kind = rustix::fs::FileType::from_raw_mode(mode);
    rustix::fs::mknodat(
        &place.parent,
        place.name_as_given(),
        kind,
        Mode::from_raw_mode(mode),
        dev,
    )?;
    Ok(Outcome::Value(0))
}

fn make_symlink(
    caller: &Caller,
    denied: &DeniedNames,
    target: u64,
    at: i32,
    path: u64,
) -> Result<Outcome, Errno> {
    let target = caller.string(target)?;
    let path = caller.string(path)?;
    let place = caller.locate(at, &path)?;
    check(&place, denied)?;
    rustix::fs::symlinkat(target.as_slice(), &place.parent, place.name_as_given())?;
    Ok(Outcome::Value(0))
}

fn link(
    caller: &Caller,
    denied: &DeniedNames,
    (old_at, old): (i32, u64),
    (new_at, new): (i32, u64),
    flags: u32,
) -> Result<Outcome, Errno> {
    let known = (libc::AT_SYMLINK_FOLLOW | libc::AT_EMPTY_PATH) as u32;
    if flags & !known != 0 {
        return Err(Errno::INVAL);
    }
    let old = caller.string(old)?;
    let new = caller.string(new)?;
    let new = caller.locate(new_at, &new)?;
    check(&new, denied)?;
    if old.is_empty() && flags & libc::AT_EMPTY_PATH as u32 != 0 {
        // The file behind the caller's descriptor (an O_TMPFILE made
        // visible): linked through its /proc entry, which needs no
        // capability, unlike AT_EMPTY_PATH on a descriptor.
        let (dir, name) = caller.descriptor_entry(old_at)?;
        // A second name for a file the host made there would let the
        // command write it.
        let target = rustix::fs::readlinkat(&dir, name.as_slice(), Vec::new())?;
        refuse_beneath(target.as_bytes(), denied)?;
        rustix::fs::linkat(
            &dir,
            name.as_slice(),
            &new.parent,
            new.name_as_given(),
            AtFlags::SYMLINK_FOLLOW,
        )?;
        return Ok(Outcome::Value(0));
    }
    let mut old = caller.locate(old_at, &old)?;
    if flags & libc::AT_SYMLINK_FOLLOW as u32 != 0 {
        old = caller.follow(old)?;
    }
    // The kernel follows a /proc magic link itself (`/proc/self/fd/3`).
    let follow = if old.in_proc {
        let target = rustix::fs::readlinkat(&old.parent, old.name.as_slice(), Vec::new())?;
        refuse_beneath(target.as_bytes(), denied)?;
        AtFlags::SYMLINK_FOLLOW
    } else {
        not_at(&old, denied)?;
        AtFlags::empty()
    };
    rustix::fs::linkat(
        &old.parent,
        old.name_as_given(),
        &new.parent,
        new.name_as_given(),
        follow,
    )?;
    Ok(Outcome::Value(0))
}

fn rename(
    caller: &Caller,
    denied: &DeniedNames,
    (old_at, old): (i32, u64),
    (new_at, new): (i32, u64),
    flags: u32,
) -> Result<Outcome, Errno> {
    let flags = RenameFlags::from_bits(flags).ok_or(Errno::INVAL)?;
    let old = caller.string(old)?;
    let new = caller.string(new)?;
    let old = caller.locate(old_at, &old)?;
    let new = caller.locate(new_at, &new)?;
    check(&new, denied)?;
    if flags.contains(RenameFlags::EXCHANGE) {
        // Both names change what they hold.
        check(&old, denied)?;
    } else {
        // Moving a protected entry away frees its name.
        not_at(&old, denied)?;
    }
    rustix::fs::renameat_with(
        &old.parent,
        old.name_as_given(),
        &new.parent,
        new.name_as_given(),
        flags,
    )?;
    Ok(Outcome::Value(0))
}

fn open(
    caller: &Caller,
    denied: &DeniedNames,
    at: i32,
    path: u64,
    flags: u32,
    mode: u64,
) -> Result<Outcome, Errno> {
    let flags = OFlags::from_bits_retain(flags);
    let path = caller.string(path)?;
    let mut place = caller.locate(at, &path)?;
    if !flags.intersects(OFlags::EXCL | OFlags::NOFOLLOW) {
        // O_CREAT follows a final symlink and creates its target.
        place = caller.follow(place)?;
    }
    check(&place, denied)?;
    let mode = caller.masked(mode)?;
    // Outside /proc, a symlink that appeared at the name since it was looked
    // at is not followed: it could lead to a protected name.
    let flags = if place.in_proc {
        flags
    } else {
        flags | OFlags::NOFOLLOW
    };
    let cloexec = flags.contains(OFlags::CLOEXEC);
    // A descriptor link of the caller's (`/proc/self/fd/N`) is reopened by
    // the kernel as the keeper: one that leads into /proc (an O_PATH of
    // `/proc/<keeper>/mem`) would open what only the keeper may.
    let link = place.in_proc
        && rustix::fs::statat(
            &place.parent,
            place.name.as_slice(),
            AtFlags::SYMLINK_NOFOLLOW,
        )
        .is_ok_and(|s| rustix::fs::FileType::from_raw_mode(s.st_mode).is_symlink());
    let fd = rustix::fs::openat(
        &place.parent,
        place.name_as_given(),
        flags | OFlags::CLOEXEC,
        Mode::from_raw_mode(mode),
    )?;
    if place.in_proc {
        if link && rustix::fs::fstat(&fd)?.st_dev == caller.proc_dev() {
            return Err(Errno::ACCESS);
        }
        // Where a descriptor reopened by its /proc entry leads (elsewhere
        // the entry is the name in the parent `check` passed).
        not_beneath(&fd, denied)?;
    }
    Ok(Outcome::Descriptor { fd, cloexec })
}

//! Where a held call's path leads, walked in the caller's view.
//!
//! The keeper walks the path one component at a time from the caller's
//! root, working directory or descriptor, following symlinks itself (never
//! through a name it has not looked at) and resolving `/proc/self` to the
//! caller, so that the entry it then makes is the one the caller's own call
//! would have made. Inside /proc the kernel follows its own links: nothing
//! the command writes lives there.

use std::collections::VecDeque;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

/// The kernel's limit of symlinks followed in one lookup.
const MAX_SYMLINKS: u32 = 40;

/// The longest path a call takes, with its NUL.
const PATH_MAX: usize = 4096;

/// procfs's root directory inode.
const PROC_ROOT_INO: u64 = 1;

/// The entry a path names: the directory it is (or would be) in, open, and
/// its last component.
pub(super) struct Place {
    pub(super) parent: OwnedFd,
    pub(super) name: Vec<u8>,
    /// The path ended in `/` (the entry must be a directory).
    trailing_slash: bool,
    /// The directory is in /proc.
    pub(super) in_proc: bool,
}

impl Place {
    /// The last component as the call gave it, with its trailing slash.
    pub(super) fn name_as_given(&self) -> Vec<u8> {
        let mut name = self.name.clone();
        if self.trailing_slash {
            name.push(b'/');
        }
        name
    }
}

/// The process whose call is held, pinned by its /proc directory (checked
/// to be the caller's while the call is still held, so a reused process id
/// cannot swap it).
pub(super) struct Caller {
    request: libc::seccomp_notif,
    proc_dir: OwnedFd,
    mem: std::fs::File,
    proc_dev: u64,
    tgid: u32,
    umask: u32,
}

impl Caller {
    pub(super) fn new(listener: &OwnedFd, request: &libc::seccomp_notif) -> Result<Caller, Errno> {
        let tid = request.pid;
        let proc_dir = rustix::fs::open(
            format!("/proc/{tid}"),
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let mem = rustix::fs::openat(
            &proc_dir,
            "mem",
            OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .inspect_err(|e| {
            // Refused, not let through: the path cannot be read.
            static TOLD: AtomicBool = AtomicBool::new(false);
            if *e == Errno::ACCESS && !TOLD.swap(true, Ordering::Relaxed) {
                eprintln!(
                    "toolgate: refused to create a file for a process that made itself \
                         undumpable (prctl PR_SET_DUMPABLE 0): the sandbox reads the path of \
                         each creation, and cannot read such a process's memory"
                );
            }
        })?;
        let status = read_all(&rustix::fs::openat(
            &proc_dir,
            "status",
            OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )?)?;
        // The descriptors above are the caller's only if the call is still
        // held now: its id is not reused while it is.
        let id = request.id;
        // SAFETY: the ioctl reads one u64.
        let valid = unsafe {
            libc::ioctl(
                listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
                &id as *const u64,
            )
        };
        if valid != 0 {
            return Err(Errno::SRCH);
        }
        let field = |key: &str, radix: u32| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| u32::from_str_radix(v.trim(), radix).ok())
                .ok_or(Errno::SRCH)
        };
        Ok(Caller {
            request: *request,
            proc_dev: rustix::fs::fstat(&proc_dir)?.st_dev,
            tgid: field("Tgid:", 10)?,
            umask: field("Umask:", 8)?,
            proc_dir,
            mem: std::fs::File::from(mem),
        })
    }

    /// The device of /proc as the keeper sees it.
    pub(super) fn proc_dev(&self) -> u64 {
        self.proc_dev
    }

    pub(super) fn nr(&self) -> i32 {
        self.request.data.nr
    }

    pub(super) fn args(&self) -> [u64; 6] {
        self.request.data.args
    }

    /// A NUL-terminated string from the caller's memory, read once.
    pub(super) fn string(&self, address: u64) -> Result<Vec<u8>, Errno> {
        if address == 0 {
            return Err(Errno::FAULT);
        }
        let mut out = Vec::new();
        let mut at = address;
        while out.len() < PATH_MAX {
            // Up to the end of the page: the next one may be unmapped.
            let page_left = 4096 - (at % 4096) as usize;
            let mut chunk = vec![0u8; page_left.min(PATH_MAX - out.len())];
            let read = self.mem.read_at(&mut chunk, at).map_err(|_| Errno::FAULT)?;
            if read == 0 {
                return Err(Errno::FAULT);
            }
            if let Some(end) = chunk[..read].iter().position(|b| *b == 0) {
                out.extend_from_slice(&chunk[..end]);
                return Ok(out);
            }
            out.extend_from_slice(&chunk[..read]);
            at += read as u64;
        }
        Err(Errno::NAMETOOLONG)
    }

    /// `mode` with the caller's umask applied (the keeper's own is 0), the
    /// file type bits kept.
    pub(super) fn masked(&self, mode: u64) -> Result<u32, Errno> {
        let mode = u32::try_from(mode & 0xffff_ffff).map_err(|_| Errno::INVAL)?;
        Ok((mode & libc::S_IFMT) | (mode & 0o7777 & !self.umask))
    }

    /// The caller's descriptor `fd` as an entry of its /proc `fd` directory.
    pub(super) fn descriptor_entry(&self, fd: i32) -> Result<(OwnedFd, Vec<u8>), Errno> {
        if fd < 0 {
            return Err(Errno::BADF);
        }
        let dir = rustix::fs::openat(
            &self.proc_dir,
            "fd",
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok((dir, fd.to_string().into_bytes()))
    }

    /// Where `path`, relative to the caller's descriptor `at` (or its
    /// working directory), leads.
    pub(super) fn locate(&self, at: i32, path: &[u8]) -> Result<Place, Errno> {
        if path.is_empty() {
            return Err(Errno::NOENT);
        }
        let base = if path.starts_with(b"/") {
            self.root()?
        } else if at == libc::AT_FDCWD {
            self.open_in_proc("cwd")?
        } else if at < 0 {
            return Err(Errno::BADF);
        } else {
            let dir = self
                .open_in_proc(&format!("fd/{at}"))
                .map_err(|e| if e == Errno::NOENT { Errno::BADF } else { e })?;
            if rustix::fs::fstat(&dir)?.st_mode & libc::S_IFMT != libc::S_IFDIR {
                return Err(Errno::NOTDIR);
            }
            dir
        };
        let mut hops = 0;
        self.walk(base, path, &mut hops)
    }

    /// `place` itself if it is no symlink; else where the symlink leads
    /// (repeatedly): the entry an `O_CREAT` open or a following link acts on.
    pub(super) fn follow(&self, mut place: Place) -> Result<Place, Errno> {
        let mut hops = 0;
        loop {
            if place.in_proc {
                return Ok(place);
            }
            match rustix::fs::statat(
                &place.parent,
                place.name.as_slice(),
                AtFlags::SYMLINK_NOFOLLOW,
            ) {
                Err(Errno::NOENT) => return Ok(place),
                Err(e) => return Err(e),
                Ok(stat) if FileType::from_raw_mode(stat.st_mode) != FileType::Symlink => {
                    return Ok(place);
                }
                Ok(_) => {}
            }
            hops += 1;
            if hops > MAX_SYMLINKS {
                return Err(Errno::LOOP);
            }
            let target = rustix::fs::readlinkat(&place.parent, place.name.as_slice(), Vec::new())?
                .into_bytes();
            let base = if target.starts_with(b"/") {
                self.root()?
            } else {
                place.parent
            };
            place = self.walk(base, &target, &mut hops)?;
        }
    }

    fn root(&self) -> Result<OwnedFd, Errno> {
        self.open_in_proc("root")
    }

    fn open_in_proc(&self, name: &str) -> Result<OwnedFd, Errno> {
        rustix::fs::openat(
            &self.proc_dir,
            name,
            OFlags::PATH | OFlags::CLOEXEC,
            Mode::empty(),
        )
    }

    /// Walks `path` from `base` up to its last component.
    ///
    /// Inside /proc only the caller's own directory, reached by name from
    /// /proc (`self`, `thread-self` or its pid), may be walked: the keeper
    /// opens what it finds there as itself, and a process passes every
    /// access check on its own /proc entries (`/proc/<keeper>/mem`, or a
    /// descriptor link the caller aimed at it) where the caller would not.
    fn walk(&self, mut current: OwnedFd, path: &[u8], hops: &mut u32) -> Result<Place, Errno> {
        let mut pending: VecDeque<Vec<u8>> = components(path);
        let trailing_slash = path.ends_with(b"/");
        // Whether `current`, when in /proc, is the caller's own directory or
        // below it, reached without following a link.
        let mut owned = false;
        loop {
            let stat = rustix::fs::fstat(&current)?;
            let in_proc = stat.st_dev == self.proc_dev;
            if in_proc && !owned && stat.st_ino != PROC_ROOT_INO {
                return Err(Errno::ACCESS);
            }
            let Some(name) = pending.pop_front() else {
                // "/" or "dir/.": the directory itself.
                return Ok(Place {
                    parent: current,
                    name: b".".to_vec(),
                    trailing_slash: false,
                    in_proc,
                });
            };
            if pending.is_empty() {
                return Ok(Place {
                    parent: current,
                    name,
                    trailing_slash,
                    in_proc,
                });
            }
            if name == b"." {
                continue;
            }
            if in_proc {
                let name = if stat.st_ino == PROC_ROOT_INO {
                    // `/proc/self` is the caller, not the keeper; no other
                    // process's directory, nor the rest of /proc.
                    let own = self.tgid.to_string().into_bytes();
                    if name == b"self" || name == own {
                        own
                    } else if name == b"thread-self" {
                        format!("{}/task/{}", self.tgid, self.request.pid).into_bytes()
                    } else {
                        return Err(Errno::ACCESS);
                    }
                } else {
                    name
                };
                // A link here (`cwd`, `root`, `fd/N`) is followed by the
                // kernel; where it leads is the caller's only outside /proc.
                let link = rustix::fs::statat(&current, name.as_slice(), AtFlags::SYMLINK_NOFOLLOW)
                    .is_ok_and(|s| FileType::from_raw_mode(s.st_mode) == FileType::Symlink);
                current = rustix::fs::openat(
                    &current,
                    name.as_slice(),
                    OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                    Mode::empty(),
                )?;
                owned = !link;
                continue;
            }
            let next = rustix::fs::openat(
                &current,
                name.as_slice(),
                OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )?;
            match FileType::from_raw_mode(rustix::fs::fstat(&next)?.st_mode) {
                FileType::Directory => current = next,
                FileType::Symlink => {
                    *hops += 1;
                    if *hops > MAX_SYMLINKS {
                        return Err(Errno::LOOP);
                    }
                    let target = rustix::fs::readlinkat(&next, "", Vec::new())?.into_bytes();
                    if target.is_empty() {
                        return Err(Errno::NOENT);
                    }
                    if target.starts_with(b"/") {
                        current = self.root()?;
                    }
                    for component in components(&target).into_iter().rev() {
                        pending.push_front(component);
                    }
                }
                _ => return Err(Errno::NOTDIR),
            }
        }
    }
}

/// The non-empty components of `path`.
fn components(path: &[u8]) -> VecDeque<Vec<u8>> {
    path.split(|b| *b == b'/')
        .filter(|c| !c.is_empty())
        .map(<[u8]>::to_vec)
        .collect()
}

fn read_all(fd: &impl AsFd) -> Result<String, Errno> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match rustix::io::read(fd, &mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(Errno::INTR) => {}
            Err(e) => return Err(e),
        }
    }
    String::from_utf8(out).map_err(|_| Errno::IO)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn components_skip_empty_parts() {
        let parts: Vec<Vec<u8>> = components(b"//a/./b//c/").into_iter().collect();
        assert_eq!(
            parts,
            vec![b"a".to_vec(), b".".to_vec(), b"b".to_vec(), b"c".to_vec()]
        );
        assert!(components(b"///").is_empty());
    }
}

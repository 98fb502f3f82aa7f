//! Absent protected names, refused where they would be created, with nothing
//! on the host.
//!
//! A mask needs a mount point, and a mount point needs an entry: masking
//! `.git` or `.mcp.json` where they do not exist meant a placeholder on the
//! host, which host tools saw (an empty `.mcp.json` directory breaks the
//! client that reads it) for as long as the command ran, and after a killed
//! toolgate. Instead the keeper refuses them: every system call of the
//! command that creates a name (`mkdir`, `mknod`, `symlink`, `link`,
//! `rename`, `open` with `O_CREAT`; the `*at` forms too) is handed to the
//! keeper as a seccomp user notification, and the keeper performs it itself.
//!
//! Why perform, and not only look and let the kernel go on: the kernel reads
//! the path from the command's memory again when it continues, and another
//! thread of the command can change it in between (a `foo` that was looked
//! at, a `.git` that is created). The keeper reads each path once, walks it
//! component by component in the command's view (its working directory,
//! its descriptors, `/proc/self` meaning the command), refuses the call when
//! the entry's parent directory is a protected one (compared by device and
//! inode, so every route there counts) and its name is a protected name, and
//! otherwise makes exactly that entry, with its own copy of the name. The
//! keeper is forked after every confinement, so what it makes, the command
//! could make: the same user, Landlock domain and mounts. A descriptor
//! opened for the command is installed in it atomically with the answer
//! (`SECCOMP_ADDFD_FLAG_SEND`).
//!
//! Opens that write (`O_WRONLY`, `O_RDWR`, `O_TRUNC`) are held too, and
//! every held call is refused where it would act at or beneath a protected
//! name (by the path the kernel reports for the keeper's descriptor): such
//! an entry can only be one a host program made during the run (an
//! editor's `.vscode/`, `git init`), which a placeholder's mount used to
//! hide; the next command's plan masks it read-only. Linking a file from
//! there is refused too, since a second name would be a way to write it.
//!
//! The same holds for the protected entries that exist (the plan's
//! read-only masks): their mounts stay, but a host program that deletes or
//! renames over one during the run (`git config` writes `.git/config.lock`
//! and renames it over `.git/config`) detaches the mount in every
//! namespace, and the command would find the host's new entry writable. So
//! every held call at or beneath one is refused with `EROFS`, what the
//! mount answers while it is attached.
//!
//! The keeper cannot be turned against this: it is not dumpable (the command
//! cannot read or write its memory), the listener is close-on-exec, and if
//! the keeper dies the kernel fails every held call (`ENOSYS`), it never lets
//! one through.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::Stage2Error;

mod call;
mod place;

/// An absent protected name: the directory it would appear in, by identity,
/// and the name.
#[derive(Debug)]
pub(super) struct DeniedName {
    dev: u64,
    ino: u64,
    name: Vec<u8>,
    /// The path as the plan named it, for the message.
    path: PathBuf,
    /// Whether the command was told already: once per name, so that a
    /// command retrying in a loop does not flood its own output.
    told: Arc<AtomicBool>,
}

/// The names the command may not create, and the entries it may not write.
#[derive(Debug, Default)]
pub(super) struct DeniedNames {
    absent: Vec<DeniedName>,
    /// Existing protected entries (read-only masks): nothing at or beneath
    /// them is written, whatever became of their mounts.
    read_only: Vec<PathBuf>,
}

/// Why a held call that acts at or beneath a path is refused.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Beneath<'a> {
    /// A protected name a host program made during the run; whether this is
    /// the first time it was asked for.
    HostMade(&'a Path, bool),
    /// An existing protected entry, read-only to the command.
    ReadOnly,
}

impl DeniedNames {
    /// Opens the parent directory of each absent name (inside the sandbox,
    /// after the masks). A parent that is gone fails the run: the plan no
    /// longer holds.
    pub(super) fn open(
        absent: &[PathBuf],
        read_only: &[PathBuf],
    ) -> Result<DeniedNames, Stage2Error> {
        let mut denied = Vec::new();
        for path in absent {
            let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
                return Err(Stage2Error::Setup(format!(
                    "cannot protect {}: not a name in a directory",
                    path.display()
                )));
            };
            let stat = rustix::fs::stat(parent).map_err(|e| {
                Stage2Error::Setup(format!(
                    "cannot protect {}: {}: {e}",
                    path.display(),
                    parent.display()
                ))
            })?;
            denied.push(DeniedName {
                dev: stat.st_dev,
                ino: stat.st_ino,
                name: OsString::from(name).into_vec(),
                path: path.clone(),
                told: Arc::default(),
            });
        }
        Ok(DeniedNames {
            absent: denied,
            read_only: read_only.to_vec(),
        })
    }

    pub(super) fn is_empty(&self) -> bool {
        self.absent.is_empty() && self.read_only.is_empty()
    }

    /// Why an entry at `path` (as the keeper sees it) may not be written,
    /// if it is or lies beneath a denied one: an existing protected entry,
    /// or an absent name that exists only because a host program made it
    /// during the run (the command could not).
    fn beneath(&self, path: &[u8]) -> Option<Beneath<'_>> {
        let under = |denied: &Path| {
            path.strip_prefix(denied.as_os_str().as_encoded_bytes())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(b"/"))
        };
        if self.read_only.iter().any(|p| under(p)) {
            return Some(Beneath::ReadOnly);
        }
        self.absent
            .iter()
            .find(|d| under(&d.path))
            .map(|d| Beneath::HostMade(d.path.as_path(), !d.told.swap(true, Ordering::Relaxed)))
    }

    /// The denied entry `name` in the directory with `(dev, ino)`, if any,
    /// and whether this is the first time it was asked for.
    fn find(&self, dev: u64, ino: u64, name: &[u8]) -> Option<(&Path, bool)> {
        self.absent
            .iter()
            .find(|d| d.dev == dev && d.ino == ino && d.name == name)
            .map(|d| (d.path.as_path(), !d.told.swap(true, Ordering::Relaxed)))
    }
}

/// Whether this kernel and host let the keeper guard creations: a listener
/// that installs descriptors with the answer (Linux 5.14), and a keeper
/// allowed to read its command's memory (Yama's ptrace scope below 2, which
/// admits ancestors).
pub fn supported() -> bool {
    let release = rustix::system::uname();
    let release = release.release().to_string_lossy();
    let mut numbers = release
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse::<u32>().ok());
    let version = (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0));
    let yama = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .unwrap_or(0);
    version >= (5, 14) && yama < 2
}

/// Most keeper threads serving calls at once. A call can block the thread
/// that performs it (opening a FIFO waits for its other end); more threads
/// are started while all are busy, up to this many.
const MAX_WORKERS: usize = 32;

/// Starts refusing `denied` for every process this thread forks from now on:
/// installs the filter on this thread only (the workers, started first, stay
/// unfiltered: their own creations must not come back to them) and serves
/// it. Returns the umask the command must get back (the keeper works with
/// none and applies the command's own).
pub(super) fn guard(denied: DeniedNames) -> Result<libc::mode_t, Stage2Error> {
    let setup = |what: &str, e: &dyn std::fmt::Display| {
        Stage2Error::Setup(format!("cannot guard protected names: {what}: {e}"))
    };
    // Attack: the command reads or patches the keeper's memory (its copy of
    // a path, its table of names) through /proc or process_vm_writev.
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .map_err(|e| setup("not dumpable", &e))?;
    // SAFETY: umask only swaps the process's mask.
    let umask = unsafe { libc::umask(0) };
    let (send, receive) = std::sync::mpsc::sync_channel::<OwnedFd>(1);
    let state = Arc::new(Workers {
        denied,
        idle: AtomicUsize::new(0),
        started: AtomicUsize::new(0),
    });
    std::thread::Builder::new()
        .name("guard".to_owned())
        .spawn(move || {
            if let Ok(listener) = receive.recv() {
                serve(state, Arc::new(listener));
            }
        })
        .map_err(|e| setup("the first worker", &e))?;
    let listener = install_filter().map_err(|e| setup("the seccomp filter", &e))?;
    send.send(listener)
        .map_err(|e| setup("the first worker", &e))?;
    Ok(umask)
}

struct Workers {
    denied: DeniedNames,
    /// Workers waiting for a call.
    idle: AtomicUsize,
    started: AtomicUsize,
}

/// One worker: receives a held call, performs or refuses it, answers.
fn serve(state: Arc<Workers>, listener: Arc<OwnedFd>) {
    state.started.fetch_add(1, Ordering::SeqCst);
    loop {
        state.idle.fetch_add(1, Ordering::SeqCst);
        let request = call::receive(&listener);
        let idle = state.idle.fetch_sub(1, Ordering::SeqCst) - 1;
        let request = match request {
            Ok(request) => request,
            // The caller died before the call was read; go on.
            Err(rustix::io::Errno::NOENT | rustix::io::Errno::INTR) => continue,
            // The listener is gone: nothing left to serve.
            Err(_) => return,
        };
        if idle == 0 && state.started.load(Ordering::SeqCst) < MAX_WORKERS {
            // Started from this unfiltered thread, so unfiltered too.
            let (state, listener) = (Arc::clone(&state), Arc::clone(&listener));
            let _ = std::thread::Builder::new()
                .name("guard".to_owned())
                .spawn(move || serve(state, listener));
        }
        call::answer(&listener, &request, &state.denied);
    }
}

/// `SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP`: the caller's wake-up is handed to
/// the worker directly (Linux 6.6), which saves a scheduler round trip.
const SYNC_WAKE_UP: u64 = 1;

/// Installs the filter on the calling thread and returns its listener.
fn install_filter() -> std::io::Result<OwnedFd> {
    let mut program = filter_program();
    let prog = libc::sock_fprog {
        len: u16::try_from(program.len()).map_err(std::io::Error::other)?,
        filter: program.as_mut_ptr(),
    };
    // SAFETY: `prog` points at `program`, alive for the call; the kernel
    // copies the program. No other memory is passed.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &prog as *const libc::sock_fprog,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let fd = i32::try_from(fd).map_err(std::io::Error::other)?;
    // SAFETY: the kernel just returned this new descriptor (close-on-exec),
    // owned by nobody else.
    let listener = unsafe { OwnedFd::from_raw_fd(fd) };
    let flags = SYNC_WAKE_UP;
    // SAFETY: the ioctl reads one u64 flag word by value. Failing (before
    // Linux 6.6) only costs speed.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS,
            flags,
        );
    }
    Ok(listener)
}

/// The system calls that create a name, by number.
#[cfg(target_arch = "x86_64")]
const CREATING: &[i64] = &[
    libc::SYS_mkdir,
    libc::SYS_mkdirat,
    libc::SYS_mknod,
    libc::SYS_mknodat,
    libc::SYS_symlink,
    libc::SYS_symlinkat,
    libc::SYS_link,
    libc::SYS_linkat,
    libc::SYS_rename,
    libc::SYS_renameat,
    libc::SYS_renameat2,
    libc::SYS_creat,
];
#[cfg(not(target_arch = "x86_64"))]
const CREATING: &[i64] = &[
    libc::SYS_mkdirat,
    libc::SYS_mknodat,
    libc::SYS_symlinkat,
    libc::SYS_linkat,
    libc::SYS_renameat2,
];

/// Opening calls, with the argument that holds their flags: held only when
/// they create or write (`O_CREAT`, `O_WRONLY`, `O_RDWR`, `O_TRUNC`).
#[cfg(target_arch = "x86_64")]
const OPENING: &[(i64, u32)] = &[(libc::SYS_open, 1), (libc::SYS_openat, 2)];
#[cfg(not(target_arch = "x86_64"))]
const OPENING: &[(i64, u32)] = &[(libc::SYS_openat, 2)];

/// The open flags that make an open held.
const WRITING_FLAGS: u32 = (libc::O_CREAT | libc::O_WRONLY | libc::O_RDWR | libc::O_TRUNC) as u32;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xc000_00b7;

/// x86_64's x32 system calls carry this bit; they are refused (the same
/// `mkdir` by another number would pass the checks by number).
#[cfg(target_arch = "x86_64")]
const X32_BIT: u32 = 0x4000_0000;

const LD_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const JEQ: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
#[cfg(target_arch = "x86_64")]
const JGE: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
const JSET: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
const RET: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

fn insn(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// Offset of the low 32 bits of argument `n` in `struct seccomp_data`.
fn arg_low(n: u32) -> u32 {
    let base = 16 + 8 * n;
    if cfg!(target_endian = "little") {
        base
    } else {
        base + 4
    }
}

/// The classic BPF program: hold the creating calls, answer `openat2`
/// (whose flags lie in memory a filter cannot read) with ENOSYS so that libc
/// falls back to `openat`, let everything else through (the main filter
/// judges it).
fn filter_program() -> Vec<libc::sock_filter> {
    const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
    const NOTIFY: u32 = libc::SECCOMP_RET_USER_NOTIF;
    let enosys = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
    // Tail, from the end: [.. opening checks .., ALLOW, ENOSYS, NOTIFY].
    let mut tail: Vec<libc::sock_filter> = Vec::new();
    for (_, arg) in OPENING {
        tail.push(insn(LD_ABS, 0, 0, arg_low(*arg)));
        // Creating or writing: to NOTIFY (the last instruction), else to ALLOW.
        tail.push(insn(JSET, 0, 0, WRITING_FLAGS));
    }
    tail.push(insn(RET, 0, 0, ALLOW));
    tail.push(insn(RET, 0, 0, enosys));
    tail.push(insn(RET, 0, 0, NOTIFY));
    let tail_len = tail.len();
    // Fix the opening checks' jumps: from the JSET at index i, NOTIFY is at
    // tail_len - 1 and ALLOW at tail_len - 3.
    for (i, ins) in tail.iter_mut().enumerate() {
        if ins.code == JSET {
            ins.jt = u8::try_from(tail_len - 1 - i - 1).unwrap_or(u8::MAX);
            ins.jf = u8::try_from(tail_len - 3 - i - 1).unwrap_or(u8::MAX);
        }
    }
    // Dispatch on the number: each check jumps into the tail.
    let mut dispatch: Vec<(u32, Target)> = CREATING
        .iter()
        .map(|nr| (*nr as u32, Target::Notify))
        .collect();
    for (index, (nr, _)) in OPENING.iter().enumerate() {
        dispatch.push((*nr as u32, Target::Opening(index)));
    }
    dispatch.push((libc::SYS_openat2 as u32, Target::Enosys));
    let mut head = vec![
        insn(LD_ABS, 0, 0, 4),
        // Another architecture: the main filter refuses it.
        insn(JEQ, 1, 0, AUDIT_ARCH),
        insn(RET, 0, 0, ALLOW),
        insn(LD_ABS, 0, 0, 0),
    ];
    #[cfg(target_arch = "x86_64")]
    head.push(insn(JGE, 0, 1, X32_BIT));
    #[cfg(target_arch = "x86_64")]
    head.push(insn(RET, 0, 0, enosys));
    let checks = dispatch.len();
    for (i, (nr, target)) in dispatch.into_iter().enumerate() {
        // Instructions after this one up to the tail's start.
        let to_tail = checks - i - 1 + 1;
        let offset = match target {
            Target::Opening(index) => index * 2,
            Target::Enosys => tail_len - 2,
            Target::Notify => tail_len - 1,
        };
        head.push(insn(
            JEQ,
            u8::try_from(to_tail + offset).unwrap_or(u8::MAX),
            0,
            nr,
        ));
    }
    // No check matched: jump over the opening checks to ALLOW.
    head.push(insn(RET, 0, 0, ALLOW));
    head.extend(tail);
    head
}

#[derive(Clone, Copy)]
enum Target {
    Notify,
    Enosys,
    Opening(usize),
}

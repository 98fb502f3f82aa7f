//! A pid namespace of the command's own, whose init is the program toolgate execs
//! (bubblewrap), tied to toolgate's life; and, where no pids cgroup can be had, the
//! process cap held by that namespace's `pid_max`.
//!
//! Why a namespace of its own, also under bubblewrap (which makes one itself): when the
//! init of a pid namespace dies, the kernel kills every process in it, nested namespaces
//! included, whatever they are doing. bubblewrap's own pid 1 gets its parent-death
//! signal only at the end of its setup; until then it waits, in a read of an eventfd, for
//! bubblewrap's outer process to write its uid map. Attack: toolgate is SIGKILLed right
//! after `process_start`; the outer bubblewrap dies with it (its death signal) before that
//! write, and its child waits for ever, reparented to the host's init, in the command's
//! cgroup, with every descriptor it was given. No watcher inside the sandbox ever starts,
//! so nothing of ours could end it. As the init of a namespace of ours, the outer
//! bubblewrap takes that child with it, at any moment of its setup.
//!
//! The cap: since Linux 6.14 `/proc/sys/kernel/pid_max` is per pid namespace: the value a
//! process reads and writes is that of its own (active) pid namespace, and a fork needs a
//! free pid at every level, so a namespace with a small `pid_max` bounds everything forked
//! in it, also for uid 0, for which RLIMIT_NPROC does nothing. This is the fallback for
//! root on machines without a usable pids controller (a container with a read-only
//! cgroupfs, a cgroup v2 desktop where toolgate is not alone in its cgroup).
//!
//! The kernel refuses a `pid_max` below 301 (`echo 60 > pid_max` fails with EINVAL, which
//! a shell reports as "I/O error"), and pids below 300 are handed out only until the
//! allocator first wraps (`RESERVED_PIDS`). So the cap is set in two writes: `pid_max` =
//! 299 + N, and `ns_last_pid` = 300, which starts allocation at 301 and so in the range
//! [300, 299 + N) from the first fork on: N - 1 pids besides the namespace's init.
//!
//! How the child gets there, between `fork` and `exec` (async-signal-safe: raw syscalls
//! on values prepared before the fork):
//! 1. `unshare(CLONE_NEWPID | CLONE_NEWNS)`: the child's next child is pid 1 of a new
//!    pid namespace, in a mount namespace of its own.
//! 2. A raw `clone` (not libc's `fork`, which runs atfork handlers). The grandchild is in
//!    the namespace. It asks for SIGKILL when its parent dies and checks that the parent
//!    still lives; makes its mounts private and mounts a /proc of the new pid namespace
//!    (bubblewrap reads `/proc/<pid>/ns` of its child by the pid it sees, and a host
//!    /proc knows no such pid; the mount propagates nowhere); with a cap, writes
//!    `ns_last_pid` and `pid_max` (sysctls resolve against the writer's pid namespace, so
//!    these are the new namespace's). Then it returns to exec the command as the
//!    namespace's init.
//! 3. The child stays as the command's stand-in towards the runner ([`stand_in`]): it
//!    dies with toolgate (the runner's parent-death signal), which kills the init and so
//!    the namespace; it passes on the group's signals as they would have acted on the
//!    init (an init ignores signals it has no handler for); and it ends as the init
//!    ended.
//!
//! Needs CAP_SYS_ADMIN (toolgate as root); [`PidNamespace::available`] and
//! [`PidNamespace::available_capped`] say whether this kernel and process can do it,
//! by trying once.

mod stand_in;

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::OnceLock;

use rustix::fs::{Mode, OFlags};
use rustix::process::Signal;
use tokio::process::Command;

/// `RESERVED_PIDS` of the kernel: below it pids are used only before the first wrap.
const RESERVED_PIDS: u64 = 300;

/// A pid namespace for one command, with or without a cap on its tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PidNamespace {
    cap: Option<Cap>,
}

/// The two sysctl values of a cap of N tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cap {
    pid_max: Digits,
    last_pid: Digits,
}

/// A number as decimal ASCII in a fixed buffer, so the child writes it without allocating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Digits {
    bytes: [u8; 20],
    len: usize,
}

impl Digits {
    fn of(mut value: u64) -> Digits {
        let mut bytes = [0u8; 20];
        let mut len = 0;
        loop {
            bytes[len] = b'0' + (value % 10) as u8;
            len += 1;
            value /= 10;
            if value == 0 {
                break;
            }
        }
        bytes[..len].reverse();
        Digits { bytes, len }
    }

    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl PidNamespace {
    /// At most `processes` tasks, the command's init included (at least 2: the
    /// kernel's smallest `pid_max` is 301).
    pub(crate) fn capped(processes: u64) -> PidNamespace {
        let pid_max = (RESERVED_PIDS - 1)
            .saturating_add(processes.max(2))
            .min(1 << 22);
        PidNamespace {
            cap: Some(Cap {
                pid_max: Digits::of(pid_max),
                last_pid: Digits::of(RESERVED_PIDS),
            }),
        }
    }

    /// A namespace that only ties the command's processes to its init.
    pub(crate) fn uncapped() -> PidNamespace {
        PidNamespace { cap: None }
    }

    /// Whether a pid namespace of the command's own can be made here (root, or
    /// CAP_SYS_ADMIN): tried once per process with `/bin/sh -c 'exit 0'`, unless
    /// [`PidNamespace::seed`] gave the answer of the cached probe.
    pub(crate) fn available() -> Result<(), String> {
        AVAILABLE.get_or_init(probe_own).clone()
    }

    /// Whether a capped pid namespace can be made here (root with a kernel that keeps
    /// `pid_max` per namespace): tried once per process with `/bin/sh -c 'exit 0'`,
    /// unless [`PidNamespace::seed`] gave the answer.
    pub(crate) fn available_capped() -> Result<(), String> {
        AVAILABLE_CAPPED.get_or_init(probe_capped).clone()
    }

    /// Takes both answers from the machine's probe (cached with it per kernel, user
    /// and capabilities), sparing a short-lived process the two trial runs.
    pub(crate) fn seed(found: &crate::probe::PidNamespaces) {
        let _ = AVAILABLE.set(found.own.clone());
        let _ = AVAILABLE_CAPPED.set(found.capped.clone());
    }

    /// Makes the command the init of a new pid namespace (see the module doc).
    /// Register it after every other `pre_exec` hook that must run in the child that
    /// execs: hooks registered later run in the grandchild only.
    pub(crate) fn apply_before_exec(self, command: &mut Command) {
        // SAFETY: runs in the forked child before exec. Only raw syscalls (unshare,
        // open, pipe2, clone, mount, write, close, prctl, poll, sigprocmask, signalfd,
        // read, wait4, kill, exit) on values copied before the fork: no allocation, no
        // lock. The raw clone duplicates this single-threaded child; the copy returns
        // into std's exec path like the child.
        unsafe {
            command.pre_exec(move || self.enter());
        }
    }

    fn enter(&self) -> io::Result<()> {
        // SAFETY: the child is single-threaded; nothing shares its descriptor table.
        unsafe {
            rustix::thread::unshare_unsafe(
                rustix::thread::UnshareFlags::NEWPID | rustix::thread::UnshareFlags::NEWNS,
            )?;
        };
        // The host's procfs, opened before the init covers /proc with its own: the
        // stand-in reads the init's signal dispositions there, by its host pid.
        let host_proc = rustix::fs::open(
            c"/proc",
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        // Held by the stand-in alone (close-on-exec, and the init closes its copy): the
        // init sees it hang up once the stand-in is gone.
        let (alive_read, alive_write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
        // SAFETY: a raw fork (SIGCHLD as the exit signal, no new stack): both copies
        // go on with their own copy of this stack.
        let pid = unsafe { libc::syscall(libc::SYS_clone, libc::SIGCHLD, 0, 0, 0, 0) };
        match pid {
            -1 => Err(io::Error::last_os_error()),
            0 => {
                drop(alive_write);
                drop(host_proc);
                self.as_init(&alive_read)
            }
            pid => {
                drop(alive_read);
                stand_in::serve(pid as i32, &host_proc, &alive_write)
            }
        }
    }

    /// In the grandchild, pid 1 of the new namespace, before exec.
    fn as_init(&self, alive: &OwnedFd) -> io::Result<()> {
        rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
        // Attack: toolgate is killed between the clone and the prctl above, taking the
        // stand-in with it: the death signal is then never sent and the command would
        // run unsupervised. getppid says nothing here (a parent outside the namespace
        // reads as 0); the stand-in's end of this pipe closes only when it exits.
        let mut poll = libc::pollfd {
            fd: alive.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll on one valid pollfd, without waiting.
        if unsafe { libc::poll(&mut poll, 1, 0) } == -1 {
            return Err(io::Error::last_os_error());
        }
        if poll.revents & (libc::POLLHUP | libc::POLLIN) != 0 {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
        // SAFETY: raw mount syscalls with static C strings. Private first, so that the
        // new /proc does not propagate back to the host's mount namespace.
        unsafe {
            let none = c"none".as_ptr();
            if libc::mount(
                none,
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
            let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
            if libc::mount(
                c"proc".as_ptr(),
                c"/proc".as_ptr(),
                c"proc".as_ptr(),
                flags,
                std::ptr::null(),
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
        }
        if let Some(cap) = self.cap {
            write_sysctl(c"/proc/sys/kernel/ns_last_pid", cap.last_pid.as_bytes())?;
            write_sysctl(c"/proc/sys/kernel/pid_max", cap.pid_max.as_bytes())?;
        }
        Ok(())
    }
}

fn write_sysctl(path: &std::ffi::CStr, value: &[u8]) -> io::Result<()> {
    let fd = rustix::fs::open(path, OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty())?;
    rustix::io::write(&fd, value)?;
    Ok(())
}

static AVAILABLE: OnceLock<Result<(), String>> = OnceLock::new();
static AVAILABLE_CAPPED: OnceLock<Result<(), String>> = OnceLock::new();

/// Tries a pid namespace of a command's own.
pub(crate) fn probe_own() -> Result<(), String> {
    probe(PidNamespace::uncapped(), "a pid namespace of its own")
}

/// Tries a capped pid namespace.
pub(crate) fn probe_capped() -> Result<(), String> {
    PidNamespace::available()?;
    probe(PidNamespace::capped(8), "a capped pid namespace").map_err(|e| {
        format!("this kernel keeps no pid_max per pid namespace (Linux 6.14 or later does): {e}")
    })
}

fn probe(namespace: PidNamespace, what: &str) -> Result<(), String> {
    if !rustix::process::geteuid().is_root() {
        return Err(format!("needs root (CAP_SYS_ADMIN) for {what}"));
    }
    let mut command = Command::new("/bin/sh");
    command
        .args(["-c", "exit 0"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    namespace.apply_before_exec(&mut command);
    let mut std_command = command.into_std();
    match std_command.status() {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(format!("{what} failed here ({status})")),
        Err(e) => Err(format!("{what} cannot be made here: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn digits_are_decimal_ascii() {
        for value in [0u64, 7, 300, 363, 4_194_304, u64::MAX] {
            assert_eq!(Digits::of(value).as_bytes(), value.to_string().as_bytes());
        }
    }

    #[test]
    fn the_cap_counts_the_init_and_never_goes_below_the_kernels_minimum() {
        let cases = [(64, 363), (2, 301), (1, 301), (0, 301), (u64::MAX, 1 << 22)];
        for (processes, pid_max) in cases {
            assert_eq!(
                PidNamespace::capped(processes).cap.map(|c| c.pid_max),
                Some(Digits::of(pid_max)),
                "{processes}"
            );
        }
    }
}

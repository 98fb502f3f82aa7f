//! The process cap where no pids cgroup can be had: a pid namespace with its own
//! `pid_max`.
//!
//! Since Linux 6.14 `/proc/sys/kernel/pid_max` is per pid namespace: the value a process
//! reads and writes is that of its own (active) pid namespace, and a fork needs a free
//! pid at every level, so a namespace with a small `pid_max` bounds everything forked in
//! it, also for uid 0, for which RLIMIT_NPROC does nothing. This is the fallback for root
//! on machines without a usable pids controller (a container with a read-only cgroupfs,
//! a cgroup v2 desktop where toolgate is not alone in its cgroup).
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
//!    the namespace; it makes its mounts private and mounts a /proc of the new pid
//!    namespace (bubblewrap reads `/proc/<pid>/ns` of its child by the pid it sees, and
//!    a host /proc knows no such pid; the mount propagates nowhere). Then it writes
//!    `ns_last_pid` and `pid_max` (sysctls resolve against the writer's pid namespace,
//!    so these are the new namespace's), asks for SIGKILL when its parent dies, and
//!    returns to exec the command as the namespace's init. When that init exits, the
//!    kernel kills everything else in the namespace: nothing the command started
//!    outlives it.
//! 3. The child closes every descriptor (so std's exec-error pipe and the output pipes
//!    are the grandchild's alone), waits for the grandchild and ends as it ended: the
//!    same exit code, or death by the same signal. A signal that kills the child (the
//!    runner's SIGTERM or SIGKILL to the group, which reaches both) kills the grandchild
//!    through the parent-death signal, and with it the whole namespace.
//!
//! Needs CAP_SYS_ADMIN (toolgate as root); [`PidNamespaceCap::available`] says whether
//! this kernel and process can do it, by trying once.

use std::io;
use std::sync::OnceLock;

use rustix::fs::{Mode, OFlags};
use rustix::process::{Signal, WaitOptions};
use tokio::process::Command;

/// `RESERVED_PIDS` of the kernel: below it pids are used only before the first wrap.
const RESERVED_PIDS: u64 = 300;

/// A cap of `processes` tasks (processes and threads) for one command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PidNamespaceCap {
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

impl PidNamespaceCap {
    /// At most `processes` tasks, the command's init included (at least 2: the
    /// kernel's smallest `pid_max` is 301).
    pub(crate) fn new(processes: u64) -> PidNamespaceCap {
        let pid_max = (RESERVED_PIDS - 1)
            .saturating_add(processes.max(2))
            .min(1 << 22);
        PidNamespaceCap {
            pid_max: Digits::of(pid_max),
            last_pid: Digits::of(RESERVED_PIDS),
        }
    }

    /// Whether a capped pid namespace can be made here (root with a kernel that keeps
    /// `pid_max` per namespace): tried once per process with `/bin/sh -c 'exit 0'`.
    pub(crate) fn available() -> Result<(), String> {
        static AVAILABLE: OnceLock<Result<(), String>> = OnceLock::new();
        AVAILABLE.get_or_init(probe).clone()
    }

    /// Makes the command the init of a new pid namespace capped at this many tasks
    /// (see the module doc). Register it after every other `pre_exec` hook that must
    /// run in the child that execs: hooks registered later run in the grandchild only.
    pub(crate) fn apply_before_exec(self, command: &mut Command) {
        // SAFETY: runs in the forked child before exec. Only raw syscalls (unshare,
        // clone, open, write, close, prctl, wait4, kill, exit) on values copied before
        // the fork: no allocation, no lock. The raw clone duplicates this
        // single-threaded child; the copy returns into std's exec path like the child.
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
        // SAFETY: a raw fork (SIGCHLD as the exit signal, no new stack): both copies
        // go on with their own copy of this stack.
        let pid = unsafe { libc::syscall(libc::SYS_clone, libc::SIGCHLD, 0, 0, 0, 0) };
        match pid {
            -1 => Err(io::Error::last_os_error()),
            0 => self.as_init(),
            pid => wait_and_end_like(pid as i32),
        }
    }

    /// In the grandchild, pid 1 of the new namespace, before exec.
    fn as_init(&self) -> io::Result<()> {
        rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
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
        write_sysctl(c"/proc/sys/kernel/ns_last_pid", self.last_pid.as_bytes())?;
        write_sysctl(c"/proc/sys/kernel/pid_max", self.pid_max.as_bytes())?;
        Ok(())
    }
}

fn write_sysctl(path: &std::ffi::CStr, value: &[u8]) -> io::Result<()> {
    let fd = rustix::fs::open(path, OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty())?;
    rustix::io::write(&fd, value)?;
    Ok(())
}

/// In the child: waits for the grandchild and ends the way it ended. Never returns.
fn wait_and_end_like(pid: i32) -> ! {
    // SAFETY: raw syscalls only. close_range on every descriptor: the child needs none,
    // and must not hold std's exec-error pipe open (spawn would wait for it forever)
    // nor the command's output pipes.
    unsafe {
        libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32);
    }
    let child = rustix::process::Pid::from_raw(pid);
    let status = loop {
        match rustix::process::waitpid(child, WaitOptions::empty()) {
            Err(rustix::io::Errno::INTR) => continue,
            Ok(Some((_, status))) => break Some(status),
            _ => break None,
        }
    };
    let code = match status {
        Some(status) if status.exited() => status.exit_status().unwrap_or(1),
        Some(status) => match status.terminating_signal() {
            Some(signal) => {
                // SAFETY: restoring the default action and raising the signal the
                // grandchild died of, so the runner sees the same death; raw syscalls.
                unsafe {
                    libc::signal(signal, libc::SIG_DFL);
                    libc::kill(libc::getpid(), signal);
                }
                128 + signal
            }
            None => 1,
        },
        None => 1,
    };
    // SAFETY: `_exit` skips atexit handlers and stdio flushing, as a forked child must.
    unsafe { libc::_exit(code) }
}

fn probe() -> Result<(), String> {
    if !rustix::process::geteuid().is_root() {
        return Err("needs root (CAP_SYS_ADMIN) for a pid namespace of its own".to_owned());
    }
    let mut command = Command::new("/bin/sh");
    command
        .args(["-c", "exit 0"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    PidNamespaceCap::new(8).apply_before_exec(&mut command);
    let mut std_command = command.into_std();
    match std_command.status() {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(format!("a capped pid namespace failed here ({status})")),
        Err(e) => Err(format!(
            "this kernel keeps no pid_max per pid namespace (Linux 6.14 or later does): {e}"
        )),
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
                PidNamespaceCap::new(processes).pid_max,
                Digits::of(pid_max),
                "{processes}"
            );
        }
    }
}

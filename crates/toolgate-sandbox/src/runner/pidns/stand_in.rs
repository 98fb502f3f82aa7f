//! The runner's child once the command is the init of a pid namespace of its own: it
//! stands in for that init towards the runner, which waits for it, signals its group
//! and reads its exit status as the command's.
//!
//! - It dies with toolgate: the runner's parent-death signal, set before the fork, is
//!   its own. The init's death signal is tied to it, and the init's death ends the
//!   namespace.
//! - It passes on TERM, INT, HUP and QUIT (what the runner and `process_kill` send to the
//!   group) as they would have acted on the init, had it not been one: the kernel drops
//!   a signal sent to a namespace's init that the init has no handler for, so a
//!   bubblewrap that a SIGTERM used to end would go on. When the init neither ignores
//!   nor handles the signal, the stand-in kills it and ends by that signal itself; when
//!   it does, the stand-in does nothing either.
//! - It ends as the init ended: the same exit code, or death by the same signal.
//!
//! Everything here may run between `fork` and `exec` of a multi-threaded toolgate (when
//! no stage 2 binary is at hand, or its exec failed): raw syscalls and stack buffers
//! only. Usually it runs in stage 2's binary, which the child execs first.

use std::os::fd::{AsRawFd, OwnedFd};

use rustix::process::{Pid, WaitOptions, WaitStatus};

use super::Digits;

/// The group's signals the stand-in passes on (SIGKILL needs no passing on: it kills an
/// init from outside its namespace too).
const PASSED_ON: [i32; 4] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT];

/// Stands in for `init` until it ends, then ends the same way. `host_proc`: the host's
/// procfs; `alive`: the write end the init watches.
pub(super) fn serve(init: i32, host_proc: &OwnedFd, alive: &OwnedFd) -> ! {
    // Blocked and read from a signalfd, so that neither the init's SIGCHLD nor a
    // signal to pass on can arrive between a look and the wait that follows it.
    // SAFETY: sigemptyset/sigaddset/sigprocmask/signalfd are async-signal-safe and
    // work on a set on this stack.
    let (set, signals) = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for signal in PASSED_ON.into_iter().chain([libc::SIGCHLD]) {
            libc::sigaddset(&mut set, signal);
        }
        libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        (set, libc::signalfd(-1, &set, libc::SFD_CLOEXEC))
    };
    // The stand-in needs no other descriptor, and must not hold std's exec-error pipe
    // open (spawn would wait for it forever) nor the command's output pipes.
    close_all_but([host_proc.as_raw_fd(), alive.as_raw_fd(), signals]);
    let child = Pid::from_raw(init);
    if signals == -1 {
        // No signalfd: wait plainly; a signal to the group then ends the stand-in,
        // and the init with it.
        // SAFETY: unblocks the set blocked above.
        unsafe { libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) };
        let status = loop {
            match rustix::process::waitpid(child, WaitOptions::empty()) {
                Err(rustix::io::Errno::INTR) => continue,
                Ok(Some((_, status))) => break Some(status),
                _ => break None,
            }
        };
        end_like(status, None)
    }
    let mut passed_on = None;
    let status = loop {
        match rustix::process::waitpid(child, WaitOptions::NOHANG) {
            Ok(Some((_, status))) => break Some(status),
            Ok(None) | Err(rustix::io::Errno::INTR) => {}
            Err(_) => break None,
        }
        // SAFETY: reads one signalfd_siginfo into a zeroed struct on this stack.
        let signal = unsafe {
            let mut info: libc::signalfd_siginfo = std::mem::zeroed();
            let size = std::mem::size_of::<libc::signalfd_siginfo>();
            let read = libc::read(signals, (&raw mut info).cast(), size);
            if read == size as isize {
                i32::try_from(info.ssi_signo).unwrap_or(0)
            } else {
                0
            }
        };
        if PASSED_ON.contains(&signal)
            && passed_on.is_none()
            && !init_takes_care_of(host_proc, init, signal)
        {
            passed_on = Some(signal);
            // SAFETY: SIGKILL to our own child, which is not reaped yet (its pid is ours).
            unsafe { libc::kill(init, libc::SIGKILL) };
        }
    };
    end_like(status, passed_on)
}

/// Closes every descriptor but those in `keep` (-1 entries are ignored).
fn close_all_but(mut keep: [i32; 3]) {
    keep.sort_unstable();
    let mut from: u32 = 0;
    for fd in keep {
        let Ok(fd) = u32::try_from(fd) else { continue };
        if fd > from {
            // SAFETY: close_range on numbers only; nothing else uses this table.
            unsafe { libc::syscall(libc::SYS_close_range, from, fd - 1, 0u32) };
        }
        from = fd.saturating_add(1).max(from);
    }
    // SAFETY: as above.
    unsafe { libc::syscall(libc::SYS_close_range, from, u32::MAX, 0u32) };
}

/// Whether the init ignores or handles `signal` (its `SigIgn` or `SigCgt` in the host's
/// `/proc/<pid>/status`); false when that cannot be read.
fn init_takes_care_of(host_proc: &OwnedFd, init: i32, signal: i32) -> bool {
    let Ok(pid) = u64::try_from(init) else {
        return false;
    };
    let mut path = [0u8; 32];
    let digits = Digits::of(pid);
    let digits = digits.as_bytes();
    let suffix = b"/status\0";
    path[..digits.len()].copy_from_slice(digits);
    path[digits.len()..digits.len() + suffix.len()].copy_from_slice(suffix);
    let mut status = [0u8; 4096];
    let mut len = 0;
    // SAFETY: openat/read/close on a NUL-terminated path and a buffer on this stack.
    unsafe {
        let fd = libc::openat(
            host_proc.as_raw_fd(),
            path.as_ptr().cast(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if fd == -1 {
            return false;
        }
        while len < status.len() {
            let read = libc::read(fd, status[len..].as_mut_ptr().cast(), status.len() - len);
            if read <= 0 {
                break;
            }
            len += read as usize;
        }
        libc::close(fd);
    }
    let status = &status[..len];
    let bit = 1u64 << (signal - 1);
    [&b"\nSigIgn:"[..], &b"\nSigCgt:"[..]]
        .iter()
        .any(|field| mask_after(status, field).is_some_and(|mask| mask & bit != 0))
}

/// The hexadecimal mask after `field` in a `/proc/<pid>/status` text.
fn mask_after(status: &[u8], field: &[u8]) -> Option<u64> {
    let start = status.windows(field.len()).position(|w| w == field)? + field.len();
    let mut mask = 0u64;
    let mut digits = 0;
    for &byte in status.get(start..)? {
        let value = match byte {
            b'\t' | b' ' if digits == 0 => continue,
            b'0'..=b'9' => byte - b'0',
            b'a'..=b'f' => byte - b'a' + 10,
            _ => break,
        };
        mask = (mask << 4) | u64::from(value);
        digits += 1;
    }
    (digits > 0).then_some(mask)
}

/// Ends this process as the init ended, or by `passed_on` when the stand-in killed it
/// for that signal. Never returns.
fn end_like(status: Option<WaitStatus>, passed_on: Option<i32>) -> ! {
    let signal = passed_on.or(status.and_then(|s| s.terminating_signal()));
    if let Some(signal) = signal {
        die_by(signal);
    }
    let code = match status {
        Some(status) => status.exit_status().unwrap_or(1),
        None => 1,
    };
    // SAFETY: `_exit` skips atexit handlers and stdio flushing, as a forked child must.
    unsafe { libc::_exit(code) }
}

/// Dies by `signal`, so that the runner sees the death it would have seen of the init.
fn die_by(signal: i32) -> ! {
    // SAFETY: raw syscalls: no core file of the stand-in (the command dumped its own if
    // it was to), the default action, nothing blocked, then the signal to itself.
    unsafe {
        let no_core = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        libc::setrlimit(libc::RLIMIT_CORE, &no_core);
        libc::signal(signal, libc::SIG_DFL);
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        libc::kill(libc::getpid(), signal);
        libc::_exit(128 + signal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn the_masks_of_a_status_text_are_read_by_field() {
        let status = b"Name:\tbwrap\nSigBlk:\t0000000000010000\nSigIgn:\t0000000000004000\n\
                       SigCgt:\t0000000000000002\nCapInh:\t0\n";
        assert_eq!(mask_after(status, b"\nSigIgn:"), Some(0x4000));
        assert_eq!(mask_after(status, b"\nSigCgt:"), Some(2));
        assert_eq!(mask_after(status, b"\nSigPnd:"), None);
        assert_eq!(mask_after(b"\nSigIgn:\t\n", b"\nSigIgn:"), None);
    }

    #[test]
    fn this_process_ignores_what_it_ignores() {
        let proc = rustix::fs::open(
            c"/proc",
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY,
            rustix::fs::Mode::empty(),
        )
        .unwrap();
        let me = std::process::id() as i32;
        // SIGURG is ignored by default but not in SigIgn; SIGPIPE is ignored by the
        // Rust runtime at start-up.
        assert!(init_takes_care_of(&proc, me, libc::SIGPIPE));
        assert!(!init_takes_care_of(&proc, me, libc::SIGTERM));
        assert!(!init_takes_care_of(&proc, i32::MAX, libc::SIGPIPE));
    }
}

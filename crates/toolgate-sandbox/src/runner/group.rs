//! The process group of one run, and the guard that kills it.
//!
//! The command leads a new session (`setsid()` before `exec`), hence also a new group
//! whose id is its pid.
//! That id cannot be reused while any member, or the unreaped leader, exists; the runner
//! signals the group before reaping the leader where it can (timeout, cancellation) and
//! right after reaping it otherwise, where the id is still held by any member left.

use rustix::process::{Pid, Signal};
use tokio::process::{Child, Command};

/// Makes the child call `setsid()` between `fork` and `exec`.
///
/// A new session has no controlling terminal. The child of a toolgate started from a
/// terminal would otherwise share it, and could push keystrokes into it with `TIOCSTI`
/// (or write to `/dev/tty`) that the user's shell runs once toolgate exits, outside any
/// sandbox. `setsid` also makes the child its group's leader, which the group kill relies
/// on; `process_group(0)` must not be set as well, since `setsid` fails for a process
/// that already leads a group.
///
/// This pre_exec hook means std forks instead of using posix_spawn: a little slower,
/// accepted for the terminal isolation.
pub(super) fn lead_new_session(command: &mut Command) {
    // SAFETY: the closure runs in the forked child before `exec`, where only
    // async-signal-safe work is allowed. It makes one raw `setsid` syscall and turns a
    // failure into an `io::Error` from the raw errno, which does not allocate.
    unsafe {
        command.pre_exec(|| {
            rustix::process::setsid()?;
            Ok(())
        });
    }
}

/// Kills the whole group with SIGKILL when dropped, unless released.
///
/// tokio's `kill_on_drop` kills only the child. Without this guard, cancelling a run
/// (a client disconnect, an agent aborting a tool call) would leave every process the
/// command had started running on, outside any supervision.
#[derive(Debug)]
pub(super) struct ProcessGroup {
    pgid: Pid,
    armed: bool,
}

impl ProcessGroup {
    /// The group led by `child`; `None` once the child has been reaped.
    pub(super) fn of_leader(child: &Child) -> Option<Self> {
        let pid = i32::try_from(child.id()?).ok()?;
        Some(Self {
            pgid: Pid::from_raw(pid)?,
            armed: true,
        })
    }

    /// Sends `signal` to every process of the group.
    pub(super) fn signal(&self, signal: Signal) {
        // The only failure that can happen here is ESRCH: the group is already empty,
        // which is the state we want anyway.
        let _ = rustix::process::kill_process_group(self.pgid, signal);
    }

    /// True when no process of the group exists any more (zombies still count).
    pub(super) fn is_empty(&self) -> bool {
        rustix::process::test_kill_process_group(self.pgid) == Err(rustix::io::Errno::SRCH)
    }

    /// The run is over and the group has been dealt with: do not signal it on drop,
    /// when its id may already belong to someone else.
    pub(super) fn release(&mut self) {
        self.armed = false;
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        if self.armed {
            self.signal(Signal::KILL);
        }
    }
}

//! The process group of one run, and the guard that kills it.
//!
//! The command is its group's leader (`process_group(0)`), so the group id is its pid.
//! That id cannot be reused while any member, or the unreaped leader, exists; the runner
//! signals the group before reaping the leader where it can (timeout, cancellation) and
//! right after reaping it otherwise, where the id is still held by any member left.

use rustix::process::{Pid, Signal};
use tokio::process::Child;

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

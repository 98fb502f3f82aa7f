//! Tying a command's life to toolgate's, so that a toolgate killed with SIGKILL (no
//! destructor runs, no process group is signalled) leaves nothing running.
//!
//! Three mechanisms, because none covers everything alone:
//! - the parent-death signal: the child asks the kernel for SIGKILL the moment the
//!   thread that forked it exits, and checks that its parent has not already gone. It
//!   holds for that one process only: the kernel clears it in every child it forks, and
//!   on exec of a set-user-ID binary;
//! - the lifeline: a pipe whose write end only toolgate holds. Its read end is handed
//!   to stage 2, which keeps watch inside the sandbox and ends the command's whole
//!   tree when the pipe reports end-of-file, i.e. when toolgate is gone, however it
//!   died. It holds from the moment stage 2 runs;
//! - as root, under bubblewrap, a pid namespace of the command's own (`pidns`), whose
//!   init is bubblewrap's outer process and dies with toolgate: the kernel then kills
//!   every process in it. It holds from bubblewrap's first instruction to the last.
//!   (The landlock backend execs stage 2 itself, which holds the death signal until it
//!   watches the lifeline: no gap to close there.)
//!
//! The gap the namespace closes: bubblewrap's own pid 1 is forked without a death
//! signal and arms `--die-with-parent` only after its mount setup; before that it
//! waits for bubblewrap's outer process to write its uid map. A toolgate killed right
//! after `process_start` took the outer process with it (its parent-death signal), and
//! the inner one waited for ever, before stage 2 and its lifeline existed. Without root
//! (no namespace can be made) that gap remains, narrowed to bubblewrap's first
//! milliseconds.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::OnceLock;

use rustix::process::{Pid, Signal};

/// A `pre_exec` hook for the child: SIGKILL when the thread that forked it exits,
/// and no `exec` at all when the parent `parent` is already gone.
///
/// The signal is tied to the forking *thread*: fork only from a thread that lives as
/// long as toolgate (see `spawner`). It survives `exec`, except of a set-user-ID or
/// file-capability binary (a setuid bubblewrap clears it; `--die-with-parent` and the
/// lifeline still hold there).
pub(crate) fn die_with_parent_hook(
    parent: Pid,
) -> impl FnMut() -> io::Result<()> + Send + Sync + 'static {
    move || {
        rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
        // Attack: the parent dies between fork and the prctl above. The signal is
        // then never sent, and the command would run unsupervised; the new parent
        // (a subreaper or init) shows in getppid.
        if rustix::process::getppid() != Some(parent) {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
        Ok(())
    }
}

/// The lifeline of this process: the read end, as passed to children; `None` when
/// the pipe could not be made (then only the death signal holds).
struct Lifeline {
    read: OwnedFd,
    /// Never written, never passed on (close-on-exec): it closes when toolgate exits,
    /// which every holder of the read end sees as end-of-file.
    _write: OwnedFd,
}

/// Lowest descriptor number the read end is kept at in toolgate, above the few
/// numbers children get descriptors under (3 for the environment, 4 for the
/// lifeline), so that no `dup2` into a child can overwrite it before it is copied.
const KEPT_ABOVE: RawFd = 64;

fn lifeline() -> io::Result<&'static Lifeline> {
    static LIFELINE: OnceLock<Result<Lifeline, String>> = OnceLock::new();
    LIFELINE
        .get_or_init(|| {
            let make = || -> io::Result<Lifeline> {
                let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
                let read = rustix::io::fcntl_dupfd_cloexec(&read, KEPT_ABOVE)?;
                Ok(Lifeline {
                    read,
                    _write: write,
                })
            };
            make().map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| io::Error::other(format!("cannot make the lifeline pipe: {e}")))
}

/// A `pre_exec` hook that gives the child the lifeline's read end as descriptor
/// `target` (without close-on-exec). Register it after every other descriptor hook.
pub(super) fn lifeline_hook(
    target: RawFd,
) -> io::Result<impl FnMut() -> io::Result<()> + Send + Sync + 'static> {
    let source = lifeline()?.read.as_raw_fd();
    Ok(move || {
        // SAFETY: dup2 is an async-signal-safe raw syscall; `source` is open for
        // the whole life of the process (a static), so it is open in the child.
        if unsafe { libc::dup2(source, target) } == -1 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt as _;

    #[test]
    fn a_child_sees_the_lifeline_open_while_toolgate_lives() {
        // The child's read on the lifeline would return at end-of-file; while this
        // process holds the write end it blocks, and `timeout` ends it (124).
        let mut command = std::process::Command::new("timeout");
        command.args(["0.3", "sh", "-c", "head -c1 <&4; echo eof"]);
        let hook = lifeline_hook(4).unwrap();
        // SAFETY: the hook makes one raw dup2 syscall.
        unsafe { command.pre_exec(hook) };
        let output = command.output().unwrap();
        assert_eq!(output.status.code(), Some(124));
        assert!(output.stdout.is_empty());
        assert!(lifeline().unwrap().read.as_raw_fd() >= KEPT_ABOVE);
    }

    #[test]
    fn a_child_whose_parent_is_gone_never_execs() {
        // This process stands in for a parent that died before the hook ran: the
        // child's parent is not the pid the hook expects.
        let not_the_parent = Pid::from_raw(i32::MAX).unwrap();
        let mut command = std::process::Command::new("true");
        // SAFETY: the hook makes raw prctl and getppid syscalls only.
        unsafe { command.pre_exec(die_with_parent_hook(not_the_parent)) };
        let err = command.status().unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ESRCH));
        let mut command = std::process::Command::new("true");
        // SAFETY: as above.
        unsafe { command.pre_exec(die_with_parent_hook(rustix::process::getpid())) };
        assert!(command.status().unwrap().success());
    }
}

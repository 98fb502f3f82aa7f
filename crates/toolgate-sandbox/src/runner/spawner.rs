//! The one thread every command is forked from.
//!
//! The parent-death signal (see `lifetime`) fires when the *thread* that forked the
//! child exits, not when the process does. tokio's threads come and go: a
//! blocking-pool thread exits after a few idle seconds, and a worker that ran
//! `block_in_place` hands its core to a fresh thread and may then end. A command
//! forked from such a thread would be killed in the middle of its run for no reason
//! at all. So every fork happens here, on a thread made once that lives as long as
//! toolgate: the signal then means exactly "toolgate is gone".

use std::io;
use std::sync::OnceLock;
use std::sync::mpsc;

use rustix::process::{Pid, Signal};
use tokio::process::{Child, Command};

/// One fork to make, with the runtime the child's pipes and reaping belong to.
struct Job {
    command: Command,
    runtime: tokio::runtime::Handle,
    reply: mpsc::SyncSender<io::Result<Child>>,
}

fn queue() -> io::Result<&'static mpsc::Sender<Job>> {
    static QUEUE: OnceLock<Result<mpsc::Sender<Job>, String>> = OnceLock::new();
    QUEUE
        .get_or_init(|| {
            let (sender, jobs) = mpsc::channel::<Job>();
            std::thread::Builder::new()
                .name("toolgate-spawner".to_owned())
                .spawn(move || serve(&jobs))
                .map(|_| sender)
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| {
            io::Error::other(format!(
                "cannot start the thread commands are started from: {e}"
            ))
        })
}

fn serve(jobs: &mpsc::Receiver<Job>) {
    // The sender lives in a static, so this loop never ends: neither does the thread.
    while let Ok(mut job) = jobs.recv() {
        let _runtime = job.runtime.enter();
        let spawned = job.command.spawn();
        if let Err(mpsc::SendError(Ok(child))) = job.reply.send(spawned) {
            // The caller is gone (it cannot be while it waits, but a thread can
            // die): nobody will supervise this command, so it ends now.
            if let Some(group) = child.id().and_then(|id| Pid::from_raw(id as i32)) {
                let _ = rustix::process::kill_process_group(group, Signal::KILL);
            }
            drop(child);
        }
    }
}

/// Spawns `command` on the spawner thread, in the current tokio runtime, and waits
/// for it: as long as `Command::spawn` itself takes (std returns once the child has
/// exec'd), plus two thread wake-ups.
pub(super) fn spawn(command: Command) -> io::Result<Child> {
    let runtime = tokio::runtime::Handle::try_current()
        .map_err(|e| io::Error::other(format!("commands run inside a tokio runtime: {e}")))?;
    let (reply, spawned) = mpsc::sync_channel(1);
    let gone = || io::Error::other("the thread commands are started from has stopped");
    queue()?
        .send(Job {
            command,
            runtime,
            reply,
        })
        .map_err(|_| gone())?;
    spawned.recv().map_err(|_| gone())?
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The state letter of `pid` in /proc (`Z` for a zombie), `None` once reaped.
    fn state(pid: u32) -> Option<char> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat[stat.rfind(')')? + 1..].trim_start().chars().next()
    }

    #[test]
    fn a_command_outlives_the_thread_that_asked_for_it() {
        // A thread with a runtime of its own starts a command that dies with its
        // parent thread, then ends. Forked from that thread, the command would be
        // SIGKILLed right there; forked from the spawner, it runs on.
        let (pid, thread) = std::thread::spawn(|| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let pid = runtime.block_on(async {
                let mut command = Command::new("sleep");
                command.arg("30");
                let hook = super::super::lifetime::die_with_parent_hook(rustix::process::getpid());
                // SAFETY: the hook makes raw prctl and getppid syscalls only.
                unsafe { command.pre_exec(hook) };
                spawn(command).unwrap().id().unwrap()
            });
            (pid, rustix::thread::gettid().as_raw_nonzero().get())
        })
        .join()
        .unwrap();
        // The death signal is sent once the thread is fully gone from /proc.
        let task = format!("/proc/self/task/{thread}");
        while std::path::Path::new(&task).exists() {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let mut states = Vec::new();
        for _ in 0..10 {
            states.push(state(pid));
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let _ = rustix::process::kill_process(Pid::from_raw(pid as i32).unwrap(), Signal::KILL);
        assert!(
            states.iter().all(|s| matches!(s, Some(s) if *s != 'Z')),
            "sleep died with the thread that asked for it: {states:?}"
        );
    }
}

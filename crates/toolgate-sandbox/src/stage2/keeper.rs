//! Stage 2 as the command's keeper, when toolgate hands it a lifeline.
//!
//! Instead of exec'ing the command, stage 2 forks it and stays, as a child subreaper:
//! every process the command starts stays below it, also one that double-forks into
//! a session of its own. The keeper ends that whole tree
//! - when the lifeline reports end-of-file, that is when toolgate is gone (killed with
//!   SIGKILL, crashed), however early that happened: also before bubblewrap had armed
//!   its own parent-death signal, which it does only after its mount setup;
//! - when the command ends: nothing it left behind outlives it (with bubblewrap the
//!   pid namespace ends it as well; the landlock backend has none, only this);
//!
//! and then ends as the command ended: the same exit code, or death by the same signal.
//! Where toolgate asks for it (a server's sandboxes, pooled or fresh), the keeper first
//! reports that end, once the tree is ended ([`Report`]), on a socket only the keeper
//! holds: toolgate can answer once the keeper is gone, while bubblewrap and the
//! namespaces are still being torn down.
//!
//! It ignores TERM, INT, HUP and QUIT, which `process_kill` sends to every process of
//! the tree: the command gets them and decides, the keeper follows. It forks after
//! every confinement, so it holds nothing the command does not.

use std::convert::Infallible;
use std::ffi::OsString;
use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;

use rustix::process::{Pid, Signal, WaitOptions, WaitStatus};

use super::Stage2Error;
use super::creations::DeniedNames;
use crate::runner::lifetime::die_with_parent_hook;

/// Exit status of the keeper when it ended the tree because toolgate is gone (nobody
/// reads it; 128 + SIGKILL, as if the death signal had killed it).
const ENDED_WITH_TOOLGATE: i32 = 137;

/// Signals the keeper ignores: the command's to handle.
const LEFT_TO_THE_COMMAND: [i32; 4] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT];

/// Runs `command` below this process and keeps it (see the module doc); returns
/// only when the command could not be started.
pub(super) fn keep(
    lifeline: i32,
    command: &[OsString],
    env: Vec<(OsString, OsString)>,
    denied: DeniedNames,
    report: Option<OwnedFd>,
) -> Result<Infallible, Stage2Error> {
    let setup = |what: &str, e: &dyn std::fmt::Display| {
        Stage2Error::Setup(format!("cannot keep the command: {what}: {e}"))
    };
    // SAFETY: the descriptor number comes from our own parent, which opened it for us
    // and passed it in `--lifeline-fd`; nothing else in this process uses it.
    let lifeline = unsafe { OwnedFd::from_raw_fd(lifeline) };
    // The command must not hold it: only toolgate's end says anything.
    rustix::io::fcntl_setfd(&lifeline, rustix::io::FdFlags::CLOEXEC)
        .map_err(|e| setup("the lifeline", &e))?;
    let me = rustix::process::getpid();
    rustix::process::set_child_subreaper(Some(me)).map_err(|e| setup("subreaper", &e))?;
    std::thread::Builder::new()
        .name("lifeline".to_owned())
        .spawn(move || {
            wait_for_end_of_file(lifeline);
            end_tree(me);
            std::process::exit(ENDED_WITH_TOOLGATE);
        })
        .map_err(|e| setup("the lifeline thread", &e))?;
    // The lifeline watches from here on. A death signal of this process (the
    // landlock backend's runner sets one) would kill the keeper together with
    // toolgate, before it could end the tree: the lifeline replaces it.
    rustix::process::set_parent_process_death_signal(None)
        .map_err(|e| setup("the parent-death signal", &e))?;
    // Before the command is forked: it holds the keeper's end only until its exec.
    let report = report.and_then(|pool| report_channel(&pool).ok());
    // After the lifeline thread: the guard's filter is this thread's alone,
    // and every thread started before it stays unfiltered.
    let umask = if denied.is_empty() {
        None
    } else {
        Some(super::creations::guard(denied)?)
    };
    let child = start(command, env, me, umask)?;
    for signal in LEFT_TO_THE_COMMAND {
        // SAFETY: installs SIG_IGN, no handler code; the command was forked before,
        // with the default dispositions it inherited.
        unsafe {
            libc::signal(signal, libc::SIG_IGN);
        }
    }
    let status = reap_until(child);
    end_tree(me);
    if let (Some(socket), Some(status)) = (&report, status) {
        Report::of(status).send(socket);
    }
    // The report's socket stays open until this process has ended, every
    // thread of it: its end of file is what tells toolgate so.
    end_as(status)
}

/// A socket of the keeper's own for its report, whose other end goes to
/// toolgate (with one byte, `P`) over the socket toolgate gave stage 2 (the
/// pool's, or the environment's). bubblewrap's processes hold that one as
/// well; this one only the keeper holds (close-on-exec, the command drops it
/// at its exec), and it is never closed before the keeper exits, so its end
/// of file tells toolgate that the keeper, every thread of it (the creation
/// guard's workers too), has ended.
fn report_channel(pool: &OwnedFd) -> std::io::Result<OwnedFd> {
    use rustix::net::{
        AddressFamily, SendAncillaryBuffer, SendAncillaryMessage, SendFlags, SocketFlags,
        SocketType,
    };
    use std::os::fd::AsFd;
    let (mine, theirs) = rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        None,
    )?;
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    let fds = [theirs.as_fd()];
    control.push(SendAncillaryMessage::ScmRights(&fds));
    rustix::net::sendmsg(
        pool,
        &[std::io::IoSlice::new(b"P")],
        &mut control,
        SendFlags::NOSIGNAL,
    )?;
    Ok(mine)
}

/// How the command ended, as the keeper reports it to toolgate after every
/// process of the tree has ended: `x` and the exit code, or `k` and the
/// signal, then a newline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Report {
    /// Exited with this code.
    Exited(i32),
    /// Killed by this signal.
    Killed(i32),
}

impl Report {
    fn of(status: WaitStatus) -> Report {
        match (status.exit_status(), status.terminating_signal()) {
            (Some(code), _) => Report::Exited(code),
            (None, Some(signal)) => Report::Killed(signal),
            (None, None) => Report::Exited(super::STAGE2_FAILURE),
        }
    }

    /// Writes the report on `socket`, which stays open.
    fn send(self, socket: &OwnedFd) {
        let bytes = self.encode();
        let mut rest = bytes.as_bytes();
        while !rest.is_empty() {
            match rustix::io::write(socket, rest) {
                Ok(n) if n > 0 => rest = rest.get(n..).unwrap_or_default(),
                Err(rustix::io::Errno::INTR) => {}
                Ok(_) | Err(_) => return,
            }
        }
    }

    /// The bytes on the socket.
    pub fn encode(self) -> String {
        match self {
            Report::Exited(code) => format!("x{code}\n"),
            Report::Killed(signal) => format!("k{signal}\n"),
        }
    }

    /// Reads a report back; `None` for anything else (a keeper that died
    /// before reporting leaves nothing).
    pub fn decode(bytes: &[u8]) -> Option<Report> {
        let text = std::str::from_utf8(bytes).ok()?.strip_suffix('\n')?;
        let (tag, number) = text.split_at_checked(1)?;
        let number: i32 = number.parse().ok()?;
        match tag {
            "x" if (0..=255).contains(&number) => Some(Report::Exited(number)),
            "k" if (1..=64).contains(&number) => Some(Report::Killed(number)),
            _ => None,
        }
    }
}

/// Forks and execs the command; its death signal ties it to the keeper, so a keeper
/// killed outright (SIGKILL to the group at a timeout) takes it along.
fn start(
    command: &[OsString],
    env: Vec<(OsString, OsString)>,
    keeper: Pid,
    umask: Option<libc::mode_t>,
) -> Result<Pid, Stage2Error> {
    let Some((program, rest)) = command.split_first() else {
        return Err(Stage2Error::Setup("no command".into()));
    };
    let mut spawn = std::process::Command::new(program);
    spawn.args(rest).env_clear().envs(env);
    // SAFETY: the hook runs in the forked child before exec and makes raw prctl and
    // getppid syscalls only.
    unsafe {
        spawn.pre_exec(die_with_parent_hook(keeper));
    }
    if let Some(umask) = umask {
        // SAFETY: umask is async-signal-safe; the command gets its own mask
        // back (the guarding keeper works with none).
        unsafe {
            spawn.pre_exec(move || {
                libc::umask(umask);
                Ok(())
            });
        }
    }
    let child = spawn.spawn().map_err(|err| Stage2Error::Exec {
        program: program.to_string_lossy().into_owned(),
        message: err.to_string(),
        code: if err.kind() == std::io::ErrorKind::NotFound {
            127
        } else {
            126
        },
    })?;
    i32::try_from(child.id())
        .ok()
        .and_then(Pid::from_raw)
        .ok_or_else(|| Stage2Error::Setup("the command has no process id".into()))
}

/// Blocks while toolgate holds the lifeline's write end.
fn wait_for_end_of_file(lifeline: OwnedFd) {
    let mut pipe = std::fs::File::from(lifeline);
    let mut byte = [0u8; 1];
    loop {
        match pipe.read(&mut byte) {
            // Nobody writes to it; a byte would be a bug elsewhere, not an end.
            Ok(n) if n > 0 => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            _ => return,
        }
    }
}

/// Reaps children (orphans of the tree are ours) until `child` has ended.
fn reap_until(child: Pid) -> Option<WaitStatus> {
    loop {
        match rustix::process::wait(WaitOptions::empty()) {
            Ok(Some((pid, status))) if pid == child => return Some(status),
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(_) => return None,
        }
    }
}

/// Kills every process below `me` and reaps them. Each round kills all that
/// are alive, then waits for one to end; a process forked meanwhile is found in the
/// next round (its parent's death makes it ours).
fn end_tree(me: Pid) {
    loop {
        let below = descendants(me);
        for pid in &below {
            let _ = rustix::process::kill_process(*pid, Signal::KILL);
        }
        if below.is_empty() {
            while let Ok(Some(_)) = rustix::process::waitpid(None, WaitOptions::NOHANG) {}
            return;
        }
        if rustix::process::wait(WaitOptions::empty()).is_err() {
            // No child at all: what is left is not ours to reap, and is dying.
            return;
        }
    }
}

/// The live processes below `root` (zombies are dead already), from /proc: through
/// each thread's `children` list where the kernel has it (a walk of the tree only,
/// also on a host with thousands of processes), else from every process's parent.
fn descendants(root: Pid) -> Vec<Pid> {
    let root = root.as_raw_nonzero().get();
    let found = children_lists(root).unwrap_or_else(|| parents_scan(root));
    found
        .into_iter()
        .filter(|pid| parent_and_state(*pid).is_some_and(|(_, state)| state != 'Z'))
        .filter_map(Pid::from_raw)
        .collect()
}

/// Below `root` by `/proc/<pid>/task/<tid>/children`; `None` without that file.
fn children_lists(root: i32) -> Option<Vec<i32>> {
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let tasks = std::fs::read_dir(format!("/proc/{}/task", found[i]));
        if i == 0 && tasks.is_err() {
            return None;
        }
        for task in tasks.into_iter().flatten().flatten() {
            match std::fs::read_to_string(task.path().join("children")) {
                Ok(list) => found.extend(
                    list.split_whitespace()
                        .filter_map(|p| p.parse::<i32>().ok()),
                ),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && i == 0 => return None,
                Err(_) => {}
            }
        }
        i += 1;
    }
    found.remove(0);
    Some(found)
}

/// Below `root` by the parent of every process in /proc.
fn parents_scan(root: i32) -> Vec<i32> {
    let mut children: Vec<(i32, i32)> = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
                continue;
            };
            if let Some((parent, _)) = parent_and_state(pid) {
                children.push((parent, pid));
            }
        }
    }
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            children
                .iter()
                .filter(|(p, _)| *p == parent)
                .map(|(_, c)| *c),
        );
        i += 1;
    }
    found.remove(0);
    found
}

/// `(parent pid, state)` from `/proc/<pid>/stat`; the command name (field 2) may hold
/// spaces and parentheses, so fields are counted from its closing `)`.
fn parent_and_state(pid: i32) -> Option<(i32, char)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut fields = text.get(text.rfind(')')? + 1..)?.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let parent = fields.next()?.parse().ok()?;
    Some((parent, state))
}

/// Ends this process as the command ended.
fn end_as(status: Option<WaitStatus>) -> ! {
    let Some(status) = status else {
        std::process::exit(super::STAGE2_FAILURE);
    };
    if let Some(code) = status.exit_status() {
        std::process::exit(code);
    }
    if let Some(signal) = status.terminating_signal() {
        // The command already dumped core if it was to; the keeper must not.
        let _ = rustix::process::setrlimit(
            rustix::process::Resource::Core,
            rustix::process::Rlimit {
                current: Some(0),
                maximum: Some(0),
            },
        );
        // SAFETY: restores the default disposition, then signals this process.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::kill(libc::getpid(), signal);
        }
        std::process::exit(128 + signal);
    }
    std::process::exit(super::STAGE2_FAILURE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_round_trip_and_nothing_else_reads_as_one() {
        for report in [Report::Exited(0), Report::Exited(255), Report::Killed(9)] {
            assert_eq!(Report::decode(report.encode().as_bytes()), Some(report));
        }
        for bytes in [
            &b"x7"[..],
            b"x256\n",
            b"k0\n",
            b"y1\n",
            b"x-1\n",
            b"",
            b"\n",
        ] {
            assert_eq!(Report::decode(bytes), None, "{bytes:?}");
        }
    }

    #[test]
    fn the_stat_line_is_read_past_a_command_name_with_parentheses() {
        let me = rustix::process::getpid().as_raw_nonzero().get();
        let (parent, state) = parent_and_state(me).unwrap();
        assert_eq!(
            Pid::from_raw(parent),
            rustix::process::getppid(),
            "state {state}"
        );
        assert!(descendants(Pid::from_raw(i32::MAX).unwrap()).is_empty());
    }

    #[test]
    fn both_walks_find_a_grandchild() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & wait"])
            .spawn()
            .unwrap();
        let me = rustix::process::getpid().as_raw_nonzero().get();
        let shell = i32::try_from(child.id()).unwrap();
        // The sleep below the shell (this test binary may have other children).
        let below_shell = |walk: &[i32]| {
            walk.iter()
                .copied()
                .find(|p| parent_and_state(*p).is_some_and(|(parent, _)| parent == shell))
        };
        let mut found = (None, None);
        for _ in 0..200 {
            found = (
                children_lists(me).and_then(|w| w.contains(&shell).then(|| below_shell(&w))?),
                Some(parents_scan(me)).and_then(|w| w.contains(&shell).then(|| below_shell(&w))?),
            );
            if found.0.is_some() && found.1.is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
        if let Some(sleep) = found.1.and_then(Pid::from_raw) {
            let _ = rustix::process::kill_process(sleep, Signal::KILL);
        }
        assert!(found.0.is_some() && found.0 == found.1, "{found:?}");
    }
}

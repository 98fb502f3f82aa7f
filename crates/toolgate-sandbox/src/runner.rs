//! The process runner: starts one command, bounds it, and reports how it ended.
//!
//! Every command toolgate runs, inside bubblewrap or directly, is spawned by [`run`] or
//! [`run_streaming`]. The runner
//! - starts the child in a session (and so a process group) of its own, without a
//!   controlling terminal, with exactly the environment of the request (nothing
//!   inherited) and its resource limits applied before `exec`;
//! - feeds stdin and reads stdout and stderr concurrently, keeping at most
//!   `max_output_bytes` of each stream and draining the rest so the child never blocks;
//! - enforces a wall-clock timeout: SIGTERM to the group, SIGKILL after a grace period;
//! - kills whatever is left of the group when the command exits or the run is cancelled;
//! - ties the child's life to toolgate's, also a toolgate killed with SIGKILL: the child
//!   is forked from one long-lived thread and gets SIGKILL when toolgate exits, stage 2
//!   gets a lifeline it watches (see `lifetime`), and as root bubblewrap is the init of a
//!   pid namespace of its own, whose death ends every process in it (see `pidns`);
//! - passes the child no descriptor toolgate inherited, only those the request names;
//! - reports the exit status as data (`exit_code`, `signal`, `timed_out`), never lost.
//!
//! It is not a sandbox. Confinement (namespaces, seccomp, Landlock) comes from the command
//! it runs (bubblewrap and the stage-2 helper). A process that leaves the group (`setsid`)
//! escapes the group kill here; the sandbox's PID namespace is what ends it.

mod cgroup;
mod group;
pub(crate) mod lifetime;
mod limits;
mod output;
mod pidns;
pub(crate) use pidns::{STAND_IN_COMMAND, stand_in_main};
mod report;
mod request;
mod spawner;

use std::future::Future;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use rustix::process::Signal;
use serde::Serialize;
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin, Command};
use tokio::time::Instant;

pub use cgroup::{CgroupHost, Controller, Slot as CgroupSlot, Version as CgroupVersion};
use group::ProcessGroup;
pub use limits::{LimitMechanism, ResourceLimits};
pub use request::ExecRequest;

/// Tries what pid namespaces commands can have here, for the machine's probe.
pub(crate) fn probe_pid_namespaces() -> crate::probe::PidNamespaces {
    crate::probe::PidNamespaces {
        own: pidns::probe_own(),
        capped: pidns::probe_capped(),
    }
}

/// Takes what the (cached) probe found about pid namespaces.
pub(crate) fn seed_pid_namespaces(found: &crate::probe::PidNamespaces) {
    pidns::PidNamespace::seed(found);
}
use output::OutputStream;

/// How long the pipes are still read after the command exited and its group was killed.
/// Everything in the group is dead by then, so EOF normally comes at once; only a process
/// that left the group (`setsid`) can hold a pipe open, and it must not hang the run.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(250);

/// How often the group is checked for survivors during the grace period, once the command
/// itself has exited on SIGTERM.
const GROUP_POLL: Duration = Duration::from_millis(20);

/// How a command ended and what it printed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExecOutcome {
    /// Shell convention: the exit status, or 128 + n when killed by signal n. Never lost.
    pub exit_code: i32,
    /// The signal that killed the command, if one did.
    pub signal: Option<i32>,
    /// The wall-clock timeout expired and the group was terminated.
    pub timed_out: bool,
    /// From spawn to the command's exit.
    pub duration_ms: u64,
    /// Lossy UTF-8 of the kept bytes, cut on a character boundary at the cap.
    pub stdout: String,
    pub stderr: String,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
}

/// Which output stream a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// Why a run produced no [`ExecOutcome`]. A command that fails, times out or dies is not
/// an error: that is an outcome.
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// The command could not be started: not found, not executable, a bad working
    /// directory, or a resource limit the system refused.
    #[error("cannot start `{program}`: {source}")]
    Spawn {
        program: String,
        #[source]
        source: io::Error,
    },
    /// Waiting for the command or reading its output failed.
    #[error("running the command failed: {0}")]
    Io(#[from] io::Error),
}

/// Runs one process to completion.
pub async fn run(request: ExecRequest) -> Result<ExecOutcome, RunnerError> {
    run_streaming(request, |_, _| {}).await
}

/// A running command's live connections besides its request: more stdin while it
/// runs (for REPLs and prompts), and its pid as soon as it exists.
#[derive(Default)]
pub struct Attach {
    /// Chunks written to stdin as they arrive, after [`ExecRequest::stdin`]; stdin
    /// is closed once every sender is gone.
    pub stdin: Option<tokio::sync::mpsc::Receiver<Vec<u8>>>,
    /// Receives the child's pid, which is also its process group id, right after spawn.
    pub spawned: Option<tokio::sync::oneshot::Sender<u32>>,
    /// In network mode `proxy`: also receives this run's connection records
    /// (besides the sandbox's own sink), so a tool can report them as its call's.
    pub egress_records: Option<crate::proxy::EventSink>,
    /// Every chunk of stdout and stderr as read, raw and unsplit, for a tool that
    /// records the output itself (as `2>&1` would); with it the line callback is not
    /// called. It runs on the reading task: it must not block.
    pub raw_output: Option<RawOutput>,
}

/// A consumer of raw output chunks (see [`Attach::raw_output`]).
pub type RawOutput = std::sync::Arc<dyn Fn(Stream, &[u8]) + Send + Sync>;

impl std::fmt::Debug for Attach {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attach")
            .field("stdin", &self.stdin.is_some())
            .field("spawned", &self.spawned.is_some())
            .field("egress_records", &self.egress_records.is_some())
            .field("raw_output", &self.raw_output.is_some())
            .finish()
    }
}

/// Runs one process to completion, calling `on_line(stream, line)` for every output line
/// as it arrives (for progress reporting).
///
/// A line is delivered without its `\n`; a last line without one is delivered at EOF.
/// Lines are delivered also past `max_output_bytes` (the cap bounds only what is kept),
/// each cut to its first 64 KiB.
pub async fn run_streaming(
    request: ExecRequest,
    on_line: impl FnMut(Stream, &str) + Send,
) -> Result<ExecOutcome, RunnerError> {
    run_attached(request, Attach::default(), on_line).await
}

/// [`run_streaming`] with live stdin and the pid reported at spawn.
pub async fn run_attached(
    request: ExecRequest,
    attach: Attach,
    on_line: impl FnMut(Stream, &str) + Send,
) -> Result<ExecOutcome, RunnerError> {
    run_reported(request, attach, on_line, None).await
}

/// [`run_attached`], taking the command's end from stage 2's keeper over
/// `report` (see [`Started::reported_on`]).
pub(crate) async fn run_reported(
    mut request: ExecRequest,
    attach: Attach,
    on_line: impl FnMut(Stream, &str) + Send,
    report: Option<std::os::unix::net::UnixStream>,
) -> Result<ExecOutcome, RunnerError> {
    let stdin_data = request.stdin.take();
    let pipe_stdin = stdin_data.is_some() || attach.stdin.is_some();
    let mut started = start_with(request, pipe_stdin)?;
    if let Some(report) = report {
        started.reported_on(report);
    }
    started.run(stdin_data, attach, on_line).await
}

/// A process spawned ahead of its run (a pooled sandbox, waiting for its
/// command): see [`start`]. Dropped unused, it is killed with everything in
/// its group and cgroup.
pub struct Started {
    // Declared first, so dropped before the limits: the cgroup's processes
    // are killed after the child, as in a run.
    child: Child,
    limits: limits::Enforcement,
    request: ExecRequest,
    /// Where stage 2's keeper sends the socket it reports the command's end
    /// on (a pooled sandbox's socket, see `stage2::Report`).
    report: Option<std::os::unix::net::UnixStream>,
}

impl std::fmt::Debug for Started {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Started")
            .field("pid", &self.child.id())
            .field("program", &self.request.program)
            .finish()
    }
}

/// Spawns `request` now, with stdin a pipe, and leaves it to run on its own
/// until [`Started::run`] supervises it: its timeout counts from then.
pub fn start(request: ExecRequest) -> Result<Started, RunnerError> {
    start_with(request, true)
}

fn start_with(request: ExecRequest, pipe_stdin: bool) -> Result<Started, RunnerError> {
    // Before the spawn (the child joins the command's cgroup before exec); after the
    // child in drop order, so a cancelled run still kills the cgroup's processes.
    let limits = request
        .limits
        .enforce()
        .map_err(|source| RunnerError::Spawn {
            program: request.program.to_string_lossy().into_owned(),
            source,
        })?;
    let child = spawn(&request, pipe_stdin, &limits)?;
    Ok(Started {
        child,
        limits,
        request,
        report: None,
    })
}

impl Started {
    /// The process's id, while it runs.
    pub fn id(&self) -> Option<u32> {
        self.child.id()
    }

    /// Takes the command's end from stage 2's keeper, which sends the socket
    /// it reports on over `socket`: once the report is in and the keeper has
    /// ended, the run ends with what the pipes hold, without waiting for
    /// bubblewrap and its namespaces to be torn down one after the other;
    /// they are reaped, and the cgroup emptied and removed, after it.
    pub(crate) fn reported_on(&mut self, socket: std::os::unix::net::UnixStream) {
        self.report = Some(socket);
    }

    /// Sets the wall-clock limit and the cap per output stream of the run
    /// (they take effect from [`Started::run`]).
    pub fn bounds(&mut self, timeout: Duration, max_output_bytes: usize) {
        self.request.timeout = timeout;
        self.request.max_output_bytes = max_output_bytes;
    }

    /// Supervises the process to completion as [`run_attached`] does: writes
    /// `stdin_data` (then `attach.stdin`) and closes stdin, reads the
    /// output, enforces the timeout from now.
    pub async fn run(
        self,
        stdin_data: Option<Vec<u8>>,
        attach: Attach,
        mut on_line: impl FnMut(Stream, &str) + Send,
    ) -> Result<ExecOutcome, RunnerError> {
        let Started {
            mut child,
            limits,
            request,
            report,
        } = self;
        if let (Some(report), Some(pid)) = (attach.spawned, child.id()) {
            let _ = report.send(pid);
        }
        let started = Instant::now();
        // Declared after `child`, so dropped before it when the future is dropped: the
        // group is killed while the unreaped child still holds the group id.
        let mut supervisor = Supervisor::new(&child, &request, started)?;
        let mut outputs = Outputs {
            stdout: OutputStream::new(child.stdout.take(), request.max_output_bytes)
                .tap(attach.raw_output.clone(), Stream::Stdout),
            stderr: OutputStream::new(child.stderr.take(), request.max_output_bytes)
                .tap(attach.raw_output, Stream::Stderr),
        };
        let feed = feed_stdin(
            child.stdin.take(),
            stdin_data.unwrap_or_default(),
            attach.stdin,
        );
        let report = report.map(|socket| {
            socket
                .set_nonblocking(true)
                .and_then(|()| tokio::net::UnixStream::from_std(socket))
        });
        let report = report.transpose()?;
        let (status, exited_at) = supervisor
            .supervise(&mut child, feed, report, &mut outputs, &mut on_line)
            .await?;
        if supervisor.reported {
            let mut group = supervisor.group;
            tokio::spawn(async move {
                let _ = child.wait().await;
                group.release();
                limits.finish().await;
            });
        } else {
            supervisor.group.release();
            limits.finish().await;
        }

        let (exit_code, signal) = exit_code_of(status);
        let (stdout, stdout_truncated) = outputs.stdout.into_text();
        let (stderr, stderr_truncated) = outputs.stderr.into_text();
        Ok(ExecOutcome {
            exit_code,
            signal,
            timed_out: supervisor.timed_out,
            duration_ms: u64::try_from(exited_at.duration_since(started).as_millis())
                .unwrap_or(u64::MAX),
            stdout,
            stderr,
            stdout_truncated,
            stderr_truncated,
        })
    }
}

fn spawn(
    request: &ExecRequest,
    pipe_stdin: bool,
    limits: &limits::Enforcement,
) -> Result<Child, RunnerError> {
    let spawn_error = |source| RunnerError::Spawn {
        program: request.program.to_string_lossy().into_owned(),
        source,
    };
    // Checked here only for the message: the child's failing `chdir` would report a bare
    // "No such file or directory", which reads as if the program were missing.
    if let Err(err) = std::fs::metadata(&request.cwd) {
        let cwd = request.cwd.display();
        return Err(spawn_error(io::Error::new(
            err.kind(),
            format!("working directory `{cwd}`: {err}"),
        )));
    }
    let mut command = Command::new(&request.program);
    command
        .args(&request.args)
        // Nothing of toolgate's own environment (tokens, proxy credentials) reaches the child.
        .env_clear()
        .envs(request.env.iter().map(|(key, value)| (key, value)))
        .current_dir(&request.cwd)
        .stdin(if pipe_stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    die_with_toolgate(&mut command);
    close_inherited_descriptors(&mut command);
    // A session of its own (and so a group of its own, whose id is the child's pid): one
    // kill(-pgid) reaches every process the command starts, and no controlling terminal
    // is left for TIOCSTI or /dev/tty to inject input into the user's shell.
    group::lead_new_session(&mut command);
    limits.apply_before_exec(&mut command);
    if let Some((fd, target)) = &request.pass_fd {
        pass_descriptor(
            &mut command,
            std::os::fd::AsRawFd::as_raw_fd(fd.as_ref()),
            *target,
        );
    }
    if let Some(target) = request.lifeline {
        pass_lifeline(&mut command, target).map_err(spawn_error)?;
    }
    // Last: the pid namespace forks, and only hooks before it run in the process that
    // stays toolgate's child.
    limits.enter_pid_namespace(&mut command, request);
    spawner::spawn(command).map_err(spawn_error)
}

/// Makes the child die with toolgate, also when toolgate is killed with SIGKILL: the
/// kernel sends it SIGKILL when toolgate's spawner thread (that is, toolgate) exits,
/// and it never execs when toolgate is already gone (see [`lifetime`]). The first of
/// the child's hooks, so that toolgate's own child asks, before any hook forks.
fn die_with_toolgate(command: &mut Command) {
    let hook = lifetime::die_with_parent_hook(rustix::process::getpid());
    // SAFETY: the hook runs in the forked child before exec and makes raw prctl and
    // getppid syscalls only, returning errors built from a raw errno (no allocation).
    unsafe {
        command.pre_exec(hook);
    }
}

/// Marks every descriptor above stderr close-on-exec in the child, before the hooks that
/// hand it the ones it is meant to get.
///
/// Attack: toolgate inherits descriptors from whatever started it (an MCP client, a
/// shell, a supervisor: a pipe, a socket, a directory outside every root) and std passes
/// every one without close-on-exec to the child. Through bubblewrap and stage 2 they
/// reach the sandboxed command, which can write to the pipe, talk to the socket, or
/// `openat` past the sandbox's mounts from the directory.
fn close_inherited_descriptors(command: &mut Command) {
    // SAFETY: runs in the forked child before exec; one raw close_range syscall on
    // descriptor numbers. Kernels before 5.11 refuse the flag: the error is ignored
    // there, which leaves the inherited descriptors as they were.
    unsafe {
        command.pre_exec(|| {
            libc::syscall(
                libc::SYS_close_range,
                3u32,
                u32::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            );
            Ok(())
        });
    }
}

/// Hands the child toolgate's lifeline as descriptor `target`. After every other
/// descriptor hook, whose `dup2` must not overwrite it.
fn pass_lifeline(command: &mut Command, target: i32) -> io::Result<()> {
    let hook = lifetime::lifeline_hook(target)?;
    // SAFETY: the hook runs in the forked child before exec and makes one raw dup2
    // syscall on a descriptor that stays open for the life of the process.
    unsafe {
        command.pre_exec(hook);
    }
    Ok(())
}

/// Makes `source` appear as `target` in the child, without close-on-exec.
fn pass_descriptor(command: &mut Command, source: i32, target: i32) {
    // SAFETY: runs in the forked child before exec; dup2 and fcntl are
    // async-signal-safe raw syscalls on descriptor numbers that stay open in
    // the parent (the request owns `source`) until spawn returns.
    unsafe {
        command.pre_exec(move || {
            if source == target {
                if libc::fcntl(target, libc::F_SETFD, 0) == -1 {
                    return Err(io::Error::last_os_error());
                }
            } else if libc::dup2(source, target) == -1 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Writes all of `data` to the child's stdin, then every chunk of `more` as it
/// arrives, then closes it.
async fn feed_stdin(
    stdin: Option<ChildStdin>,
    data: Vec<u8>,
    more: Option<tokio::sync::mpsc::Receiver<Vec<u8>>>,
) -> io::Result<()> {
    let Some(mut pipe) = stdin else {
        return Ok(());
    };
    let result: io::Result<()> = async {
        pipe.write_all(&data).await?;
        if let Some(mut more) = more {
            while let Some(chunk) = more.recv().await {
                pipe.write_all(&chunk).await?;
                pipe.flush().await?;
            }
        }
        Ok(())
    }
    .await;
    match result {
        // A command that exits or closes stdin without reading all of it is normal
        // (`head -1`, `true`); the rest of the input is simply not wanted.
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        result => result,
    }
}

/// Shell convention: the exit status, or 128 + n for death by signal n.
fn exit_code_of(status: ExitStatus) -> (i32, Option<i32>) {
    match (status.code(), status.signal()) {
        (Some(code), _) => (code, None),
        (None, Some(signal)) => (128 + signal, Some(signal)),
        // `wait` without WUNTRACED reports only exits and deaths by signal.
        (None, None) => (-1, None),
    }
}

/// `base + duration`, saturating far in the future instead of panicking on overflow.
fn deadline_after(base: Instant, duration: Duration) -> Instant {
    base.checked_add(duration)
        .unwrap_or_else(|| base + Duration::from_secs(100 * 365 * 24 * 3600))
}

struct Outputs {
    stdout: OutputStream<tokio::process::ChildStdout>,
    stderr: OutputStream<tokio::process::ChildStderr>,
}

/// Where the run is between spawn and return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Before the timeout.
    Running,
    /// Timed out, SIGTERM sent to the group; SIGKILL follows at `kill_at` if anything in
    /// the group is still alive then.
    Terminating { kill_at: Instant },
    /// SIGKILL sent to the group; waiting for the command to be reaped.
    Killed,
    /// The command is reaped and its group killed (or found empty): reading what is left
    /// in the pipes until EOF or `until`.
    Draining { until: Instant },
}

/// The timeout and kill state machine of one run.
struct Supervisor {
    group: ProcessGroup,
    started: Instant,
    timeout: Duration,
    kill_grace: Duration,
    phase: Phase,
    exit: Option<(ExitStatus, Instant)>,
    timed_out: bool,
    /// The run ended on stage 2's keeper's report, before the child.
    reported: bool,
}

impl Supervisor {
    fn new(child: &Child, request: &ExecRequest, started: Instant) -> Result<Self, RunnerError> {
        let group = ProcessGroup::of_leader(child)
            .ok_or_else(|| io::Error::other("the spawned child has no process id"))?;
        Ok(Self {
            group,
            started,
            timeout: request.timeout,
            kill_grace: request.kill_grace,
            phase: Phase::Running,
            exit: None,
            timed_out: false,
            reported: false,
        })
    }

    /// Drives the child until it has exited, its group is gone and its output is read.
    async fn supervise<F: FnMut(Stream, &str)>(
        &mut self,
        child: &mut Child,
        feed: impl Future<Output = io::Result<()>>,
        report: Option<tokio::net::UnixStream>,
        outputs: &mut Outputs,
        on_line: &mut F,
    ) -> Result<(ExitStatus, Instant), RunnerError> {
        let wait = child.wait();
        let has_report = report.is_some();
        let report = report::read(report);
        tokio::pin!(wait, feed, report);
        let mut fed = false;
        let mut reported = !has_report;
        loop {
            if let (Phase::Draining { until }, Some(exit)) = (self.phase, self.exit) {
                let closed = outputs.stdout.is_closed() && outputs.stderr.is_closed();
                if closed || Instant::now() >= until {
                    return Ok(exit);
                }
            }
            let deadline = self.next_deadline();
            tokio::select! {
                read = outputs.stdout.read_chunk() => {
                    outputs.stdout.consume(read, &mut |line| on_line(Stream::Stdout, line))?;
                }
                read = outputs.stderr.read_chunk() => {
                    outputs.stderr.consume(read, &mut |line| on_line(Stream::Stderr, line))?;
                }
                written = &mut feed, if !fed => {
                    fed = true;
                    written?;
                }
                status = &mut wait, if self.exit.is_none() => self.child_exited(status?),
                end = &mut report, if !reported && self.exit.is_none() => {
                    reported = true;
                    if let Some(status) = end {
                        // Every process of the command, and the keeper after
                        // them, has ended: all they wrote is in the pipes.
                        outputs.stdout.drain_now(&mut |line| on_line(Stream::Stdout, line))?;
                        outputs.stderr.drain_now(&mut |line| on_line(Stream::Stderr, line))?;
                        self.reported = true;
                        return Ok((status, Instant::now()));
                    }
                }
                () = sleep_until(deadline) => self.deadline_reached(),
            }
        }
    }

    fn next_deadline(&self) -> Option<Instant> {
        match self.phase {
            Phase::Running => Some(deadline_after(self.started, self.timeout)),
            // Once the command has died on SIGTERM, poll for the rest of its group, so a
            // group that obeyed does not wait out the whole grace period.
            Phase::Terminating { kill_at } if self.exit.is_some() => {
                Some(kill_at.min(Instant::now() + GROUP_POLL))
            }
            Phase::Terminating { kill_at } => Some(kill_at),
            Phase::Killed => None,
            Phase::Draining { until } => Some(until),
        }
    }

    fn child_exited(&mut self, status: ExitStatus) {
        let now = Instant::now();
        self.exit = Some((status, now));
        match self.phase {
            Phase::Running | Phase::Killed => {
                // Whatever the command left running in its group dies with it. This stops
                // a background process (`daemon &`, a miner, a reverse shell) from
                // outliving the run, and the sandbox, unobserved.
                self.group.signal(Signal::KILL);
                self.phase = Phase::Draining {
                    until: now + DRAIN_AFTER_EXIT,
                };
            }
            // The rest of the group still gets its grace period; see `deadline_reached`.
            Phase::Terminating { .. } | Phase::Draining { .. } => {}
        }
    }

    fn deadline_reached(&mut self) {
        let now = Instant::now();
        match self.phase {
            Phase::Running => {
                self.timed_out = true;
                // The whole group, not just the child: a command that forks its work into
                // the background must not survive its own timeout.
                self.group.signal(Signal::TERM);
                self.phase = Phase::Terminating {
                    kill_at: deadline_after(now, self.kill_grace),
                };
            }
            Phase::Terminating { kill_at } if now >= kill_at => {
                self.group.signal(Signal::KILL);
                self.phase = match self.exit {
                    Some(_) => Phase::Draining {
                        until: now + DRAIN_AFTER_EXIT,
                    },
                    None => Phase::Killed,
                };
            }
            Phase::Terminating { .. } => {
                if self.exit.is_some() && self.group.is_empty() {
                    self.phase = Phase::Draining {
                        until: now + DRAIN_AFTER_EXIT,
                    };
                }
            }
            Phase::Killed | Phase::Draining { .. } => {}
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::path::PathBuf;

    #[test]
    fn exit_status_follows_the_shell_convention() {
        // Raw wait statuses: exit code in bits 8..16, terminating signal in bits 0..7.
        let cases = [
            (0, (0, None)),
            (1 << 8, (1, None)),
            (42 << 8, (42, None)),
            (127 << 8, (127, None)),
            (9, (137, Some(9))),
            (15, (143, Some(15))),
            (25, (153, Some(25))),
        ];
        for (raw, expected) in cases {
            assert_eq!(
                exit_code_of(ExitStatus::from_raw(raw)),
                expected,
                "raw {raw}"
            );
        }
    }

    #[test]
    fn deadline_saturates_instead_of_overflowing() {
        let now = Instant::now();
        assert!(deadline_after(now, Duration::MAX) > now + Duration::from_secs(3600));
        assert_eq!(
            deadline_after(now, Duration::from_secs(1)),
            now + Duration::from_secs(1)
        );
    }

    #[test]
    fn builder_sets_every_field_and_defaults_are_safe() {
        let request = ExecRequest::new("prog");
        assert_eq!(
            (
                request.cwd.clone(),
                request.timeout,
                request.kill_grace,
                request.max_output_bytes,
                request.env.is_empty(),
                request.stdin.is_none(),
                request.limits.clone(),
            ),
            (
                PathBuf::from("/"),
                Duration::from_secs(120),
                Duration::from_secs(2),
                1024 * 1024,
                true,
                true,
                ResourceLimits::default(),
            )
        );
        let limits = ResourceLimits {
            open_files: Some(8),
            ..ResourceLimits::default()
        };
        let request = request
            .arg("a")
            .args(["b", "c"])
            .env("K", "V")
            .cwd("/tmp")
            .stdin("in")
            .timeout(Duration::from_secs(3))
            .kill_grace(Duration::from_secs(4))
            .limits(limits.clone())
            .max_output_bytes(5);
        assert_eq!(request.args, ["a", "b", "c"]);
        assert_eq!(request.env, [("K".into(), "V".into())]);
        assert_eq!(request.cwd, PathBuf::from("/tmp"));
        assert_eq!(request.stdin.as_deref(), Some(&b"in"[..]));
        assert_eq!(
            (
                request.timeout,
                request.kill_grace,
                request.max_output_bytes
            ),
            (Duration::from_secs(3), Duration::from_secs(4), 5)
        );
        assert_eq!(request.limits, limits);
    }

    #[test]
    fn spawn_error_names_the_program() {
        let err = RunnerError::Spawn {
            program: "frobnicate".into(),
            source: io::Error::from(io::ErrorKind::NotFound),
        };
        assert_eq!(
            err.to_string(),
            "cannot start `frobnicate`: entity not found"
        );
    }
}

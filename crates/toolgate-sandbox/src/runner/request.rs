//! What the runner is asked to run: [`ExecRequest`] and its builder.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use super::ResourceLimits;

/// One command to run: program, arguments, the complete environment, and its bounds.
#[derive(Debug, Clone)]
pub struct ExecRequest {
    /// The program; a bare name is looked up in the `PATH` of [`ExecRequest::env`]
    /// (or `/bin:/usr/bin` when that has none).
    pub program: OsString,
    pub args: Vec<OsString>,
    /// The complete environment of the child (nothing is inherited).
    pub env: Vec<(OsString, OsString)>,
    pub cwd: PathBuf,
    /// Bytes written to the child's stdin, which is then closed; `None`: `/dev/null`.
    pub stdin: Option<Vec<u8>>,
    /// Wall-clock limit, from spawn to SIGTERM of the group.
    pub timeout: Duration,
    /// Time between SIGTERM and SIGKILL of the group.
    pub kill_grace: Duration,
    pub limits: ResourceLimits,
    /// Bytes kept per output stream; the rest is read and discarded.
    pub max_output_bytes: usize,
    /// A descriptor handed to the child under a fixed number (stage 2 reads
    /// the environment from it); every other descriptor is closed on exec.
    pub pass_fd: Option<(std::sync::Arc<std::os::fd::OwnedFd>, i32)>,
    /// A descriptor number under which the child gets the read end of toolgate's
    /// lifeline: end-of-file on it means toolgate is gone (stage 2 watches it).
    pub lifeline: Option<i32>,
    /// As root: the program is the init of a pid namespace of its own that dies with
    /// toolgate, and every process in it with the program (see
    /// [`ExecRequest::own_pid_namespace`]).
    pub own_pid_namespace: bool,
    /// With [`ExecRequest::own_pid_namespace`]: the stage 2 binary the init's
    /// stand-in execs (see [`ExecRequest::stand_in`]); `None`: the stand-in stays
    /// a forked copy of toolgate.
    pub stand_in: Option<PathBuf>,
}

impl ExecRequest {
    /// A request with safe defaults: no arguments, an empty environment, cwd `/`, no
    /// stdin, a 120 s timeout with a 2 s grace, 1 MiB kept per stream, no extra limits.
    pub fn new(program: impl Into<OsString>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            cwd: PathBuf::from("/"),
            stdin: None,
            timeout: Duration::from_secs(120),
            kill_grace: Duration::from_secs(2),
            limits: ResourceLimits::default(),
            max_output_bytes: 1024 * 1024,
            pass_fd: None,
            lifeline: None,
            own_pid_namespace: false,
            stand_in: None,
        }
    }

    /// As root, makes the program the init of a pid namespace of its own that dies with
    /// toolgate: when it dies, the kernel kills every process in the namespace, also
    /// those it forked without a death signal (bubblewrap's pid 1 during its setup).
    /// The runner's child stays as its stand-in (the pid the caller sees): TERM, INT,
    /// HUP and QUIT act as they would on the program. Not for a program that must die
    /// by a signal it sends itself (an init cannot) or must see the host's processes.
    /// Without root nothing changes.
    #[must_use]
    pub fn own_pid_namespace(mut self) -> Self {
        self.own_pid_namespace = true;
        self
    }

    /// With [`ExecRequest::own_pid_namespace`], the stand-in execs `stage2` (a binary
    /// that runs [`crate::stage2::main_with_args`]) once the init is forked, instead of
    /// living on as a copy of toolgate until the command ends. A copy shares every page
    /// of toolgate's memory: each first write toolgate makes to one of them afterwards
    /// copies the page, and forking the init from the copy duplicates toolgate's page
    /// tables once more. When the exec fails the copy stands in as before.
    #[must_use]
    pub fn stand_in(mut self, stage2: impl Into<PathBuf>) -> Self {
        self.stand_in = Some(stage2.into());
        self
    }

    /// Hands the child the read end of toolgate's lifeline as descriptor number
    /// `target` (3 or above, not the [`ExecRequest::pass_fd`] one).
    #[must_use]
    pub fn lifeline(mut self, target: i32) -> Self {
        self.lifeline = Some(target.max(3));
        self
    }

    /// Hands `fd` to the child as descriptor number `target` (3 or above).
    #[must_use]
    pub fn pass_fd(mut self, fd: std::os::fd::OwnedFd, target: i32) -> Self {
        self.pass_fd = Some((std::sync::Arc::new(fd), target.max(3)));
        self
    }

    #[must_use]
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    #[must_use]
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Adds one variable to the child's environment.
    #[must_use]
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    #[must_use]
    pub fn cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.cwd = cwd.into();
        self
    }

    #[must_use]
    pub fn stdin(mut self, stdin: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(stdin.into());
        self
    }

    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    #[must_use]
    pub fn kill_grace(mut self, kill_grace: Duration) -> Self {
        self.kill_grace = kill_grace;
        self
    }

    #[must_use]
    pub fn limits(mut self, limits: ResourceLimits) -> Self {
        self.limits = limits;
        self
    }

    #[must_use]
    pub fn max_output_bytes(mut self, max_output_bytes: usize) -> Self {
        self.max_output_bytes = max_output_bytes;
        self
    }
}

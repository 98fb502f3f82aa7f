//! How a sandbox's run becomes the runner's request: the plan's argv and the
//! command's bounds, stage 2's descriptors, and the pid namespace with its
//! stand-in.

use std::ffi::OsString;
use std::path::Path;

use super::{Sandbox, SandboxCommand};
use crate::probe::Backend;
use crate::runner::ExecRequest;
use crate::spec::SandboxSpec;

/// The descriptor number stage 2 reads the environment from.
pub(super) const ENV_FD: i32 = 3;

/// The descriptor number of toolgate's lifeline in stage 2: it keeps the command and
/// ends its whole tree once toolgate is gone (a SIGKILLed server leaves nothing).
pub(super) const LIFELINE_FD: i32 = 4;

impl Sandbox {
    /// Stage 2's binary as the stand-in of a command's init (see
    /// [`ExecRequest::stand_in`]), in a process that lives on after its
    /// commands, when stage 2 is a binary of its own. A short-lived process
    /// ends with its command, and with it the copy's sharing of its memory,
    /// so the exec would only add its 1-2 ms to the run (`toolgate sandbox --
    /// sh -c true`: 30.9 ms with the copy, 32.6 ms with the exec, hyperfine
    /// 150 runs); exec'ing a program that runs stage 2 behind a prefix
    /// (toolgate's whole binary) would cost more than the copy it replaces.
    pub(super) fn stand_in(&self) -> Option<&Path> {
        (!self.short_lived && self.files.stage2_prefix.is_empty())
            .then_some(self.files.stage2.as_path())
    }
}

/// `request` for stage 2: the environment (or a pooled sandbox's socket)
/// as descriptor `ENV_FD`, never an argv, and toolgate's lifeline; `stand_in`:
/// see [`Sandbox::stand_in`].
pub(super) fn staged(
    request: ExecRequest,
    env: std::os::fd::OwnedFd,
    backend: Backend,
    stand_in: Option<&Path>,
) -> ExecRequest {
    let request = request.pass_fd(env, ENV_FD).lifeline(LIFELINE_FD);
    match backend {
        // Attack: toolgate is SIGKILLed while bubblewrap sets up its mounts; its
        // pid 1, forked without a death signal, waits for ever for an outer process
        // that died with toolgate, before stage 2 and its lifeline exist. As the
        // init of a pid namespace of its own, the outer process takes it along.
        Backend::Bwrap => {
            let request = request.own_pid_namespace();
            match stand_in {
                Some(stage2) => request.stand_in(stage2),
                None => request,
            }
        }
        Backend::Landlock | Backend::None => request,
    }
}

/// The runner's request for `command` in `spec`: `argv` (the plan's), the
/// environment, cwd, bounds and stdin.
pub(super) fn request(
    command: &SandboxCommand,
    spec: &SandboxSpec,
    argv: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
) -> ExecRequest {
    let mut argv = argv.into_iter();
    let program = argv.next().unwrap_or_default();
    let mut request = ExecRequest::new(program).args(argv);
    for (key, value) in env {
        request = request.env(key, value);
    }
    let mut request = request
        .cwd(spec.cwd.clone())
        .timeout(command.timeout)
        .limits(command.limits.clone())
        .max_output_bytes(command.max_output_bytes);
    if let Some(stdin) = &command.stdin {
        request = request.stdin(stdin.clone());
    }
    request
}

//! Sandboxes started ahead of need (see [`super::SandboxConfig::pool`]).
//!
//! A server runs command after command in the same spec; most of a
//! sandboxed command's start is the sandbox's (bubblewrap's namespaces and
//! mounts, stage 2's masks and filters, joining the cgroup), not the
//! command's. So after a run, one sandbox for the same plan is started and
//! left waiting in stage 2 (`stage2::pooled`), fully confined, for the next
//! command. Where a command came while its sandbox was still starting
//! (commands back to back), the next one's is started as soon as the
//! command is handed over instead, while it runs.
//!
//! Freshness, in two steps, at the moment a command is handed out:
//! - toolgate makes the plan for the command as if nothing were pooled
//!   (protected names, private files, roots as they are now) and uses the
//!   pooled sandbox only if it was made from the very same plan: a
//!   protected name that appeared or vanished meanwhile, a new private
//!   file, another working directory or other limits all differ;
//! - stage 2 then checks what the plan cannot show: that each of its masks
//!   still lies over its target (a host program that deletes an entry or
//!   renames another over it detaches the mounts on it), and that the
//!   roots and working directory are the host's (by device and inode).
//!
//! Either says no: the pooled sandbox is discarded and the command gets a
//! fresh one. A pooled sandbox runs one command; it leaves the pool by
//! being taken out of it (a `Mutex<Option<_>>`), so no two commands can
//! get it.

use std::ffi::OsString;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Mutex;

use rustix::net::RecvFlags;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::new_repos::RecordingHost;
use super::{Sandbox, SandboxCommand, SandboxError, request, staged};
use crate::plan::BwrapPlan;
use crate::probe::Backend;
use crate::runner::{self, Attach, ExecRequest, ResourceLimits, Started};
use crate::spec::{NetworkMode, SandboxSpec};
use crate::stage2::Handout;

/// What a pooled sandbox must match to be used: the whole plan up to the
/// command, and the limits its cgroup and rlimits were made with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Key {
    pub(super) argv: Vec<OsString>,
    pub(super) limits: ResourceLimits,
}

/// One waiting sandbox.
#[derive(Debug)]
struct Pooled {
    key: Key,
    started: Started,
    socket: UnixStream,
}

/// At most one waiting sandbox, for the plan last used.
#[derive(Debug, Default)]
pub(super) struct Pool {
    slot: Mutex<Option<Pooled>>,
}

impl Pool {
    /// Starts a sandbox for `key` (whose argv ends before the command) unless
    /// one is waiting for it already; one for another plan is discarded.
    pub(super) fn fill(
        &self,
        key: Key,
        request: impl FnOnce(Vec<OsString>, std::os::fd::OwnedFd) -> ExecRequest,
    ) -> Result<(), String> {
        let mut slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
        if slot.as_ref().is_some_and(|p| p.key == key) {
            return Ok(());
        }
        *slot = None;
        let (ours, theirs) = UnixStream::pair().map_err(|e| format!("socket pair: {e}"))?;
        let mut argv = key.argv.clone();
        argv.push("--pooled".into());
        let started = runner::start(request(argv, theirs.into())).map_err(|e| e.to_string())?;
        *slot = Some(Pooled {
            key,
            started,
            socket: ours,
        });
        Ok(())
    }

    /// Hands `handout` to the sandbox waiting for `key`, if there is one and
    /// it is still fresh (see the module doc), and returns it running the
    /// command. `None`: the command needs a fresh sandbox.
    pub(super) async fn take(&self, key: &Key, handout: &Handout) -> Option<Taken> {
        let pooled = {
            let mut slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
            match slot.take() {
                Some(p) if p.key == *key => p,
                // Another plan: of no use any more.
                _ => return None,
            }
        };
        let Pooled {
            mut started,
            socket,
            ..
        } = pooled;
        let was_starting = !said_ready(&socket, RecvFlags::DONTWAIT);
        let report = socket.try_clone().ok()?;
        match hand_out(socket, handout).await {
            Ok(()) => {
                started.reported_on(report);
                Some(Taken {
                    started,
                    was_starting,
                })
            }
            // Stale, or it died: dropped, and so killed.
            Err(_) => None,
        }
    }

    /// Waits until the pooled sandbox (if any) has said it is ready; `false`
    /// if none is waiting or it died.
    pub(super) async fn ready(&self) -> bool {
        let socket = {
            let slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
            match slot.as_ref().map(|p| p.socket.try_clone()) {
                Some(Ok(socket)) => socket,
                _ => return false,
            }
        };
        tokio::task::spawn_blocking(move || said_ready(&socket, RecvFlags::empty()))
            .await
            .unwrap_or(false)
    }
}

/// A pooled sandbox running the command handed to it.
pub(super) struct Taken {
    pub(super) started: Started,
    /// It was still starting when the command came: commands come faster
    /// than a sandbox is made after each.
    pub(super) was_starting: bool,
}

/// Whether the pooled sandbox on `socket` has said it is ready (`flags`:
/// `DONTWAIT` to ask, none to wait for it). Peeks at the `R` without taking
/// it: the hand-out reads it.
fn said_ready(socket: &UnixStream, flags: RecvFlags) -> bool {
    let mut byte = [0u8; 1];
    rustix::net::recv(socket, &mut byte, RecvFlags::PEEK | flags)
        .is_ok_and(|(n, _)| n == 1 && byte[0] == b'R')
}

/// Sends `handout` and reads the answer: `R` (ready), then `G` (running)
/// or `S` and the reason (stale; the sandbox ends without running it).
async fn hand_out(socket: UnixStream, handout: &Handout) -> Result<(), String> {
    socket
        .set_nonblocking(true)
        .map_err(|e| format!("socket: {e}"))?;
    let mut socket =
        tokio::net::UnixStream::from_std(socket).map_err(|e| format!("socket: {e}"))?;
    let io = |e: std::io::Error| format!("the pooled sandbox: {e}");
    socket.write_all(&handout.encode()).await.map_err(io)?;
    socket.shutdown().await.map_err(io)?;
    let mut answer = [0u8; 2];
    socket.read_exact(&mut answer).await.map_err(io)?;
    // Stale: stage 2 said why on its stderr, which nobody reads.
    if &answer == b"RG" {
        Ok(())
    } else {
        Err("stale".into())
    }
}

impl Sandbox {
    /// With [`SandboxConfig::pool`]: starts a sandbox for commands in `spec`
    /// (with the sandbox's own limits) ahead of the first, and waits until it
    /// is ready. `Ok(false)` when commands in `spec` are not pooled (see
    /// [`SandboxConfig::pool`]) or it could not start (the first command then
    /// says why).
    pub async fn warm(&self, spec: &SandboxSpec) -> Result<bool, SandboxError> {
        match &self.pool {
            Some(pool) if self.prestart(spec)? => Ok(pool.ready().await),
            _ => Ok(false),
        }
    }

    /// Like [`Sandbox::warm`] without waiting: starts the sandbox and
    /// returns whether one was started (it blocks for the fork).
    pub fn prestart(&self, spec: &SandboxSpec) -> Result<bool, SandboxError> {
        let Some(pool) = &self.pool else {
            return Ok(false);
        };
        let spec = self.protected_spec(spec)?;
        let command = SandboxCommand::new(["true"]).limits(self.limits.clone());
        let host = RecordingHost::new(self.creation_guard);
        let plan = self.launch(&spec, &command.argv, Path::new("/tmp"), None, &host)?;
        let Some(key) = self.pool_key(&spec, &plan, &command) else {
            return Ok(false);
        };
        // Errors are left for the command that would use it: it gets a fresh
        // sandbox, which says why.
        let fill = pooled_request(spec, command.limits, self.stand_in().map(Path::to_path_buf));
        Ok(pool.fill(key, fill).is_ok())
    }

    /// What a pooled sandbox for this run must match, if runs like it are
    /// pooled at all: the plan's argv up to the command, and the limits.
    pub(super) fn pool_key(
        &self,
        spec: &SandboxSpec,
        plan: &BwrapPlan,
        command: &SandboxCommand,
    ) -> Option<Key> {
        let pooled = self.pool.is_some()
            && self.backend == Backend::Bwrap
            && self.creation_guard
            && spec.network != NetworkMode::Proxy
            && crate::plan::HostView::masks_in_stage2(&crate::plan::RealHost)
            && plan.created_mount_points.is_empty();
        // `... -- COMMAND`: the plan without `--` and the command.
        let prefix = plan.argv.len().checked_sub(command.argv.len() + 1)?;
        (pooled && plan.argv.get(prefix).is_some_and(|a| a == "--")).then(|| Key {
            argv: plan.argv[..prefix].to_vec(),
            limits: command.limits.clone(),
        })
    }
}

/// How a pooled sandbox for commands in `spec` with `limits` is started,
/// given the plan's argv (ending in `--pooled`) and stage 2's socket.
pub(super) fn pooled_request(
    spec: SandboxSpec,
    limits: ResourceLimits,
    stand_in: Option<std::path::PathBuf>,
) -> impl FnOnce(Vec<OsString>, std::os::fd::OwnedFd) -> ExecRequest + Send + 'static {
    move |argv, socket| {
        let template = SandboxCommand::new(["true"]).limits(limits);
        staged(
            request(&template, &spec, argv, Vec::new()),
            socket,
            Backend::Bwrap,
            stand_in.as_deref(),
        )
    }
}

/// What a pooled sandbox gets for `command`: see `stage2::pooled`.
pub(super) fn handout(
    spec: &SandboxSpec,
    command: &SandboxCommand,
    attach: &Attach,
    env: Vec<(OsString, OsString)>,
) -> Result<crate::stage2::Handout, SandboxError> {
    use std::os::unix::fs::MetadataExt;
    let identity = |path: &Path| {
        std::fs::metadata(path)
            .map(|m| (m.dev(), m.ino()))
            .map_err(|e| SandboxError::Setup(format!("{}: {e}", path.display())))
    };
    let mut roots = Vec::new();
    for root in &spec.writable_roots {
        let (dev, ino) = identity(root)?;
        roots.push((root.clone(), dev, ino));
    }
    Ok(crate::stage2::Handout {
        command: command.argv.clone(),
        env,
        null_stdin: command.stdin.is_none() && attach.stdin.is_none(),
        roots,
        cwd: identity(&spec.cwd)?,
    })
}

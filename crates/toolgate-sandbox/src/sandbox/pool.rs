//! Sandboxes started ahead of need (see [`super::SandboxConfig::pool`]).
//!
//! A server runs command after command in the same spec; most of a
//! sandboxed command's start is the sandbox's (bubblewrap's namespaces and
//! mounts, stage 2's masks and filters, joining the cgroup), not the
//! command's. So after a run, one sandbox for the same plan is started and
//! left waiting in stage 2 (`stage2::pooled`), fully confined, for the next
//! command.
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
use std::sync::Mutex;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::runner::{self, ExecRequest, ResourceLimits, Started};
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
    pub(super) async fn take(&self, key: &Key, handout: &Handout) -> Option<Started> {
        let pooled = {
            let mut slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
            match slot.take() {
                Some(p) if p.key == *key => p,
                // Another plan: of no use any more.
                _ => return None,
            }
        };
        let Pooled {
            started, socket, ..
        } = pooled;
        match hand_out(socket, handout).await {
            Ok(()) => Some(started),
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
        // Peeks at the `R` without taking it: the hand-out reads it.
        tokio::task::spawn_blocking(move || {
            let mut byte = [0u8; 1];
            rustix::net::recv(&socket, &mut byte, rustix::net::RecvFlags::PEEK)
                .is_ok_and(|(n, _)| n == 1 && byte[0] == b'R')
        })
        .await
        .unwrap_or(false)
    }
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

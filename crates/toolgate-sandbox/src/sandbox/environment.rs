//! A sandboxed command's environment: which variables it gets, the checks
//! no caller can skip, and the pipe that carries the values to stage 2.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::Path;

use toolgate_core::command_env;

use super::network::{EgressSetup, is_proxy_variable, proxy_environment};
use super::{DEFAULT_ENV, FALLBACK_PATH, Sandbox, SandboxCommand, SandboxError};
use crate::probe::Backend;
use crate::spec::{NetworkMode, SandboxSpec};
use crate::stage2::encode_env;

impl Sandbox {
    /// The command's environment: the defaults and the named host
    /// variables, then the explicit values.
    pub(super) fn environment(
        &self,
        spec: &SandboxSpec,
        command: &SandboxCommand,
    ) -> Vec<(OsString, OsString)> {
        let mut env: BTreeMap<String, String> = BTreeMap::new();
        let names = DEFAULT_ENV
            .iter()
            .copied()
            .chain(command.pass_env.iter().map(String::as_str));
        for name in names {
            // Proxy settings (and the credentials they often embed) are the
            // egress proxy's business, never the command's.
            if is_proxy_variable(name) {
                continue;
            }
            if let Some(value) = self.host_env.get(name) {
                env.insert(name.to_owned(), value.clone());
            }
        }
        // HOME and TMPDIR must be places the command can use.
        let home_usable = env.get("HOME").is_some_and(|h| {
            spec.writable_roots
                .iter()
                .any(|r| Path::new(h).starts_with(r))
        });
        if !home_usable && self.backend != Backend::None {
            env.insert("HOME".into(), "/tmp".into());
        }
        if self.backend == Backend::Bwrap {
            env.insert("TMPDIR".into(), "/tmp".into());
        }
        for (name, value) in &command.set_env {
            env.insert(name.clone(), value.clone());
        }
        // Whoever set PATH (the host, the call's `env`): an empty or
        // relative entry (`/usr/bin:`, `.`) searches the command's working
        // directory, a workspace the agent writes, and an entry inside a
        // root or a scratch directory is a place it writes too. A planted
        // `ls` there would answer to the bare name `ls`, which a command
        // allowlist means as the system's program.
        let path = env
            .get("PATH")
            .map(|path| system_path_entries(path, |dir| self.command_writes(spec, dir)))
            .filter(|path| !path.is_empty());
        env.insert("PATH".into(), path.unwrap_or_else(|| FALLBACK_PATH.into()));
        if spec.network == NetworkMode::Proxy {
            // The forwarder's ports are the only way out: nothing may point
            // the command elsewhere, not even an explicit value.
            env.retain(|name, _| !is_proxy_variable(name));
            let rules = self.egress.as_ref().map(EgressSetup::rules);
            env.extend(proxy_environment(
                env.get("PATH").map(String::as_str),
                rules,
            ));
        }
        env.into_iter().map(|(k, v)| (k.into(), v.into())).collect()
    }

    /// Refuses names and values that would smuggle extra variables through
    /// the `NAME=VALUE\0` encoding, and variables that change what runs
    /// (`BASH_ENV`, `LD_PRELOAD`, `GIT_CONFIG_*` ...; see
    /// [`toolgate_core::command_env`]), set or passed from the host: with
    /// them a command runs code no word of it names, around the command
    /// policy. The tools refuse them first with a friendlier message; this
    /// is the check no caller can skip.
    pub(super) fn check_environment(command: &SandboxCommand) -> Result<(), SandboxError> {
        for (name, value) in &command.set_env {
            if name.is_empty() || name.contains(['=', '\0']) || value.contains('\0') {
                return Err(SandboxError::Setup(format!(
                    "environment variable {name:?}: names must be non-empty without `=` or NUL, values without NUL"
                )));
            }
        }
        let names = command
            .set_env
            .iter()
            .map(|(name, _)| name.as_str())
            .chain(command.pass_env.iter().map(String::as_str));
        let refused = command_env::refused_variables(names);
        if !refused.is_empty() {
            return Err(SandboxError::Setup(format!(
                "refused environment variables: {}; they change which program runs, so no \
                 command gets them",
                command_env::describe_refused(&refused)
            )));
        }
        Ok(())
    }
}

/// The entries of a `PATH` value a command cannot plant programs in, in
/// order: empty and relative entries (which name the working directory) and
/// those `writable` says the command can write are dropped.
pub(super) fn system_path_entries(path: &str, writable: impl Fn(&Path) -> bool) -> String {
    let entries: Vec<&str> = path
        .split(':')
        .filter(|e| e.starts_with('/') && !writable(Path::new(e)))
        .collect();
    entries.join(":")
}

/// The environment on one end of a socket pair, the other end shut for
/// writing once it is written (stage 2 reads it to its end): stage 2's
/// keeper then hands toolgate its report socket over it (see
/// `runner::Started::reported_on`). Returns stage 2's end and toolgate's.
pub(super) fn env_socket(
    env: &[(OsString, OsString)],
) -> Result<(OwnedFd, std::os::unix::net::UnixStream), SandboxError> {
    let bytes = encoded(env)?;
    let setup = |e: std::io::Error| SandboxError::Setup(format!("socket pair: {e}"));
    let (mut ours, theirs) = std::os::unix::net::UnixStream::pair().map_err(setup)?;
    // Fits in the socket's buffer, so this never blocks.
    ours.write_all(&bytes).map_err(setup)?;
    ours.shutdown(std::net::Shutdown::Write).map_err(setup)?;
    Ok((OwnedFd::from(theirs), ours))
}

/// A pipe holding the environment; the read end goes to stage 2. The values
/// travel through it so they never appear in any argv.
pub(super) fn env_pipe(env: &[(OsString, OsString)]) -> Result<OwnedFd, SandboxError> {
    let bytes = encoded(env)?;
    let setup = |e: std::io::Error| SandboxError::Setup(format!("pipe: {e}"));
    let (read, mut write) = std::io::pipe().map_err(setup)?;
    // Fits in the pipe buffer, so this never blocks.
    write.write_all(&bytes).map_err(setup)?;
    drop(write);
    Ok(OwnedFd::from(read))
}

/// The environment as stage 2 reads it, at most 60 KiB: what a pipe's or a
/// socket's buffer takes, so writing it all before the spawn never blocks.
fn encoded(env: &[(OsString, OsString)]) -> Result<Vec<u8>, SandboxError> {
    let bytes = encode_env(env);
    if bytes.len() > 60 * 1024 {
        return Err(SandboxError::Setup(
            "the environment is larger than 60 KiB".into(),
        ));
    }
    Ok(bytes)
}

//! The seam tools work through: files via the jail, commands via the
//! sandbox. `LocalWorkspace` runs both on this machine; a remote
//! implementation (a VM or container) offers the same trait.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use serde::Serialize;

use crate::jail::{EntryInfo, FileStat, Jail, JailError};
use crate::probe::Backend;
use crate::runner::{Attach, Stream};
use crate::sandbox::{Sandbox, SandboxCommand, SandboxError, SandboxOutcome};
use crate::spec::{NetworkMode, SandboxSpec};

/// What went wrong in a workspace operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkspaceError {
    /// The path is under no root of the workspace.
    #[error("`{}` is outside every workspace root ({roots}); use a path inside one", path.display())]
    OutsideRoots {
        /// The path as given.
        path: PathBuf,
        /// The roots, for the message.
        roots: String,
    },
    /// The jail refused or failed.
    #[error(transparent)]
    Jail(#[from] JailError),
    /// The sandbox refused or failed.
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// A blocking task failed.
    #[error("internal error: {0}")]
    Internal(String),
}

/// Whether the workspace can do its work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Health {
    /// Every root still opens.
    pub ok: bool,
    /// The sandbox backend.
    pub backend: Backend,
    /// Each root and whether it is usable.
    pub roots: Vec<(PathBuf, bool)>,
}

/// Files and commands of one agent.
#[async_trait]
pub trait Workspace: Send + Sync {
    /// The agent this workspace belongs to.
    fn agent_id(&self) -> &str;
    /// The working directory; relative paths resolve against it.
    fn cwd(&self) -> &Path;
    /// The roots, which are exactly what a command may write.
    fn roots(&self) -> &[PathBuf];
    /// The jail of the root holding `path` (absolute, or relative to `cwd`)
    /// and the path relative to that root. In-process tools do their file
    /// I/O through it; the innermost root wins when roots nest.
    fn jail_for(&self, path: &Path) -> Result<(Arc<Jail>, PathBuf), WorkspaceError>;
    /// Runs a command in the sandbox, in `cwd` (relative to the workspace cwd).
    async fn exec(
        &self,
        command: SandboxCommand,
        cwd: Option<&Path>,
    ) -> Result<SandboxOutcome, WorkspaceError>;
    /// Like [`Workspace::exec`], with live stdin and the pid reported at
    /// spawn ([`Attach`]), calling `on_line(stream, line)` for every output
    /// line as it arrives (progress of long commands, background logs).
    async fn exec_attached(
        &self,
        command: SandboxCommand,
        cwd: Option<&Path>,
        attach: Attach,
        on_line: &mut (dyn for<'l> FnMut(Stream, &'l str) + Send + '_),
    ) -> Result<SandboxOutcome, WorkspaceError>;
    /// Reads a file, at most `limit` bytes.
    async fn read_file(&self, path: &Path, limit: u64) -> Result<Vec<u8>, WorkspaceError>;
    /// Writes a file atomically, keeping its mode.
    async fn write_file(&self, path: &Path, data: Vec<u8>) -> Result<(), WorkspaceError>;
    /// Whether a path exists.
    async fn file_exists(&self, path: &Path) -> Result<bool, WorkspaceError>;
    /// Metadata of a path.
    async fn stat(&self, path: &Path) -> Result<FileStat, WorkspaceError>;
    /// Entries of a directory, sorted by name.
    async fn list_dir(&self, path: &Path) -> Result<Vec<EntryInfo>, WorkspaceError>;
    /// Creates a directory and its parents.
    async fn mkdir(&self, path: &Path) -> Result<(), WorkspaceError>;
    /// Whether the roots and the sandbox are usable.
    async fn health(&self) -> Health;
    /// The sandbox backend its commands run under.
    fn backend(&self) -> Backend;
}

/// How long after a server's start its first sandbox is started.
const PRESTART_AFTER: std::time::Duration = std::time::Duration::from_millis(150);

/// A workspace on this machine.
pub struct LocalWorkspace {
    agent_id: String,
    cwd: PathBuf,
    roots: Vec<PathBuf>,
    jails: Vec<Arc<Jail>>,
    sandbox: Sandbox,
    network: NetworkMode,
    filesystem: FilesystemRules,
    protected: Vec<PathBuf>,
    /// Hidden from commands and unreadable for the file tools, where they
    /// lie inside a root (see [`LocalWorkspace::conceal`]).
    concealed: Vec<PathBuf>,
}

/// Extra filesystem rules for the commands of a workspace (from an
/// operator's settings, e.g. a sandbox-runtime file), besides the roots.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FilesystemRules {
    /// Hidden from commands (masked).
    pub read_deny: Vec<PathBuf>,
    /// Read-only for commands even inside a root.
    pub write_deny: Vec<PathBuf>,
    /// Writable for commands besides the roots.
    pub writable: Vec<PathBuf>,
}

impl FilesystemRules {
    /// Rules with these lists.
    pub fn new(read_deny: Vec<PathBuf>, write_deny: Vec<PathBuf>, writable: Vec<PathBuf>) -> Self {
        FilesystemRules {
            read_deny,
            write_deny,
            writable,
        }
    }

    /// Adds the rules to `spec`, whose writable roots are already set.
    pub fn apply_to(&self, spec: &mut SandboxSpec) {
        spec.writable_roots.extend(self.writable.iter().cloned());
        spec.read_deny.clone_from(&self.read_deny);
        spec.write_deny.clone_from(&self.write_deny);
    }
}

impl LocalWorkspace {
    /// A workspace over `roots` (resolved, e.g. by [`crate::RootMap`]), working in
    /// `cwd`, which must lie in one of them.
    pub fn new(
        agent_id: impl Into<String>,
        roots: Vec<PathBuf>,
        cwd: PathBuf,
        sandbox: Sandbox,
    ) -> Result<LocalWorkspace, WorkspaceError> {
        let jails = roots
            .iter()
            .map(|r| Jail::open(r).map(Arc::new))
            .collect::<Result<Vec<_>, _>>()?;
        // The jail canonicalises its root; the same form is used everywhere.
        let roots: Vec<PathBuf> = jails.iter().map(|j| j.root().to_owned()).collect();
        let cwd = std::fs::canonicalize(&cwd).unwrap_or(cwd);
        if !roots.iter().any(|r| cwd.starts_with(r)) {
            return Err(WorkspaceError::OutsideRoots {
                path: cwd,
                roots: display(&roots),
            });
        }
        Ok(LocalWorkspace {
            agent_id: agent_id.into(),
            cwd,
            roots,
            jails,
            sandbox,
            network: NetworkMode::None,
            filesystem: FilesystemRules::default(),
            protected: Vec::new(),
            concealed: Vec::new(),
        })
    }

    /// Keeps `paths` (absolute; toolgate's own configuration and data) and
    /// everything under them out of reach wherever they lie inside a root:
    /// the file tools refuse to write them and commands see them read-only,
    /// un-creatable when absent. Attack: an agent that writes
    /// `backend = "none"` into a config file toolgate reads at its next start.
    pub fn protect(mut self, paths: &[PathBuf]) -> Result<Self, WorkspaceError> {
        self.each_jail(|jail| paths.iter().for_each(|p| jail.protect(p)))?;
        self.protected.extend(paths.iter().cloned());
        Ok(self)
    }

    /// Keeps `paths` (absolute; toolgate's own state and data directories)
    /// and everything under them out of sight wherever they lie inside a
    /// root: the file tools refuse to read, list or write them and commands
    /// see them masked (and cannot write them). Attack: a root that holds the
    /// state directory (a root of `~/.local`, `XDG_STATE_HOME` inside the
    /// project) would give the agent the checkpoints, process logs and
    /// approval records of every other workspace.
    pub fn conceal(mut self, paths: &[PathBuf]) -> Result<Self, WorkspaceError> {
        let paths: Vec<PathBuf> = paths
            .iter()
            .map(|p| crate::roots::canonical_lenient(p))
            .filter(|p| self.roots.iter().any(|r| p.starts_with(r)))
            .collect();
        if paths.is_empty() {
            return Ok(self);
        }
        self.each_jail(|jail| paths.iter().for_each(|p| jail.conceal(p)))?;
        self.concealed.extend(paths);
        Ok(self)
    }

    /// Runs `change` on every root's jail, reopening one that is shared
    /// already (whoever shares it keeps the old one).
    fn each_jail(&mut self, change: impl Fn(&mut Jail)) -> Result<(), WorkspaceError> {
        for jail in &mut self.jails {
            if Arc::get_mut(jail).is_none() {
                *jail = Arc::new(jail.reopen()?);
            }
            if let Some(jail) = Arc::get_mut(jail) {
                change(jail);
            }
        }
        Ok(())
    }

    /// Sets extra filesystem rules for commands.
    pub fn filesystem(mut self, rules: FilesystemRules) -> Self {
        self.filesystem = rules;
        self
    }

    /// Sets the network mode of commands (decided by policy).
    pub fn network(mut self, network: NetworkMode) -> Self {
        self.network = network;
        self
    }

    /// The sandbox its commands run in.
    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    /// How a command of this workspace runs in `dir`: every root writable,
    /// the workspace's network mode and filesystem rules.
    /// Starts a sandbox for commands in the working directory ahead of the
    /// first (with [`crate::SandboxConfig::pool`]), from a task of the
    /// current runtime, a moment from now: a server's start (the client's
    /// handshake) goes first, since the fork and the sandbox's setup would
    /// slow it on a small machine. Nothing without a runtime.
    pub fn prestart(&self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (sandbox, spec) = (self.sandbox.clone(), self.spec_in(self.cwd.clone()));
        runtime.spawn(async move {
            tokio::time::sleep(PRESTART_AFTER).await;
            let _ = tokio::task::spawn_blocking(move || sandbox.prestart(&spec)).await;
        });
    }

    pub fn spec_in(&self, dir: PathBuf) -> SandboxSpec {
        let mut spec = SandboxSpec::for_root(self.roots[0].clone())
            .network(self.network)
            .cwd(dir);
        spec.writable_roots = self.roots.clone();
        self.filesystem.apply_to(&mut spec);
        spec.write_deny.extend(self.protected.iter().cloned());
        spec.write_deny.extend(self.concealed.iter().cloned());
        spec.read_deny.extend(self.concealed.iter().cloned());
        spec
    }

    fn locate(&self, path: &Path) -> Result<(Arc<Jail>, PathBuf), WorkspaceError> {
        let absolute = if path.is_absolute() {
            path.to_owned()
        } else {
            self.cwd.join(path)
        };
        let jail = self
            .jails
            .iter()
            .filter(|j| absolute.starts_with(j.root()))
            // The innermost root wins when roots nest.
            .max_by_key(|j| j.root().components().count())
            .ok_or_else(|| WorkspaceError::OutsideRoots {
                path: path.to_owned(),
                roots: display(&self.roots),
            })?;
        let relative = jail.relative(&absolute)?;
        Ok((jail.clone(), relative))
    }

    async fn blocking<T, F>(&self, path: &Path, op: F) -> Result<T, WorkspaceError>
    where
        T: Send + 'static,
        F: FnOnce(&Jail, &Path) -> Result<T, JailError> + Send + 'static,
    {
        let (jail, relative) = self.locate(path)?;
        tokio::task::spawn_blocking(move || op(&jail, &relative))
            .await
            .map_err(|e| WorkspaceError::Internal(e.to_string()))?
            .map_err(WorkspaceError::from)
    }
}

fn display(roots: &[PathBuf]) -> String {
    let names: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
    names.join(", ")
}

#[async_trait]
impl Workspace for LocalWorkspace {
    fn agent_id(&self) -> &str {
        &self.agent_id
    }

    fn cwd(&self) -> &Path {
        &self.cwd
    }

    fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    fn jail_for(&self, path: &Path) -> Result<(Arc<Jail>, PathBuf), WorkspaceError> {
        self.locate(path)
    }

    async fn exec(
        &self,
        command: SandboxCommand,
        cwd: Option<&Path>,
    ) -> Result<SandboxOutcome, WorkspaceError> {
        self.exec_attached(command, cwd, Attach::default(), &mut |_, _| {})
            .await
    }

    async fn exec_attached(
        &self,
        command: SandboxCommand,
        cwd: Option<&Path>,
        attach: Attach,
        on_line: &mut (dyn for<'l> FnMut(Stream, &'l str) + Send + '_),
    ) -> Result<SandboxOutcome, WorkspaceError> {
        let dir = match cwd {
            Some(dir) => {
                // Resolved through the jail: a cwd that escapes is refused.
                let (jail, relative) = self.locate(dir)?;
                if jail.stat(&relative)?.kind != crate::jail::EntryKind::Dir {
                    return Err(JailError::NotADirectory { path: relative }.into());
                }
                jail.root().join(relative)
            }
            None => self.cwd.clone(),
        };
        Ok(self
            .sandbox
            .run_attached(&self.spec_in(dir), command, attach, on_line)
            .await?)
    }

    async fn read_file(&self, path: &Path, limit: u64) -> Result<Vec<u8>, WorkspaceError> {
        self.blocking(path, move |j, p| j.read(p, limit)).await
    }

    async fn write_file(&self, path: &Path, data: Vec<u8>) -> Result<(), WorkspaceError> {
        self.blocking(path, move |j, p| j.write(p, &data)).await
    }

    async fn file_exists(&self, path: &Path) -> Result<bool, WorkspaceError> {
        self.blocking(path, |j, p| j.exists(p)).await
    }

    async fn stat(&self, path: &Path) -> Result<FileStat, WorkspaceError> {
        self.blocking(path, |j, p| j.stat(p)).await
    }

    async fn list_dir(&self, path: &Path) -> Result<Vec<EntryInfo>, WorkspaceError> {
        self.blocking(path, |j, p| j.list(p)).await
    }

    async fn mkdir(&self, path: &Path) -> Result<(), WorkspaceError> {
        self.blocking(path, |j, p| j.mkdir_all(p)).await
    }

    fn backend(&self) -> Backend {
        self.sandbox.backend()
    }

    async fn health(&self) -> Health {
        let roots: Vec<(PathBuf, bool)> = self
            .jails
            .iter()
            .map(|j| {
                (
                    j.root().to_owned(),
                    j.exists(Path::new(".")).unwrap_or(false),
                )
            })
            .collect();
        Health {
            ok: roots.iter().all(|(_, usable)| *usable),
            backend: self.sandbox.backend(),
            roots,
        }
    }
}

//! Running one command in the chosen backend.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

mod cleanup;
mod environment;
mod git_config;
mod journal;
mod network;
mod new_repos;
mod pool;
mod staging;

use cleanup::Audit;
use environment::{env_pipe, env_socket};
use journal::Journal;
pub use network::EgressSetup;
use network::{RunningProxy, egress_for};
use new_repos::{RecordingHost, RepoWatch};
use staging::{ENV_FD, LIFELINE_FD, request, staged};

use crate::egress::EgressRules;
use crate::plan::{BwrapPlan, EGRESS_SOCKET_PATH, PlanError, PlanFiles};
use crate::probe::{Backend, BackendChoice, BackendUnavailable, Probe, probe_cached};
use crate::proxy::{EventSink, Resolver};
use crate::runner::{self, Attach, ExecOutcome, ResourceLimits, RunnerError, Stream};
use crate::spec::{NetworkMode, SandboxSpec};
use crate::stage2::Stage2Args;

/// Variables a sandboxed command gets from the host by default.
pub const DEFAULT_ENV: &[&str] = &["PATH", "HOME", "LANG", "TERM", "TMPDIR"];

const FALLBACK_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Device files a command may write (everything else under /dev is
/// read-only to it, so no raw disk is ever writable). Not /dev/tty: a
/// command that can reach the caller's terminal can type into it (TIOCSTI).
/// Not /dev/shm: without a mount namespace it is the host's.
const WRITABLE_DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];

/// Where the sandbox finds its parts.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SandboxConfig {
    /// Which backend to use.
    pub backend: BackendChoice,
    /// Our binary with the stage-2 entry point.
    pub stage2: PathBuf,
    /// A directory of our own for the empty mask file and private temp dirs.
    pub state_dir: PathBuf,
    /// Arguments before the stage-2 arguments (`__stage2` for the toolgate binary).
    pub stage2_prefix: Vec<OsString>,
    /// What network mode `proxy` enforces; without it, `proxy` runs are refused.
    pub egress: Option<EgressSetup>,
    /// The resource limits of every command (a command's own can only lower them).
    pub limits: ResourceLimits,
    /// How long a run's placeholders may outlive it (see [`SandboxConfig::linger`]);
    /// `None`: removed before the run returns.
    pub linger: Option<Duration>,
    /// Whether stage 2 keeps absent protected names from being created
    /// where the kernel allows it (see [`SandboxConfig::placeholders`]).
    pub creation_guard: bool,
    /// Whether a sandbox is started ahead of the next command (see
    /// [`SandboxConfig::pool`]).
    pub pool: bool,
    /// Whether this process exits after a run or a few (see
    /// [`SandboxConfig::short_lived`]).
    pub short_lived: bool,
}

impl SandboxConfig {
    /// Auto backend, the given stage-2 binary and state directory.
    pub fn new(stage2: PathBuf, state_dir: PathBuf) -> Self {
        SandboxConfig {
            backend: BackendChoice::Auto,
            stage2,
            state_dir,
            stage2_prefix: Vec::new(),
            egress: None,
            limits: ResourceLimits::recommended(),
            linger: None,
            creation_guard: true,
            pool: false,
            short_lived: false,
        }
    }

    /// Tells that this process runs a command or a few and exits (a
    /// one-shot `toolgate sandbox`), which applies to the whole process:
    /// every run walks each writable root before and after the command,
    /// and the walk before is kept for the one after under inotify's
    /// watches (`repos::watched`); closing an instance that holds watches
    /// waits for the kernel's fsnotify grace period, 5 to 14 ms measured,
    /// which a process pays as it exits. So a short-lived process keeps
    /// only walks of large roots, whose second walk would cost more; a
    /// small root's watches are closed on a thread of their own right
    /// after its first walk, and its later walks are made afresh.
    pub fn short_lived(mut self) -> Self {
        self.short_lived = true;
        self
    }

    /// Keeps one sandbox started ahead of the next command, for servers that
    /// run command after command in the same spec: after each run (and on
    /// [`Sandbox::warm`]) a sandbox for the same plan is started and waits,
    /// fully confined, in stage 2; the next command with that plan skips
    /// bubblewrap's and stage 2's setup. It is used only if the plan made
    /// for the command at that moment is the very same, and stage 2 finds
    /// each of its masks still in place and the roots and working directory
    /// still the host's; else the command gets a fresh sandbox. Each pooled
    /// sandbox runs one command. Only where stage 2 mounts the masks itself
    /// (as root) and guards creations, with the bubblewrap backend, not in
    /// network mode `proxy` (each run has its own proxy).
    ///
    /// A pool is for a process that outlives its runs, so with it every
    /// bubblewrap run, pooled or fresh, answers on stage 2's keeper's report
    /// and bubblewrap, its namespaces and the cgroup are torn down after the
    /// answer (see `runner::Started::reported_on`); a one-shot process, which
    /// would leave that teardown to the next start's sweep, waits for it.
    pub fn pool(mut self) -> Self {
        self.pool = true;
        self
    }

    /// Masks absent protected names (`.git`, `.mcp.json`, agent
    /// configurations) with placeholders made on the host for the run, as
    /// on kernels where stage 2 cannot guard their creation (before 5.14,
    /// or Yama's ptrace scope 2 or more). By default stage 2 guards them:
    /// it performs each creating call of the command on its behalf and
    /// refuses those names, and the host sees nothing of the masks.
    pub fn placeholders(mut self) -> Self {
        self.creation_guard = false;
        self
    }

    /// Lets a run's placeholders (the mount points made on the host for
    /// absent protected names) outlive it by `delay`, removed then by a task
    /// of the async runtime: a server answers without waiting for their
    /// removal, which right after a run waits on the kernel's teardown of
    /// the sandbox's mounts (milliseconds for a few dozen), and a run that
    /// starts within `delay` finds them in place and uses them (as
    /// concurrent runs share them) instead of making them again. Until
    /// removed they are what the host sees during any run, and the journal
    /// keeps them accounted for: a runtime that shuts down removes them as it
    /// drops the task, and a killed toolgate's next start does.
    pub fn linger(mut self, delay: Duration) -> Self {
        self.linger = Some(delay);
        self
    }

    /// Sets the resource limits of every command run in this sandbox (by default
    /// [`ResourceLimits::recommended`]; [`ResourceLimits::default`] sets none).
    pub fn limits(mut self, limits: ResourceLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Sets the arguments that select the stage-2 entry point of the binary.
    pub fn stage2_prefix<I, S>(mut self, prefix: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.stage2_prefix = prefix.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the backend choice.
    pub fn backend(mut self, backend: BackendChoice) -> Self {
        self.backend = backend;
        self
    }

    /// Enables network mode `proxy`: each such run gets its own egress
    /// proxy applying `rules` (an empty allowlist refuses everything),
    /// resolving allowed names with `resolver` and reporting every
    /// connection to `records`.
    pub fn egress(
        mut self,
        rules: EgressRules,
        resolver: Arc<dyn Resolver>,
        records: EventSink,
    ) -> Self {
        self.egress = Some(EgressSetup::new(rules, resolver, records));
        self
    }
}

/// A command to run sandboxed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SandboxCommand {
    /// argv.
    pub argv: Vec<OsString>,
    /// Host variables passed by name, besides [`DEFAULT_ENV`].
    pub pass_env: Vec<String>,
    /// Variables set to a value.
    pub set_env: Vec<(String, String)>,
    /// Bytes for stdin.
    pub stdin: Option<Vec<u8>>,
    /// Wall-clock limit.
    pub timeout: Duration,
    /// Its own resource limits, on top of (never above) the sandbox's.
    pub limits: ResourceLimits,
    /// Cap per output stream.
    pub max_output_bytes: usize,
}

impl SandboxCommand {
    /// `argv` with a 120 s timeout and 1 MiB per stream.
    pub fn new<I, S>(argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        SandboxCommand {
            argv: argv.into_iter().map(Into::into).collect(),
            pass_env: Vec::new(),
            set_env: Vec::new(),
            stdin: None,
            timeout: Duration::from_secs(120),
            limits: ResourceLimits::default(),
            max_output_bytes: 1 << 20,
        }
    }

    /// `bash -c script`.
    pub fn shell(script: &str) -> Self {
        SandboxCommand::new(["bash", "-c", script])
    }

    /// Sets the timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets stdin.
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(bytes.into());
        self
    }

    /// Passes a host variable by name.
    pub fn pass_env(mut self, name: impl Into<String>) -> Self {
        self.pass_env.push(name.into());
        self
    }

    /// Sets a variable.
    pub fn set_env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.set_env.push((name.into(), value.into()));
        self
    }

    /// Sets the command's own resource limits, which can only lower the sandbox's.
    pub fn limits(mut self, limits: ResourceLimits) -> Self {
        self.limits = limits;
        self
    }
}

/// What a sandboxed run produced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SandboxOutcome {
    /// Exit status, output and timing.
    #[serde(flatten)]
    pub outcome: ExecOutcome,
    /// The backend that ran it.
    pub backend: Backend,
    /// `Some` with a note when the command ran under a weaker backend than
    /// bubblewrap (landlock: no masks, no namespaces) or none at all; every
    /// result that shows the command's output shows this too.
    pub weakened: Option<String>,
    /// What toolgate undid after the run (protected files the command created).
    pub warnings: Vec<String>,
}

/// Why a command did not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// No backend.
    #[error(transparent)]
    Unavailable(#[from] BackendUnavailable),
    /// The spec cannot be turned into a plan.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// Spawning or waiting failed.
    #[error(transparent)]
    Runner(#[from] RunnerError),
    /// Preparing the run failed.
    #[error("cannot prepare the sandbox: {0}")]
    Setup(String),
    /// Nothing to run.
    #[error("the command is empty")]
    EmptyCommand,
}

/// Runs commands in one backend.
#[derive(Debug, Clone)]
pub struct Sandbox {
    backend: Backend,
    bwrap: Option<PathBuf>,
    files: PlanFiles,
    state_dir: PathBuf,
    host_env: BTreeMap<String, String>,
    egress: Option<EgressSetup>,
    limits: ResourceLimits,
    linger: Option<Duration>,
    /// Stage 2 guards creations: the config asks for it and the kernel allows it.
    creation_guard: bool,
    /// Sandboxes started ahead of need, shared by clones.
    pool: Option<Arc<pool::Pool>>,
    /// [`SandboxConfig::short_lived`].
    short_lived: bool,
}

impl Sandbox {
    /// Probes (once per process, cached in the state dir) and selects the backend.
    pub fn new(config: SandboxConfig) -> Result<Sandbox, SandboxError> {
        let findings = probe_cached(&config.state_dir);
        Sandbox::with_probe(config, findings)
    }

    /// Like [`Sandbox::new`] with given findings.
    pub fn with_probe(config: SandboxConfig, findings: &Probe) -> Result<Sandbox, SandboxError> {
        let backend = findings.select(config.backend)?;
        if let Some(found) = &findings.pid_namespaces {
            runner::seed_pid_namespaces(found);
        }
        std::fs::create_dir_all(&config.state_dir)
            .map_err(|e| SandboxError::Setup(format!("{}: {e}", config.state_dir.display())))?;
        let empty_file = config.state_dir.join("empty");
        write_empty_readonly(&empty_file)?;
        let empty_dir = config.state_dir.join("empty-dir");
        empty_readonly_dir(&empty_dir)?;
        // Placeholders a killed toolgate left on the host.
        journal::sweep(&config.state_dir);
        if config.short_lived {
            crate::repos::watched::short_lived();
        }
        Ok(Sandbox {
            backend,
            bwrap: findings.bwrap.path.clone(),
            files: PlanFiles {
                bwrap: findings.bwrap.path.clone().unwrap_or_default(),
                stage2: config.stage2,
                empty_file,
                empty_dir,
                stage2_prefix: config.stage2_prefix,
                egress_socket: None,
            },
            state_dir: config.state_dir,
            host_env: std::env::vars().collect(),
            egress: config.egress,
            limits: config.limits,
            linger: config.linger,
            creation_guard: config.creation_guard && crate::stage2::creations_guard_supported(),
            pool: config.pool.then(Arc::default),
            short_lived: config.short_lived,
        })
    }

    /// Replaces the host environment the sandbox draws named variables
    /// from (by default, this process's environment).
    pub fn with_host_env(mut self, vars: BTreeMap<String, String>) -> Self {
        self.host_env = vars;
        self
    }

    /// The backend in use.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The resource limits of every command.
    pub fn limits(&self) -> &ResourceLimits {
        &self.limits
    }

    /// Runs `command` confined by `spec`.
    pub async fn run(
        &self,
        spec: &SandboxSpec,
        command: SandboxCommand,
    ) -> Result<SandboxOutcome, SandboxError> {
        self.run_attached(spec, command, Attach::default(), &mut |_, _| {})
            .await
    }

    /// Like [`Sandbox::run`], with live stdin and the pid reported at spawn
    /// ([`Attach`]), calling `on_line(stream, line)` for every output line as
    /// it arrives (see [`runner::run_attached`]).
    pub async fn run_attached(
        &self,
        spec: &SandboxSpec,
        command: SandboxCommand,
        mut attach: Attach,
        on_line: &mut (dyn for<'l> FnMut(Stream, &'l str) + Send + '_),
    ) -> Result<SandboxOutcome, SandboxError> {
        if command.argv.is_empty() {
            return Err(SandboxError::EmptyCommand);
        }
        Self::check_environment(&command)?;
        // The sandbox's limits hold for every command: a caller can only lower them.
        let mut command = command;
        command.limits = command.limits.within(&self.limits);
        let spec = &self.protected_spec(spec)?;
        let egress = egress_for(spec, self.backend, self.egress.as_ref())?;
        let mut env = self.environment(spec, &command);
        let tmp = match self.backend {
            Backend::Landlock => Some(tempfile_dir(&self.state_dir)?),
            Backend::Bwrap | Backend::None => None,
        };
        if let Some(tmp) = &tmp {
            // Without a mount namespace /tmp is the host's: a private one instead.
            env.retain(|(k, _)| k != "TMPDIR" && k != "HOME");
            env.push(("TMPDIR".into(), tmp.path().into()));
            env.push(("HOME".into(), tmp.path().into()));
        }
        let tmp_path = tmp.as_ref().map_or(Path::new("/tmp"), TempDir::path);
        let mut journal = Journal::begin(&self.state_dir)?;
        let mut audit = Audit::before(spec)?;
        let proxy = match egress {
            Some(setup) => Some(RunningProxy::start(
                &self.state_dir,
                setup,
                attach.egress_records.take(),
            )?),
            None => None,
        };
        let egress_socket = proxy.as_ref().and_then(RunningProxy::socket);
        let host = RecordingHost::new(self.creation_guard);
        let plan = self.launch(spec, &command.argv, tmp_path, egress_socket, &host)?;
        // Before any placeholder exists: the repositories as the command
        // will find them, so that those it makes can be told apart.
        if self.backend != Backend::None {
            audit.watch_repos(RepoWatch::before(
                &spec.writable_roots,
                &host,
                &self.state_dir,
            )?);
        }
        journal.create(&plan, &spec.writable_roots)?;
        audit.watch(&plan.audited, &spec.writable_roots);
        let key = self.pool_key(spec, &plan, &command);
        let pooled = match (&self.pool, &key) {
            (Some(pool), Some(key)) => {
                let handout = pool::handout(spec, &command, &attach, env.clone())?;
                pool.take(key, &handout).await
            }
            _ => None,
        };
        let mut key = key;
        let outcome = match pooled {
            Some(pool::Taken {
                mut started,
                was_starting,
            }) => {
                started.bounds(command.timeout, command.max_output_bytes);
                if was_starting {
                    // Commands come back to back: the next one's sandbox is
                    // set up while this one runs, or it would wait for all
                    // of it too.
                    self.refill(spec, &command.limits, key.take());
                }
                started.run(command.stdin.clone(), attach, on_line).await
            }
            None => {
                let mut report = None;
                let request = match self.backend {
                    // A pool's process outlives the run (see
                    // `SandboxConfig::pool`): it answers on the keeper's report,
                    // as a pooled sandbox does; a one-shot process, which ends
                    // right after, waits for its sandbox to be torn down.
                    Backend::Bwrap if self.pool.is_some() => {
                        let (env, ours) = env_socket(&env)?;
                        report = Some(ours);
                        staged(
                            request(&command, spec, plan.argv, Vec::new()),
                            env,
                            self.backend,
                            self.stand_in(),
                        )
                    }
                    Backend::Bwrap | Backend::Landlock => staged(
                        request(&command, spec, plan.argv, Vec::new()),
                        env_pipe(&env)?,
                        self.backend,
                        self.stand_in(),
                    ),
                    Backend::None => request(&command, spec, plan.argv, env),
                };
                runner::run_reported(request, attach, on_line, report).await
            }
        };
        // At an agent's pace, the next command's sandbox is set up while the
        // answer goes out and the agent reads it, not while this command
        // runs: on a small machine the two would share the processors.
        self.refill(spec, &command.limits, key);
        if let Some(proxy) = proxy {
            proxy.stop().await;
        }
        let outcome = outcome?;
        let warnings = audit.after();
        match self.linger {
            Some(delay) => linger(journal, delay),
            None => drop(journal),
        }
        Ok(SandboxOutcome {
            outcome,
            backend: self.backend,
            weakened: self.backend.weakened_note().map(str::to_owned),
            warnings,
        })
    }

    /// Starts a sandbox for the next command like this one (`key`: see
    /// [`Sandbox::pool_key`]) in the pool, in the background.
    fn refill(&self, spec: &SandboxSpec, limits: &ResourceLimits, key: Option<pool::Key>) {
        let (Some(pool), Some(key)) = (&self.pool, key) else {
            return;
        };
        let pool = Arc::clone(pool);
        let fill = pool::pooled_request(
            spec.clone(),
            limits.clone(),
            self.stand_in().map(Path::to_path_buf),
        );
        tokio::task::spawn_blocking(move || pool.fill(key, fill));
    }

    /// `spec` with canonical roots and with toolgate's own files read-only
    /// where they lie inside a writable root: a command that could rewrite
    /// the cached probe, the mask files or the stage-2 binary would steer the
    /// next run.
    fn protected_spec(&self, spec: &SandboxSpec) -> Result<SandboxSpec, SandboxError> {
        let mut spec = spec.clone();
        for root in &mut spec.writable_roots {
            *root = std::fs::canonicalize(&*root)
                .map_err(|e| SandboxError::Setup(format!("root {}: {e}", root.display())))?;
        }
        spec.cwd = std::fs::canonicalize(&spec.cwd)
            .map_err(|e| SandboxError::Setup(format!("cwd {}: {e}", spec.cwd.display())))?;
        // A root holding the user's home would expose every dotfile and
        // config directory that programs on the host run (~/.ssh/config,
        // ~/.config/git, autostart entries): far more than the masks cover.
        let home = self
            .host_env
            .get("HOME")
            .and_then(|h| std::fs::canonicalize(h).ok());
        if let Some(home) = home
            && let Some(root) = spec.writable_roots.iter().find(|r| home.starts_with(r))
        {
            return Err(SandboxError::Setup(format!(
                "writable root {} contains the home directory {}; use a narrower root (a project directory)",
                root.display(),
                home.display()
            )));
        }
        let state =
            std::fs::canonicalize(&self.state_dir).unwrap_or_else(|_| self.state_dir.clone());
        if let Some(root) = spec.writable_roots.iter().find(|r| r.starts_with(&state)) {
            return Err(SandboxError::Setup(format!(
                "writable root {} lies inside toolgate's state directory {}",
                root.display(),
                state.display()
            )));
        }
        for own in [&self.state_dir, &self.files.stage2] {
            let own = std::fs::canonicalize(own).unwrap_or_else(|_| own.clone());
            if spec.writable_roots.iter().any(|r| own.starts_with(r)) {
                spec.write_deny.push(own);
            }
        }
        Ok(spec)
    }

    /// Whether a command of `spec` can write in `dir` (a root, a scratch
    /// directory, toolgate's state directory with its private temp dirs),
    /// also through a symlink.
    fn command_writes(&self, spec: &SandboxSpec, dir: &Path) -> bool {
        let real = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_owned());
        [dir, real.as_path()].iter().any(|dir| {
            spec.writable_roots.iter().any(|r| dir.starts_with(r))
                || SCRATCH_DIRS.iter().any(|s| dir.starts_with(s))
                || dir.starts_with(&self.state_dir)
        })
    }

    /// The argv that would run `argv` confined by `spec` (bubblewrap's, or
    /// stage 2's for the landlock backend), for display: it holds paths and
    /// flags only, never an environment value.
    pub fn plan(&self, spec: &SandboxSpec, argv: &[OsString]) -> Result<BwrapPlan, SandboxError> {
        let spec = self.protected_spec(spec)?;
        egress_for(&spec, self.backend, self.egress.as_ref())?;
        let egress_socket = self.state_dir.join("egress-RUN/egress.sock");
        self.launch(
            &spec,
            argv,
            &self.state_dir.join("tmp-RUN"),
            Some(&egress_socket),
            &RecordingHost::new(self.creation_guard),
        )
    }

    /// The argv for this backend; `tmp` is the private temp dir of a
    /// landlock run, `egress_socket` the host side of a `proxy` run's proxy.
    fn launch(
        &self,
        spec: &SandboxSpec,
        argv: &[OsString],
        tmp: &Path,
        egress_socket: Option<&Path>,
        host: &dyn crate::plan::HostView,
    ) -> Result<BwrapPlan, SandboxError> {
        match self.backend {
            Backend::Bwrap => {
                let proxied = spec.network == NetworkMode::Proxy;
                let stage2 = Stage2Args {
                    network: spec.network,
                    in_network_namespace: spec.network != NetworkMode::Host,
                    allow_unix_sockets: spec.allow_unix_sockets,
                    read: vec!["/".into()],
                    write: writable_paths(spec, Path::new("/tmp")),
                    masks: Vec::new(),
                    deny_create: Vec::new(),
                    deny_write: Vec::new(),
                    env_fd: Some(ENV_FD),
                    egress_socket: proxied.then(|| EGRESS_SOCKET_PATH.into()),
                    lifeline_fd: Some(LIFELINE_FD),
                };
                let files = PlanFiles {
                    egress_socket: egress_socket.filter(|_| proxied).map(Path::to_owned),
                    ..self.files.clone()
                };
                Ok(BwrapPlan::build(spec, &files, &stage2, argv, host)?)
            }
            Backend::Landlock => {
                let mut read: Vec<PathBuf> = LANDLOCK_READABLE.iter().map(PathBuf::from).collect();
                read.extend(spec.read_only_paths.iter().cloned());
                read.push(self.files.stage2.clone());
                let stage2 = Stage2Args {
                    network: spec.network,
                    in_network_namespace: false,
                    allow_unix_sockets: spec.allow_unix_sockets,
                    read,
                    write: writable_paths(spec, tmp),
                    masks: Vec::new(),
                    deny_create: Vec::new(),
                    deny_write: Vec::new(),
                    env_fd: Some(ENV_FD),
                    egress_socket: None,
                    lifeline_fd: Some(LIFELINE_FD),
                };
                let mut full = vec![self.files.stage2.clone().into_os_string()];
                full.extend(self.files.stage2_prefix.iter().cloned());
                full.extend(stage2.to_argv());
                full.push("--".into());
                full.extend(argv.iter().cloned());
                Ok(BwrapPlan::unmasked(full))
            }
            Backend::None => Ok(BwrapPlan::unmasked(argv.to_vec())),
        }
    }

    /// The bwrap binary, when the probe found one.
    pub fn bwrap(&self) -> Option<&Path> {
        self.bwrap.as_deref()
    }
}

/// Ends `journal` (removing its placeholders that no live run uses) after
/// `delay`, from a task of the current async runtime; at once without one.
fn linger(journal: Journal, delay: Duration) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        drop(journal);
        return;
    };
    runtime.spawn(async move {
        tokio::time::sleep(delay).await;
        // The removal takes the journals' lock and may wait on the kernel.
        let _ = tokio::task::spawn_blocking(move || drop(journal)).await;
    });
}

/// What the landlock backend lets a command read besides the roots.
const LANDLOCK_READABLE: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/etc",
    "/opt",
    "/proc",
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/sys/devices/system/cpu",
];

/// Directories every sandboxed command may write, whatever its roots.
const SCRATCH_DIRS: &[&str] = &["/tmp", "/var/tmp", "/dev/shm"];

fn writable_paths(spec: &SandboxSpec, tmp: &Path) -> Vec<PathBuf> {
    let mut write = spec.writable_roots.clone();
    write.push(tmp.to_owned());
    write.extend(WRITABLE_DEVICES.iter().map(PathBuf::from));
    write
}

fn write_empty_readonly(path: &Path) -> Result<(), SandboxError> {
    use std::os::unix::fs::PermissionsExt;
    let setup = |e: std::io::Error| SandboxError::Setup(format!("{}: {e}", path.display()));
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() && m.len() == 0 => Ok(()),
        _ => {
            let _ = std::fs::remove_file(path);
            std::fs::write(path, b"").map_err(setup)?;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o444)).map_err(setup)
        }
    }
}

fn empty_readonly_dir(path: &Path) -> Result<(), SandboxError> {
    use std::os::unix::fs::PermissionsExt;
    let setup = |e: std::io::Error| SandboxError::Setup(format!("{}: {e}", path.display()));
    if !path.is_dir() {
        std::fs::create_dir_all(path).map_err(setup)?;
    }
    if std::fs::read_dir(path).map_err(setup)?.next().is_some() {
        return Err(SandboxError::Setup(format!(
            "{} must be empty: it masks protected directories",
            path.display()
        )));
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o555)).map_err(setup)
}

fn tempfile_dir(state_dir: &Path) -> Result<TempDir, SandboxError> {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = state_dir.join(format!("tmp-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&path)
        .map_err(|e| SandboxError::Setup(format!("{}: {e}", path.display())))?;
    Ok(TempDir(path))
}

/// A private temp dir removed after the run.
struct TempDir(PathBuf);

impl TempDir {
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests;

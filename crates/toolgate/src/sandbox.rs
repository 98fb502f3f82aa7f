//! `toolgate sandbox` and the doctor's smoke test: the sandbox run by the
//! `toolgate` binary itself, which re-executes itself as stage 2.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use std::sync::Arc;

use anyhow::{Context, Result, bail};
use toolgate_sandbox::egress::EgressMode;
use toolgate_sandbox::probe::Weakening;
use toolgate_sandbox::proxy::{ConnectionRecord, SystemResolver};
use toolgate_sandbox::{
    LocalWorkspace, NetworkMode, Sandbox, SandboxCommand, SandboxConfig, SandboxSpec, Workspace,
};

use crate::STAGE2_COMMAND;
use crate::config::{Environment, Settings};

/// How long a server leaves a command's placeholders in place after it
/// answered: the kernel's teardown of the sandbox's mounts is over by then,
/// so their removal is quick, and an agent's next command often comes sooner.
const PLACEHOLDER_LINGER: Duration = Duration::from_millis(250);

/// A sandbox's configuration with its stage 2: `toolgate-stage2` beside this
/// binary when it is an executable file of this very build (it starts in
/// less than half the time, at every command: under a megabyte to map and
/// relocate instead of tens), else this binary's hidden subcommand.
fn stage2_config(env: &Environment) -> Result<SandboxConfig> {
    use std::os::unix::fs::PermissionsExt;
    let exe = std::env::current_exe().context("cannot find the toolgate binary for stage 2")?;
    let alone = exe.with_file_name(STAGE2_BINARY);
    let runnable = std::fs::metadata(&alone)
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 == 0o111);
    let config = if runnable && toolgate_sandbox::stage2::same_build(&alone) {
        SandboxConfig::new(alone, env.state_dir())
    } else {
        SandboxConfig::new(exe, env.state_dir()).stage2_prefix([STAGE2_COMMAND])
    };
    Ok(config)
}

/// The file name of stage 2 alone (the package's second binary).
pub const STAGE2_BINARY: &str = "toolgate-stage2";

/// One `toolgate sandbox` invocation.
pub struct Run {
    pub network: NetworkMode,
    pub allow_unix_sockets: bool,
    pub timeout: Duration,
    pub argv: Vec<OsString>,
    pub plan_only: bool,
}

fn sandbox(settings: &Settings, env: &Environment) -> Result<Sandbox> {
    let mut config = stage2_config(env)?
        .backend(settings.backend)
        .limits(settings.limits.clone());
    if settings.serving {
        // The answer goes out first; a command that follows within this
        // time uses the placeholders in place of making them again.
        config = config.linger(PLACEHOLDER_LINGER);
        // The next command's sandbox is set up while the agent reads the
        // last answer.
        config = config.pool();
    } else {
        // One command, or a few, and the process exits.
        config = config.short_lived();
    }
    if let EgressMode::Proxy(rules) = &settings.network {
        // Every connection a command makes through the proxy, allowed or
        // refused, is reported on stderr (stdout stays the result's).
        let records: toolgate_sandbox::proxy::EventSink = Arc::new(|r: ConnectionRecord| {
            let verdict = if r.allowed { "allowed" } else { "refused" };
            eprintln!(
                "toolgate: egress {verdict}: {}:{} ({}; {}; {} bytes up, {} down)",
                r.host,
                r.port,
                r.protocol.as_str(),
                r.reason,
                r.bytes_up,
                r.bytes_down
            );
        });
        config = config.egress(rules.clone(), Arc::new(SystemResolver), records);
    }
    Ok(Sandbox::new(config)?)
}

/// The sandbox of a stdio MCP server with `sandbox = {...}`: a sandbox of
/// its own, whose egress allowlist is the server's (`network.allow`; none:
/// no network), its roots writable, its `read_only` paths visible, and
/// nothing else of the host but the system directories. `None` for a
/// server without `sandbox` (it runs unconfined, which every listing says).
pub fn server_confinement(
    settings: &Settings,
    env: &Environment,
    server: &toolgate_mcp::gateway::ServerConfig,
) -> Result<Option<toolgate_mcp::gateway::Confinement>> {
    use toolgate_mcp::gateway::{Confinement, Transport};
    let Transport::Stdio(stdio) = &server.transport else {
        return Ok(None);
    };
    let Some(wanted) = &stdio.sandbox else {
        return Ok(None);
    };
    let allow = wanted
        .network
        .as_ref()
        .map(|n| n.allow.clone())
        .unwrap_or_default();
    let who = format!("MCP server `{}`", server.name);
    let (sandbox, network) = allowlisted(settings, env, settings.backend, &allow, &who)
        .with_context(|| format!("{who}: cannot set up its sandbox"))?;
    let mut spec = SandboxSpec::default().network(network);
    for root in &wanted.roots {
        let root = std::fs::canonicalize(root).with_context(|| {
            format!(
                "MCP server `{}`: sandbox root {} does not exist",
                server.name,
                root.display()
            )
        })?;
        spec.writable_roots.push(root);
    }
    spec.read_only_paths.clone_from(&wanted.read_only);
    spec.cwd = spec
        .writable_roots
        .first()
        .cloned()
        .unwrap_or_else(|| PathBuf::from("/"));
    Ok(Some(Confinement::Sandboxed {
        sandbox: Arc::new(sandbox),
        spec,
    }))
}

/// A sandbox of its own under `backend` whose network is exactly `allow`
/// through the egress proxy (empty: no network), each refused connection
/// said on stderr as `who`'s; and the network mode its runs take. For what
/// carries its own allowlist: a sandboxed MCP server, a catalogue tool.
pub fn allowlisted(
    settings: &Settings,
    env: &Environment,
    backend: toolgate_sandbox::BackendChoice,
    allow: &[String],
    who: &str,
) -> Result<(Sandbox, NetworkMode)> {
    let mut config = stage2_config(env)?
        .backend(backend)
        .limits(settings.limits.clone());
    if allow.is_empty() {
        return Ok((Sandbox::new(config)?, NetworkMode::None));
    }
    let rules = toolgate_sandbox::egress::EgressRules::new(allow, &[] as &[String])
        .with_context(|| format!("{who}: the egress allowlist"))?;
    let who = who.to_owned();
    let records: toolgate_sandbox::proxy::EventSink = Arc::new(move |r: ConnectionRecord| {
        if !r.allowed {
            eprintln!(
                "toolgate: {who}: egress refused: {}:{} ({})",
                r.host, r.port, r.reason
            );
        }
    });
    config = config.egress(rules, Arc::new(SystemResolver), records);
    Ok((Sandbox::new(config)?, NetworkMode::Proxy))
}

/// The network mode `[network]` gives sandboxed commands.
pub fn network_mode(settings: &Settings) -> NetworkMode {
    match &settings.network {
        EgressMode::Proxy(_) => NetworkMode::Proxy,
        EgressMode::Host => NetworkMode::Host,
        _ => NetworkMode::None,
    }
}

/// The workspace of this invocation: the configured roots, working in the
/// current directory when it lies in one of them, else in the first root.
/// With `warm` in a server, a sandbox for the first command is started
/// right away (see `SandboxConfig::pool`).
pub fn workspace(settings: &Settings, env: &Environment, warm: bool) -> Result<Arc<dyn Workspace>> {
    let workspace = local_workspace(settings, env)?;
    if warm && settings.serving {
        workspace.prestart();
    }
    Ok(Arc::new(workspace))
}

/// What no tool may read where it lies inside a root: toolgate's state
/// and data directories and the SQLite store's files that exist (grants,
/// the audit log).
pub fn concealed(settings: &Settings, env: &Environment) -> Vec<PathBuf> {
    let mut paths = vec![env.state_dir(), env.data_dir()];
    paths.extend(crate::config::store_files(settings));
    paths
}

/// Where relative paths resolve, for the tools and the policy alike: the
/// working directory while it lies in a root, else the first root.
pub fn working_dir(settings: &Settings, env: &Environment) -> PathBuf {
    let cwd = std::fs::canonicalize(&env.cwd).unwrap_or_else(|_| env.cwd.clone());
    if settings.roots.iter().any(|r| cwd.starts_with(r)) {
        cwd
    } else {
        settings.roots[0].clone()
    }
}

fn local_workspace(settings: &Settings, env: &Environment) -> Result<LocalWorkspace> {
    let cwd = working_dir(settings, env);
    LocalWorkspace::new("cli", settings.roots.clone(), cwd, sandbox(settings, env)?)
        .context("cannot open the workspace roots")?
        .network(network_mode(settings))
        .filesystem(settings.filesystem.clone())
        .protect(&settings.own_files)
        .and_then(|ws| ws.conceal(&concealed(settings, env)))
        .context("cannot open the workspace roots")
}

/// The checks of every start that runs tools from the command line
/// (`call`, `prompt`, `sandbox`): a root that is or contains the home
/// directory is refused, and so is a backend weaker than bubblewrap under
/// `[sandbox] require_bwrap`; a weakened sandbox is announced on stderr.
pub fn starting(settings: &Settings, env: &Environment) -> Result<()> {
    if let Some(why) = home_root(&settings.roots, env) {
        bail!(
            "{why}; run toolgate in a project directory or pass --root PROJECT (a directory \
             that holds only the project)"
        );
    }
    if let Some(warning) = sandbox_warning(settings, env)? {
        eprintln!("toolgate: {warning}");
    }
    Ok(())
}

/// What `mcp` and `serve` say at the start (stderr) and to every client
/// (the server instructions and the MCP log): a weakened sandbox, and a
/// home-directory root, which keeps the server up but refuses every call
/// until a client sends narrower roots. `require_bwrap` refuses to start.
pub fn server_notices(settings: &Settings, env: &Environment) -> Result<Vec<String>> {
    let mut notices: Vec<String> = sandbox_warning(settings, env)?.into_iter().collect();
    if let Some(why) = home_root(&settings.roots, env) {
        notices.push(format!("{why}: {}", HOME_ROOT_MCP_HINT));
    }
    Ok(notices)
}

/// What a server over a home-directory root tells the user to do.
pub const HOME_ROOT_MCP_HINT: &str = "pass --root PROJECT or let the client send roots \
    (a project directory inside it); until then every tool call is refused";

/// The weakened sandbox of this configuration in one warning, or why it may
/// not run at all (`require_bwrap`). Nothing when bubblewrap runs commands,
/// or when no backend runs here (creating the sandbox reports that).
fn sandbox_warning(settings: &Settings, env: &Environment) -> Result<Option<String>> {
    let Some(weakening) = weakening(settings, env) else {
        return Ok(None);
    };
    if settings.require_bwrap {
        let why = weakening
            .bwrap_unusable
            .as_deref()
            .map_or_else(String::new, |why| format!(" (bubblewrap: {why})"));
        bail!(
            "refusing to start: [sandbox] require_bwrap = true, but commands would run under \
             the {} backend, not bubblewrap{why}. {}",
            weakening.backend,
            weakening.restore
        );
    }
    Ok(Some(weakening.warning()))
}

/// What commands lose under the backend this configuration selects, or
/// `None` for bubblewrap (or when none is available at all).
pub fn weakening(settings: &Settings, env: &Environment) -> Option<Weakening> {
    let probe = toolgate_sandbox::probe_cached(&env.state_dir());
    let backend = probe.select(settings.backend).ok()?;
    probe.weakening(backend)
}

/// The doctor's rows on a weakened sandbox: exactly which protections
/// commands lose under `backend` and how to get bubblewrap back, and what
/// `[sandbox] require_bwrap` makes of it. None for bubblewrap.
pub fn weakening_rows(
    settings: &Settings,
    probe: &toolgate_sandbox::Probe,
    backend: Option<toolgate_sandbox::Backend>,
) -> Vec<[String; 2]> {
    let Some(weakening) = backend.and_then(|b| probe.weakening(b)) else {
        return Vec::new();
    };
    let mut rows = vec![[
        "weakened".to_owned(),
        match &weakening.bwrap_unusable {
            Some(why) => format!("not bubblewrap, which cannot run here: {why}"),
            None => format!("not bubblewrap: `{}` was asked for", weakening.backend),
        },
    ]];
    for (i, lost) in weakening.lost.iter().enumerate() {
        let label = if i == 0 { "lost" } else { "" };
        rows.push([label.to_owned(), lost.clone()]);
    }
    rows.push(["to restore".to_owned(), weakening.restore.clone()]);
    if settings.require_bwrap {
        rows.push([
            "require_bwrap".to_owned(),
            "true: call, sandbox, prompt, mcp and serve refuse to start with this backend"
                .to_owned(),
        ]);
    }
    rows
}

/// Why no tool may work in `roots`: one of them is or contains the home
/// directory. Attack: an MCP client started in `~` makes `~` the root, and
/// a file tool then writes `~/.gitconfig` (core.pager), `~/.cargo/config.toml`
/// (rustc-wrapper), `~/.local/bin/ls` or toolgate's own user config, which
/// the host runs later; no mask list covers every such dotfile.
pub fn home_root(roots: &[PathBuf], env: &Environment) -> Option<String> {
    let home = home_dir(env)?;
    let root = roots.iter().find(|root| home.starts_with(root))?;
    let what = if *root == home {
        "is the home directory".to_owned()
    } else {
        format!("contains the home directory {}", home.display())
    };
    Some(format!(
        "the workspace root {} {what}: file tools and commands there could plant host \
         configuration (~/.gitconfig, ~/.cargo/config.toml, ~/.local/bin, ~/.config/toolgate)",
        root.display()
    ))
}

/// The home directory, canonical: `HOME`, or when it is unset, the passwd
/// entry of our uid.
fn home_dir(env: &Environment) -> Option<PathBuf> {
    let home = env.var("HOME").map(PathBuf::from).or_else(passwd_home)?;
    Some(std::fs::canonicalize(&home).unwrap_or(home))
}

/// The home field of /etc/passwd for the uid that owns this process (no
/// NSS lookup: directory services are not consulted).
fn passwd_home() -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let uid = std::fs::metadata("/proc/self").ok()?.uid().to_string();
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        (fields.len() >= 6 && fields[2] == uid).then(|| PathBuf::from(fields[5]))
    })
}

/// Runs the command with the roots writable and the working directory as
/// cwd; its output goes to ours and its exit code becomes ours.
pub async fn run(settings: &Settings, env: &Environment, run: Run) -> Result<ExitCode> {
    starting(settings, env)?;
    let workspace = local_workspace(settings, env)?;
    let sandbox = workspace.sandbox();
    let spec = workspace
        .spec_in(env.cwd.clone())
        .network(run.network)
        .allow_unix_sockets(run.allow_unix_sockets);
    if run.plan_only {
        let plan = sandbox.plan(&spec, &run.argv)?;
        let mut out = std::io::stdout().lock();
        writeln!(out, "backend {}", sandbox.backend())?;
        for (i, arg) in plan.argv.iter().enumerate() {
            let arg = arg.to_string_lossy();
            let sep = if i == 0 {
                ""
            } else if arg.starts_with("--") {
                "\n"
            } else {
                " "
            };
            write!(out, "{sep}{arg}")?;
        }
        writeln!(out)?;
        for path in &plan.created_mount_points {
            writeln!(
                out,
                "mount point created for the run and removed after: {}",
                path.display()
            )?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let command = SandboxCommand::new(run.argv).timeout(run.timeout);
    let result = sandbox.run(&spec, command).await?;
    // A weakened backend was announced at the start, in full.
    for warning in &result.warnings {
        eprintln!("toolgate: {warning}");
    }
    std::io::stdout().write_all(result.outcome.stdout.as_bytes())?;
    std::io::stderr().write_all(result.outcome.stderr.as_bytes())?;
    if result.outcome.timed_out {
        eprintln!(
            "toolgate: timed out after {:?}; the command's process group was killed",
            run.timeout
        );
    }
    Ok(ExitCode::from(
        u8::try_from(result.outcome.exit_code).unwrap_or(u8::MAX),
    ))
}

/// Runs a command in the sandbox and reads its capabilities: what the
/// doctor shows as proof that the backend works.
pub async fn smoke_test(settings: &Settings, env: &Environment) -> Result<String, String> {
    let sandbox = sandbox(settings, env).map_err(|e| format!("{e:#}"))?;
    let dir = tempfile_dir()?;
    let spec = SandboxSpec::for_root(dir.clone());
    let command = SandboxCommand::shell(
        "grep -E '^(CapEff|NoNewPrivs)' /proc/self/status | tr -s '\\t\\n' ' '",
    )
    .timeout(Duration::from_secs(10));
    let result = sandbox.run(&spec, command).await;
    let _ = std::fs::remove_dir_all(&dir);
    let outcome = result.map_err(|e| e.to_string())?.outcome;
    if outcome.exit_code != 0 {
        return Err(format!(
            "exit {}: {}",
            outcome.exit_code,
            outcome.stderr.trim()
        ));
    }
    let report = outcome.stdout.trim().to_owned();
    if report == "CapEff: 0000000000000000 NoNewPrivs: 1" {
        Ok(format!("ok in {} ms ({report})", outcome.duration_ms))
    } else {
        Err(format!("the sandboxed command is not confined: {report}"))
    }
}

/// A scratch root outside the state dir (which can never be a root).
fn tempfile_dir() -> Result<std::path::PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("toolgate-doctor-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(dir)
}

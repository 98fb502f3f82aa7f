//! `toolgate mcp` (stdio) and `toolgate serve` (Streamable HTTP): the tools
//! of this configuration as an MCP server.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use toolgate_mcp::{HttpOptions, McpServer, Scope, ScopeSource};

use crate::config::{Environment, Settings};

/// Builds executors over the configured roots, or over the narrower roots a
/// client offers.
struct ConfiguredScopes {
    settings: Settings,
    env: Environment,
    demo: bool,
    /// What the start said on stderr, for every client too.
    notices: Vec<String>,
    /// Approvals and audit over the store, shared by every scope.
    gate: crate::store::Gate,
    /// The external MCP servers, connected once and shared by every scope:
    /// one process per stdio server, not one per client.
    servers: Arc<toolgate_mcp::gateway::Gateway>,
}

impl ScopeSource for ConfiguredScopes {
    fn operator_roots(&self) -> Vec<PathBuf> {
        self.settings.roots.clone()
    }

    fn scope(&self, roots: &[PathBuf]) -> Result<Scope, String> {
        let mut settings = self.settings.clone();
        settings.roots = roots.to_vec();
        let env = &self.env;
        let executor = crate::executor(
            &settings,
            env,
            self.demo,
            Some(&self.gate),
            &self.servers,
            true,
        )
        .map_err(|e| format!("{e:#}"))?;
        Ok(Scope {
            executor,
            // The policy resolves relative paths where the tools do.
            cwd: crate::sandbox::working_dir(&settings, env),
            roots: settings.roots,
        })
    }

    /// The server starts over a home-directory root (MCP clients often
    /// start servers in `~`), so that a client can still send narrower
    /// roots; until it does, every call is refused.
    fn refusal(&self, roots: &[PathBuf]) -> Option<String> {
        crate::sandbox::home_root(roots, &self.env)
            .map(|why| format!("{why}: {}", crate::sandbox::HOME_ROOT_MCP_HINT))
    }

    fn notices(&self) -> Vec<String> {
        self.notices.clone()
    }
}

/// What a server exposes and lets commands do, beyond the configuration.
#[derive(Debug, clap::Args)]
pub struct Exposure {
    /// Expose only these tools: names or groups, comma-separated
    /// (`read,grep,find,ls` or `group:fs,group:search`).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    tools: Vec<String>,
    /// Shell scripts may run only these commands (base names,
    /// comma-separated); an empty value allows only builtins such as cd.
    #[arg(long, value_name = "LIST")]
    allow_commands: Option<String>,
    /// Shell scripts may also run commands whose text matches REGEX
    /// (repeatable); alone, it allows nothing else.
    #[arg(long = "allow-pattern", value_name = "REGEX")]
    allow_patterns: Vec<String>,
    /// Run commands without the OS sandbox: only the command allowlist and
    /// the roots of the file tools stand between the agent and this machine.
    #[arg(long)]
    no_sandbox: bool,
}

impl Exposure {
    /// The configuration with these flags applied.
    pub fn apply(self, mut settings: Settings) -> Result<Settings> {
        if !self.tools.is_empty() {
            settings.only_tools = Some(self.tools);
        }
        if self.allow_commands.is_some() || !self.allow_patterns.is_empty() {
            let commands: Vec<String> = self
                .allow_commands
                .as_deref()
                .unwrap_or_default()
                .split(',')
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(str::to_owned)
                .collect();
            settings.policy.commands = settings
                .policy
                .commands
                .clone()
                .allow_only(&commands, &self.allow_patterns)
                .context("--allow-commands / --allow-pattern")?;
        }
        if self.no_sandbox {
            // The start says so, like every other way to backend `none`.
            settings.backend = toolgate_sandbox::BackendChoice::None;
        }
        Ok(settings)
    }
}

/// The server over the configured scopes. The store is opened first: an
/// unreachable store stops the start, before any client connects.
async fn server(
    mut settings: Settings,
    env: Environment,
    demo: bool,
) -> Result<(McpServer, Arc<dyn toolgate_policy::AuditSink>)> {
    let mut gate = crate::store::gate(&settings).await?;
    crate::catalog::attach(&mut gate, &settings, &env).await?;
    if let Some(shelf) = &gate.shelf {
        shelf.sweep().await?;
    }
    let audit = gate.audit.clone();
    crate::config::protect_store_files(&mut settings);
    let mut notices = crate::sandbox::server_notices(&settings, &env)?;
    for notice in &notices {
        eprintln!("toolgate: {notice}");
    }
    // Said on stderr at start already; the client hears it too.
    notices.extend(settings.warnings.iter().map(|w| format!("warning: {w}")));
    let servers = crate::gateway::configured(&settings, &env).await?;
    notices.extend(servers.warnings().iter().map(|w| format!("warning: {w}")));
    let agent = settings.agent.clone();
    let scopes = ConfiguredScopes {
        settings,
        env,
        demo,
        notices,
        gate,
        servers: Arc::new(servers),
    };
    let server = McpServer::new(Arc::new(scopes)).map_err(anyhow::Error::msg)?;
    let server = match agent {
        Some(agent) => server.with_agent(agent),
        None => server,
    };
    Ok((server, audit))
}

/// The runtime of `toolgate serve`: HTTP clients call in parallel.
fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// `toolgate mcp`.
pub fn stdio(settings: Settings, env: Environment, demo: bool) -> Result<ExitCode> {
    // One thread: a small call is read, checked, run and answered without
    // handing it between threads (each hand-off a wake-up of another
    // thread, the larger part of a small call's latency). Work that takes
    // long (searches, commands, audit writes) runs elsewhere all the same.
    let runtime = crate::runtime()?;
    let (server, audit) = runtime.block_on(server(settings, env, demo))?;
    let served = runtime.block_on(toolgate_mcp::serve_stdio(server));
    runtime.block_on(audit.flush());
    stop(runtime);
    served?;
    Ok(ExitCode::SUCCESS)
}

/// `toolgate serve` flags.
pub struct Serve {
    pub port: Option<u16>,
    pub host: Option<IpAddr>,
    pub allow_remote: bool,
    pub no_token: bool,
}

/// `toolgate serve`.
pub fn http(settings: Settings, env: Environment, demo: bool, flags: Serve) -> Result<ExitCode> {
    let host = flags.host.unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
    let port = flags.port.or(settings.serve.port).unwrap_or(8765);
    if flags.no_token && !host.is_loopback() {
        bail!("--no-token is refused on {host}: only a loopback address may serve without a token");
    }
    if !host.is_loopback() {
        check_remote(host, flags.allow_remote || settings.serve.allow_remote)?;
    }
    let (token, told) = if flags.no_token {
        eprintln!(
            "toolgate: WARNING: serving without a bearer token: any local process or user \
             can call these tools (--no-token)"
        );
        (None, "no token".to_owned())
    } else {
        let (token, source) = token(&settings, &env)?;
        (Some(token), source)
    };
    let mut options = HttpOptions::new(SocketAddr::new(host, port), token);
    options
        .extra_hosts
        .clone_from(&settings.serve.allowed_hosts);
    if !host.is_loopback() && !host.is_unspecified() {
        options.extra_hosts.push(host.to_string());
    }
    let runtime = runtime()?;
    let (server, audit) = runtime.block_on(server(settings, env, demo))?;
    let served = runtime.block_on(toolgate_mcp::serve_http(server, options, |addr| {
        if !addr.ip().is_loopback() {
            eprintln!(
                "toolgate: WARNING: serving on {} port {} over plain HTTP (--allow-remote): the \
                 bearer token and every call travel in clear; put a TLS-terminating reverse \
                 proxy in front of it (and add its name to [serve] allowed_hosts)",
                reach(addr.ip()),
                addr.port()
            );
        }
        // Tests and scripts read this line for the port (with --port 0).
        eprintln!("toolgate: serving MCP at http://{addr}/mcp ({told})");
    }));
    runtime.block_on(audit.flush());
    stop(runtime);
    served?;
    eprintln!("toolgate: stopped");
    Ok(ExitCode::SUCCESS)
}

/// A non-loopback address puts the tools on the network, and MCP here is
/// plain HTTP: anyone on the path reads the bearer token and can then call
/// every tool. `--host 0.0.0.0` typed to "make it work" must not do that
/// silently, so it takes an explicit `--allow-remote` and says what is left
/// to do.
fn check_remote(host: IpAddr, allowed: bool) -> Result<()> {
    if !allowed {
        bail!(
            "refusing to serve on {} without --allow-remote: MCP here is plain HTTP, so the \
             bearer token and every call would cross the network in clear; keep the default \
             127.0.0.1 and put a TLS reverse proxy in front of it, or pass --allow-remote (or \
             set [serve] allow_remote = true in the user config) to serve remotely anyway",
            reach(host)
        );
    }
    Ok(())
}

fn reach(host: IpAddr) -> String {
    if host.is_unspecified() {
        format!("{host} (every interface of this machine)")
    } else {
        host.to_string()
    }
}

/// Shuts the runtime down: every call still running is dropped, which kills
/// its process group, and so are the process tables, which kill the
/// background processes. A blocking task (a search in a huge tree) is not
/// waited for longer than a few seconds.
fn stop(runtime: tokio::runtime::Runtime) {
    runtime.shutdown_timeout(std::time::Duration::from_secs(5));
}

/// The bearer token: `TOOLGATE_TOKEN`, `[serve] token`, or the one kept in
/// the data directory (generated on first start), and where it came from.
fn token(settings: &Settings, env: &Environment) -> Result<(String, String)> {
    if let Some(token) = env.var("TOOLGATE_TOKEN") {
        return Ok((token.to_owned(), "token from TOOLGATE_TOKEN".to_owned()));
    }
    if let Some(token) = settings.serve.token.as_deref().filter(|t| !t.is_empty()) {
        return Ok((token.to_owned(), "token from [serve] token".to_owned()));
    }
    let path = env.data_dir().join("serve-token");
    let token = stored_token(&path)?;
    Ok((token, format!("token in {}", path.display())))
}

fn stored_token(path: &Path) -> Result<String> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let mode = std::fs::metadata(path)?.mode();
            // A token others can read is a token others can use.
            if mode & 0o077 != 0 {
                bail!(
                    "{} is readable by other users (mode {:o}); run `chmod 600 {}`",
                    path.display(),
                    mode & 0o777,
                    path.display()
                );
            }
            let token = text.trim().to_owned();
            if token.is_empty() {
                bail!("{} is empty; delete it to get a new token", path.display());
            }
            Ok(token)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(dir) = path.parent() {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
            }
            let token = random_token()?;
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
                .with_context(|| format!("cannot create {}", path.display()))?;
            writeln!(file, "{token}")?;
            file.sync_all()?;
            eprintln!("toolgate: generated a bearer token in {}", path.display());
            Ok(token)
        }
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// 32 bytes from the kernel's CSPRNG, as hex.
fn random_token() -> Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .context("cannot read /dev/urandom for a token")?;
    Ok(toolgate_core::text::hex(&bytes))
}

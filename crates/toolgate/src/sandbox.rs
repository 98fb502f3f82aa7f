//! `toolgate sandbox` and the doctor's smoke test: the sandbox run by the
//! `toolgate` binary itself, which re-executes itself as stage 2.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use std::sync::Arc;

use anyhow::{Context, Result};
use toolgate_sandbox::egress::EgressMode;
use toolgate_sandbox::proxy::{ConnectionRecord, SystemResolver};
use toolgate_sandbox::{
    LocalWorkspace, NetworkMode, Sandbox, SandboxCommand, SandboxConfig, SandboxSpec, Workspace,
};

use crate::STAGE2_COMMAND;
use crate::config::{Environment, Settings};

/// One `toolgate sandbox` invocation.
pub struct Run {
    pub network: NetworkMode,
    pub allow_unix_sockets: bool,
    pub timeout: Duration,
    pub argv: Vec<OsString>,
    pub plan_only: bool,
}

fn sandbox(settings: &Settings, env: &Environment) -> Result<Sandbox> {
    let exe = std::env::current_exe().context("cannot find the toolgate binary for stage 2")?;
    let mut config = SandboxConfig::new(exe, env.state_dir())
        .backend(settings.backend)
        .stage2_prefix([STAGE2_COMMAND]);
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
pub fn workspace(settings: &Settings, env: &Environment) -> Result<Arc<dyn Workspace>> {
    Ok(Arc::new(local_workspace(settings, env)?))
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
    Ok(
        LocalWorkspace::new("cli", settings.roots.clone(), cwd, sandbox(settings, env)?)
            .context("cannot open the workspace roots")?
            .network(network_mode(settings))
            .filesystem(settings.filesystem.clone())
            .protect(&settings.own_files)
            .context("cannot open the workspace roots")?,
    )
}

/// Runs the command with the roots writable and the working directory as
/// cwd; its output goes to ours and its exit code becomes ours.
pub async fn run(settings: &Settings, env: &Environment, run: Run) -> Result<ExitCode> {
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
    if let Some(warning) = &result.unsandboxed {
        eprintln!("toolgate: {warning}");
    }
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

//! The `toolgate` command.

mod approvals;
mod audit;
mod catalog;
mod config;
mod demo;
mod gateway;
mod mcp;
mod pins;
mod render;
mod resolve;
mod sandbox;
mod store;
mod trust;

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use serde_json::Value;
use toolgate_core::{CallContext, Registry, ToolPreset};
use toolgate_policy::{Executor, PolicyPreset};
use toolgate_sandbox::NetworkMode;

use crate::config::{Environment, Overrides, Settings};

/// A sandboxed, policy-governed tool runtime for AI agents.
#[derive(Debug, Parser)]
#[command(name = "toolgate", version, about, max_term_width = 100)]
struct Cli {
    #[command(flatten)]
    globals: Globals,
    #[command(subcommand)]
    command: Command,
}

/// The options every command takes, before or after its name.
#[derive(Debug, clap::Args)]
struct Globals {
    /// Configuration file to use instead of the project's toolgate.toml.
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Tool preset: coding, readonly, minimal or admin.
    #[arg(long, global = true, value_name = "PRESET")]
    preset: Option<ToolPreset>,
    /// Policy preset: permissive, standard, strict or readonly.
    #[arg(long, global = true, value_name = "POLICY")]
    policy: Option<PolicyPreset>,
    /// Workspace root (repeatable): an alias, `name=/absolute/path` (defines
    /// the alias and uses it), or a path relative to the working directory
    /// that stays inside it; default: the working directory.
    #[arg(long = "root", global = true, value_name = "HINT")]
    roots: Vec<String>,
    /// Define a root alias (repeatable): name=/absolute/path.
    #[arg(long = "root-alias", global = true, value_name = "NAME=PATH")]
    root_aliases: Vec<String>,
    /// Register the demonstration tools (demo_*), which touch nothing.
    #[arg(long, global = true)]
    demo: bool,
    /// The agent's name in approval requests and the audit log (default:
    /// [identity] agent, else the MCP client's name, else `cli`/`mcp`).
    #[arg(long, global = true, value_name = "NAME")]
    agent: Option<String>,
}

impl Cli {
    /// The command line, parsed. `toolgate mcp ...`, which an MCP client
    /// starts for every session, is parsed against the global options and
    /// `mcp` alone: the whole command tree is some 250 KB of code and its
    /// heap, which the server would otherwise keep mapped for its life.
    /// Whatever does not parse that way (another command, `--help`,
    /// `--version`, a mistake) is parsed against the whole tree, which
    /// answers it as before.
    fn from_env() -> Cli {
        let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
        Cli::mcp_only(&args).unwrap_or_else(|| Cli::parse_from(args))
    }

    /// `args` as `toolgate [global options] mcp [its options]`, or `None`.
    fn mcp_only(args: &[std::ffi::OsString]) -> Option<Cli> {
        use clap::{Args, FromArgMatches};
        if !args.iter().skip(1).any(|arg| arg == "mcp") {
            return None;
        }
        let tree = Globals::augment_args(clap::Command::new("toolgate"))
            .subcommand_required(true)
            .subcommand(mcp::Exposure::augment_args(clap::Command::new("mcp")));
        let matches = tree.try_get_matches_from(args).ok()?;
        let ("mcp", options) = matches.subcommand()? else {
            return None;
        };
        Some(Cli {
            globals: Globals::from_arg_matches(&matches).ok()?,
            command: Command::Mcp {
                exposure: mcp::Exposure::from_arg_matches(options).ok()?,
            },
        })
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the active tools over MCP on stdin/stdout (for any MCP client).
    Mcp {
        #[command(flatten)]
        exposure: mcp::Exposure,
    },
    /// Serve the active tools over MCP (Streamable HTTP) at
    /// http://127.0.0.1:PORT/mcp, behind a bearer token.
    Serve {
        #[command(flatten)]
        exposure: mcp::Exposure,
        /// Port (default: [serve] port, else 8765; 0 picks a free one).
        #[arg(long)]
        port: Option<u16>,
        /// Address to listen on (default 127.0.0.1). A non-loopback address
        /// also needs --allow-remote.
        #[arg(long, value_name = "IP")]
        host: Option<std::net::IpAddr>,
        /// Let --host name a non-loopback address (or 0.0.0.0): MCP is plain
        /// HTTP, so put TLS in front of it (default: [serve] allow_remote).
        #[arg(long)]
        allow_remote: bool,
        /// Serve without a bearer token (loopback only; for local test
        /// clients that cannot send headers).
        #[arg(long)]
        no_token: bool,
    },
    /// List every tool with its effect class, idempotency, group and status;
    /// with NAME, that tool's description and arguments.
    Tools {
        /// One tool: its description, arguments (input schema) and facts
        /// (output schema).
        name: Option<String>,
        /// Print JSON instead of a table (with NAME: the whole tool spec).
        #[arg(long)]
        json: bool,
    },
    /// Show what this machine offers for sandboxing and which backend is in use.
    Doctor {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run a command in the sandbox, with the workspace roots writable.
    Sandbox {
        /// Network: none (default), proxy (the [network] allowlist) or host.
        #[arg(long, default_value = "none")]
        network: NetworkMode,
        /// Allow the command to create unix sockets.
        #[arg(long)]
        allow_unix_sockets: bool,
        /// Wall-clock limit in seconds.
        #[arg(long, default_value_t = 120)]
        timeout: u64,
        /// Print the sandbox's argv (one flag per line) instead of running.
        #[arg(long)]
        plan: bool,
        /// The command and its arguments.
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<std::ffi::OsString>,
    },
    /// Resolve native tooling for a task: from a portable description
    /// `{fs, shell, dispatch}`, the MCP server launch configurations (a list
    /// and an `mcpServers` map) rooted in the task's working directory.
    Resolve {
        /// The description as JSON, `-` for stdin or `@FILE`
        /// (default: all three servers with their defaults).
        description: Option<String>,
        /// The task's working directory (default: the current one).
        #[arg(long, value_name = "DIR")]
        cwd: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Trust a project's toolgate.toml as it is now, so that settings that
    /// loosen the configuration (a weaker sandbox, `elevated`, allow rules,
    /// a looser policy ...) apply from it; any change to the file voids the
    /// trust. Untrusted project files may only tighten.
    Trust {
        /// The file (default: the toolgate.toml found from the working
        /// directory up).
        file: Option<PathBuf>,
        /// List the trusted files and whether each is unchanged.
        #[arg(long, conflicts_with_all = ["revoke", "file"])]
        list: bool,
        /// Withdraw the trust of the file.
        #[arg(long)]
        revoke: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Inspect the policy.
    Policy {
        #[command(subcommand)]
        command: PolicyCommand,
    },
    /// Run one tool call through the whole pipeline and print the result.
    Call {
        /// Tool name.
        tool: String,
        /// Arguments as a JSON object, or `-` to read them from stdin.
        #[arg(default_value = "{}")]
        args: String,
        /// Print the whole result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Approval requests that calls wait on, and a person's answers:
    /// list, show, approve, deny, watch.
    Approvals {
        #[command(subcommand)]
        command: approvals::ApprovalsCommand,
    },
    /// The audit log of every call (filter with --tool, --agent,
    /// --decision, --since; --follow to keep printing), or `audit verify`
    /// to check its hash chain.
    #[command(args_conflicts_with_subcommands = true)]
    Audit {
        #[command(subcommand)]
        command: Option<audit::AuditCommand>,
        #[command(flatten)]
        args: audit::AuditArgs,
    },
    /// The governed catalogue of command-line tools: add, list, show,
    /// install, run, health, remove, image, policy.
    Catalog {
        #[command(subcommand)]
        command: catalog::CatalogCommand,
    },
    /// The external MCP servers of the configuration: list (state,
    /// transport, tool count, last error) and test NAME.
    McpServers {
        #[command(subcommand)]
        command: gateway::McpServersCommand,
    },
    /// Print the system prompt: AGENTS.md, SOUL.md, TOOLS.md (the active
    /// tools) and the runtime facts.
    Prompt {
        /// Print each part separately as JSON.
        #[arg(long)]
        json: bool,
        /// Session id to state (default: a new one).
        #[arg(long, value_name = "ID")]
        session: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
enum PolicyCommand {
    /// Show every layer's verdict on a call, in pipeline order, without running it.
    Explain {
        /// Tool name.
        tool: String,
        /// Arguments as a JSON object, or `-` to read them from stdin.
        #[arg(default_value = "{}")]
        args: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// The hidden subcommand that runs inside the sandbox (stage 2). It is
/// dispatched before argument parsing: everything after it belongs to the
/// sandboxed command.
const STAGE2_COMMAND: &str = "__stage2";

fn main() -> ExitCode {
    let mut args = std::env::args_os();
    if args.nth(1).is_some_and(|a| a == STAGE2_COMMAND) {
        let code = toolgate_sandbox::stage2::main_with_args(args);
        return ExitCode::from(u8::try_from(code).unwrap_or(u8::MAX));
    }
    tune_malloc();
    let cli = Cli::from_env();
    match run(cli) {
        Ok(code) => code,
        // `toolgate tools | head`: the reader has all it wanted. Like other
        // command-line tools, end quietly instead of reporting an error.
        Err(e) if stdout_closed(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("toolgate: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// glibc's malloc, tuned for a process that may run for days
/// (`toolgate mcp`, `toolgate serve`), each setting unless the user set it
/// (`MALLOC_ARENA_MAX`, `MALLOC_MMAP_THRESHOLD_`, or either in
/// `GLIBC_TUNABLES`):
///
/// - One arena per core instead of eight. glibc gives each new thread an
///   arena of its own up to that limit and keeps what an arena touched
///   after its thread has gone: the worker threads of `find` and `grep`
///   walks alone left about 1.5 MB resident in a long-running server. With
///   one per core, threads that can run at once still allocate under
///   separate locks (a single arena made a `grep` with 141,000 matches
///   over the bench's tree 12% slower).
/// - Blocks of 128 KiB and more always get pages of their own, returned
///   when freed. By default glibc raises that threshold to the largest
///   such block freed so far, and from then on serves them from the heap,
///   which keeps its high-water mark: after one page of a large file
///   (several copies of up to 256 KiB on their way to the client) a server
///   kept about 0.3 MB more for good.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn tune_malloc() {
    let user_set = |variable: &str, tunable: &str| {
        std::env::var_os(variable).is_some()
            || std::env::var("GLIBC_TUNABLES").is_ok_and(|tunables| tunables.contains(tunable))
    };
    if !user_set("MALLOC_ARENA_MAX", "arena_max") {
        let cores = std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get);
        let arenas = libc::c_int::try_from(cores.max(2)).unwrap_or(libc::c_int::MAX);
        // SAFETY: mallopt only changes the allocator's tuning, and no other
        // thread exists yet to allocate meanwhile.
        unsafe { libc::mallopt(libc::M_ARENA_MAX, arenas) };
    }
    if !user_set("MALLOC_MMAP_THRESHOLD_", "mmap_threshold") {
        // SAFETY: as above.
        unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, 128 << 10) };
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn tune_malloc() {}

/// A write to our stdout failed because its reader is gone: the command's
/// own `writeln!(out, ..)?` hands the io error up as it is. (An EPIPE deeper
/// down, such as a command's stdin, arrives wrapped in its own error type.)
fn stdout_closed(error: &anyhow::Error) -> bool {
    error
        .downcast_ref::<std::io::Error>()
        .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
}

fn run(cli: Cli) -> Result<ExitCode> {
    let env = Environment::capture().context("cannot read the working directory")?;
    let overrides = Overrides {
        config: cli.globals.config.clone(),
        preset: cli.globals.preset,
        policy: cli.globals.policy,
        roots: cli.globals.roots.clone(),
        root_aliases: cli.globals.root_aliases.clone(),
        agent: cli.globals.agent.clone(),
    };
    // Before the configuration is loaded: its warnings are about what
    // this command changes.
    if let Command::Trust {
        file,
        list,
        revoke,
        json,
    } = cli.command
    {
        let request = trust::Request {
            file,
            list,
            revoke,
            json,
        };
        return trust::run(&env, request);
    }
    let settings = config::load(&env, &overrides)?;
    for note in &settings.notes {
        eprintln!("toolgate: note: {note}");
    }
    for warning in &settings.warnings {
        eprintln!("toolgate: warning: {warning}");
    }
    let command = match cli.command {
        Command::Mcp { exposure } => {
            let mut settings = exposure.apply(settings)?;
            settings.serving = true;
            return mcp::stdio(settings, env, cli.globals.demo);
        }
        Command::Serve {
            exposure,
            port,
            host,
            allow_remote,
            no_token,
        } => {
            let mut settings = exposure.apply(settings)?;
            settings.serving = true;
            let flags = mcp::Serve {
                port,
                host,
                allow_remote,
                no_token,
            };
            return mcp::http(settings, env, cli.globals.demo, flags);
        }
        Command::Resolve {
            description,
            cwd,
            json,
        } => {
            let request = resolve::Request {
                description,
                cwd,
                config: cli.globals.config.clone(),
                json,
            };
            return resolve::run(&settings, &env, request);
        }
        // The store alone: no workspace, no tools.
        Command::Approvals { command } => return approvals::run(command, &settings, &env),
        Command::Audit { command, args } => return audit::run(command, args, &settings),
        Command::McpServers { command } => return gateway::run(command, &settings, &env),
        Command::Catalog { command } => return catalog::run(command, &settings, &env),
        // The sandbox alone: no store, no tools.
        Command::Sandbox {
            network,
            allow_unix_sockets,
            timeout,
            plan,
            command,
        } => {
            let run = sandbox::Run {
                network,
                allow_unix_sockets,
                timeout: std::time::Duration::from_secs(timeout),
                argv: command,
                plan_only: plan,
            };
            return runtime()?.block_on(sandbox::run(&settings, &env, run));
        }
        other => other,
    };
    // `call` opens the store first: an unreachable one stops it here.
    let mut settings = settings;
    let (call_runtime, gate) = match &command {
        Command::Call { .. } => {
            let runtime = runtime()?;
            let mut gate = runtime.block_on(store::gate(&settings))?;
            runtime.block_on(catalog::attach(&mut gate, &settings, &env))?;
            config::protect_store_files(&mut settings);
            (Some(runtime), Some(gate))
        }
        Command::Tools { .. } => {
            // The listing shows the catalogue's tools too, when there is a
            // store to read them from; nothing is called through it.
            let runtime = runtime()?;
            // A store that cannot be read costs the listing those tools,
            // not the listing.
            let gate = match store::existing(&settings) {
                true => match runtime.block_on(async {
                    let mut gate = store::gate(&settings).await?;
                    catalog::attach(&mut gate, &settings, &env).await?;
                    anyhow::Ok(gate)
                }) {
                    Ok(gate) => Some(gate),
                    Err(e) => {
                        eprintln!("toolgate: warning: the catalogue's tools are not listed: {e:#}");
                        None
                    }
                },
                false => None,
            };
            (Some(runtime), gate)
        }
        Command::Policy { .. } | Command::Prompt { .. } => (Some(runtime()?), None),
        _ => (None, None),
    };
    // The external servers' tools, for the commands that show or run tools.
    let servers = match &call_runtime {
        Some(runtime) => runtime.block_on(gateway::configured(&settings, &env))?,
        None => toolgate_mcp::gateway::Gateway::empty(),
    };
    // A person at `toolgate call` names the tool: nothing is deferred there.
    // The listings show what a model would see.
    let defer = !matches!(command, Command::Call { .. });
    let executor = executor(
        &settings,
        &env,
        cli.globals.demo,
        gate.as_ref(),
        &servers,
        defer,
    )?;
    // The policy resolves relative paths where the tools do.
    let cwd = sandbox::working_dir(&settings, &env);
    let agent = settings.agent.clone().unwrap_or_else(|| "cli".to_owned());
    let ctx = CallContext::new(call_id(), agent, cwd).with_roots(settings.roots.clone());
    match command {
        Command::Mcp { .. }
        | Command::Serve { .. }
        | Command::Resolve { .. }
        | Command::Approvals { .. }
        | Command::Audit { .. }
        | Command::McpServers { .. }
        | Command::Catalog { .. }
        | Command::Sandbox { .. }
        | Command::Trust { .. } => {
            unreachable!("handled above")
        }
        Command::Doctor { json } => {
            let runtime = runtime()?;
            let smoke = runtime.block_on(sandbox::smoke_test(&settings, &env));
            let store = runtime
                .block_on(store::open(&settings))
                .map(|opened| opened.store.backend_name().to_owned())
                .map_err(|e| format!("{e:#}"));
            render::doctor(&settings, &env.state_dir(), smoke, store, json)
        }
        Command::Tools { name: None, json } => {
            render::tools(&executor, &settings, json)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Tools {
            name: Some(name),
            json,
        } => {
            render::tool(&executor, &name, json)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Policy {
            command: PolicyCommand::Explain { tool, args, json },
        } => {
            let explanation = executor.explain(&tool, parse_args(&args)?, &ctx);
            render::explanation(&explanation, json)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Call { tool, args, json } => {
            sandbox::starting(&settings, &env)?;
            let args = parse_args(&args)?;
            let runtime = match call_runtime {
                Some(runtime) => runtime,
                None => runtime()?,
            };
            // A person may be at this terminal: say what the call waits for.
            let ctx = ctx.with_progress(toolgate_core::Progress::new(|line: &str| {
                if line.starts_with("waiting for approval") {
                    eprintln!("toolgate: {line}");
                }
            }));
            let result = runtime.block_on(executor.call(&tool, args, &ctx));
            // The record is written in the background: before exiting.
            if let Some(gate) = &gate {
                runtime.block_on(gate.audit.flush());
            }
            // External servers end their sessions before toolgate exits, so
            // what was queued for them last (a timed-out call's
            // cancellation) is written first.
            runtime.block_on(servers.close());
            render::call_result(&tool, result, json)
        }
        Command::Prompt { json, session } => {
            prompt(&executor, &settings, &env, json, session, call_runtime)
        }
    }
}

pub(crate) fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// The pipeline over the configured tools; with `gate`, `ask` rules wait
/// for a person through the store and every call is audited.
fn executor(
    settings: &Settings,
    env: &Environment,
    demo: bool,
    gate: Option<&store::Gate>,
    servers: &toolgate_mcp::gateway::Gateway,
    defer: bool,
) -> Result<Executor> {
    let mut registry = builtin_tools(settings, env, true)?;
    if demo {
        demo::register(&mut registry)?;
    }
    // Above the threshold (0: always), external tools wait in the deferred
    // pool behind mcp_find_tools, so a model's tool list stays small.
    let threshold = settings.mcp_defer_threshold;
    let defer = defer && (threshold == 0 || servers.tool_count() > threshold);
    servers.register_into(&mut registry, defer)?;
    if let Some(shelf) = gate.and_then(|g| g.shelf.as_ref()) {
        shelf.register_into(&mut registry)?;
    }
    let mut builder = Executor::builder(registry)
        .policy(settings.policy.clone())
        .input_mode(settings.input_mode);
    if let Some(preset) = settings.preset {
        builder = builder.tool_preset(preset);
    }
    if let Some(dir) = &settings.output_dir {
        builder = builder.output_dir(dir.clone());
    }
    if let Some(tools) = &settings.only_tools {
        builder = builder.only_tools_from("--tools", tools.clone());
    }
    if let Some(gate) = gate {
        builder = builder
            .approvals(gate.approvals.clone())
            .audit(gate.audit.clone());
    }
    if let Some(tools) = &settings.narrow_to {
        builder =
            builder.only_tools_from("the untrusted project file's [access] allow", tools.clone());
    }
    builder.try_build().map_err(anyhow::Error::from)
}

/// `toolgate prompt`: markdown, or each part as JSON (plus the markdown).
fn prompt(
    executor: &Executor,
    settings: &Settings,
    env: &Environment,
    json: bool,
    session: Option<String>,
    runtime: Option<tokio::runtime::Runtime>,
) -> Result<ExitCode> {
    use toolgate_tools::prompt::{PromptOptions, assemble};
    sandbox::starting(settings, env)?;
    let workspace = sandbox::workspace(settings, env, false)?;
    let mut options = PromptOptions::default();
    if let Some(id) = session {
        options = options.session_id(id);
    }
    let runtime = match runtime {
        Some(runtime) => runtime,
        None => crate::runtime()?,
    };
    let prompt = runtime.block_on(assemble(executor, workspace.as_ref(), &options))?;
    let mut out = std::io::stdout().lock();
    if json {
        let mut value = serde_json::to_value(&prompt)?;
        value["markdown"] = Value::String(prompt.markdown());
        writeln!(out, "{}", serde_json::to_string_pretty(&value)?)?;
    } else {
        write!(out, "{}", prompt.markdown())?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Every built-in tool over the configured workspace (`elevated` only when
/// the operator enabled it); `warm`: the tools will run (see
/// `sandbox::workspace`), not only be listed.
fn builtin_tools(settings: &Settings, env: &Environment, warm: bool) -> Result<Registry> {
    use toolgate_tools::{Fs, Limits, RuntimeConfig, memory, neuron, process, snapshot};
    let mut registry = Registry::new();
    let workspace = sandbox::workspace(settings, env, warm)?;
    let resources = &settings.policy.resources;
    let limits = Limits::within(
        resources.max_output_bytes,
        resources.max_output_lines,
        resources.max_file_bytes,
    );
    let fs = Arc::new(Fs::new(workspace, limits));
    toolgate_tools::register_fs_tools(&mut registry, fs.clone())?;
    let mut runtime = RuntimeConfig::default();
    runtime.pass_env.clone_from(&settings.tools.pass_env);
    if let Some(secs) = settings.tools.max_timeout {
        runtime.max_timeout = std::time::Duration::from_secs(secs);
    }
    let mut processes = process::ProcessConfig::default();
    // Private to toolgate (0700), never the shared temp dir; leftovers of a
    // server that was killed outright are swept there at the next start.
    processes.log_dir = env.state_dir().join("processes");
    if let Some(max) = settings.tools.max_processes {
        processes.max_running = max;
    }
    toolgate_tools::register_runtime_tools(&mut registry, fs.clone(), runtime.clone(), processes)?;
    memory::register_memory_tools(&mut registry, fs.clone(), memory::MemoryConfig::default())?;
    let mut facts = neuron::RuntimeFacts::new("cli", settings.policy_preset.as_str());
    facts.pass_env.clone_from(&runtime.pass_env);
    neuron::register_neuron_tools(&mut registry, fs.clone(), facts)?;
    if settings.elevated {
        toolgate_tools::register_elevated_tool(&mut registry, fs.clone(), runtime)?;
    }
    let snapshot = snapshot::SnapshotTool::new(fs, env.state_dir());
    registry.register(Arc::new(toolgate_core::Typed::new(snapshot)))?;
    Ok(registry)
}

fn parse_args(raw: &str) -> Result<Value> {
    let text = if raw == "-" {
        let mut buf = String::new();
        std::io::stdin()
            .read_to_string(&mut buf)
            .context("cannot read the arguments from stdin")?;
        buf
    } else {
        raw.to_owned()
    };
    let value: Value = serde_json::from_str(&text).with_context(|| {
        format!("the arguments are not valid JSON ({text:?}); pass an object such as '{{\"path\": \"src\"}}'")
    })?;
    if !value.is_object() {
        bail!("the arguments must be a JSON object, not {value}");
    }
    Ok(value)
}

pub(crate) fn call_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("cli-{}-{nanos:x}", std::process::id())
}

#[cfg(test)]
mod cli_tests {
    use super::*;
    use std::ffi::OsString;

    fn args(line: &[&str]) -> Vec<OsString> {
        std::iter::once("toolgate")
            .chain(line.iter().copied())
            .map(OsString::from)
            .collect()
    }

    #[test]
    fn an_mcp_command_line_parses_alone_as_against_the_whole_tree() {
        for line in [
            &["mcp"][..],
            &["--root", "a", "mcp", "--tools", "read,ls", "--no-sandbox"],
            &["mcp", "--root", "b", "--agent", "x", "--demo"],
            &[
                "--preset",
                "readonly",
                "mcp",
                "--allow-pattern",
                "^ls",
                "--allow-pattern",
                "^cat",
            ],
            &[
                "mcp",
                "--allow-commands",
                "",
                "--config",
                "t.toml",
                "--policy",
                "strict",
            ],
            &[
                "--root-alias",
                "w=/work",
                "--root",
                "w",
                "mcp",
                "--root",
                "mcp",
            ],
        ] {
            let whole = Cli::try_parse_from(args(line)).unwrap();
            let alone = Cli::mcp_only(&args(line))
                .unwrap_or_else(|| panic!("{line:?} did not parse against `mcp` alone"));
            assert_eq!(format!("{alone:?}"), format!("{whole:?}"), "{line:?}");
        }
    }

    #[test]
    fn everything_else_is_left_to_the_whole_tree() {
        for line in [
            &["mcp", "--help"][..],
            &["--version", "mcp"],
            &["mcp", "--no-such-flag"],
            &["--root", "mcp", "serve"],
            &["serve", "--root", "mcp"],
            &["mpc"],
            &["--preset", "no-such-preset", "mcp"],
            &["tools", "mcp"],
        ] {
            assert!(
                Cli::mcp_only(&args(line)).is_none(),
                "{line:?} was taken for `toolgate mcp`"
            );
        }
    }
}

//! External MCP servers for the commands that run tools, and
//! `toolgate mcp-servers list|test`.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Result, bail};
use serde_json::json;
use toolgate_mcp::gateway::{Gateway, GatewayOptions, ServerConfig, ServerStatus};

use crate::config::{Environment, Settings};

/// `toolgate mcp-servers`.
#[derive(Debug, clap::Subcommand)]
pub enum McpServersCommand {
    /// Connect every configured server and show its state, transport, tool
    /// count and last error.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Connect one server and show what it offers.
    Test {
        /// The server's name in the configuration.
        name: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Tool definitions that changed since they were pinned (disabled until
    /// a person approves), each with its diff; approve or reject them.
    Review(crate::pins::ReviewArgs),
}

/// Connects the configured servers (or only `only`), saying on stderr what
/// failed or was refused and which servers run unconfined.
pub async fn connect(
    settings: &Settings,
    env: &Environment,
    servers: Vec<ServerConfig>,
) -> Result<Gateway> {
    if servers.is_empty() {
        return Ok(Gateway::empty());
    }
    let mut options = GatewayOptions::default();
    // Every definition is checked against its pin in the store: a tool
    // whose description or schema changed since is left out until reviewed.
    options.pins = Some(crate::pins::store_pins(settings).await?);
    options.reserved = crate::builtin_tools(settings, env, false)?
        .active()
        .map(|t| t.spec().name.clone())
        .collect();
    for server in &servers {
        if let Some(confinement) = crate::sandbox::server_confinement(settings, env, server)? {
            options
                .confinements
                .insert(server.name.clone(), confinement);
        }
    }
    let gateway = Gateway::connect(servers, options).await;
    for warning in gateway.warnings() {
        eprintln!("toolgate: warning: {warning}");
    }
    Ok(gateway)
}

/// The connected servers of every command that runs tools.
pub async fn configured(settings: &Settings, env: &Environment) -> Result<Gateway> {
    connect(settings, env, settings.mcp_servers.clone()).await
}

/// One doctor row per server: how it is reached and whether it is confined.
pub fn doctor_rows(settings: &Settings) -> Vec<[String; 2]> {
    settings
        .mcp_servers
        .iter()
        .map(|server| {
            let confinement = if server.unconfined() {
                "UNCONFINED: runs with toolgate's privileges (add `sandbox = { roots = [...] }`)"
            } else if server.kind() == "http" {
                "remote (HTTP): runs elsewhere"
            } else {
                "sandboxed"
            };
            [
                format!("mcp server {}", server.name),
                format!("{}, {confinement}", server.kind()),
            ]
        })
        .collect()
}

/// `toolgate mcp-servers ...`.
pub fn run(command: McpServersCommand, settings: &Settings, env: &Environment) -> Result<ExitCode> {
    let (servers, json, single) = match command {
        McpServersCommand::Review(args) => return crate::pins::review(args, settings, env),
        McpServersCommand::List { json } => (settings.mcp_servers.clone(), json, false),
        McpServersCommand::Test { name, json } => {
            let Some(server) = settings.mcp_servers.iter().find(|s| s.name == name) else {
                let names: Vec<&str> = settings
                    .mcp_servers
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect();
                let hint = toolgate_core::suggest::did_you_mean(&name, names.iter().copied());
                if names.is_empty() {
                    bail!(
                        "no MCP server `{name}`: none is configured ([[mcp_servers]] in toolgate.toml)"
                    );
                }
                bail!(
                    "no MCP server `{name}`{hint} (configured: {})",
                    names.join(", ")
                );
            };
            (vec![server.clone()], json, true)
        }
    };
    let runtime = crate::runtime()?;
    let gateway = runtime.block_on(connect(settings, env, servers))?;
    let statuses = gateway.status();
    let mut out = std::io::stdout().lock();
    if json {
        let body = if single {
            let tools: Vec<_> = gateway
                .tools()
                .map(|t| {
                    let spec = t.spec();
                    json!({"name": spec.name, "description": spec.description, "declared": spec.declared})
                })
                .collect();
            json!({"server": statuses.first(), "tools": tools})
        } else {
            json!(statuses)
        };
        writeln!(out, "{}", serde_json::to_string_pretty(&body)?)?;
    } else if statuses.is_empty() {
        writeln!(
            out,
            "no MCP servers configured ([[mcp_servers]] in toolgate.toml, or TOOLGATE_MCP_SERVERS)"
        )?;
    } else {
        write_statuses(&mut out, &statuses)?;
        if single {
            for tool in gateway.tools() {
                let spec = tool.spec();
                let first_line = spec.description.lines().next().unwrap_or_default();
                writeln!(out, "  {}  {first_line}", spec.name)?;
            }
        }
    }
    let failed = statuses.iter().any(|s| s.state != "up");
    drop(gateway);
    runtime.shutdown_timeout(std::time::Duration::from_secs(5));
    Ok(if single && failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn write_statuses(out: &mut impl Write, statuses: &[ServerStatus]) -> Result<()> {
    let mut rows = vec![[
        "NAME".to_owned(),
        "TRANSPORT".to_owned(),
        "STATE".to_owned(),
        "TOOLS".to_owned(),
        "CONFINED".to_owned(),
        "LAST ERROR".to_owned(),
    ]];
    for s in statuses {
        rows.push([
            s.name.clone(),
            s.transport.clone(),
            s.state.clone(),
            s.tools.to_string(),
            match (s.transport.as_str(), s.unconfined) {
                ("http", _) => "remote".to_owned(),
                (_, true) => "NO".to_owned(),
                (_, false) => "sandbox".to_owned(),
            },
            s.last_error.clone().unwrap_or_else(|| "-".to_owned()),
        ]);
    }
    crate::render::write_table(out, &rows)
}

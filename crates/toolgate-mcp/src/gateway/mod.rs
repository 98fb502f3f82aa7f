//! The MCP gateway: external MCP servers as governed toolgate tools.
//!
//! [`Gateway::connect`] starts every configured server in parallel, each
//! within its connect timeout; one that fails is reported and skipped.
//! Their tools become [`McpTool`]s named `mcp__<server>__<tool>`, which a
//! [`Registry`] holds next to the built-ins, so every call goes through the
//! one Executor pipeline (access, rules, approvals, audit) like any other.
//! Nothing a server declares decides policy: every external tool is
//! mutate-irreversible and at-most-once unless the operator says otherwise
//! per tool.

pub mod config;
mod http;
pub mod pins;
mod process;
mod tool;
mod upstream;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::Serialize;
use toolgate_core::{Registry, Tool, ToolRegistrationError};

pub use config::{ConfigError, ServerConfig, Transport, check_servers};
pub use pins::{PinVerdict, ToolDefinition, ToolPins};
pub use process::Confinement;
pub use tool::{Class, MAX_DESCRIPTION, McpTool, toolgate_name};
pub use upstream::LinkState;
use upstream::Upstream;

/// How the gateway runs its servers.
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct GatewayOptions {
    /// Where tool definitions are pinned; `None`: no pinning (every
    /// definition is taken as listed).
    pub pins: Option<Arc<dyn ToolPins>>,
    /// The sandbox of each server that has one, by server name; the others
    /// run unconfined.
    pub confinements: BTreeMap<String, Confinement>,
    /// Tool names already taken (the built-ins): an external tool that
    /// would take one is refused.
    pub reserved: BTreeSet<String>,
}

/// The connected servers and their tools.
#[derive(Default)]
pub struct Gateway {
    upstreams: Vec<Arc<Upstream>>,
    tools: Vec<Arc<McpTool>>,
    warnings: Vec<String>,
}

/// One server as `mcp-servers list` and `doctor` show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ServerStatus {
    /// Its name.
    pub name: String,
    /// `stdio` or `http`.
    pub transport: String,
    /// `up`, `down` (reconnecting) or `failed` (skipped at start).
    pub state: String,
    /// Tools it brought.
    pub tools: usize,
    /// Why it is down or failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// A stdio server without `sandbox`: it runs with toolgate's privileges.
    pub unconfined: bool,
    /// How many times it was reconnected.
    pub restarts: u32,
    /// What it calls itself (`name version`), from initialize.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// A stdio server's process id while it runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// It announced that its tool list changed since it connected; the new
    /// list (checked against its pins) is taken at the next start.
    pub tools_changed: bool,
}

impl Gateway {
    /// A gateway without servers.
    pub fn empty() -> Self {
        Gateway::default()
    }

    /// Ends every server's session the way MCP ends a stdio session (see
    /// [`Upstream::close`]), all at once: what a process that is about to
    /// exit calls, so a message queued last (a cancellation) still reaches
    /// its server.
    pub async fn close(&self) {
        futures::future::join_all(self.upstreams.iter().map(|u| u.close())).await;
    }

    /// Connects every server in parallel and collects their tools.
    pub async fn connect(servers: Vec<ServerConfig>, options: GatewayOptions) -> Gateway {
        let starts = servers.into_iter().map(|config| {
            let confinement = options
                .confinements
                .get(&config.name)
                .cloned()
                .unwrap_or(Confinement::Unconfined);
            Upstream::start(config, confinement)
        });
        let upstreams = futures::future::join_all(starts).await;
        let mut gateway = Gateway {
            upstreams,
            tools: Vec::new(),
            warnings: Vec::new(),
        };
        let disabled = match &options.pins {
            Some(pins) => gateway.check_pins(pins.as_ref()).await,
            None => BTreeSet::new(),
        };
        gateway.collect_tools(&options.reserved, &disabled);
        gateway
    }

    /// The (server, tool) pairs whose definitions are not trusted, each
    /// with a warning saying why.
    async fn check_pins(&mut self, pins: &dyn ToolPins) -> BTreeSet<(String, String)> {
        let definitions: Vec<ToolDefinition> = self
            .upstreams
            .iter()
            .filter(|u| !u.tools.is_empty())
            .flat_map(|u| u.tools.iter().map(|t| ToolDefinition::of(u.name(), t)))
            .collect();
        let mut disabled = BTreeSet::new();
        if definitions.is_empty() {
            return disabled;
        }
        match pins.check(&definitions).await {
            Ok(verdicts) => {
                for (definition, verdict) in definitions.iter().zip(verdicts) {
                    if let PinVerdict::Changed { .. } = verdict {
                        self.warnings.push(format!(
                            "tool `{}` of MCP server `{}` changed since it was pinned (its \
                             description or schema is not what was approved); it is disabled \
                             until a person reviews the change: run `toolgate mcp-servers review`",
                            definition.tool, definition.server
                        ));
                        disabled.insert((definition.server.clone(), definition.tool.clone()));
                    }
                }
            }
            Err(error) => {
                self.warnings.push(format!(
                    "the pinned MCP tool definitions cannot be checked ({error}); every external \
                     tool is disabled until they can"
                ));
                disabled.extend(
                    definitions
                        .iter()
                        .map(|d| (d.server.clone(), d.tool.clone())),
                );
            }
        }
        disabled
    }

    fn collect_tools(
        &mut self,
        reserved: &BTreeSet<String>,
        disabled: &BTreeSet<(String, String)>,
    ) {
        // Which server's tool holds a name, to name both in a refusal.
        let mut taken: BTreeMap<String, (String, String)> = BTreeMap::new();
        for upstream in &self.upstreams {
            if let LinkState::Failed(why) = upstream.state() {
                self.warnings.push(format!(
                    "MCP server `{}` ({}) is skipped: {why}",
                    upstream.name(),
                    upstream.config.kind()
                ));
                continue;
            }
            for remote in &upstream.tools {
                if disabled.contains(&(upstream.name().to_owned(), remote.name.to_string())) {
                    continue;
                }
                let name = toolgate_name(upstream.name(), &remote.name);
                if reserved.contains(&name) {
                    self.warnings.push(format!(
                        "tool `{}` of MCP server `{}` is refused: its name {name} is the \
                         built-in tool {name}",
                        remote.name,
                        upstream.name()
                    ));
                    continue;
                }
                if let Some((server, tool)) = taken.get(&name) {
                    self.warnings.push(format!(
                        "tool `{}` of MCP server `{}` is refused: its name {name} is already \
                         taken by tool `{tool}` of MCP server `{server}`; rename one of the servers",
                        remote.name,
                        upstream.name()
                    ));
                    continue;
                }
                taken.insert(
                    name.clone(),
                    (upstream.name().to_owned(), remote.name.to_string()),
                );
                let class = upstream
                    .config
                    .tools
                    .get(remote.name.as_ref())
                    .and_then(|over| over.effect_class.map(|class| (class, over.idempotency)))
                    .map_or_else(Class::default, |(effect_class, idempotency)| Class {
                        effect_class,
                        idempotency: match effect_class {
                            toolgate_core::EffectClass::Read => None,
                            _ => {
                                Some(idempotency.unwrap_or(toolgate_core::Idempotency::AtMostOnce))
                            }
                        },
                    });
                let spec = tool::spec(upstream.name(), &name, remote, class);
                self.tools.push(Arc::new(McpTool::new(
                    spec,
                    remote.name.to_string(),
                    upstream.clone(),
                )));
            }
            for listed in upstream.config.tools.keys() {
                if !upstream.tools.iter().any(|t| t.name == listed.as_str()) {
                    let known: Vec<&str> = upstream.tools.iter().map(|t| t.name.as_ref()).collect();
                    let hint = toolgate_core::suggest::did_you_mean(listed, known.iter().copied());
                    self.warnings.push(format!(
                        "MCP server `{}` has no tool `{listed}` (named in its `tools` \
                         overrides){hint}",
                        upstream.name()
                    ));
                }
            }
        }
    }

    /// What went wrong at connect: servers skipped, tools refused.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Every external tool.
    pub fn tools(&self) -> impl Iterator<Item = Arc<dyn Tool>> + '_ {
        self.tools.iter().map(|t| t.clone() as Arc<dyn Tool>)
    }

    /// How many external tools there are.
    pub fn tool_count(&self) -> usize {
        self.tools.len()
    }

    /// Adds every external tool to `registry`: into the active pool, or
    /// into the deferred pool when `deferred`.
    pub fn register_into(
        &self,
        registry: &mut Registry,
        deferred: bool,
    ) -> Result<(), ToolRegistrationError> {
        for tool in self.tools() {
            if deferred {
                registry.register_deferred(tool)?;
            } else {
                registry.register(tool)?;
            }
        }
        Ok(())
    }

    /// Each server's state.
    pub fn status(&self) -> Vec<ServerStatus> {
        self.upstreams
            .iter()
            .map(|upstream| {
                let (state, last_error) = match upstream.state() {
                    LinkState::Up => ("up", None),
                    LinkState::Down(why) => ("down", Some(why)),
                    LinkState::Failed(why) => ("failed", Some(why)),
                };
                ServerStatus {
                    name: upstream.name().to_owned(),
                    transport: upstream.config.kind().to_owned(),
                    state: state.to_owned(),
                    tools: self
                        .tools
                        .iter()
                        .filter(|t| t.spec().origin == mcp_origin(upstream.name()))
                        .count(),
                    last_error,
                    unconfined: upstream.config.unconfined(),
                    restarts: upstream.restarts(),
                    server: upstream
                        .server_info
                        .as_ref()
                        .map(|i| format!("{} {}", i.name, i.version)),
                    pid: upstream.pid(),
                    tools_changed: upstream.list_changed(),
                }
            })
            .collect()
    }
}

fn mcp_origin(server: &str) -> toolgate_core::ToolOrigin {
    toolgate_core::ToolOrigin::Mcp {
        server: server.to_owned(),
    }
}

//! Configuration: `toolgate.toml` in the project over
//! `~/.config/toolgate/config.toml`, environment variables over both,
//! command-line flags over everything.
//!
//! Top-level keys of the project file win over the user file's; a section
//! (`[access]`, `[paths]`, ...) of the project file replaces the user file's
//! section whole, so a layer is always what one file says. `[[rules]]` are
//! concatenated, user rules first, so project rules win (last match wins).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toolgate_core::{EffectClass, InputMode, ToolPreset};
use toolgate_mcp::gateway::ServerConfig;
use toolgate_policy::command::ParseFallback;
use toolgate_policy::{PermissionRule, Policy, PolicyPreset, ResourcePolicy};
use toolgate_sandbox::egress::{EgressMode, NetworkPolicy};
use toolgate_sandbox::{BackendChoice, FilesystemRules, RootMap};

/// The project file's name.
pub const PROJECT_FILE: &str = toolgate_sandbox::CONFIG_FILE_NAME;

pub mod approvals;
pub mod catalog;
mod environment;
mod layers;
pub mod limits;
pub mod mcp_servers;
mod project;
pub mod trust;
mod untrusted;

use approvals::{ApprovalDefaults, ApprovalsSection, IdentitySection, StoreSection, StoreUrl};
use catalog::{CatalogDefaults, CatalogSection};
pub use environment::Environment;
use layers::{build_policy, filesystem_rules, resolve_roots};
use limits::LimitsSection;
use project::{Untrusted, own_files, project_trust};
pub use project::{
    discovered_project_file, protect_store_files, revoke_trust, store_files, trust_project_file,
    trusted_files,
};
use trust::TrustStatus;

/// One configuration file as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// Tool preset: coding, readonly, minimal, admin.
    pub preset: Option<ToolPreset>,
    /// Policy preset: permissive, standard, strict, readonly.
    pub policy: Option<PolicyPreset>,
    /// Refuse every input coercion.
    pub strict_tool_input: Option<bool>,
    /// Workspace roots as portable hints: an alias of `[root_aliases]`, or a
    /// path relative to this file's directory that stays inside it.
    pub roots: Option<Vec<String>>,
    /// The operator's root map: `name = "/absolute/path"`.
    pub root_aliases: Option<BTreeMap<String, PathBuf>>,
    /// Where uncut output of truncated results is kept.
    pub output_dir: Option<PathBuf>,
    /// The access layer, whole.
    pub access: Option<AccessSection>,
    /// Additions to (or, with `defaults = false`, a replacement of) the path layer.
    pub paths: Option<PathsSection>,
    /// Additions to (or a replacement of) the command layer.
    pub commands: Option<CommandsSection>,
    /// Output caps.
    pub resources: Option<ResourcePolicy>,
    /// Permission rules, appended to the defaults.
    #[serde(default)]
    pub rules: Vec<PermissionRule>,
    /// The sandbox.
    pub sandbox: Option<SandboxSection>,
    /// Resource limits of every sandboxed command.
    pub limits: Option<LimitsSection>,
    /// Optional tools.
    pub tools: Option<ToolsSection>,
    /// Network of sandboxed commands: none, proxy (an allowlist) or host.
    pub network: Option<NetworkPolicy>,
    /// `toolgate serve`.
    pub serve: Option<ServeSection>,
    /// Where approvals, grants and the audit log live.
    pub store: Option<StoreSection>,
    /// How calls wait for a person, and what a yes or a no is worth.
    pub approvals: Option<ApprovalsSection>,
    /// Who the agent is.
    pub identity: Option<IdentitySection>,
    /// External MCP servers whose tools toolgate governs.
    pub mcp_servers: Option<Vec<ServerConfig>>,
    /// Above this many external tools they are found with `mcp_find_tools`
    /// instead of listed (0: always).
    pub mcp_defer_threshold: Option<usize>,
    /// The catalogue's gates and minimum release age.
    pub catalog: Option<CatalogSection>,
}

/// `[serve]`: MCP over Streamable HTTP.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeSection {
    /// Port on the loopback address (default 8765).
    pub port: Option<u16>,
    /// The bearer token; `TOOLGATE_TOKEN` wins over it. Without either, a
    /// token is generated on first start and kept in the data directory.
    pub token: Option<String>,
    /// More names accepted in the `Host` header (a reverse proxy's name).
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// Let `--host` name a non-loopback address (`--allow-remote`): the
    /// token then crosses the network, in clear without TLS in front.
    #[serde(default)]
    pub allow_remote: bool,
}

/// `[tools]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsSection {
    /// Register `elevated`, which runs commands on the host outside the
    /// sandbox. Off by default: destructive tools are off unless the operator
    /// turns them on.
    #[serde(default)]
    pub elevated: bool,
    /// Host variables a command may ask for by name (`pass_env` of bash);
    /// none by default.
    #[serde(default)]
    pub pass_env: Vec<String>,
    /// Longest timeout, in seconds, a bash call may ask for (default 600).
    pub max_timeout: Option<u64>,
    /// Background processes one agent may run at once (default 8).
    pub max_processes: Option<usize>,
}

/// `[sandbox]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxSection {
    /// auto, bwrap, landlock or none (development only).
    #[serde(default)]
    pub backend: BackendChoice,
    /// Refuse to start instead of falling back to a weaker backend than
    /// bubblewrap (landlock, none).
    #[serde(default)]
    pub require_bwrap: bool,
}

/// `[access]`: replaces the access layer. Without `cap` there is no cap.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessSection {
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    deny: Vec<String>,
    cap: Option<EffectClass>,
}

/// `[paths]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathsSection {
    /// Keep the built-in entries (deny /proc, credential stores, ...).
    #[serde(default = "yes")]
    defaults: bool,
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    deny: Vec<String>,
    #[serde(default = "yes")]
    workspace_roots: bool,
    /// Allow the whole temp dir too (off: the file tools reach only the roots).
    #[serde(default)]
    temp_dir: bool,
}

/// `[commands]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandsSection {
    /// Keep the built-in denies (shutdown, mkfs*, fork bombs, dd to a disk).
    #[serde(default = "yes")]
    defaults: bool,
    /// Denied binaries (globs over the base name).
    #[serde(default)]
    deny: Vec<String>,
    /// Denied regexes over each single command.
    #[serde(default)]
    deny_patterns: Vec<String>,
    /// `deny` or `sandbox` for scripts that cannot be analysed.
    on_parse_error: Option<ParseFallback>,
}

fn yes() -> bool {
    true
}

impl PathsSection {
    /// The section as if absent: the built-in entries and the roots.
    fn standard() -> Self {
        PathsSection {
            defaults: true,
            allow: Vec::new(),
            deny: Vec::new(),
            workspace_roots: true,
            temp_dir: false,
        }
    }
}

impl CommandsSection {
    /// The section as if absent: the built-in denies.
    fn standard() -> Self {
        CommandsSection {
            defaults: true,
            deny: Vec::new(),
            deny_patterns: Vec::new(),
            on_parse_error: None,
        }
    }
}

/// Where each file came from, for messages.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    /// Files read, in order of increasing precedence.
    pub files: Vec<PathBuf>,
}

/// Everything the commands need, resolved.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Tool preset, if any.
    pub preset: Option<ToolPreset>,
    /// Policy preset used as the base.
    pub policy_preset: PolicyPreset,
    /// The policy with every layer.
    pub policy: Policy,
    /// Coerce or strict.
    pub input_mode: InputMode,
    /// Workspace roots.
    pub roots: Vec<PathBuf>,
    /// The operator's root aliases (`[root_aliases]`, `--root-alias`).
    pub root_aliases: RootMap,
    /// Output dir for uncut results.
    pub output_dir: Option<PathBuf>,
    /// Files that were read.
    pub sources: Sources,
    /// Which sandbox backend to use.
    pub backend: BackendChoice,
    /// `[sandbox] require_bwrap`: refuse any backend weaker than bubblewrap.
    pub require_bwrap: bool,
    /// `[limits]` over the defaults: what every sandboxed command may take.
    pub limits: toolgate_sandbox::runner::ResourceLimits,
    /// Whether `elevated` is registered (`[tools] elevated`, TOOLGATE_ELEVATED).
    pub elevated: bool,
    /// The rest of `[tools]`.
    pub tools: ToolsSection,
    /// What sandboxed commands may reach (`[network]`).
    pub network: EgressMode,
    /// Extra filesystem rules for commands (a sandbox-runtime settings file).
    pub filesystem: FilesystemRules,
    /// The sandbox-runtime settings file they came from.
    pub filesystem_source: Option<PathBuf>,
    /// `[serve]`.
    pub serve: ServeSection,
    /// The store (`TOOLGATE_STORE_URL`, `[store] url`, else SQLite in the data dir).
    pub store: StoreUrl,
    /// `[approvals]` over the defaults.
    pub approvals: ApprovalDefaults,
    /// `[catalog]` over the defaults.
    pub catalog: CatalogDefaults,
    /// The agent's name (`--agent`, `[identity] agent`); without it, the MCP
    /// client's name, else the surface's caller name.
    pub agent: Option<String>,
    /// Only these tools are active (`toolgate mcp --tools`).
    pub only_tools: Option<Vec<String>>,
    /// External MCP servers (`[[mcp_servers]]`, `TOOLGATE_MCP_SERVERS`).
    pub mcp_servers: Vec<ServerConfig>,
    /// `mcp_defer_threshold` (default 10; 0: always defer).
    pub mcp_defer_threshold: usize,
    /// What of the configuration is not applied, one line each.
    pub notes: Vec<String>,
    /// What the user must hear at every start: settings of an untrusted
    /// project file that were ignored, one paragraph each.
    pub warnings: Vec<String>,
    /// An untrusted project file's `[access] allow`: only these tools (or
    /// groups), on top of everything else.
    pub narrow_to: Option<Vec<String>>,
    /// toolgate's own files: the configuration it read or would read (every
    /// `toolgate.toml` from the working directory up), the sandbox-runtime
    /// settings file, the data directory (trust records, the serve token).
    /// Protected from the agent wherever they lie inside a root.
    pub own_files: Vec<PathBuf>,
    /// A long-lived server (`mcp`, `serve`): a command's placeholders are
    /// removed after its answer went out (see `SandboxConfig::linger`).
    pub serving: bool,
}

/// What the command line said that overrides files and environment.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `--config FILE`: used instead of the project file.
    pub config: Option<PathBuf>,
    /// `--preset`.
    pub preset: Option<ToolPreset>,
    /// `--policy`.
    pub policy: Option<PolicyPreset>,
    /// `--root`, repeatable: hints resolved against the working directory.
    pub roots: Vec<String>,
    /// `--root-alias name=/path`, repeatable.
    pub root_aliases: Vec<String>,
    /// `--agent NAME`.
    pub agent: Option<String>,
}

/// A configuration problem, with where it is and what is expected.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A file is not valid configuration.
    #[error("{}:{line}:{column}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong and what is expected.
        message: String,
    },
    /// An environment variable has a bad value.
    #[error("environment variable {name}={value:?}: {message}")]
    Env {
        /// The variable.
        name: &'static str,
        /// Its value.
        value: String,
        /// What is expected.
        message: String,
    },
    /// A command-line flag has a bad value.
    #[error("{flag}: {message}")]
    Flag {
        /// The flag.
        flag: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The policy layers cannot be built.
    #[error("{}: {message}", origin.display())]
    Policy {
        /// The file, or `<defaults>`.
        origin: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// Reads and parses one file.
pub fn read_file(path: &Path) -> Result<ConfigFile, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse(&text, path)
}

fn parse(text: &str, path: &Path) -> Result<ConfigFile, ConfigError> {
    toml::from_str(text).map_err(|e| {
        let offset = e.span().map(|s| s.start).unwrap_or(0).min(text.len());
        let before = &text[..offset];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        ConfigError::Parse {
            path: path.to_owned(),
            line,
            column,
            message: e.message().trim().to_owned(),
        }
    })
}

/// Loads the user file, the project file (or `--config`), the environment
/// and the overrides, in that order of precedence. A project file found by
/// the discovery only tightens the user's configuration unless the user
/// trusted it as it is (`toolgate trust`); a file named with `--config` is
/// the user's own choice.
pub fn load(env: &Environment, overrides: &Overrides) -> Result<Settings, ConfigError> {
    let mut sources = Sources::default();
    let mut layers: Vec<(ConfigFile, PathBuf)> = Vec::new();
    if let Some(path) = env.user_config().filter(|p| p.is_file()) {
        let file = read_file(&path)?;
        mcp_servers::check_secret_mode(file.mcp_servers.as_deref().unwrap_or_default(), &path)?;
        let file = absolute_store(file, &path);
        sources.files.push(path.clone());
        layers.push((file, path));
    }
    let project = match &overrides.config {
        Some(path) => Some((env.cwd.join(path), true)),
        None => env.project_config().map(|path| (path, false)),
    };
    let mut untrusted = None;
    if let Some((path, chosen)) = project {
        // Parsed and digested from the same bytes: what is trusted is
        // exactly what is applied.
        let bytes = std::fs::read(&path).map_err(|source| ConfigError::Read {
            path: path.clone(),
            source,
        })?;
        let text = String::from_utf8_lossy(&bytes);
        let mut file = parse(&text, &path)?;
        mcp_servers::check_secret_mode(file.mcp_servers.as_deref().unwrap_or_default(), &path)?;
        if !chosen {
            let status = project_trust(env, &path, &bytes, &file);
            if status != Ok(TrustStatus::Trusted) {
                let base = layers.first().map(|(f, _)| f.clone()).unwrap_or_default();
                let restricted = untrusted::restrict(file, &base);
                file = restricted.file;
                untrusted = Some(Untrusted {
                    path: path.clone(),
                    status,
                    ignored: restricted.ignored,
                    narrow_to: restricted.narrow_to,
                });
            }
        }
        let file = absolute_store(file, &path);
        sources.files.push(path.clone());
        layers.push((file, path));
    }
    let merged = merge(layers);
    let mut settings = resolve(merged, env, overrides, sources, untrusted.as_mut())?;
    if let Some(untrusted) = untrusted {
        settings.narrow_to = untrusted.narrow_to.clone();
        if !untrusted.ignored.is_empty() {
            settings.warnings.push(untrusted.warning());
        }
    }
    settings.own_files = own_files(env, &settings);
    Ok(settings)
}

/// `[store] url = "sqlite:RELATIVE"` is relative to the file that says it,
/// whichever file's directory the merge takes other paths from.
fn absolute_store(mut file: ConfigFile, path: &Path) -> ConfigFile {
    let base = path.parent().unwrap_or(Path::new("/"));
    if let Some(url) = file.store.as_mut().and_then(|s| s.url.as_mut())
        && let Ok(StoreUrl::Sqlite(db)) = StoreUrl::parse(url, base)
    {
        *url = format!("sqlite:{}", db.display());
    }
    file
}

/// A merged file and the directory relative paths are taken from.
struct Merged {
    file: ConfigFile,
    base_dir: PathBuf,
    origin: PathBuf,
}

fn merge(layers: Vec<(ConfigFile, PathBuf)>) -> Option<Merged> {
    let mut merged: Option<Merged> = None;
    for (file, path) in layers {
        let base_dir = path.parent().map(Path::to_owned).unwrap_or_default();
        merged = Some(match merged {
            None => Merged {
                file,
                base_dir,
                origin: path,
            },
            Some(lower) => {
                let low = lower.file;
                let mut rules = low.rules;
                rules.extend(file.rules);
                // Servers add up, the user's first; a name used twice is
                // refused when they are checked.
                let mcp_servers = match (low.mcp_servers, file.mcp_servers) {
                    (Some(mut low), Some(high)) => {
                        low.extend(high);
                        Some(low)
                    }
                    (low, high) => high.or(low),
                };
                Merged {
                    file: ConfigFile {
                        preset: file.preset.or(low.preset),
                        policy: file.policy.or(low.policy),
                        strict_tool_input: file.strict_tool_input.or(low.strict_tool_input),
                        roots: file.roots.or(low.roots),
                        root_aliases: file.root_aliases.or(low.root_aliases),
                        output_dir: file.output_dir.or(low.output_dir),
                        access: file.access.or(low.access),
                        paths: file.paths.or(low.paths),
                        commands: file.commands.or(low.commands),
                        resources: file.resources.or(low.resources),
                        rules,
                        sandbox: file.sandbox.or(low.sandbox),
                        limits: file.limits.or(low.limits),
                        tools: file.tools.or(low.tools),
                        network: file.network.or(low.network),
                        serve: file.serve.or(low.serve),
                        store: file.store.or(low.store),
                        approvals: file.approvals.or(low.approvals),
                        identity: file.identity.or(low.identity),
                        mcp_servers,
                        mcp_defer_threshold: file.mcp_defer_threshold.or(low.mcp_defer_threshold),
                        catalog: file.catalog.or(low.catalog),
                    },
                    base_dir,
                    origin: path,
                }
            }
        });
    }
    merged
}

fn env_parsed<T>(
    env: &Environment,
    name: &'static str,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<Option<T>, ConfigError> {
    env.var(name)
        .map(|value| {
            parse(value).map_err(|message| ConfigError::Env {
                name,
                value: value.to_owned(),
                message,
            })
        })
        .transpose()
}

fn parse_word<T: std::str::FromStr<Err = toolgate_core::ParseEnumError>>(
    value: &str,
) -> Result<T, String> {
    value
        .parse()
        .map_err(|e: toolgate_core::ParseEnumError| e.to_string())
}

fn parse_bool(value: &str) -> Result<bool, String> {
    match value {
        "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err("expected true or false".to_owned()),
    }
}

fn resolve(
    merged: Option<Merged>,
    env: &Environment,
    overrides: &Overrides,
    sources: Sources,
    untrusted: Option<&mut Untrusted>,
) -> Result<Settings, ConfigError> {
    let (file, base_dir, origin) = match merged {
        Some(m) => (m.file, m.base_dir, m.origin),
        None => (
            ConfigFile::default(),
            env.cwd.clone(),
            PathBuf::from("<defaults>"),
        ),
    };
    let preset = overrides
        .preset
        .or(env_parsed(env, "TOOLGATE_PRESET", parse_word)?)
        .or(file.preset);
    let policy_preset = overrides
        .policy
        .or(env_parsed(env, "TOOLGATE_POLICY", parse_word)?)
        .or(file.policy)
        .unwrap_or(PolicyPreset::Standard);
    let strict = env_parsed(env, "TOOLGATE_STRICT_TOOL_INPUT", parse_bool)?
        .or(file.strict_tool_input)
        .unwrap_or(false);
    let elevated = env_parsed(env, "TOOLGATE_ELEVATED", parse_bool)?
        .or(file.tools.as_ref().map(|t| t.elevated))
        .unwrap_or(false);
    let (mut roots, root_aliases) = resolve_roots(&file, overrides, env, &base_dir, &origin)?;
    // An untrusted file's roots stay within the working directory, the
    // root the user gets without it.
    if let Some(untrusted) = untrusted
        && overrides.roots.is_empty()
        && file.roots.is_some()
    {
        let cwd = std::fs::canonicalize(&env.cwd).unwrap_or_else(|_| env.cwd.clone());
        if !roots.iter().all(|root| root.starts_with(&cwd)) {
            untrusted.ignored.push(format!(
                "roots (they reach outside the working directory {})",
                cwd.display()
            ));
            roots = vec![cwd];
        }
    }
    let network = match &file.network {
        Some(network) => network.build(&base_dir).map_err(|e| ConfigError::Policy {
            origin: origin.clone(),
            message: e.to_string(),
        })?,
        None => EgressMode::None,
    };
    let settings_file = match &file.network {
        Some(network) => network
            .load_settings(&base_dir)
            .map_err(|e| ConfigError::Policy {
                origin: origin.clone(),
                message: e.to_string(),
            })?,
        None => None,
    };
    let (filesystem, notes) = match &settings_file {
        Some(settings) => filesystem_rules(settings, &base_dir, env.home().as_deref()),
        None => (FilesystemRules::default(), Vec::new()),
    };
    // What commands may not read, no tool may read or write either.
    let mut file = file;
    if !filesystem.read_deny.is_empty() {
        let paths = file.paths.get_or_insert_with(PathsSection::standard);
        for path in &filesystem.read_deny {
            let path = path.display().to_string();
            paths.deny.push(format!("{path}/**"));
            paths.deny.push(path);
        }
    }
    let store = match env.var("TOOLGATE_STORE_URL") {
        Some(url) => StoreUrl::parse(url, &env.cwd).map_err(|message| ConfigError::Env {
            name: "TOOLGATE_STORE_URL",
            value: approvals::shown_url(url),
            message,
        })?,
        None => match file.store.as_ref().and_then(|s| s.url.as_deref()) {
            Some(url) => {
                StoreUrl::parse(url, &base_dir).map_err(|message| ConfigError::Policy {
                    origin: origin.clone(),
                    message: format!("[store] url: {message}"),
                })?
            }
            None => StoreUrl::Sqlite(env.data_dir().join("toolgate.db")),
        },
    };
    let agent = match &overrides.agent {
        Some(agent) => {
            approvals::check_agent(agent).map_err(|message| ConfigError::Flag {
                flag: "--agent",
                message,
            })?;
            Some(agent.clone())
        }
        None => file.identity.as_ref().and_then(|i| i.agent.clone()),
    };
    let policy = build_policy(&file, policy_preset, env.home().as_deref()).map_err(|message| {
        ConfigError::Policy {
            origin: origin.clone(),
            message,
        }
    })?;
    let mcp_servers =
        mcp_servers::resolve(file.mcp_servers.clone().unwrap_or_default(), env, &origin)?;
    Ok(Settings {
        mcp_servers,
        mcp_defer_threshold: env_parsed(env, "TOOLGATE_MCP_DEFER_THRESHOLD", |v| {
            v.parse::<usize>()
                .map_err(|_| "expected a whole number of tools (0: always defer)".to_owned())
        })?
        .or(file.mcp_defer_threshold)
        .unwrap_or(mcp_servers::DEFAULT_DEFER_THRESHOLD),
        preset,
        policy_preset,
        policy,
        input_mode: if strict {
            InputMode::Strict
        } else {
            InputMode::Coerce
        },
        roots,
        root_aliases,
        output_dir: file.output_dir.as_ref().map(|d| base_dir.join(d)),
        sources,
        backend: env_parsed(env, "TOOLGATE_SANDBOX_BACKEND", parse_word)?
            .or(file.sandbox.as_ref().map(|s| s.backend))
            .unwrap_or_default(),
        require_bwrap: file.sandbox.as_ref().is_some_and(|s| s.require_bwrap),
        limits: file.limits.as_ref().map_or_else(
            toolgate_sandbox::runner::ResourceLimits::recommended,
            LimitsSection::resolve,
        ),
        elevated,
        tools: file.tools.clone().unwrap_or_default(),
        network,
        filesystem,
        serve: file.serve.clone().unwrap_or_default(),
        store,
        approvals: ApprovalDefaults::from_section(file.approvals.as_ref()),
        catalog: CatalogDefaults::from_section(file.catalog.as_ref()),
        agent,
        only_tools: None,
        notes,
        warnings: Vec::new(),
        narrow_to: None,
        own_files: Vec::new(),
        serving: false,
        filesystem_source: settings_file.as_ref().map(|settings| settings.path.clone()),
    })
}

#[cfg(test)]
mod tests;

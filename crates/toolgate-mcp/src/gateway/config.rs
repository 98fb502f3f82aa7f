//! How an operator describes an external MCP server: `[[mcp_servers]]` in
//! toolgate.toml, or `TOOLGATE_MCP_SERVERS` (a JSON array of the same
//! objects).
//!
//! Secrets (a static token, header values, a client secret, environment
//! values) are [`Secret`]s: their `Debug` and `Serialize` say `<redacted>`,
//! so no log line, event, audit record, error or listing can carry one by
//! accident.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize, Serializer};
use toolgate_core::{EffectClass, Idempotency};

/// A value that must never be shown: read with [`Secret::expose`].
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// A secret holding `value`.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The value, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str("<redacted>")
    }
}

/// One external MCP server.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(try_from = "RawServer")]
pub struct ServerConfig {
    /// `[a-zA-Z0-9_-]{1,32}`: the prefix of its tools' names
    /// (`mcp__<name>__<tool>`).
    pub name: String,
    /// How to reach it.
    #[serde(flatten)]
    pub transport: Transport,
    /// Per-tool overrides by the server's own tool name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tools: BTreeMap<String, ToolOverride>,
    /// How long connecting (spawn or HTTP handshake, initialize, tools/list)
    /// may take, in seconds (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_timeout: Option<u64>,
    /// How long one call may take, in seconds (default 120).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_timeout: Option<u64>,
}

impl ServerConfig {
    /// A server reached over stdio by running `command`.
    pub fn stdio(name: impl Into<String>, command: impl Into<String>, args: Vec<String>) -> Self {
        ServerConfig {
            name: name.into(),
            transport: Transport::Stdio(StdioServer {
                command: command.into(),
                args,
                env: BTreeMap::new(),
                cwd: None,
                sandbox: None,
            }),
            tools: BTreeMap::new(),
            connect_timeout: None,
            call_timeout: None,
        }
    }

    /// The connect timeout.
    pub fn connect_timeout(&self) -> Duration {
        Duration::from_secs(self.connect_timeout.unwrap_or(10))
    }

    /// The per-call timeout.
    pub fn call_timeout(&self) -> Duration {
        Duration::from_secs(self.call_timeout.unwrap_or(120))
    }

    /// Whether this configuration carries a secret (which makes the file
    /// holding it subject to the 0600 rule).
    pub fn has_secret(&self) -> bool {
        match &self.transport {
            Transport::Stdio(s) => !s.env.is_empty(),
            Transport::Http(h) => h.token.is_some() || !h.headers.is_empty() || h.auth.is_some(),
        }
    }

    /// `stdio` or `http`.
    pub fn kind(&self) -> &'static str {
        match self.transport {
            Transport::Stdio(_) => "stdio",
            Transport::Http(_) => "http",
        }
    }

    /// Whether the server runs outside toolgate's sandbox: every stdio
    /// server without `sandbox` (an HTTP server runs elsewhere).
    pub fn unconfined(&self) -> bool {
        matches!(&self.transport, Transport::Stdio(s) if s.sandbox.is_none())
    }
}

/// The transport, by `kind`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Transport {
    /// A child process speaking MCP on stdin/stdout.
    Stdio(StdioServer),
    /// Streamable HTTP.
    Http(HttpServer),
}

/// `kind = "stdio"`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StdioServer {
    /// The program.
    pub command: String,
    /// Its arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Extra environment variables (values are secrets).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, Secret>,
    /// Working directory (default: toolgate's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// Run the server inside toolgate's sandbox; absent: unconfined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<ServerSandbox>,
}

/// How a server is written: one flat object whose `kind` says which of
/// the other keys belong (serde cannot combine an internally tagged enum
/// with `deny_unknown_fields`, and a typo must be an error).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServer {
    name: String,
    kind: RawKind,
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, Secret>,
    cwd: Option<PathBuf>,
    sandbox: Option<ServerSandbox>,
    url: Option<String>,
    token: Option<Secret>,
    #[serde(default)]
    headers: BTreeMap<String, Secret>,
    auth: Option<HttpAuth>,
    #[serde(default)]
    tools: BTreeMap<String, ToolOverride>,
    connect_timeout: Option<u64>,
    call_timeout: Option<u64>,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "kebab-case")]
enum RawKind {
    Stdio,
    Http,
}

impl TryFrom<RawServer> for ServerConfig {
    type Error = String;

    fn try_from(raw: RawServer) -> Result<Self, String> {
        let name = raw.name;
        // A key of the other kind is a mistake, not something to ignore:
        // a `url` on a stdio server would otherwise vanish silently.
        let misplaced = |key: &str, kind: &str| {
            Err(format!(
                "MCP server `{name}`: `{key}` belongs to kind = \"{kind}\" servers"
            ))
        };
        let transport = match raw.kind {
            RawKind::Stdio => {
                for (key, set) in [
                    ("url", raw.url.is_some()),
                    ("token", raw.token.is_some()),
                    ("headers", !raw.headers.is_empty()),
                    ("auth", raw.auth.is_some()),
                ] {
                    if set {
                        return misplaced(key, "http");
                    }
                }
                let Some(command) = raw.command else {
                    return Err(format!(
                        "MCP server `{name}`: kind = \"stdio\" needs `command` (the program to run)"
                    ));
                };
                Transport::Stdio(StdioServer {
                    command,
                    args: raw.args,
                    env: raw.env,
                    cwd: raw.cwd,
                    sandbox: raw.sandbox,
                })
            }
            RawKind::Http => {
                for (key, set) in [
                    ("command", raw.command.is_some()),
                    ("args", !raw.args.is_empty()),
                    ("env", !raw.env.is_empty()),
                    ("cwd", raw.cwd.is_some()),
                    ("sandbox", raw.sandbox.is_some()),
                ] {
                    if set {
                        return misplaced(key, "stdio");
                    }
                }
                let Some(url) = raw.url else {
                    return Err(format!(
                        "MCP server `{name}`: kind = \"http\" needs `url` (its Streamable HTTP endpoint)"
                    ));
                };
                Transport::Http(HttpServer {
                    url,
                    token: raw.token,
                    headers: raw.headers,
                    auth: raw.auth,
                })
            }
        };
        Ok(ServerConfig {
            name,
            transport,
            tools: raw.tools,
            connect_timeout: raw.connect_timeout,
            call_timeout: raw.call_timeout,
        })
    }
}

/// `sandbox = { roots = [...], network = { allow = [...] } }`.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSandbox {
    /// Directories the server may read and write (absolute).
    #[serde(default)]
    pub roots: Vec<PathBuf>,
    /// Directories or files it may read but not change, such as its own
    /// installation outside the system directories (absolute).
    #[serde(default)]
    pub read_only: Vec<PathBuf>,
    /// Hosts it may reach through the egress proxy; absent: no network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<ServerNetwork>,
}

/// The hosts a sandboxed server may reach.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ServerNetwork {
    /// Domain patterns (`api.example.com`, `*.example.com`).
    #[serde(default)]
    pub allow: Vec<String>,
}

/// `kind = "http"`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HttpServer {
    /// The Streamable HTTP endpoint.
    pub url: String,
    /// A static bearer token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<Secret>,
    /// Fixed headers sent on every request (values are secrets).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, Secret>,
    /// Tokens fetched from an authorization server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<HttpAuth>,
}

/// `auth = { kind = "oauth-client-credentials", ... }`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum HttpAuth {
    /// OAuth 2.1 client credentials grant.
    OauthClientCredentials(ClientCredentials),
}

/// The client credentials grant's parameters.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClientCredentials {
    /// The token endpoint; absent: discovered from the server's protected
    /// resource metadata (RFC 9728) and its authorization server's metadata
    /// (RFC 8414).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_url: Option<String>,
    /// The client id.
    pub client_id: String,
    /// The client secret (sent with HTTP Basic, `client_secret_basic`).
    pub client_secret: Secret,
    /// Scopes asked for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// The RFC 8707 resource indicator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
}

/// What the operator says of one tool, overriding the defaults (nothing a
/// server declares is trusted for policy).
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ToolOverride {
    /// The effect class to use instead of mutate-irreversible.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect_class: Option<EffectClass>,
    /// The idempotency to use (required above read when the class is set;
    /// default at-most-once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency: Option<Idempotency>,
}

/// Why a configuration is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The name is not `[a-zA-Z0-9_-]{1,32}`.
    #[error(
        "MCP server name `{0}` is invalid: use 1 to 32 characters from A-Z, a-z, 0-9, `_` and `-` (it becomes the prefix mcp__{0}__ of its tools)"
    )]
    InvalidName(String),
    /// Two servers share a name.
    #[error("MCP server `{0}` is configured twice; give each server its own name")]
    DuplicateName(String),
    /// Both a static token and an auth flow.
    #[error(
        "MCP server `{0}`: `token` and `auth` are both set; use a static `token` or `auth = {{ kind = \"oauth-client-credentials\", ... }}`, not both"
    )]
    TokenAndAuth(String),
    /// Something else about one server.
    #[error("MCP server `{server}`: {message}")]
    Invalid {
        /// The server.
        server: String,
        /// What is wrong.
        message: String,
    },
}

/// Checks a list of servers: names, duplicates, token/auth, URLs, override
/// classes. The first problem is the error.
pub fn check_servers(servers: &[ServerConfig]) -> Result<(), ConfigError> {
    let mut seen = std::collections::BTreeSet::new();
    for server in servers {
        let name = &server.name;
        let name_ok = (1..=32).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !name_ok {
            return Err(ConfigError::InvalidName(name.clone()));
        }
        if !seen.insert(name.clone()) {
            return Err(ConfigError::DuplicateName(name.clone()));
        }
        let invalid = |message: String| ConfigError::Invalid {
            server: name.clone(),
            message,
        };
        match &server.transport {
            Transport::Http(http) => {
                if http.token.is_some() && http.auth.is_some() {
                    return Err(ConfigError::TokenAndAuth(name.clone()));
                }
                if !(http.url.starts_with("http://") || http.url.starts_with("https://")) {
                    return Err(invalid(format!(
                        "url `{}` is not an http:// or https:// URL",
                        http.url
                    )));
                }
            }
            Transport::Stdio(stdio) => {
                if stdio.command.trim().is_empty() {
                    return Err(invalid("`command` is empty".to_owned()));
                }
                if let Some(sandbox) = &stdio.sandbox
                    && let Some(path) = sandbox
                        .roots
                        .iter()
                        .chain(&sandbox.read_only)
                        .find(|r| !r.is_absolute())
                {
                    return Err(invalid(format!(
                        "sandbox path `{}` is not an absolute path",
                        path.display()
                    )));
                }
            }
        }
        for (tool, over) in &server.tools {
            if let (Some(EffectClass::Read), Some(_)) = (over.effect_class, over.idempotency) {
                return Err(invalid(format!(
                    "tool `{tool}`: a read tool has no idempotency; remove `idempotency`"
                )));
            }
        }
    }
    Ok(())
}

//! What a sandboxed command may see and do.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Network access of one sandboxed command. Chosen by policy, never by the
/// agent's arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum NetworkMode {
    /// No network at all: an empty network namespace (bwrap) or no sockets
    /// but unix ones (landlock backend).
    #[default]
    None,
    /// Only through toolgate's egress proxy, which applies the allowlist
    /// given to [`SandboxConfig::egress`](crate::SandboxConfig::egress): an
    /// empty network namespace whose loopback ports 3128 (HTTP) and 1080
    /// (SOCKS5) lead to the proxy and nowhere else.
    Proxy,
    /// The host's network.
    Host,
}

toolgate_core::wire_enum!(NetworkMode, "network mode", {
    None => "none",
    Proxy => "proxy",
    Host => "host",
});

/// The name of toolgate's project configuration file.
pub const CONFIG_FILE_NAME: &str = "toolgate.toml";

/// Paths inside every writable root that a sandboxed command may never
/// write or create: each one is a way to run code on the host later.
///
/// `true` marks directories (masked with an empty read-only directory when
/// absent), `false` files.
pub const MANDATORY_WRITE_DENY: &[(&str, bool)] = &[
    // git runs hooks and honours config (core.fsmonitor, core.hooksPath,
    // aliases) the next time anyone uses the repository on the host.
    (".git/hooks", true),
    (".git/config", false),
    (".git/config.worktree", false),
    // Linked worktrees' git dirs: their commondir and config steer git there.
    (".git/worktrees", true),
    // With a valid HEAD next to `objects/` and `refs/`, git on the host
    // would take the root itself for a bare repository and obey a `config`
    // the command wrote there.
    ("HEAD", false),
    // Submodules' git dirs, each with its own config and hooks.
    (".git/modules", true),
    (".gitmodules", false),
    // Shell start-up files run in the user's next shell should this root
    // ever be a HOME (roots that contain the current HOME are refused; the
    // full set of HOME dotfiles is not listed here).
    (".bashrc", false),
    (".bash_profile", false),
    (".zshrc", false),
    (".zprofile", false),
    (".profile", false),
    // direnv runs it on `cd`.
    (".envrc", false),
    // toolgate's own project configuration: a command that wrote
    // `backend = "none"` there would run unsandboxed next time. (Deeper
    // copies on the way to the working directory are masked per run.)
    (CONFIG_FILE_NAME, false),
    // Editor and agent configuration can start programs (tasks, MCP servers, hooks).
    (".mcp.json", false),
    (".vscode", true),
    (".idea", true),
    (".claude", true),
    (".cursor", true),
];

/// Protected names that cannot be masked while absent, because git treats
/// any file there (even an empty one) as meaningful: they are checked after
/// every run instead, and one the command created is removed.
pub const AUDITED_AFTER_RUN: &[&str] = &[
    // Points git at another directory's config and hooks.
    ".git/commondir",
];

/// Files on the host a sandboxed command must not read even though the
/// directory holding them is visible: as uid 0 (CI, containers) the owner
/// bits would let it.
pub const SYSTEM_READ_DENY: &[&str] = &[
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssh/ssh_host_rsa_key",
    "/etc/ssh/ssh_host_ecdsa_key",
    "/etc/ssh/ssh_host_ed25519_key",
    "/etc/ssh/ssh_host_dsa_key",
];

/// Everything that shapes one sandbox.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SandboxSpec {
    /// Bound read-write; the only places a command can change.
    pub writable_roots: Vec<PathBuf>,
    /// Extra paths bound read-only.
    pub read_only_paths: Vec<PathBuf>,
    /// Hidden: an empty directory over a directory, /dev/null over a file.
    pub read_deny: Vec<PathBuf>,
    /// Read-only even inside a writable root (besides the mandatory ones).
    pub write_deny: Vec<PathBuf>,
    /// Network access.
    pub network: NetworkMode,
    /// Whether the command may create unix sockets.
    pub allow_unix_sockets: bool,
    /// Working directory of the command (inside a root).
    pub cwd: PathBuf,
}

impl SandboxSpec {
    /// A spec with one writable root that is also the working directory.
    pub fn for_root(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        SandboxSpec {
            cwd: root.clone(),
            writable_roots: vec![root],
            ..SandboxSpec::default()
        }
    }

    /// Sets the network mode.
    pub fn network(mut self, network: NetworkMode) -> Self {
        self.network = network;
        self
    }

    /// Allows or forbids unix sockets.
    pub fn allow_unix_sockets(mut self, allow: bool) -> Self {
        self.allow_unix_sockets = allow;
        self
    }

    /// Adds a writable root.
    pub fn writable_root(mut self, root: impl Into<PathBuf>) -> Self {
        self.writable_roots.push(root.into());
        self
    }

    /// Adds a read-deny path.
    pub fn read_deny(mut self, path: impl Into<PathBuf>) -> Self {
        self.read_deny.push(path.into());
        self
    }

    /// Adds a write-deny path.
    pub fn write_deny(mut self, path: impl Into<PathBuf>) -> Self {
        self.write_deny.push(path.into());
        self
    }

    /// Sets the working directory.
    pub fn cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.cwd = cwd.into();
        self
    }
}

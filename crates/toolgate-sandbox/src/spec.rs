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

/// What the sandbox does about a protected name that does not exist when a
/// command starts.
///
/// A mask needs a mount point, and a mount point is a real entry on the
/// host: blocking an absent name means toolgate creates a placeholder there
/// for the length of the run (see [`ProtectedName`]). Names whose creation
/// cannot make anything run are left creatable instead, so the host sees
/// nothing of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WhenAbsent {
    /// Blocked with a placeholder.
    Blocked,
    /// Blocked only in a root without a `.git` of its own (an empty `.git`
    /// directory counts as none): git looks for a bare repository in a
    /// directory only after finding no `.git` there.
    BlockedWithoutGit,
    /// Left creatable: creating it cannot make a program run anything (the
    /// reason is written next to each such name).
    Creatable,
}

/// A name at the top of every writable root that a sandboxed command may
/// not change: each one is a way to run code on the host later.
///
/// Where it exists it is bound read-only onto itself. Where it is absent
/// and [`WhenAbsent::Blocked`], an empty read-only directory is bound there
/// (the placeholder), whatever the name's usual kind: git ignores an empty
/// directory (it never shows in `git status`, `git add -A` adds nothing,
/// an empty `.git` directory is no repository and discovery goes on
/// upwards), where an empty file would be an untracked file, an empty
/// `.git` file would make host git fail ("invalid gitfile format") and an
/// empty `.mcp.json` would be invalid JSON to the client reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProtectedName {
    /// The name, relative to the root.
    pub name: &'static str,
    /// What happens while it is absent.
    pub when_absent: WhenAbsent,
}

const fn blocked(name: &'static str) -> ProtectedName {
    ProtectedName {
        name,
        when_absent: WhenAbsent::Blocked,
    }
}

const fn creatable(name: &'static str) -> ProtectedName {
    ProtectedName {
        name,
        when_absent: WhenAbsent::Creatable,
    }
}

/// The protected names at the top of every writable root, besides the
/// repository protections ([`GIT_DIR_PROTECTED`], applied to the root's own
/// `.git` and to every repository found inside a root). The file tools
/// refuse the same names ([`crate::jail`]).
pub const ROOT_PROTECTED: &[ProtectedName] = &[
    // With a valid HEAD next to `objects/` and `refs/`, git on the host
    // takes the directory itself for a bare repository and obeys a `config`
    // the command wrote there (core.fsmonitor, core.pager, aliases). Only
    // where no `.git` is found first.
    ProtectedName {
        name: "HEAD",
        when_absent: WhenAbsent::BlockedWithoutGit,
    },
    // Creatable: git never runs a command named in `.gitmodules`
    // (`update = !cmd` is refused from there since git 2.24.1,
    // CVE-2019-19604); a new one only lists URLs, which the user sees when
    // running `git submodule update`. An existing one stays read-only.
    creatable(".gitmodules"),
    // Shell start-up files run in the user's next shell should this root be
    // a HOME. Creatable: a root that is or contains the current HOME is
    // refused, so an absent one here is never read by a login shell of this
    // user. Existing ones stay read-only.
    creatable(".bashrc"),
    creatable(".bash_profile"),
    creatable(".zshrc"),
    creatable(".zprofile"),
    creatable(".profile"),
    // Creatable: direnv runs an `.envrc` only after `direnv allow` for that
    // exact content, so a new (or changed) one is blocked until the user
    // reads it. An existing one stays read-only.
    creatable(".envrc"),
    // toolgate's own project configuration. Creatable: an untrusted project
    // file may only tighten the settings (`toolgate trust` records the
    // digest of one the user read), so a new one cannot loosen the next
    // run. An existing one stays read-only (a trusted one changed would
    // merely fall back to untrusted, but the user's file is theirs).
    creatable(CONFIG_FILE_NAME),
    // Editor and agent configuration: each starts programs named in it the
    // next time the user opens the project with that tool.
    // Claude Code: project MCP servers it starts.
    blocked(".mcp.json"),
    // Claude Code: hooks, MCP servers and commands in settings.json.
    blocked(".claude"),
    // Cursor: mcp.json and hooks.json.
    blocked(".cursor"),
    // VS Code: tasks.json (`runOn: folderOpen`), mcp.json, launch configs.
    blocked(".vscode"),
    // JetBrains IDEs: run configurations and startup tasks.
    blocked(".idea"),
    // Dev containers: `initializeCommand` runs on the host when the folder
    // is (re)opened in a container.
    blocked(".devcontainer"),
    blocked(".devcontainer.json"),
    // Gemini CLI: MCP servers, hooks, tool discovery commands in settings.json.
    blocked(".gemini"),
    // Codex CLI: MCP servers in the project's config.toml.
    blocked(".codex"),
    // OpenCode: local MCP servers in opencode.json(c); plugins under
    // .opencode/ run inside it.
    blocked("opencode.json"),
    blocked("opencode.jsonc"),
    blocked(".opencode"),
    // Amazon Q Developer: mcp.json, agent hooks.
    blocked(".amazonq"),
    // Kiro: MCP servers (settings/mcp.json) and agent hooks that run
    // commands on file events.
    blocked(".kiro"),
    // Roo Code: mcp.json.
    blocked(".roo"),
    // Zed: context servers (MCP) and language server binaries in
    // settings.json, tasks.json.
    blocked(".zed"),
    // Continue: MCP servers (mcpServers/*.yaml) and config.
    blocked(".continue"),
    // Windsurf: workspace hooks (shell commands around Cascade's actions).
    blocked(".windsurf"),
    // Cline: hooks are executable scripts under .clinerules/hooks/.
    blocked(".clinerules"),
    // aider: `lint-cmd` / `test-cmd`, run after every edit by default.
    blocked(".aider.conf.yml"),
    // Not listed: AGENTS.md, CLAUDE.md, .cursorrules and other instruction
    // files. They are text an agent reads, not programs anything runs, and
    // agents are asked to edit them; a prompt injection can sit in any file.
];

/// Entries of every git directory inside a root (the root's own `.git`, a
/// nested repository's, a bare repository's, the git dir a `.git` file
/// points to) that a command may not change, with whether each is a
/// directory. Absent ones are blocked with a placeholder of their own kind:
/// inside a git dir nothing shows in the work tree, and git takes an empty
/// `config` or `config.worktree` and an empty `hooks` as absent.
pub const GIT_DIR_PROTECTED: &[(&str, bool)] = &[
    // git runs hooks and honours config (core.fsmonitor, core.hooksPath,
    // aliases, filters) the next time anyone uses the repository on the host.
    ("hooks", true),
    ("config", false),
    ("config.worktree", false),
    // Linked worktrees' git dirs: their commondir and config steer git there.
    ("worktrees", true),
    // Submodules' git dirs, each with its own config and hooks.
    ("modules", true),
];

/// Entries of a git directory that cannot be masked while absent, because
/// git treats any file there (even an empty one, or a directory) as
/// meaningful: they are checked after every run instead, and one the
/// command created is removed. Where one exists it is read-only.
pub const GIT_DIR_AUDITED: &[&str] = &[
    // Points git at another directory's config and hooks.
    "commondir",
];

/// How many directory entries the search for nested repositories reads in
/// one root before it gives up. Past it the run is refused (never run with
/// a repository left unprotected): a tree that large is better split into
/// narrower roots.
pub const NESTED_SCAN_BUDGET: usize = 2_000_000;

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

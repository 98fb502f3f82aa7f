//! An untrusted project file tightens, never loosens.
//!
//! A `toolgate.toml` that arrives with a project (a cloned repository, or a
//! file an agent once wrote) is not the user's word. Until the user trusts
//! it (`toolgate trust`), [`restrict`] keeps of it only what makes toolgate
//! stricter than the user's own configuration (the user file, or the
//! built-in defaults) and names everything else it ignores. A setting is
//! kept when it takes nothing away from the user's configuration:
//!
//! - presets: a tool preset with no tool the user's lacks, a policy preset
//!   at least as strict (permissive < standard < strict < readonly);
//! - lists that deny (`[access] deny`, path and command denies, rules that
//!   deny or ask) are added to the user's; lists that allow (`[access]
//!   allow`) only narrow: they cannot lift the effect-class cap;
//! - limits (caps, timeouts, process counts, `[limits]` of commands) are the lower of
//!   the two, and `[limits] cgroups = false` is never taken;
//! - the sandbox backend at least as strong (none < landlock < auto <
//!   bwrap), `require_bwrap` added, the network no wider (host only where
//!   the user has host, a proxy allowlist within the user's);
//! - never from an untrusted file: `[[mcp_servers]]`, `elevated`, host variables (`pass_env`)
//!   the user does not pass, path allows, `defaults = false`, allow rules,
//!   other root aliases, an output directory, a sandbox-runtime settings
//!   file, the serve token, accepted hosts and remote serving.
//!
//! Sections are whole in the merge (a project section replaces the user's),
//! so each kept section starts from the user's and takes the project's
//! tightening on top.

use toolgate_core::EffectClass;
use toolgate_policy::command::ParseFallback;
use toolgate_policy::{PolicyPreset, ResourcePolicy, RuleAction};
use toolgate_sandbox::BackendChoice;
use toolgate_sandbox::egress::{NetworkModeName, NetworkPolicy};

use super::{
    AccessSection, CommandsSection, ConfigFile, PathsSection, SandboxSection, ServeSection,
    ToolsSection,
};

/// What of an untrusted project file is kept.
#[derive(Debug, Default)]
pub struct Restricted {
    /// The file with only its tightening left.
    pub file: ConfigFile,
    /// The project's `[access] allow` list, which may only narrow: a tool
    /// must be in it as well as pass the user's access layer.
    pub narrow_to: Option<Vec<String>>,
    /// Each setting that was ignored, with why.
    pub ignored: Vec<String>,
}

/// Keeps what in `project` tightens `base` (the user's file, or the
/// defaults when there is none).
pub fn restrict(project: ConfigFile, base: &ConfigFile) -> Restricted {
    let mut ignored = Vec::new();
    let mut file = ConfigFile::default();
    if let Some(preset) = project.preset {
        match base.preset {
            Some(own) if !preset.tools().iter().all(|t| own.contains(t)) => ignored.push(format!(
                "preset = \"{preset}\" (it has tools the user's preset \"{own}\" lacks)"
            )),
            _ => file.preset = Some(preset),
        }
    }
    let own_policy = base.policy.unwrap_or(PolicyPreset::Standard);
    if let Some(policy) = project.policy {
        if strictness(policy) < strictness(own_policy) {
            ignored.push(format!(
                "policy = \"{policy}\" (looser than \"{own_policy}\")"
            ));
        } else {
            file.policy = Some(policy);
        }
    }
    let policy = file.policy.unwrap_or(own_policy);
    match project.strict_tool_input {
        Some(false) if base.strict_tool_input == Some(true) => {
            ignored.push("strict_tool_input = false".to_owned());
        }
        other => file.strict_tool_input = other,
    }
    // Checked against the user's roots once resolved (see `resolve`).
    file.roots = project.roots;
    if project.root_aliases.as_ref().is_some_and(|a| !a.is_empty()) {
        ignored.push("[root_aliases] (they can name any directory)".to_owned());
    }
    if project.output_dir.is_some() {
        ignored.push("output_dir (it can name any directory)".to_owned());
    }
    let mut narrow_to = None;
    if let Some(access) = project.access {
        let (section, allow) = access_section(access, base.access.as_ref(), policy);
        file.access = Some(section);
        narrow_to = allow;
    }
    if let Some(paths) = project.paths {
        file.paths = Some(paths_section(paths, base.paths.as_ref(), &mut ignored));
    }
    if let Some(commands) = project.commands {
        let section = commands_section(commands, base.commands.as_ref(), policy, &mut ignored);
        file.commands = Some(section);
    }
    if let Some(resources) = project.resources {
        file.resources = Some(resources_section(
            resources,
            base.resources.unwrap_or_default(),
            &mut ignored,
        ));
    }
    for rule in project.rules {
        if rule.action == RuleAction::Allow {
            ignored.push(format!("the rule that allows `{}`", rule.pattern));
        } else {
            file.rules.push(rule);
        }
    }
    if let Some(sandbox) = project.sandbox {
        file.sandbox = Some(sandbox_section(
            sandbox,
            base.sandbox.as_ref(),
            &mut ignored,
        ));
    }
    if let Some(limits) = project.limits {
        file.limits = Some(super::limits::restrict(
            limits,
            base.limits.as_ref(),
            &mut ignored,
        ));
    }
    if let Some(tools) = project.tools {
        file.tools = Some(tools_section(tools, base.tools.as_ref(), &mut ignored));
    }
    if let Some(network) = project.network
        && let Some(network) = network_section(network, base.network.as_ref(), &mut ignored)
    {
        file.network = Some(network);
    }
    if let Some(serve) = project.serve {
        file.serve = Some(serve_section(serve, base.serve.as_ref(), &mut ignored));
    }
    if let Some(approvals) = project.approvals {
        let section =
            super::approvals::restrict_approvals(approvals, base.approvals.as_ref(), &mut ignored);
        file.approvals = Some(section);
    }
    if let Some(catalog) = project.catalog {
        file.catalog = Some(super::catalog::restrict(
            catalog,
            base.catalog.as_ref(),
            &mut ignored,
        ));
    }
    super::approvals::restrict_store_and_identity(project.store, project.identity, &mut ignored);
    for server in project.mcp_servers.unwrap_or_default() {
        ignored.push(format!(
            "the MCP server `{}` ([[mcp_servers]]: a server is a program toolgate starts or a \
             host it sends requests to)",
            server.name
        ));
    }
    // Deferring more tools takes nothing away.
    file.mcp_defer_threshold = match (project.mcp_defer_threshold, base.mcp_defer_threshold) {
        (Some(project), own) => {
            Some(project.min(own.unwrap_or(super::mcp_servers::DEFAULT_DEFER_THRESHOLD)))
        }
        (None, _) => None,
    };
    Restricted {
        file,
        narrow_to,
        ignored,
    }
}

fn strictness(preset: PolicyPreset) -> u8 {
    match preset {
        PolicyPreset::Permissive => 0,
        PolicyPreset::Standard => 1,
        PolicyPreset::Strict => 2,
        PolicyPreset::Readonly => 3,
    }
}

fn strength(backend: BackendChoice) -> u8 {
    match backend {
        BackendChoice::None => 0,
        BackendChoice::Landlock => 1,
        BackendChoice::Auto => 2,
        BackendChoice::Bwrap => 3,
    }
}

/// Without a user `[access]`, the policy preset's cap is the user's.
fn access_section(
    project: AccessSection,
    base: Option<&AccessSection>,
    policy: PolicyPreset,
) -> (AccessSection, Option<Vec<String>>) {
    let (allow, mut deny, own_cap) = match base {
        Some(b) => (b.allow.clone(), b.deny.clone(), b.cap),
        None => (Vec::new(), Vec::new(), Some(policy.cap())),
    };
    deny.extend(project.deny);
    let cap = lower(own_cap, project.cap);
    let narrow = (!project.allow.is_empty()).then_some(project.allow);
    (AccessSection { allow, deny, cap }, narrow)
}

/// The lower of two caps, where `None` is no cap.
fn lower(a: Option<EffectClass>, b: Option<EffectClass>) -> Option<EffectClass> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn paths_section(
    project: PathsSection,
    base: Option<&PathsSection>,
    ignored: &mut Vec<String>,
) -> PathsSection {
    let mut section = base.cloned().unwrap_or_else(PathsSection::standard);
    if !project.defaults && section.defaults {
        ignored.push("[paths] defaults = false (it drops the built-in denies)".to_owned());
    }
    section.defaults |= project.defaults;
    for entry in &project.allow {
        ignored.push(format!("[paths] allow `{entry}`"));
    }
    section.deny.extend(project.deny);
    if project.workspace_roots && !section.workspace_roots {
        ignored.push("[paths] workspace_roots = true".to_owned());
    }
    section.workspace_roots &= project.workspace_roots;
    if project.temp_dir && !section.temp_dir {
        ignored.push("[paths] temp_dir = true".to_owned());
    }
    section.temp_dir &= project.temp_dir;
    section
}

fn commands_section(
    project: CommandsSection,
    base: Option<&CommandsSection>,
    policy: PolicyPreset,
    ignored: &mut Vec<String>,
) -> CommandsSection {
    let mut section = base.cloned().unwrap_or_else(CommandsSection::standard);
    if !project.defaults && section.defaults {
        ignored.push("[commands] defaults = false (it drops the built-in denies)".to_owned());
    }
    section.defaults |= project.defaults;
    section.deny.extend(project.deny);
    section.deny_patterns.extend(project.deny_patterns);
    let own = section.on_parse_error.unwrap_or(policy.parse_fallback());
    match project.on_parse_error {
        Some(ParseFallback::Deny) => section.on_parse_error = Some(ParseFallback::Deny),
        Some(ParseFallback::Sandbox) if own == ParseFallback::Deny => {
            ignored.push("[commands] on_parse_error = \"sandbox\"".to_owned());
        }
        _ => {}
    }
    section
}

fn resources_section(
    project: ResourcePolicy,
    base: ResourcePolicy,
    ignored: &mut Vec<String>,
) -> ResourcePolicy {
    let section = "[resources]";
    ResourcePolicy {
        max_output_bytes: at_most(
            (section, "max_output_bytes"),
            project.max_output_bytes,
            base.max_output_bytes,
            ignored,
        ),
        max_output_lines: at_most(
            (section, "max_output_lines"),
            project.max_output_lines,
            base.max_output_lines,
            ignored,
        ),
        max_file_bytes: at_most(
            (section, "max_file_bytes"),
            project.max_file_bytes,
            base.max_file_bytes,
            ignored,
        ),
    }
}

/// The project's limit where it is no higher than the user's, else the
/// user's (and the project's is named as ignored).
fn at_most<T: Ord + Copy + std::fmt::Display>(
    (section, name): (&str, &str),
    theirs: T,
    ours: T,
    ignored: &mut Vec<String>,
) -> T {
    if theirs > ours {
        ignored.push(format!("{section} {name} = {theirs} (above {ours})"));
    }
    theirs.min(ours)
}

fn sandbox_section(
    project: SandboxSection,
    base: Option<&SandboxSection>,
    ignored: &mut Vec<String>,
) -> SandboxSection {
    let mut section = base.cloned().unwrap_or_default();
    if strength(project.backend) < strength(section.backend) {
        ignored.push(format!(
            "[sandbox] backend = \"{}\" (weaker than \"{}\")",
            project.backend, section.backend
        ));
    } else {
        section.backend = project.backend;
    }
    section.require_bwrap |= project.require_bwrap;
    section
}

/// The defaults of `[tools]` limits, which an untrusted file may lower.
const MAX_TIMEOUT: u64 = 600;
const MAX_PROCESSES: usize = 8;

fn tools_section(
    project: ToolsSection,
    base: Option<&ToolsSection>,
    ignored: &mut Vec<String>,
) -> ToolsSection {
    let mut section = base.cloned().unwrap_or_default();
    if project.elevated && !section.elevated {
        ignored.push("[tools] elevated = true (it runs commands outside the sandbox)".to_owned());
    }
    section.elevated &= project.elevated;
    let own = std::mem::take(&mut section.pass_env);
    for name in project.pass_env {
        if own.contains(&name) {
            section.pass_env.push(name);
        } else {
            ignored.push(format!("[tools] pass_env `{name}`"));
        }
    }
    let own_timeout = section.max_timeout.unwrap_or(MAX_TIMEOUT);
    if let Some(timeout) = project.max_timeout {
        let limit = at_most(("[tools]", "max_timeout"), timeout, own_timeout, ignored);
        section.max_timeout = Some(limit);
    }
    let own_processes = section.max_processes.unwrap_or(MAX_PROCESSES);
    if let Some(processes) = project.max_processes {
        let limit = at_most(
            ("[tools]", "max_processes"),
            processes,
            own_processes,
            ignored,
        );
        section.max_processes = Some(limit);
    }
    section
}

/// `None` when the user's section stays as it is.
fn network_section(
    project: NetworkPolicy,
    base: Option<&NetworkPolicy>,
    ignored: &mut Vec<String>,
) -> Option<NetworkPolicy> {
    let own_mode = base.map_or(NetworkModeName::None, |b| b.mode);
    if project.settings_file.is_some() {
        ignored.push("[network] settings_file (a file toolgate would read rules from)".to_owned());
    }
    // The user's own settings file is read relative to the user's file:
    // a project section in its place would lose its rules.
    if base.is_some_and(|b| b.settings_file.is_some()) {
        ignored.push(
            "[network] (the user's [network] names a settings file, kept as it is)".to_owned(),
        );
        return None;
    }
    match (project.mode, own_mode) {
        (NetworkModeName::None, _)
        | (NetworkModeName::Host | NetworkModeName::Proxy, NetworkModeName::Host) => {
            let mut network = project;
            network.settings_file = None;
            Some(network)
        }
        (NetworkModeName::Proxy, NetworkModeName::Proxy) => {
            let own = base.map(|b| b.allow.as_slice()).unwrap_or_default();
            let mut allow = Vec::new();
            for host in project.allow {
                if own.contains(&host) {
                    allow.push(host);
                } else {
                    ignored.push(format!("[network] allow `{host}`"));
                }
            }
            let mut network = base.cloned().unwrap_or_default();
            network.allow = allow;
            network.deny.extend(project.deny);
            Some(network)
        }
        (mode, own) => {
            ignored.push(format!(
                "[network] mode = \"{mode}\" (wider than \"{own}\")"
            ));
            None
        }
    }
}

fn serve_section(
    project: ServeSection,
    base: Option<&ServeSection>,
    ignored: &mut Vec<String>,
) -> ServeSection {
    let mut section = base.cloned().unwrap_or_default();
    if project.token.is_some() {
        ignored.push("[serve] token (a token the project's authors know)".to_owned());
    }
    for host in &project.allowed_hosts {
        ignored.push(format!("[serve] allowed_hosts `{host}`"));
    }
    if project.allow_remote && !section.allow_remote {
        ignored.push("[serve] allow_remote = true".to_owned());
    }
    section.port = project.port.or(section.port);
    section
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn file(text: &str) -> ConfigFile {
        toml::from_str(text).unwrap()
    }

    /// The ignored settings of `project` over `base`, and what is kept.
    fn restricted(project: &str, base: &str) -> (ConfigFile, Vec<String>) {
        let r = restrict(file(project), &file(base));
        (r.file, r.ignored)
    }

    #[test]
    fn every_loosening_is_ignored_by_name() {
        let project = r#"
policy = "permissive"
preset = "admin"
output_dir = "/etc"
[root_aliases]
etc = "/etc"
[access]
cap = "destructive"
[paths]
defaults = false
allow = ["/etc/**"]
[commands]
defaults = false
on_parse_error = "sandbox"
[resources]
max_output_bytes = 99999999
[[rules]]
pattern = "bash"
action = "allow"
[sandbox]
backend = "landlock"
[tools]
elevated = true
pass_env = ["AWS_SECRET_ACCESS_KEY"]
max_timeout = 86400
max_processes = 1000
[network]
mode = "host"
[serve]
token = "known"
allowed_hosts = ["evil.example"]
allow_remote = true
"#;
        let base = "policy = \"strict\"\npreset = \"coding\"\n";
        let (kept, ignored) = restricted(project, base);
        let ignored = ignored.join("\n");
        for name in [
            "policy = \"permissive\"",
            "preset = \"admin\"",
            "output_dir",
            "[root_aliases]",
            "[paths] defaults = false",
            "[paths] allow `/etc/**`",
            "[commands] defaults = false",
            "[commands] on_parse_error = \"sandbox\"",
            "[resources] max_output_bytes",
            "the rule that allows `bash`",
            "[sandbox] backend = \"landlock\"",
            "[tools] elevated = true",
            "[tools] pass_env `AWS_SECRET_ACCESS_KEY`",
            "[tools] max_timeout = 86400",
            "[tools] max_processes = 1000",
            "[network] mode = \"host\"",
            "[serve] token",
            "[serve] allowed_hosts `evil.example`",
            "[serve] allow_remote = true",
        ] {
            assert!(ignored.contains(name), "{name} not in:\n{ignored}");
        }
        assert_eq!(kept.policy, None);
        assert_eq!(kept.preset, None);
        assert_eq!(kept.output_dir, None);
        assert!(kept.rules.is_empty());
        assert!(kept.network.is_none());
        // The access cap stays the user's policy's, not the project's.
        assert_eq!(
            kept.access.as_ref().and_then(|a| a.cap),
            Some(PolicyPreset::Strict.cap())
        );
        let tools = kept.tools.unwrap();
        assert!(!tools.elevated && tools.pass_env.is_empty());
        assert_eq!(
            (tools.max_timeout, tools.max_processes),
            (Some(600), Some(8))
        );
        let paths = kept.paths.unwrap();
        assert!(paths.defaults && paths.allow.is_empty());
        assert!(kept.commands.unwrap().defaults);
        assert_eq!(kept.sandbox.unwrap().backend, BackendChoice::Auto);
        let serve = kept.serve.unwrap();
        assert!(serve.token.is_none() && serve.allowed_hosts.is_empty() && !serve.allow_remote);
    }

    #[test]
    fn every_tightening_applies_and_says_nothing() {
        let project = r#"
policy = "readonly"
preset = "readonly"
strict_tool_input = true
[access]
deny = ["bash"]
cap = "read"
allow = ["read", "group:search"]
[paths]
deny = ["**/secrets/**"]
temp_dir = false
[commands]
deny = ["curl"]
on_parse_error = "deny"
[resources]
max_output_lines = 10
[[rules]]
pattern = "write"
action = "ask"
[sandbox]
backend = "bwrap"
require_bwrap = true
[tools]
pass_env = ["LANG"]
max_timeout = 5
[network]
mode = "proxy"
allow = ["crates.io"]
deny = ["static.crates.io"]
"#;
        let base = r#"
[access]
deny = ["elevated"]
[tools]
pass_env = ["LANG", "TERM"]
[network]
mode = "proxy"
allow = ["crates.io", "github.com"]
"#;
        let r = restrict(file(project), &file(base));
        assert_eq!(r.ignored, Vec::<String>::new());
        let kept = r.file;
        assert_eq!(kept.policy, Some(PolicyPreset::Readonly));
        assert_eq!(kept.preset.map(|p| p.to_string()), Some("readonly".into()));
        assert_eq!(kept.strict_tool_input, Some(true));
        let access = kept.access.unwrap();
        assert_eq!(access.deny, ["elevated", "bash"]);
        assert_eq!(access.cap, Some(EffectClass::Read));
        // The allow list narrows beside the access layer, never lifts the cap.
        assert!(access.allow.is_empty());
        assert_eq!(r.narrow_to.unwrap(), ["read", "group:search"]);
        let paths = kept.paths.unwrap();
        assert_eq!(paths.deny, ["**/secrets/**"]);
        assert!(!paths.temp_dir);
        let commands = kept.commands.unwrap();
        assert_eq!(commands.deny, ["curl"]);
        assert_eq!(commands.on_parse_error, Some(ParseFallback::Deny));
        assert_eq!(kept.resources.unwrap().max_output_lines, 10);
        assert_eq!(kept.rules.len(), 1);
        let sandbox = kept.sandbox.unwrap();
        assert!(sandbox.require_bwrap && sandbox.backend == BackendChoice::Bwrap);
        let tools = kept.tools.unwrap();
        assert_eq!(tools.pass_env, ["LANG"]);
        assert_eq!(tools.max_timeout, Some(5));
        let network = kept.network.unwrap();
        assert_eq!(network.allow, ["crates.io"]);
        assert_eq!(network.deny, ["static.crates.io"]);
    }

    #[test]
    fn a_proxy_allowlist_stays_within_the_users() {
        let project = "[network]\nmode = \"proxy\"\nallow = [\"crates.io\", \"evil.example\"]\n";
        let (kept, ignored) = restricted(project, "");
        assert!(kept.network.is_none(), "no network without the user's");
        assert_eq!(
            ignored,
            ["[network] mode = \"proxy\" (wider than \"none\")"]
        );
        let (kept, ignored) = restricted(project, "[network]\nmode = \"host\"\n");
        assert_eq!(
            kept.network.unwrap().allow.len(),
            2,
            "a proxy is narrower than host"
        );
        assert!(ignored.is_empty());
        let base = "[network]\nmode = \"proxy\"\nallow = [\"crates.io\"]\n";
        let (kept, ignored) = restricted(project, base);
        assert_eq!(kept.network.unwrap().allow, ["crates.io"]);
        assert_eq!(ignored, ["[network] allow `evil.example`"]);
    }
}

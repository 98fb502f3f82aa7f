//! The system prompt an agent starts with, assembled from three files and
//! the runtime's own facts, always in this order:
//!
//! 1. `AGENTS.md`: the project's instructions, from the first workspace root
//!    (read through the jail, so a symlink out of the root is refused);
//!    left out when there is none;
//! 2. `SOUL.md`: the persona, the workspace's own or a short built-in one;
//! 3. `TOOLS.md`: generated from the tools that are active under the policy
//!    (an inactive tool is never offered), group by group;
//! 4. the runtime: agent, session, working directory, sandbox backend,
//!    workspace roots and whether `elevated` is on.
//!
//! Each file is bounded ([`PromptOptions::max_file_bytes`]) and says so
//! when it was cut, so a huge AGENTS.md cannot crowd out the rest.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Read as _;
use std::path::PathBuf;

use serde::Serialize;
use toolgate_core::ToolSpec;
use toolgate_policy::{Access, Executor};
use toolgate_sandbox::{JailError, Workspace, WorkspaceError};

/// Bytes of each file kept by default.
pub const MAX_FILE_BYTES: usize = 20 * 1024;

/// The persona when the workspace has no SOUL.md.
pub const DEFAULT_SOUL: &str = "You are a careful, capable software agent working in a sandboxed \
workspace. Be direct and concise. Read before you change; make the smallest change that does the \
job, and check it (build, test) before you say it is done. When a tool refuses a call, explain \
why to the user instead of looking for a way around it. Say plainly what you did not do or could \
not verify.";

/// How the prompt is assembled.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PromptOptions {
    /// The session id; a new one (time and pid) when `None`.
    pub session_id: Option<String>,
    /// Bytes of each file kept before it is cut.
    pub max_file_bytes: usize,
}

impl Default for PromptOptions {
    fn default() -> Self {
        PromptOptions {
            session_id: None,
            max_file_bytes: MAX_FILE_BYTES,
        }
    }
}

impl PromptOptions {
    /// Sets the session id.
    pub fn session_id(mut self, id: impl Into<String>) -> Self {
        self.session_id = Some(id.into());
        self
    }

    /// Sets the bound of each file.
    pub fn max_file_bytes(mut self, bytes: usize) -> Self {
        self.max_file_bytes = bytes;
        self
    }
}

/// Where a part's text came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PartSource {
    /// A file of the workspace.
    Workspace,
    /// toolgate's built-in default.
    BuiltIn,
    /// Generated from the executor.
    Generated,
}

/// One of the three files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PromptPart {
    /// `AGENTS.md`, `SOUL.md` or `TOOLS.md`.
    pub file: &'static str,
    /// Where the text came from.
    pub source: PartSource,
    /// The text, bounded (with a marker when cut).
    pub text: String,
    /// Whether the text was cut.
    pub truncated: bool,
}

/// Whether the host-command tool is available to the agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum ElevatedState {
    /// Not registered: the operator did not enable it.
    Off,
    /// Registered but not callable.
    Inactive {
        /// Why.
        reason: String,
    },
    /// Callable (each call still goes through the permission rules).
    On,
}

/// A workspace root and what commands may do in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RootAccess {
    /// The root.
    pub path: PathBuf,
    /// `rw`: commands and file tools may read and write it (protected
    /// entries such as `.git/hooks` excepted).
    pub access: &'static str,
}

/// The runtime facts the agent is told.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuntimeFacts {
    /// The agent.
    pub agent_id: String,
    /// The session.
    pub session_id: String,
    /// The working directory.
    pub cwd: PathBuf,
    /// bwrap, landlock or none.
    pub sandbox_backend: String,
    /// Every root.
    pub roots: Vec<RootAccess>,
    /// The host-command tool.
    pub elevated: ElevatedState,
}

/// The assembled prompt, part by part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SystemPrompt {
    /// The project's instructions, if the workspace has them.
    pub agents: Option<PromptPart>,
    /// The persona.
    pub soul: PromptPart,
    /// The tool guidance.
    pub tools: PromptPart,
    /// The runtime facts.
    pub runtime: RuntimeFacts,
}

/// Why the prompt could not be assembled.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PromptError {
    /// A prompt file exists but cannot be read through the jail.
    #[error("cannot read {file} in the workspace: {source}; fix the file or remove it")]
    Read {
        /// The file.
        file: &'static str,
        /// Why.
        #[source]
        source: JailError,
    },
    /// The workspace failed.
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
}

/// Assembles the prompt for `workspace` with the tools `executor` makes
/// active.
pub async fn assemble(
    executor: &Executor,
    workspace: &dyn Workspace,
    options: &PromptOptions,
) -> Result<SystemPrompt, PromptError> {
    let max = options.max_file_bytes;
    let agents = read_part(workspace, "AGENTS.md", max).await?;
    let soul = match read_part(workspace, "SOUL.md", max).await? {
        Some(part) => part,
        None => bounded("SOUL.md", PartSource::BuiltIn, DEFAULT_SOUL, max),
    };
    let tools = bounded(
        "TOOLS.md",
        PartSource::Generated,
        &tools_markdown(executor),
        max,
    );
    let health = workspace.health().await;
    let runtime = RuntimeFacts {
        agent_id: workspace.agent_id().to_owned(),
        session_id: options.session_id.clone().unwrap_or_else(new_session_id),
        cwd: workspace.cwd().to_owned(),
        sandbox_backend: health.backend.to_string(),
        roots: workspace
            .roots()
            .iter()
            .map(|path| RootAccess {
                path: path.clone(),
                access: "rw",
            })
            .collect(),
        elevated: elevated_state(executor),
    };
    Ok(SystemPrompt {
        agents,
        soul,
        tools,
        runtime,
    })
}

impl SystemPrompt {
    /// The prompt as markdown: the parts in their fixed order, each under
    /// its own top-level heading.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        if let Some(agents) = &self.agents {
            section(&mut out, "Project instructions (AGENTS.md)", &agents.text);
        }
        section(&mut out, "Persona (SOUL.md)", &self.soul.text);
        section(&mut out, "Tools (TOOLS.md)", &self.tools.text);
        section(&mut out, "Runtime", &self.runtime.markdown());
        out
    }
}

impl RuntimeFacts {
    fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "- agent: {}", self.agent_id);
        let _ = writeln!(out, "- session: {}", self.session_id);
        let _ = writeln!(out, "- working directory: {}", self.cwd.display());
        let _ = writeln!(out, "- sandbox backend: {}", self.sandbox_backend);
        let _ = writeln!(out, "- workspace roots:");
        for root in &self.roots {
            let _ = writeln!(out, "  - {} ({})", root.path.display(), root.access);
        }
        let elevated = match &self.elevated {
            ElevatedState::Off => "off (not enabled by the operator)".to_owned(),
            ElevatedState::Inactive { reason } => format!("enabled but inactive: {reason}"),
            ElevatedState::On => {
                "on: runs commands on the host, outside the sandbox; every call needs approval"
                    .to_owned()
            }
        };
        let _ = writeln!(out, "- elevated: {elevated}");
        out
    }
}

fn section(out: &mut String, heading: &str, body: &str) {
    if !out.is_empty() {
        out.push('\n');
    }
    let _ = writeln!(out, "# {heading}\n");
    out.push_str(body.trim_end());
    out.push('\n');
}

/// Reads `file` from the first root, through the jail. `None` when it does
/// not exist.
async fn read_part(
    workspace: &dyn Workspace,
    file: &'static str,
    max: usize,
) -> Result<Option<PromptPart>, PromptError> {
    let Some(root) = workspace.roots().first() else {
        return Ok(None);
    };
    let (jail, rel) = workspace.jail_for(&root.join(file))?;
    let read = tokio::task::spawn_blocking(move || -> Result<Option<Vec<u8>>, JailError> {
        if !jail.exists(&rel)? {
            return Ok(None);
        }
        // Attack: a multi-gigabyte (or endless) file: never read more than
        // the bound and one byte to know it was cut.
        let (file, _) = jail.open_file(&rel)?;
        let mut bytes = Vec::new();
        file.take(max as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| JailError::Io {
                path: rel.clone(),
                source: e,
            })?;
        Ok(Some(bytes))
    })
    .await
    .map_err(|e| WorkspaceError::Internal(e.to_string()))?
    .map_err(|source| PromptError::Read { file, source })?;
    Ok(read.map(|bytes| {
        let text = String::from_utf8_lossy(&bytes);
        bounded(file, PartSource::Workspace, &text, max)
    }))
}

/// `text` cut to `max` bytes on a character boundary, with a marker.
fn bounded(file: &'static str, source: PartSource, text: &str, max: usize) -> PromptPart {
    if text.len() <= max {
        return PromptPart {
            file,
            source,
            text: text.to_owned(),
            truncated: false,
        };
    }
    let end = toolgate_core::text::floor_char_boundary(text, max);
    let mut cut = text[..end].to_owned();
    if !cut.ends_with('\n') {
        cut.push('\n');
    }
    let _ = writeln!(
        cut,
        "[{file} cut here: only its first {max} bytes are part of the prompt]"
    );
    PromptPart {
        file,
        source,
        text: cut,
        truncated: true,
    }
}

/// TOOLS.md: every active, directly callable tool, grouped by group (tools
/// without a group last), each with its effect class, idempotency and its
/// description as guidance.
fn tools_markdown(executor: &Executor) -> String {
    let mut groups: BTreeMap<Option<&str>, Vec<&ToolSpec>> = BTreeMap::new();
    let statuses = executor.tools();
    let mut deferred = 0;
    for status in &statuses {
        if status.access != Access::Active {
            continue;
        }
        if status.deferred {
            deferred += 1;
            continue;
        }
        groups
            .entry(status.spec.group.as_deref())
            .or_default()
            .push(&status.spec);
    }
    let mut out = String::new();
    if groups.is_empty() {
        out.push_str("No tools are active under the current policy.\n");
    } else {
        out.push_str(
            "The tools you may call. The effect class says what a call can change (read < \
             mutate-reversible < mutate-irreversible < destructive); the idempotency says whether \
             a call may be repeated safely.\n",
        );
    }
    // `None` sorts first in a BTreeMap; ungrouped tools are shown last.
    let (ungrouped, grouped): (Vec<_>, Vec<_>) = groups.into_iter().partition(|(g, _)| g.is_none());
    for (group, mut specs) in grouped.into_iter().chain(ungrouped) {
        specs.sort_by(|a, b| a.name.cmp(&b.name));
        let _ = writeln!(out, "\n## {}", group.unwrap_or("Standalone tools"));
        for spec in specs {
            let idempotency = spec.idempotency.map_or("-".to_owned(), |i| i.to_string());
            let _ = writeln!(
                out,
                "\n### {}\n\neffect class: {}; idempotency: {idempotency}\n\n{}",
                spec.name,
                spec.effect_class,
                spec.description.trim()
            );
        }
    }
    if deferred > 0 {
        let _ = writeln!(
            out,
            "\n{deferred} more tools are deferred: find them with mcp_find_tools."
        );
    }
    out
}

fn elevated_state(executor: &Executor) -> ElevatedState {
    match executor
        .tools()
        .into_iter()
        .find(|s| s.spec.name == "elevated")
    {
        None => ElevatedState::Off,
        Some(status) => match status.access {
            Access::Active => ElevatedState::On,
            Access::Inactive { reason } => ElevatedState::Inactive { reason },
        },
    }
}

/// A new session id: the time in nanoseconds and the process id.
fn new_session_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("session-{nanos:x}-{:x}", std::process::id())
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use pretty_assertions::assert_eq;
    use toolgate_core::Registry;
    use toolgate_policy::{Policy, PolicyPreset};
    use toolgate_sandbox::{LocalWorkspace, Sandbox, SandboxConfig};

    use super::*;
    use crate::{Fs, Limits, RuntimeConfig};

    struct Setup {
        _dir: tempfile::TempDir,
        root: PathBuf,
        workspace: Arc<LocalWorkspace>,
    }

    fn setup(files: &[(&str, &str)]) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let root = base.join("root");
        std::fs::create_dir_all(&root).unwrap();
        for (name, text) in files {
            std::fs::write(root.join(name), text).unwrap();
        }
        let sandbox = Sandbox::new(SandboxConfig::new(
            PathBuf::from("/nonexistent/stage2"),
            base.join("state"),
        ))
        .unwrap();
        let workspace =
            LocalWorkspace::new("agent-7", vec![root.clone()], root.clone(), sandbox).unwrap();
        Setup {
            _dir: dir,
            root,
            workspace: Arc::new(workspace),
        }
    }

    /// The file tools, plus `elevated` when asked, under `preset`.
    fn executor(s: &Setup, preset: PolicyPreset, elevated: bool) -> Executor {
        let mut registry = Registry::new();
        let fs = Arc::new(Fs::new(s.workspace.clone(), Limits::default()));
        crate::register_fs_tools(&mut registry, fs.clone()).unwrap();
        if elevated {
            crate::register_elevated_tool(&mut registry, fs, RuntimeConfig::default()).unwrap();
        }
        let policy = Policy::preset(preset, Some(Path::new("/nonexistent-home")));
        Executor::builder(registry).policy(policy).build()
    }

    async fn prompt(s: &Setup, executor: &Executor, options: PromptOptions) -> SystemPrompt {
        assemble(executor, s.workspace.as_ref(), &options)
            .await
            .unwrap()
    }

    fn headings(markdown: &str) -> Vec<&str> {
        markdown.lines().filter(|l| l.starts_with("# ")).collect()
    }

    #[tokio::test]
    async fn without_files_the_persona_is_built_in_and_instructions_are_left_out() {
        let s = setup(&[]);
        let e = executor(&s, PolicyPreset::Standard, false);
        let p = prompt(&s, &e, PromptOptions::default().session_id("s-1")).await;
        assert_eq!(p.agents, None);
        assert_eq!(
            p.soul,
            PromptPart {
                file: "SOUL.md",
                source: PartSource::BuiltIn,
                text: DEFAULT_SOUL.to_owned(),
                truncated: false,
            }
        );
        assert_eq!(
            p.runtime,
            RuntimeFacts {
                agent_id: "agent-7".into(),
                session_id: "s-1".into(),
                cwd: s.root.clone(),
                sandbox_backend: s.workspace.as_ref().health().await.backend.to_string(),
                roots: vec![RootAccess {
                    path: s.root.clone(),
                    access: "rw"
                }],
                elevated: ElevatedState::Off,
            }
        );
        let md = p.markdown();
        assert_eq!(
            headings(&md),
            ["# Persona (SOUL.md)", "# Tools (TOOLS.md)", "# Runtime"]
        );
        assert!(
            md.contains("- elevated: off (not enabled by the operator)\n"),
            "{md}"
        );
        assert!(
            md.contains(&format!("  - {} (rw)\n", s.root.display())),
            "{md}"
        );
    }

    #[tokio::test]
    async fn workspace_files_come_first_in_a_fixed_order() {
        let s = setup(&[
            ("AGENTS.md", "Run `make check` before committing.\n"),
            ("SOUL.md", "You are terse.\n"),
        ]);
        let e = executor(&s, PolicyPreset::Standard, false);
        let p = prompt(&s, &e, PromptOptions::default()).await;
        let agents = p.agents.clone().unwrap();
        assert_eq!(agents.source, PartSource::Workspace);
        assert_eq!(agents.text, "Run `make check` before committing.\n");
        assert_eq!(p.soul.source, PartSource::Workspace);
        assert_eq!(p.soul.text, "You are terse.\n");
        assert!(p.runtime.session_id.starts_with("session-"));
        let md = p.markdown();
        assert_eq!(
            headings(&md),
            [
                "# Project instructions (AGENTS.md)",
                "# Persona (SOUL.md)",
                "# Tools (TOOLS.md)",
                "# Runtime"
            ]
        );
        assert!(md.starts_with(
            "# Project instructions (AGENTS.md)\n\nRun `make check` before committing.\n\n# Persona (SOUL.md)\n\nYou are terse.\n\n"
        ), "{md}");
    }

    #[tokio::test]
    async fn only_active_tools_are_offered_group_by_group() {
        let s = setup(&[]);
        let e = executor(&s, PolicyPreset::Readonly, true);
        let p = prompt(&s, &e, PromptOptions::default()).await;
        let tools = &p.tools.text;
        let names: Vec<&str> = tools
            .lines()
            .filter_map(|l| l.strip_prefix("### "))
            .collect();
        let groups: Vec<&str> = tools
            .lines()
            .filter_map(|l| l.strip_prefix("## "))
            .collect();
        assert_eq!(names, ["ls", "read", "find", "grep"]);
        assert_eq!(groups, ["group:fs", "group:search"]);
        assert!(
            tools.contains("\n### read\n\neffect class: read; idempotency: -\n\nRead "),
            "{tools}"
        );
        assert_eq!(
            p.runtime.elevated,
            ElevatedState::Inactive {
                reason: "effect class destructive exceeds the policy cap read".into()
            }
        );

        // Permissive: elevated is active and stands alone, last.
        let e = executor(&s, PolicyPreset::Permissive, true);
        let p = prompt(&s, &e, PromptOptions::default()).await;
        let tools = &p.tools.text;
        assert!(
            tools.contains(
                "### write\n\neffect class: mutate-reversible; idempotency: check-before-act"
            ),
            "{tools}"
        );
        let standalone = tools.find("\n## Standalone tools\n\n### elevated\n\neffect class: destructive; idempotency: at-most-once\n\nUNSANDBOXED.").unwrap();
        assert!(tools[..standalone].contains("## group:search"));
        assert_eq!(p.runtime.elevated, ElevatedState::On);
        assert!(
            p.markdown()
                .contains("- elevated: on: runs commands on the host")
        );
    }

    #[tokio::test]
    async fn each_file_is_bounded_with_a_marker() {
        // Two-byte characters: the cut must fall on a character boundary.
        let big = "é".repeat(5_000);
        let s = setup(&[("AGENTS.md", &big), ("SOUL.md", "short\n")]);
        let e = executor(&s, PolicyPreset::Standard, false);
        let p = prompt(&s, &e, PromptOptions::default().max_file_bytes(1_001)).await;
        let agents = p.agents.unwrap();
        assert!(agents.truncated);
        assert_eq!(
            agents.text,
            format!(
                "{}\n[AGENTS.md cut here: only its first 1001 bytes are part of the prompt]\n",
                "é".repeat(500)
            )
        );
        assert!(!p.soul.truncated);
        // TOOLS.md is bounded the same way.
        assert!(p.tools.truncated);
        assert!(
            p.tools.text.ends_with(
                "[TOOLS.md cut here: only its first 1001 bytes are part of the prompt]\n"
            )
        );
        // The default bound keeps the generated TOOLS.md whole.
        let p = prompt(&s, &e, PromptOptions::default()).await;
        assert!(!p.tools.truncated);
    }

    #[tokio::test]
    async fn a_file_that_escapes_the_root_is_refused() {
        let s = setup(&[]);
        let secret = s.root.parent().unwrap().join("secret.md");
        std::fs::write(&secret, "not for the model\n").unwrap();
        std::os::unix::fs::symlink(&secret, s.root.join("AGENTS.md")).unwrap();
        let e = executor(&s, PolicyPreset::Standard, false);
        let err = assemble(&e, s.workspace.as_ref(), &PromptOptions::default())
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("cannot read AGENTS.md in the workspace: "),
            "{err}"
        );
        assert!(!err.contains("not for the model"));
    }
}

//! The native-tooling resolver: from a portable description of the tool
//! servers an agent gets (`{fs, shell, dispatch}`) and the task's working
//! directory, the launch configurations a host puts in its MCP server map.
//!
//! The description names roots as portable hints (an operator alias or a
//! path relative to the task's cwd), never as absolute paths; they are
//! resolved here, at task time, with the typed errors of
//! [`toolgate_sandbox::RootError`]. The launch configurations carry the
//! resolved paths, so they are for this task only: store the description,
//! not them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use toolgate_core::ToolPreset;
use toolgate_sandbox::{RootError, RootMap};

/// What the shell server may run when its description names neither
/// `allow_commands` nor `allow_patterns`: ordinary file and toolchain work.
/// No interpreters, no wget, ssh, scp, sudo or nc: a caller adds those by
/// name. (Some listed tools run other programs by design — make, npm, npx,
/// git hooks, awk's system() — and stay inside the sandbox.)
pub const DEFAULT_SHELL_COMMANDS: &[&str] = &[
    "cat", "ls", "cp", "mv", "mkdir", "rm", "touch", "head", "tail", "wc", "sort", "uniq", "tr",
    "cut", "diff", "awk", "sed", "grep", "rg", "echo", "printf", "pwd", "test", "true", "false",
    "basename", "dirname", "realpath", "stat", "tee", "chmod", "git", "cargo", "npm", "pnpm",
    "npx", "make", "uv", "curl",
];

/// The tools of the filesystem server.
pub const FS_TOOLS: &[&str] = &["read", "write", "edit", "apply_patch", "grep", "find", "ls"];
/// The filesystem server's tools when it is read-only.
pub const FS_READ_ONLY_TOOLS: &[&str] = &["read", "grep", "find", "ls"];
/// The tools of the shell server.
pub const SHELL_TOOLS: &[&str] = &[
    "bash",
    "process_start",
    "process_list",
    "process_read",
    "process_write",
    "process_kill",
];

/// Which servers an agent gets, as stored (portable).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct NativeTooling {
    /// The filesystem server: read, write, edit, apply_patch, grep, find, ls.
    #[serde(default)]
    pub fs: Member<FsMember>,
    /// The shell server: bash and the background process tools.
    #[serde(default)]
    pub shell: Member<ShellMember>,
    /// toolgate itself with the configured preset: every active tool.
    #[serde(default)]
    pub dispatch: Member<DispatchMember>,
}

/// A member: `false`/absent (no server), `true` (defaults) or its settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Member<T> {
    /// On with defaults, or off.
    Enabled(bool),
    /// On with these settings.
    With(T),
}

// By hand rather than `untagged`, so a misspelt field is named in the error
// instead of "did not match any variant".
impl<'de, T: serde::de::DeserializeOwned> Deserialize<'de> for Member<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        match serde_json::Value::deserialize(deserializer)? {
            serde_json::Value::Bool(on) => Ok(Member::Enabled(on)),
            serde_json::Value::Null => Ok(Member::Enabled(false)),
            value @ serde_json::Value::Object(_) => T::deserialize(value)
                .map(Member::With)
                .map_err(D::Error::custom),
            other => Err(D::Error::custom(format!(
                "expected true, false or an object of settings, not {other}"
            ))),
        }
    }
}

impl<T> Default for Member<T> {
    fn default() -> Self {
        Member::Enabled(false)
    }
}

impl<T: Default + Clone> Member<T> {
    fn settings(&self) -> Option<T> {
        match self {
            Member::Enabled(false) => None,
            Member::Enabled(true) => Some(T::default()),
            Member::With(settings) => Some(settings.clone()),
        }
    }
}

/// The filesystem server's settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FsMember {
    /// Root hints (default: the task's cwd).
    #[serde(default)]
    pub roots: Vec<String>,
    /// Only read, grep, find and ls.
    #[serde(default)]
    pub read_only: bool,
}

/// The shell server's settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShellMember {
    /// Root hints (default: the task's cwd).
    #[serde(default)]
    pub roots: Vec<String>,
    /// The commands scripts may run; given (even empty), it replaces the
    /// default list.
    #[serde(default)]
    pub allow_commands: Option<Vec<String>>,
    /// Regexes over one command's text that are also allowed; given, the
    /// default list does not apply.
    #[serde(default)]
    pub allow_patterns: Option<Vec<String>>,
    /// Run commands in the OS sandbox (default). `false` is allowed with a
    /// loud warning: then the allowlist and the roots are all that stands.
    #[serde(default = "yes")]
    pub sandbox: bool,
}

impl Default for ShellMember {
    fn default() -> Self {
        ShellMember {
            roots: Vec::new(),
            allow_commands: None,
            allow_patterns: None,
            sandbox: true,
        }
    }
}

fn yes() -> bool {
    true
}

/// The dispatch server's settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DispatchMember {
    /// Root hints (default: the task's cwd).
    #[serde(default)]
    pub roots: Vec<String>,
    /// Tool preset (default: the configuration's).
    #[serde(default)]
    pub preset: Option<ToolPreset>,
}

/// How to start toolgate.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Launcher {
    /// The toolgate program (fs and shell servers, and dispatch by default).
    pub program: PathBuf,
    /// `--config FILE` for every server.
    pub config: Option<PathBuf>,
    /// The dispatch server's program and leading arguments, when overridden
    /// (`TOOLGATE_DISPATCH_COMMAND` / `TOOLGATE_DISPATCH_ARGS`); toolgate's
    /// own arguments follow them.
    pub dispatch: Option<(String, Vec<String>)>,
}

impl Launcher {
    /// Launches `program`.
    pub fn new(program: PathBuf) -> Self {
        Launcher {
            program,
            config: None,
            dispatch: None,
        }
    }

    /// With `TOOLGATE_DISPATCH_COMMAND` and `TOOLGATE_DISPATCH_ARGS` (a JSON
    /// array of strings, or words separated by whitespace) as `var` gives them.
    pub fn with_dispatch_override(
        mut self,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ResolveError> {
        let command = var("TOOLGATE_DISPATCH_COMMAND").filter(|c| !c.trim().is_empty());
        let args = match var("TOOLGATE_DISPATCH_ARGS") {
            None => Vec::new(),
            Some(raw) if raw.trim_start().starts_with('[') => serde_json::from_str(&raw)
                .map_err(|e| ResolveError::DispatchArgs(format!("{raw}: {e}")))?,
            Some(raw) => raw.split_whitespace().map(str::to_owned).collect(),
        };
        self.dispatch = match command {
            Some(command) => Some((command, args)),
            None if args.is_empty() => None,
            None => Some((self.program.display().to_string(), args)),
        };
        Ok(self)
    }
}

/// A description that cannot be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResolveError {
    /// A root hint of a member does not resolve.
    #[error("the {member} server's roots")]
    Root {
        /// `fs`, `shell` or `dispatch`.
        member: &'static str,
        /// Why.
        source: RootError,
    },
    /// `TOOLGATE_DISPATCH_ARGS` is not a JSON array of strings.
    #[error("TOOLGATE_DISPATCH_ARGS is not a JSON array of strings ({0})")]
    DispatchArgs(String),
    /// The task's cwd is not a usable directory.
    #[error("the task's working directory {}: {reason}", path.display())]
    Cwd {
        /// The cwd.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

/// One MCP server as a host launches it (stdio).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct LaunchConfig {
    /// `stdio`.
    #[serde(rename = "type")]
    pub transport: &'static str,
    /// The program.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Where to start it (the task's cwd).
    pub cwd: PathBuf,
}

/// The launch configurations of one task, in the order fs, shell, dispatch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Resolution {
    /// `(name, config)` pairs.
    pub servers: Vec<(String, LaunchConfig)>,
    /// What the host should show its user (an unsandboxed shell).
    pub warnings: Vec<String>,
}

impl Resolution {
    /// The same configurations keyed by name (`fs`, `shell`, `dispatch`), as
    /// an `mcpServers` map holds them.
    pub fn by_name(&self) -> BTreeMap<String, LaunchConfig> {
        self.servers.iter().cloned().collect()
    }
}

/// Resolves `tooling` for a task working in `cwd`, with the operator's
/// root `aliases`.
pub fn resolve(
    tooling: &NativeTooling,
    cwd: &Path,
    aliases: &RootMap,
    launcher: &Launcher,
) -> Result<Resolution, ResolveError> {
    let cwd = std::fs::canonicalize(cwd).map_err(|e| ResolveError::Cwd {
        path: cwd.to_owned(),
        reason: e.to_string(),
    })?;
    let mut resolution = Resolution {
        servers: Vec::new(),
        warnings: Vec::new(),
    };
    let toolgate = |mut args: Vec<String>| {
        let mut all = vec!["mcp".to_owned()];
        if let Some(config) = &launcher.config {
            all.push("--config".to_owned());
            all.push(config.display().to_string());
        }
        all.append(&mut args);
        all
    };
    let config = |command: String, args: Vec<String>| LaunchConfig {
        transport: "stdio",
        command,
        args,
        cwd: cwd.clone(),
    };
    let program = launcher.program.display().to_string();
    if let Some(fs) = tooling.fs.settings() {
        let tools = if fs.read_only {
            FS_READ_ONLY_TOOLS
        } else {
            FS_TOOLS
        };
        let mut args = vec!["--tools".to_owned(), tools.join(",")];
        args.extend(root_args("fs", &fs.roots, &cwd, aliases)?);
        resolution
            .servers
            .push(("fs".to_owned(), config(program.clone(), toolgate(args))));
    }
    if let Some(shell) = tooling.shell.settings() {
        let mut args = vec!["--tools".to_owned(), SHELL_TOOLS.join(",")];
        args.extend(root_args("shell", &shell.roots, &cwd, aliases)?);
        let commands = match (&shell.allow_commands, &shell.allow_patterns) {
            (Some(commands), _) => Some(commands.clone()),
            (None, Some(_)) => None,
            (None, None) => Some(
                DEFAULT_SHELL_COMMANDS
                    .iter()
                    .map(|c| c.to_string())
                    .collect(),
            ),
        };
        if let Some(commands) = &commands {
            args.push("--allow-commands".to_owned());
            args.push(commands.join(","));
        }
        for pattern in shell.allow_patterns.iter().flatten() {
            args.push("--allow-pattern".to_owned());
            args.push(pattern.clone());
        }
        if !shell.sandbox {
            args.push("--no-sandbox".to_owned());
            resolution.warnings.push(format!(
                "shell: sandbox is off: commands run directly on this machine; only the \
                 allowlist ({}) and the roots stand in the way",
                match &commands {
                    Some(c) if c.is_empty() => "builtins only".to_owned(),
                    Some(c) => c.join(" "),
                    None => "patterns only".to_owned(),
                }
            ));
        }
        resolution
            .servers
            .push(("shell".to_owned(), config(program.clone(), toolgate(args))));
    }
    if let Some(dispatch) = tooling.dispatch.settings() {
        let mut args = root_args("dispatch", &dispatch.roots, &cwd, aliases)?;
        if let Some(preset) = dispatch.preset {
            args.push("--preset".to_owned());
            args.push(preset.to_string());
        }
        let launch = match &launcher.dispatch {
            Some((command, leading)) => {
                let mut all = leading.clone();
                all.extend(toolgate(args));
                config(command.clone(), all)
            }
            None => config(program, toolgate(args)),
        };
        resolution.servers.push(("dispatch".to_owned(), launch));
    }
    Ok(resolution)
}

/// `--root name=/abs/path` for each hint: the launched server gets the
/// resolved directories, under the alias's name or a name made from the
/// hint.
fn root_args(
    member: &'static str,
    hints: &[String],
    cwd: &Path,
    aliases: &RootMap,
) -> Result<Vec<String>, ResolveError> {
    let default = [".".to_owned()];
    let hints = if hints.is_empty() {
        &default[..]
    } else {
        hints
    };
    let mut args = Vec::new();
    let mut names: Vec<String> = Vec::new();
    for hint in hints {
        let path = aliases
            .resolve(hint, cwd)
            .map_err(|source| ResolveError::Root { member, source })?;
        let mut name = if aliases.get(hint).is_some() {
            hint.clone()
        } else {
            root_name(hint)
        };
        if names.contains(&name) {
            name = format!("{name}-{}", names.len() + 1);
        }
        args.push("--root".to_owned());
        args.push(format!("{name}={}", path.display()));
        names.push(name);
    }
    Ok(args)
}

/// An alias name for a relative hint: `src/app` -> `src_app`, `.` -> `cwd`.
fn root_name(hint: &str) -> String {
    let trimmed = hint.trim_matches(|c| c == '/' || c == '.');
    if trimmed.is_empty() {
        return "cwd".to_owned();
    }
    trimmed
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    struct Task {
        _dir: tempfile::TempDir,
        cwd: PathBuf,
        aliases: RootMap,
    }

    fn task() -> Result<Task, Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let base = std::fs::canonicalize(dir.path())?;
        let cwd = base.join("task");
        std::fs::create_dir_all(cwd.join("src"))?;
        std::fs::create_dir_all(base.join("shared"))?;
        let mut aliases = RootMap::new();
        aliases.insert("shared", base.join("shared"))?;
        Ok(Task {
            _dir: dir,
            cwd,
            aliases,
        })
    }

    fn described(json: &str) -> Result<NativeTooling, serde_json::Error> {
        serde_json::from_str(json)
    }

    fn launcher() -> Launcher {
        Launcher::new(PathBuf::from("/opt/toolgate/bin/toolgate"))
    }

    fn shell_args(json: &str, task: &Task) -> Result<Vec<String>, Box<dyn std::error::Error>> {
        let resolution = resolve(&described(json)?, &task.cwd, &task.aliases, &launcher())?;
        let shell = resolution
            .by_name()
            .remove("shell")
            .ok_or("no shell server")?;
        Ok(shell.args)
    }

    fn value_of(args: &[String], flag: &str) -> Vec<String> {
        args.windows(2)
            .filter(|w| w[0] == flag)
            .map(|w| w[1].clone())
            .collect()
    }

    #[test]
    fn the_default_shell_allowlist_is_replaced_or_suppressed()
    -> Result<(), Box<dyn std::error::Error>> {
        let task = task()?;
        let default = DEFAULT_SHELL_COMMANDS.join(",");
        let cases: Vec<(&str, Vec<String>, Vec<String>)> = vec![
            (r#"{"shell": true}"#, vec![default.clone()], vec![]),
            (r#"{"shell": {}}"#, vec![default], vec![]),
            // Given, even empty, it replaces the default list entirely.
            (
                r#"{"shell": {"allow_commands": []}}"#,
                vec![String::new()],
                vec![],
            ),
            (
                r#"{"shell": {"allow_commands": ["python3", "ls"]}}"#,
                vec!["python3,ls".to_owned()],
                vec![],
            ),
            // Patterns suppress the default list.
            (
                r#"{"shell": {"allow_patterns": ["^npm test$"]}}"#,
                vec![],
                vec!["^npm test$".to_owned()],
            ),
            (
                r#"{"shell": {"allow_commands": ["ls"], "allow_patterns": ["^x$"]}}"#,
                vec!["ls".to_owned()],
                vec!["^x$".to_owned()],
            ),
        ];
        for (json, commands, patterns) in cases {
            let args = shell_args(json, &task)?;
            assert_eq!(value_of(&args, "--allow-commands"), commands, "{json}");
            assert_eq!(value_of(&args, "--allow-pattern"), patterns, "{json}");
            assert!(!args.contains(&"--no-sandbox".to_owned()), "{json}");
        }
        Ok(())
    }

    #[test]
    fn an_unsandboxed_shell_is_allowed_loudly() -> Result<(), Box<dyn std::error::Error>> {
        let task = task()?;
        let tooling = described(r#"{"shell": {"sandbox": false, "allow_commands": ["ls"]}}"#)?;
        let resolution = resolve(&tooling, &task.cwd, &task.aliases, &launcher())?;
        let shell = &resolution.servers[0].1;
        assert!(shell.args.contains(&"--no-sandbox".to_owned()));
        assert_eq!(resolution.warnings.len(), 1);
        assert!(resolution.warnings[0].contains("sandbox is off"));
        assert!(resolution.warnings[0].contains("(ls)"));
        Ok(())
    }

    #[test]
    fn list_and_map_come_from_one_computation() -> Result<(), Box<dyn std::error::Error>> {
        let task = task()?;
        let tooling = described(
            r#"{"fs": {"roots": ["src", "shared"], "read_only": true},
                "shell": true, "dispatch": {"preset": "coding"}}"#,
        )?;
        let resolution = resolve(&tooling, &task.cwd, &task.aliases, &launcher())?;
        let names: Vec<&str> = resolution.servers.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["fs", "shell", "dispatch"]);
        let map = resolution.by_name();
        for (name, config) in &resolution.servers {
            assert_eq!(map.get(name), Some(config));
        }
        let fs = &map["fs"];
        let shared = task
            .aliases
            .get("shared")
            .ok_or("alias")?
            .display()
            .to_string();
        assert_eq!(
            fs.args,
            [
                "mcp".to_owned(),
                "--tools".to_owned(),
                "read,grep,find,ls".to_owned(),
                "--root".to_owned(),
                format!("src={}", task.cwd.join("src").display()),
                "--root".to_owned(),
                format!("shared={shared}"),
            ]
        );
        assert_eq!(fs.cwd, task.cwd);
        assert_eq!(
            map["dispatch"].args,
            [
                "mcp".to_owned(),
                "--root".to_owned(),
                format!("cwd={}", task.cwd.display()),
                "--preset".to_owned(),
                "coding".to_owned(),
            ]
        );
        Ok(())
    }

    #[test]
    fn the_stored_description_stays_portable() -> Result<(), Box<dyn std::error::Error>> {
        let task = task()?;
        let tooling = described(r#"{"fs": {"roots": ["src"]}, "shell": true}"#)?;
        resolve(&tooling, &task.cwd, &task.aliases, &launcher())?;
        let stored = serde_json::to_string(&tooling)?;
        assert!(
            !stored.contains(&task.cwd.display().to_string()),
            "{stored}"
        );
        assert_eq!(described(&stored)?, tooling);
        Ok(())
    }

    #[test]
    fn hints_that_are_not_portable_or_escape_are_typed_errors()
    -> Result<(), Box<dyn std::error::Error>> {
        let task = task()?;
        let error = |json: &str| -> Result<ResolveError, Box<dyn std::error::Error>> {
            match resolve(&described(json)?, &task.cwd, &task.aliases, &launcher()) {
                Ok(r) => Err(format!("{json} resolved: {r:?}").into()),
                Err(e) => Ok(e),
            }
        };
        assert_eq!(
            error(r#"{"fs": {"roots": ["/etc"]}}"#)?,
            ResolveError::Root {
                member: "fs",
                source: RootError::AbsoluteRootNotPortable {
                    hint: "/etc".to_owned()
                }
            }
        );
        assert!(matches!(
            error(r#"{"shell": {"roots": ["../shared"]}}"#)?,
            ResolveError::Root {
                member: "shell",
                source: RootError::RootEscapesCallerCwd { .. }
            }
        ));
        assert!(matches!(
            error(r#"{"dispatch": {"roots": ["missing"]}}"#)?,
            ResolveError::Root {
                member: "dispatch",
                source: RootError::NotADirectory { .. }
            }
        ));
        assert!(described(r#"{"fs": {"root": ["src"]}}"#).is_err());
        assert!(described(r#"{"files": true}"#).is_err());
        Ok(())
    }

    #[test]
    fn the_dispatch_launch_can_be_overridden() -> Result<(), Box<dyn std::error::Error>> {
        let task = task()?;
        let vars = |name: &str| match name {
            "TOOLGATE_DISPATCH_COMMAND" => Some("docker".to_owned()),
            "TOOLGATE_DISPATCH_ARGS" => {
                Some(r#"["run", "-i", "--rm", "toolgate:latest"]"#.to_owned())
            }
            _ => None,
        };
        let launcher = launcher().with_dispatch_override(vars)?;
        let tooling = described(r#"{"fs": true, "dispatch": true}"#)?;
        let map = resolve(&tooling, &task.cwd, &task.aliases, &launcher)?.by_name();
        assert_eq!(map["dispatch"].command, "docker");
        assert_eq!(
            map["dispatch"].args[..5],
            ["run", "-i", "--rm", "toolgate:latest", "mcp"]
        );
        // Only dispatch is overridden.
        assert_eq!(map["fs"].command, "/opt/toolgate/bin/toolgate");
        let words = launcher_with(|name| {
            (name == "TOOLGATE_DISPATCH_ARGS").then(|| "exec toolgate".to_owned())
        })?;
        assert_eq!(
            words.dispatch,
            Some((
                "/opt/toolgate/bin/toolgate".to_owned(),
                vec!["exec".to_owned(), "toolgate".to_owned()]
            ))
        );
        assert!(launcher_with(|_| Some("[1, 2]".to_owned())).is_err());
        Ok(())
    }

    fn launcher_with(vars: impl Fn(&str) -> Option<String>) -> Result<Launcher, ResolveError> {
        launcher().with_dispatch_override(vars)
    }
}

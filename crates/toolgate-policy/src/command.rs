//! The command policy layer: which shell commands a bash tool call may run.
//!
//! Given the `command` argument of a bash tool, [`CommandPolicy::check`]
//! parses it with tree-sitter-bash and finds every command it would run:
//! in lists, pipelines, subshells, substitutions, control flow, function
//! bodies, behind wrappers (`sudo`, `env`, `timeout`, `xargs`, `find -exec`,
//! ...), inside shell strings (`bash -c '...'`, `eval`) and in heredocs or
//! here-strings fed to a shell. It denies the script if any of them is a
//! denied binary, matches a denied pattern, is a fork bomb or overwrites a
//! block device.
//!
//! What this layer is: defence in depth, a cheap early "no" with a clear
//! reason for the obvious ways to run a dangerous command, including the
//! usual disguises (quoting, paths, wrappers, nested shells).
//!
//! What it is not: a security boundary. Shell is too dynamic to analyse
//! completely (a command name can come from a variable, a file, the network),
//! so scripts we cannot analyse are reported as
//! [`CommandVerdict::Unanalysable`] and the caller applies
//! [`ParseFallback`]. The OS sandbox is what actually contains a command.
//! Nor does it look into script files (`bash x.sh`, `make`), other
//! interpreters (`python -c`, `perl -e`, `awk 'BEGIN{system(...)}'`),
//! remote commands (`ssh host cmd`) or wrappers it does not know.
//!
//! Layout: `parse` walks the syntax tree; `words` resolves the quoting and
//! expansions of single words; `wrappers` knows what `sudo`, `env`,
//! `bash -c`, `find -exec` ... run; this file holds the policy and its rules.

mod allow;
mod launchers;
mod parse;
mod prefix;
mod words;
mod wrappers;

use std::collections::{HashMap, HashSet};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use regex::{Regex, RegexBuilder};

use parse::{Analysis, WriteKind};
pub use parse::{SimpleCommand, extract_commands};
pub use prefix::MAX_PREFIX_WORDS;
pub(crate) use prefix::common_prefix;

/// Binaries `standard()` denies: they take the whole machine down.
const STANDARD_DENY_BINARIES: &[&str] = &["shutdown", "reboot", "halt", "poweroff", "mkfs*"];

/// Patterns `standard()` denies: the same power-off by other means.
const STANDARD_DENY_PATTERNS: &[&str] = &[
    r"^systemctl( -\S+)* (poweroff|reboot|halt|kexec)\b",
    r"^(init|telinit) [06]$",
];

/// Block devices under `/dev/` (by name prefix) that a write would corrupt.
const BLOCK_DEVICE_PREFIXES: &[&str] = &[
    "sd", "hd", "vd", "xvd", "nvme", "mmcblk", "disk", "loop", "dm-", "mapper/", "md", "nbd", "zd",
    "block/",
];

/// Caps the work fork bomb detection may do on an adversarial call graph.
const MAX_CALL_GRAPH_STEPS: usize = 100_000;

/// What to do with a script tree-sitter cannot parse (or whose command name is only known at run time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ParseFallback {
    /// Refuse the call.
    Deny,
    /// Let it through: the sandbox is the boundary.
    Sandbox,
}

/// Denied binaries and patterns, checked against every command of a script.
#[derive(Debug, Clone)]
pub struct CommandPolicy {
    deny_binaries: Vec<String>,
    /// `None` if the deny list could not be compiled: then every command is
    /// denied (fail closed) rather than none.
    binary_matcher: Option<GlobSet>,
    deny_patterns: Vec<Regex>,
    on_parse_error: ParseFallback,
    /// When set, only these commands may run (and unanalysable scripts are
    /// refused, whatever the fallback).
    allow: Option<allow::AllowList>,
}

/// The outcome of [`CommandPolicy::check`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandVerdict {
    /// Every command is allowed; lists the base names found, in source order (for `policy explain`).
    Allowed { commands: Vec<String> },
    /// `command` is the offending command's text; `reason` says which rule.
    Denied { command: String, reason: String },
    /// The script could not be analysed (syntax error, or a command name that
    /// is only known at run time such as `$(echo rm)` or `$X`); reason
    /// explains. The caller applies `parse_fallback()`.
    Unanalysable { reason: String },
}

/// A deny list entry that does not compile.
#[derive(Debug, thiserror::Error)]
pub enum CommandPolicyError {
    #[error(
        "invalid deny_binaries entry `{pattern}`: {reason} (expected a glob over a command's base name, such as `shutdown` or `mkfs*`)"
    )]
    InvalidGlob { pattern: String, reason: String },
    #[error(
        "invalid deny_patterns entry `{pattern}`: {reason} (expected a regular expression matched against one command's text, such as `rm -rf /`)"
    )]
    InvalidRegex { pattern: String, reason: String },
    #[error(
        "invalid allow pattern `{pattern}`: {reason} (expected a regular expression matched against one command's text from its start, such as `^npm (test|run build)$`)"
    )]
    InvalidAllowPattern { pattern: String, reason: String },
    #[error("invalid allowed command `{name}`: {reason}")]
    InvalidAllowedCommand { name: String, reason: String },
}

impl Default for CommandPolicy {
    fn default() -> Self {
        Self::standard()
    }
}

impl CommandPolicy {
    /// deny_binaries: glob patterns over the command's base name (`shutdown`, `mkfs*`);
    /// deny_patterns: regexes matched against each single command's text
    /// (whitespace-normalised: words joined by one space), not the whole script.
    ///
    /// Fork bombs and writes to block devices are always denied.
    pub fn new(
        deny_binaries: &[String],
        deny_patterns: &[String],
        on_parse_error: ParseFallback,
    ) -> Result<Self, CommandPolicyError> {
        let binary_matcher = Some(build_binary_matcher(deny_binaries)?);
        let deny_patterns = deny_patterns
            .iter()
            .map(|p| compile_pattern(p))
            .collect::<Result<_, _>>()?;
        Ok(Self {
            deny_binaries: deny_binaries.to_vec(),
            binary_matcher,
            deny_patterns,
            on_parse_error,
            allow: None,
        })
    }

    /// The default policy: denies shutdown, reboot, halt, poweroff and
    /// `mkfs*`, with fallback Sandbox.
    pub fn standard() -> Self {
        let binaries: Vec<String> = STANDARD_DENY_BINARIES
            .iter()
            .map(|b| b.to_string())
            .collect();
        let patterns: Vec<String> = STANDARD_DENY_PATTERNS
            .iter()
            .map(|p| p.to_string())
            .collect();
        match Self::new(&binaries, &patterns, ParseFallback::Sandbox) {
            Ok(policy) => policy,
            // Cannot happen (the defaults are constant, and tested); if it
            // did, deny everything rather than run without the defaults.
            Err(_) => Self {
                deny_binaries: binaries,
                binary_matcher: None,
                deny_patterns: Vec::new(),
                on_parse_error: ParseFallback::Deny,
                allow: None,
            },
        }
    }

    pub fn with_parse_fallback(self, f: ParseFallback) -> Self {
        Self {
            on_parse_error: f,
            ..self
        }
    }

    pub fn parse_fallback(&self) -> ParseFallback {
        self.on_parse_error
    }

    /// Adds a glob to the denied binaries (used when a config adds entries to the defaults).
    pub fn deny_binary(mut self, pattern: &str) -> Result<Self, CommandPolicyError> {
        self.deny_binaries.push(pattern.to_string());
        self.binary_matcher = Some(build_binary_matcher(&self.deny_binaries)?);
        Ok(self)
    }

    /// Adds a regex to the denied patterns.
    pub fn deny_pattern(mut self, regex: &str) -> Result<Self, CommandPolicyError> {
        self.deny_patterns.push(compile_pattern(regex)?);
        Ok(self)
    }

    /// Allows only `commands` and commands whose text matches one of
    /// `patterns` from its start; shell builtins that run nothing else (`cd`,
    /// `export`, `test`, ...) need not be listed. An empty list with no
    /// patterns allows only those builtins. The deny lists still apply, and a
    /// script whose commands cannot all be named is refused.
    ///
    /// A bare name (`ls`) allows the program found on the sandbox's PATH,
    /// called by that name; a program called by a path (`./ls`, `/tmp/x/ls`,
    /// `/usr/bin/ls`) runs only when that exact absolute path is listed.
    /// Under an allowlist a script may not change what a name finds
    /// (assignments to `PATH` and to the variables of
    /// [`toolgate_core::command_env`]), and listed programs may not be told
    /// to run other programs where the command line shows it (`git -c
    /// alias.x='!cmd'`, `awk 'BEGIN{system(…)}'`, ...). Programs that run
    /// programs from files (`make`, `npm run`, a script) are not followed:
    /// listing them limits what is started first, not what it can do.
    pub fn allow_only(
        mut self,
        commands: &[String],
        patterns: &[String],
    ) -> Result<Self, CommandPolicyError> {
        self.allow = Some(allow::AllowList::new(commands, patterns)?);
        Ok(self)
    }

    /// Checks every command `script` would run. A denial anywhere wins over
    /// parts that cannot be analysed.
    pub fn check(&self, script: &str) -> CommandVerdict {
        let analysis = parse::analyse(script);
        if let Some(denied) = self.first_denial(&analysis) {
            return denied;
        }
        if let Some(allow) = &self.allow {
            for command in &analysis.commands {
                if let Some(reason) = allow.refusal(command) {
                    return CommandVerdict::Denied {
                        command: command.text.clone(),
                        reason,
                    };
                }
            }
            if let Some(launch) = analysis.launches.first() {
                return CommandVerdict::Denied {
                    command: launch.command.clone(),
                    reason: format!(
                        "{}; under a command allowlist a listed program may not be told to run another",
                        launch.reason
                    ),
                };
            }
            for assignment in &analysis.assignments {
                if let Some(why) = allow::assignment_refusal(&assignment.name) {
                    return CommandVerdict::Denied {
                        command: assignment.command.clone(),
                        reason: format!(
                            "sets `{}` ({why}); under a command allowlist a script may not set it",
                            assignment.name
                        ),
                    };
                }
            }
            // Under an allowlist the sandbox fallback is not enough: what
            // cannot be named cannot be checked against the list.
            if let Some(problem) = analysis.problems.first() {
                return CommandVerdict::Denied {
                    command: parse::short(script).to_string(),
                    reason: format!(
                        "{problem}; only scripts whose commands can all be named may run"
                    ),
                };
            }
        }
        if let Some(reason) = analysis.problems.into_iter().next() {
            return CommandVerdict::Unanalysable { reason };
        }
        if let Some(dynamic) = analysis.commands.iter().find(|c| c.dynamic_name) {
            return CommandVerdict::Unanalysable {
                reason: format!(
                    "the command name `{}` in `{}` is only known at run time",
                    parse::short(&dynamic.name),
                    parse::short(&dynamic.text)
                ),
            };
        }
        CommandVerdict::Allowed {
            commands: analysis.commands.into_iter().map(|c| c.name).collect(),
        }
    }

    fn first_denial(&self, analysis: &Analysis) -> Option<CommandVerdict> {
        let denied = |command: &str, reason: String| CommandVerdict::Denied {
            command: command.to_string(),
            reason,
        };
        for command in &analysis.commands {
            if let Some(reason) = self.command_denial(command) {
                return Some(denied(&command.text, reason));
            }
        }
        for write in &analysis.device_writes {
            if let Some(device) = block_device(&write.target) {
                let how = match write.kind {
                    WriteKind::Dd => "dd writes to",
                    WriteKind::Tee => "tee writes to",
                    WriteKind::Redirect => "redirects output to",
                };
                return Some(denied(
                    &write.command,
                    format!("{how} the block device {device}"),
                ));
            }
        }
        fork_bomb(analysis).map(|(text, reason)| denied(&text, reason))
    }

    fn command_denial(&self, command: &SimpleCommand) -> Option<String> {
        if let Some(reason) = self.binary_denial(&command.name) {
            return Some(reason);
        }
        let pattern = first_matching(&self.deny_patterns, command)?;
        Some(format!("matches the denied pattern `{}`", pattern.as_str()))
    }

    fn binary_denial(&self, name: &str) -> Option<String> {
        let Some(matcher) = &self.binary_matcher else {
            return Some(
                "the deny_binaries list could not be compiled, so every command is denied"
                    .to_string(),
            );
        };
        let index = matcher.matches(name).into_iter().next()?;
        let pattern = self.deny_binaries.get(index).map_or("", String::as_str);
        Some(match pattern.eq_ignore_ascii_case(name) {
            true => format!("`{name}` is a denied command"),
            false => format!("`{name}` is a denied command (matches `{pattern}`)"),
        })
    }
}

/// The first of `patterns` that matches `command`, as written or with its
/// program's base name: `/bin/rm -rf /` matches as `rm -rf /` too, so patterns
/// need not anticipate every path a binary can be called by.
fn first_matching<'p>(patterns: &'p [Regex], command: &SimpleCommand) -> Option<&'p Regex> {
    let canonical = std::iter::once(command.name.as_str())
        .chain(command.args.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(" ");
    patterns
        .iter()
        .find(|p| p.is_match(&command.text) || p.is_match(&canonical))
}

fn build_binary_matcher(patterns: &[String]) -> Result<GlobSet, CommandPolicyError> {
    let invalid = |pattern: &str, reason: &str| CommandPolicyError::InvalidGlob {
        pattern: pattern.to_string(),
        reason: reason.to_string(),
    };
    let mut set = GlobSetBuilder::new();
    for pattern in patterns {
        if pattern.trim().is_empty() {
            return Err(invalid(pattern, "it is empty"));
        }
        if pattern.contains('/') {
            return Err(invalid(
                pattern,
                "it contains `/`, but it is matched against base names only (write `shutdown`, not `/sbin/shutdown`)",
            ));
        }
        // Case-insensitive: on a case-insensitive file system `SHUTDOWN` runs shutdown.
        let glob = GlobBuilder::new(pattern)
            .case_insensitive(true)
            .build()
            .map_err(|e| invalid(pattern, &e.kind().to_string()))?;
        set.add(glob);
    }
    set.build()
        .map_err(|e| invalid(&patterns.join(", "), &e.to_string()))
}

fn compile_pattern(pattern: &str) -> Result<Regex, CommandPolicyError> {
    let invalid = |reason: String| CommandPolicyError::InvalidRegex {
        pattern: pattern.to_string(),
        reason,
    };
    if pattern.is_empty() {
        return Err(invalid(
            "it is empty and would deny every command".to_string(),
        ));
    }
    RegexBuilder::new(pattern)
        .build()
        .map_err(|e| invalid(e.to_string()))
}

/// The device named by `path` if it is a block device, after lexical
/// normalisation so `/dev/./sda` and `/dev/../dev/sda` do not slip through.
fn block_device(path: &str) -> Option<String> {
    if !path.starts_with('/') {
        return None;
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            _ => parts.push(part),
        }
    }
    let device = parts.join("/");
    let name = device.strip_prefix("dev/")?;
    let is_block = name == "root" || BLOCK_DEVICE_PREFIXES.iter().any(|p| name.starts_with(p));
    is_block.then(|| format!("/{device}"))
}

/// A function that starts copies of itself in new processes (`:(){ :|:& };:`)
/// exhausts the process table. Found structurally: a call that forks (in a
/// pipeline, in the background, in a subshell) from a function to a function
/// that calls back to it, directly or through other functions. Plain
/// sequential recursion (`walk(){ ...; walk "$d"; }`) is not a fork bomb.
/// Returns the function's text and the reason.
fn fork_bomb(analysis: &Analysis) -> Option<(String, String)> {
    let mut calls: HashMap<&str, Vec<&str>> = HashMap::new();
    let mut forking: Vec<(usize, &str)> = Vec::new();
    let defined: HashSet<&str> = analysis.functions.iter().map(|f| f.name.as_str()).collect();
    for call in &analysis.calls {
        let Some(caller) = analysis.functions.get(call.caller) else {
            continue;
        };
        if !defined.contains(call.callee.as_str()) {
            continue;
        }
        calls.entry(&caller.name).or_default().push(&call.callee);
        if call.forks {
            forking.push((call.caller, &call.callee));
        }
    }
    let mut budget = MAX_CALL_GRAPH_STEPS;
    for (caller, callee) in forking {
        let function = analysis.functions.get(caller)?;
        if reaches(&calls, callee, &function.name, &mut budget) {
            let reason = format!(
                "fork bomb: function `{}` starts copies of itself in new processes",
                function.name
            );
            return Some((function.text.clone(), reason));
        }
    }
    None
}

/// Whether `to` is reachable from `from` in the call graph.
fn reaches(calls: &HashMap<&str, Vec<&str>>, from: &str, to: &str, budget: &mut usize) -> bool {
    let mut seen = HashSet::new();
    let mut pending = vec![from];
    while let Some(name) = pending.pop() {
        if name == to {
            return true;
        }
        if *budget == 0 {
            return false;
        }
        *budget -= 1;
        if seen.insert(name) {
            pending.extend(calls.get(name).into_iter().flatten());
        }
    }
    false
}

#[cfg(test)]
mod tests;

//! `neuron_packages`: the toolchains and package managers a sandboxed
//! command can run, with their versions.
//!
//! One `bash -c` script probes a fixed list inside the sandbox (what the
//! host has outside it does not matter: commands run inside). The probes
//! run concurrently, each under a timeout, and print one line each. The
//! answer is cached for the life of the process: toolchains rarely change
//! under a running agent, and the probe costs seconds.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::OnceCell;
use toolgate_core::{CallContext, EffectClass, ToolError, ToolOutput, ToolSpec, TypedTool};
use toolgate_sandbox::SandboxCommand;

use super::{GROUP, exec_error};
use crate::facts_schema;
use crate::fs::Fs;

/// What is probed, and the arguments that make each print its version.
/// Fixed here, never from a caller: the script interpolates these names.
const PROBES: &[(&str, &str)] = &[
    ("bash", "--version"),
    ("python3", "--version"),
    ("python", "--version"),
    ("pip", "--version"),
    ("pip3", "--version"),
    ("uv", "--version"),
    ("pipx", "--version"),
    ("poetry", "--version"),
    ("conda", "--version"),
    ("node", "--version"),
    ("npm", "--version"),
    ("pnpm", "--version"),
    ("yarn", "--version"),
    ("deno", "--version"),
    ("bun", "--version"),
    ("cargo", "--version"),
    ("rustc", "--version"),
    ("rustup", "--version"),
    ("go", "version"),
    ("java", "-version"),
    ("javac", "-version"),
    ("mvn", "--version"),
    ("gradle", "--version"),
    ("gcc", "--version"),
    ("g++", "--version"),
    ("clang", "--version"),
    ("make", "--version"),
    ("cmake", "--version"),
    ("ninja", "--version"),
    ("git", "--version"),
    ("ruby", "--version"),
    ("gem", "--version"),
    ("perl", "--version"),
    ("php", "--version"),
    ("dotnet", "--version"),
    ("apt-get", "--version"),
    ("apk", "--version"),
    ("dnf", "--version"),
    ("brew", "--version"),
];

/// Seconds one probe may take (a JVM launcher can be slow).
const PROBE_TIMEOUT_SECS: u32 = 10;

/// Arguments of `neuron_packages` (none).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PackagesArgs {}

/// One program found in the sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Package {
    /// The name probed.
    pub name: String,
    /// Where `command -v` found it.
    pub path: String,
    /// The version number read from its output, when one was recognised.
    pub version: Option<String>,
    /// The first line of its version output.
    pub line: String,
}

/// What the probe found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Inventory {
    /// Found programs, in probe order.
    pub found: Vec<Package>,
    /// Names not on the sandbox's PATH.
    pub missing: Vec<String>,
}

/// The `neuron_packages` tool.
pub struct PackagesTool {
    fs: Arc<Fs>,
    cache: OnceCell<Arc<Inventory>>,
}

impl PackagesTool {
    /// `neuron_packages` probing inside `fs`'s workspace sandbox.
    pub fn new(fs: Arc<Fs>) -> PackagesTool {
        PackagesTool {
            fs,
            cache: OnceCell::new(),
        }
    }

    async fn probe(&self) -> Result<Arc<Inventory>, ToolError> {
        let command = SandboxCommand::shell(&probe_script())
            .timeout(Duration::from_secs(u64::from(PROBE_TIMEOUT_SECS) * 3));
        let outcome = self
            .fs
            .workspace()
            .exec(command, None)
            .await
            .map_err(|e| exec_error("probe the installed programs", e))?;
        let out = &outcome.outcome;
        if out.exit_code != 0 || out.timed_out {
            return Err(ToolError::Failed(format!(
                "the package probe failed in the sandbox (exit {}{}): {}",
                out.exit_code,
                if out.timed_out { ", timed out" } else { "" },
                out.stderr.trim()
            )));
        }
        Ok(Arc::new(parse_probe(&out.stdout)))
    }
}

#[async_trait]
impl TypedTool for PackagesTool {
    type Args = PackagesArgs;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "neuron_packages",
            "List the language toolchains and package managers a sandboxed command can run \
             (python3, pip, uv, node, npm, cargo, go, java, gcc, make, git, ...) with their \
             versions and paths, and which are missing. Use it before choosing how to build, \
             test or install something, instead of probing with several commands.",
            EffectClass::Read,
        )
        .group(GROUP)
        .parallel_safe(true)
        .output_schema(facts_schema())
    }

    async fn run(&self, _args: PackagesArgs, _ctx: &CallContext) -> Result<ToolOutput, ToolError> {
        let inventory = self.cache.get_or_try_init(|| self.probe()).await?;
        let mut text = String::new();
        for p in &inventory.found {
            let version = p.version.as_deref().unwrap_or("?");
            text.push_str(&format!("{:<8} {version:<12} {}\n", p.name, p.path));
        }
        if inventory.found.is_empty() {
            text.push_str("[none of the probed programs is on the sandbox's PATH]\n");
        }
        if !inventory.missing.is_empty() {
            text.push_str(&format!("missing: {}\n", inventory.missing.join(", ")));
        }
        Ok(ToolOutput::text(text).with_structured(json!({
            "found": inventory.found,
            "missing": inventory.missing,
        })))
    }
}

/// The facts of [`PackagesTool::run`]: the [`Inventory`] as it serializes.
fn facts_schema() -> Value {
    let package = facts_schema::object(
        json!({
            "name": {"type": "string", "description": "The program."},
            "path": {"type": "string", "description": "Where the sandbox's PATH finds it."},
            "version": {
                "type": ["string", "null"],
                "description": "Its version number; null when none was recognised in line.",
            },
            "line": {"type": "string", "description": "The first line of its version output."},
        }),
        &["name", "path", "version", "line"],
    );
    facts_schema::object(
        json!({
            "found": {
                "type": "array",
                "items": package,
                "description": "Programs a sandboxed command can run.",
            },
            "missing": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Probed programs not on the sandbox's PATH.",
            },
        }),
        &["found", "missing"],
    )
}

/// The probe script: one line per program, `FOUND\tname\tpath\toutput` or
/// `MISSING\tname`. Probes run concurrently; each line is one `printf` of
/// well under PIPE_BUF bytes, so lines never interleave.
fn probe_script() -> String {
    let mut script = format!(
        r#"command -v timeout >/dev/null 2>&1 || timeout() {{ shift; "$@"; }}
probe() {{
  local path out
  path=$(command -v -- "$1" 2>/dev/null) || {{ printf 'MISSING\t%s\n' "$1"; return 0; }}
  out=$(timeout {PROBE_TIMEOUT_SECS} "$@" </dev/null 2>&1 | head -c 2000 | tr '\t\r' '  ' | tr '\n' '\036')
  printf 'FOUND\t%s\t%s\t%s\n' "$1" "$path" "${{out:0:400}}"
}}
"#
    );
    for (name, arg) in PROBES {
        // Names and arguments are constants without quotes; quoted anyway.
        script.push_str(&format!("probe '{name}' '{arg}' &\n"));
    }
    script.push_str("wait\n");
    script
}

/// Reads the probe's lines, in [`PROBES`] order.
fn parse_probe(stdout: &str) -> Inventory {
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for line in stdout.lines() {
        let mut fields = line.split('\t');
        match (fields.next(), fields.next()) {
            (Some("FOUND"), Some(name)) => {
                let path = fields.next().unwrap_or_default().to_owned();
                let output = fields.next().unwrap_or_default();
                let first = output
                    .split('\u{1e}')
                    .map(str::trim)
                    .find(|l| !l.is_empty())
                    .unwrap_or_default();
                found.push(Package {
                    name: name.to_owned(),
                    path,
                    version: version_in(&output.replace('\u{1e}', " ")),
                    line: first.to_owned(),
                });
            }
            (Some("MISSING"), Some(name)) => missing.push(name.to_owned()),
            _ => {}
        }
    }
    let order = |name: &str| PROBES.iter().position(|(n, _)| *n == name);
    found.sort_by_key(|p| order(&p.name));
    missing.sort_by_key(|n| order(n));
    Inventory { found, missing }
}

/// The first version-looking word of `text` outside parentheses (else
/// inside them): digits with at least one dot, after an optional `v` or
/// `go` prefix and quotes (`v20.1.0`, `go1.22.1`, `"17.0.2"`,
/// `5.2.15(1)-release` -> `5.2.15`; `gcc (Debian 12.2.0-14) 12.2.0` -> `12.2.0`).
fn version_in(text: &str) -> Option<String> {
    let mut depth = 0usize;
    let mut outside = Vec::new();
    let mut inside = Vec::new();
    for word in text.split_whitespace() {
        let in_parens = depth > 0 || word.starts_with('(');
        depth = (depth + word.matches('(').count()).saturating_sub(word.matches(')').count());
        if in_parens {
            inside.push(word);
        } else {
            outside.push(word);
        }
    }
    outside
        .into_iter()
        .find_map(version_word)
        .or_else(|| inside.into_iter().find_map(version_word))
}

fn version_word(word: &str) -> Option<String> {
    let word = word.trim_matches(|c: char| matches!(c, '"' | '\'' | '(' | ')' | ',' | ';'));
    let word = word
        .strip_prefix("go")
        .or_else(|| word.strip_prefix('v'))
        .unwrap_or(word);
    if !word.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let end = word
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+' | '_')))
        .unwrap_or(word.len());
    let version = word[..end].trim_end_matches(['.', '-', '+', '_']);
    let (major, _) = version.split_once('.')?;
    major
        .chars()
        .all(|c| c.is_ascii_digit())
        .then(|| version.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn versions_are_found_in_real_outputs() {
        let cases = [
            ("Python 3.12.1", Some("3.12.1")),
            (
                "pip 24.0 from /usr/lib/python3/dist-packages/pip (python 3.12)",
                Some("24.0"),
            ),
            ("v20.11.1", Some("20.11.1")),
            ("go version go1.22.1 linux/amd64", Some("1.22.1")),
            (
                "openjdk version \"17.0.2\" 2022-01-18 OpenJDK Runtime",
                Some("17.0.2"),
            ),
            (
                "GNU bash, version 5.2.15(1)-release (x86_64-pc-linux-gnu)",
                Some("5.2.15"),
            ),
            ("cargo 1.90.0 (840b83a10 2025-07-30)", Some("1.90.0")),
            ("gcc (Debian 12.2.0-14+deb12u1) 12.2.0", Some("12.2.0")),
            ("tool (built with 1.2.3)", Some("1.2.3")),
            ("git version 2.39.2", Some("2.39.2")),
            ("uv 0.4.18", Some("0.4.18")),
            ("no version here 2024-01-01", None),
            ("", None),
        ];
        for (text, want) in cases {
            assert_eq!(version_in(text).as_deref(), want, "{text}");
        }
    }

    #[test]
    fn probe_lines_parse_in_probe_order() {
        let stdout = "MISSING\tdeno\n\
                      FOUND\tgit\t/usr/bin/git\tgit version 2.39.2\u{1e}\n\
                      FOUND\tbash\t/usr/bin/bash\t\u{1e}GNU bash, version 5.2.15(1)-release\u{1e}more\n\
                      garbage line\n\
                      MISSING\tbun\n";
        let inventory = parse_probe(stdout);
        assert_eq!(
            inventory,
            Inventory {
                found: vec![
                    Package {
                        name: "bash".into(),
                        path: "/usr/bin/bash".into(),
                        version: Some("5.2.15".into()),
                        line: "GNU bash, version 5.2.15(1)-release".into(),
                    },
                    Package {
                        name: "git".into(),
                        path: "/usr/bin/git".into(),
                        version: Some("2.39.2".into()),
                        line: "git version 2.39.2".into(),
                    },
                ],
                missing: vec!["deno".into(), "bun".into()],
            }
        );
    }

    #[test]
    fn the_script_probes_every_name_quoted() {
        let script = probe_script();
        for (name, _) in PROBES {
            assert!(script.contains(&format!("probe '{name}' ")), "{name}");
            assert!(!name.contains('\''), "{name}");
        }
    }
}

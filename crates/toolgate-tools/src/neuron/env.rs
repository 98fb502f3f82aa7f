//! `neuron_env`: the environment a sandboxed command sees.
//!
//! Taken inside the sandbox (`env -0`), because that is what commands get:
//! the sandbox passes a few default variables and the names the operator
//! configured, never the host's whole environment. Values of secret-looking
//! names are redacted before anything reaches the model: the model's
//! context is logged and may be sent elsewhere, and an agent that needs a
//! token should use it, not read it.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use toolgate_core::{CallContext, EffectClass, ToolError, ToolOutput, ToolSpec, TypedTool};
use toolgate_sandbox::SandboxCommand;

use super::{GROUP, RuntimeFacts, exec_error};
use crate::facts_schema;
use crate::fs::Fs;

/// What a redacted value is replaced with.
pub const REDACTED: &str = "[redacted]";

/// Substrings (upper case) that make a variable's name secret-looking.
const SECRET_MARKERS: &[&str] = &[
    "TOKEN",
    "SECRET",
    "KEY",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
    "SESSION",
    "PRIVATE",
];

/// Arguments of `neuron_env` (none).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EnvArgs {}

/// The `neuron_env` tool.
pub struct EnvTool {
    fs: Arc<Fs>,
    facts: Arc<RuntimeFacts>,
}

impl EnvTool {
    /// `neuron_env` in `fs`'s workspace sandbox, passing `facts.pass_env`
    /// like the command tools do.
    pub fn new(fs: Arc<Fs>, facts: Arc<RuntimeFacts>) -> EnvTool {
        EnvTool { fs, facts }
    }
}

/// Whether `name` looks like it holds a secret (case-insensitive substring
/// of TOKEN, SECRET, KEY, PASSWORD, PASSWD, CREDENTIAL, AUTH, COOKIE,
/// SESSION, PRIVATE).
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_MARKERS.iter().any(|marker| upper.contains(marker))
}

/// The value of `name` as the model may see it: [`REDACTED`] for a
/// secret-looking name; otherwise the value with the credentials of any
/// `scheme://user:password@host` URL in it redacted (proxy and registry
/// URLs carry them under innocent names).
pub fn redact(name: &str, value: &str) -> String {
    if is_secret_name(name) {
        return REDACTED.to_owned();
    }
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let authority_end = tail.find(['/', ' ', ',', ';']).unwrap_or(tail.len());
        match tail[..authority_end].rfind('@') {
            Some(userinfo_end) => {
                out.push_str(REDACTED);
                rest = &tail[userinfo_end..];
            }
            None => rest = tail,
        }
    }
    out.push_str(rest);
    out
}

#[async_trait]
impl TypedTool for EnvTool {
    type Args = EnvArgs;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "neuron_env",
            "Show the environment variables a sandboxed command sees (PATH, HOME, LANG, the \
             variables the operator passes in), sorted by name; values of secret-looking names \
             (tokens, keys, passwords, ...) are shown as [redacted]. Use it when a command \
             behaves as if a variable were missing or different, or to check PATH.",
            EffectClass::Read,
        )
        .group(GROUP)
        .parallel_safe(true)
        .output_schema(facts_schema())
    }

    async fn run(&self, _args: EnvArgs, _ctx: &CallContext) -> Result<ToolOutput, ToolError> {
        let mut command = SandboxCommand::new(["env", "-0"]).timeout(Duration::from_secs(30));
        // The operator's list may name a variable no command gets
        // (`LD_PRELOAD`): show the environment commands really see.
        let passed =
            self.facts.pass_env.iter().filter(|name| {
                toolgate_core::command_env::program_changing_variable(name).is_none()
            });
        for name in passed {
            command = command.pass_env(name.clone());
        }
        let outcome = self
            .fs
            .workspace()
            .exec(command, None)
            .await
            .map_err(|e| exec_error("read the environment", e))?;
        let out = &outcome.outcome;
        if out.exit_code != 0 {
            return Err(ToolError::Failed(format!(
                "`env -0` failed in the sandbox (exit {}): {}",
                out.exit_code,
                out.stderr.trim()
            )));
        }
        let vars = parse_env(&out.stdout);
        let mut text = String::new();
        let mut map = Map::new();
        let mut redacted = Vec::new();
        for (name, value) in vars {
            let shown = redact(&name, &value);
            if is_secret_name(&name) {
                redacted.push(Value::String(name.clone()));
            }
            text.push_str(&format!("{name}={shown}\n"));
            map.insert(name, Value::String(shown));
        }
        Ok(ToolOutput::text(text).with_structured(json!({
            "vars": map,
            "redacted": redacted,
            "sandbox_backend": outcome.backend.as_str(),
        })))
    }
}

/// The facts of [`EnvTool::run`].
fn facts_schema() -> Value {
    facts_schema::object(
        json!({
            "vars": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "description": "Name -> value; values of secret-looking names are [redacted], \
                                credentials in URLs too.",
            },
            "redacted": {
                "type": "array",
                "items": {"type": "string"},
                "description": "The names whose values are hidden because they look secret.",
            },
            "sandbox_backend": {
                "enum": ["bwrap", "landlock", "none"],
                "description": "The sandbox the environment was read in.",
            },
        }),
        &["vars", "redacted", "sandbox_backend"],
    )
}

/// `NAME=VALUE\0` records, sorted by name (the last of a repeated name wins,
/// as in a shell).
fn parse_env(stdout: &str) -> Vec<(String, String)> {
    let mut vars: std::collections::BTreeMap<String, String> = std::collections::BTreeMap::new();
    for record in stdout.split('\0') {
        if let Some((name, value)) = record.split_once('=')
            && !name.is_empty()
        {
            vars.insert(name.to_owned(), value.to_owned());
        }
    }
    vars.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn secret_looking_names_are_redacted() {
        let cases = [
            ("GITHUB_TOKEN", "ghp_x", REDACTED),
            ("aws_secret_access_key", "abc", REDACTED),
            ("OPENAI_API_KEY", "sk-1", REDACTED),
            ("DB_PASSWORD", "hunter2", REDACTED),
            ("MYSQL_PWD_PASSWD", "x", REDACTED),
            ("GOOGLE_APPLICATION_CREDENTIALS", "/k.json", REDACTED),
            ("Proxy_Authorization", "Basic x", REDACTED),
            ("COOKIE_JAR", "a=b", REDACTED),
            ("SESSION_ID", "s", REDACTED),
            ("SSH_PRIVATE", "----", REDACTED),
            ("PATH", "/usr/bin:/bin", "/usr/bin:/bin"),
            ("LANG", "C.UTF-8", "C.UTF-8"),
            ("HOME", "/tmp", "/tmp"),
        ];
        for (name, value, want) in cases {
            assert_eq!(redact(name, value), want, "{name}");
        }
    }

    #[test]
    fn credentials_inside_urls_are_redacted() {
        let cases = [
            (
                "https://user:pw@registry.example/simple",
                "https://[redacted]@registry.example/simple",
            ),
            (
                "http://a:b@p1:8080,https://c@p2",
                "http://[redacted]@p1:8080,https://[redacted]@p2",
            ),
            ("https://example.com/a@b", "https://example.com/a@b"),
            ("git@github.com:x/y", "git@github.com:x/y"),
        ];
        for (value, want) in cases {
            assert_eq!(redact("INDEX_URL", value), want, "{value}");
        }
    }

    #[test]
    fn env_records_parse_sorted() {
        let got = parse_env("B=2\0A=x=y\0\0junk\0C=\0B=3\0");
        assert_eq!(
            got,
            vec![
                ("A".into(), "x=y".into()),
                ("B".into(), "3".into()),
                ("C".into(), String::new()),
            ]
        );
    }
}

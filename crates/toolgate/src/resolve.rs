//! `toolgate resolve`: the launch configurations of the native tool servers
//! for a task.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use serde_json::{Value, json};
use toolgate_mcp::resolve::{Launcher, NativeTooling, resolve};

use crate::config::{Environment, Settings};

/// What `toolgate resolve` was asked.
pub struct Request {
    pub description: Option<String>,
    pub cwd: Option<PathBuf>,
    pub config: Option<PathBuf>,
    pub json: bool,
}

pub fn run(settings: &Settings, env: &Environment, request: Request) -> Result<ExitCode> {
    let tooling = description(request.description.as_deref())?;
    let cwd = match request.cwd {
        Some(dir) => env.cwd.join(dir),
        None => env.cwd.clone(),
    };
    let program = std::env::current_exe().context("cannot find the toolgate binary")?;
    let mut launcher =
        Launcher::new(program).with_dispatch_override(|name| env.var(name).map(str::to_owned))?;
    launcher.config = request.config.map(|c| env.cwd.join(c));
    let resolution = resolve(&tooling, &cwd, &settings.root_aliases, &launcher)?;
    for warning in &resolution.warnings {
        eprintln!("toolgate: WARNING: {warning}");
    }
    let mut stdout = std::io::stdout().lock();
    if request.json {
        let servers: Vec<Value> = resolution
            .servers
            .iter()
            .map(|(name, config)| {
                let mut value = json!({ "name": name });
                if let (Value::Object(entry), Ok(Value::Object(fields))) =
                    (&mut value, serde_json::to_value(config))
                {
                    entry.extend(fields);
                }
                value
            })
            .collect();
        let out = json!({
            "servers": servers,
            "mcpServers": resolution.by_name(),
            "warnings": resolution.warnings,
        });
        writeln!(stdout, "{}", serde_json::to_string_pretty(&out)?)?;
    } else {
        for (name, config) in &resolution.servers {
            let words: Vec<String> = std::iter::once(&config.command)
                .chain(&config.args)
                .map(|w| quoted(w))
                .collect();
            writeln!(
                stdout,
                "{name}\t(cd {} && {})",
                quoted(&config.cwd.display().to_string()),
                words.join(" ")
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The description from the argument: JSON, `-` (stdin) or `@FILE`;
/// without one, all three servers with their defaults.
fn description(raw: Option<&str>) -> Result<NativeTooling> {
    let text = match raw {
        None => {
            return Ok(serde_json::from_str(
                r#"{"fs": true, "shell": true, "dispatch": true}"#,
            )?);
        }
        Some("-") => {
            let mut buf = String::new();
            std::io::stdin()
                .read_to_string(&mut buf)
                .context("cannot read the description from stdin")?;
            buf
        }
        Some(at) if at.starts_with('@') => std::fs::read_to_string(&at[1..])
            .with_context(|| format!("cannot read {}", &at[1..]))?,
        Some(json) => json.to_owned(),
    };
    serde_json::from_str(&text).with_context(|| {
        format!(
            "the description is not valid: {text:?}; expected JSON such as \
             '{{\"fs\": {{\"roots\": [\"src\"]}}, \"shell\": {{\"allow_commands\": [\"git\", \"ls\"]}}, \"dispatch\": true}}'"
        )
    })
}

/// A word as a POSIX shell reads it back.
fn quoted(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

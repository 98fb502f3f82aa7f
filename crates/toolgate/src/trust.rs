//! `toolgate trust`: let a project's `toolgate.toml` loosen the
//! configuration, for exactly its current content.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, anyhow, bail};
use serde_json::json;

use crate::config::{self, Environment};

/// One `toolgate trust` invocation.
pub struct Request {
    pub file: Option<PathBuf>,
    pub list: bool,
    pub revoke: bool,
    pub json: bool,
}

pub fn run(env: &Environment, request: Request) -> Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    if request.list {
        let files = config::trusted_files(env).map_err(|e| anyhow!(e))?;
        if request.json {
            let rows: Vec<_> = files
                .iter()
                .map(|(record, current)| {
                    json!({
                        "path": record.path,
                        "sha256": record.sha256,
                        "trusted_at": record.trusted_at,
                        "status": status(*current),
                    })
                })
                .collect();
            writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
        } else if files.is_empty() {
            writeln!(out, "no trusted files")?;
        } else {
            for (record, current) in &files {
                writeln!(
                    out,
                    "{}\t{}\ttrusted {}",
                    record.path.display(),
                    status(*current),
                    record.trusted_at
                )?;
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let path = match request.file {
        Some(file) => env.cwd.join(file),
        None => match config::discovered_project_file(env) {
            Some(path) => path,
            None => bail!(
                "no {} here or in any parent directory; name the file: toolgate trust FILE",
                config::PROJECT_FILE
            ),
        },
    };
    if request.revoke {
        let revoked = config::revoke_trust(env, &path).map_err(|e| anyhow!(e))?;
        if !revoked {
            bail!("{} was not trusted (toolgate trust --list)", path.display());
        }
        if request.json {
            writeln!(out, "{}", json!({"revoked": path}))?;
        } else {
            writeln!(
                out,
                "{} is no longer trusted: it may tighten toolgate's configuration, not loosen it",
                path.display()
            )?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let (record, loosening) = config::trust_project_file(env, &path)?;
    if request.json {
        let body = json!({
            "path": record.path,
            "sha256": record.sha256,
            "trusted_at": record.trusted_at,
            "now_applied": loosening,
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&body)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(
        out,
        "trusted {} as it is now (sha256 {}); any change to it voids the trust",
        record.path.display(),
        &record.sha256[..16]
    )?;
    if loosening.is_empty() {
        writeln!(out, "it loosens nothing: it applied in full already")?;
    } else {
        writeln!(out, "now applied as written:")?;
        for setting in &loosening {
            writeln!(out, "  {setting}")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn status(current: Option<bool>) -> &'static str {
    match current {
        Some(true) => "trusted",
        Some(false) => "changed since trusted (not applied)",
        None => "missing",
    }
}

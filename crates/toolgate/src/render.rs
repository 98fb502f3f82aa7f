//! What the commands print: tables for people, JSON with `--json`.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use serde_json::{Value, json};
use toolgate_core::Content;
use toolgate_policy::{Access, CallError, CallResult, Executor, Explanation};

use crate::config::Settings;

mod limits;
mod tool;
pub use tool::tool;

/// `toolgate tools`.
pub fn tools(executor: &Executor, settings: &Settings, as_json: bool) -> Result<()> {
    let statuses = executor.tools();
    let mut out = std::io::stdout().lock();
    if as_json {
        let rows: Vec<Value> = statuses
            .iter()
            .map(|s| {
                let (active, reason) = match &s.access {
                    Access::Active => (true, None),
                    Access::Inactive { reason } => (false, Some(reason)),
                };
                json!({
                    "name": s.spec.name,
                    "effect_class": s.spec.effect_class,
                    "idempotency": s.spec.idempotency,
                    "group": s.spec.group,
                    "version": s.spec.version,
                    "deferred": s.deferred,
                    "active": active,
                    "reason": reason,
                })
            })
            .collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
        return Ok(());
    }
    let cap = settings
        .policy
        .access
        .cap
        .map_or("none".to_owned(), |c| c.to_string());
    let preset = settings.preset.map_or("none".to_owned(), |p| p.to_string());
    let files: Vec<String> = settings
        .sources
        .files
        .iter()
        .map(|f| f.display().to_string())
        .collect();
    let config = if files.is_empty() {
        "embedded defaults".to_owned()
    } else {
        files.join(", ")
    };
    writeln!(
        out,
        "policy {} (cap {cap}), tool preset {preset}, config: {config}",
        settings.policy_preset
    )?;
    if statuses.is_empty() {
        writeln!(
            out,
            "no tools registered (add --demo for the demonstration tools)"
        )?;
        return Ok(());
    }
    let mut rows = vec![[
        "NAME".to_owned(),
        "CLASS".to_owned(),
        "IDEMPOTENCY".to_owned(),
        "GROUP".to_owned(),
        "STATUS".to_owned(),
    ]];
    for s in &statuses {
        let status = match &s.access {
            Access::Active if s.deferred => "deferred".to_owned(),
            Access::Active => "active".to_owned(),
            Access::Inactive { reason } => format!("inactive: {reason}"),
        };
        rows.push([
            s.spec.name.clone(),
            s.spec.effect_class.to_string(),
            s.spec.idempotency.map_or("-".to_owned(), |i| i.to_string()),
            s.spec.group.clone().unwrap_or_else(|| "-".to_owned()),
            status,
        ]);
    }
    write_table(&mut out, &rows)?;
    let active = statuses
        .iter()
        .filter(|s| s.access == Access::Active && !s.deferred)
        .count();
    writeln!(out, "{active} of {} tools active", statuses.len())?;
    for server in settings.mcp_servers.iter().filter(|s| s.unconfined()) {
        writeln!(
            out,
            "MCP server `{}` runs UNCONFINED, with toolgate's privileges (give it \
             `sandbox = {{ roots = [...] }}` to confine it)",
            server.name
        )?;
    }
    Ok(())
}

pub(crate) fn write_table<const N: usize>(
    out: &mut impl Write,
    rows: &[[String; N]],
) -> Result<()> {
    let mut widths = [0usize; N];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == N {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<width$}  ", width = widths[i]));
            }
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

/// `toolgate doctor`: exit 0 when a backend is usable, 1 when none is.
pub fn doctor(
    settings: &Settings,
    state_dir: &std::path::Path,
    smoke: Result<String, String>,
    store: Result<String, String>,
    as_json: bool,
) -> Result<ExitCode> {
    // Always a fresh probe here, which also refreshes the cached one.
    let probe = &toolgate_sandbox::Probe::run(None);
    probe.store(state_dir);
    let backend = probe.select(settings.backend);
    let mut out = std::io::stdout().lock();
    if as_json {
        let body = json!({
            "probe": probe,
            "backend_choice": settings.backend,
            "backend": backend.as_ref().ok(),
            "error": backend.as_ref().err().map(|e| e.to_string()),
            "weakening": backend.as_ref().ok().and_then(|b| probe.weakening(*b)),
            "limits": settings.limits.mechanisms(),
            "catalog": catalogue(settings, backend.as_ref().ok().copied()),
            "mcp_servers": settings.mcp_servers.iter().map(|s| json!({
                "name": s.name,
                "transport": s.kind(),
                "unconfined": s.unconfined(),
            })).collect::<Vec<_>>(),
            "store": match &store {
                Ok(backend) => json!({"ok": true, "backend": backend, "at": settings.store.shown()}),
                Err(error) => json!({"ok": false, "at": settings.store.shown(), "error": error}),
            },
            "smoke_test": match &smoke {
                Ok(report) => json!({"ok": true, "report": report}),
                Err(error) => json!({"ok": false, "error": error}),
            },
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&body)?)?;
    } else {
        let b = &probe.bwrap;
        let yes_no = |v: bool| if v { "yes" } else { "no" };
        let bwrap = match &b.path {
            Some(path) => format!(
                "{} ({}): user namespaces {}, /proc {}",
                path.display(),
                b.version.as_deref().unwrap_or("unknown version"),
                yes_no(b.user_namespace),
                yes_no(b.proc_mount)
            ),
            None => "not found".to_owned(),
        };
        let mut rows = vec![["bubblewrap".to_owned(), bwrap]];
        if let Some(error) = &b.error {
            rows.push(["".to_owned(), error.clone()]);
        }
        rows.push([
            "landlock".to_owned(),
            probe
                .landlock_abi
                .map_or("not available".to_owned(), |v| format!("ABI {v}")),
        ]);
        rows.push(["seccomp".to_owned(), yes_no(probe.seccomp).to_owned()]);
        rows.push([
            "uid".to_owned(),
            if probe.root {
                "0 (root: every sandboxed command still runs with no capability)".to_owned()
            } else {
                "not root".to_owned()
            },
        ]);
        let chosen = match &backend {
            Ok(b) if *b == toolgate_sandbox::Backend::None => {
                "none: commands run UNSANDBOXED (development only)".to_owned()
            }
            Ok(b) => b.as_str().to_owned(),
            Err(e) => format!("unavailable: {e}"),
        };
        rows.push(["backend".to_owned(), chosen]);
        rows.extend(crate::sandbox::weakening_rows(
            settings,
            probe,
            backend.clone().ok(),
        ));
        rows.extend(limits::rows(&settings.limits));
        rows.extend(crate::gateway::doctor_rows(settings));
        let catalog = catalogue(settings, backend.as_ref().ok().copied());
        rows.push([
            "catalogue".to_owned(),
            format!(
                "{}; gates: install {}, execute {} ([catalog]; a tenant's own in the store win)",
                catalog["runs"].as_str().unwrap_or_default(),
                settings.catalog.policies.install,
                settings.catalog.policies.execute
            ),
        ]);
        let smoke_line = match &smoke {
            Ok(report) => report.clone(),
            Err(error) => format!("FAILED: {error}"),
        };
        rows.push(["smoke test".to_owned(), smoke_line]);
        // Approvals, grants and the audit log: which store, and whether it opens.
        rows.push([
            "store".to_owned(),
            match &store {
                Ok(_) => format!("{} (approvals, grants, audit log)", settings.store.shown()),
                Err(error) => format!("FAILED: {error}"),
            },
        ]);
        write_table(&mut out, &rows)?;
    }
    Ok(if backend.is_ok() && smoke.is_ok() && store.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Whether catalogue tools can install and run here (only under
/// bubblewrap), and the configured gates.
fn catalogue(settings: &Settings, backend: Option<toolgate_sandbox::Backend>) -> Value {
    let runs = match backend {
        Some(toolgate_sandbox::Backend::Bwrap) => "installs and runs its tools under bubblewrap",
        _ => "UNAVAILABLE: catalogue tools install and run only under bubblewrap",
    };
    json!({
        "runs": runs,
        "available": backend == Some(toolgate_sandbox::Backend::Bwrap),
        "install": settings.catalog.policies.install,
        "execute": settings.catalog.policies.execute,
    })
}

/// `toolgate policy explain`.
pub fn explanation(explanation: &Explanation, as_json: bool) -> Result<()> {
    let mut out = std::io::stdout().lock();
    if as_json {
        writeln!(out, "{}", serde_json::to_string_pretty(explanation)?)?;
        return Ok(());
    }
    let rows: Vec<[String; 3]> = explanation
        .stages
        .iter()
        .map(|s| {
            let outcome = serde_json::to_value(s.outcome)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            [s.stage.as_str().to_owned(), outcome, s.detail.clone()]
        })
        .collect();
    write_table(&mut out, &rows)?;
    writeln!(out, "decision: {}", explanation.decision)?;
    Ok(())
}

/// The exit status of `toolgate call`, for scripts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallStatus {
    /// The tool ran and reports success (a command exited 0).
    Success = 0,
    /// The tool ran and reports failure, or failed (a refused path, a file
    /// that does not exist).
    ToolError = 1,
    /// The call itself is wrong: unknown tool, arguments that do not fit
    /// its schema (like errors in the command line, which also exit 2).
    Usage = 2,
    /// The tool ran a command to its end and it exited non-zero (or was
    /// killed by a signal); its code is `exit_code` in the facts.
    CommandFailed = 3,
    /// The command ran out of time and its process group was killed.
    TimedOut = 4,
    /// The policy did not let the call run: an inactive tool, a denied
    /// path, command or rule, or an approval that is needed, refused or
    /// pending.
    Denied = 5,
}

impl CallStatus {
    fn of_error(error: &CallError) -> CallStatus {
        match error {
            CallError::UnknownTool { .. } | CallError::InvalidArguments(_) => CallStatus::Usage,
            CallError::Inactive { .. }
            | CallError::Denied { .. }
            | CallError::ApprovalRequired { .. }
            | CallError::ApprovalRefused { .. }
            | CallError::ApprovalPending { .. } => CallStatus::Denied,
            _ => CallStatus::ToolError,
        }
    }

    /// From the facts of a tool that runs a command to completion (`bash`,
    /// `elevated`: `exit_code` and `timed_out` at the top). A background
    /// process's state (`process_*`) is not the call's outcome.
    fn of_result(result: &CallResult) -> CallStatus {
        let output = &result.output;
        if output.is_error {
            return CallStatus::ToolError;
        }
        let facts = output.structured.as_ref();
        let fact = |name: &str| facts.and_then(|f| f.get(name));
        if fact("timed_out").and_then(Value::as_bool) == Some(true) {
            CallStatus::TimedOut
        } else if fact("exit_code")
            .and_then(Value::as_i64)
            .is_some_and(|code| code != 0)
        {
            CallStatus::CommandFailed
        } else {
            CallStatus::Success
        }
    }
}

impl From<CallStatus> for ExitCode {
    fn from(status: CallStatus) -> ExitCode {
        ExitCode::from(status as u8)
    }
}

/// `toolgate call`: the text on stdout, or everything as JSON; an error on
/// stderr. The exit status is a [`CallStatus`].
pub fn call_result(
    tool: &str,
    result: Result<CallResult, CallError>,
    as_json: bool,
) -> Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    let result = match result {
        Ok(result) => result,
        Err(error) => {
            if as_json {
                let body = json!({
                    "tool": tool,
                    "error": error.to_string(),
                    "stage": error.stage().as_str(),
                });
                writeln!(out, "{}", serde_json::to_string_pretty(&body)?)?;
            } else {
                eprintln!("toolgate: {error}");
            }
            return Ok(CallStatus::of_error(&error).into());
        }
    };
    let code = CallStatus::of_result(&result).into();
    if as_json {
        let body = json!({
            "tool": tool,
            "content": result.output.content,
            "structured": result.output.structured,
            "is_error": result.output.is_error,
            "truncated": result.truncated,
            "full_output": result.full_output,
            "decision": result.decision,
            "duration_us": u64::try_from(result.duration.as_micros()).unwrap_or(u64::MAX),
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&body)?)?;
        return Ok(code);
    }
    for part in &result.output.content {
        match part {
            Content::Text { text } => {
                write!(out, "{text}")?;
                if !text.ends_with('\n') {
                    writeln!(out)?;
                }
            }
            Content::Image { mime_type, data } => {
                writeln!(out, "[image {mime_type}, {} bytes of base64]", data.len())?;
            }
            _ => {}
        }
    }
    Ok(code)
}

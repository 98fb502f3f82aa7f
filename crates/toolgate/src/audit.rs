//! `toolgate audit`: the log every call through the Executor appends to,
//! and `toolgate audit verify`, which walks its hash chain offline.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Result, bail};
use clap::{Args, Subcommand};
use serde_json::json;
use toolgate_store::{AuditEntry, AuditFilter, AuditVerdict};

use crate::approvals::{one_line, table};
use crate::config::Settings;
use crate::config::approvals::parse_duration;
use crate::store::{Opened, now_ms};

/// What of the log to show.
#[derive(Debug, Args)]
pub struct AuditArgs {
    /// Only calls of this tool.
    #[arg(long)]
    tool: Option<String>,
    /// Only calls of this agent.
    #[arg(long)]
    agent: Option<String>,
    /// Only this decision: allow, ask or deny.
    #[arg(long, value_parser = ["allow", "ask", "deny"])]
    decision: Option<String>,
    /// Only records since a time: a duration back from now (`1h`, `2d`) or
    /// an RFC 3339 time (`2026-12-04T09:00:00Z`).
    #[arg(long, value_name = "WHEN")]
    since: Option<String>,
    /// Print JSON: an array, or with --follow one object per line.
    #[arg(long)]
    json: bool,
    /// Keep printing records as they are appended, until interrupted.
    #[arg(long)]
    follow: bool,
}

/// `toolgate audit verify`.
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Check the hash chain: every record where it was written, unchanged,
    /// none removed or reordered. Exit 1 when it does not hold.
    Verify {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Runs `toolgate audit [verify]`.
pub fn run(
    command: Option<AuditCommand>,
    args: AuditArgs,
    settings: &Settings,
) -> Result<ExitCode> {
    let runtime = crate::runtime()?;
    runtime.block_on(async {
        let opened = crate::store::open(settings).await?;
        match command {
            Some(AuditCommand::Verify { json }) => verify(&opened, json).await,
            None => show(&opened, args).await,
        }
    })
}

fn since_ms(text: &str) -> Result<i64> {
    if let Ok(back) = parse_duration(text) {
        let back = i64::try_from(back.as_millis()).unwrap_or(i64::MAX);
        return Ok(now_ms().saturating_sub(back));
    }
    match chrono::DateTime::parse_from_rfc3339(text) {
        Ok(t) => Ok(t.timestamp_millis()),
        Err(_) => bail!(
            "--since: expected a duration back from now (`90m`, `1h`, `2d`) or an RFC 3339 time \
             (`2026-12-04T09:00:00Z`), got {text:?}"
        ),
    }
}

async fn show(opened: &Opened, args: AuditArgs) -> Result<ExitCode> {
    let mut filter = AuditFilter {
        tool: args.tool.clone(),
        agent: args.agent.clone(),
        decision: args.decision.clone(),
        since_ms: args.since.as_deref().map(since_ms).transpose()?,
        ..AuditFilter::default()
    };
    let entries = opened.store.audit(&opened.tenant, &filter).await?;
    let mut out = std::io::stdout().lock();
    if !args.follow {
        if args.json {
            writeln!(
                out,
                "{}",
                serde_json::to_string_pretty(&entries.iter().map(entry_json).collect::<Vec<_>>())?
            )?;
        } else if entries.is_empty() {
            writeln!(out, "no audit records ({})", opened.shown)?;
        } else {
            table(
                &mut out,
                &header(),
                &entries.iter().map(row).collect::<Vec<_>>(),
            )?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    if !args.json {
        table(
            &mut out,
            &header(),
            &entries.iter().map(row).collect::<Vec<_>>(),
        )?;
    }
    let print = |out: &mut std::io::StdoutLock<'_>, entries: &[AuditEntry]| -> Result<()> {
        for entry in entries {
            if args.json {
                writeln!(out, "{}", serde_json::to_string(&entry_json(entry))?)?;
            } else {
                // Past the header: the same columns, one line each.
                writeln!(out, "{}", row(entry).join("  "))?;
            }
        }
        out.flush()?;
        Ok(())
    };
    if args.json {
        print(&mut out, &entries)?;
    }
    let mut last = entries.iter().map(|e| e.seq).max().unwrap_or(0);
    drop(out);
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        filter.after_seq = Some(last);
        let entries = opened.store.audit(&opened.tenant, &filter).await?;
        last = entries.iter().map(|e| e.seq).max().unwrap_or(last);
        print(&mut std::io::stdout().lock(), &entries)?;
    }
}

fn header() -> [String; 9] {
    [
        "SEQ",
        "TIME",
        "AGENT",
        "TOOL",
        "DECISION",
        "STATUS",
        "EXIT",
        "MS",
        "ARGUMENTS",
    ]
    .map(str::to_owned)
}

fn row(entry: &AuditEntry) -> [String; 9] {
    let r = &entry.record;
    let decision = match (&r.grant_id, &r.approval_id) {
        (Some(grant), _) => format!("{} ({} via {grant})", r.decision, r.layer),
        (None, Some(id)) => format!("{} ({} {id})", r.decision, r.layer),
        (None, None) => format!("{} ({})", r.decision, r.layer),
    };
    [
        entry.seq.to_string(),
        r.time.clone(),
        r.agent.clone(),
        r.tool.clone(),
        decision,
        r.status.clone(),
        r.exit_code.map_or("-".to_owned(), |c| c.to_string()),
        r.duration_ms.to_string(),
        one_line(&r.arguments, 50),
    ]
}

/// One entry as JSON: the record's fields with the chain beside them.
fn entry_json(entry: &AuditEntry) -> serde_json::Value {
    let mut value = serde_json::to_value(&entry.record).unwrap_or_else(|_| json!({}));
    if let Some(object) = value.as_object_mut() {
        object.insert("seq".into(), json!(entry.seq));
        object.insert("tenant".into(), json!("default"));
        object.insert("prev_hash".into(), json!(entry.prev_hash));
        object.insert("hash".into(), json!(entry.hash));
    }
    value
}

async fn verify(opened: &Opened, as_json: bool) -> Result<ExitCode> {
    let verdict = opened.store.verify_audit(&opened.tenant).await?;
    let mut out = std::io::stdout().lock();
    if as_json {
        let body = match &verdict {
            AuditVerdict::Intact { records } => {
                json!({"intact": true, "records": records, "store": opened.shown})
            }
            AuditVerdict::Broken { seq, what } => {
                json!({"intact": false, "seq": seq, "what": what, "store": opened.shown})
            }
        };
        writeln!(out, "{}", serde_json::to_string_pretty(&body)?)?;
    }
    match verdict {
        AuditVerdict::Intact { records } => {
            if !as_json {
                writeln!(
                    out,
                    "audit log intact: {records} records, every one unchanged and in order ({})",
                    opened.shown
                )?;
            }
            Ok(ExitCode::SUCCESS)
        }
        AuditVerdict::Broken { seq, what } => {
            if !as_json {
                writeln!(
                    out,
                    "audit log BROKEN at record {seq}: {what} ({})",
                    opened.shown
                )?;
            }
            Ok(ExitCode::from(1))
        }
    }
}

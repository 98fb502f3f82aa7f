//! `toolgate approvals`: the requests calls are waiting on, and a person's
//! answers to them. An answer here is the same grant or refusal as one
//! given in-line (MCP elicitation): a waiting call goes through the moment
//! it is approved, and a denied call's re-ask is refused at once with the
//! reason, until the refusal expires.

use std::collections::BTreeSet;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Result, bail};
use clap::Subcommand;
use serde_json::{Value, json};
use toolgate_policy::{ApprovalScope, canonical_json};
use toolgate_store::{Answer, Decided, Request, RequestFilter, RequestState};

use crate::config::approvals::parse_duration;
use crate::config::{Environment, Settings};
use crate::store::{Opened, answered_by, relative, time};

/// `toolgate approvals …`.
#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// The pending requests, newest first (`--all`: answered and expired ones too).
    List {
        /// Every request, not only the pending ones.
        #[arg(long)]
        all: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// One request: the call, why it asks, and its answer if it has one.
    Show {
        /// The request id (`apr_…`).
        id: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Approve a request: a grant the waiting call (and the same call again) spends.
    Approve {
        /// The request id (`apr_…`).
        id: String,
        /// Calls the grant covers: a number, or `unlimited` (until it
        /// expires). Default: [approvals] uses, else 1.
        #[arg(long, value_name = "N|unlimited")]
        uses: Option<String>,
        /// How long the grant lives, such as 30m or 8h (default: [approvals] grant_ttl).
        #[arg(long, value_name = "DURATION")]
        ttl: Option<String>,
        /// What the grant covers: exact (this call), tool (every call of
        /// the tool) or command-prefix (shell tools: every script whose
        /// commands all start with --prefix). Default: the rule's approval_scope.
        #[arg(long, value_name = "SCOPE")]
        scope: Option<ApprovalScope>,
        /// The command words a command-prefix grant covers (default: the
        /// request's suggestion), such as --prefix "cargo test".
        #[arg(long, value_name = "WORDS")]
        prefix: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Deny a request: the waiting call and any re-ask are refused with the reason.
    Deny {
        /// The request id (`apr_…`).
        id: String,
        /// Why, for the agent.
        #[arg(long)]
        reason: Option<String>,
        /// How long the refusal lasts (default: [approvals] refusal_ttl).
        #[arg(long, value_name = "DURATION")]
        ttl: Option<String>,
        /// What the refusal covers (as for approve; default: the rule's approval_scope).
        #[arg(long, value_name = "SCOPE")]
        scope: Option<ApprovalScope>,
        /// The command words a command-prefix refusal covers.
        #[arg(long, value_name = "WORDS")]
        prefix: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print each pending request as it arrives, one line each, until interrupted.
    Watch {
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
}

/// Runs one `toolgate approvals` command.
pub fn run(command: ApprovalsCommand, settings: &Settings, env: &Environment) -> Result<ExitCode> {
    let runtime = crate::runtime()?;
    runtime.block_on(async {
        let opened = crate::store::open(settings).await?;
        match command {
            ApprovalsCommand::List { all, json } => list(&opened, all, json).await,
            ApprovalsCommand::Show { id, json } => show(&opened, &id, json).await,
            ApprovalsCommand::Approve {
                id,
                uses,
                ttl,
                scope,
                prefix,
                json,
            } => {
                let request = pending(&opened, &id).await?;
                let defaults = &settings.approvals;
                let uses = match uses.as_deref() {
                    None => defaults.uses.count(),
                    Some("unlimited") => None,
                    Some(n) => Some(parse_uses(n)?),
                };
                let ttl = duration("--ttl", ttl.as_deref(), defaults.grant_ttl)?;
                let (scope, prefix) = scope_of(&request, scope, prefix)?;
                let answer = Answer::Approve {
                    uses,
                    ttl,
                    scope,
                    prefix,
                };
                decide(&opened, &request, &answer, env, json).await
            }
            ApprovalsCommand::Deny {
                id,
                reason,
                ttl,
                scope,
                prefix,
                json,
            } => {
                let request = pending(&opened, &id).await?;
                let by = answered_by(env);
                let reason = reason
                    .map(|r| r.trim().to_owned())
                    .filter(|r| !r.is_empty())
                    .unwrap_or_else(|| format!("denied by {by}"));
                let ttl = duration("--ttl", ttl.as_deref(), settings.approvals.refusal_ttl)?;
                let (scope, prefix) = scope_of(&request, scope, prefix)?;
                let answer = Answer::Deny {
                    reason,
                    ttl,
                    scope,
                    prefix,
                };
                decide(&opened, &request, &answer, env, json).await
            }
            ApprovalsCommand::Watch { json } => watch(&opened, json).await,
        }
    })
}

fn parse_uses(text: &str) -> Result<u32> {
    match text.parse::<u32>() {
        Ok(n) if n > 0 => Ok(n),
        _ => bail!("--uses: expected a positive number or `unlimited`, got {text:?}"),
    }
}

fn duration(flag: &str, text: Option<&str>, default: Duration) -> Result<Duration> {
    match text {
        None => Ok(default),
        Some(text) => parse_duration(text).map_err(|e| anyhow::anyhow!("{flag}: {e}")),
    }
}

/// The scope of an answer: the person's choice, else the request's; the
/// prefix words for command-prefix (given, else the request's suggestion).
fn scope_of(
    request: &Request,
    scope: Option<ApprovalScope>,
    prefix: Option<String>,
) -> Result<(ApprovalScope, Vec<String>)> {
    let words: Vec<String> = prefix
        .as_deref()
        .map(|p| p.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default();
    let scope = match (scope, words.is_empty()) {
        (Some(scope), _) => scope,
        (None, false) => ApprovalScope::CommandPrefix,
        (None, true) => request.scope,
    };
    if scope != ApprovalScope::CommandPrefix && !words.is_empty() {
        bail!("--prefix goes with --scope command-prefix, not --scope {scope}");
    }
    if scope == ApprovalScope::CommandPrefix
        && words.is_empty()
        && request.suggested_prefix.is_empty()
    {
        bail!(
            "request {} has no command prefix to cover ({} is not a shell call, or its script \
             cannot be analysed); give --prefix WORDS, or use --scope exact or tool",
            request.id,
            request.tool
        );
    }
    Ok((scope, words))
}

/// The request, when it can still be answered.
async fn pending(opened: &Opened, id: &str) -> Result<Request> {
    let Some(request) = opened.store.request(&opened.tenant, id).await? else {
        bail!(
            "no approval request `{id}` in {} (see `toolgate approvals list`)",
            opened.shown
        );
    };
    if request.state != RequestState::Pending {
        bail!(
            "approval request `{id}` is {}, not pending: it cannot be answered any more{}",
            request.state.as_str(),
            match request.state {
                RequestState::Expired => "; the agent's next call files a new request".to_owned(),
                _ => request
                    .decided_by
                    .as_ref()
                    .map(|by| format!(" (answered by {by})"))
                    .unwrap_or_default(),
            }
        );
    }
    Ok(request)
}

async fn decide(
    opened: &Opened,
    request: &Request,
    answer: &Answer,
    env: &Environment,
    as_json: bool,
) -> Result<ExitCode> {
    let decided = opened
        .store
        .decide(&opened.tenant, &request.id, answer, &answered_by(env))
        .await?;
    let mut out = std::io::stdout().lock();
    if as_json {
        let body = match &decided {
            Decided::Granted(grant) => json!({"request": request.id, "grant": grant}),
            Decided::Refused(refusal) => json!({"request": request.id, "refusal": refusal}),
        };
        writeln!(out, "{}", serde_json::to_string_pretty(&body)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    match &decided {
        Decided::Granted(grant) => {
            let uses = match grant.uses {
                Some(1) => "1 use".to_owned(),
                Some(n) => format!("{n} uses"),
                None => "unlimited uses".to_owned(),
            };
            writeln!(
                out,
                "approved {}: grant {} covers {} of `{}`, {uses}, until {} ({})",
                request.id,
                grant.id,
                covers(grant.key.kind, &grant.key.prefix),
                grant.tool,
                time(grant.expires_ms),
                relative(grant.expires_ms),
            )?;
            writeln!(
                out,
                "the waiting call goes through now; a call made again spends a use"
            )?;
        }
        Decided::Refused(refusal) => {
            writeln!(
                out,
                "denied {}: refusal {} covers {} of `{}` until {} ({}); the agent is told: {}",
                request.id,
                refusal.id,
                covers(refusal.key.kind, &refusal.key.prefix),
                refusal.tool,
                time(refusal.expires_ms),
                relative(refusal.expires_ms),
                refusal.reason,
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn covers(kind: ApprovalScope, prefix: &[String]) -> String {
    match kind {
        ApprovalScope::CommandPrefix => {
            format!("scripts whose commands start with `{}`", prefix.join(" "))
        }
        ApprovalScope::Tool => "every call".to_owned(),
        _ => "exactly this call".to_owned(),
    }
}

async fn list(opened: &Opened, all: bool, as_json: bool) -> Result<ExitCode> {
    let filter = RequestFilter {
        pending_only: !all,
        ..RequestFilter::default()
    };
    let requests = opened.store.requests(&opened.tenant, &filter).await?;
    let mut out = std::io::stdout().lock();
    if as_json {
        writeln!(out, "{}", serde_json::to_string_pretty(&requests)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    if requests.is_empty() {
        let what = if all {
            "approval requests"
        } else {
            "pending approval requests"
        };
        writeln!(out, "no {what} ({})", opened.shown)?;
        return Ok(ExitCode::SUCCESS);
    }
    let rows: Vec<[String; 6]> = requests
        .iter()
        .map(|r| {
            [
                r.id.clone(),
                r.state.as_str().to_owned(),
                r.tool.clone(),
                r.agent.clone(),
                relative(r.created_ms),
                one_line(&r.arguments, 60),
            ]
        })
        .collect();
    let header = ["ID", "STATE", "TOOL", "AGENT", "FILED", "ARGUMENTS"].map(str::to_owned);
    table(&mut out, &header, &rows)?;
    if !all {
        writeln!(
            out,
            "approve with `toolgate approvals approve ID`, deny with `toolgate approvals deny ID --reason …`"
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

async fn show(opened: &Opened, id: &str, as_json: bool) -> Result<ExitCode> {
    let Some(request) = opened.store.request(&opened.tenant, id).await? else {
        bail!(
            "no approval request `{id}` in {} (see `toolgate approvals list`)",
            opened.shown
        );
    };
    let grant = match (&request.state, &request.outcome_id) {
        (RequestState::Approved, Some(grant)) => opened.store.grant(&opened.tenant, grant).await?,
        _ => None,
    };
    let mut out = std::io::stdout().lock();
    if as_json {
        let body = json!({"request": request, "grant": grant});
        writeln!(out, "{}", serde_json::to_string_pretty(&body)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let args = serde_json::to_string_pretty(&request.arguments)?;
    let mut rows = vec![
        ("request", request.id.clone()),
        ("state", request.state.as_str().to_owned()),
        ("tool", request.tool.clone()),
        (
            "effect class",
            request
                .effect_class
                .clone()
                .unwrap_or_else(|| "-".to_owned()),
        ),
        ("agent", request.agent.clone()),
        ("why", request.reason.clone()),
        ("scope", request.scope.to_string()),
        (
            "filed",
            format!(
                "{} ({})",
                time(request.created_ms),
                relative(request.created_ms)
            ),
        ),
    ];
    if !request.suggested_prefix.is_empty() {
        rows.push(("prefix", request.suggested_prefix.join(" ")));
    }
    if request.state == RequestState::Pending {
        rows.push((
            "expires",
            format!(
                "{} ({})",
                time(request.expires_ms),
                relative(request.expires_ms)
            ),
        ));
    }
    if let (Some(at), Some(by)) = (request.decided_ms, &request.decided_by) {
        rows.push(("answered", format!("{} by {by}", time(at))));
    }
    if let Some(id) = &request.outcome_id {
        rows.push(("answer", id.clone()));
    }
    if let Some(reason) = &request.answer_reason {
        rows.push(("reason", reason.clone()));
    }
    if let Some(grant) = &grant {
        let uses = grant.uses.map_or("unlimited".to_owned(), |n| n.to_string());
        rows.push((
            "uses",
            format!(
                "{} of {uses} spent, until {}",
                grant.spent,
                time(grant.expires_ms)
            ),
        ));
    }
    for (name, value) in rows {
        writeln!(out, "{name:<13} {value}")?;
    }
    writeln!(out, "arguments")?;
    for line in args.lines() {
        writeln!(out, "  {line}")?;
    }
    if request.state == RequestState::Pending {
        writeln!(
            out,
            "approve: toolgate approvals approve {id}    deny: toolgate approvals deny {id} --reason …"
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

async fn watch(opened: &Opened, as_json: bool) -> Result<ExitCode> {
    let mut seen = BTreeSet::new();
    let filter = RequestFilter {
        pending_only: true,
        ..RequestFilter::default()
    };
    loop {
        let mut requests = opened.store.requests(&opened.tenant, &filter).await?;
        // Oldest first, so lines come in the order requests were filed.
        requests.reverse();
        let mut out = std::io::stdout().lock();
        for request in requests {
            if !seen.insert(request.id.clone()) {
                continue;
            }
            if as_json {
                writeln!(out, "{}", serde_json::to_string(&request)?)?;
            } else {
                writeln!(
                    out,
                    "{} {} {} wants `{}` {} (approve: toolgate approvals approve {})",
                    time(request.created_ms),
                    request.id,
                    request.agent,
                    request.tool,
                    one_line(&request.arguments, 80),
                    request.id,
                )?;
            }
        }
        out.flush()?;
        drop(out);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Canonical JSON cut to `max` characters.
pub fn one_line(value: &Value, max: usize) -> String {
    let text = canonical_json(value);
    if text.chars().count() <= max {
        return text;
    }
    let cut: String = text.chars().take(max.saturating_sub(1)).collect();
    format!("{cut}…")
}

/// A table with columns as wide as their widest cell; the last column is not padded.
pub fn table<const N: usize>(
    out: &mut impl Write,
    header: &[String; N],
    rows: &[[String; N]],
) -> std::io::Result<()> {
    let mut widths = header.each_ref().map(|h| h.chars().count());
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in std::iter::once(header).chain(rows) {
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

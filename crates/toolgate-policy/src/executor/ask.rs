//! The approval stage: what a person is asked about, and what their answer
//! may cover.

use serde_json::Value;
use toolgate_core::{CallContext, Decision, ToolSpec};

use super::{ApprovalOutcome, ApprovalRequest, CallError, Cleared, Executor, strings_at};
use crate::approval::{ApprovalScope, ScopeKey};
use crate::command::common_prefix;

/// The request for a call of `spec` with the validated `arguments` that
/// the rules ask about, for the reason `reason`; `scope` is the winning
/// rule's approval scope.
pub(super) fn approval_request(
    spec: &ToolSpec,
    arguments: &Value,
    reason: &str,
    scope: ApprovalScope,
    ctx: &CallContext,
) -> ApprovalRequest {
    let exact = ScopeKey::exact(&spec.name, arguments);
    let mut covering = vec![exact.clone(), ScopeKey::tool(&spec.name)];
    let (prefixes, suggested_prefix) = prefix_keys(spec, arguments);
    let by_prefix = !prefixes.is_empty();
    covering.extend(prefixes);
    // A grant by prefix for a call that no prefix covers would not even
    // cover the call it answers: a plain approve grants the exact call.
    let scope = match scope {
        ApprovalScope::CommandPrefix if !by_prefix => ApprovalScope::Exact,
        scope => scope,
    };
    ApprovalRequest {
        tool: spec.name.clone(),
        arguments: arguments.clone(),
        reason: reason.to_owned(),
        caller: ctx.caller.clone(),
        call_id: ctx.call_id.clone(),
        effect_class: spec.effect_class,
        group: spec.group.clone(),
        scope,
        exact,
        covering,
        suggested_prefix,
        progress: ctx.progress.clone(),
        asker: ctx.asker.clone(),
    }
}

/// The command-prefix keys of a shell tool's call, shortest first, and the
/// prefix to suggest: the first command's words up to the first option
/// (`cargo test -p x` -> `cargo test`), never longer than what every
/// command shares, so that approving it covers this call.
fn prefix_keys(spec: &ToolSpec, arguments: &Value) -> (Vec<ScopeKey>, Vec<String>) {
    if spec.command_args.is_empty() {
        return (Vec::new(), Vec::new());
    }
    let Ok(scripts) = strings_at(arguments, &spec.command_args, "a shell script string") else {
        return (Vec::new(), Vec::new());
    };
    if scripts.is_empty() {
        return (Vec::new(), Vec::new());
    }
    let Some((common, first)) = common_prefix(&scripts) else {
        return (Vec::new(), Vec::new());
    };
    let keys = (1..=common.len())
        .map(|n| ScopeKey::command_prefix(&spec.name, common[..n].to_vec()))
        .collect();
    let suggested = first
        .into_iter()
        .take_while(|word| !word.starts_with('-'))
        .take(common.len())
        .collect();
    (keys, suggested)
}

impl Executor {
    /// Asks the approval channel about a call the rules ask about; the
    /// grant whose use was spent, if the channel names one.
    pub(super) async fn approve(
        &self,
        cleared: &Cleared<'_>,
        ctx: &CallContext,
    ) -> Result<Option<String>, CallError> {
        let Decision::Ask { reason } = &cleared.decision else {
            return Ok(None);
        };
        let Some(channel) = &self.approvals else {
            return Err(CallError::ApprovalRequired {
                reason: reason.clone(),
            });
        };
        let spec = cleared.tool.spec();
        let request = approval_request(spec, &cleared.args, reason, cleared.scope, ctx);
        match channel.request(&request).await {
            ApprovalOutcome::Approved { grant } => Ok(grant),
            ApprovalOutcome::Refused { reason, id } => {
                Err(CallError::ApprovalRefused { reason, id })
            }
            ApprovalOutcome::Pending { id } => Err(CallError::ApprovalPending {
                id,
                reason: reason.clone(),
            }),
            ApprovalOutcome::Unavailable { reason } => {
                Err(CallError::ApprovalUnavailable { reason })
            }
        }
    }
}

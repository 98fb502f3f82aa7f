//! The audit hook of the pipeline: one [`AuditRecord`] for every call,
//! whatever happens to it, and the call context that collects its egress.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Instant, SystemTime};

use serde_json::Value;
use toolgate_core::{
    CallContext, Decision, EgressNote, Progress, ToolEvent, ToolEventKind, ToolSpec,
};

use super::{CallError, CallResult, Executor, Stage};
use crate::approval::{ApprovalScope, scope_digest};
use crate::audit::{AuditRecord, AuditSink, audit_arguments, rfc3339_millis};

/// How many egress notes one call's record keeps (a crawler's thousand
/// connections are in the egress log, not in one audit record).
const MAX_EGRESS_NOTES: usize = 256;

/// How much of an error message a record keeps.
const MAX_ERROR_BYTES: usize = 4096;

/// The egress notes a call's command reported while it ran.
type EgressLog = Arc<Mutex<Vec<EgressNote>>>;

/// One call's record while the call runs. Finished with
/// [`AuditTrail::finish`]; dropped unfinished (the caller gave up and the
/// call's future was dropped), it is recorded as `cancelled`.
pub(super) struct AuditTrail {
    sinks: Vec<Arc<dyn AuditSink>>,
    /// `None` without sinks, and once recorded.
    record: Option<AuditRecord>,
    started: Instant,
    egress: Option<EgressLog>,
    decision: Option<Decision>,
}

impl AuditTrail {
    /// The trail of a call of `name` with the raw `arguments` (recorded as
    /// such if the call stops before they are validated).
    pub(super) fn start(
        sinks: &[Arc<dyn AuditSink>],
        name: &str,
        ctx: &CallContext,
        arguments: &Value,
    ) -> AuditTrail {
        let started = Instant::now();
        if sinks.is_empty() {
            return AuditTrail {
                sinks: Vec::new(),
                record: None,
                started,
                egress: None,
                decision: None,
            };
        }
        let record = AuditRecord {
            time: rfc3339_millis(SystemTime::now()),
            call_id: ctx.call_id.clone(),
            agent: ctx.caller.clone(),
            tool: name.to_owned(),
            effect_class: None,
            idempotency: None,
            decision: "deny".to_owned(),
            layer: Stage::Lookup.as_str().to_owned(),
            approval_id: None,
            grant_id: None,
            args_digest: scope_digest(ApprovalScope::Exact, name, arguments),
            arguments: audit_arguments(arguments),
            status: String::new(),
            exit_code: None,
            duration_ms: 0,
            egress: Vec::new(),
            error: None,
        };
        AuditTrail {
            sinks: sinks.to_vec(),
            record: Some(record),
            started,
            egress: Some(Arc::default()),
            decision: None,
        }
    }

    /// Where the call's egress notes are collected, when anyone records.
    pub(super) fn egress_log(&self) -> Option<EgressLog> {
        self.egress.clone()
    }

    /// The tool was found.
    pub(super) fn tool(&mut self, spec: &ToolSpec) {
        if let Some(record) = &mut self.record {
            record.effect_class = Some(spec.effect_class.as_str().to_owned());
            record.idempotency = spec.idempotency.map(|i| i.as_str().to_owned());
        }
    }

    /// The call cleared every check with these validated arguments (the
    /// digest is the one approvals are stored under) and this decision.
    /// Unless validation `coerced` them, they are the ones the trail
    /// started with, and so are their digest and record.
    pub(super) fn cleared(&mut self, arguments: &Value, coerced: bool, decision: &Decision) {
        self.decision = Some(decision.clone());
        if !coerced {
            return;
        }
        if let Some(record) = &mut self.record {
            let digest = scope_digest(ApprovalScope::Exact, &record.tool, arguments);
            if digest != record.args_digest {
                record.args_digest = digest;
                record.arguments = audit_arguments(arguments);
            }
        }
    }

    /// A grant's use was spent on the call.
    pub(super) fn granted(&mut self, grant: Option<String>) {
        if let Some(record) = &mut self.record {
            record.grant_id = grant;
        }
    }

    /// Records the call's end.
    pub(super) async fn finish(mut self, result: &Result<CallResult, CallError>) {
        let Some(mut record) = self.record.take() else {
            return;
        };
        self.complete(&mut record, result);
        for sink in &self.sinks {
            if let Err(error) = sink.record(&record).await {
                tracing::warn!(call_id = %record.call_id, tool = %record.tool, %error, "the audit record could not be written");
            }
        }
    }

    fn complete(&self, record: &mut AuditRecord, result: &Result<CallResult, CallError>) {
        record.duration_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        record.egress = self.egress_notes();
        let asked = matches!(self.decision, Some(Decision::Ask { .. }));
        // Who let a call run: the rules, or for `ask` the approval.
        let runs_by = if asked { Stage::Approval } else { Stage::Rules };
        if let Some(decision) = &self.decision {
            record.decision = decision.as_str().to_owned();
        }
        match result {
            Ok(done) => {
                record.layer = runs_by.as_str().to_owned();
                record.status = if done.output.is_error { "error" } else { "ok" }.to_owned();
                record.exit_code = done
                    .output
                    .structured
                    .as_ref()
                    .and_then(|facts| facts.get("exit_code"))
                    .and_then(Value::as_i64);
            }
            Err(error) => {
                let (status, layer) = match error {
                    CallError::UnknownTool { .. } => ("unknown-tool", error.stage()),
                    CallError::InvalidArguments(_) => ("invalid", error.stage()),
                    CallError::ApprovalPending { id, .. } => {
                        record.approval_id = Some(id.clone());
                        ("pending", error.stage())
                    }
                    CallError::ApprovalRefused { id, .. } => {
                        record.approval_id = id.clone();
                        ("refused", error.stage())
                    }
                    CallError::ApprovalUnavailable { .. } => ("error", error.stage()),
                    CallError::Tool { .. } => ("error", runs_by),
                    _ => ("denied", error.stage()),
                };
                if matches!(error, CallError::ApprovalRequired { .. }) {
                    record.decision = "ask".to_owned();
                }
                record.status = status.to_owned();
                record.layer = layer.as_str().to_owned();
                record.error = Some(bounded(error.to_string()));
            }
        }
    }

    fn egress_notes(&self) -> Vec<EgressNote> {
        match &self.egress {
            Some(log) => log.lock().unwrap_or_else(PoisonError::into_inner).clone(),
            None => Vec::new(),
        }
    }
}

impl Drop for AuditTrail {
    /// A call whose future was dropped (the client cancelled while it
    /// waited for approval or ran) is recorded too, from a task of its own:
    /// an audit log that loses the calls someone gave up on would hide
    /// exactly the calls worth a look.
    fn drop(&mut self) {
        let Some(mut record) = self.record.take() else {
            return;
        };
        record.duration_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        record.egress = self.egress_notes();
        if let Some(decision) = &self.decision {
            record.decision = decision.as_str().to_owned();
        }
        record.status = "cancelled".to_owned();
        record.error = Some(match std::thread::panicking() {
            true => "the call panicked".to_owned(),
            false => "the caller gave up before the call finished".to_owned(),
        });
        let sinks = std::mem::take(&mut self.sinks);
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(call_id = %record.call_id, "a cancelled call's audit record was lost: no runtime to write it from");
            return;
        };
        runtime.spawn(async move {
            for sink in &sinks {
                if let Err(error) = sink.record(&record).await {
                    tracing::warn!(call_id = %record.call_id, %error, "the audit record could not be written");
                }
            }
        });
    }
}

/// `message`, cut at [`MAX_ERROR_BYTES`] on a character boundary.
fn bounded(mut message: String) -> String {
    if message.len() > MAX_ERROR_BYTES {
        message.truncate(toolgate_core::text::floor_char_boundary(
            &message,
            MAX_ERROR_BYTES,
        ));
        message.push('…');
    }
    message
}

impl Executor {
    /// `ctx` whose progress also reaches every event sink (as `Progress`
    /// and `Egress` events of this call) and whose egress notes go to
    /// `egress` for the audit record.
    pub(super) fn call_context(
        &self,
        name: &str,
        ctx: &CallContext,
        egress: Option<EgressLog>,
    ) -> CallContext {
        if self.sinks.is_empty() && egress.is_none() {
            return ctx.clone();
        }
        let sinks = self.sinks.clone();
        let upstream = ctx.progress.clone();
        let template = ToolEvent::new(
            ToolEventKind::Progress {
                message: String::new(),
            },
            name,
            &ctx.call_id,
            &ctx.caller,
        );
        let (egress_sinks, egress_upstream, egress_template) =
            (sinks.clone(), upstream.clone(), template.clone());
        let progress = Progress::new(move |message: &str| {
            let mut event = template.clone();
            event.kind = ToolEventKind::Progress {
                message: message.to_owned(),
            };
            for sink in &sinks {
                sink.emit(&event);
            }
            upstream.report(message);
        })
        .with_egress(move |note: &EgressNote| {
            if let Some(log) = &egress {
                let mut notes = log.lock().unwrap_or_else(PoisonError::into_inner);
                if notes.len() < MAX_EGRESS_NOTES {
                    notes.push(note.clone());
                }
            }
            let mut event = egress_template.clone();
            event.kind = ToolEventKind::Egress {
                connection: note.clone(),
            };
            for sink in &egress_sinks {
                sink.emit(&event);
            }
            egress_upstream.report_egress(note);
        });
        ctx.clone().with_progress(progress)
    }
}

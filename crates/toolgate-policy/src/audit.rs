//! The audit hook: one record for every call through the Executor.
//!
//! The Executor builds an [`AuditRecord`] whatever happens to a call (an
//! unknown tool, invalid arguments, a denial at any stage, an approval
//! pending or refused, a tool error, a success) and hands it to every
//! [`AuditSink`]. Where the records go, their tenant, sequence and hash
//! chain are the sink's business (toolgate-store).

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolgate_core::EgressNote;

/// Where audit records go.
#[async_trait]
pub trait AuditSink: Send + Sync {
    /// Appends one record. An error is logged by the caller
    /// (`tracing::warn`); it never changes the call's result: the call
    /// already ran.
    async fn record(&self, record: &AuditRecord) -> Result<(), String>;
}

/// What one call did, as the audit log keeps it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AuditRecord {
    /// When the call arrived: RFC 3339, UTC, millisecond precision.
    pub time: String,
    /// The call's id.
    pub call_id: String,
    /// Who called (the call context's caller).
    pub agent: String,
    /// The tool as asked for.
    pub tool: String,
    /// The tool's effect class, when the tool exists.
    pub effect_class: Option<String>,
    /// The tool's idempotency, when it has one.
    pub idempotency: Option<String>,
    /// `allow`, `ask` or `deny`.
    pub decision: String,
    /// The stage that decided (`lookup`, `validate`, `access`, `paths`,
    /// `commands`, `rules`, `approval`, `run`).
    pub layer: String,
    /// The approval request or refusal that answered, if any.
    pub approval_id: Option<String>,
    /// The grant spent, if any.
    pub grant_id: Option<String>,
    /// `scope_digest(Exact, tool, arguments)`.
    pub args_digest: String,
    /// The arguments: values of secret-looking keys redacted, and replaced
    /// by a note with their size past 8 KiB of canonical JSON.
    pub arguments: Value,
    /// `ok`, `error`, `denied`, `pending`, `refused`, `unknown-tool` or `invalid`.
    pub status: String,
    /// The command's exit code, from the output's structured `exit_code`.
    pub exit_code: Option<i64>,
    /// Time in the pipeline.
    pub duration_ms: u64,
    /// Connections the call's command made through the egress proxy.
    pub egress: Vec<EgressNote>,
    /// What went wrong, for a call that did not succeed.
    pub error: Option<String>,
}

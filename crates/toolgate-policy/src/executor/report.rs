//! What the pipeline reports: its stages, explanations, errors, results,
//! and the approval seam.

use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;
use serde_json::Value;
use toolgate_core::{
    Decision, EffectClass, InvalidInput, Progress, ToolError, ToolOutput, ToolSpec,
};

use crate::access::Access;
use crate::approval::{ApprovalScope, ScopeKey};

/// A step of the pipeline, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stage {
    /// Find the tool.
    Lookup,
    /// Check the arguments against the schema.
    Validate,
    /// Tool preset and access policy.
    Access,
    /// Path policy on every path argument.
    Paths,
    /// Command policy on every shell script argument.
    Commands,
    /// Permission rules.
    Rules,
    /// Asking for approval.
    Approval,
    /// Running the tool.
    Run,
}

impl Stage {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Lookup => "lookup",
            Stage::Validate => "validate",
            Stage::Access => "access",
            Stage::Paths => "paths",
            Stage::Commands => "commands",
            Stage::Rules => "rules",
            Stage::Approval => "approval",
            Stage::Run => "run",
        }
    }
}

/// How a stage went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StageOutcome {
    /// Passed.
    Pass,
    /// Had nothing to check.
    Skip,
    /// Needs approval.
    Ask,
    /// Refused the call.
    Fail,
}

/// One line of an explanation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StageReport {
    /// Which stage.
    pub stage: Stage,
    /// Its outcome.
    pub outcome: StageOutcome,
    /// What it found.
    pub detail: String,
}

/// Every stage's verdict on a call that was not run, and the decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Explanation {
    /// Tool name as asked.
    pub tool: String,
    /// The stages in pipeline order.
    pub stages: Vec<StageReport>,
    /// What `call` would do.
    pub decision: Decision,
}

/// A call that did not produce a result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// No active tool by that name.
    #[error("unknown tool `{name}`{hint}")]
    UnknownTool {
        /// The name asked for.
        name: String,
        /// A suggestion, or how to activate a deferred tool.
        hint: String,
    },
    /// The arguments do not fit the schema.
    #[error(transparent)]
    InvalidArguments(#[from] InvalidInput),
    /// The tool exists but is not active.
    #[error("tool `{tool}` is inactive: {reason}")]
    Inactive {
        /// The tool.
        tool: String,
        /// Why.
        reason: String,
    },
    /// A policy layer or rule refused the call.
    #[error("denied by the {} policy: {reason}", stage.as_str())]
    Denied {
        /// The stage that refused.
        stage: Stage,
        /// Why.
        reason: String,
    },
    /// The rules ask, and no approval channel is configured.
    #[error("approval required: {reason}")]
    ApprovalRequired {
        /// Why approval is needed.
        reason: String,
    },
    /// The approver refused.
    #[error("approval refused: {reason}")]
    ApprovalRefused {
        /// The approver's reason.
        reason: String,
        /// The refusal, when the approver names one.
        id: Option<String>,
    },
    /// No approval could be asked for (the approval store is unreachable).
    #[error("{reason}")]
    ApprovalUnavailable {
        /// What went wrong.
        reason: String,
    },
    /// Approval was requested and is not decided yet.
    #[error(
        "approval {id} is pending; approve it with `toolgate approvals approve {id}` and the same call will then go through"
    )]
    ApprovalPending {
        /// The request to watch.
        id: String,
        /// Why approval is needed.
        reason: String,
    },
    /// The tool itself failed.
    #[error("tool `{tool}` failed: {source}")]
    Tool {
        /// The tool.
        tool: String,
        /// Its error.
        source: ToolError,
    },
}

impl CallError {
    /// The stage at which the call stopped.
    pub fn stage(&self) -> Stage {
        match self {
            CallError::UnknownTool { .. } => Stage::Lookup,
            CallError::InvalidArguments(_) => Stage::Validate,
            CallError::Inactive { .. } => Stage::Access,
            CallError::Denied { stage, .. } => *stage,
            CallError::ApprovalRequired { .. }
            | CallError::ApprovalRefused { .. }
            | CallError::ApprovalUnavailable { .. }
            | CallError::ApprovalPending { .. } => Stage::Approval,
            CallError::Tool { .. } => Stage::Run,
        }
    }
}

/// What an approval was asked about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApprovalRequest {
    /// The tool.
    pub tool: String,
    /// The validated arguments.
    pub arguments: Value,
    /// Why the rules ask.
    pub reason: String,
    /// Who calls.
    pub caller: String,
    /// The call.
    pub call_id: String,
    /// The tool's effect class.
    pub effect_class: EffectClass,
    /// The tool's group, such as `group:runtime`.
    pub group: Option<String>,
    /// What a plain approve grants: the winning `ask` rule's
    /// `approval_scope` (default [`ApprovalScope::Exact`]).
    pub scope: ApprovalScope,
    /// The key of exactly this call; pending requests are reused by it.
    pub exact: ScopeKey,
    /// Every key whose grant or refusal covers this call: the exact key,
    /// the tool's key, and for shell tools every command prefix that every
    /// command of the parsed script starts with (none for a script the
    /// parser cannot analyse).
    pub covering: Vec<ScopeKey>,
    /// For shell tools: the first command's words up to the first word
    /// that starts with `-`, the prefix to offer a person; else empty.
    pub suggested_prefix: Vec<String>,
    /// The call's progress, for "waiting for approval <id>".
    #[serde(skip)]
    pub progress: Progress,
    /// Who can be asked in-line (MCP elicitation), from the call context;
    /// `None`: the call waits for another channel.
    #[serde(skip)]
    pub asker: Option<toolgate_core::Asker>,
}

/// The approver's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ApprovalOutcome {
    /// Run the call.
    Approved {
        /// The grant whose use was spent, for the audit record.
        grant: Option<String>,
    },
    /// Do not run it.
    Refused {
        /// Why.
        reason: String,
        /// The refusal (or the request it answered), for the audit record.
        id: Option<String>,
    },
    /// Not decided yet.
    Pending {
        /// Request id to watch.
        id: String,
    },
    /// No answer could be had (the approval store is unreachable); the
    /// call does not run.
    Unavailable {
        /// What went wrong, such as "the approval store is unreachable: ...".
        reason: String,
    },
}

/// Where `ask` decisions go.
#[async_trait]
pub trait ApprovalChannel: Send + Sync {
    /// Asks for (or looks up) a decision on `request`.
    async fn request(&self, request: &ApprovalRequest) -> ApprovalOutcome;
}

/// A finished call.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct CallResult {
    /// What the tool returned, bounded by the resource policy.
    pub output: ToolOutput,
    /// Whether the resource policy cut the text.
    pub truncated: bool,
    /// Where the uncut text was saved, when it was cut and an output dir is set.
    pub full_output: Option<PathBuf>,
    /// The rules' decision (`ask` when an approval let it through).
    pub decision: Decision,
    /// Time in the pipeline.
    pub duration: Duration,
}

/// A tool as `toolgate tools` shows it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ToolStatus {
    /// The spec.
    pub spec: ToolSpec,
    /// In the deferred pool.
    pub deferred: bool,
    /// Active, or why not.
    pub access: Access,
}

//! toolgate's policy: four independent layers, permission rules, and the one
//! call pipeline that applies them, the [`Executor`].
//!
//! - [`PathPolicy`]: glob allow/deny on every path argument.
//! - [`CommandPolicy`]: every command of a shell script, found by parsing it
//!   with tree-sitter-bash, against denied binaries and patterns.
//! - [`ResourcePolicy`]: caps on what a result may return (head and tail kept).
//! - [`AccessPolicy`]: which tools are active, by name, group and effect class.
//! - [`PermissionRules`]: allow, ask or deny by tool name, group or effect class.
//! - [`ApprovalScope`] and [`scope_digest`]: what a person's yes or no covers.
//! - [`AuditSink`]: where the one [`AuditRecord`] of every call goes.
//! - [`FIND_TOOLS`]: the tool the [`Executor`] adds when its registry has
//!   deferred tools, which finds them (BM25 over names and descriptions)
//!   and activates at most [`FIND_TOOLS_LIMIT`] a search, only among those
//!   the access layer admits.
//!
//! Deny always beats allow. These layers decide what an agent *may ask for*;
//! they are defence in depth. The operating-system sandbox that runs the
//! tools is the boundary, and nothing here replaces it.

pub mod access;
mod approval;
mod audit;
pub mod command;
mod executor;
pub mod path;
mod policy;
pub mod resource;
pub mod rules;

pub use access::{Access, AccessPolicy};
pub use approval::{ApprovalScope, ScopeKey, UnknownApprovalScope, canonical_json, scope_digest};
pub use audit::{AuditRecord, AuditSink};
pub use command::{
    CommandPolicy, CommandPolicyError, CommandVerdict, ParseFallback, SimpleCommand,
    extract_commands,
};
pub use executor::{
    ApprovalChannel, ApprovalOutcome, ApprovalRequest, CallError, CallResult, Executor,
    ExecutorBuilder, Explanation, FIND_TOOLS, FIND_TOOLS_LIMIT, Stage, StageOutcome, StageReport,
    ToolStatus,
};
pub use path::{PathPolicy, PathRules, PathVerdict};
pub use policy::{Policy, PolicyPreset};
pub use resource::{Bounded, ResourcePolicy};
pub use rules::{PermissionRule, PermissionRules, RuleAction};

/// A policy that cannot be built from its configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// A glob does not compile.
    #[error("invalid path pattern `{pattern}`: {message}")]
    InvalidPattern {
        /// The pattern as written.
        pattern: String,
        /// What is wrong with it.
        message: String,
    },
}

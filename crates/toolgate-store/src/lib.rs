//! toolgate's store: approval requests, grants, refusals and the audit log,
//! on SQLite (the default: one file, nothing to install) or PostgreSQL
//! (shared by many hosts), with the same migrations and the same behaviour.
//!
//! - [`open`] connects, creates what is missing and migrates under a lock.
//! - [`Store`] is the one interface: file or reuse a pending request,
//!   answer it (a grant or a refusal), spend a grant exactly once, find a
//!   live refusal, append to and verify the hash-chained audit log.
//!   Every method is scoped to a [`Tenant`].
//! - Pins of external MCP tools: the first definition seen of each tool,
//!   and the changes a person has to review before a changed tool is
//!   used again ([`Store::check_tool_pins`]).
//! - The catalogue's records: registered tools and their pins, what the
//!   first install of each pin resolved, the gates' policies per tenant and
//!   every install and run ([`Store::register_catalog_tool`] and the rest).
//! - [`StoreApprovals`] is the approval gate (toolgate-policy's
//!   `ApprovalChannel`) over a store; [`StoreAudit`] its `AuditSink`.
//!
//! This crate is not the policy: which calls ask is decided by
//! toolgate-policy's rules; this crate only remembers the answers.

mod catalog;
mod error;
mod gate;
mod model;
mod pins;
mod reviewer;
mod sink;
mod sql;
mod store;

use std::sync::Arc;

pub use catalog::{CatalogRun, CatalogState, CatalogTool, Registered};
pub use error::StoreError;
pub use gate::{ApprovalSettings, StoreApprovals};
pub use model::{
    Answer, Backend, Clock, Decided, Filed, Grant, NewRequest, Refusal, Request, RequestFilter,
    RequestState, Spend, SpendFor, Tenant,
};
pub use pins::{ChangeState, ListedTool, PinCheck, PinnedTool, ToolChange};
pub use reviewer::{REVIEWER_TIMEOUT, Review, review};
pub use sink::StoreAudit;
pub use store::{AuditEntry, AuditFilter, AuditVerdict, Store};

/// Opens (creating on first use) and migrates the store at `backend`. An
/// unreachable PostgreSQL or an uncreatable SQLite file is
/// [`StoreError::Unreachable`], said with where it looked.
pub async fn open(backend: Backend) -> Result<Arc<dyn Store>, StoreError> {
    sql::open(backend, Clock::system()).await
}

/// [`open`] with a clock of the caller's (tests move it forward to see
/// grants, refusals and requests expire).
pub async fn open_with_clock(backend: Backend, clock: Clock) -> Result<Arc<dyn Store>, StoreError> {
    sql::open(backend, clock).await
}

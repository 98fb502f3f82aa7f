//! The one interface both adapters implement.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use toolgate_policy::AuditRecord;

use crate::catalog::{CatalogRun, CatalogState, CatalogTool, Registered};
use crate::error::StoreError;
use crate::model::{
    Answer, Decided, Filed, Grant, NewRequest, Refusal, Request, RequestFilter, Spend, SpendFor,
    Tenant,
};
use crate::pins::{ListedTool, PinCheck, PinnedTool, ToolChange};

/// The store under approvals and audit: SQLite or PostgreSQL, the same
/// migrations and the same behaviour. Every method names a tenant and only
/// ever reads or writes that tenant's rows. A busy or locked database is
/// retried inside each method (never reported as a denial); what is left is
/// a [`StoreError`], which a caller must never read as "allowed".
#[async_trait]
pub trait Store: Send + Sync {
    /// `sqlite` or `postgres`.
    fn backend_name(&self) -> &'static str;

    /// The pending request for `new.exact` if there is one (not expired),
    /// else a new one: never a second request for the same question, also
    /// when many callers ask at once.
    async fn file_or_reuse(&self, tenant: &Tenant, new: &NewRequest) -> Result<Filed, StoreError>;

    /// One request, any state.
    async fn request(&self, tenant: &Tenant, id: &str) -> Result<Option<Request>, StoreError>;

    /// Requests, newest first.
    async fn requests(
        &self,
        tenant: &Tenant,
        filter: &RequestFilter,
    ) -> Result<Vec<Request>, StoreError>;

    /// Answers a pending request: in one transaction the request becomes
    /// approved or denied and its grant or refusal is written. A request
    /// answered already or expired is [`StoreError::NotPending`].
    async fn decide(
        &self,
        tenant: &Tenant,
        id: &str,
        answer: &Answer,
        by: &str,
    ) -> Result<Decided, StoreError>;

    /// Spends one use of a usable grant (not expired, uses left or
    /// unlimited) covering one of `spend.covering`: one conditional UPDATE,
    /// and the spend row in the same transaction. The grant's id, or `None`
    /// when no grant covers the call.
    async fn spend(
        &self,
        tenant: &Tenant,
        spend: &SpendFor<'_>,
    ) -> Result<Option<String>, StoreError>;

    /// A refusal covering one of `covering` that has not expired.
    async fn live_refusal(
        &self,
        tenant: &Tenant,
        covering: &[String],
    ) -> Result<Option<Refusal>, StoreError>;

    /// One grant.
    async fn grant(&self, tenant: &Tenant, id: &str) -> Result<Option<Grant>, StoreError>;

    /// The spends of one grant, oldest first.
    async fn spends(&self, tenant: &Tenant, grant_id: &str) -> Result<Vec<Spend>, StoreError>;

    /// Appends one audit record: the next sequence number of the tenant and
    /// the digest of the record before it, serialised per tenant.
    async fn append_audit(
        &self,
        tenant: &Tenant,
        record: &AuditRecord,
    ) -> Result<AuditEntry, StoreError>;

    /// Appends several audit records in order, as [`Store::append_audit`]
    /// would one by one, in one transaction: all of them or none. Gives how
    /// many were appended.
    async fn append_audits(
        &self,
        tenant: &Tenant,
        records: &[AuditRecord],
    ) -> Result<u64, StoreError>;

    /// Audit records, oldest first.
    async fn audit(
        &self,
        tenant: &Tenant,
        filter: &AuditFilter,
    ) -> Result<Vec<AuditEntry>, StoreError>;

    /// Checks the tenant's whole chain.
    async fn verify_audit(&self, tenant: &Tenant) -> Result<AuditVerdict, StoreError>;

    /// Checks each listed tool against its pin, in one transaction: a tool
    /// without a pin is pinned as listed ([`PinCheck::FirstSeen`]); one
    /// that differs from its pin is recorded as a change
    /// ([`PinCheck::Changed`]). One answer per tool, in order. Of many
    /// processes pinning the same tool at once, exactly one definition is
    /// pinned, and every other process is told it changed.
    async fn check_tool_pins(
        &self,
        tenant: &Tenant,
        listed: &[ListedTool],
    ) -> Result<Vec<PinCheck>, StoreError>;

    /// Every pin, by server and tool.
    async fn tool_pins(&self, tenant: &Tenant) -> Result<Vec<PinnedTool>, StoreError>;

    /// Every recorded change (pending and rejected), by server and tool.
    async fn tool_changes(&self, tenant: &Tenant) -> Result<Vec<ToolChange>, StoreError>;

    /// Makes the recorded change of `server`/`tool` its pin, if its digest
    /// is still `digest`: the one the person saw. A server that changed
    /// the tool again since is [`StoreError::ChangedAgain`] and nothing is
    /// approved. A rejected change may be approved too (a person changing
    /// their mind). The new pin.
    async fn approve_tool_change(
        &self,
        tenant: &Tenant,
        server: &str,
        tool: &str,
        digest: &str,
        by: &str,
    ) -> Result<PinnedTool, StoreError>;

    /// Marks the recorded change of `server`/`tool` rejected, if its digest
    /// is still `digest`: the pin stays, the tool stays disabled while the
    /// server serves that definition, and it is not queued for review
    /// again (a different definition is).
    async fn reject_tool_change(
        &self,
        tenant: &Tenant,
        server: &str,
        tool: &str,
        digest: &str,
        by: &str,
    ) -> Result<ToolChange, StoreError>;

    /// Registers a catalogue tool's manifest under `pin` (the digest of
    /// what an install fetches): a new tool is shelved; a changed pin
    /// shelves it again, whatever it was; other changes keep its state.
    async fn register_catalog_tool(
        &self,
        tenant: &Tenant,
        id: &str,
        manifest: &serde_json::Value,
        pin: &str,
    ) -> Result<Registered, StoreError>;

    /// Catalogue tools by id: one (`Some(id)`, none or one row) or all.
    async fn catalog_tools(
        &self,
        tenant: &Tenant,
        id: Option<&str>,
    ) -> Result<Vec<CatalogTool>, StoreError>;

    /// Sets a tool's state, only while its pin is still `pin` (an install
    /// of an old pin finishing late changes nothing). Whether it did.
    async fn set_catalog_state(
        &self,
        tenant: &Tenant,
        id: &str,
        pin: &str,
        state: CatalogState,
        install_dir: Option<&str>,
        last_error: Option<&str>,
    ) -> Result<bool, StoreError>;

    /// Removes a tool; what it was, if it was there.
    async fn remove_catalog_tool(
        &self,
        tenant: &Tenant,
        id: &str,
    ) -> Result<Option<CatalogTool>, StoreError>;

    /// What the first install of `pin` resolved, if one was recorded.
    async fn catalog_lock(
        &self,
        tenant: &Tenant,
        pin: &str,
    ) -> Result<Option<serde_json::Value>, StoreError>;

    /// Records what an install of `pin` resolved, unless a record exists:
    /// the record that stays (the first).
    async fn record_catalog_lock(
        &self,
        tenant: &Tenant,
        pin: &str,
        record: &serde_json::Value,
    ) -> Result<serde_json::Value, StoreError>;

    /// The tenant's install and execute gate policies, if it has its own.
    async fn catalog_policies(
        &self,
        tenant: &Tenant,
    ) -> Result<Option<(String, String)>, StoreError>;

    /// Sets the tenant's gate policies.
    async fn set_catalog_policies(
        &self,
        tenant: &Tenant,
        install: &str,
        execute: &str,
    ) -> Result<(), StoreError>;

    /// Records one install, health check or run.
    async fn record_catalog_run(&self, tenant: &Tenant, run: &CatalogRun)
    -> Result<(), StoreError>;

    /// Recorded runs, oldest first: of one tool, or all.
    async fn catalog_runs(
        &self,
        tenant: &Tenant,
        tool_id: Option<&str>,
    ) -> Result<Vec<CatalogRun>, StoreError>;
}

/// One stored audit record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct AuditEntry {
    /// 1, 2, 3 … per tenant.
    pub seq: i64,
    /// When the store appended it, unix ms.
    pub at_ms: i64,
    /// The record.
    pub record: AuditRecord,
    /// The hash of the record before (64 zeros for the first).
    pub prev_hash: String,
    /// This record's hash.
    pub hash: String,
}

/// Which audit records to read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    /// Only this tool.
    pub tool: Option<String>,
    /// Only this agent.
    pub agent: Option<String>,
    /// Only this decision (`allow`, `ask`, `deny`).
    pub decision: Option<String>,
    /// Only records appended at or after this unix ms.
    pub since_ms: Option<i64>,
    /// Only records after this sequence number (for following).
    pub after_seq: Option<i64>,
    /// At most this many (`None`: 10 000), oldest first.
    pub limit: Option<u32>,
}

/// What `verify_audit` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum AuditVerdict {
    /// Every record is where it was written, unchanged; `records` of them.
    Intact {
        /// How many.
        records: u64,
    },
    /// The first place the chain does not hold.
    Broken {
        /// The sequence number at which it breaks.
        seq: i64,
        /// What is wrong there.
        what: String,
    },
}

//! [`StoreAudit`]: the Executor's audit records into the store's chain.

use std::sync::Arc;

use async_trait::async_trait;
use toolgate_policy::{AuditRecord, AuditSink};

use crate::model::Tenant;
use crate::store::Store;

/// Appends every record to `tenant`'s hash-chained log.
pub struct StoreAudit {
    store: Arc<dyn Store>,
    tenant: Tenant,
}

impl StoreAudit {
    /// A sink into `store` for `tenant`.
    pub fn new(store: Arc<dyn Store>, tenant: Tenant) -> Self {
        StoreAudit { store, tenant }
    }
}

#[async_trait]
impl AuditSink for StoreAudit {
    async fn record(&self, record: &AuditRecord) -> Result<(), String> {
        self.store
            .append_audit(&self.tenant, record)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

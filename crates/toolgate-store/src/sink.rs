//! [`StoreAudit`]: the Executor's audit records into the store's chain.
//!
//! Records are written by one task of their own, in the order they were
//! handed over, so a call's answer does not wait for its record's
//! transaction (about 0.3 ms on SQLite, more on a remote PostgreSQL).
//! [`AuditSink::flush`] waits for every record handed over so far; every
//! surface flushes before it exits. What a toolgate killed outright (SIGKILL)
//! had not written yet, a few milliseconds of records at most, is lost.

use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use tokio::sync::{mpsc, oneshot};
use toolgate_policy::{AuditRecord, AuditSink};

use crate::model::Tenant;
use crate::store::Store;

/// What the writer task is asked to do, in order.
enum Job {
    Append(Box<AuditRecord>),
    Flush(oneshot::Sender<()>),
}

/// Appends every record to `tenant`'s hash-chained log.
pub struct StoreAudit {
    store: Arc<dyn Store>,
    tenant: Tenant,
    /// The writer task, started with the first record.
    writer: OnceLock<mpsc::UnboundedSender<Job>>,
}

impl StoreAudit {
    /// A sink into `store` for `tenant`.
    pub fn new(store: Arc<dyn Store>, tenant: Tenant) -> Self {
        StoreAudit {
            store,
            tenant,
            writer: OnceLock::new(),
        }
    }

    fn writer(&self) -> &mpsc::UnboundedSender<Job> {
        self.writer.get_or_init(|| {
            let (sender, mut jobs) = mpsc::unbounded_channel();
            let store = self.store.clone();
            let tenant = self.tenant.clone();
            tokio::spawn(async move {
                while let Some(job) = jobs.recv().await {
                    match job {
                        Job::Append(record) => {
                            if let Err(error) = store.append_audit(&tenant, &record).await {
                                tracing::warn!(
                                    call_id = %record.call_id,
                                    tool = %record.tool,
                                    %error,
                                    "the audit record could not be written"
                                );
                                eprintln!(
                                    "toolgate: the audit record of call {} ({}) could not be written: {error}",
                                    record.call_id, record.tool
                                );
                            }
                        }
                        Job::Flush(done) => {
                            let _ = done.send(());
                        }
                    }
                }
            });
            sender
        })
    }
}

#[async_trait]
impl AuditSink for StoreAudit {
    async fn record(&self, record: &AuditRecord) -> Result<(), String> {
        self.writer()
            .send(Job::Append(Box::new(record.clone())))
            .map_err(|_| "the audit writer has stopped".to_owned())
    }

    async fn flush(&self) {
        let Some(writer) = self.writer.get() else {
            return;
        };
        let (done, written) = oneshot::channel();
        if writer.send(Job::Flush(done)).is_ok() {
            let _ = written.await;
        }
    }
}

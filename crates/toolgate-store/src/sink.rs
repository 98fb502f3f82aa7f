//! [`StoreAudit`]: the Executor's audit records into the store's chain.
//!
//! Records are written by one task of their own, in the order they were
//! handed over, so a call's answer does not wait for its record's
//! transaction (about 0.3 ms on SQLite, more on a remote PostgreSQL). The
//! records that arrive within a few milliseconds go in one transaction.
//! [`AuditSink::flush`] waits for every record handed over so far; every
//! surface flushes before it exits. What a toolgate killed outright (SIGKILL)
//! had not written yet, a few milliseconds of records at most, is lost.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::{mpsc, oneshot};
use toolgate_policy::{AuditRecord, AuditSink};

use crate::model::Tenant;
use crate::store::Store;

/// Most records the writer takes at once.
const BATCH: usize = 256;

/// How long the writer waits for more records after the first of a batch.
/// A transaction costs about the same for one record as for a hundred, and
/// its statements are work on the thread that answers calls: under a
/// steady stream of small calls, one write every few milliseconds instead
/// of one per call. It is also what a SIGKILL can lose at most, beyond the
/// write in progress.
const GATHER: Duration = Duration::from_millis(5);

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
                let mut waiting = Vec::new();
                while jobs.recv_many(&mut waiting, BATCH).await > 0 {
                    gather(&mut jobs, &mut waiting).await;
                    let mut records = Vec::new();
                    for job in waiting.drain(..) {
                        match job {
                            Job::Append(record) => records.push(*record),
                            Job::Flush(done) => {
                                append(store.as_ref(), &tenant, std::mem::take(&mut records)).await;
                                let _ = done.send(());
                            }
                        }
                    }
                    append(store.as_ref(), &tenant, records).await;
                }
            });
            sender
        })
    }
}

/// Adds to `waiting` what arrives within [`GATHER`], up to [`BATCH`] jobs;
/// a flush asked for (an exit) stops the wait at once.
async fn gather(jobs: &mut mpsc::UnboundedReceiver<Job>, waiting: &mut Vec<Job>) {
    let deadline = tokio::time::Instant::now() + GATHER;
    while waiting.len() < BATCH && !waiting.iter().any(|job| matches!(job, Job::Flush(_))) {
        let room = BATCH - waiting.len();
        match tokio::time::timeout_at(deadline, jobs.recv_many(waiting, room)).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// Appends `records` in one transaction. When that fails, each record is
/// tried on its own, so that one record the store refuses does not take the
/// others with it; each one still refused is reported.
async fn append(store: &dyn Store, tenant: &Tenant, records: Vec<AuditRecord>) {
    if records.is_empty() || store.append_audits(tenant, &records).await.is_ok() {
        return;
    }
    for record in &records {
        if let Err(error) = store.append_audit(tenant, record).await {
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

//! The audit log: per-tenant sequence numbers and a hash chain.
//!
//! Each record's hash covers the tenant, its sequence number, its time, the
//! hash of the record before it and the canonical JSON of the record, so an
//! edited record breaks its own hash, a removed one breaks the link of the
//! next (or the head, for the last), and two swapped ones break both.

use sha2::{Digest, Sha256};
use sqlx::AssertSqlSafe;
use toolgate_policy::{AuditRecord, canonical_json};

use super::{SqlStore, in_write_tx, on_pool, retry};
use crate::error::StoreError;
use crate::model::Tenant;
use crate::store::{AuditEntry, AuditFilter, AuditVerdict};

/// The `prev_hash` of a tenant's first record.
pub(crate) const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";
/// How many records one INSERT of a batched append holds (9 parameters
/// each, well under SQLite's and PostgreSQL's limits).
const APPEND_CHUNK: usize = 64;
/// How many rows verify reads at a time.
const VERIFY_PAGE: i64 = 1000;

const AUDIT_COLUMNS: &str = "seq, at_ms, tool, agent, decision, record, prev_hash, hash";
type AuditRow = (i64, i64, String, String, String, String, String, String);

/// The hash of one record in its place in the chain.
pub(crate) fn record_hash(
    tenant: &str,
    seq: i64,
    at_ms: i64,
    prev_hash: &str,
    record_json: &str,
) -> String {
    let mut h = Sha256::new();
    h.update(b"toolgate-audit-v1\n");
    // Lengths first, so that no two different field lists hash alike.
    for field in [
        tenant.as_bytes(),
        prev_hash.as_bytes(),
        record_json.as_bytes(),
    ] {
        h.update((field.len() as u64).to_be_bytes());
        h.update(field);
    }
    h.update(seq.to_be_bytes());
    h.update(at_ms.to_be_bytes());
    toolgate_core::text::hex(&h.finalize())
}

fn record_json(record: &AuditRecord) -> Result<String, StoreError> {
    let value = serde_json::to_value(record)
        .map_err(|e| StoreError::Database(format!("cannot encode an audit record: {e}")))?;
    Ok(canonical_json(&value))
}

fn entry_of(row: AuditRow) -> Result<AuditEntry, StoreError> {
    let record: AuditRecord = serde_json::from_str(&row.5)
        .map_err(|e| StoreError::Corrupt(format!("audit record {}: {e}", row.0)))?;
    Ok(AuditEntry {
        seq: row.0,
        at_ms: row.1,
        record,
        prev_hash: row.6,
        hash: row.7,
    })
}

/// What is wrong with `row` read after `prev` (seq, hash), if anything.
fn check_row(tenant: &str, prev: (i64, &str), row: &AuditRow) -> Option<String> {
    let (seq, at_ms, tool, agent, decision, json, prev_hash, hash) = row;
    if *seq != prev.0 + 1 {
        return Some(format!(
            "record {} is missing (the next one read is {seq})",
            prev.0 + 1
        ));
    }
    if prev_hash != prev.1 {
        return Some("its link to the record before does not match: a record before it was removed, changed or moved".to_owned());
    }
    if record_hash(tenant, *seq, *at_ms, prev_hash, json) != *hash {
        return Some("its contents do not match its hash: it was edited".to_owned());
    }
    match serde_json::from_str::<AuditRecord>(json) {
        Err(e) => Some(format!("the record does not decode: {e}")),
        Ok(r) if (&r.tool, &r.agent, &r.decision) != (tool, agent, decision) => Some(
            "its tool, agent or decision column differs from the record: it was edited".to_owned(),
        ),
        Ok(_) => None,
    }
}

impl SqlStore {
    pub(crate) async fn append_audit_impl(
        &self,
        tenant: &Tenant,
        record: &AuditRecord,
    ) -> Result<AuditEntry, StoreError> {
        let json = record_json(record)?;
        retry(|| async {
            let now = self.clock.now_ms();
            in_write_tx!(self, tx => {
                sqlx::query("INSERT INTO audit_heads (tenant, seq, hash) VALUES ($1, 0, $2) ON CONFLICT (tenant) DO NOTHING")
                    .bind(tenant.as_str()).bind(GENESIS).execute(&mut *tx).await?;
                // The row lock on the tenant's head serialises appends (in
                // PostgreSQL; SQLite's write lock already does): the next
                // number and the previous hash come from the same row.
                let (seq, prev_hash): (i64, String) =
                    sqlx::query_as("UPDATE audit_heads SET seq = seq + 1 WHERE tenant = $1 RETURNING seq, hash")
                        .bind(tenant.as_str()).fetch_one(&mut *tx).await?;
                let hash = record_hash(tenant.as_str(), seq, now, &prev_hash, &json);
                sqlx::query("INSERT INTO audit (tenant, seq, at_ms, tool, agent, decision, record, prev_hash, hash) \
                             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)")
                    .bind(tenant.as_str()).bind(seq).bind(now).bind(&record.tool).bind(&record.agent)
                    .bind(&record.decision).bind(&json).bind(&prev_hash).bind(&hash)
                    .execute(&mut *tx).await?;
                sqlx::query("UPDATE audit_heads SET hash = $2 WHERE tenant = $1")
                    .bind(tenant.as_str()).bind(&hash).execute(&mut *tx).await?;
                AuditEntry { seq, at_ms: now, record: record.clone(), prev_hash, hash }
            })
        })
        .await
    }

    /// Appends `records` in order in one transaction: the head is read and
    /// moved once, the rows go in as one multi-row INSERT per
    /// [`APPEND_CHUNK`] records. The same chain as appending them one by
    /// one, at a fraction of the round trips.
    pub(crate) async fn append_audits_impl(
        &self,
        tenant: &Tenant,
        records: &[AuditRecord],
    ) -> Result<u64, StoreError> {
        if records.is_empty() {
            return Ok(0);
        }
        let jsons = records
            .iter()
            .map(record_json)
            .collect::<Result<Vec<_>, _>>()?;
        let count = i64::try_from(records.len())
            .map_err(|_| StoreError::Database("too many audit records at once".to_owned()))?;
        retry(|| async {
            let now = self.clock.now_ms();
            in_write_tx!(self, tx => {
                sqlx::query("INSERT INTO audit_heads (tenant, seq, hash) VALUES ($1, 0, $2) ON CONFLICT (tenant) DO NOTHING")
                    .bind(tenant.as_str()).bind(GENESIS).execute(&mut *tx).await?;
                // As in `append_audit_impl`: the head's row lock (or
                // SQLite's write lock) serialises appends; the batch takes
                // its numbers in one step.
                let (last, mut prev_hash): (i64, String) =
                    sqlx::query_as("UPDATE audit_heads SET seq = seq + $2 WHERE tenant = $1 RETURNING seq, hash")
                        .bind(tenant.as_str()).bind(count).fetch_one(&mut *tx).await?;
                let mut seq = last - count;
                for (records, jsons) in records.chunks(APPEND_CHUNK).zip(jsons.chunks(APPEND_CHUNK)) {
                    let mut insert = sqlx::QueryBuilder::new(
                        "INSERT INTO audit (tenant, seq, at_ms, tool, agent, decision, record, prev_hash, hash) ",
                    );
                    insert.push_values(records.iter().zip(jsons), |mut row, (record, json)| {
                        seq += 1;
                        let hash = record_hash(tenant.as_str(), seq, now, &prev_hash, json);
                        row.push_bind(tenant.as_str()).push_bind(seq).push_bind(now)
                            .push_bind(record.tool.as_str()).push_bind(record.agent.as_str())
                            .push_bind(record.decision.as_str()).push_bind(json.as_str())
                            .push_bind(std::mem::replace(&mut prev_hash, hash.clone())).push_bind(hash);
                    });
                    insert.build().execute(&mut *tx).await?;
                }
                sqlx::query("UPDATE audit_heads SET hash = $2 WHERE tenant = $1")
                    .bind(tenant.as_str()).bind(&prev_hash).execute(&mut *tx).await?;
            })
        })
        .await?;
        Ok(records.len() as u64)
    }

    pub(crate) async fn audit_impl(
        &self,
        tenant: &Tenant,
        filter: &AuditFilter,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        let sql = format!(
            "SELECT {AUDIT_COLUMNS} FROM audit WHERE tenant = $1 \
             AND ($2 IS NULL OR tool = $2) AND ($3 IS NULL OR agent = $3) AND ($4 IS NULL OR decision = $4) \
             AND at_ms >= $5 AND seq > $6 ORDER BY seq LIMIT $7"
        );
        retry(|| async {
            let rows: Vec<AuditRow> = on_pool!(self, p => sqlx::query_as(AssertSqlSafe(sql.as_str()))
                .bind(tenant.as_str())
                .bind(filter.tool.as_deref())
                .bind(filter.agent.as_deref())
                .bind(filter.decision.as_deref())
                .bind(filter.since_ms.unwrap_or(i64::MIN))
                .bind(filter.after_seq.unwrap_or(0))
                .bind(i64::from(filter.limit.unwrap_or(10_000)))
                .fetch_all(p).await?);
            rows.into_iter().map(entry_of).collect()
        })
        .await
    }

    pub(crate) async fn verify_audit_impl(
        &self,
        tenant: &Tenant,
    ) -> Result<AuditVerdict, StoreError> {
        let page = format!(
            "SELECT {AUDIT_COLUMNS} FROM audit WHERE tenant = $1 AND seq > $2 ORDER BY seq LIMIT $3"
        );
        let mut prev: (i64, String) = (0, GENESIS.to_owned());
        loop {
            let after = prev.0;
            let rows: Vec<AuditRow> = retry(|| async {
                Ok(
                    on_pool!(self, p => sqlx::query_as(AssertSqlSafe(page.as_str()))
                    .bind(tenant.as_str()).bind(after).bind(VERIFY_PAGE).fetch_all(p).await?),
                )
            })
            .await?;
            if rows.is_empty() {
                break;
            }
            for row in rows {
                if let Some(what) = check_row(tenant.as_str(), (prev.0, &prev.1), &row) {
                    return Ok(AuditVerdict::Broken {
                        seq: row.0.min(prev.0 + 1),
                        what,
                    });
                }
                prev = (row.0, row.7);
            }
        }
        let head: Option<(i64, String)> = retry(|| async {
            Ok(on_pool!(self, p => sqlx::query_as("SELECT seq, hash FROM audit_heads WHERE tenant = $1")
                .bind(tenant.as_str()).fetch_optional(p).await?))
        })
        .await?;
        let (head_seq, head_hash) = head.unwrap_or((0, GENESIS.to_owned()));
        if head_seq != prev.0 || head_hash != prev.1 {
            return Ok(AuditVerdict::Broken {
                seq: prev.0 + 1,
                what: format!(
                    "the log ends at record {} but {head_seq} were written: records at the end were removed (or the head was changed)",
                    prev.0
                ),
            });
        }
        Ok(AuditVerdict::Intact {
            records: u64::try_from(prev.0).unwrap_or(0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_covers_every_field_and_their_boundaries() {
        let base = record_hash("t", 1, 10, GENESIS, "{}");
        assert_eq!(base, record_hash("t", 1, 10, GENESIS, "{}"));
        assert_eq!(base.len(), 64);
        for other in [
            record_hash("u", 1, 10, GENESIS, "{}"),
            record_hash("t", 2, 10, GENESIS, "{}"),
            record_hash("t", 1, 11, GENESIS, "{}"),
            record_hash("t", 1, 10, &"1".repeat(64), "{}"),
            record_hash("t", 1, 10, GENESIS, "{ }"),
        ] {
            assert_ne!(base, other);
        }
        // Moving bytes between fields changes the hash (lengths are hashed).
        assert_ne!(
            record_hash("ab", 1, 1, "c", "d"),
            record_hash("a", 1, 1, "bc", "d")
        );
    }
}

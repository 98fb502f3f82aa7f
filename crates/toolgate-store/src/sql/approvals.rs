//! Requests, grants, refusals and spends.

use std::str::FromStr;

use sqlx::AssertSqlSafe;
use toolgate_policy::{ApprovalScope, ScopeKey};

use super::{SqlStore, in_write_tx, on_pool, retry};
use crate::error::StoreError;
use crate::model::{
    Answer, Decided, Filed, Grant, NewRequest, Refusal, Request, RequestDetails, RequestFilter,
    RequestState, Spend, SpendFor, Tenant, duration_ms, new_id,
};

const REQUEST_COLUMNS: &str = "id, tool, agent, scope, exact_digest, state, created_ms, expires_ms, decided_ms, decided_by, outcome_id, answer_reason, details";
type RequestRow = (
    String,
    String,
    String,
    String,
    String,
    String,
    i64,
    i64,
    Option<i64>,
    Option<String>,
    Option<String>,
    Option<String>,
    String,
);

const GRANT_COLUMNS: &str =
    "id, request_id, tool, kind, digest, prefix, uses, spent, created_ms, expires_ms, granted_by";
type GrantRow = (
    String,
    String,
    String,
    String,
    String,
    String,
    Option<i64>,
    i64,
    i64,
    i64,
    String,
);

const REFUSAL_COLUMNS: &str =
    "id, request_id, tool, kind, digest, prefix, reason, created_ms, expires_ms, refused_by";
type RefusalRow = (
    String,
    String,
    String,
    String,
    String,
    String,
    String,
    i64,
    i64,
    String,
);

/// `$first, $first+1, …` for `n` bound values.
fn placeholders(first: usize, n: usize) -> String {
    (first..first + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn corrupt(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("{what}: {e}"))
}

fn scope_of(s: &str) -> Result<ApprovalScope, StoreError> {
    ApprovalScope::from_str(s).map_err(|e| corrupt("scope", e))
}

fn key_of(kind: &str, digest: String, prefix: &str) -> Result<ScopeKey, StoreError> {
    Ok(ScopeKey {
        kind: scope_of(kind)?,
        digest,
        prefix: serde_json::from_str(prefix).map_err(|e| corrupt("prefix", e))?,
    })
}

fn request_of(row: RequestRow, now_ms: i64) -> Result<Request, StoreError> {
    let (id, tool, agent, scope, exact_digest, state, created_ms, expires_ms) =
        (row.0, row.1, row.2, row.3, row.4, row.5, row.6, row.7);
    let details: RequestDetails =
        serde_json::from_str(&row.12).map_err(|e| corrupt("request details", e))?;
    let mut state = RequestState::parse(&state).ok_or_else(|| corrupt("request state", &state))?;
    if state == RequestState::Pending && expires_ms <= now_ms {
        state = RequestState::Expired;
    }
    Ok(Request {
        id,
        tool,
        arguments: details.arguments,
        reason: details.reason,
        agent,
        call_id: details.call_id,
        effect_class: details.effect_class,
        scope: scope_of(&scope)?,
        exact_digest,
        covering: details.covering,
        suggested_prefix: details.suggested_prefix,
        state,
        created_ms,
        expires_ms,
        decided_ms: row.8,
        decided_by: row.9,
        outcome_id: row.10,
        answer_reason: row.11,
    })
}

fn uses_of(n: Option<i64>) -> Result<Option<u32>, StoreError> {
    n.map(|n| u32::try_from(n).map_err(|e| corrupt("uses", e)))
        .transpose()
}

fn grant_of(row: GrantRow) -> Result<Grant, StoreError> {
    Ok(Grant {
        key: key_of(&row.3, row.4, &row.5)?,
        id: row.0,
        request_id: row.1,
        tool: row.2,
        uses: uses_of(row.6)?,
        spent: u32::try_from(row.7).map_err(|e| corrupt("spent", e))?,
        created_ms: row.8,
        expires_ms: row.9,
        by: row.10,
    })
}

fn refusal_of(row: RefusalRow) -> Result<Refusal, StoreError> {
    Ok(Refusal {
        key: key_of(&row.3, row.4, &row.5)?,
        id: row.0,
        request_id: row.1,
        tool: row.2,
        reason: row.6,
        created_ms: row.7,
        expires_ms: row.8,
        by: row.9,
    })
}

/// The key an answer of `scope` stands on: one of the request's own
/// covering keys, so that a person can never approve a scope that does not
/// cover the very call they were asked about.
fn answer_key(
    request: &Request,
    scope: ApprovalScope,
    prefix: &[String],
) -> Result<ScopeKey, StoreError> {
    let id = &request.id;
    match scope {
        ApprovalScope::Exact => Ok(ScopeKey {
            kind: ApprovalScope::Exact,
            digest: request.exact_digest.clone(),
            prefix: Vec::new(),
        }),
        ApprovalScope::Tool => request
            .covering
            .iter()
            .find(|k| k.kind == ApprovalScope::Tool)
            .cloned()
            .ok_or_else(|| {
                StoreError::BadAnswer(format!("request {id} offers no tool-wide scope"))
            }),
        ApprovalScope::CommandPrefix => {
            let words = if prefix.is_empty() {
                &request.suggested_prefix
            } else {
                prefix
            };
            let offered: Vec<String> = request
                .covering
                .iter()
                .filter(|k| k.kind == ApprovalScope::CommandPrefix)
                .map(|k| format!("`{}`", k.prefix.join(" ")))
                .collect();
            if words.is_empty() {
                return Err(StoreError::BadAnswer(format!(
                    "request {id} has no command prefix to suggest; name one (prefixes that cover it: {})",
                    if offered.is_empty() {
                        "none".to_owned()
                    } else {
                        offered.join(", ")
                    }
                )));
            }
            request
                .covering
                .iter()
                .find(|k| k.kind == ApprovalScope::CommandPrefix && k.prefix == *words)
                .cloned()
                .ok_or_else(|| {
                    StoreError::BadAnswer(format!(
                        "the prefix `{}` does not cover every command of request {id}; prefixes that do: {}",
                        words.join(" "),
                        if offered.is_empty() { "none (use --scope exact or tool)".to_owned() } else { offered.join(", ") }
                    ))
                })
        }
    }
}

pub(super) fn json_text(v: &impl serde::Serialize) -> Result<String, StoreError> {
    serde_json::to_string(v).map_err(|e| StoreError::Database(format!("cannot encode a row: {e}")))
}

impl SqlStore {
    pub(crate) async fn file_or_reuse_impl(
        &self,
        tenant: &Tenant,
        new: &NewRequest,
    ) -> Result<Filed, StoreError> {
        let details = json_text(&RequestDetails {
            arguments: new.arguments.clone(),
            reason: new.reason.clone(),
            call_id: new.call_id.clone(),
            effect_class: new.effect_class.clone(),
            covering: new.covering.clone(),
            suggested_prefix: new.suggested_prefix.clone(),
        })?;
        let insert = format!(
            "INSERT INTO requests (id, tenant, tool, agent, scope, exact_digest, state, created_ms, expires_ms, details) \
             VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $8, $9) ON CONFLICT DO NOTHING RETURNING {REQUEST_COLUMNS}"
        );
        let pending = format!(
            "SELECT {REQUEST_COLUMNS} FROM requests WHERE tenant = $1 AND exact_digest = $2 AND state = 'pending'"
        );
        retry(|| async {
            let now = self.clock.now_ms();
            in_write_tx!(self, tx => {
                // A pending request past its TTL is marked expired first, so
                // that the one-pending-per-question index lets a new one in.
                sqlx::query("UPDATE requests SET state = 'expired' WHERE tenant = $1 AND exact_digest = $2 AND state = 'pending' AND expires_ms <= $3")
                    .bind(tenant.as_str())
                    .bind(&new.exact.digest)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                let inserted: Option<RequestRow> = sqlx::query_as(AssertSqlSafe(insert.as_str()))
                    .bind(new_id("apr_"))
                    .bind(tenant.as_str())
                    .bind(&new.tool)
                    .bind(&new.agent)
                    .bind(new.scope.as_str())
                    .bind(&new.exact.digest)
                    .bind(now)
                    .bind(now.saturating_add(duration_ms(new.ttl)))
                    .bind(&details)
                    .fetch_optional(&mut *tx)
                    .await?;
                match inserted {
                    Some(row) => Filed { request: request_of(row, now)?, reused: false },
                    None => {
                        let row: Option<RequestRow> = sqlx::query_as(AssertSqlSafe(pending.as_str()))
                            .bind(tenant.as_str())
                            .bind(&new.exact.digest)
                            .fetch_optional(&mut *tx)
                            .await?;
                        match row {
                            Some(row) => Filed { request: request_of(row, now)?, reused: true },
                            // The other request was answered between our
                            // insert and this read (or an id collided):
                            // start again.
                            None => return Err(StoreError::Busy { seconds: 0, message: "a concurrent answer".to_owned() }),
                        }
                    }
                }
            })
        })
        .await
    }

    pub(crate) async fn request_impl(
        &self,
        tenant: &Tenant,
        id: &str,
    ) -> Result<Option<Request>, StoreError> {
        let sql = format!("SELECT {REQUEST_COLUMNS} FROM requests WHERE tenant = $1 AND id = $2");
        retry(|| async {
            let now = self.clock.now_ms();
            let row: Option<RequestRow> = on_pool!(self, p => sqlx::query_as(AssertSqlSafe(sql.as_str()))
                .bind(tenant.as_str()).bind(id).fetch_optional(p).await?);
            row.map(|r| request_of(r, now)).transpose()
        })
        .await
    }

    pub(crate) async fn requests_impl(
        &self,
        tenant: &Tenant,
        filter: &RequestFilter,
    ) -> Result<Vec<Request>, StoreError> {
        let sql = format!(
            "SELECT {REQUEST_COLUMNS} FROM requests WHERE tenant = $1 \
             AND ($2 = 0 OR (state = 'pending' AND expires_ms > $3)) AND created_ms >= $4 \
             ORDER BY created_ms DESC, id DESC LIMIT $5"
        );
        retry(|| async {
            let now = self.clock.now_ms();
            let rows: Vec<RequestRow> = on_pool!(self, p => sqlx::query_as(AssertSqlSafe(sql.as_str()))
                .bind(tenant.as_str())
                .bind(i64::from(filter.pending_only))
                .bind(now)
                .bind(filter.since_ms.unwrap_or(i64::MIN))
                .bind(i64::from(filter.limit.unwrap_or(1000)))
                .fetch_all(p).await?);
            rows.into_iter().map(|r| request_of(r, now)).collect()
        })
        .await
    }

    pub(crate) async fn decide_impl(
        &self,
        tenant: &Tenant,
        id: &str,
        answer: &Answer,
        by: &str,
    ) -> Result<Decided, StoreError> {
        let select =
            format!("SELECT {REQUEST_COLUMNS} FROM requests WHERE tenant = $1 AND id = $2");
        retry(|| async {
            let now = self.clock.now_ms();
            in_write_tx!(self, tx => {
                let row: Option<RequestRow> = sqlx::query_as(AssertSqlSafe(select.as_str()))
                    .bind(tenant.as_str()).bind(id).fetch_optional(&mut *tx).await?;
                let request = request_of(row.ok_or_else(|| StoreError::NotFound(id.to_owned()))?, now)?;
                if request.state != RequestState::Pending {
                    return Err(StoreError::NotPending { id: id.to_owned(), state: request.state.as_str().to_owned() });
                }
                let (state, outcome_id, reason, key, ttl) = match answer {
                    Answer::Approve { uses, ttl, scope, prefix } => {
                        if *uses == Some(0) {
                            return Err(StoreError::BadAnswer("a grant needs at least one use (or unlimited)".to_owned()));
                        }
                        ("approved", new_id("grt_"), None, answer_key(&request, *scope, prefix)?, ttl)
                    }
                    Answer::Deny { reason, ttl, scope, prefix } => {
                        ("denied", new_id("ref_"), Some(reason.clone()), answer_key(&request, *scope, prefix)?, ttl)
                    }
                };
                // Conditional on still pending: of two people answering at
                // once, exactly one answer lands.
                let updated = sqlx::query("UPDATE requests SET state = $3, decided_ms = $4, decided_by = $5, outcome_id = $6, answer_reason = $7 \
                                           WHERE tenant = $1 AND id = $2 AND state = 'pending' AND expires_ms > $4")
                    .bind(tenant.as_str()).bind(id).bind(state).bind(now).bind(by).bind(&outcome_id).bind(&reason)
                    .execute(&mut *tx).await?;
                if updated.rows_affected() != 1 {
                    return Err(StoreError::NotPending { id: id.to_owned(), state: "answered by someone else".to_owned() });
                }
                let expires = now.saturating_add(duration_ms(*ttl));
                let prefix = json_text(&key.prefix)?;
                match answer {
                    Answer::Approve { uses, .. } => {
                        let uses = uses.map(i64::from);
                        sqlx::query("INSERT INTO grants (id, tenant, request_id, tool, kind, digest, prefix, uses, uses_left, spent, created_ms, expires_ms, granted_by) \
                                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, 0, $9, $10, $11)")
                            .bind(&outcome_id).bind(tenant.as_str()).bind(id).bind(&request.tool)
                            .bind(key.kind.as_str()).bind(&key.digest).bind(&prefix).bind(uses)
                            .bind(now).bind(expires).bind(by)
                            .execute(&mut *tx).await?;
                        Decided::Granted(Grant {
                            id: outcome_id, request_id: id.to_owned(), tool: request.tool.clone(), key,
                            uses: uses_of(uses)?, spent: 0, created_ms: now, expires_ms: expires, by: by.to_owned(),
                        })
                    }
                    Answer::Deny { reason, .. } => {
                        sqlx::query("INSERT INTO refusals (id, tenant, request_id, tool, kind, digest, prefix, reason, created_ms, expires_ms, refused_by) \
                                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)")
                            .bind(&outcome_id).bind(tenant.as_str()).bind(id).bind(&request.tool)
                            .bind(key.kind.as_str()).bind(&key.digest).bind(&prefix).bind(reason)
                            .bind(now).bind(expires).bind(by)
                            .execute(&mut *tx).await?;
                        Decided::Refused(Refusal {
                            id: outcome_id, request_id: id.to_owned(), tool: request.tool.clone(), key,
                            reason: reason.clone(), created_ms: now, expires_ms: expires, by: by.to_owned(),
                        })
                    }
                }
            })
        })
        .await
    }

    pub(crate) async fn spend_impl(
        &self,
        tenant: &Tenant,
        spend: &SpendFor<'_>,
    ) -> Result<Option<String>, StoreError> {
        if spend.covering.is_empty() {
            return Ok(None);
        }
        let usable = format!(
            "tenant = $1 AND expires_ms > $2 AND (uses_left IS NULL OR uses_left > 0) AND digest IN ({})",
            placeholders(3, spend.covering.len())
        );
        // The one conditional UPDATE: it takes a use only from a row that
        // still has one, so two spenders can never both take the last use
        // (SQLite: the write lock of BEGIN IMMEDIATE; PostgreSQL: the row
        // lock, after which the WHERE is checked again on the new row).
        // Limited grants are spent before unlimited ones, the soonest to
        // expire first.
        let update = format!(
            "UPDATE grants SET uses_left = uses_left - 1, spent = spent + 1 \
             WHERE id = (SELECT id FROM grants WHERE {usable} ORDER BY (uses_left IS NULL), expires_ms, id LIMIT 1) \
             AND {usable} RETURNING id"
        );
        let exists = format!("SELECT id FROM grants WHERE {usable} LIMIT 1");
        retry(|| async {
            let now = self.clock.now_ms();
            in_write_tx!(self, tx => {
                let mut spent = None;
                // PostgreSQL only: a spender that lost the row to another
                // finds no row to update and looks again with a new snapshot.
                for _ in 0..64 {
                    let mut q = sqlx::query_scalar::<_, String>(AssertSqlSafe(update.as_str()))
                        .bind(tenant.as_str()).bind(now);
                    for digest in spend.covering {
                        q = q.bind(digest.as_str());
                    }
                    if let Some(id) = q.fetch_optional(&mut *tx).await? {
                        spent = Some(id);
                        break;
                    }
                    let mut q = sqlx::query_scalar::<_, String>(AssertSqlSafe(exists.as_str()))
                        .bind(tenant.as_str()).bind(now);
                    for digest in spend.covering {
                        q = q.bind(digest.as_str());
                    }
                    if q.fetch_optional(&mut *tx).await?.is_none() {
                        break;
                    }
                }
                if let Some(grant_id) = &spent {
                    // The call that used it, in the same transaction: a
                    // spent use without its spend row cannot exist.
                    sqlx::query("INSERT INTO spends (id, tenant, grant_id, call_id, tool, args_digest, at_ms) VALUES ($1, $2, $3, $4, $5, $6, $7)")
                        .bind(new_id("spd_")).bind(tenant.as_str()).bind(grant_id)
                        .bind(spend.call_id).bind(spend.tool).bind(spend.args_digest).bind(now)
                        .execute(&mut *tx).await?;
                }
                spent
            })
        })
        .await
    }

    pub(crate) async fn live_refusal_impl(
        &self,
        tenant: &Tenant,
        covering: &[String],
    ) -> Result<Option<Refusal>, StoreError> {
        if covering.is_empty() {
            return Ok(None);
        }
        let sql = format!(
            "SELECT {REFUSAL_COLUMNS} FROM refusals WHERE tenant = $1 AND expires_ms > $2 AND digest IN ({}) \
             ORDER BY created_ms DESC, id LIMIT 1",
            placeholders(3, covering.len())
        );
        retry(|| async {
            let now = self.clock.now_ms();
            let row: Option<RefusalRow> = on_pool!(self, p => {
                let mut q = sqlx::query_as(AssertSqlSafe(sql.as_str())).bind(tenant.as_str()).bind(now);
                for digest in covering {
                    q = q.bind(digest.as_str());
                }
                q.fetch_optional(p).await?
            });
            row.map(refusal_of).transpose()
        })
        .await
    }

    pub(crate) async fn grant_impl(
        &self,
        tenant: &Tenant,
        id: &str,
    ) -> Result<Option<Grant>, StoreError> {
        let sql = format!("SELECT {GRANT_COLUMNS} FROM grants WHERE tenant = $1 AND id = $2");
        retry(|| async {
            let row: Option<GrantRow> = on_pool!(self, p => sqlx::query_as(AssertSqlSafe(sql.as_str()))
                .bind(tenant.as_str()).bind(id).fetch_optional(p).await?);
            row.map(grant_of).transpose()
        })
        .await
    }

    pub(crate) async fn spends_impl(
        &self,
        tenant: &Tenant,
        grant_id: &str,
    ) -> Result<Vec<Spend>, StoreError> {
        retry(|| async {
            let rows: Vec<(String, String, String, String, String, i64)> = on_pool!(self, p => sqlx::query_as(
                "SELECT id, grant_id, call_id, tool, args_digest, at_ms FROM spends WHERE tenant = $1 AND grant_id = $2 ORDER BY at_ms, id")
                .bind(tenant.as_str()).bind(grant_id).fetch_all(p).await?);
            Ok(rows
                .into_iter()
                .map(|(id, grant_id, call_id, tool, args_digest, at_ms)| Spend { id, grant_id, call_id, tool, args_digest, at_ms })
                .collect())
        })
        .await
    }
}

//! Pins of external MCP tools and the changes waiting for review.

use sqlx::AssertSqlSafe;

use super::approvals::{corrupt, json_text};
use super::{SqlStore, in_write_tx, on_pool, retry};
use crate::error::StoreError;
use crate::model::Tenant;
use crate::pins::{ChangeState, ListedTool, PinCheck, PinnedTool, ToolChange};

const PIN_COLUMNS: &str = "server, tool, digest, definition, pinned_ms, approved_by, \
     change_digest, change_definition, change_seen_ms, change_state, change_decided_by, change_decided_ms";
type PinRow = (
    String,
    String,
    String,
    String,
    i64,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<i64>,
    Option<String>,
    Option<String>,
    Option<i64>,
);

/// The first definition wins: of two processes inserting at once, one
/// inserts and the other gets no row back (PostgreSQL makes it wait for
/// the first to commit), then reads the winner's pin.
const INSERT_PIN: &str = "INSERT INTO tool_pins (tenant, server, tool, digest, definition, pinned_ms) \
     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (tenant, server, tool) DO NOTHING RETURNING digest";

/// Records a changed definition as pending. Not when it is the pin (a
/// person approved it between our read and this write), and not when it
/// is the change recorded already: that keeps when it was first seen, and
/// keeps a rejected definition rejected instead of queueing it again.
const RECORD_CHANGE: &str = "UPDATE tool_pins SET change_digest = $4, change_definition = $5, \
     change_seen_ms = $6, change_state = 'pending', change_decided_by = NULL, change_decided_ms = NULL \
     WHERE tenant = $1 AND server = $2 AND tool = $3 AND digest <> $4 \
     AND (change_digest IS NULL OR change_digest <> $4)";

/// The row of one tool: `$1` tenant, `$2` server, `$3` tool.
fn select_one() -> String {
    format!("SELECT {PIN_COLUMNS} FROM tool_pins WHERE tenant = $1 AND server = $2 AND tool = $3")
}

fn definition_of(text: &str) -> Result<serde_json::Value, StoreError> {
    serde_json::from_str(text).map_err(|e| corrupt("pinned tool definition", e))
}

/// The pin of a row, and its change if it has one.
fn decode(row: PinRow) -> Result<(PinnedTool, Option<ToolChange>), StoreError> {
    let pinned = PinnedTool {
        server: row.0,
        tool: row.1,
        digest: row.2,
        definition: definition_of(&row.3)?,
        pinned_ms: row.4,
        approved_by: row.5,
    };
    let change = match (row.6, row.7, row.8, row.9) {
        (Some(digest), Some(definition), Some(seen_ms), Some(state)) => Some(ToolChange {
            pinned: pinned.clone(),
            digest,
            definition: definition_of(&definition)?,
            seen_ms,
            state: ChangeState::parse(&state).ok_or_else(|| corrupt("change state", &state))?,
            decided_by: row.10,
            decided_ms: row.11,
        }),
        (None, None, None, None) => None,
        _ => return Err(corrupt("tool change", "some of its columns are empty")),
    };
    Ok((pinned, change))
}

/// Why an approval or rejection of `digest` found no row to change.
fn missed(row: Option<PinRow>, server: &str, tool: &str, digest: &str) -> StoreError {
    let (server, tool) = (server.to_owned(), tool.to_owned());
    let row = match row.map(decode) {
        None => return StoreError::NoPin { server, tool },
        Some(Err(e)) => return e,
        Some(Ok(row)) => row,
    };
    match row {
        (_, Some(change)) => StoreError::ChangedAgain {
            server,
            tool,
            seen: digest.to_owned(),
            now: change.digest,
        },
        (_, None) => StoreError::NoChange { server, tool },
    }
}

impl SqlStore {
    pub(crate) async fn check_tool_pins_impl(
        &self,
        tenant: &Tenant,
        listed: &[ListedTool],
    ) -> Result<Vec<PinCheck>, StoreError> {
        let texts = listed
            .iter()
            .map(|l| json_text(&l.definition))
            .collect::<Result<Vec<_>, _>>()?;
        // In key order: two processes pinning overlapping sets take the
        // rows' locks in the same order, so that neither waits for the
        // other in a cycle (a PostgreSQL deadlock, aborting one of them).
        let mut order: Vec<usize> = (0..listed.len()).collect();
        order.sort_by(|&a, &b| {
            (&listed[a].server, &listed[a].tool).cmp(&(&listed[b].server, &listed[b].tool))
        });
        let select = select_one();
        retry(|| async {
            let now = self.clock.now_ms();
            in_write_tx!(self, tx => {
                let mut checks = vec![PinCheck::Trusted; listed.len()];
                for &i in &order {
                    let (tool, text) = (&listed[i], &texts[i]);
                    let inserted: Option<String> = sqlx::query_scalar(INSERT_PIN)
                        .bind(tenant.as_str()).bind(&tool.server).bind(&tool.tool)
                        .bind(&tool.digest).bind(text).bind(now)
                        .fetch_optional(&mut *tx).await?;
                    if inserted.is_some() {
                        checks[i] = PinCheck::FirstSeen;
                        continue;
                    }
                    let row: Option<PinRow> = sqlx::query_as(AssertSqlSafe(select.as_str()))
                        .bind(tenant.as_str()).bind(&tool.server).bind(&tool.tool)
                        .fetch_optional(&mut *tx).await?;
                    let Some(row) = row else {
                        return Err(StoreError::Busy { seconds: 0, message: "a pin vanished while it was checked".to_owned() });
                    };
                    let (pinned, _) = decode(row)?;
                    if pinned.digest == tool.digest {
                        continue;
                    }
                    sqlx::query(RECORD_CHANGE)
                        .bind(tenant.as_str()).bind(&tool.server).bind(&tool.tool)
                        .bind(&tool.digest).bind(text).bind(now)
                        .execute(&mut *tx).await?;
                    checks[i] = PinCheck::Changed { pinned };
                }
                checks
            })
        })
        .await
    }

    pub(crate) async fn tool_pins_impl(
        &self,
        tenant: &Tenant,
    ) -> Result<Vec<PinnedTool>, StoreError> {
        let sql =
            format!("SELECT {PIN_COLUMNS} FROM tool_pins WHERE tenant = $1 ORDER BY server, tool");
        retry(|| async {
            let rows: Vec<PinRow> = on_pool!(self, p => sqlx::query_as(AssertSqlSafe(sql.as_str()))
                .bind(tenant.as_str()).fetch_all(p).await?);
            rows.into_iter().map(|r| Ok(decode(r)?.0)).collect()
        })
        .await
    }

    pub(crate) async fn tool_changes_impl(
        &self,
        tenant: &Tenant,
    ) -> Result<Vec<ToolChange>, StoreError> {
        let sql = format!(
            "SELECT {PIN_COLUMNS} FROM tool_pins WHERE tenant = $1 AND change_digest IS NOT NULL ORDER BY server, tool"
        );
        retry(|| async {
            let rows: Vec<PinRow> = on_pool!(self, p => sqlx::query_as(AssertSqlSafe(sql.as_str()))
                .bind(tenant.as_str()).fetch_all(p).await?);
            Ok(rows
                .into_iter()
                .map(decode)
                .collect::<Result<Vec<_>, _>>()?
                .into_iter()
                .filter_map(|(_, change)| change)
                .collect())
        })
        .await
    }

    pub(crate) async fn approve_tool_change_impl(
        &self,
        tenant: &Tenant,
        server: &str,
        tool: &str,
        digest: &str,
        by: &str,
    ) -> Result<PinnedTool, StoreError> {
        // One conditional UPDATE: the change becomes the pin only while it
        // is the very definition the person saw (`change_digest = $4`); a
        // server that changed the tool again after the diff was shown
        // leaves nothing to update.
        let approve = format!(
            "UPDATE tool_pins SET digest = change_digest, definition = change_definition, pinned_ms = $5, \
             approved_by = $6, change_digest = NULL, change_definition = NULL, change_seen_ms = NULL, \
             change_state = NULL, change_decided_by = NULL, change_decided_ms = NULL \
             WHERE tenant = $1 AND server = $2 AND tool = $3 AND change_digest = $4 RETURNING {PIN_COLUMNS}"
        );
        let select = select_one();
        retry(|| async {
            let now = self.clock.now_ms();
            let row: Option<PinRow> = on_pool!(self, p => sqlx::query_as(AssertSqlSafe(approve.as_str()))
                .bind(tenant.as_str()).bind(server).bind(tool).bind(digest).bind(now).bind(by)
                .fetch_optional(p).await?);
            if let Some(row) = row {
                return Ok(decode(row)?.0);
            }
            let row: Option<PinRow> = on_pool!(self, p => sqlx::query_as(AssertSqlSafe(select.as_str()))
                .bind(tenant.as_str()).bind(server).bind(tool).fetch_optional(p).await?);
            // Approved already (by another person, or this one twice): the
            // pin is what they asked for.
            if let Some(Ok((pinned, _))) = row.clone().map(decode)
                && pinned.digest == digest
            {
                return Ok(pinned);
            }
            Err(missed(row, server, tool, digest))
        })
        .await
    }

    pub(crate) async fn reject_tool_change_impl(
        &self,
        tenant: &Tenant,
        server: &str,
        tool: &str,
        digest: &str,
        by: &str,
    ) -> Result<ToolChange, StoreError> {
        let reject = format!(
            "UPDATE tool_pins SET change_state = 'rejected', change_decided_by = $5, change_decided_ms = $6 \
             WHERE tenant = $1 AND server = $2 AND tool = $3 AND change_digest = $4 RETURNING {PIN_COLUMNS}"
        );
        let select = select_one();
        retry(|| async {
            let now = self.clock.now_ms();
            let row: Option<PinRow> = on_pool!(self, p => sqlx::query_as(AssertSqlSafe(reject.as_str()))
                .bind(tenant.as_str()).bind(server).bind(tool).bind(digest).bind(by).bind(now)
                .fetch_optional(p).await?);
            if let Some(row) = row {
                return decode(row)?
                    .1
                    .ok_or_else(|| corrupt("tool change", "a rejected change without its definition"));
            }
            let row: Option<PinRow> = on_pool!(self, p => sqlx::query_as(AssertSqlSafe(select.as_str()))
                .bind(tenant.as_str()).bind(server).bind(tool).fetch_optional(p).await?);
            Err(missed(row, server, tool, digest))
        })
        .await
    }
}

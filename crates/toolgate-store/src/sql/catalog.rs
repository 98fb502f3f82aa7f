//! The catalogue's tools, locks, gate policies and runs.

use sqlx::AssertSqlSafe;

use super::approvals::{corrupt, json_text};
use super::{SqlStore, in_write_tx, on_pool, retry};
use crate::catalog::{CatalogRun, CatalogState, CatalogTool, Registered};
use crate::error::StoreError;
use crate::model::Tenant;

const TOOL_COLUMNS: &str =
    "id, manifest, pin, state, install_dir, last_error, added_ms, updated_ms";
type ToolRow = (
    String,
    String,
    String,
    String,
    Option<String>,
    Option<String>,
    i64,
    i64,
);

fn decode_tool(row: ToolRow) -> Result<CatalogTool, StoreError> {
    Ok(CatalogTool {
        manifest: serde_json::from_str(&row.1).map_err(|e| corrupt("catalogue manifest", e))?,
        state: CatalogState::parse(&row.3).ok_or_else(|| corrupt("catalogue state", &row.3))?,
        id: row.0,
        pin: row.2,
        install_dir: row.4,
        last_error: row.5,
        added_ms: row.6,
        updated_ms: row.7,
    })
}

const RUN_COLUMNS: &str = "run_id, tool_id, kind, bin, argv, outcome, exit_code, signal, \
     duration_ms, approval_id, detail, started_ms";
type RunRow = (
    String,
    String,
    String,
    Option<String>,
    String,
    String,
    Option<i64>,
    Option<i64>,
    i64,
    Option<String>,
    Option<String>,
    i64,
);

fn decode_run(row: RunRow) -> Result<CatalogRun, StoreError> {
    Ok(CatalogRun {
        argv: serde_json::from_str(&row.4).map_err(|e| corrupt("catalogue run argv", e))?,
        run_id: row.0,
        tool_id: row.1,
        kind: row.2,
        bin: row.3,
        outcome: row.5,
        exit_code: row.6,
        signal: row.7,
        duration_ms: row.8,
        approval_id: row.9,
        detail: row.10,
        started_ms: row.11,
    })
}

impl SqlStore {
    pub(crate) async fn register_catalog_tool_impl(
        &self,
        tenant: &Tenant,
        id: &str,
        manifest: &serde_json::Value,
        pin: &str,
    ) -> Result<Registered, StoreError> {
        let text = json_text(manifest)?;
        let select =
            format!("SELECT {TOOL_COLUMNS} FROM catalog_tools WHERE tenant = $1 AND id = $2");
        retry(|| async {
            let now = self.clock.now_ms();
            in_write_tx!(self, tx => {
                let row: Option<ToolRow> = sqlx::query_as(AssertSqlSafe(select.as_str()))
                    .bind(tenant.as_str()).bind(id).fetch_optional(&mut *tx).await?;
                match row {
                    None => {
                        sqlx::query("INSERT INTO catalog_tools (tenant, id, manifest, pin, state, added_ms, updated_ms) \
                             VALUES ($1, $2, $3, $4, 'shelved', $5, $5)")
                            .bind(tenant.as_str()).bind(id).bind(&text).bind(pin).bind(now)
                            .execute(&mut *tx).await?;
                        Registered::Added
                    }
                    Some(row) if row.2 != pin => {
                        // A new pin: what was installed (and approved) was
                        // other bytes, so the tool is shelved again.
                        sqlx::query("UPDATE catalog_tools SET manifest = $3, pin = $4, state = 'shelved', \
                             install_dir = NULL, last_error = NULL, updated_ms = $5 WHERE tenant = $1 AND id = $2")
                            .bind(tenant.as_str()).bind(id).bind(&text).bind(pin).bind(now)
                            .execute(&mut *tx).await?;
                        Registered::Repinned
                    }
                    Some(row) => {
                        let before: serde_json::Value = serde_json::from_str(&row.1)
                            .map_err(|e| corrupt("catalogue manifest", e))?;
                        if &before == manifest {
                            Registered::Unchanged
                        } else {
                            sqlx::query("UPDATE catalog_tools SET manifest = $3, updated_ms = $4 WHERE tenant = $1 AND id = $2")
                                .bind(tenant.as_str()).bind(id).bind(&text).bind(now)
                                .execute(&mut *tx).await?;
                            Registered::Updated
                        }
                    }
                }
            })
        })
        .await
    }

    pub(crate) async fn catalog_tools_impl(
        &self,
        tenant: &Tenant,
        id: Option<&str>,
    ) -> Result<Vec<CatalogTool>, StoreError> {
        let sql = match id {
            Some(_) => {
                format!("SELECT {TOOL_COLUMNS} FROM catalog_tools WHERE tenant = $1 AND id = $2")
            }
            None => {
                format!("SELECT {TOOL_COLUMNS} FROM catalog_tools WHERE tenant = $1 ORDER BY id")
            }
        };
        retry(|| async {
            let rows: Vec<ToolRow> = on_pool!(self, p => {
                let q = sqlx::query_as(AssertSqlSafe(sql.as_str())).bind(tenant.as_str());
                let q = match id { Some(id) => q.bind(id), None => q };
                q.fetch_all(p).await?
            });
            rows.into_iter().map(decode_tool).collect()
        })
        .await
    }

    pub(crate) async fn set_catalog_state_impl(
        &self,
        tenant: &Tenant,
        id: &str,
        pin: &str,
        state: CatalogState,
        install_dir: Option<&str>,
        last_error: Option<&str>,
    ) -> Result<bool, StoreError> {
        retry(|| async {
            let now = self.clock.now_ms();
            let done = on_pool!(self, p => sqlx::query(
                "UPDATE catalog_tools SET state = $4, install_dir = $5, last_error = $6, updated_ms = $7 \
                 WHERE tenant = $1 AND id = $2 AND pin = $3")
                .bind(tenant.as_str()).bind(id).bind(pin).bind(state.as_str())
                .bind(install_dir).bind(last_error).bind(now)
                .execute(p).await?.rows_affected());
            Ok(done == 1)
        })
        .await
    }

    pub(crate) async fn remove_catalog_tool_impl(
        &self,
        tenant: &Tenant,
        id: &str,
    ) -> Result<Option<CatalogTool>, StoreError> {
        let sql = format!(
            "DELETE FROM catalog_tools WHERE tenant = $1 AND id = $2 RETURNING {TOOL_COLUMNS}"
        );
        retry(|| async {
            let row: Option<ToolRow> = on_pool!(self, p => sqlx::query_as(AssertSqlSafe(sql.as_str()))
                .bind(tenant.as_str()).bind(id).fetch_optional(p).await?);
            row.map(decode_tool).transpose()
        })
        .await
    }

    pub(crate) async fn catalog_lock_impl(
        &self,
        tenant: &Tenant,
        pin: &str,
    ) -> Result<Option<serde_json::Value>, StoreError> {
        retry(|| async {
            let text: Option<String> = on_pool!(self, p => sqlx::query_scalar(
                "SELECT record FROM catalog_locks WHERE tenant = $1 AND pin = $2")
                .bind(tenant.as_str()).bind(pin).fetch_optional(p).await?);
            text.map(|t| serde_json::from_str(&t).map_err(|e| corrupt("catalogue lock", e)))
                .transpose()
        })
        .await
    }

    pub(crate) async fn record_catalog_lock_impl(
        &self,
        tenant: &Tenant,
        pin: &str,
        record: &serde_json::Value,
    ) -> Result<serde_json::Value, StoreError> {
        let text = json_text(record)?;
        retry(|| async {
            let now = self.clock.now_ms();
            // The first record of a pin stays: of two installs recording
            // at once, the later one is held to the earlier one's bytes.
            let kept: String = on_pool!(self, p => {
                sqlx::query("INSERT INTO catalog_locks (tenant, pin, record, recorded_ms) VALUES ($1, $2, $3, $4) \
                     ON CONFLICT (tenant, pin) DO NOTHING")
                    .bind(tenant.as_str()).bind(pin).bind(&text).bind(now)
                    .execute(p).await?;
                sqlx::query_scalar::<_, String>("SELECT record FROM catalog_locks WHERE tenant = $1 AND pin = $2")
                    .bind(tenant.as_str()).bind(pin).fetch_one(p).await?
            });
            serde_json::from_str(&kept).map_err(|e| corrupt("catalogue lock", e))
        })
        .await
    }

    pub(crate) async fn catalog_policies_impl(
        &self,
        tenant: &Tenant,
    ) -> Result<Option<(String, String)>, StoreError> {
        retry(|| async {
            Ok(on_pool!(self, p => sqlx::query_as(
                "SELECT install, execute FROM catalog_policies WHERE tenant = $1")
                .bind(tenant.as_str()).fetch_optional(p).await?))
        })
        .await
    }

    pub(crate) async fn set_catalog_policies_impl(
        &self,
        tenant: &Tenant,
        install: &str,
        execute: &str,
    ) -> Result<(), StoreError> {
        retry(|| async {
            let now = self.clock.now_ms();
            on_pool!(self, p => sqlx::query(
                "INSERT INTO catalog_policies (tenant, install, execute, updated_ms) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (tenant) DO UPDATE SET install = $2, execute = $3, updated_ms = $4")
                .bind(tenant.as_str()).bind(install).bind(execute).bind(now)
                .execute(p).await?.rows_affected());
            Ok(())
        })
        .await
    }

    pub(crate) async fn record_catalog_run_impl(
        &self,
        tenant: &Tenant,
        run: &CatalogRun,
    ) -> Result<(), StoreError> {
        let argv = json_text(&run.argv)?;
        retry(|| async {
            let started = if run.started_ms == 0 { self.clock.now_ms() } else { run.started_ms };
            on_pool!(self, p => sqlx::query(
                "INSERT INTO catalog_runs (tenant, run_id, tool_id, kind, bin, argv, outcome, exit_code, signal, \
                 duration_ms, approval_id, detail, started_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)")
                .bind(tenant.as_str()).bind(&run.run_id).bind(&run.tool_id).bind(&run.kind)
                .bind(&run.bin).bind(&argv).bind(&run.outcome).bind(run.exit_code).bind(run.signal)
                .bind(run.duration_ms).bind(&run.approval_id).bind(&run.detail).bind(started)
                .execute(p).await?.rows_affected());
            Ok(())
        })
        .await
    }

    pub(crate) async fn catalog_runs_impl(
        &self,
        tenant: &Tenant,
        tool_id: Option<&str>,
    ) -> Result<Vec<CatalogRun>, StoreError> {
        let sql = match tool_id {
            Some(_) => format!(
                "SELECT {RUN_COLUMNS} FROM catalog_runs WHERE tenant = $1 AND tool_id = $2 ORDER BY started_ms, run_id"
            ),
            None => format!(
                "SELECT {RUN_COLUMNS} FROM catalog_runs WHERE tenant = $1 ORDER BY started_ms, run_id"
            ),
        };
        retry(|| async {
            let rows: Vec<RunRow> = on_pool!(self, p => {
                let q = sqlx::query_as(AssertSqlSafe(sql.as_str())).bind(tenant.as_str());
                let q = match tool_id { Some(id) => q.bind(id), None => q };
                q.fetch_all(p).await?
            });
            rows.into_iter().map(decode_run).collect()
        })
        .await
    }
}

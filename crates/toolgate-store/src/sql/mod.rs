//! The two adapters: one implementation over SQLite or PostgreSQL. The SQL
//! is the same text for both (`$n` parameters, `RETURNING`, `ON CONFLICT`,
//! which SQLite has too); the `on_pool!`/`in_write_tx!` macros expand each
//! body once per database, so both run the very same statements.

mod approvals;
mod audit;
mod catalog;
mod migrate;
mod pins;

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{PgPool, SqlitePool};

use crate::error::StoreError;
use crate::model::{Backend, Clock};
use crate::store::Store;

/// How long SQLite itself waits on a lock before it says busy.
const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// How long we go on retrying a busy database before giving up with
/// [`StoreError::Busy`] (never a denial).
const RETRY_DEADLINE: Duration = Duration::from_secs(30);

pub(crate) enum Pool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// A store over one database.
pub(crate) struct SqlStore {
    pub(crate) pool: Pool,
    pub(crate) clock: Clock,
}

/// Runs `$body` with `$p` bound to the pool, once per database type.
macro_rules! on_pool {
    ($store:expr, $p:ident => $body:expr) => {
        match &$store.pool {
            $crate::sql::Pool::Sqlite($p) => $body,
            $crate::sql::Pool::Postgres($p) => $body,
        }
    };
}

/// Runs `$body` in a write transaction `$tx`, commits, and gives
/// `Ok($body)`; a `?` or `return Err` inside rolls back (the transaction is dropped). SQLite
/// takes its write lock at `BEGIN IMMEDIATE`, so two writers never both
/// read and then collide on the upgrade (which busy_timeout cannot wait
/// out); PostgreSQL runs READ COMMITTED and relies on row locks.
macro_rules! in_write_tx {
    ($store:expr, $tx:ident => $body:expr) => {
        match &$store.pool {
            $crate::sql::Pool::Sqlite(pool) => {
                let mut $tx = pool.begin_with("BEGIN IMMEDIATE").await?;
                let out = $body;
                $tx.commit().await?;
                Ok::<_, $crate::error::StoreError>(out)
            }
            $crate::sql::Pool::Postgres(pool) => {
                let mut $tx = pool.begin().await?;
                let out = $body;
                $tx.commit().await?;
                Ok::<_, $crate::error::StoreError>(out)
            }
        }
    };
}
pub(crate) use {in_write_tx, on_pool};

/// Runs `op` until it succeeds, fails for a reason other than contention,
/// or [`RETRY_DEADLINE`] passes. A busy SQLite or a PostgreSQL
/// serialisation failure rolls back the whole transaction, so trying it
/// again from the start is safe.
pub(crate) async fn retry<T, F, Fut>(mut op: F) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, StoreError>>,
{
    let start = Instant::now();
    let mut pause = Duration::from_millis(2);
    loop {
        match op().await {
            Err(error) if error.is_contention() => {
                if start.elapsed() >= RETRY_DEADLINE {
                    let message = match error {
                        StoreError::Busy { message, .. } => message,
                        other => other.to_string(),
                    };
                    return Err(StoreError::Busy {
                        seconds: RETRY_DEADLINE.as_secs(),
                        message,
                    });
                }
                // Jitter, so that a crowd of retries does not march in step.
                let mut byte = [0u8; 1];
                let jitter = if getrandom::fill(&mut byte).is_ok() {
                    u64::from(byte[0])
                } else {
                    0
                };
                tokio::time::sleep(pause + Duration::from_micros(jitter * 20)).await;
                pause = (pause * 2).min(Duration::from_millis(100));
            }
            other => return other,
        }
    }
}

/// Opens the store at `backend` with `clock`, creating and migrating it.
pub(crate) async fn open(backend: Backend, clock: Clock) -> Result<Arc<dyn Store>, StoreError> {
    let pool = match backend {
        Backend::Sqlite(path) => Pool::Sqlite(open_sqlite(&path).await?),
        Backend::Postgres(url) => Pool::Postgres(open_postgres(&url).await?),
    };
    let now = clock.now_ms();
    match &pool {
        Pool::Sqlite(p) => retry(|| migrate::sqlite(p, now)).await?,
        Pool::Postgres(p) => retry(|| migrate::postgres(p, now)).await?,
    }
    Ok(Arc::new(SqlStore { pool, clock }))
}

async fn open_sqlite(path: &Path) -> Result<SqlitePool, StoreError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        use std::os::unix::fs::DirBuilderExt;
        // 0700: the store holds the arguments of every call.
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| {
                StoreError::Unreachable(format!("cannot create {}: {e}", dir.display()))
            })?;
    }
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        // WAL with NORMAL loses no committed transaction when a process is
        // killed (only on power loss may the last ones go), at a fraction
        // of FULL's fsyncs per spend.
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(SQLITE_BUSY_TIMEOUT);
    let pool = retry(|| async {
        SqlitePoolOptions::new()
            .max_connections(8)
            .connect_with(options.clone())
            .await
            .map_err(StoreError::from)
    })
    .await
    .map_err(|e| match e {
        StoreError::Unreachable(m) | StoreError::Database(m) => StoreError::Unreachable(format!(
            "cannot open the SQLite store {}: {m}",
            path.display()
        )),
        other => other,
    })?;
    Ok(pool)
}

async fn open_postgres(url: &str) -> Result<PgPool, StoreError> {
    // The URL may hold a password: errors name the host, port, database
    // and user only.
    let options = PgConnectOptions::from_str(url).map_err(|e| {
        StoreError::Unreachable(format!(
            "the PostgreSQL URL does not parse ({e}); the form is postgres://user:password@host:port/database"
        ))
    })?;
    let place = format!(
        "{}:{}/{} as {}",
        options.get_host(),
        options.get_port(),
        options.get_database().unwrap_or("(default database)"),
        options.get_username()
    );
    PgPoolOptions::new()
        .max_connections(16)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(options)
        .await
        .map_err(|e| {
            StoreError::Unreachable(format!("cannot connect to PostgreSQL at {place}: {e}"))
        })
}

#[async_trait::async_trait]
impl Store for SqlStore {
    fn backend_name(&self) -> &'static str {
        match self.pool {
            Pool::Sqlite(_) => "sqlite",
            Pool::Postgres(_) => "postgres",
        }
    }

    async fn file_or_reuse(
        &self,
        tenant: &crate::Tenant,
        new: &crate::NewRequest,
    ) -> Result<crate::Filed, StoreError> {
        self.file_or_reuse_impl(tenant, new).await
    }

    async fn request(
        &self,
        tenant: &crate::Tenant,
        id: &str,
    ) -> Result<Option<crate::Request>, StoreError> {
        self.request_impl(tenant, id).await
    }

    async fn requests(
        &self,
        tenant: &crate::Tenant,
        filter: &crate::RequestFilter,
    ) -> Result<Vec<crate::Request>, StoreError> {
        self.requests_impl(tenant, filter).await
    }

    async fn decide(
        &self,
        tenant: &crate::Tenant,
        id: &str,
        answer: &crate::Answer,
        by: &str,
    ) -> Result<crate::Decided, StoreError> {
        self.decide_impl(tenant, id, answer, by).await
    }

    async fn spend(
        &self,
        tenant: &crate::Tenant,
        spend: &crate::SpendFor<'_>,
    ) -> Result<Option<String>, StoreError> {
        self.spend_impl(tenant, spend).await
    }

    async fn live_refusal(
        &self,
        tenant: &crate::Tenant,
        covering: &[String],
    ) -> Result<Option<crate::Refusal>, StoreError> {
        self.live_refusal_impl(tenant, covering).await
    }

    async fn grant(
        &self,
        tenant: &crate::Tenant,
        id: &str,
    ) -> Result<Option<crate::Grant>, StoreError> {
        self.grant_impl(tenant, id).await
    }

    async fn spends(
        &self,
        tenant: &crate::Tenant,
        grant_id: &str,
    ) -> Result<Vec<crate::Spend>, StoreError> {
        self.spends_impl(tenant, grant_id).await
    }

    async fn append_audit(
        &self,
        tenant: &crate::Tenant,
        record: &toolgate_policy::AuditRecord,
    ) -> Result<crate::AuditEntry, StoreError> {
        self.append_audit_impl(tenant, record).await
    }

    async fn append_audits(
        &self,
        tenant: &crate::Tenant,
        records: &[toolgate_policy::AuditRecord],
    ) -> Result<u64, StoreError> {
        self.append_audits_impl(tenant, records).await
    }

    async fn audit(
        &self,
        tenant: &crate::Tenant,
        filter: &crate::AuditFilter,
    ) -> Result<Vec<crate::AuditEntry>, StoreError> {
        self.audit_impl(tenant, filter).await
    }

    async fn verify_audit(
        &self,
        tenant: &crate::Tenant,
    ) -> Result<crate::AuditVerdict, StoreError> {
        self.verify_audit_impl(tenant).await
    }

    async fn check_tool_pins(
        &self,
        tenant: &crate::Tenant,
        listed: &[crate::ListedTool],
    ) -> Result<Vec<crate::PinCheck>, StoreError> {
        self.check_tool_pins_impl(tenant, listed).await
    }

    async fn tool_pins(
        &self,
        tenant: &crate::Tenant,
    ) -> Result<Vec<crate::PinnedTool>, StoreError> {
        self.tool_pins_impl(tenant).await
    }

    async fn tool_changes(
        &self,
        tenant: &crate::Tenant,
    ) -> Result<Vec<crate::ToolChange>, StoreError> {
        self.tool_changes_impl(tenant).await
    }

    async fn approve_tool_change(
        &self,
        tenant: &crate::Tenant,
        server: &str,
        tool: &str,
        digest: &str,
        by: &str,
    ) -> Result<crate::PinnedTool, StoreError> {
        self.approve_tool_change_impl(tenant, server, tool, digest, by)
            .await
    }

    async fn reject_tool_change(
        &self,
        tenant: &crate::Tenant,
        server: &str,
        tool: &str,
        digest: &str,
        by: &str,
    ) -> Result<crate::ToolChange, StoreError> {
        self.reject_tool_change_impl(tenant, server, tool, digest, by)
            .await
    }

    async fn register_catalog_tool(
        &self,
        tenant: &crate::Tenant,
        id: &str,
        manifest: &serde_json::Value,
        pin: &str,
    ) -> Result<crate::Registered, StoreError> {
        self.register_catalog_tool_impl(tenant, id, manifest, pin)
            .await
    }

    async fn catalog_tools(
        &self,
        tenant: &crate::Tenant,
        id: Option<&str>,
    ) -> Result<Vec<crate::CatalogTool>, StoreError> {
        self.catalog_tools_impl(tenant, id).await
    }

    async fn set_catalog_state(
        &self,
        tenant: &crate::Tenant,
        id: &str,
        pin: &str,
        state: crate::CatalogState,
        install_dir: Option<&str>,
        last_error: Option<&str>,
    ) -> Result<bool, StoreError> {
        self.set_catalog_state_impl(tenant, id, pin, state, install_dir, last_error)
            .await
    }

    async fn remove_catalog_tool(
        &self,
        tenant: &crate::Tenant,
        id: &str,
    ) -> Result<Option<crate::CatalogTool>, StoreError> {
        self.remove_catalog_tool_impl(tenant, id).await
    }

    async fn catalog_lock(
        &self,
        tenant: &crate::Tenant,
        pin: &str,
    ) -> Result<Option<serde_json::Value>, StoreError> {
        self.catalog_lock_impl(tenant, pin).await
    }

    async fn record_catalog_lock(
        &self,
        tenant: &crate::Tenant,
        pin: &str,
        record: &serde_json::Value,
    ) -> Result<serde_json::Value, StoreError> {
        self.record_catalog_lock_impl(tenant, pin, record).await
    }

    async fn catalog_policies(
        &self,
        tenant: &crate::Tenant,
    ) -> Result<Option<(String, String)>, StoreError> {
        self.catalog_policies_impl(tenant).await
    }

    async fn set_catalog_policies(
        &self,
        tenant: &crate::Tenant,
        install: &str,
        execute: &str,
    ) -> Result<(), StoreError> {
        self.set_catalog_policies_impl(tenant, install, execute)
            .await
    }

    async fn record_catalog_run(
        &self,
        tenant: &crate::Tenant,
        run: &crate::CatalogRun,
    ) -> Result<(), StoreError> {
        self.record_catalog_run_impl(tenant, run).await
    }

    async fn catalog_runs(
        &self,
        tenant: &crate::Tenant,
        tool_id: Option<&str>,
    ) -> Result<Vec<crate::CatalogRun>, StoreError> {
        self.catalog_runs_impl(tenant, tool_id).await
    }
}

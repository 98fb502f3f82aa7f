//! The store under approvals and audit, as the commands open it: the
//! configured backend (`TOOLGATE_STORE_URL`, `[store] url`, else SQLite in
//! the data dir), tenant `default` for local use. An unreachable store is
//! an error at the start of a command, never a silent fallback to another
//! store (a person's answers and the audit log would go somewhere else).

use std::sync::Arc;

use anyhow::{Context, Result};
use toolgate_policy::{ApprovalChannel, AuditSink};
use toolgate_store::{ApprovalSettings, Backend, Store, StoreApprovals, StoreAudit, Tenant};

use crate::config::Settings;
use crate::config::approvals::StoreUrl;

/// The opened store and where it is.
pub struct Opened {
    pub store: Arc<dyn Store>,
    pub tenant: Tenant,
    /// For messages: `SQLite /path` or `PostgreSQL postgres://user:***@host/db`.
    pub shown: String,
}

/// What every executor of a command shares: the approval gate and the
/// audit sink over one opened store.
#[derive(Clone)]
pub struct Gate {
    /// The opened store and the tenant, for what else reads it (the
    /// catalogue), so that nothing opens it twice.
    pub store: Arc<dyn Store>,
    pub tenant: Tenant,
    pub approvals: Arc<dyn ApprovalChannel>,
    pub audit: Arc<dyn AuditSink>,
    /// The catalogue's tools, once read ([`crate::catalog::attach`]).
    pub shelf: Option<Arc<crate::catalog::Shelf>>,
}

impl Gate {
    /// The gate and the audit log over `opened`, with `[approvals]`.
    pub fn new(opened: &Opened, settings: &Settings) -> Gate {
        let defaults = &settings.approvals;
        let approval_settings = ApprovalSettings::default()
            .wait(defaults.wait)
            .pending_ttl(defaults.pending_ttl)
            .grant_ttl(defaults.grant_ttl)
            .refusal_ttl(defaults.refusal_ttl)
            .uses(defaults.uses.count())
            .reviewer(defaults.reviewer.clone());
        let approvals = StoreApprovals::new(
            opened.store.clone(),
            opened.tenant.clone(),
            approval_settings,
        );
        let audit = StoreAudit::new(opened.store.clone(), opened.tenant.clone());
        Gate {
            store: opened.store.clone(),
            tenant: opened.tenant.clone(),
            approvals: Arc::new(approvals),
            audit: Arc::new(audit),
            shelf: None,
        }
    }
}

/// Opens the store and builds the gate: what `mcp`, `serve` and `call` do
/// at their start, so that an unreachable store stops them there.
pub async fn gate(settings: &Settings) -> Result<Gate> {
    let opened = open(settings).await?;
    Ok(Gate::new(&opened, settings))
}

/// Whether the configured store exists already (a PostgreSQL is taken to).
pub fn existing(settings: &Settings) -> bool {
    match &settings.store {
        StoreUrl::Sqlite(path) => path.exists(),
        StoreUrl::Postgres(_) => true,
    }
}

/// The backend of the configured store.
pub fn backend(url: &StoreUrl) -> Backend {
    match url {
        StoreUrl::Sqlite(path) => Backend::Sqlite(path.clone()),
        StoreUrl::Postgres(url) => Backend::Postgres(url.clone()),
    }
}

/// Opens (and migrates) the configured store.
pub async fn open(settings: &Settings) -> Result<Opened> {
    let shown = settings.store.shown();
    let store = toolgate_store::open(backend(&settings.store))
        .await
        // The store's own error says what failed; never the password.
        .map_err(|e| anyhow::anyhow!(crate::config::approvals::hide_passwords(&e.to_string())))
        .with_context(|| {
            format!(
                "cannot open the approval and audit store ({shown}); check [store] url or \
                 TOOLGATE_STORE_URL, or unset both to use the SQLite file in the data directory"
            )
        })?;
    Ok(Opened {
        store,
        tenant: Tenant::default_local(),
        shown,
    })
}

/// Who answers from this terminal: `cli:<user>`.
pub fn answered_by(env: &crate::config::Environment) -> String {
    let user = env
        .var("USER")
        .or_else(|| env.var("LOGNAME"))
        .unwrap_or("unknown");
    format!("cli:{user}")
}

/// Unix ms as RFC 3339 UTC, seconds precision.
pub fn time(ms: i64) -> String {
    chrono::DateTime::<chrono::Utc>::from_timestamp_millis(ms).map_or_else(
        || ms.to_string(),
        |t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    )
}

/// Now, unix ms.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// `in 7h59m`, `3m ago`: how far `ms` is from now, for tables.
pub fn relative(ms: i64) -> String {
    let delta = ms - now_ms();
    let shown = crate::config::approvals::format_duration(std::time::Duration::from_secs(
        delta.unsigned_abs() / 1000,
    ));
    // The two largest units are enough for a table (`1h59m`, not `1h`).
    let coarse: String = shown
        .char_indices()
        .filter(|(_, c)| c.is_ascii_alphabetic())
        .nth(1)
        .map_or(shown.clone(), |(i, _)| shown[..=i].to_owned());
    if delta >= 0 {
        format!("in {coarse}")
    } else {
        format!("{coarse} ago")
    }
}

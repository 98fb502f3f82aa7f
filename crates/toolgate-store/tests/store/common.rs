//! Backends for the suite, and calls to ask about.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use sqlx::Connection;
use toolgate_policy::{ApprovalScope, ScopeKey};
use toolgate_store::{Answer, Backend, Clock, NewRequest, Store, Tenant};

/// Runs the async test `$name(db: Db)` once per backend, as `$name::sqlite`
/// and `$name::postgres`.
#[macro_export]
macro_rules! both {
    ($name:ident) => {
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn sqlite() {
                super::$name($crate::common::Db::sqlite().await).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn postgres() {
                super::$name($crate::common::Db::postgres().await).await
            }
        }
    };
}

/// One fresh store.
pub struct Db {
    pub backend: Backend,
    pub clock: Clock,
    pub store: Arc<dyn Store>,
    /// Keeps the SQLite file's directory.
    _dir: Option<tempfile::TempDir>,
}

pub const POSTGRES_HOWTO: &str = "TOOLGATE_TEST_POSTGRES_URL is not set: the PostgreSQL half of the store suite needs a server. \
Run scripts/test (it installs PostgreSQL if missing and starts a throwaway cluster), or start one yourself: \
`d=$(mktemp -d); chown nobody \"$d\"; su nobody -s /bin/sh -c \"/usr/lib/postgresql/15/bin/initdb -D $d/data -U toolgate --auth=trust\"; \
su nobody -s /bin/sh -c \"/usr/lib/postgresql/15/bin/pg_ctl -D $d/data -o '-c listen_addresses=127.0.0.1 -p 54329 -k $d' -l $d/log -w start\"` \
and set TOOLGATE_TEST_POSTGRES_URL=postgres://toolgate@127.0.0.1:54329/postgres";

impl Db {
    pub async fn sqlite() -> Db {
        let dir = tempfile::tempdir().expect("temp dir");
        let backend = Backend::Sqlite(dir.path().join("state dir").join("toolgate.db"));
        Db::open(backend, Some(dir)).await
    }

    pub async fn postgres() -> Db {
        let backend = Backend::Postgres(fresh_postgres_database().await);
        Db::open(backend, None).await
    }

    async fn open(backend: Backend, dir: Option<tempfile::TempDir>) -> Db {
        let clock = Clock::system();
        let store = toolgate_store::open_with_clock(backend.clone(), clock.clone())
            .await
            .expect("open the store");
        Db {
            backend,
            clock,
            store,
            _dir: dir,
        }
    }

    /// Runs raw SQL on the database, around the store (to tamper with it).
    pub async fn raw(&self, sql: &str) {
        match &self.backend {
            Backend::Sqlite(path) => {
                let url = format!("sqlite://{}", path.display());
                let opts: sqlx::sqlite::SqliteConnectOptions = url.parse().expect("sqlite url");
                let mut c = sqlx::SqliteConnection::connect_with(&opts)
                    .await
                    .expect("connect");
                sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
                    .execute(&mut c)
                    .await
                    .expect(sql);
            }
            Backend::Postgres(url) => {
                let mut c = sqlx::PgConnection::connect(url).await.expect("connect");
                sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
                    .execute(&mut c)
                    .await
                    .expect(sql);
            }
        }
    }
}

/// The server's URL from the environment, or a failure that says how to
/// start one.
pub fn postgres_server_url() -> String {
    match std::env::var("TOOLGATE_TEST_POSTGRES_URL") {
        Ok(url) if !url.is_empty() => url,
        _ => panic!("{POSTGRES_HOWTO}"),
    }
}

/// A new, empty database on the test server, and its URL.
pub async fn fresh_postgres_database() -> String {
    let server = postgres_server_url();
    let name = format!("tg_test_{}", random_suffix());
    let mut c = sqlx::PgConnection::connect(&server)
        .await
        .unwrap_or_else(|e| {
            panic!("cannot reach TOOLGATE_TEST_POSTGRES_URL ({e}); {POSTGRES_HOWTO}")
        });
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut c)
        .await
        .expect("create a test database");
    with_database(&server, &name)
}

/// `url` with its database replaced by `name`.
fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, format!("?{q}")),
        None => (url, String::new()),
    };
    let scheme_end = base.find("://").map(|i| i + 3).unwrap_or(0);
    let host_end = base[scheme_end..]
        .find('/')
        .map(|i| i + scheme_end)
        .unwrap_or(base.len());
    format!("{}/{name}{query}", &base[..host_end])
}

pub fn random_suffix() -> String {
    use std::time::{SystemTime, UNIX_EPOCH};
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{}_{}_{n}", std::process::id(), nanos % 1_000_000_000_000)
}

pub fn tenant(name: &str) -> Tenant {
    Tenant(name.to_owned())
}

/// A `bash` call of `script`, as the gate would file it.
pub fn bash_call(script: &str, prefixes: &[&[&str]]) -> NewRequest {
    let arguments = json!({ "script": script });
    let exact = ScopeKey::exact("bash", &arguments);
    let mut covering = vec![exact.clone(), ScopeKey::tool("bash")];
    for p in prefixes {
        covering.push(ScopeKey::command_prefix(
            "bash",
            p.iter().map(|w| w.to_string()).collect(),
        ));
    }
    NewRequest {
        tool: "bash".to_owned(),
        arguments,
        reason: "rule bash = ask".to_owned(),
        agent: "agent-a".to_owned(),
        call_id: format!("call_{}", random_suffix()),
        effect_class: Some("mutate-reversible".to_owned()),
        scope: ApprovalScope::Exact,
        exact,
        covering,
        suggested_prefix: prefixes
            .first()
            .map(|p| p.iter().map(|w| w.to_string()).collect())
            .unwrap_or_default(),
        ttl: Duration::from_secs(600),
    }
}

/// A call of `tool` with `arguments`, exact and tool keys.
pub fn call(tool: &str, arguments: Value) -> NewRequest {
    let exact = ScopeKey::exact(tool, &arguments);
    let mut new = bash_call("true", &[]);
    new.tool = tool.to_owned();
    new.covering = vec![exact.clone(), ScopeKey::tool(tool)];
    new.exact = exact;
    new.arguments = arguments;
    new
}

pub fn digests(new: &NewRequest) -> Vec<String> {
    new.covering.iter().map(|k| k.digest.clone()).collect()
}

pub fn approve(uses: Option<u32>, ttl_secs: u64) -> Answer {
    Answer::Approve {
        uses,
        ttl: Duration::from_secs(ttl_secs),
        scope: ApprovalScope::Exact,
        prefix: Vec::new(),
    }
}

pub fn deny(reason: &str, ttl_secs: u64) -> Answer {
    Answer::Deny {
        reason: reason.to_owned(),
        ttl: Duration::from_secs(ttl_secs),
        scope: ApprovalScope::Exact,
        prefix: Vec::new(),
    }
}

//! Grant spends per second under contention: 32 tasks spending one
//! unlimited grant, on SQLite and on PostgreSQL side by side, plus the
//! latency of one uncontended spend (what a grant adds to a call).
//!
//! PostgreSQL: the server `TOOLGATE_TEST_POSTGRES_URL` names (scripts/test
//! starts one for the tests; start one the same way for the bench). Without
//! it the PostgreSQL half is skipped, and the bench says so.
//!
//! `cargo bench -p toolgate-store --bench spend`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;
use toolgate_policy::{ApprovalScope, ScopeKey};
use toolgate_store::{Answer, Backend, Decided, NewRequest, SpendFor, Store, Tenant};

const SPENDERS: u64 = 32;

/// Opens `backend` and grants an unlimited use of one call; the store,
/// the tenant and the call's covering digests.
async fn granted(backend: Backend) -> (Arc<dyn Store>, Tenant, Vec<String>) {
    let store = toolgate_store::open(backend).await.unwrap();
    // A tenant of its own on a shared server: nothing of an earlier run.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let tenant = Tenant(format!("bench-{}-{nanos}", std::process::id()));
    let arguments = json!({ "script": "cargo test" });
    let exact = ScopeKey::exact("bash", &arguments);
    let covering = vec![exact.clone(), ScopeKey::tool("bash")];
    let new = NewRequest {
        tool: "bash".into(),
        arguments,
        reason: "bench".into(),
        agent: "bench".into(),
        call_id: "bench".into(),
        effect_class: None,
        scope: ApprovalScope::Exact,
        exact,
        covering: covering.clone(),
        suggested_prefix: Vec::new(),
        ttl: Duration::from_secs(3600),
    };
    let id = store.file_or_reuse(&tenant, &new).await.unwrap().request.id;
    let answer = Answer::Approve {
        uses: None,
        ttl: Duration::from_secs(86_400),
        scope: ApprovalScope::Exact,
        prefix: Vec::new(),
    };
    let Decided::Granted(_) = store.decide(&tenant, &id, &answer, "bench").await.unwrap() else {
        panic!("no grant")
    };
    (
        store,
        tenant,
        covering.into_iter().map(|k| k.digest).collect(),
    )
}

/// `iters` spends by `spenders` tasks at once; the wall time.
async fn spend_all(
    store: &Arc<dyn Store>,
    tenant: &Tenant,
    covering: &[String],
    iters: u64,
    spenders: u64,
) -> Duration {
    let start = Instant::now();
    let mut tasks = Vec::new();
    for task in 0..spenders {
        let n = iters / spenders + u64::from(task < iters % spenders);
        let (store, tenant, covering) = (store.clone(), tenant.clone(), covering.to_vec());
        tasks.push(tokio::spawn(async move {
            for i in 0..n {
                let call_id = format!("{task}-{i}");
                let spend = SpendFor {
                    covering: &covering,
                    call_id: &call_id,
                    tool: "bash",
                    args_digest: &covering[0],
                };
                assert!(store.spend(&tenant, &spend).await.unwrap().is_some());
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    start.elapsed()
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut backends = vec![("sqlite", Backend::Sqlite(dir.path().join("bench.db")))];
    match std::env::var("TOOLGATE_TEST_POSTGRES_URL") {
        Ok(url) if !url.is_empty() => backends.push(("postgres", Backend::Postgres(url))),
        _ => eprintln!(
            "spend bench: TOOLGATE_TEST_POSTGRES_URL is not set: skipping the PostgreSQL half (start a server as scripts/test does)"
        ),
    }
    let mut contended = c.benchmark_group("grant spends, 32 spenders");
    contended
        .throughput(Throughput::Elements(1))
        .sample_size(10)
        .measurement_time(Duration::from_secs(8));
    let mut stores = Vec::new();
    for (name, backend) in backends {
        let (store, tenant, covering) = rt.block_on(granted(backend));
        contended.bench_function(name, |b| {
            b.to_async(&rt).iter_custom(|iters| {
                let (store, tenant, covering) = (store.clone(), tenant.clone(), covering.clone());
                async move { spend_all(&store, &tenant, &covering, iters, SPENDERS).await }
            })
        });
        stores.push((name, store, tenant, covering));
    }
    contended.finish();
    let mut single = c.benchmark_group("one spend, uncontended");
    single
        .sample_size(20)
        .measurement_time(Duration::from_secs(5));
    for (name, store, tenant, covering) in stores {
        single.bench_function(name, |b| {
            b.to_async(&rt).iter_custom(|iters| {
                let (store, tenant, covering) = (store.clone(), tenant.clone(), covering.clone());
                async move { spend_all(&store, &tenant, &covering, iters, 1).await }
            })
        });
    }
    single.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

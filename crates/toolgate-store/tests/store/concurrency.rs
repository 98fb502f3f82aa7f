//! Spending under contention: exactly the granted uses, never more.

use std::time::Duration;

use pretty_assertions::assert_eq;
use toolgate_store::{Backend, Decided, SpendFor};

use crate::both;
use crate::common::{Db, approve, bash_call, digests, tenant};

/// Files and approves a question with `uses` uses; its covering digests
/// and the grant id.
pub async fn granted(db: &Db, script: &str, uses: Option<u32>) -> (Vec<String>, String) {
    let t = tenant("default");
    let new = bash_call(script, &[]);
    let id = db.store.file_or_reuse(&t, &new).await.unwrap().request.id;
    let Decided::Granted(grant) = db
        .store
        .decide(&t, &id, &approve(uses, 3600), "cli:alice")
        .await
        .unwrap()
    else {
        panic!("no grant")
    };
    (digests(&new), grant.id)
}

both!(thirty_two_spenders_of_a_five_use_grant_run_exactly_five);
async fn thirty_two_spenders_of_a_five_use_grant_run_exactly_five(db: Db) {
    let (covering, grant) = granted(&db, "deploy --prod", Some(5)).await;
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(32));
    let mut tasks = Vec::new();
    for i in 0..32 {
        let (store, covering, barrier) = (db.store.clone(), covering.clone(), barrier.clone());
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            let call_id = format!("call-{i}");
            let spend = SpendFor {
                covering: &covering,
                call_id: &call_id,
                tool: "bash",
                args_digest: &covering[0],
            };
            store.spend(&tenant("default"), &spend).await.unwrap()
        }));
    }
    let mut ran = 0;
    for task in tasks {
        if let Some(id) = task.await.unwrap() {
            assert_eq!(id, grant);
            ran += 1;
        }
    }
    assert_eq!(ran, 5);
    let g = db
        .store
        .grant(&tenant("default"), &grant)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(g.spent, 5);
    let spends = db.store.spends(&tenant("default"), &grant).await.unwrap();
    assert_eq!(spends.len(), 5, "every spent use has its spend row");
}

/// A SQLite file locked by another writer for longer than SQLite's own
/// busy timeout (5 s): the spend waits and goes through, it is neither an
/// error nor a "no".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locked_sqlite_is_waited_for_never_a_denial() {
    use sqlx::Connection;
    let db = Db::sqlite().await;
    let (covering, grant) = granted(&db, "make", Some(1)).await;
    let Backend::Sqlite(path) = &db.backend else {
        unreachable!()
    };
    let opts = sqlx::sqlite::SqliteConnectOptions::new().filename(path);
    let mut locker = sqlx::SqliteConnection::connect_with(&opts).await.unwrap();
    sqlx::raw_sql("BEGIN IMMEDIATE")
        .execute(&mut locker)
        .await
        .unwrap();
    let store = db.store.clone();
    let (tx_started, rx_started) = tokio::sync::oneshot::channel();
    let spender = tokio::spawn(async move {
        let _ = tx_started.send(());
        let spend = SpendFor {
            covering: &covering,
            call_id: "c1",
            tool: "bash",
            args_digest: &covering[0],
        };
        store.spend(&tenant("default"), &spend).await
    });
    rx_started.await.unwrap();
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(
        !spender.is_finished(),
        "the spend waits while the file is locked"
    );
    sqlx::raw_sql("COMMIT").execute(&mut locker).await.unwrap();
    assert_eq!(spender.await.unwrap().unwrap(), Some(grant));
}

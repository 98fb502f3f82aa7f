//! Separate processes on one store: three spenders of a 5-use grant, and a
//! spender killed with SIGKILL in the middle of its spends.
//!
//! The spender is this test binary itself, run again with only the ignored
//! test `processes::spender_child`, which reads its orders from the
//! environment of its own process (set by the parent with `Command::env`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use pretty_assertions::assert_eq;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use toolgate_store::{Backend, SpendFor};

use crate::both;
use crate::common::{Db, tenant};
use crate::concurrency::granted;

const BACKEND: &str = "TOOLGATE_STORE_TEST_SPENDER_BACKEND";
const COVERING: &str = "TOOLGATE_STORE_TEST_SPENDER_COVERING";
const TASKS: &str = "TOOLGATE_STORE_TEST_SPENDER_TASKS";
const ATTEMPTS: &str = "TOOLGATE_STORE_TEST_SPENDER_ATTEMPTS";
const GO: &str = "TOOLGATE_STORE_TEST_SPENDER_GO";

fn spawn_spender(
    backend: &Backend,
    covering: &[String],
    tasks: u32,
    attempts: u32,
    go: &Path,
) -> Child {
    let backend = match backend {
        Backend::Sqlite(path) => format!("sqlite:{}", path.display()),
        Backend::Postgres(url) => format!("postgres:{url}"),
    };
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "processes::spender_child",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(BACKEND, backend)
        .env(COVERING, covering.join(","))
        .env(TASKS, tasks.to_string())
        .env(ATTEMPTS, attempts.to_string())
        .env(GO, go)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// The child's stdout, by lines.
async fn lines(child: &mut Child) -> tokio::io::Lines<BufReader<tokio::process::ChildStdout>> {
    BufReader::new(child.stdout.take().unwrap()).lines()
}

async fn expect_line(
    lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    prefix: &str,
) -> String {
    while let Some(line) = lines.next_line().await.unwrap() {
        // The harness prints `test processes::spender_child ... ` before
        // the test's own output, on the same line.
        if let Some(at) = line.find(prefix) {
            return line[at + prefix.len()..].trim().to_owned();
        }
    }
    panic!("the spender ended without printing `{prefix}`")
}

both!(three_processes_spend_a_five_use_grant_exactly_five_times);
async fn three_processes_spend_a_five_use_grant_exactly_five_times(db: Db) {
    let (covering, grant) = granted(&db, "release", Some(5)).await;
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    let mut children: Vec<Child> = (0..3)
        .map(|_| spawn_spender(&db.backend, &covering, 16, 2, &go))
        .collect();
    let mut outputs = Vec::new();
    for child in &mut children {
        let mut l = lines(child).await;
        expect_line(&mut l, "spender-ready").await;
        outputs.push(l);
    }
    // All three have their store open: go at once.
    std::fs::write(&go, b"go").unwrap();
    let mut total = 0;
    for (child, mut l) in children.iter_mut().zip(outputs) {
        total += expect_line(&mut l, "spender-spent ")
            .await
            .parse::<u32>()
            .unwrap();
        assert!(child.wait().await.unwrap().success());
    }
    assert_eq!(
        total, 5,
        "3 processes × 16 tasks × 2 attempts on a 5-use grant"
    );
    assert_eq!(
        db.store
            .spends(&tenant("default"), &grant)
            .await
            .unwrap()
            .len(),
        5
    );
}

both!(a_spender_killed_mid_spend_loses_nothing_and_spends_nothing_twice);
async fn a_spender_killed_mid_spend_loses_nothing_and_spends_nothing_twice(db: Db) {
    let t = tenant("default");
    let (covering, grant) = granted(&db, "loop", Some(100_000)).await;
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    std::fs::write(&go, b"go").unwrap();
    // Kill it at different moments of its run.
    for kill_after in [5, 40, 120] {
        let mut child = spawn_spender(&db.backend, &covering, 8, 100_000, &go);
        let mut l = lines(&mut child).await;
        expect_line(&mut l, "spender-ready").await;
        let before = db.store.grant(&t, &grant).await.unwrap().unwrap().spent;
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        loop {
            let now = db.store.grant(&t, &grant).await.unwrap().unwrap().spent;
            if now >= before + kill_after {
                break;
            }
            if let Some(status) = child.try_wait().unwrap() {
                panic!(
                    "the spender ended by itself ({status}) after {} spends",
                    now - before
                );
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the spender spent {} in 120 s",
                now - before
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        child.kill().await.unwrap(); // SIGKILL
        let g = db.store.grant(&t, &grant).await.unwrap().unwrap();
        let spends = db.store.spends(&t, &grant).await.unwrap();
        assert_eq!(
            spends.len(),
            g.spent as usize,
            "every spent use has its spend row, and no spend row lacks its use"
        );
        let mut calls: Vec<&str> = spends.iter().map(|s| s.call_id.as_str()).collect();
        calls.sort_unstable();
        calls.dedup();
        assert_eq!(calls.len(), spends.len(), "no call spent twice");
    }
    // The store is whole and usable after the kills.
    if let Backend::Sqlite(path) = &db.backend {
        assert_eq!(integrity(path).await, "ok");
    }
    let spend = SpendFor {
        covering: &covering,
        call_id: "after",
        tool: "bash",
        args_digest: &covering[0],
    };
    assert_eq!(db.store.spend(&t, &spend).await.unwrap(), Some(grant));
}

async fn integrity(path: &PathBuf) -> String {
    use sqlx::Connection;
    let opts = sqlx::sqlite::SqliteConnectOptions::new().filename(path);
    let mut c = sqlx::SqliteConnection::connect_with(&opts).await.unwrap();
    sqlx::query_scalar("PRAGMA integrity_check")
        .fetch_one(&mut c)
        .await
        .unwrap()
}

/// The spender process: opens the store, says `spender-ready`, waits for the
/// go file, runs `TASKS` tasks of `ATTEMPTS` spends each, says
/// `spender-spent N`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "the child process of the tests above; they run it"]
async fn spender_child() {
    let env = |k: &str| {
        std::env::var(k)
            .unwrap_or_else(|_| panic!("{k} is not set: this test is run by processes::* only"))
    };
    let backend = env(BACKEND);
    let backend = match backend.split_once(':') {
        Some(("sqlite", path)) => Backend::Sqlite(path.into()),
        Some(("postgres", url)) => Backend::Postgres(url.to_owned()),
        _ => panic!("bad backend {backend}"),
    };
    let covering: Vec<String> = env(COVERING).split(',').map(str::to_owned).collect();
    let tasks: u32 = env(TASKS).parse().unwrap();
    let attempts: u32 = env(ATTEMPTS).parse().unwrap();
    let go = PathBuf::from(env(GO));
    let store = toolgate_store::open(backend).await.unwrap();
    println!("spender-ready");
    while !go.exists() {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let pid = std::process::id();
    let mut handles = Vec::new();
    for task in 0..tasks {
        let (store, covering) = (store.clone(), covering.clone());
        handles.push(tokio::spawn(async move {
            let mut spent = 0u32;
            for attempt in 0..attempts {
                let call_id = format!("{pid}-{task}-{attempt}");
                let spend = SpendFor {
                    covering: &covering,
                    call_id: &call_id,
                    tool: "bash",
                    args_digest: &covering[0],
                };
                if store
                    .spend(&tenant("default"), &spend)
                    .await
                    .unwrap()
                    .is_some()
                {
                    spent += 1;
                }
            }
            spent
        }));
    }
    let mut spent = 0;
    for h in handles {
        spent += h.await.unwrap();
    }
    println!("spender-spent {spent}");
}

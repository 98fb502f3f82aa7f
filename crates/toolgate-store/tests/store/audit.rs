//! The audit log: append, filters, and a chain that finds any edited,
//! removed or reordered record.

use pretty_assertions::assert_eq;
use serde_json::json;
use toolgate_policy::AuditRecord;
use toolgate_store::{AuditFilter, AuditVerdict};

use crate::both;
use crate::common::{Db, tenant};

fn record(n: u32, tool: &str, agent: &str, decision: &str) -> AuditRecord {
    AuditRecord {
        time: format!("2026-12-04T03:00:{:02}.000Z", n % 60),
        call_id: format!("call-{n}"),
        agent: agent.to_owned(),
        tool: tool.to_owned(),
        effect_class: Some("read-only".to_owned()),
        idempotency: None,
        decision: decision.to_owned(),
        layer: "rules".to_owned(),
        approval_id: None,
        grant_id: None,
        args_digest: format!("{n:064x}"),
        arguments: json!({ "n": n }),
        status: if decision == "deny" { "denied" } else { "ok" }.to_owned(),
        exit_code: Some(0),
        duration_ms: u64::from(n),
        egress: Vec::new(),
        error: None,
    }
}

/// Six records of tenant `default`, one of tenant `other`.
async fn six(db: &Db) {
    let rows = [
        ("read", "a", "allow"),
        ("bash", "a", "ask"),
        ("bash", "b", "deny"),
        ("read", "b", "allow"),
        ("write", "a", "allow"),
        ("bash", "a", "allow"),
    ];
    for (n, (tool, agent, decision)) in rows.into_iter().enumerate() {
        db.store
            .append_audit(
                &tenant("default"),
                &record(n as u32 + 1, tool, agent, decision),
            )
            .await
            .unwrap();
    }
    db.store
        .append_audit(&tenant("other"), &record(99, "read", "a", "allow"))
        .await
        .unwrap();
}

both!(appends_are_numbered_and_chained_per_tenant);
async fn appends_are_numbered_and_chained_per_tenant(db: Db) {
    six(&db).await;
    let all = db
        .store
        .audit(&tenant("default"), &AuditFilter::default())
        .await
        .unwrap();
    assert_eq!(
        all.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5, 6]
    );
    assert_eq!(all[0].prev_hash, "0".repeat(64));
    for pair in all.windows(2) {
        assert_eq!(pair[1].prev_hash, pair[0].hash);
    }
    assert_eq!(all[2].record, record(3, "bash", "b", "deny"));
    let other = db
        .store
        .audit(&tenant("other"), &AuditFilter::default())
        .await
        .unwrap();
    assert_eq!(
        other
            .iter()
            .map(|e| (e.seq, e.record.call_id.as_str()))
            .collect::<Vec<_>>(),
        [(1, "call-99")]
    );
    assert_eq!(
        db.store.verify_audit(&tenant("default")).await.unwrap(),
        AuditVerdict::Intact { records: 6 }
    );
    assert_eq!(
        db.store.verify_audit(&tenant("nobody")).await.unwrap(),
        AuditVerdict::Intact { records: 0 }
    );
}

both!(a_batch_continues_the_chain_like_single_appends);
async fn a_batch_continues_the_chain_like_single_appends(db: Db) {
    let default = tenant("default");
    db.store
        .append_audit(&default, &record(1, "read", "a", "allow"))
        .await
        .unwrap();
    // Past one INSERT's worth of rows, so the batch spans several.
    let batch: Vec<AuditRecord> = (2..=150).map(|n| record(n, "ls", "b", "allow")).collect();
    assert_eq!(db.store.append_audits(&default, &batch).await.unwrap(), 149);
    assert_eq!(db.store.append_audits(&default, &[]).await.unwrap(), 0);
    db.store
        .append_audit(&default, &record(151, "bash", "a", "deny"))
        .await
        .unwrap();
    let all = db
        .store
        .audit(&default, &AuditFilter::default())
        .await
        .unwrap();
    assert_eq!(
        all.iter()
            .map(|e| (e.seq, e.record.call_id.clone()))
            .collect::<Vec<_>>(),
        (1..=151)
            .map(|n| (i64::from(n), format!("call-{n}")))
            .collect::<Vec<_>>()
    );
    for pair in all.windows(2) {
        assert_eq!(pair[1].prev_hash, pair[0].hash);
    }
    assert_eq!(all[1].record, record(2, "ls", "b", "allow"));
    assert_eq!(
        db.store.verify_audit(&default).await.unwrap(),
        AuditVerdict::Intact { records: 151 }
    );
}

both!(audit_filters);
async fn audit_filters(db: Db) {
    six(&db).await;
    let t = tenant("default");
    let seqs = |f: AuditFilter| {
        let store = db.store.clone();
        let t = t.clone();
        async move {
            store
                .audit(&t, &f)
                .await
                .unwrap()
                .iter()
                .map(|e| e.seq)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        seqs(AuditFilter {
            tool: Some("bash".into()),
            ..Default::default()
        })
        .await,
        [2, 3, 6]
    );
    assert_eq!(
        seqs(AuditFilter {
            agent: Some("b".into()),
            ..Default::default()
        })
        .await,
        [3, 4]
    );
    assert_eq!(
        seqs(AuditFilter {
            decision: Some("allow".into()),
            ..Default::default()
        })
        .await,
        [1, 4, 5, 6]
    );
    assert_eq!(
        seqs(AuditFilter {
            tool: Some("bash".into()),
            agent: Some("a".into()),
            decision: Some("allow".into()),
            ..Default::default()
        })
        .await,
        [6]
    );
    assert_eq!(
        seqs(AuditFilter {
            after_seq: Some(4),
            ..Default::default()
        })
        .await,
        [5, 6]
    );
    assert_eq!(
        seqs(AuditFilter {
            limit: Some(2),
            ..Default::default()
        })
        .await,
        [1, 2]
    );
    let last = db.store.audit(&t, &AuditFilter::default()).await.unwrap()[5].at_ms;
    assert_eq!(
        seqs(AuditFilter {
            since_ms: Some(last + 1),
            ..Default::default()
        })
        .await,
        Vec::<i64>::new()
    );
    assert!(
        seqs(AuditFilter {
            since_ms: Some(last),
            ..Default::default()
        })
        .await
        .contains(&6)
    );
}

/// Appends six records, tampers with the database around the store, and
/// expects verify to name `seq` as the first broken record.
async fn tampered(db: Db, sql: &str, seq: i64) {
    six(&db).await;
    db.raw(sql).await;
    match db.store.verify_audit(&tenant("default")).await.unwrap() {
        AuditVerdict::Broken { seq: at, what } => assert_eq!(at, seq, "{what}"),
        intact => panic!("verify missed `{sql}`: {intact:?}"),
    }
    // The other tenant's chain is untouched.
    assert_eq!(
        db.store.verify_audit(&tenant("other")).await.unwrap(),
        AuditVerdict::Intact { records: 1 }
    );
}

both!(verify_finds_an_edited_record);
async fn verify_finds_an_edited_record(db: Db) {
    tampered(db, "UPDATE audit SET record = replace(record, '\"status\":\"denied\"', '\"status\":\"ok\"') WHERE tenant = 'default' AND seq = 3", 3).await;
}

both!(verify_finds_an_edited_column);
async fn verify_finds_an_edited_column(db: Db) {
    tampered(
        db,
        "UPDATE audit SET decision = 'allow' WHERE tenant = 'default' AND seq = 3",
        3,
    )
    .await;
}

both!(verify_finds_a_removed_record);
async fn verify_finds_a_removed_record(db: Db) {
    tampered(
        db,
        "DELETE FROM audit WHERE tenant = 'default' AND seq = 4",
        4,
    )
    .await;
}

both!(verify_finds_a_removed_last_record);
async fn verify_finds_a_removed_last_record(db: Db) {
    tampered(
        db,
        "DELETE FROM audit WHERE tenant = 'default' AND seq = 6",
        6,
    )
    .await;
}

both!(verify_finds_reordered_records);
async fn verify_finds_reordered_records(db: Db) {
    tampered(
        db,
        "UPDATE audit SET seq = -1 WHERE tenant = 'default' AND seq = 2; \
         UPDATE audit SET seq = 2 WHERE tenant = 'default' AND seq = 5; \
         UPDATE audit SET seq = 5 WHERE tenant = 'default' AND seq = -1",
        2,
    )
    .await;
}

both!(verify_finds_a_renumbered_tail);
async fn verify_finds_a_renumbered_tail(db: Db) {
    // Remove record 3 and close the gap by renumbering 4..6: the hashes
    // cover the numbers, so the renumbered record 3 does not fit.
    tampered(
        db,
        "DELETE FROM audit WHERE tenant = 'default' AND seq = 3; \
         UPDATE audit SET seq = seq + 100 WHERE tenant = 'default' AND seq > 3; \
         UPDATE audit SET seq = seq - 101 WHERE tenant = 'default' AND seq > 100",
        3,
    )
    .await;
}

both!(store_audit_is_the_executors_sink);
async fn store_audit_is_the_executors_sink(db: Db) {
    use toolgate_policy::AuditSink;
    let sink = toolgate_store::StoreAudit::new(db.store.clone(), tenant("team"));
    for n in 1..=3 {
        sink.record(&record(n, "bash", "agent-a", "ask"))
            .await
            .unwrap();
    }
    // Written in the background, in order; flush waits for all of them.
    sink.flush().await;
    let entries = db
        .store
        .audit(&tenant("team"), &AuditFilter::default())
        .await
        .unwrap();
    assert_eq!(
        entries
            .iter()
            .map(|e| e.record.call_id.as_str())
            .collect::<Vec<_>>(),
        ["call-1", "call-2", "call-3"]
    );
    assert_eq!(
        db.store.verify_audit(&tenant("team")).await.unwrap(),
        AuditVerdict::Intact { records: 3 }
    );
    assert!(
        db.store
            .audit(&tenant("default"), &AuditFilter::default())
            .await
            .unwrap()
            .is_empty()
    );
}

// More records than the writer takes at once, a flush in the middle: every
// one written, in the order handed over, in one chain.
both!(store_audit_writes_every_record_in_order);
async fn store_audit_writes_every_record_in_order(db: Db) {
    use toolgate_policy::AuditSink;
    let sink = toolgate_store::StoreAudit::new(db.store.clone(), tenant("team"));
    for n in 1..=400 {
        sink.record(&record(n, "read", "agent-a", "allow"))
            .await
            .unwrap();
        if n == 7 {
            sink.flush().await;
            assert_eq!(
                db.store.verify_audit(&tenant("team")).await.unwrap(),
                AuditVerdict::Intact { records: 7 }
            );
        }
    }
    sink.flush().await;
    let entries = db
        .store
        .audit(&tenant("team"), &AuditFilter::default())
        .await
        .unwrap();
    assert_eq!(
        entries
            .iter()
            .map(|e| e.record.call_id.clone())
            .collect::<Vec<_>>(),
        (1..=400).map(|n| format!("call-{n}")).collect::<Vec<_>>()
    );
    assert_eq!(
        db.store.verify_audit(&tenant("team")).await.unwrap(),
        AuditVerdict::Intact { records: 400 }
    );
}

// Many appenders at once in one tenant: one gapless chain.
both!(concurrent_appends_make_one_chain);
async fn concurrent_appends_make_one_chain(db: Db) {
    let mut tasks = Vec::new();
    for n in 0..24 {
        let store = db.store.clone();
        tasks.push(tokio::spawn(async move {
            store
                .append_audit(&tenant("default"), &record(n, "read", "a", "allow"))
                .await
                .unwrap()
                .seq
        }));
    }
    let mut seqs = Vec::new();
    for t in tasks {
        seqs.push(t.await.unwrap());
    }
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=24).collect::<Vec<i64>>());
    assert_eq!(
        db.store.verify_audit(&tenant("default")).await.unwrap(),
        AuditVerdict::Intact { records: 24 }
    );
}

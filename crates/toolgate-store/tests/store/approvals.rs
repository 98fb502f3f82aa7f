//! Requests, grants, refusals: reuse, answers, expiry, scopes, tenants.

use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::json;
use toolgate_policy::ApprovalScope;
use toolgate_store::{Answer, Decided, RequestFilter, RequestState, SpendFor, StoreError};

use crate::both;
use crate::common::{Db, approve, bash_call, call, deny, digests, tenant};

fn spend_for<'a>(covering: &'a [String], call_id: &'a str) -> SpendFor<'a> {
    SpendFor {
        covering,
        call_id,
        tool: "bash",
        args_digest: &covering[0],
    }
}

both!(same_question_reuses_its_pending_request);
async fn same_question_reuses_its_pending_request(db: Db) {
    let t = tenant("default");
    let first = db
        .store
        .file_or_reuse(&t, &bash_call("ls", &[]))
        .await
        .unwrap();
    assert!(!first.reused);
    assert!(
        first.request.id.starts_with("apr_") && first.request.id.len() == 14,
        "{}",
        first.request.id
    );
    // The same question with its keys in another order is the same digest
    // (ScopeKey::exact), so the same request.
    let again = db
        .store
        .file_or_reuse(&t, &call("bash", json!({"script": "ls"})))
        .await
        .unwrap();
    assert!(again.reused);
    assert_eq!(again.request.id, first.request.id);
    let other = db
        .store
        .file_or_reuse(&t, &bash_call("ls -l", &[]))
        .await
        .unwrap();
    assert!(!other.reused);
    assert_ne!(other.request.id, first.request.id);

    let pending = db
        .store
        .requests(
            &t,
            &RequestFilter {
                pending_only: true,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(pending.len(), 2);
    let shown = db
        .store
        .request(&t, &first.request.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(shown, first.request);
    assert_eq!(shown.arguments, json!({"script": "ls"}));
    assert_eq!(shown.state, RequestState::Pending);
}

both!(many_callers_of_one_question_file_one_request);
async fn many_callers_of_one_question_file_one_request(db: Db) {
    let t = tenant("default");
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let store = db.store.clone();
        let t = t.clone();
        tasks.push(tokio::spawn(async move {
            store
                .file_or_reuse(&t, &bash_call("make", &[]))
                .await
                .unwrap()
        }));
    }
    let mut ids = Vec::new();
    for task in tasks {
        ids.push(task.await.unwrap().request.id);
    }
    ids.dedup();
    assert_eq!(ids.len(), 1, "{ids:?}");
}

both!(expired_pending_request_is_replaced_by_a_new_one);
async fn expired_pending_request_is_replaced_by_a_new_one(db: Db) {
    let t = tenant("default");
    let mut new = bash_call("ls", &[]);
    new.ttl = Duration::from_secs(60);
    let first = db.store.file_or_reuse(&t, &new).await.unwrap();
    db.clock.advance(Duration::from_secs(61));
    let shown = db
        .store
        .request(&t, &first.request.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(shown.state, RequestState::Expired);
    let err = db
        .store
        .decide(&t, &first.request.id, &approve(Some(1), 60), "cli:test")
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::NotPending { state, .. } if state == "expired"),
        "{err}"
    );
    let second = db.store.file_or_reuse(&t, &new).await.unwrap();
    assert!(!second.reused);
    assert_ne!(second.request.id, first.request.id);
    assert!(
        db.store
            .requests(
                &t,
                &RequestFilter {
                    pending_only: true,
                    ..Default::default()
                }
            )
            .await
            .unwrap()
            .iter()
            .all(|r| r.id == second.request.id)
    );
}

both!(approve_makes_a_one_use_grant_spent_exactly_once);
async fn approve_makes_a_one_use_grant_spent_exactly_once(db: Db) {
    let t = tenant("default");
    let new = bash_call("cargo build", &[]);
    let covering = digests(&new);
    assert_eq!(
        db.store
            .spend(&t, &spend_for(&covering, "c0"))
            .await
            .unwrap(),
        None,
        "no grant yet"
    );
    let filed = db.store.file_or_reuse(&t, &new).await.unwrap();
    let Decided::Granted(grant) = db
        .store
        .decide(&t, &filed.request.id, &approve(Some(1), 3600), "cli:alice")
        .await
        .unwrap()
    else {
        panic!("approve made no grant")
    };
    assert!(grant.id.starts_with("grt_"));
    assert_eq!(
        (grant.uses, grant.spent, grant.key.kind),
        (Some(1), 0, ApprovalScope::Exact)
    );
    let answered = db
        .store
        .request(&t, &filed.request.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            answered.state,
            answered.outcome_id.as_deref(),
            answered.decided_by.as_deref()
        ),
        (
            RequestState::Approved,
            Some(grant.id.as_str()),
            Some("cli:alice")
        )
    );

    assert_eq!(
        db.store
            .spend(&t, &spend_for(&covering, "c1"))
            .await
            .unwrap(),
        Some(grant.id.clone())
    );
    assert_eq!(
        db.store
            .spend(&t, &spend_for(&covering, "c2"))
            .await
            .unwrap(),
        None,
        "the one use is gone"
    );
    let spends = db.store.spends(&t, &grant.id).await.unwrap();
    assert_eq!(
        spends
            .iter()
            .map(|s| s.call_id.as_str())
            .collect::<Vec<_>>(),
        ["c1"]
    );
    assert_eq!(
        db.store.grant(&t, &grant.id).await.unwrap().unwrap().spent,
        1
    );
    // Answered once: a second answer does not land.
    let err = db
        .store
        .decide(&t, &filed.request.id, &deny("no", 60), "cli:bob")
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::NotPending { state, .. } if state == "approved"),
        "{err}"
    );
    // A question asked again after the grant is used files a new request.
    assert!(!db.store.file_or_reuse(&t, &new).await.unwrap().reused);
}

both!(unlimited_and_counted_grants);
async fn unlimited_and_counted_grants(db: Db) {
    let t = tenant("default");
    for (uses, expect) in [(Some(3), 3), (None, 20)] {
        let new = bash_call(&format!("echo {uses:?}"), &[]);
        let covering = digests(&new);
        let id = db.store.file_or_reuse(&t, &new).await.unwrap().request.id;
        db.store
            .decide(&t, &id, &approve(uses, 3600), "cli:alice")
            .await
            .unwrap();
        let mut spent = 0;
        for i in 0..20 {
            if db
                .store
                .spend(&t, &spend_for(&covering, &format!("c{i}")))
                .await
                .unwrap()
                .is_some()
            {
                spent += 1;
            }
        }
        assert_eq!(spent, expect, "uses {uses:?}");
    }
    let zero = db
        .store
        .file_or_reuse(&t, &bash_call("zero", &[]))
        .await
        .unwrap()
        .request
        .id;
    let err = db
        .store
        .decide(&t, &zero, &approve(Some(0), 60), "cli:alice")
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::BadAnswer(_)), "{err}");
}

both!(grants_and_refusals_expire);
async fn grants_and_refusals_expire(db: Db) {
    let t = tenant("default");
    let granted = bash_call("deploy", &[]);
    let id = db
        .store
        .file_or_reuse(&t, &granted)
        .await
        .unwrap()
        .request
        .id;
    db.store
        .decide(&t, &id, &approve(Some(5), 60), "cli:alice")
        .await
        .unwrap();
    let refused = bash_call("rm -rf build", &[]);
    let id = db
        .store
        .file_or_reuse(&t, &refused)
        .await
        .unwrap()
        .request
        .id;
    let Decided::Refused(refusal) = db
        .store
        .decide(&t, &id, &deny("not on Fridays", 120), "cli:alice")
        .await
        .unwrap()
    else {
        panic!("deny made no refusal")
    };
    assert!(refusal.id.starts_with("ref_"));
    assert_eq!(
        db.store
            .live_refusal(&t, &digests(&refused))
            .await
            .unwrap()
            .map(|r| r.reason),
        Some("not on Fridays".to_owned())
    );
    assert_eq!(
        db.store.live_refusal(&t, &digests(&granted)).await.unwrap(),
        None
    );
    assert_eq!(
        db.store
            .request(&t, &id)
            .await
            .unwrap()
            .unwrap()
            .answer_reason
            .as_deref(),
        Some("not on Fridays")
    );

    db.clock.advance(Duration::from_secs(61));
    let covering = digests(&granted);
    assert_eq!(
        db.store
            .spend(&t, &spend_for(&covering, "late"))
            .await
            .unwrap(),
        None,
        "an expired grant is not spent"
    );
    assert!(
        db.store
            .live_refusal(&t, &digests(&refused))
            .await
            .unwrap()
            .is_some(),
        "the refusal still lives"
    );
    db.clock.advance(Duration::from_secs(60));
    assert_eq!(
        db.store.live_refusal(&t, &digests(&refused)).await.unwrap(),
        None,
        "a stale no does not last"
    );
}

both!(wider_scopes_cover_other_calls);
async fn wider_scopes_cover_other_calls(db: Db) {
    let t = tenant("default");
    // Approved for the whole tool: another call of it is covered.
    let first = bash_call("cargo test", &[&["cargo", "test"], &["cargo"]]);
    let id = db.store.file_or_reuse(&t, &first).await.unwrap().request.id;
    let tool_wide = Answer::Approve {
        uses: None,
        ttl: Duration::from_secs(60),
        scope: ApprovalScope::Tool,
        prefix: Vec::new(),
    };
    let Decided::Granted(grant) = db
        .store
        .decide(&t, &id, &tool_wide, "cli:alice")
        .await
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(grant.key.kind, ApprovalScope::Tool);
    let other = digests(&bash_call("ls", &[]));
    assert_eq!(
        db.store.spend(&t, &spend_for(&other, "c")).await.unwrap(),
        Some(grant.id)
    );

    // A command prefix: the suggestion by default, any prefix the request
    // is covered by on demand, never one that does not cover it.
    let second = bash_call("cargo test -p x", &[&["cargo", "test"], &["cargo"]]);
    let id = db
        .store
        .file_or_reuse(&t, &second)
        .await
        .unwrap()
        .request
        .id;
    let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let not_covering = Answer::Approve {
        uses: Some(2),
        ttl: Duration::from_secs(60),
        scope: ApprovalScope::CommandPrefix,
        prefix: words(&["cargo", "build"]),
    };
    let err = db
        .store
        .decide(&t, &id, &not_covering, "cli:alice")
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::BadAnswer(m) if m.contains("`cargo test`, `cargo`")),
        "{err}"
    );
    let suggested = Answer::Approve {
        uses: Some(2),
        ttl: Duration::from_secs(60),
        scope: ApprovalScope::CommandPrefix,
        prefix: Vec::new(),
    };
    let Decided::Granted(grant) = db
        .store
        .decide(&t, &id, &suggested, "cli:alice")
        .await
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(
        (grant.key.kind, grant.key.prefix.clone()),
        (ApprovalScope::CommandPrefix, words(&["cargo", "test"]))
    );
    let later = digests(&bash_call(
        "cargo test --release",
        &[&["cargo", "test"], &["cargo"]],
    ));
    assert_eq!(
        db.store.spend(&t, &spend_for(&later, "c")).await.unwrap(),
        Some(grant.id.clone())
    );
    let unrelated = digests(&bash_call(
        "cargo build",
        &[&["cargo", "build"], &["cargo"]],
    ));
    let spent_by = db
        .store
        .spend(&t, &spend_for(&unrelated, "c"))
        .await
        .unwrap();
    assert_ne!(
        spent_by,
        Some(grant.id),
        "a cargo test grant never covers cargo build"
    );
}

both!(a_tenant_never_sees_nor_spends_nor_answers_another_tenants_rows);
async fn a_tenant_never_sees_nor_spends_nor_answers_another_tenants_rows(db: Db) {
    let (a, b) = (tenant("tenant-a"), tenant("tenant-b"));
    let new = bash_call("make release", &[]);
    let covering = digests(&new);
    let granted = db.store.file_or_reuse(&a, &new).await.unwrap().request.id;
    let Decided::Granted(grant) = db
        .store
        .decide(&a, &granted, &approve(Some(5), 3600), "cli:alice")
        .await
        .unwrap()
    else {
        panic!()
    };
    let refused_call = bash_call("make clean", &[]);
    let refused = db
        .store
        .file_or_reuse(&a, &refused_call)
        .await
        .unwrap()
        .request
        .id;
    db.store
        .decide(&a, &refused, &deny("no", 3600), "cli:alice")
        .await
        .unwrap();
    let pending = db
        .store
        .file_or_reuse(&a, &bash_call("make test", &[]))
        .await
        .unwrap()
        .request
        .id;

    // B sees nothing of A's …
    assert_eq!(db.store.request(&b, &pending).await.unwrap(), None);
    assert!(
        db.store
            .requests(&b, &RequestFilter::default())
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(db.store.grant(&b, &grant.id).await.unwrap(), None);
    assert!(db.store.spends(&b, &grant.id).await.unwrap().is_empty());
    assert_eq!(
        db.store
            .live_refusal(&b, &digests(&refused_call))
            .await
            .unwrap(),
        None
    );
    // … cannot spend A's grant with the very same digests …
    assert_eq!(
        db.store
            .spend(&b, &spend_for(&covering, "b1"))
            .await
            .unwrap(),
        None
    );
    // … cannot answer A's request …
    let err = db
        .store
        .decide(&b, &pending, &approve(Some(1), 60), "cli:mallory")
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
    // … and B's own question of the same call is B's own request.
    let b_own = db.store.file_or_reuse(&b, &new).await.unwrap();
    assert!(!b_own.reused);

    // A's rows are as A left them.
    assert_eq!(
        db.store.request(&a, &pending).await.unwrap().unwrap().state,
        RequestState::Pending
    );
    let a_grant = db.store.grant(&a, &grant.id).await.unwrap().unwrap();
    assert_eq!((a_grant.spent, a_grant.uses), (0, Some(5)));
    assert_eq!(
        db.store
            .requests(&a, &RequestFilter::default())
            .await
            .unwrap()
            .len(),
        3
    );
}

both!(unknown_request_is_not_found);
async fn unknown_request_is_not_found(db: Db) {
    let t = tenant("default");
    let err = db
        .store
        .decide(&t, "apr_nonexisting", &approve(Some(1), 60), "cli:alice")
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "no approval request `apr_nonexisting` (see `toolgate approvals list`)"
    );
}

both!(migrations_run_once_when_many_open_at_once);
async fn migrations_run_once_when_many_open_at_once(db: Db) {
    // A database nobody has opened yet, opened by four at once.
    let fresh = match &db.backend {
        toolgate_store::Backend::Sqlite(path) => {
            toolgate_store::Backend::Sqlite(path.with_file_name("fresh.db"))
        }
        toolgate_store::Backend::Postgres(_) => {
            toolgate_store::Backend::Postgres(crate::common::fresh_postgres_database().await)
        }
    };
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let backend = fresh.clone();
        tasks.push(tokio::spawn(async move {
            toolgate_store::open(backend).await.map(|_| ())
        }));
    }
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    let store = toolgate_store::open(fresh).await.unwrap();
    assert!(
        store
            .requests(&tenant("x"), &RequestFilter::default())
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn an_unreachable_postgres_is_a_clear_error() {
    let err = toolgate_store::open(toolgate_store::Backend::Postgres(
        "postgres://toolgate:s3cret@127.0.0.1:1/toolgate".to_owned(),
    ))
    .await
    .err()
    .expect("no server listens on port 1");
    let text = err.to_string();
    assert!(matches!(err, StoreError::Unreachable(_)), "{text}");
    assert!(text.starts_with("the approval store is unreachable: cannot connect to PostgreSQL at 127.0.0.1:1/toolgate as toolgate"), "{text}");
    assert!(
        !text.contains("s3cret"),
        "the password is never printed: {text}"
    );
}

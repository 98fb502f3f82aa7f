//! The approval gate through toolgate-policy's `ApprovalChannel`: every
//! branch of the order, waiting, the reviewer.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pretty_assertions::assert_eq;
use toolgate_core::{AskAnswer, AskQuestion, Asker, EffectClass, Progress};
use toolgate_policy::{ApprovalChannel, ApprovalOutcome, ApprovalRequest, ApprovalScope};
use toolgate_store::{Answer, ApprovalSettings, Decided, RequestState, StoreApprovals};

use crate::both;
use crate::common::{Db, approve, bash_call, deny, tenant};

/// What the Executor would hand the gate for `bash` running `script`, and
/// the progress lines it reports.
fn asked(script: &str) -> (ApprovalRequest, Arc<Mutex<Vec<String>>>) {
    let new = bash_call(script, &[]);
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    let request = ApprovalRequest {
        tool: new.tool,
        arguments: new.arguments,
        reason: new.reason,
        caller: new.agent,
        call_id: new.call_id,
        effect_class: EffectClass::MutateReversible,
        group: None,
        scope: ApprovalScope::Exact,
        exact: new.exact,
        covering: new.covering,
        suggested_prefix: Vec::new(),
        progress: Progress::new(move |line| sink.lock().unwrap().push(line.to_owned())),
        asker: None,
    };
    (request, lines)
}

fn gate(db: &Db, settings: ApprovalSettings) -> StoreApprovals {
    StoreApprovals::new(db.store.clone(), tenant("default"), settings)
}

fn no_wait() -> ApprovalSettings {
    ApprovalSettings::default().wait(Duration::ZERO)
}

fn pending_id(outcome: &ApprovalOutcome) -> String {
    match outcome {
        ApprovalOutcome::Pending { id } => id.clone(),
        other => panic!("expected pending, got {other:?}"),
    }
}

both!(gate_order_every_branch);
async fn gate_order_every_branch(db: Db) {
    let t = tenant("default");
    let g = gate(&db, no_wait());
    let (call, _) = asked("make install");

    // 4. Nothing known: a new request is filed.
    let id = pending_id(&g.request(&call).await);
    assert_eq!(
        db.store.request(&t, &id).await.unwrap().unwrap().state,
        RequestState::Pending
    );
    // 3. Asked again: the same request, not a second one.
    assert_eq!(pending_id(&g.request(&call).await), id);
    assert_eq!(
        db.store
            .requests(&t, &Default::default())
            .await
            .unwrap()
            .len(),
        1
    );

    // 1. Approved for two uses: two calls run, the third asks anew.
    let Decided::Granted(grant) = db
        .store
        .decide(&t, &id, &approve(Some(2), 3600), "cli:alice")
        .await
        .unwrap()
    else {
        panic!()
    };
    for _ in 0..2 {
        assert_eq!(
            g.request(&call).await,
            ApprovalOutcome::Approved {
                grant: Some(grant.id.clone())
            }
        );
    }
    let again = pending_id(&g.request(&call).await);
    assert_ne!(again, id);

    // 2. Denied: refused at once with the person's reason, every time.
    db.store
        .decide(
            &t,
            &again,
            &deny("not before the release", 3600),
            "cli:alice",
        )
        .await
        .unwrap();
    for _ in 0..3 {
        match g.request(&call).await {
            ApprovalOutcome::Refused {
                reason,
                id: Some(refusal),
            } => {
                assert!(refusal.starts_with("ref_"), "{refusal}");
                assert_eq!(
                    reason,
                    format!("not before the release (refused by cli:alice, refusal {refusal})")
                );
            }
            other => panic!("expected refused, got {other:?}"),
        }
    }
    assert_eq!(
        db.store
            .requests(&t, &Default::default())
            .await
            .unwrap()
            .len(),
        2,
        "a refused call files nothing"
    );

    // 1 before 2: a usable grant is spent even where a refusal also covers
    // the call (a person who approves after refusing means it).
    let (other, _) = asked("make docs");
    let first = pending_id(&g.request(&other).await);
    let tool_wide = Answer::Deny {
        reason: "no bash".into(),
        ttl: Duration::from_secs(3600),
        scope: ApprovalScope::Tool,
        prefix: Vec::new(),
    };
    db.store
        .decide(&t, &first, &tool_wide, "cli:bob")
        .await
        .unwrap();
    let (third, _) = asked("make check");
    assert!(
        matches!(g.request(&third).await, ApprovalOutcome::Refused { .. }),
        "the tool-wide no covers another script"
    );
    let new = bash_call("make check", &[]);
    let reask = db.store.file_or_reuse(&t, &new).await.unwrap().request.id;
    let Decided::Granted(exact) = db
        .store
        .decide(&t, &reask, &approve(Some(1), 3600), "cli:bob")
        .await
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(
        g.request(&third).await,
        ApprovalOutcome::Approved {
            grant: Some(exact.id)
        }
    );
    assert!(
        matches!(g.request(&third).await, ApprovalOutcome::Refused { .. }),
        "the grant is used up; the no stands"
    );
}

both!(a_waiting_call_goes_through_when_another_process_approves);
async fn a_waiting_call_goes_through_when_another_process_approves(db: Db) {
    let g = gate(
        &db,
        ApprovalSettings::default().wait(Duration::from_secs(60)),
    );
    let (call, progress) = asked("cargo publish");
    let waiting = tokio::spawn(async move { g.request(&call).await });
    // The person, in another process, with a store of its own.
    let person = toolgate_store::open(db.backend.clone()).await.unwrap();
    let t = tenant("default");
    let id = loop {
        let pending = person.requests(&t, &Default::default()).await.unwrap();
        if let Some(r) = pending.first() {
            break r.id.clone();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let Decided::Granted(grant) = person
        .decide(&t, &id, &approve(None, 3600), "cli:alice")
        .await
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(
        waiting.await.unwrap(),
        ApprovalOutcome::Approved {
            grant: Some(grant.id.clone())
        }
    );
    assert_eq!(
        progress.lock().unwrap().first().cloned(),
        Some(format!("waiting for approval {id}"))
    );
    assert_eq!(person.spends(&t, &grant.id).await.unwrap().len(), 1);
}

both!(a_waiting_call_is_refused_when_denied_and_pending_when_nobody_answers);
async fn a_waiting_call_is_refused_when_denied_and_pending_when_nobody_answers(db: Db) {
    let t = tenant("default");
    let g = Arc::new(gate(
        &db,
        ApprovalSettings::default().wait(Duration::from_secs(60)),
    ));
    let (call, _) = asked("terraform apply");
    let waiting = tokio::spawn({
        let (g, call) = (g.clone(), call.clone());
        async move { g.request(&call).await }
    });
    let id = loop {
        if let Some(r) = db
            .store
            .requests(&t, &Default::default())
            .await
            .unwrap()
            .first()
        {
            break r.id.clone();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    db.store
        .decide(&t, &id, &deny("plan first", 60), "cli:alice")
        .await
        .unwrap();
    assert!(
        matches!(waiting.await.unwrap(), ApprovalOutcome::Refused { reason, .. } if reason.starts_with("plan first"))
    );

    // Nobody answers within the wait: pending, and the request stays
    // pending (never granted).
    let short = gate(
        &db,
        ApprovalSettings::default().wait(Duration::from_millis(300)),
    );
    let (unanswered, _) = asked("terraform destroy");
    let id = pending_id(&short.request(&unanswered).await);
    assert_eq!(
        db.store.request(&t, &id).await.unwrap().unwrap().state,
        RequestState::Pending
    );

    // A caller that gives up (the future is dropped) leaves it pending too.
    let (given_up, _) = asked("terraform import");
    let _ = tokio::time::timeout(Duration::from_millis(300), g.request(&given_up)).await;
    let left = db
        .store
        .requests(
            &t,
            &toolgate_store::RequestFilter {
                pending_only: true,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert!(
        left.iter().any(|r| r.arguments == given_up.arguments),
        "{left:?}"
    );
}

/// A reviewer script in a temp dir: `body` is its shell code.
fn reviewer(dir: &std::path::Path, name: &str, body: &str) -> Vec<String> {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    vec!["/bin/sh".to_owned(), path.display().to_string()]
}

both!(the_reviewer_approves_denies_or_abstains_never_approves_by_failing);
async fn the_reviewer_approves_denies_or_abstains_never_approves_by_failing(db: Db) {
    let dir = tempfile::tempdir().unwrap();
    let settings = |command: Vec<String>| {
        ApprovalSettings::default()
            .wait(Duration::from_secs(20))
            .reviewer(Some(command))
            .reviewer_timeout(Duration::from_secs(2))
    };
    // It reads the request and approves calls of bash.
    let approving = reviewer(
        dir.path(),
        "approve",
        r#"grep -q '"tool":"bash"' && echo '{"decision":"approve","uses":1}'"#,
    );
    let (call, _) = asked("echo hi");
    assert!(matches!(
        gate(&db, settings(approving)).request(&call).await,
        ApprovalOutcome::Approved { grant: Some(_) }
    ));

    let denying = reviewer(
        dir.path(),
        "deny",
        r#"cat >/dev/null; echo '{"decision":"deny","reason":"policy 7"}'"#,
    );
    let (call, _) = asked("echo no");
    match gate(&db, settings(denying)).request(&call).await {
        ApprovalOutcome::Refused { reason, .. } => assert!(
            reason.starts_with("policy 7 (refused by reviewer"),
            "{reason}"
        ),
        other => panic!("{other:?}"),
    }

    // Abstaining, crashing, garbage, "approve" with a bad shape, a hang:
    // each leaves the request pending.
    for (name, body) in [
        (
            "abstain",
            r#"cat >/dev/null; echo '{"decision":"abstain"}'"#,
        ),
        (
            "crash",
            "cat >/dev/null; echo '{\"decision\":\"approve\"}'; exit 3",
        ),
        ("garbage", "cat >/dev/null; echo 'approve!'"),
        (
            "shape",
            r#"cat >/dev/null; echo '{"decision":"approve","uses":"all"}'"#,
        ),
        (
            "zero",
            r#"cat >/dev/null; echo '{"decision":"approve","uses":0}'"#,
        ),
        ("hang", "sleep 30"),
    ] {
        let g = StoreApprovals::new(
            db.store.clone(),
            tenant("default"),
            settings(reviewer(dir.path(), name, body)).wait(Duration::from_secs(4)),
        );
        let (call, _) = asked(&format!("echo {name}"));
        let id = pending_id(&g.request(&call).await);
        assert_eq!(
            db.store
                .request(&tenant("default"), &id)
                .await
                .unwrap()
                .unwrap()
                .state,
            RequestState::Pending,
            "{name}"
        );
    }
}

both!(the_person_in_line_approves_or_denies_and_no_answer_waits_on);
async fn the_person_in_line_approves_or_denies_and_no_answer_waits_on(db: Db) {
    let t = tenant("default");
    let asked_about = Arc::new(Mutex::new(Vec::new()));
    let asker = |answer: Option<AskAnswer>| {
        let seen = asked_about.clone();
        Asker::new(move |question: AskQuestion| {
            seen.lock()
                .unwrap()
                .push((question.request_id.clone(), question.default_uses));
            let answer = answer.clone();
            async move { answer }
        })
    };
    let g = gate(
        &db,
        ApprovalSettings::default()
            .wait(Duration::from_millis(600))
            .uses(Some(3)),
    );

    let (mut call, _) = asked("git push");
    call.asker = Some(asker(Some(AskAnswer::Approve {
        uses: None,
        ttl: None,
    })));
    let ApprovalOutcome::Approved { grant: Some(grant) } = g.request(&call).await else {
        panic!("the in-line yes did not approve")
    };
    let made = db.store.grant(&t, &grant).await.unwrap().unwrap();
    assert_eq!(
        (made.uses, made.spent, made.by.as_str()),
        (Some(3), 1, "elicitation"),
        "the settings' default uses"
    );
    let (id, default_uses) = asked_about.lock().unwrap()[0].clone();
    assert_eq!(default_uses, Some(3));
    assert_eq!(
        db.store.request(&t, &id).await.unwrap().unwrap().outcome_id,
        Some(grant)
    );

    let (mut call, _) = asked("git push --force");
    call.asker = Some(asker(Some(AskAnswer::Deny {
        reason: "never force".into(),
    })));
    assert!(
        matches!(g.request(&call).await, ApprovalOutcome::Refused { reason, .. } if reason.starts_with("never force (refused by elicitation"))
    );

    let (mut call, _) = asked("git push --tags");
    call.asker = Some(asker(None));
    let id = pending_id(&g.request(&call).await);
    assert_eq!(
        db.store.request(&t, &id).await.unwrap().unwrap().state,
        RequestState::Pending
    );
}

/// PostgreSQL gone after start: every call is Unavailable with the store's
/// error, never approved, even where a grant had covered it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_postgres_is_unavailable_never_an_allow() {
    use sqlx::Connection;
    let db = Db::postgres().await;
    let t = tenant("default");
    let (call, _) = asked("make deploy");
    let new = bash_call("make deploy", &[]);
    let id = db.store.file_or_reuse(&t, &new).await.unwrap().request.id;
    db.store
        .decide(&t, &id, &approve(None, 3600), "cli:alice")
        .await
        .unwrap();
    let toolgate_store::Backend::Postgres(url) = &db.backend else {
        unreachable!()
    };
    let name = url.rsplit('/').next().unwrap().to_owned();
    let server = crate::common::postgres_server_url();
    let mut admin = sqlx::PgConnection::connect(&server).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE {name} WITH (FORCE)"
    )))
    .execute(&mut admin)
    .await
    .unwrap();
    match gate(&db, no_wait()).request(&call).await {
        ApprovalOutcome::Unavailable { reason } => {
            assert!(
                reason.starts_with("the approval store is unreachable: "),
                "{reason}"
            )
        }
        other => panic!("a lost store must not answer {other:?}"),
    }
}

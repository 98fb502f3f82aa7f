//! Pins of external MCP tools: first definitions pinned, changes parked for
//! review, approvals only of the change a person saw, tenants apart, and
//! one first definition when many processes pin at once.

use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::json;
use toolgate_store::{ChangeState, ListedTool, PinCheck, StoreError};

use crate::both;
use crate::common::{Db, tenant};

/// The definition of `server`/`tool` labelled `label` (its description),
/// with a made-up digest that names the label: the store compares digests,
/// it never computes them.
fn listed(server: &str, tool: &str, label: &str) -> ListedTool {
    ListedTool {
        server: server.to_owned(),
        tool: tool.to_owned(),
        digest: format!("digest-of-{label}"),
        definition: json!({"description": label, "input_schema": {"type": "object"}}),
    }
}

/// The label of a digest made by [`listed`].
fn label(digest: &str) -> &str {
    digest.strip_prefix("digest-of-").unwrap_or(digest)
}

/// What one step of a tool's life does.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// The server lists the tool with this definition.
    Serve(&'static str),
    /// A person approves the change they saw: this definition.
    Approve(&'static str),
    /// A person rejects it.
    Reject(&'static str),
}

/// What the step answers, by labels.
#[derive(Debug, Clone, PartialEq)]
enum Saw {
    FirstSeen,
    Trusted,
    /// Changed; the label of the pinned definition.
    Changed(String),
    /// Approved; the label of the new pin.
    Approved(String),
    /// Rejected; the label of the rejected definition.
    Rejected(String),
    /// An error whose text starts so.
    Error(String),
}

/// After a step: the pin's label, who approved it, and each change's label
/// and state.
#[derive(Debug, Clone, PartialEq)]
struct After {
    pin: String,
    approved_by: Option<String>,
    changes: Vec<(String, ChangeState)>,
}

fn after(pin: &str, approved_by: Option<&str>, changes: &[(&str, ChangeState)]) -> After {
    After {
        pin: pin.to_owned(),
        approved_by: approved_by.map(str::to_owned),
        changes: changes.iter().map(|(l, s)| ((*l).to_owned(), *s)).collect(),
    }
}

async fn run_step(db: &Db, step: Step) -> Saw {
    let t = tenant("default");
    let digest = |l: &str| format!("digest-of-{l}");
    let result = match step {
        Step::Serve(l) => {
            let checks = db
                .store
                .check_tool_pins(&t, &[listed("fs", "read", l)])
                .await;
            return match checks.unwrap().as_slice() {
                [PinCheck::FirstSeen] => Saw::FirstSeen,
                [PinCheck::Trusted] => Saw::Trusted,
                [PinCheck::Changed { pinned }] => Saw::Changed(label(&pinned.digest).to_owned()),
                other => panic!("one check per tool, got {other:?}"),
            };
        }
        Step::Approve(l) => db
            .store
            .approve_tool_change(&t, "fs", "read", &digest(l), "cli:alice")
            .await
            .map(|pin| Saw::Approved(label(&pin.digest).to_owned())),
        Step::Reject(l) => db
            .store
            .reject_tool_change(&t, "fs", "read", &digest(l), "cli:bob")
            .await
            .map(|change| Saw::Rejected(label(&change.digest).to_owned())),
    };
    result.unwrap_or_else(|e| Saw::Error(e.to_string()))
}

async fn state(db: &Db) -> After {
    let t = tenant("default");
    let pins = db.store.tool_pins(&t).await.unwrap();
    let [pin] = pins.as_slice() else {
        panic!("one pin, got {pins:?}")
    };
    let changes = db.store.tool_changes(&t).await.unwrap();
    After {
        pin: label(&pin.digest).to_owned(),
        approved_by: pin.approved_by.clone(),
        changes: changes
            .iter()
            .map(|c| (label(&c.digest).to_owned(), c.state))
            .collect(),
    }
}

both!(a_tools_life_from_first_sight_through_changes_and_reviews);
async fn a_tools_life_from_first_sight_through_changes_and_reviews(db: Db) {
    use ChangeState::{Pending, Rejected};
    use Step::{Approve, Reject, Serve};
    let changed = |l: &str| Saw::Changed(l.to_owned());
    let changed_again = |seen: &str, now: &str| {
        Saw::Error(format!(
            "tool `read` of MCP server `fs` changed again since the change you reviewed \
             (digest digest-of-{seen}); it now serves digest digest-of-{now}: review the new \
             change with `toolgate mcp-servers review`"
        ))
    };
    let alice = Some("cli:alice");
    let table: Vec<(&str, Step, Saw, After)> = vec![
        ("first sight pins", Serve("v1"), Saw::FirstSeen, after("v1", None, &[])),
        ("the pin is trusted", Serve("v1"), Saw::Trusted, after("v1", None, &[])),
        ("a change is parked", Serve("v2"), changed("v1"), after("v1", None, &[("v2", Pending)])),
        ("seen again, still one change", Serve("v2"), changed("v1"), after("v1", None, &[("v2", Pending)])),
        ("approving what was never shown", Approve("v3"), changed_again("v3", "v2"), after("v1", None, &[("v2", Pending)])),
        ("a newer change replaces it", Serve("v3"), changed("v1"), after("v1", None, &[("v3", Pending)])),
        ("approving the diff shown before", Approve("v2"), changed_again("v2", "v3"), after("v1", None, &[("v3", Pending)])),
        ("back to the pin: trusted, the change kept", Serve("v1"), Saw::Trusted, after("v1", None, &[("v3", Pending)])),
        ("rejected", Reject("v3"), Saw::Rejected("v3".into()), after("v1", None, &[("v3", Rejected)])),
        ("the rejected one stays disabled, not queued again", Serve("v3"), changed("v1"), after("v1", None, &[("v3", Rejected)])),
        ("another change is queued", Serve("v2"), changed("v1"), after("v1", None, &[("v2", Pending)])),
        ("approved", Approve("v2"), Saw::Approved("v2".into()), after("v2", alice, &[])),
        ("the approved one is trusted", Serve("v2"), Saw::Trusted, after("v2", alice, &[])),
        ("approving twice is the same pin", Approve("v2"), Saw::Approved("v2".into()), after("v2", alice, &[])),
        (
            "nothing to reject",
            Reject("v2"),
            Saw::Error("tool `read` of MCP server `fs` has no change to review: the last definition seen of it is its pinned one".into()),
            after("v2", alice, &[]),
        ),
        ("the old definition is now a change", Serve("v1"), changed("v2"), after("v2", alice, &[("v1", Pending)])),
        ("rejected", Reject("v1"), Saw::Rejected("v1".into()), after("v2", alice, &[("v1", Rejected)])),
        ("a person may approve what they rejected", Approve("v1"), Saw::Approved("v1".into()), after("v1", alice, &[])),
    ];
    for (what, step, saw, then) in table {
        assert_eq!(run_step(&db, step).await, saw, "{what}: {step:?}");
        assert_eq!(state(&db).await, then, "{what}: after {step:?}");
        db.clock.advance(Duration::from_secs(1));
    }
}

both!(a_change_is_kept_whole_with_when_it_was_first_seen_and_who_rejected_it);
async fn a_change_is_kept_whole_with_when_it_was_first_seen_and_who_rejected_it(db: Db) {
    let t = tenant("default");
    let first = db.clock.now_ms();
    db.store
        .check_tool_pins(&t, &[listed("fs", "read", "v1")])
        .await
        .unwrap();
    db.clock.advance(Duration::from_secs(60));
    let seen = db.clock.now_ms();
    db.store
        .check_tool_pins(&t, &[listed("fs", "read", "v2")])
        .await
        .unwrap();
    db.clock.advance(Duration::from_secs(60));
    db.store
        .check_tool_pins(&t, &[listed("fs", "read", "v2")])
        .await
        .unwrap();
    db.clock.advance(Duration::from_secs(60));
    let rejected = db
        .store
        .reject_tool_change(&t, "fs", "read", "digest-of-v2", "cli:bob")
        .await
        .unwrap();

    // The whole change, as JSON (the rows are non-exhaustive structs).
    let expected = json!({
        "pinned": {
            "server": "fs",
            "tool": "read",
            "digest": "digest-of-v1",
            "definition": {"description": "v1", "input_schema": {"type": "object"}},
            "pinned_ms": rejected.pinned.pinned_ms,
            "approved_by": null,
        },
        "digest": "digest-of-v2",
        "definition": {"description": "v2", "input_schema": {"type": "object"}},
        "seen_ms": rejected.seen_ms,
        "state": "rejected",
        "decided_by": "cli:bob",
        "decided_ms": rejected.decided_ms,
    });
    assert_eq!(serde_json::to_value(&rejected).unwrap(), expected);
    assert_eq!(
        db.store.tool_changes(&t).await.unwrap(),
        vec![rejected.clone()]
    );
    // The times the store took from its clock, within this test's steps.
    let within = |ms: i64, from: i64| (from..from + 5_000).contains(&ms);
    assert!(
        within(rejected.pinned.pinned_ms, first),
        "pinned when first seen"
    );
    assert!(within(rejected.seen_ms, seen), "first seen, not last seen");
    assert!(
        within(rejected.decided_ms.unwrap(), seen + 120_000),
        "rejected at"
    );
}

both!(one_batch_answers_each_tool_in_order);
async fn one_batch_answers_each_tool_in_order(db: Db) {
    let t = tenant("default");
    let first = vec![
        listed("web", "fetch", "a"),
        listed("fs", "write", "a"),
        listed("fs", "read", "a"),
    ];
    let checks = db.store.check_tool_pins(&t, &first).await.unwrap();
    assert_eq!(checks, vec![PinCheck::FirstSeen; 3]);

    // Out of key order on purpose: the answers still follow the input.
    let second = vec![
        listed("web", "fetch", "a"),
        listed("fs", "write", "b"),
        listed("fs", "read", "a"),
        listed("fs", "delete", "a"),
    ];
    let checks = db.store.check_tool_pins(&t, &second).await.unwrap();
    let pinned_write = db
        .store
        .tool_pins(&t)
        .await
        .unwrap()
        .into_iter()
        .find(|p| p.tool == "write")
        .unwrap();
    assert_eq!(
        checks,
        vec![
            PinCheck::Trusted,
            PinCheck::Changed {
                pinned: pinned_write
            },
            PinCheck::Trusted,
            PinCheck::FirstSeen,
        ]
    );
    let pins: Vec<(String, String)> = db
        .store
        .tool_pins(&t)
        .await
        .unwrap()
        .into_iter()
        .map(|p| (p.server, p.tool))
        .collect();
    let names = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(s, t)| ((*s).to_owned(), (*t).to_owned()))
            .collect()
    };
    assert_eq!(
        pins,
        names(&[
            ("fs", "delete"),
            ("fs", "read"),
            ("fs", "write"),
            ("web", "fetch")
        ])
    );
    assert!(db.store.check_tool_pins(&t, &[]).await.unwrap().is_empty());

    // A server that lists one tool twice, differently: the first is pinned
    // and the second is a change, so the gateway disables the name.
    let twice = vec![listed("dup", "x", "a"), listed("dup", "x", "b")];
    let checks = db.store.check_tool_pins(&t, &twice).await.unwrap();
    assert!(
        matches!(
            checks.as_slice(),
            [PinCheck::FirstSeen, PinCheck::Changed { .. }]
        ),
        "{checks:?}"
    );
}

both!(reviewing_a_tool_that_was_never_pinned_says_so);
async fn reviewing_a_tool_that_was_never_pinned_says_so(db: Db) {
    let t = tenant("default");
    let err = db
        .store
        .approve_tool_change(&t, "fs", "read", "digest-of-v1", "cli:alice")
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NoPin { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        "tool `read` of MCP server `fs` has no pinned definition (see `toolgate mcp-servers review`)"
    );
    let err = db
        .store
        .reject_tool_change(&t, "fs", "read", "digest-of-v1", "cli:alice")
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NoPin { .. }), "{err}");
    // A pin without a change: approving anything but the pin is no change.
    db.store
        .check_tool_pins(&t, &[listed("fs", "read", "v1")])
        .await
        .unwrap();
    let err = db
        .store
        .approve_tool_change(&t, "fs", "read", "digest-of-v2", "cli:alice")
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NoChange { .. }), "{err}");
}

both!(a_tenant_never_sees_nor_reviews_another_tenants_pins);
async fn a_tenant_never_sees_nor_reviews_another_tenants_pins(db: Db) {
    let (a, b) = (tenant("a"), tenant("b"));
    db.store
        .check_tool_pins(&a, &[listed("fs", "read", "v1")])
        .await
        .unwrap();
    db.store
        .check_tool_pins(&a, &[listed("fs", "read", "v2")])
        .await
        .unwrap();

    // Tenant b meets the tool afresh: its first definition is its own pin,
    // and a's pending change is not b's to approve.
    let checks = db
        .store
        .check_tool_pins(&b, &[listed("fs", "read", "v3")])
        .await
        .unwrap();
    assert_eq!(checks, vec![PinCheck::FirstSeen]);
    assert!(db.store.tool_changes(&b).await.unwrap().is_empty());
    let err = db
        .store
        .approve_tool_change(&b, "fs", "read", "digest-of-v2", "cli:mallory")
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NoChange { .. }), "{err}");
    let err = db
        .store
        .reject_tool_change(&tenant("c"), "fs", "read", "digest-of-v2", "cli:mallory")
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NoPin { .. }), "{err}");

    // Tenant a's change is untouched by all of that.
    let changes = db.store.tool_changes(&a).await.unwrap();
    assert_eq!(changes.len(), 1);
    assert_eq!(
        (changes[0].digest.as_str(), changes[0].state),
        ("digest-of-v2", ChangeState::Pending)
    );
    assert_eq!(
        db.store.tool_pins(&a).await.unwrap()[0].digest,
        "digest-of-v1"
    );
}

// Sixteen toolgates starting at once (each its own store and connection
// pool on one database), each told a different first definition of the
// same tools, in a different order: one definition per tool is pinned,
// the one that came first, and every other toolgate is told the tool
// changed, against that very pin.
both!(toolgates_starting_at_once_pin_one_first_definition);
async fn toolgates_starting_at_once_pin_one_first_definition(db: Db) {
    let mut stores = Vec::new();
    for _ in 0..16 {
        stores.push(toolgate_store::open(db.backend.clone()).await.unwrap());
    }
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(stores.len()));
    let mut tasks = Vec::new();
    for (i, store) in stores.into_iter().enumerate() {
        let barrier = barrier.clone();
        tasks.push(tokio::spawn(async move {
            let label = format!("process-{i}");
            let mut tools: Vec<ListedTool> = ["a", "b", "c", "d"]
                .iter()
                .map(|tool| listed("srv", tool, &label))
                .collect();
            if i % 2 == 1 {
                tools.reverse();
            }
            barrier.wait().await;
            let checks = store
                .check_tool_pins(&tenant("default"), &tools)
                .await
                .unwrap();
            (label, tools, checks)
        }));
    }
    let mut results = Vec::new();
    for task in tasks {
        results.push(task.await.unwrap());
    }
    let pins = db.store.tool_pins(&tenant("default")).await.unwrap();
    assert_eq!(pins.len(), 4, "{pins:?}");
    for pin in &pins {
        let winners: Vec<&str> = results
            .iter()
            .filter(|(_, tools, checks)| {
                tools
                    .iter()
                    .zip(checks)
                    .any(|(t, c)| t.tool == pin.tool && *c == PinCheck::FirstSeen)
            })
            .map(|(label, _, _)| label.as_str())
            .collect();
        assert_eq!(
            winners,
            vec![label(&pin.digest)],
            "exactly the pinned one saw {} first",
            pin.tool
        );
        for (label, tools, checks) in &results {
            for (t, c) in tools.iter().zip(checks) {
                if t.tool == pin.tool && *c != PinCheck::FirstSeen {
                    assert_eq!(
                        *c,
                        PinCheck::Changed {
                            pinned: pin.clone()
                        },
                        "{label} {}",
                        t.tool
                    );
                }
            }
        }
    }
}

// A definition the store cannot decode (edited by hand) is an error, not
// a pass: the gateway then disables every tool it was checking.
both!(a_corrupt_pin_is_an_error_never_trusted);
async fn a_corrupt_pin_is_an_error_never_trusted(db: Db) {
    let t = tenant("default");
    db.store
        .check_tool_pins(&t, &[listed("fs", "read", "v1")])
        .await
        .unwrap();
    db.raw("UPDATE tool_pins SET definition = 'not json'").await;
    let err = db
        .store
        .check_tool_pins(&t, &[listed("fs", "read", "v1")])
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Corrupt(_)), "{err}");
}

// A store made by a toolgate before pins (migration 1 only) gains the
// table when a newer toolgate opens it, its approvals untouched.
both!(a_store_from_before_pins_is_migrated_on_open);
async fn a_store_from_before_pins_is_migrated_on_open(db: Db) {
    let t = tenant("default");
    let filed = db
        .store
        .file_or_reuse(&t, &crate::common::bash_call("make", &[]))
        .await
        .unwrap();
    db.raw("DROP TABLE tool_pins; DELETE FROM toolgate_migrations WHERE version = 2")
        .await;
    let reopened = toolgate_store::open(db.backend.clone()).await.unwrap();
    let checks = reopened
        .check_tool_pins(&t, &[listed("fs", "read", "v1")])
        .await
        .unwrap();
    assert_eq!(checks, vec![PinCheck::FirstSeen]);
    let request = reopened.request(&t, &filed.request.id).await.unwrap();
    assert_eq!(request, Some(filed.request));
}

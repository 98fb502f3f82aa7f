//! Approvals over `toolgate serve`: the Python SDK's Streamable HTTP client
//! makes a call behind `ask`, and a second `toolgate approvals` process on
//! the same store (or the SDK's elicitation callback, in-line) answers it;
//! every call leaves one audit record and the log verifies. Two clients on
//! one server each answer only their own question.

use std::process::Child;

use pretty_assertions::assert_eq;

use super::approvals::{observations, spawn_client, went_through_after_waiting};
use super::*;
use crate::common::Served;

const TOKEN: &str = "e2e-approvals-token-9b2d";

/// A project whose user config puts `demo_echo` behind a person's yes and
/// lets a call wait `wait` for it, served over HTTP with the demo tools.
fn served(wait: &str) -> (Project, Served) {
    let p = Project::new();
    std::fs::create_dir_all(p.base().join("home/.config/toolgate")).unwrap();
    std::fs::write(
        p.base().join("home/.config/toolgate/config.toml"),
        format!(
            "[[rules]]\npattern = \"demo_echo\"\naction = \"ask\"\n\n[approvals]\nwait = \"{wait}\"\n"
        ),
    )
    .unwrap();
    let mut cmd = p.toolgate(&["--demo", "serve", "--port", "0"]);
    cmd.env("TOOLGATE_TOKEN", TOKEN);
    let served = Served::start(cmd).unwrap();
    (p, served)
}

/// `clients/approvals_http.py SCENARIO` against `served`, started.
fn start(
    p: &Project,
    served: &Served,
    mode: Mode,
    scenario: &str,
    extra: Value,
) -> (Child, Lines, Lines) {
    let mut config = json!({"mode": mode.name(), "http": {"url": served.url, "token": TOKEN}});
    for (k, v) in extra.as_object().unwrap() {
        config[k] = v.clone();
    }
    spawn_client(p, "approvals_http.py", scenario, &config)
}

/// The scenario's observations once it ends (the server's stderr on failure).
fn finish(served: &Served, child: Child, stdout: Lines, stderr: Lines) -> Value {
    observations(child, stdout, stderr, &served.stderr())
}

/// `toolgate ARGS --json` in the project (a process of its own, on the
/// server's store): its JSON.
fn json_of(p: &Project, args: &[&str]) -> Value {
    let o = p.toolgate(args).arg("--json").output().unwrap();
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The id of the one pending request, once a call has filed it.
fn pending_request(p: &Project) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let listed = json_of(p, &["approvals", "list"]);
        if let Some(first) = listed.as_array().and_then(|a| a.first()) {
            assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
            return first["id"].as_str().unwrap().to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "no request was filed within 60 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `toolgate ARGS` succeeded; its stdout.
fn run_ok(p: &Project, args: &[&str]) -> String {
    let o = p.toolgate(args).output().unwrap();
    assert!(
        o.status.success(),
        "{args:?}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// One audit record: tool, decision, status, and the grant it spent or
/// else the request or refusal that answered it.
type Audited = (String, String, String, Option<String>);

/// The audit log once it holds `count` records (a record of a call whose
/// future was dropped is written from a task of its own, so it may land a
/// moment after the call's answer), and verified intact by `audit verify`.
fn audited(p: &Project, count: usize) -> Vec<Audited> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let records = loop {
        let records = json_of(p, &["audit"]);
        let len = records.as_array().unwrap().len();
        if len >= count || Instant::now() > deadline {
            break records;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let said = run_ok(p, &["audit", "verify"]);
    assert!(
        said.starts_with(&format!("audit log intact: {count} records")),
        "{said}\n{records}"
    );
    records
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["tool"].as_str().unwrap().to_owned(),
                r["decision"].as_str().unwrap().to_owned(),
                r["status"].as_str().unwrap().to_owned(),
                r["grant_id"]
                    .as_str()
                    .or(r["approval_id"].as_str())
                    .map(str::to_owned),
            )
        })
        .collect()
}

/// The records of the calls that were decided, and how many rounds ended
/// to put the question to the client instead. On 2026-07-28 the question
/// goes out as an input-required result that ends the call, and the
/// client's retry is a call of its own: that first round is on the log as
/// `cancelled` (its future is dropped once the question is out), written
/// from its own task, so at no fixed place among the others.
fn decided(records: Vec<Audited>) -> (Vec<Audited>, usize) {
    let (asked, decided): (Vec<_>, Vec<_>) = records
        .into_iter()
        .partition(|r| r.1 == "ask" && r.2 == "cancelled");
    (decided, asked.len())
}

fn record(
    tool: &str,
    decision: &str,
    status: &str,
    id: &str,
) -> (String, String, String, Option<String>) {
    (
        tool.to_owned(),
        decision.to_owned(),
        status.to_owned(),
        Some(id.to_owned()),
    )
}

#[test]
fn over_http_a_waiting_call_goes_through_once_another_process_approves_it() {
    let (p, served) = served("60s");
    let calls = json!({"calls": [["demo_echo", {"text": "approved words"}]]});
    let (child, stdout, stderr) = start(&p, &served, Mode::Legacy, "wait", calls);
    let id = pending_request(&p);
    let shown = json_of(&p, &["approvals", "show", &id]);
    assert_eq!(
        (
            &shown["request"]["state"],
            &shown["request"]["agent"],
            &shown["request"]["arguments"]
        ),
        (
            &json!("pending"),
            &json!("approval-tester"),
            &json!({"text": "approved words"})
        ),
        "{shown}"
    );
    let said = run_ok(&p, &["approvals", "approve", &id]);
    assert!(
        said.starts_with(&format!("approved {id}: grant grt_")),
        "{said}"
    );

    let observed = finish(&served, child, stdout, stderr);
    went_through_after_waiting(&observed, &id);
    let shown = json_of(&p, &["approvals", "show", &id]);
    assert_eq!(
        (
            &shown["request"]["state"],
            &shown["grant"]["uses"],
            &shown["grant"]["spent"]
        ),
        (&json!("approved"), &json!(1), &json!(1)),
        "{shown}"
    );
    let grant = shown["grant"]["id"].as_str().unwrap();
    assert_eq!(audited(&p, 1), [record("demo_echo", "ask", "ok", grant)]);
}

#[test]
fn over_http_a_denied_call_asked_again_is_refused_at_once_with_the_reason() {
    let (p, served) = served("60s");
    let call = json!(["demo_echo", {"text": "rm it all"}]);
    let calls = json!({"calls": [call.clone(), call]});
    let (child, stdout, stderr) = start(&p, &served, Mode::Legacy, "wait", calls);
    let id = pending_request(&p);
    run_ok(
        &p,
        &["approvals", "deny", &id, "--reason", "not on a Friday"],
    );
    let observed = finish(&served, child, stdout, stderr);
    for (i, result) in observed["results"].as_array().unwrap().iter().enumerate() {
        assert_eq!(result["result"]["is_error"], true, "{i}: {observed}");
        let text = result["result"]["text"].as_str().unwrap();
        assert!(text.contains("not on a Friday"), "{i}: {text}");
    }
    // The re-ask did not wait, and filed no second request.
    assert_eq!(observed["results"][1]["events"], json!([]), "{observed}");
    let all = json_of(&p, &["approvals", "list", "--all"]);
    assert_eq!(
        all.as_array().unwrap().len(),
        1,
        "one request for both calls: {all}"
    );
    assert_eq!(all[0]["state"], "denied", "{all}");
    // Both calls were refused by the one refusal the person's deny made.
    let records = audited(&p, 2);
    let refusal = records[0].3.clone().unwrap_or_default();
    assert!(refusal.starts_with("ref_"), "{records:?}");
    assert_eq!(
        records,
        [
            record("demo_echo", "ask", "refused", &refusal),
            record("demo_echo", "ask", "refused", &refusal)
        ]
    );
}

#[test]
fn over_http_elicitation_approves_and_denies_in_line_on_both_protocols() {
    for mode in [Mode::Legacy, Mode::Auto] {
        // A short wait: an answer that did not arrive would fail the calls.
        let (p, served) = served("3s");
        let approve = json!({"action": "accept", "content": {"decision": "approve-with-limits", "uses": 2, "ttl_minutes": 5}});
        let deny = json!({"action": "accept", "content": {"decision": "deny", "reason": "too risky today"}});
        let a = json!(["demo_echo", {"text": "alpha"}]);
        let b = json!(["demo_echo", {"text": "beta"}]);
        let config = json!({
            // alpha: asked, approved for 2 uses; alpha again: spends the
            // second use, no question; beta: asked, denied; beta again:
            // refused at once, no question.
            "calls": [a.clone(), a, b.clone(), b],
            "answers": [approve, deny],
        });
        let (child, stdout, stderr) = start(&p, &served, mode, "elicit", config);
        let observed = finish(&served, child, stdout, stderr);
        assert_eq!(observed["protocol_version"], mode.protocol(), "{observed}");
        let summary: Vec<(bool, String)> = observed["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["is_error"].as_bool().unwrap_or(true),
                    r["text"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        assert_eq!(
            summary[..2],
            [(false, "alpha".to_owned()), (false, "alpha".to_owned())],
            "{mode:?}: {observed}"
        );
        for denied in &summary[2..] {
            assert!(
                denied.0 && denied.1.contains("too risky today"),
                "{mode:?}: {observed}"
            );
        }
        let questions = observed["questions"].as_array().unwrap();
        assert_eq!(questions.len(), 2, "{mode:?}: {observed}");
        for (question, text) in questions.iter().zip(["alpha", "beta"]) {
            let message = question["message"].as_str().unwrap();
            assert!(
                message.contains("demo_echo") && message.contains(text),
                "{mode:?}: {message}"
            );
        }
        // The answers are the store's grant and refusal, as the CLI's would be.
        let all = json_of(&p, &["approvals", "list", "--all"]);
        let states: Vec<(&str, &str)> = all
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r["state"].as_str().unwrap(), r["agent"].as_str().unwrap()))
            .collect();
        assert_eq!(
            states,
            [
                ("denied", "approval-tester"),
                ("approved", "approval-tester")
            ],
            "{mode:?}: {all}"
        );
        let approved = all[1]["id"].as_str().unwrap();
        let shown = json_of(&p, &["approvals", "show", approved]);
        assert_eq!(
            (&shown["grant"]["uses"], &shown["grant"]["spent"]),
            (&json!(2), &json!(2)),
            "{mode:?}: {shown}"
        );
        let grant = shown["grant"]["id"].as_str().unwrap();
        // One record per call, and on 2026-07-28 one more per question.
        let asked_rounds = match mode {
            Mode::Legacy => 0,
            Mode::Auto => 2,
        };
        let (records, asked) = decided(audited(&p, 4 + asked_rounds));
        assert_eq!(asked, asked_rounds, "{mode:?}: {records:?}");
        let refusal = records[2].3.clone().unwrap_or_default();
        assert!(refusal.starts_with("ref_"), "{mode:?}: {records:?}");
        assert_eq!(
            records,
            [
                record("demo_echo", "ask", "ok", grant),
                record("demo_echo", "ask", "ok", grant),
                record("demo_echo", "ask", "refused", &refusal),
                record("demo_echo", "ask", "refused", &refusal),
            ],
            "{mode:?}"
        );
    }
}

/// Attack: two clients of one server, both asked at the same time; one
/// person's yes must decide only the request its own client was asked
/// about, never the other session's call.
#[test]
fn over_http_two_sessions_each_answer_only_their_own_question() {
    for mode in [Mode::Legacy, Mode::Auto] {
        let (p, served) = served("60s");
        let yes = json!({"action": "accept", "content": {"decision": "approve"}});
        let no =
            json!({"action": "accept", "content": {"decision": "deny", "reason": "not yours"}});
        let config = json!({"sessions": [
            {"name": "client-yes", "call": ["demo_echo", {"text": "from yes"}], "answer": yes},
            {"name": "client-no", "call": ["demo_echo", {"text": "from no"}], "answer": no},
        ]});
        let (child, stdout, stderr) = start(&p, &served, mode, "sessions", config);
        let observed = finish(&served, child, stdout, stderr);
        assert_eq!(observed["all_asked_together"], true, "{mode:?}: {observed}");
        let sessions = &observed["sessions"];
        for (name, own, other) in [
            ("client-yes", "from yes", "from no"),
            ("client-no", "from no", "from yes"),
        ] {
            let questions = sessions[name]["questions"].as_array().unwrap();
            assert_eq!(questions.len(), 1, "{mode:?} {name}: {observed}");
            let message = questions[0]["message"].as_str().unwrap();
            assert!(
                message.contains(own) && !message.contains(other),
                "{mode:?} {name} was asked about another call: {message}"
            );
        }
        let yes = &sessions["client-yes"]["result"];
        assert_eq!(
            (&yes["is_error"], &yes["text"]),
            (&json!(false), &json!("from yes")),
            "{mode:?}: {observed}"
        );
        let no = &sessions["client-no"]["result"];
        assert!(
            no["is_error"] == true && no["text"].as_str().unwrap().contains("not yours"),
            "{mode:?}: {observed}"
        );
        // Each request was decided by its own client's answer.
        let all = json_of(&p, &["approvals", "list", "--all"]);
        let mut answered: Vec<(&str, &str, &str)> = all
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["agent"].as_str().unwrap(),
                    r["arguments"]["text"].as_str().unwrap_or_default(),
                    r["state"].as_str().unwrap(),
                )
            })
            .collect();
        answered.sort();
        assert_eq!(
            answered,
            [
                ("client-no", "from no", "denied"),
                ("client-yes", "from yes", "approved")
            ],
            "{mode:?}: {all}"
        );
        let asked_rounds = match mode {
            Mode::Legacy => 0,
            Mode::Auto => 2,
        };
        let (mut records, asked) = decided(audited(&p, 2 + asked_rounds));
        assert_eq!(asked, asked_rounds, "{mode:?}: {records:?}");
        records.sort();
        let statuses: Vec<(&str, &str)> = records
            .iter()
            .map(|r| (r.1.as_str(), r.2.as_str()))
            .collect();
        assert_eq!(statuses, [("ask", "ok"), ("ask", "refused")], "{mode:?}");
    }
}

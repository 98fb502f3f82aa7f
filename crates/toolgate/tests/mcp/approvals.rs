//! A call behind `ask` waits for a person, through real clients: the
//! Python SDK makes the call, a second `toolgate approvals` process answers
//! it (or the SDK's elicitation callback does, in-line), and the same
//! grant or refusal holds for whoever asks next.

use std::process::{Child, Command, Stdio};

use pretty_assertions::assert_eq;

use super::*;

/// A project whose user config puts `demo_echo` behind a person's yes and
/// lets a call wait `wait` for it.
fn project(wait: &str) -> Project {
    let p = Project::new();
    std::fs::create_dir_all(p.base().join("home/.config/toolgate")).unwrap();
    std::fs::write(
        p.base().join("home/.config/toolgate/config.toml"),
        format!(
            "[[rules]]\npattern = \"demo_echo\"\naction = \"ask\"\n\n[approvals]\nwait = \"{wait}\"\n"
        ),
    )
    .unwrap();
    p
}

/// `clients/approvals.py SCENARIO` against `toolgate --demo mcp`, started.
fn start(p: &Project, mode: Mode, scenario: &str, extra: Value) -> (Child, Lines, Lines) {
    let mut config = p.stdio(mode, &["--demo"]);
    for (k, v) in extra.as_object().unwrap() {
        config[k] = v.clone();
    }
    spawn_client(p, "approvals.py", scenario, &config)
}

/// `clients/CLIENT SCENARIO` with `config` on its stdin, in the project's
/// home, started.
pub(super) fn spawn_client(
    p: &Project,
    client: &str,
    scenario: &str,
    config: &Value,
) -> (Child, Lines, Lines) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/mcp/clients")
        .join(client);
    let mut child = Command::new(python())
        .arg(script)
        .arg(scenario)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", p.base().join("home"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(config.to_string().as_bytes()).unwrap();
    drop(stdin);
    let stdout = Lines::of(child.stdout.take().unwrap());
    let stderr = Lines::of(child.stderr.take().unwrap());
    (child, stdout, stderr)
}

/// The scenario's observations once it ends.
fn finish(child: Child, stdout: Lines, stderr: Lines) -> Value {
    observations(child, stdout, stderr, "")
}

/// The last JSON line a scenario printed once it ends; `server` (the
/// server's own output, if any) is shown when it hung or crashed.
pub(super) fn observations(mut child: Child, stdout: Lines, stderr: Lines, server: &str) -> Value {
    let status = wait_until(&mut child, Duration::from_secs(120));
    let said = stdout.rest(Duration::from_secs(10));
    let errors = stderr.rest(Duration::from_secs(10)).join("\n");
    assert!(
        status.is_some(),
        "the scenario hung:\n{said:?}\n{errors}\nserver:\n{server}"
    );
    let observed: Value = said
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no JSON from the scenario:\n{said:?}\n{errors}\n{server}"));
    assert!(
        observed.get("crashed").is_none(),
        "the scenario crashed: {}\n{errors}\nserver:\n{server}",
        observed["crashed"]
    );
    observed
}

/// The scenario's first call went through with the approved text, and the
/// wait was reported while it lasted, naming the request `id`.
pub(super) fn went_through_after_waiting(observed: &Value, id: &str) {
    let first = &observed["results"][0];
    assert_eq!(
        (&first["result"]["is_error"], &first["result"]["text"]),
        (&json!(false), &json!("approved words")),
        "{observed}"
    );
    let waiting = format!("waiting for approval {id}");
    let events = first["events"].as_array().unwrap();
    assert!(
        events
            .iter()
            .any(|e| e["message"].as_str().unwrap_or_default().contains(&waiting)),
        "{observed}"
    );
}

/// `toolgate approvals ARGS --json` in the project: its JSON.
fn approvals(p: &Project, args: &[&str]) -> Value {
    let o = p
        .toolgate(&["approvals"])
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "approvals {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The id of the one pending request, once a call has filed it.
fn pending_request(p: &Project) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let listed = approvals(p, &["list"]);
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

#[test]
fn a_waiting_call_goes_through_once_another_process_approves_it() {
    let p = project("60s");
    let calls = json!({"calls": [["demo_echo", {"text": "approved words"}]]});
    let (child, stdout, stderr) = start(&p, Mode::Legacy, "wait", calls);
    let id = pending_request(&p);
    let shown = approvals(&p, &["show", &id]);
    assert_eq!(
        (
            &shown["request"]["state"],
            &shown["request"]["tool"],
            &shown["request"]["agent"],
            &shown["request"]["arguments"]
        ),
        (
            &json!("pending"),
            &json!("demo_echo"),
            // The agent is the client's name from initialize.
            &json!("approval-tester"),
            &json!({"text": "approved words"})
        ),
        "{shown}"
    );
    let o = p.toolgate(&["approvals", "approve", &id]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(
        said.starts_with(&format!("approved {id}: grant grt_")),
        "{said}"
    );

    let observed = finish(child, stdout, stderr);
    went_through_after_waiting(&observed, &id);
    // The one use is spent: the grant says so.
    let shown = approvals(&p, &["show", &id]);
    assert_eq!(shown["request"]["state"], "approved", "{shown}");
    assert_eq!(
        (&shown["grant"]["uses"], &shown["grant"]["spent"]),
        (&json!(1), &json!(1))
    );
}

#[test]
fn a_denied_call_asked_again_is_refused_with_the_reason_and_files_nothing() {
    let p = project("60s");
    let call = json!(["demo_echo", {"text": "rm it all"}]);
    let calls = json!({"calls": [call.clone(), call]});
    let (child, stdout, stderr) = start(&p, Mode::Legacy, "wait", calls);
    let id = pending_request(&p);
    let o = p
        .toolgate(&["approvals", "deny", &id, "--reason", "not on a Friday"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let observed = finish(child, stdout, stderr);
    for (i, result) in observed["results"].as_array().unwrap().iter().enumerate() {
        assert_eq!(result["result"]["is_error"], true, "{i}: {observed}");
        let text = result["result"]["text"].as_str().unwrap();
        assert!(text.contains("not on a Friday"), "{i}: {text}");
    }
    // The re-ask did not wait: it never reported waiting for anything.
    assert_eq!(observed["results"][1]["events"], json!([]), "{observed}");
    // ... and it filed no second request.
    let all = approvals(&p, &["list", "--all"]);
    assert_eq!(all.as_array().unwrap().len(), 1, "{all}");
    assert_eq!(all[0]["state"], "denied", "{all}");
}

#[test]
fn elicitation_approves_and_denies_in_line_on_both_protocols() {
    for mode in [Mode::Legacy, Mode::Auto] {
        let p = project("3s");
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
        let (child, stdout, stderr) = start(&p, mode, "elicit", config);
        let observed = finish(child, stdout, stderr);
        assert_eq!(observed["protocol_version"], mode.protocol(), "{observed}");
        let results = observed["results"].as_array().unwrap();
        let summary: Vec<(bool, String)> = results
            .iter()
            .map(|r| {
                (
                    r["is_error"].as_bool().unwrap_or(true),
                    r["text"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        assert_eq!(
            (summary[0].0, summary[0].1.as_str()),
            (false, "alpha"),
            "{mode:?}: {observed}"
        );
        assert_eq!(
            (summary[1].0, summary[1].1.as_str()),
            (false, "alpha"),
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
        let message = questions[0]["message"].as_str().unwrap();
        assert!(
            message.contains("demo_echo") && message.contains("alpha"),
            "{message}"
        );
        // The answers are the store's grants and refusals, as the CLI's would be.
        let all = approvals(&p, &["list", "--all"]);
        let states: Vec<&str> = all
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["state"].as_str().unwrap())
            .collect();
        assert_eq!(states, ["denied", "approved"], "{mode:?}: {all}");
        // The agent is the client's name on both protocols.
        assert_eq!(all[1]["agent"], "approval-tester", "{mode:?}: {all}");
        let id = all[1]["id"].as_str().unwrap();
        let shown = approvals(&p, &["show", id]);
        assert_eq!(
            (&shown["grant"]["uses"], &shown["grant"]["spent"]),
            (&json!(2), &json!(2)),
            "{shown}"
        );
    }
}

#[test]
fn a_call_its_client_gave_up_on_leaves_its_request_pending_never_granted() {
    let p = project("60s");
    let call = json!(["demo_echo", {"text": "later"}]);
    let config = json!({"calls": [call], "cancel_after": 3});
    let (child, stdout, stderr) = start(&p, Mode::Legacy, "cancel", config);
    let observed = finish(child, stdout, stderr);
    assert_eq!(observed["gave_up"], true, "{observed}");
    let id = pending_request(&p);
    let shown = approvals(&p, &["show", &id]);
    assert_eq!(
        (&shown["request"]["state"], &shown["grant"]),
        (&json!("pending"), &json!(null)),
        "{shown}"
    );
    // Approved later, the same call goes through at once for the next session.
    let o = p.toolgate(&["approvals", "approve", &id]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let config = json!({"calls": [["demo_echo", {"text": "later"}]]});
    let (child, stdout, stderr) = start(&p, Mode::Legacy, "wait", config);
    let observed = finish(child, stdout, stderr);
    assert_eq!(
        observed["results"][0]["result"]["text"], "later",
        "{observed}"
    );
}

//! What crosses the gateway during a call: progress from the server to the
//! client, a client's cancellation to the server, the call timeout.

use std::time::Duration;

use serde_json::{Value, json};

use crate::stdio_client::eventually;
use crate::{Setup, text_of};

fn probe(log: &std::path::Path, call_timeout: Option<u64>) -> Value {
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/gateway/probe_server.py");
    let mut server = json!({
        "name": "probe",
        "kind": "stdio",
        "command": "/usr/bin/python3",
        "args": [script],
        "env": {"PROBE_LOG": log},
    });
    if let Some(secs) = call_timeout {
        server["call_timeout"] = json!(secs);
    }
    server
}

fn log_has(log: &std::path::Path, needle: &str) -> bool {
    std::fs::read_to_string(log).is_ok_and(|t| t.contains(needle))
}

#[test]
fn a_servers_progress_reaches_the_client() {
    let s = Setup::new();
    let log = s.base().join("probe.log");
    let s = s.with_servers(json!([probe(&log, None)]));
    let mut client = s.mcp();
    let (response, notifications) = client.request_with_notifications(
        "tools/call",
        json!({"name": "mcp__probe__sleep", "arguments": {"seconds": 0.6},
               "_meta": {"progressToken": "p-1"}}),
        Duration::from_secs(60),
    );
    assert_eq!(text_of(&response), "slept", "{response}");
    let progress: Vec<&Value> = notifications
        .iter()
        .filter(|n| n["method"] == "notifications/progress")
        .collect();
    assert!(!progress.is_empty(), "no progress: {notifications:?}");
    assert!(
        progress
            .iter()
            .all(|n| n["params"]["progressToken"] == "p-1"),
        "{progress:?}"
    );
    assert!(
        progress.iter().any(|n| n["params"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("slept")),
        "{progress:?}"
    );
    assert!(client.close());
}

#[test]
fn a_cancelled_call_is_cancelled_at_the_server() {
    let s = Setup::new();
    let log = s.base().join("probe.log");
    let s = s.with_servers(json!([probe(&log, None)]));
    let mut client = s.mcp();
    let id = client.start_request(
        "tools/call",
        json!({"name": "mcp__probe__sleep", "arguments": {"seconds": 60},
               "_meta": {"progressToken": "p-2"}}),
    );
    // The call is running at the server once its progress arrives.
    let running = eventually(Duration::from_secs(30), || {
        client
            .next_message(Duration::from_millis(200))
            .is_some_and(|m| m["method"] == "notifications/progress")
    });
    assert!(running, "the call never started");
    client.notify(
        "notifications/cancelled",
        json!({"requestId": id, "reason": "the user pressed stop"}),
    );
    assert!(
        eventually(Duration::from_secs(20), || log_has(&log, "cancelled")),
        "the server never heard of the cancellation"
    );
    // The session goes on.
    let (text, _) = client.call("mcp__probe__pid", json!({}));
    assert!(text.parse::<u32>().is_ok(), "{text}");
    assert!(client.close());
}

#[test]
fn a_call_past_its_timeout_fails_and_is_cancelled_at_the_server() {
    let s = Setup::new();
    let log = s.base().join("probe.log");
    let s = s.with_servers(json!([probe(&log, Some(1))]));
    let o = s.run(&["call", "mcp__probe__sleep", r#"{"seconds": 30}"#]);
    assert_ne!(o.status.code(), Some(0));
    let said = crate::stderr(&o);
    assert!(
        said.contains("did not answer `sleep` within 1 s (call_timeout)"),
        "{said}"
    );
    assert!(
        eventually(Duration::from_secs(10), || log_has(&log, "cancelled")),
        "the server was not told"
    );
}

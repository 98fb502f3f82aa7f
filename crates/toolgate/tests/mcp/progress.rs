//! A long bash call as the SDK sees it: its output lines arrive as progress
//! while it runs, and cancelling it ends the command.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::http::{http_config, serve};
use crate::{Mode, Project, scenario, text, unique};

const TOKEN: &str = "progress-token";

/// `toolgate mcp` as the SDK starts it, or `toolgate serve` over HTTP.
#[derive(Debug, Clone, Copy)]
enum Transport {
    Stdio,
    Http,
}

/// Runs scenario `name`, with `fields` added to its config, against `p`'s toolgate
/// over `transport`.
fn run(p: &Project, transport: Transport, mode: Mode, name: &str, fields: Value) -> Value {
    let served;
    let mut config = match transport {
        Transport::Stdio => p.stdio(mode, &[]),
        Transport::Http => {
            served = serve(p, &[("TOOLGATE_TOKEN", TOKEN)]);
            http_config(&served, mode, Some(TOKEN))
        }
    };
    for (key, value) in fields.as_object().unwrap() {
        config[key] = value.clone();
    }
    let observed = scenario(p.base(), name, &config);
    assert_eq!(observed["protocol_version"], mode.protocol());
    observed
}

fn output_lines_arrive_as_progress(transport: Transport, mode: Mode) {
    let p = Project::new();
    let command = "for i in 1 2 3 4; do echo step-$i; sleep 0.3; done";
    let observed = run(&p, transport, mode, "progress", json!({"command": command}));

    assert_eq!(observed["result"]["is_error"], false, "{observed}");
    assert!(
        text(&observed["result"]).starts_with("step-1\nstep-2\nstep-3\nstep-4\n"),
        "{observed}"
    );
    // One notification per batch of lines, its message the batch's last
    // line. How lines batch depends on scheduling, so the test asks only
    // for what holds in every batching: some progress, every message one
    // of the lines, in order, with a growing count.
    let events = observed["events"].as_array().unwrap();
    assert!(!events.is_empty(), "no progress: {observed}");
    let steps: Vec<u64> = events
        .iter()
        .map(|e| {
            let message = e["message"].as_str().unwrap_or_default();
            let step = message.strip_prefix("step-").and_then(|n| n.parse().ok());
            step.unwrap_or_else(|| panic!("not an output line: {e}"))
        })
        .collect();
    assert!(steps.windows(2).all(|w| w[0] < w[1]), "{steps:?}");
    let counts: Vec<f64> = events
        .iter()
        .map(|e| e["progress"].as_f64().unwrap())
        .collect();
    assert!(counts.windows(2).all(|w| w[0] < w[1]), "{counts:?}");
    // Lines still queued when the command ends go out before the result.
    assert_eq!(steps.last(), Some(&4), "{steps:?}");
    assert_eq!(counts.last(), Some(&4.0), "{counts:?}");
    assert_eq!(observed["after_result"], json!([]));
}

#[test]
fn output_lines_arrive_as_progress_legacy() {
    output_lines_arrive_as_progress(Transport::Stdio, Mode::Legacy);
}

#[test]
fn output_lines_arrive_as_progress_auto() {
    output_lines_arrive_as_progress(Transport::Stdio, Mode::Auto);
}

#[test]
fn output_lines_arrive_as_progress_over_http_legacy() {
    output_lines_arrive_as_progress(Transport::Http, Mode::Legacy);
}

#[test]
fn output_lines_arrive_as_progress_over_http_auto() {
    output_lines_arrive_as_progress(Transport::Http, Mode::Auto);
}

/// Attack: a model (or a confused client) starts a command, the user
/// cancels the call, and the command keeps running and finishes its work
/// anyway. The cancelled command must be gone, and its last step (touching
/// a marker) must never happen. Over stdio the SDK sends
/// notifications/cancelled; over HTTP on 2026-07-28 it closes the request's
/// stream instead.
fn a_cancelled_call_stops_its_command(transport: Transport, mode: Mode) {
    let p = Project::new();
    // Sleeps ~3 s; unique, so /proc shows this test's sleep and no other.
    let needle = unique("3.0");
    let marker = p.root().join("marker");
    let fields = json!({
        "command": format!("echo started; sleep {needle}; touch marker"),
        "needle": needle,
        "marker": marker,
        // Watched this long after the cancel: past the sleep's own end.
        "watch": 5,
    });
    let observed = run(&p, transport, mode, "cancel", fields);

    // The cancel reached a command that was running (not a queued call).
    let running = observed["running_at_cancel"].as_array().unwrap();
    assert!(
        running.contains(&json!(format!("sleep {needle}"))),
        "{observed}"
    );
    assert_eq!(
        observed["result"],
        json!(null),
        "the call was not cancelled"
    );
    assert_eq!(
        json!({"survivors": observed["survivors"], "marker_exists": observed["marker_exists"]}),
        json!({"survivors": [], "marker_exists": false})
    );
    assert!(!marker.exists());
    // The session is fine afterwards.
    assert_eq!(
        observed["call_after_cancel"]["is_error"], false,
        "{observed}"
    );
}

#[test]
fn a_cancelled_call_stops_its_command_legacy() {
    a_cancelled_call_stops_its_command(Transport::Stdio, Mode::Legacy);
}

#[test]
fn a_cancelled_call_stops_its_command_auto() {
    a_cancelled_call_stops_its_command(Transport::Stdio, Mode::Auto);
}

#[test]
fn a_cancelled_call_stops_its_command_over_http_legacy() {
    a_cancelled_call_stops_its_command(Transport::Http, Mode::Legacy);
}

#[test]
fn a_cancelled_call_stops_its_command_over_http_auto() {
    a_cancelled_call_stops_its_command(Transport::Http, Mode::Auto);
}

//! Attack: the server goes away (SIGTERM to `toolgate serve`, or the client
//! closing `toolgate mcp`'s stdin) while sandboxed commands run, and they
//! live on unsupervised: a background process from process_start and a
//! bash call in flight. After the server exits, none of them may remain.

use std::process::Command;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::http::{http_config, serve};
use crate::raw::RawStdio;
use crate::{Lines, Mode, Project, processes_with, start_scenario, unique, wait_until};

/// Waits (bounded, against hangs) until `sleep ARG` runs; false if never.
fn sleep_runs(arg: &str) -> bool {
    let wanted = format!("sleep {arg}");
    for _ in 0..600 {
        if processes_with(arg).contains(&wanted) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

fn serve_stops_on_sigterm_and_kills_every_sandboxed_process(mode: Mode) {
    let p = Project::new();
    let mut served = serve(&p, &[("TOOLGATE_TOKEN", "shutdown-token")]);
    let background = unique("1000.123");
    let in_call = unique("1000.456");
    let mut config = http_config(&served, mode, Some("shutdown-token"));
    config["background"] = json!(format!("sleep {background}"));
    config["command"] = json!(format!("echo running; sleep {in_call}"));
    let mut client = start_scenario(p.base(), "in_flight", &config);
    let said = Lines::of(client.stdout.take().unwrap());
    let client_errors = Lines::of(client.stderr.take().unwrap());
    let next = || -> Value {
        let Some(line) = said.next(Duration::from_secs(120)) else {
            panic!(
                "the client stopped early:\n{}",
                client_errors.rest(Duration::from_secs(5)).join("\n")
            );
        };
        serde_json::from_str(&line).unwrap_or_else(|_| panic!("not JSON: {line}"))
    };
    let started = next();
    assert_eq!(started["process_start"]["is_error"], false, "{started}");
    assert_eq!(next(), json!({"bash_running": true}));
    // Both commands run before the signal (else the test proves nothing).
    assert!(sleep_runs(&background) && sleep_runs(&in_call));

    let pid = served.child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = wait_until(&mut served.child, Duration::from_secs(60));
    let stderr = served.stderr();
    assert!(
        status.is_some_and(|s| s.success()),
        "toolgate serve did not exit cleanly after SIGTERM ({status:?}):\n{stderr}"
    );
    assert_eq!(
        (processes_with(&background), processes_with(&in_call)),
        (vec![], vec![]),
        "sandboxed processes outlived toolgate serve:\n{stderr}"
    );
    // The client sees its connection end; it must not hang either.
    wait_until(&mut client, Duration::from_secs(60));
}

#[test]
fn serve_stops_on_sigterm_and_kills_every_sandboxed_process_legacy() {
    serve_stops_on_sigterm_and_kills_every_sandboxed_process(Mode::Legacy);
}

#[test]
fn serve_stops_on_sigterm_and_kills_every_sandboxed_process_auto() {
    serve_stops_on_sigterm_and_kills_every_sandboxed_process(Mode::Auto);
}

#[test]
fn mcp_stops_when_stdin_closes_and_kills_every_sandboxed_process() {
    let p = Project::new();
    let mut raw = RawStdio::start(p.toolgate(&["mcp"]));
    let background = unique("1000.789");
    let in_call = unique("1000.987");
    let started = raw.request(
        "tools/call",
        json!({"name": "process_start", "arguments": {"command": format!("sleep {background}")}}),
    );
    assert_eq!(started["result"]["isError"], false, "{started}");
    raw.send(
        "tools/call",
        json!({"name": "bash",
               "arguments": {"command": format!("echo running; sleep {in_call}")},
               "_meta": {"progressToken": "in-flight"}}),
    );
    // The call runs once its first line comes back as progress.
    loop {
        let line = raw.next_line();
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["method"] == "notifications/progress" {
            break;
        }
    }
    assert!(sleep_runs(&background) && sleep_runs(&in_call));

    let status = raw.close();
    let stderr = raw.stderr();
    assert!(
        status.is_some_and(|s| s.success()),
        "toolgate mcp did not exit cleanly when stdin closed ({status:?}):\n{stderr}"
    );
    assert_eq!(
        (processes_with(&background), processes_with(&in_call)),
        (vec![], vec![]),
        "sandboxed processes outlived toolgate mcp:\n{stderr}"
    );
}

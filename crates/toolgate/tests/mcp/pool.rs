//! The server's pool of sandboxes through the real `toolgate mcp`: the
//! first bash call runs in the sandbox started with the server, a later one
//! in the sandbox the server started while the agent read the last answer,
//! and a protected name made in between makes that one stale: the command
//! gets a fresh sandbox that masks it.
//!
//! Which sandbox ran a command is told by the start of its pid 1 against a
//! moment taken once the pooled sandbox exists (clock ticks since boot):
//! an order of events, not a speed.

use std::path::Path;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::json;

use crate::raw::RawStdio;
use crate::{Project, processes_with, text};

/// Clock ticks since boot now, as /proc counts a process's start.
fn ticks_now() -> u64 {
    let o = std::process::Command::new("sh")
        .args(["-c", "cut -d' ' -f22 /proc/self/stat"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).trim().parse().unwrap()
}

/// Waits for the pooled sandbox of `root`, then returns a moment after it
/// started.
fn after_the_pool_started(root: &Path) -> u64 {
    let root = root.display().to_string();
    for _ in 0..600 {
        let pooled = processes_with("--pooled");
        if pooled.iter().any(|line| line.contains(&root)) {
            std::thread::sleep(Duration::from_millis(30));
            let moment = ticks_now();
            std::thread::sleep(Duration::from_millis(30));
            return moment;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("no pooled sandbox for {root}");
}

/// Runs `command` with bash through the server; returns its output after
/// the start of the sandbox's pid 1, and that start.
fn bash(raw: &mut RawStdio, command: &str) -> (String, u64) {
    let script = format!("cut -d' ' -f22 /proc/1/stat; {command}");
    let reply = raw.request(
        "tools/call",
        json!({"name": "bash", "arguments": {"command": script}}),
    );
    let out = text(&reply["result"]);
    let (first, rest) = out.split_once('\n').unwrap();
    (rest.to_owned(), first.trim().parse().unwrap())
}

#[test]
fn a_command_after_a_pause_runs_in_a_sandbox_started_before_it_and_never_a_stale_one() {
    let p = Project::new();
    let root = p.root().to_owned();
    let mut raw = RawStdio::start(p.toolgate(&["mcp"]));
    // One is started with the server, for the first command.
    let moment = after_the_pool_started(&root);
    let (out, started) = bash(&mut raw, "echo first");
    assert!(out.starts_with("first\n"), "{out}");
    assert!(
        started < moment,
        "not the pooled sandbox: {started} >= {moment}"
    );

    // And the next after each command.
    let moment = after_the_pool_started(&root);
    let (out, started) = bash(&mut raw, "echo second");
    assert!(out.starts_with("second\n"), "{out}");
    assert!(
        started < moment,
        "not the pooled sandbox: {started} >= {moment}"
    );

    // Attack: a protected directory appears while the next sandbox waits.
    let moment = after_the_pool_started(&root);
    std::fs::create_dir(root.join(".vscode")).unwrap();
    std::fs::write(root.join(".vscode/tasks.json"), "{}").unwrap();
    let (out, started) = bash(&mut raw, "echo evil > .vscode/tasks.json");
    assert!(started >= moment, "a stale pooled sandbox ran it: {out}");
    assert!(out.contains("Read-only file system"), "{out}");
    assert_eq!(
        std::fs::read_to_string(root.join(".vscode/tasks.json")).unwrap(),
        "{}"
    );
    assert!(raw.close().is_some_and(|s| s.success()), "{}", raw.stderr());
    // The server's end takes its pooled sandbox along.
    let root = root.display().to_string();
    let left = || {
        processes_with("--pooled")
            .into_iter()
            .filter(|l| l.contains(&root))
            .collect::<Vec<_>>()
    };
    for _ in 0..200 {
        if left().is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(left(), Vec::<String>::new());
}

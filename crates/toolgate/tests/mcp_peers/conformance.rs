//! The official MCP conformance suite (`conformance server`) against
//! `toolgate serve --no-token`: the scenarios that need no fixture tools
//! (the others call `test_*` tools toolgate does not have).
//!
//! `--no-token` because the suite cannot send headers, and its
//! `dns-rebinding-protection` scenario expects a loopback request without
//! credentials to succeed.

use std::path::Path;

use serde_json::Value;

use crate::{Peers, Project, run, text};

/// Runs one scenario and fails unless it exits 0 and every check in its
/// `checks.json` is SUCCESS, listing the checks that are not.
fn scenario(name: &str) {
    let p = Project::new();
    let served = p.serve(None);
    let out = p.base().join("conformance");
    let mut cmd = Peers::from_env().command("conformance", &p.home());
    cmd.args(["server", "--url", &served.url, "--scenario", name, "-o"])
        .arg(&out)
        .current_dir(p.project());
    let o = run(cmd);
    let said = format!(
        "stdout:\n{}\nstderr:\n{}\nserver:\n{}",
        text(&o.stdout),
        text(&o.stderr),
        served.stderr()
    );

    let checks = checks(&out, name).unwrap_or_else(|why| panic!("{name}: {why}\n{said}"));
    assert!(!checks.is_empty(), "{name}: checks.json lists no checks");
    // INFO entries are the suite's log of what it sent and received, not
    // verdicts. No WARNING is expected from these scenarios.
    let failed: Vec<String> = checks
        .iter()
        .filter(|c| !matches!(c["status"].as_str(), Some("SUCCESS" | "INFO")))
        .map(|c| {
            format!(
                "{} ({}): {}",
                c["id"].as_str().unwrap_or("?"),
                c["status"].as_str().unwrap_or("?"),
                c["errorMessage"].as_str().unwrap_or("(no message)")
            )
        })
        .collect();
    assert!(
        failed.is_empty(),
        "{name}: checks not passed:\n  {}\n{said}",
        failed.join("\n  ")
    );
    assert_eq!(o.status.code(), Some(0), "{name}\n{said}");
    drop(served);
}

/// The checks of the one run in `out` (`server-<name>-<timestamp>/checks.json`).
fn checks(out: &Path, name: &str) -> Result<Vec<Value>, String> {
    let prefix = format!("server-{name}-");
    let runs: Vec<_> = std::fs::read_dir(out)
        .map_err(|e| format!("no results directory {}: {e}", out.display()))?
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name().to_string_lossy().starts_with(&prefix))
        .collect();
    let [found] = runs.as_slice() else {
        return Err(format!(
            "expected one {prefix}* directory in {}, found {}",
            out.display(),
            runs.len()
        ));
    };
    let path = found.path().join("checks.json");
    let body = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_json::from_str(&body).map_err(|e| format!("{} is not a JSON array: {e}", path.display()))
}

#[test]
fn server_initialize() {
    scenario("server-initialize");
}

#[test]
fn ping() {
    scenario("ping");
}

#[test]
fn tools_list() {
    scenario("tools-list");
}

#[test]
fn logging_set_level() {
    scenario("logging-set-level");
}

#[test]
fn dns_rebinding_protection() {
    scenario("dns-rebinding-protection");
}

#[test]
fn server_sse_multiple_streams() {
    scenario("server-sse-multiple-streams");
}

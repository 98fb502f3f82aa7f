//! The official MCP conformance suite's client scenarios, with the gateway
//! as the client (`tests/gateway/conformance_client.py` turns the suite's
//! server URL into toolgate's one external server): the handshake, a tool
//! call, SSE stream resumption, and OAuth client credentials with
//! `client_secret_basic` and the token endpoint discovered from metadata.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::{Setup, node, peer_path, stderr, stdout};

fn scenario(name: &str) {
    let s = Setup::new();
    // The suite splits its --command on spaces: the script goes where the
    // path has none, wherever the checkout lives.
    let scripts = tempfile::tempdir().unwrap();
    let script = scripts.path().join("client.py");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/gateway/conformance_client.py"),
        &script,
    )
    .unwrap();
    let out = s.base().join("results");
    let suite = peer_path("TOOLGATE_TEST_NODE_MODULES")
        .join("@modelcontextprotocol/conformance/dist/index.js");
    let toolgate = s.command(&[]);
    let mut cmd = Command::new(node());
    cmd.arg(suite)
        .args(["client", "--command"])
        .arg(format!("/usr/bin/python3 {}", script.display()))
        .args(["--scenario", name, "-o"])
        .arg(&out)
        .current_dir(&s.root)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("TOOLGATE_BIN", toolgate.get_program());
    for (key, value) in toolgate.get_envs() {
        if let Some(value) = value {
            cmd.env(key, value);
        }
    }
    let o = cmd.output().unwrap();
    let said = format!("stdout:\n{}\nstderr:\n{}", stdout(&o), stderr(&o));
    let checks = checks(&out).unwrap_or_else(|why| panic!("{name}: {why}\n{said}"));
    let failed: Vec<String> = checks
        .iter()
        .filter(|c| !matches!(c["status"].as_str(), Some("SUCCESS" | "INFO")))
        .map(|c| format!("{} ({}): {}", c["id"], c["status"], c["errorMessage"]))
        .collect();
    assert!(
        checks.iter().any(|c| c["status"] == "SUCCESS"),
        "{name}: no check passed\n{said}"
    );
    assert!(failed.is_empty(), "{name}: {failed:#?}\n{said}");
    assert_eq!(o.status.code(), Some(0), "{name}\n{said}");
}

/// The checks of the one run under `out` (a scenario named `auth/x`
/// writes into `out/auth/x-<time>`).
fn checks(out: &Path) -> Result<Vec<Value>, String> {
    let mut found = Vec::new();
    let mut dirs = vec![out.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for entry in entries.map_while(Result::ok) {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.file_name().is_some_and(|n| n == "checks.json") {
                found.push(path);
            }
        }
    }
    let [file] = found.as_slice() else {
        return Err(format!(
            "expected one checks.json under {}, found {found:?}",
            out.display()
        ));
    };
    let text = std::fs::read_to_string(file).map_err(|e| e.to_string())?;
    serde_json::from_str(&text).map_err(|e| e.to_string())
}

#[test]
fn conformance_initialize() {
    scenario("initialize");
}

#[test]
fn conformance_tools_call() {
    scenario("tools_call");
}

#[test]
fn conformance_sse_retry() {
    scenario("sse-retry");
}

#[test]
fn conformance_oauth_client_credentials_basic() {
    scenario("auth/client-credentials-basic");
}

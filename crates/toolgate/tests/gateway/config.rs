//! Configuration: files and `TOOLGATE_MCP_SERVERS`, typos, the 0600 rule
//! for secrets, untrusted project files, and secrets kept out of every
//! output.

use std::os::unix::fs::PermissionsExt;

use serde_json::json;

use crate::{Setup, everything, everything_http, stderr, stdout};

#[test]
fn servers_come_from_the_user_file_and_the_environment_wins() {
    let s = Setup::new();
    let server = everything("fromfile", "x");
    s.user_config(&format!(
        "[[mcp_servers]]\nname = \"fromfile\"\nkind = \"stdio\"\ncommand = {}\nargs = {}\n",
        server["command"], server["args"]
    ));
    let listed = s.json(&["mcp-servers", "list", "--json"]);
    assert_eq!(listed[0]["name"], "fromfile", "{listed:#}");
    assert_eq!(listed[0]["state"], "up", "{listed:#}");
    let s = s.with_servers(json!([everything("fromenv", "x")]));
    let listed = s.json(&["mcp-servers", "list", "--json"]);
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["fromenv"]);
}

#[test]
fn bad_server_entries_are_refused_with_what_is_wrong() {
    let cases = [
        (
            json!([{"name": "bad name", "kind": "stdio", "command": "x"}]),
            "MCP server name `bad name` is invalid",
        ),
        (
            json!([{"name": "a", "kind": "stdio", "comand": "x"}]),
            "unknown field `comand`",
        ),
        (
            json!([{"name": "a", "kind": "stdio", "command": "x", "url": "http://h/mcp"}]),
            "`url` belongs to kind = \"http\" servers",
        ),
        (
            json!([{"name": "a", "kind": "http", "url": "http://h/mcp", "token": "t0ken-one",
                    "auth": {"kind": "oauth-client-credentials", "token_url": "http://h/t",
                             "client_id": "c", "client_secret": "s3cret-two"}}]),
            "`token` and `auth` are both set",
        ),
        (
            json!([{"name": "a", "kind": "stdio", "command": "x"},
                   {"name": "a", "kind": "stdio", "command": "y"}]),
            "MCP server `a` is configured twice",
        ),
        (
            json!([{"name": "a", "kind": "websocket", "url": "ws://h"}]),
            "unknown variant `websocket`",
        ),
    ];
    for (servers, expected) in cases {
        let s = Setup::new().with_servers(servers.clone());
        let o = s.run(&["mcp-servers", "list"]);
        assert_eq!(o.status.code(), Some(2), "{servers}: {}", stdout(&o));
        assert!(stderr(&o).contains(expected), "{servers}: {}", stderr(&o));
        for secret in ["t0ken-one", "s3cret-two"] {
            assert!(!stderr(&o).contains(secret), "{}", stderr(&o));
        }
    }
}

#[test]
fn a_config_file_holding_a_secret_must_be_private() {
    let s = Setup::new();
    let path = s.user_config(
        "[[mcp_servers]]\nname = \"remote\"\nkind = \"http\"\nurl = \"http://127.0.0.1:9/mcp\"\ntoken = \"sup3r-secret-token\"\n",
    );
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = s.run(&["mcp-servers", "list"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains(&format!("run `chmod 600 {}`", path.display())),
        "{}",
        stderr(&o)
    );
    assert!(!stderr(&o).contains("sup3r-secret-token"));
    // Also for toolgate call and mcp: the file is refused, not read.
    let o = s.run(&["call", "ls", r#"{"path": "."}"#]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let o = s.run(&["mcp-servers", "list", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn an_untrusted_project_file_cannot_add_a_server_until_trusted() {
    let s = Setup::new();
    let server = everything("project", "x");
    let file = s.root.join("toolgate.toml");
    std::fs::write(
        &file,
        format!(
            "[[mcp_servers]]\nname = \"project\"\nkind = \"stdio\"\ncommand = {}\nargs = {}\n",
            server["command"], server["args"]
        ),
    )
    .unwrap();
    let o = s.run(&["mcp-servers", "list", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).trim(), "[]");
    assert!(
        stderr(&o).contains("ignored: the MCP server `project`"),
        "{}",
        stderr(&o)
    );
    crate::common::trust(s.base(), &file);
    let listed = s.json(&["mcp-servers", "list", "--json"]);
    assert_eq!(listed[0]["name"], "project", "{listed:#}");
}

#[test]
fn secrets_never_appear_in_listings_results_errors_or_the_audit_log() {
    let (_peer, port) = everything_http("streamableHttp");
    let secrets = [
        "env-s3cret-value",
        "bearer-s3cret-value",
        "header-s3cret-value",
    ];
    let mut local = everything("local", "x");
    local["env"] = json!({"API_KEY": secrets[0]});
    let s = Setup::new().with_servers(json!([
        local,
        {"name": "remote", "kind": "http", "url": format!("http://127.0.0.1:{port}/mcp"),
         "token": secrets[1], "headers": {"X-Api-Key": secrets[2]}},
        {"name": "down", "kind": "http", "url": "http://127.0.0.1:9/mcp", "token": secrets[1]},
    ]));
    let mut seen = String::new();
    for args in [
        vec!["mcp-servers", "list", "--json"],
        vec!["mcp-servers", "list"],
        vec!["mcp-servers", "test", "remote", "--json"],
        vec!["tools", "--json"],
        vec!["tools", "mcp__remote__echo", "--json"],
        vec!["doctor", "--json"],
        vec![
            "call",
            "mcp__remote__echo",
            r#"{"message": "hi"}"#,
            "--json",
        ],
        vec!["call", "mcp__local__echo", r#"{"message": "hi"}"#, "--json"],
        vec!["call", "mcp__down__echo", r#"{"message": "hi"}"#],
        vec!["audit", "--json"],
    ] {
        let o = s.run(&args);
        seen.push_str(&stdout(&o));
        seen.push_str(&stderr(&o));
    }
    assert!(seen.contains("Echo: hi"), "the calls ran: {seen}");
    for secret in secrets {
        assert!(!seen.contains(secret), "{secret} leaked: {seen}");
    }
    // Nor in any file toolgate wrote (state, data, the SQLite audit log).
    let mut files = vec![s.base().join("home")];
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else if let Ok(bytes) = std::fs::read(&path) {
            let text = String::from_utf8_lossy(&bytes);
            for secret in secrets {
                assert!(
                    !text.contains(secret) || path.ends_with("config.toml"),
                    "{secret} in {}",
                    path.display()
                );
            }
        }
    }
}

//! stdio servers: their tools in `call`, `tools` and `mcp`; one process per
//! server, none left behind; a dead server restarted.

use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::stdio_client::{eventually, processes_with, unique};
use crate::{Setup, everything, reference_server, stderr, stdout, text_of};

#[test]
fn an_external_tool_runs_through_toolgate_call_and_is_audited() {
    let s = Setup::new().with_servers(json!([everything("everything", "x")]));
    let result = s.json(&[
        "call",
        "mcp__everything__get-sum",
        r#"{"a": 2, "b": 40}"#,
        "--json",
    ]);
    assert_eq!(
        (
            &result["content"][0]["text"],
            &result["decision"]["decision"]
        ),
        (&json!("The sum of 2 and 40 is 42."), &json!("allow"))
    );
    let audit = s.json(&["audit", "--json"]);
    let rows = audit.as_array().unwrap();
    assert!(
        rows.iter().any(|r| r["tool"] == "mcp__everything__get-sum"),
        "{audit:#}"
    );
}

#[test]
fn external_tools_are_listed_next_to_the_builtins_with_untrusted_classes() {
    let s = Setup::new().with_servers(json!([everything("everything", "x")]));
    let listed = s.json(&["tools", "--json"]);
    let rows = listed.as_array().unwrap();
    let row = |name: &str| rows.iter().find(|r| r["name"] == name).cloned();
    assert!(row("read").is_some(), "{listed:#}");
    let echo = row("mcp__everything__echo").expect("echo is listed");
    assert_eq!(
        (&echo["effect_class"], &echo["idempotency"], &echo["group"]),
        (
            &json!("mutate-irreversible"),
            &json!("at-most-once"),
            &json!("group:mcp")
        )
    );
    let o = s.run(&["tools"]);
    assert!(
        stdout(&o).contains("MCP server `everything` runs UNCONFINED"),
        "{}",
        stdout(&o)
    );
    let doctor = s.run(&["doctor"]);
    assert!(
        stdout(&doctor).contains("mcp server everything")
            && stdout(&doctor).contains("UNCONFINED: runs with toolgate's privileges"),
        "{}",
        stdout(&doctor)
    );
    // The server calls get-sum read-only; that is shown, and not believed.
    let o = s.run(&["tools", "mcp__everything__get-sum"]);
    let shown = stdout(&o);
    assert!(
        shown.contains("class        mutate-irreversible")
            && shown.contains("\"readOnlyHint\":true")
            && shown.contains("(not trusted: the class above decides)"),
        "{shown}"
    );
    let spec = s.json(&["tools", "mcp__everything__get-sum", "--json"]);
    assert_eq!(
        spec["declared"]["annotations"]["readOnlyHint"],
        json!(true),
        "{spec:#}"
    );
}

#[test]
fn toolgate_mcp_serves_the_union_and_forwards_structured_content() {
    let s = Setup::new().with_servers(json!([everything("everything", "x")]));
    let mut client = s.mcp();
    let listed = client.request("tools/list", json!({}));
    let tools = listed["result"]["tools"].as_array().unwrap();
    let tool = |name: &str| {
        tools
            .iter()
            .find(|t| t["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} is not listed: {listed}"))
    };
    tool("read");
    let echo = tool("mcp__everything__echo");
    // Whatever the server declares, the hints follow toolgate's class.
    assert_eq!(
        (
            &echo["annotations"]["readOnlyHint"],
            &echo["annotations"]["destructiveHint"],
            &echo["annotations"]["openWorldHint"]
        ),
        (&json!(false), &json!(true), &json!(true))
    );
    assert!(
        echo["inputSchema"]["properties"]["message"].is_object(),
        "the server's schema passes through: {echo}"
    );
    let structured = tool("mcp__everything__get-structured-content");
    assert!(structured["outputSchema"].is_object(), "{structured}");

    let (text, _) = client.call("mcp__everything__echo", json!({"message": "hi there"}));
    assert_eq!(text, "Echo: hi there");
    let (_, facts) = client.call(
        "mcp__everything__get-structured-content",
        json!({"location": "Chicago"}),
    );
    assert!(facts["temperature"].is_number(), "{facts}");
    // Schema errors are the server's to report: the arguments reach it as sent.
    let bad = client.request(
        "tools/call",
        json!({"name": "mcp__everything__get-sum", "arguments": {"a": "two"}}),
    );
    assert_eq!(bad["result"]["isError"], json!(true), "{bad}");
    assert!(client.close());
}

#[test]
fn one_process_per_server_and_none_left_once_the_gateway_exits() {
    let marker = unique("gw-orphan-");
    let s = Setup::new().with_servers(json!([everything("everything", &marker)]));
    let mut client = s.mcp();
    let (text, _) = client.call("mcp__everything__echo", json!({"message": "a"}));
    assert_eq!(text, "Echo: a");
    assert_eq!(
        processes_with(&marker).len(),
        1,
        "{:?}",
        processes_with(&marker)
    );
    assert!(client.close(), "toolgate mcp did not exit cleanly");
    assert!(
        eventually(Duration::from_secs(10), || processes_with(&marker)
            .is_empty()),
        "the server outlived the gateway: {:?}",
        processes_with(&marker)
    );

    // Killed outright, the gateway still takes its server with it.
    let mut client = s.mcp();
    client.call("mcp__everything__echo", json!({"message": "b"}));
    assert_eq!(processes_with(&marker).len(), 1);
    client.child.kill().unwrap();
    client.child.wait().unwrap();
    assert!(
        eventually(Duration::from_secs(10), || processes_with(&marker)
            .is_empty()),
        "the server outlived a killed gateway: {:?}",
        processes_with(&marker)
    );
}

#[test]
fn a_server_killed_mid_session_is_restarted_and_calls_meanwhile_fail_clearly() {
    let marker = unique("gw-restart-");
    let s = Setup::new().with_servers(json!([everything("everything", &marker)]));
    let mut client = s.mcp();
    client.call("mcp__everything__echo", json!({"message": "before"}));
    let pid = |found: &[String]| -> i32 {
        assert_eq!(found.len(), 1, "{found:?}");
        found[0].split(':').next().unwrap().parse().unwrap()
    };
    let first = pid(&processes_with(&marker));
    std::process::Command::new("kill")
        .args(["-9", &first.to_string()])
        .status()
        .unwrap();
    let restarted = eventually(Duration::from_secs(30), || {
        let response = client.request(
            "tools/call",
            json!({"name": "mcp__everything__echo", "arguments": {"message": "after"}}),
        );
        if response["result"]["isError"] == json!(true) {
            let text = text_of(&response);
            assert!(
                text.contains("MCP server `everything`")
                    && (text.contains("down") || text.contains("went away")),
                "{response}"
            );
            false
        } else {
            text_of(&response) == "Echo: after"
        }
    });
    assert!(restarted, "the server was not restarted");
    let second = pid(&processes_with(&marker));
    assert_ne!(first, second);
    assert!(client.close());
}

#[test]
fn a_server_that_fails_to_start_is_skipped_and_named() {
    let s = Setup::new().with_servers(json!([
        {"name": "broken", "kind": "stdio", "command": "/nonexistent/mcp-server"},
        everything("everything", "x"),
    ]));
    let listed = s.json(&["mcp-servers", "list", "--json"]);
    let state = |name: &str| -> Value {
        listed
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .cloned()
            .unwrap()
    };
    assert_eq!(state("broken")["state"], "failed");
    assert!(
        state("broken")["last_error"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/mcp-server"),
        "{listed:#}"
    );
    assert_eq!(
        (&state("everything")["state"], &state("everything")["tools"]),
        (&json!("up"), &json!(13))
    );
    // It costs its tools, not the session.
    let o = s.run(&["call", "mcp__everything__echo", r#"{"message": "ok"}"#]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "Echo: ok\n");
    assert!(
        stderr(&o).contains("MCP server `broken` (stdio) is skipped"),
        "{}",
        stderr(&o)
    );
    let o = s.run(&["mcp-servers", "test", "broken"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let o = s.run(&["mcp-servers", "test", "everythin"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("did you mean `everything`?"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn the_memory_and_filesystem_reference_servers_work_through_the_gateway() {
    let s = Setup::new();
    let allowed = s.base().join("shared");
    std::fs::create_dir_all(&allowed).unwrap();
    std::fs::write(allowed.join("notes.txt"), "from the filesystem server\n").unwrap();
    let memory_file = s.base().join("memory.jsonl");
    let s = s.with_servers(json!([
        {
            "name": "memory",
            "kind": "stdio",
            "command": crate::node(),
            "args": [reference_server("server-memory")],
            "env": {"MEMORY_FILE_PATH": memory_file},
        },
        {
            "name": "fs",
            "kind": "stdio",
            "command": crate::node(),
            "args": [reference_server("server-filesystem"), &allowed],
        },
    ]));
    let mut client = s.mcp();
    client.call(
        "mcp__memory__create_entities",
        json!({"entities": [{"name": "toolgate", "entityType": "project",
                             "observations": ["governs MCP tools"]}]}),
    );
    let (graph, _) = client.call("mcp__memory__read_graph", json!({}));
    assert!(graph.contains("governs MCP tools"), "{graph}");
    let (text, _) = client.call(
        "mcp__fs__read_text_file",
        json!({"path": allowed.join("notes.txt")}),
    );
    assert!(text.contains("from the filesystem server"), "{text}");
    // The server's own boundary holds as well.
    let outside = client.request(
        "tools/call",
        json!({"name": "mcp__fs__read_text_file", "arguments": {"path": "/etc/hostname"}}),
    );
    assert_eq!(outside["result"]["isError"], json!(true), "{outside}");
    assert!(client.close());
    assert!(
        std::fs::read_to_string(&memory_file)
            .unwrap()
            .contains("toolgate")
    );
}

#[test]
fn many_client_sessions_share_one_server_process_and_leave_none() {
    let marker = unique("gw-sessions-");
    let s = Setup::new().with_servers(json!([everything("everything", &marker)]));
    let served =
        crate::common::Served::start(s.command(&["serve", "--port", "0", "--no-token"])).unwrap();
    // A thousand connect and disconnect cycles (peers leak a process per
    // session): the first 20 through the Python SDK's client, the rest
    // through a plain HTTP client.
    let sessions = 1000;
    let o = std::process::Command::new(crate::python())
        .arg(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/gateway/sessions_client.py"),
        )
        .args([
            served.url.as_str(),
            "mcp__everything__echo",
            &sessions.to_string(),
            "20",
        ])
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}\n{}", stderr(&o), served.stderr());
    let seen: Value = serde_json::from_slice(&o.stdout).unwrap();
    let texts = seen["texts"].as_array().unwrap();
    assert_eq!(texts.len(), sessions);
    assert_eq!(
        texts[sessions - 1],
        json!(format!("Echo: s{}", sessions - 1))
    );
    // One server for every session, not one per session.
    assert_eq!(
        processes_with(&marker).len(),
        1,
        "{:?}",
        processes_with(&marker)
    );
    drop(served);
    assert!(
        eventually(Duration::from_secs(10), || processes_with(&marker)
            .is_empty()),
        "{:?}",
        processes_with(&marker)
    );
}

#[test]
fn a_name_two_servers_would_share_is_refused_naming_both() {
    // `mcp__x__y__echo` is tool `y__echo` of server `x` and tool `echo` of
    // server `x__y`: the second one met is refused, not silently shadowed.
    let s = Setup::new();
    let file = s.base().join("tools.json");
    std::fs::write(
        &file,
        json!([{"name": "y__echo", "description": "Echoes.",
                "inputSchema": {"type": "object", "properties": {}}}])
        .to_string(),
    )
    .unwrap();
    let s = s.with_servers(json!([
        {"name": "x", "kind": "stdio", "command": crate::python(),
         "args": [crate::python_peer("changing.py"), "--tools", file]},
        everything("x__y", "x"),
    ]));
    let o = s.run(&["tools"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(
            "tool `echo` of MCP server `x__y` is refused: its name mcp__x__y__echo is already \
             taken by tool `y__echo` of MCP server `x`"
        ),
        "{}",
        stderr(&o)
    );
    let o = s.run(&["call", "mcp__x__y__echo", "{}"]);
    assert_eq!(stdout(&o), "called y__echo with {}\n", "{}", stderr(&o));
}

#[test]
fn a_server_that_never_answers_is_skipped_after_its_connect_timeout() {
    let marker = unique("gw-mute-");
    let s = Setup::new().with_servers(json!([
        // Reads stdin and never answers: a hung server.
        {"name": "mute", "kind": "stdio", "command": "/bin/sh",
         "args": ["-c", format!("cat >/dev/null; : {marker}")], "connect_timeout": 1},
        everything("everything", "x"),
    ]));
    let o = s.run(&[
        "call",
        "mcp__everything__echo",
        r#"{"message": "still here"}"#,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "Echo: still here\n");
    assert!(
        stderr(&o).contains(
            "MCP server `mute` (stdio) is skipped: no answer within the connect timeout of 1 s"
        ),
        "{}",
        stderr(&o)
    );
    // The hung process was not left behind.
    assert!(
        eventually(Duration::from_secs(10), || processes_with(&marker)
            .is_empty()),
        "{:?}",
        processes_with(&marker)
    );
}

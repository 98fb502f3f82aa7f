//! Many external tools: above `mcp_defer_threshold` a client sees
//! `mcp_find_tools`, which activates at most 8 matches per search, only
//! tools the cap admits, and tells the client its list changed.

use std::time::Duration;

use serde_json::{Value, json};

use crate::{Setup, python, python_peer, stderr, stdout};

fn many(count: usize) -> Value {
    json!({
        "name": "many",
        "kind": "stdio",
        "command": python(),
        "args": [python_peer("many_tools.py"), "--count", count.to_string()],
    })
}

fn names(listed: &Value) -> Vec<String> {
    listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn above_the_threshold_tools_are_found_activated_and_announced() {
    let s = Setup::new().deferring().with_servers(json!([many(40)]));
    let mut client = s.mcp();
    let listed = client.request("tools/list", json!({}));
    let before = names(&listed);
    assert!(before.contains(&"mcp_find_tools".to_owned()), "{before:?}");
    assert!(
        !before.iter().any(|n| n.starts_with("mcp__many__")),
        "{before:?}"
    );
    let finder = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "mcp_find_tools")
        .unwrap();
    assert!(
        finder["description"]
            .as_str()
            .unwrap()
            .contains("many (40 tools)"),
        "{finder}"
    );
    assert_eq!(finder["annotations"]["readOnlyHint"], json!(true));

    let (found, notifications) = client.request_with_notifications(
        "tools/call",
        json!({"name": "mcp_find_tools", "arguments": {"query": "weather"}}),
        Duration::from_secs(60),
    );
    assert_eq!(found["result"]["isError"], json!(false), "{found}");
    assert!(
        notifications
            .iter()
            .any(|n| n["method"] == "notifications/tools/list_changed"),
        "{notifications:?}"
    );
    let after = names(&client.request("tools/list", json!({})));
    let activated: Vec<&String> = after
        .iter()
        .filter(|n| n.starts_with("mcp__many__"))
        .collect();
    assert!(
        !activated.is_empty() && activated.len() <= 8,
        "{activated:?}"
    );
    // An activated tool is an ordinary tool from now on.
    let tool = activated[0].clone();
    let (text, _) = client.call(&tool, json!({"q": "hello"}));
    assert_eq!(
        text,
        format!("{}: hello", tool.trim_start_matches("mcp__many__"))
    );
    // A broad search still activates at most 8.
    client.call("mcp_find_tools", json!({"query": "tool"}));
    let after = names(&client.request("tools/list", json!({})));
    let count = after
        .iter()
        .filter(|n| n.starts_with("mcp__many__"))
        .count();
    assert!(count <= 16, "{count} activated after two searches");
    assert!(client.close());

    // A person at the terminal names the tool: no search needed there.
    let o = s.run(&["call", "mcp__many__tool_001", r#"{"q": "direct"}"#]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "tool_001: direct\n");
}

#[test]
fn the_finder_offers_only_what_the_cap_admits_and_the_threshold_is_the_operators() {
    let mut server = many(40);
    server["tools"] = json!({"tool_000": {"effect_class": "read"}});
    let s = Setup::new().deferring().with_servers(json!([server]));
    s.user_config("[access]\ncap = \"read\"\n");
    let mut client = s.mcp();
    let (found, _) = client.call("mcp_find_tools", json!({"query": "weather tool"}));
    assert!(found.contains("tool_000"), "{found}");
    assert!(
        !found.contains("tool_016"),
        "a tool above the cap was offered: {found}"
    );
    let after = names(&client.request("tools/list", json!({})));
    assert_eq!(
        after
            .iter()
            .filter(|n| n.starts_with("mcp__many__"))
            .collect::<Vec<_>>(),
        ["mcp__many__tool_000"]
    );
    assert!(client.close());

    // Above 40, nothing is deferred.
    s.user_config("mcp_defer_threshold = 50\n");
    let mut client = s.mcp();
    let listed = names(&client.request("tools/list", json!({})));
    assert!(!listed.contains(&"mcp_find_tools".to_owned()));
    assert_eq!(
        listed
            .iter()
            .filter(|n| n.starts_with("mcp__many__"))
            .count(),
        40
    );
    assert!(client.close());
}

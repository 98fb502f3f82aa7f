//! Attack: a client of `toolgate mcp --tools read,grep` calls near-misses of
//! tool names (`bahs`, `wirte`) to learn, from the did-you-mean, which tools
//! the server hides. A hint names only a tool of its own tool list.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::Project;
use crate::raw::RawStdio;

#[test]
fn unknown_tool_errors_suggest_only_the_servers_own_tools() {
    let p = Project::new();
    let mut raw = RawStdio::start(p.toolgate(&["mcp", "--tools", "read,grep"]));
    let listed = raw.request("tools/list", json!({}));
    let mut names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["grep", "read"]);
    let mut message = |name: &str| -> Value {
        let reply = raw.request("tools/call", json!({"name": name, "arguments": {}}));
        assert_eq!(reply["error"]["code"], -32602, "{reply}");
        reply["error"]["message"].clone()
    };
    // Each is one edit or two from a tool the server has but hides.
    for (name, hidden) in [
        ("bahs", "bash"),
        ("wirte", "write"),
        ("edti", "edit"),
        ("lss", "ls"),
    ] {
        let text = message(name);
        assert_eq!(text, json!(format!("unknown tool `{name}`")), "{name}");
        assert!(!text.to_string().contains(&format!("`{hidden}`")), "{text}");
    }
    assert_eq!(
        message("raed"),
        json!("unknown tool `raed`; did you mean `read`?")
    );
    let status = raw.close();
    assert!(status.is_some_and(|s| s.success()), "{}", raw.stderr());
}

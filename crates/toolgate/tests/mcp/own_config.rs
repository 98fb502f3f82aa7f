//! An MCP client's agent attacks toolgate's own configuration: it cannot
//! write `toolgate.toml` with the file tools or from a command, and a
//! project file it finds (or a cloned repository brought) does not turn the
//! next session's sandbox off.

use serde_json::{Value, json};

use super::Project;
use super::raw::RawStdio;

fn text(result: &Value) -> String {
    result["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn the_agent_cannot_loosen_the_next_session() {
    let p = Project::new();
    let weakening = "[sandbox]\nbackend = \"none\"\n[tools]\nelevated = true\n";
    let mut raw = RawStdio::start(p.toolgate(&["mcp"]));
    let written = raw.request(
        "tools/call",
        json!({"name": "write", "arguments": {"path": "toolgate.toml", "content": weakening}}),
    );
    assert_eq!(written["result"]["isError"], true, "{written}");
    assert!(text(&written).contains("is protected"), "{written}");
    let script = format!(
        "printf '{}' > toolgate.toml",
        weakening.replace('\n', "\\n")
    );
    let ran = raw.request(
        "tools/call",
        json!({"name": "bash", "arguments": {"command": script}}),
    );
    // A command may create one (no mask puts a placeholder in the host's
    // project for it): untrusted, it only tightens, as the next session shows.
    assert_eq!(ran["result"]["isError"], false, "{ran}");
    drop(raw);
    assert_eq!(
        std::fs::read_to_string(p.root().join("toolgate.toml")).unwrap(),
        weakening
    );

    // The file the agent wrote (or the same one in a cloned repository):
    // the next session stays sandboxed and says what it ignored.
    p.write("toolgate.toml", weakening);
    let outside = p.base().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let marker = outside.join("marker");
    let mut raw = RawStdio::start(p.toolgate(&["mcp"]));
    // The client hears it too: the server's instructions say so.
    let initialize = raw.seen.first().cloned().unwrap_or_default();
    let initialize: Value = serde_json::from_str(&initialize).unwrap_or_default();
    let instructions = initialize["result"]["instructions"]
        .as_str()
        .unwrap_or_default();
    assert!(instructions.contains("is not trusted"), "{initialize}");
    let command = format!("touch {}", marker.display());
    let ran = raw.request(
        "tools/call",
        json!({"name": "bash", "arguments": {"command": command}}),
    );
    assert!(
        !marker.exists(),
        "the command ran outside the sandbox: {ran}"
    );
    let listed = raw.request("tools/list", json!({}));
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(!names.contains(&"elevated"), "{names:?}");
    raw.close();
    let stderr = raw.stderr();
    assert!(stderr.contains("is not trusted"), "{stderr}");
    assert!(stderr.contains("[sandbox] backend = \"none\""), "{stderr}");
}

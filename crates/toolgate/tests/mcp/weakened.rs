//! A weakened sandbox is said to every MCP client: in the server
//! instructions, as a warning in the MCP log once the client has
//! initialized, on stderr at the start and on every command result.

use serde_json::json;

use crate::home_root::RootsClient;
use crate::{Project, text};

#[test]
fn a_landlock_backend_is_said_in_the_instructions_the_log_and_every_command_result() {
    let p = Project::new();
    let mut cmd = p.toolgate(&["mcp"]);
    cmd.env("TOOLGATE_SANDBOX_BACKEND", "landlock");
    let mut client = RootsClient::start(cmd, None);
    let warning = "WARNING: the sandbox is weakened: commands run under the landlock backend, \
                   not bubblewrap";
    let instructions = client.initialized["instructions"]
        .as_str()
        .unwrap_or_default();
    assert!(instructions.contains(warning), "{instructions}");
    // The log warning follows `notifications/initialized`, before the
    // answer to the next request.
    let result = client.call("bash", json!({"command": "echo hi"}));
    assert_eq!(result["isError"], false, "{result}");
    assert!(
        text(&result).contains("[sandbox weakened: ran under the landlock backend"),
        "{result}"
    );
    let logged: Vec<&serde_json::Value> = client
        .notifications
        .iter()
        .filter(|n| n["method"] == "notifications/message")
        .collect();
    assert!(
        logged.iter().any(|n| n["params"]["level"] == "warning"
            && n["params"]["data"]
                .as_str()
                .is_some_and(|d| d.contains(warning))),
        "{:?}",
        client.notifications
    );
    let stderr = client.stderr();
    assert!(stderr.contains(&format!("toolgate: {warning}")), "{stderr}");
}

#[test]
fn bubblewrap_is_not_announced() {
    let p = Project::new();
    let mut client = RootsClient::start(p.toolgate(&["mcp"]), None);
    let instructions = client.initialized["instructions"]
        .as_str()
        .unwrap_or_default();
    assert!(!instructions.contains("WARNING"), "{instructions}");
    let result = client.call("bash", json!({"command": "echo hi"}));
    assert!(!text(&result).contains("weakened"), "{result}");
    assert!(
        !client
            .notifications
            .iter()
            .any(|n| n["method"] == "notifications/message"),
        "{:?}",
        client.notifications
    );
    let stderr = client.stderr();
    assert!(!stderr.contains("WARNING"), "{stderr}");
}

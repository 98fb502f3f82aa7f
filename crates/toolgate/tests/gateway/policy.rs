//! External tools under the same policy as built-ins: access lists, the
//! effect-class cap, the operator's per-tool class, rules and approvals.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::{Setup, everything, stderr, stdout};

fn status(s: &Setup, tool: &str) -> Value {
    let listed = s.json(&["tools", "--json"]);
    listed
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == tool)
        .cloned()
        .unwrap_or_else(|| panic!("{tool} not listed: {listed:#}"))
}

#[test]
fn access_lists_and_the_cap_govern_external_tools() {
    let s = Setup::new().with_servers(json!([everything("everything", "x")]));
    s.user_config("[access]\ndeny = [\"mcp__everything__get-env\"]\n");
    assert_eq!(
        status(&s, "mcp__everything__get-env")["active"],
        json!(false)
    );
    assert_eq!(status(&s, "mcp__everything__echo")["active"], json!(true));
    let o = s.run(&["call", "mcp__everything__get-env", "{}"]);
    assert_ne!(o.status.code(), Some(0));
    assert!(stderr(&o).contains("denied"), "{}", stderr(&o));

    // group:mcp names them all.
    s.user_config("[access]\ndeny = [\"group:mcp\"]\n");
    assert_eq!(status(&s, "mcp__everything__echo")["active"], json!(false));

    // An allow list that names no external tool leaves them all out.
    s.user_config("[access]\nallow = [\"read\"]\n");
    assert_eq!(status(&s, "mcp__everything__echo")["active"], json!(false));
    s.user_config("[access]\nallow = [\"read\", \"group:mcp\"]\n");
    assert_eq!(status(&s, "mcp__everything__echo")["active"], json!(true));

    // A read cap keeps the untrusted class out, whatever the server says...
    s.user_config("[access]\ncap = \"read\"\n");
    assert_eq!(
        status(&s, "mcp__everything__get-sum")["active"],
        json!(false)
    );
}

#[test]
fn the_operator_can_vouch_for_one_tool_class() {
    let mut server = everything("everything", "x");
    server["tools"] = json!({"get-sum": {"effect_class": "read"}});
    let s = Setup::new().with_servers(json!([server]));
    s.user_config("[access]\ncap = \"read\"\n");
    let sum = status(&s, "mcp__everything__get-sum");
    assert_eq!(
        (&sum["effect_class"], &sum["active"]),
        (&json!("read"), &json!(true))
    );
    assert_eq!(status(&s, "mcp__everything__echo")["active"], json!(false));
    let o = s.run(&["call", "mcp__everything__get-sum", r#"{"a": 1, "b": 1}"#]);
    assert!(o.status.success(), "{}", stderr(&o));

    // A typo in the overrides is said, not ignored.
    let mut server = everything("everything", "x");
    server["tools"] = json!({"get-summ": {"effect_class": "read"}});
    let s = Setup::new().with_servers(json!([server]));
    let o = s.run(&["tools"]);
    assert!(
        stderr(&o).contains("MCP server `everything` has no tool `get-summ`")
            && stderr(&o).contains("did you mean `get-sum`?"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn an_ask_rule_holds_an_external_call_until_a_person_approves() {
    let s = Setup::new().with_servers(json!([everything("everything", "x")]));
    s.user_config(
        "[[rules]]\npattern = \"mcp__everything__*\"\naction = \"ask\"\n\n[approvals]\nwait = \"1s\"\n",
    );
    let call = [
        "call",
        "mcp__everything__echo",
        r#"{"message": "approved"}"#,
    ];
    let o = s.run(&call);
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    let listed = s.json(&["approvals", "list", "--json"]);
    assert_eq!(listed[0]["tool"], "mcp__everything__echo", "{listed:#}");
    let id = listed[0]["id"].as_str().unwrap();
    let o = s.run(&["approvals", "approve", id]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = s.run(&call);
    assert_eq!(
        (o.status.code(), stdout(&o)),
        (Some(0), "Echo: approved\n".to_owned()),
        "{}",
        stderr(&o)
    );
}

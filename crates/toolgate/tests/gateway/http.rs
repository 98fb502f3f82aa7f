//! Streamable HTTP servers, and the old HTTP+SSE transport refused by name.

use pretty_assertions::assert_eq;
use serde_json::json;

use crate::{Setup, everything_http, stderr, stdout};

#[test]
fn a_streamable_http_server_brings_its_tools() {
    let (_peer, port) = everything_http("streamableHttp");
    let s = Setup::new().with_servers(json!([
        {"name": "web", "kind": "http", "url": format!("http://127.0.0.1:{port}/mcp")}
    ]));
    let o = s.run(&["call", "mcp__web__get-sum", r#"{"a": 1, "b": 2}"#]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "The sum of 1 and 2 is 3.\n");
    let mut client = s.mcp();
    let (text, _) = client.call("mcp__web__echo", json!({"message": "over http"}));
    assert_eq!(text, "Echo: over http");
    assert!(client.close());
}

#[test]
fn a_server_that_speaks_only_http_sse_is_refused_with_the_transport_named() {
    let (_peer, port) = everything_http("sse");
    let s = Setup::new().with_servers(json!([
        {"name": "old", "kind": "http", "url": format!("http://127.0.0.1:{port}/sse")}
    ]));
    let o = s.run(&["mcp-servers", "test", "old"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let said = format!("{}{}", stdout(&o), stderr(&o));
    assert!(
        said.contains("does not speak the Streamable HTTP transport")
            && said.contains("only the old HTTP+SSE transport is not supported"),
        "{said}"
    );
    // Its tools are missing, the rest works.
    let o = s.run(&["call", "ls", r#"{"path": "."}"#]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("MCP server `old` (http) is skipped"),
        "{}",
        stderr(&o)
    );
}

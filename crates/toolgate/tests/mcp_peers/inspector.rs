//! The MCP Inspector CLI (`mcp-inspector --cli`) as the client: over stdio
//! against `toolgate mcp`, over Streamable HTTP against `toolgate serve`.
//!
//! Its exit codes: 0 success, 3 authentication required, 5 the tool
//! returned `isError`, 6 a tool schema has an error-severity portability
//! problem (with `--strict`).

use std::process::{Command, Output};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::{NOTES, Peers, Project, TOKEN, run, text};

/// The inspector's exit code when the tool returned `isError: true`.
const EXIT_TOOL_ERROR: i32 = 5;
/// The inspector's exit code when the server wants credentials it lacks.
const EXIT_AUTH_REQUIRED: i32 = 3;

/// `mcp-inspector --cli --format json <extra...> toolgate mcp <args...>`, the
/// server spawned in the project with the same isolated environment the
/// other tests give `toolgate`.
fn over_stdio(p: &Project, extra: &[&str], args: &[&str]) -> Output {
    let isolated = p.toolgate(&[]);
    let mut cmd = Peers::from_env().command("mcp-inspector", &p.home());
    cmd.args(["--cli", "--format", "json", "--cwd"])
        .arg(p.project())
        .current_dir(p.project());
    // The inspector hands a stdio server only a default set of variables
    // (HOME, PATH, ...) plus these.
    for (key, value) in isolated.get_envs() {
        if let Some(value) = value {
            let mut pair = key.to_owned();
            pair.push("=");
            pair.push(value);
            cmd.arg("-e").arg(pair);
        }
    }
    cmd.args(extra)
        .arg(isolated.get_program())
        .arg("mcp")
        .args(args);
    run(cmd)
}

/// `mcp-inspector --cli --format json <url> <args...>`.
fn over_http(p: &Project, url: &str, args: &[&str]) -> Output {
    let mut cmd: Command = Peers::from_env().command("mcp-inspector", &p.home());
    cmd.args(["--cli", "--format", "json", url, "--transport", "http"])
        .args(args)
        .current_dir(p.project());
    run(cmd)
}

/// The `result` of the one JSON object the inspector printed on stdout.
fn result(o: &Output) -> Value {
    let body: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "the inspector printed no JSON ({e})\nexit: {:?}\nstdout:\n{}\nstderr:\n{}",
            o.status.code(),
            text(&o.stdout),
            text(&o.stderr)
        )
    });
    body["result"].clone()
}

fn assert_exit(o: &Output, code: i32) {
    assert_eq!(
        o.status.code(),
        Some(code),
        "stdout:\n{}\nstderr:\n{}",
        text(&o.stdout),
        text(&o.stderr)
    );
}

fn tool<'a>(list: &'a Value, name: &str) -> &'a Value {
    list["tools"]
        .as_array()
        .and_then(|tools| tools.iter().find(|t| t["name"] == name))
        .unwrap_or_else(|| panic!("tools/list has no `{name}`: {list:#}"))
}

/// What a successful `read` of `notes.txt` returns: the numbered text and
/// the facts about the file (sha256 aside, which only has to be there).
fn assert_read_notes(result: &Value) {
    assert_eq!(result["isError"], json!(false), "{result:#}");
    assert_eq!(
        result["content"],
        json!([{"type": "text", "text": format!("     1\t{NOTES}")}])
    );
    let facts = &result["structuredContent"];
    assert!(facts["sha256"].is_string(), "{facts:#}");
    assert_eq!(
        json!({
            "path": facts["path"],
            "kind": facts["kind"],
            "size": facts["size"],
            "total_lines": facts["total_lines"],
            "truncated": facts["truncated"],
        }),
        json!({
            "path": "notes.txt",
            "kind": "text",
            "size": NOTES.len(),
            "total_lines": 1,
            "truncated": false,
        })
    );
}

#[test]
fn stdio_lists_the_tools_with_annotations_and_output_schemas() {
    let p = Project::new();
    let o = over_stdio(&p, &[], &["--method", "tools/list"]);
    assert_exit(&o, 0);
    let list = result(&o);

    let read = tool(&list, "read");
    assert_eq!(
        read["annotations"],
        json!({
            "readOnlyHint": true,
            "destructiveHint": false,
            "idempotentHint": true,
            "openWorldHint": false,
        })
    );
    assert_eq!(read["inputSchema"]["type"], "object");
    assert_eq!(read["inputSchema"]["required"], json!(["path"]));
    assert_eq!(read["outputSchema"]["type"], "object", "{read:#}");
    assert!(
        read["outputSchema"]["properties"]["sha256"].is_object(),
        "{read:#}"
    );

    let bash = tool(&list, "bash");
    assert_eq!(
        bash["annotations"]["readOnlyHint"],
        json!(false),
        "{bash:#}"
    );
    assert_eq!(
        bash["annotations"]["openWorldHint"],
        json!(false),
        "{bash:#}"
    );
    assert_eq!(bash["inputSchema"]["required"], json!(["command"]));
}

#[test]
fn stdio_tool_schemas_have_no_portability_errors() {
    // --strict exits 6 on an error-severity problem; the warnings it
    // prints (nullable fields written as a `type` array) are legal JSON
    // Schema.
    let p = Project::new();
    let o = over_stdio(&p, &["--strict"], &["--method", "tools/list"]);
    assert_exit(&o, 0);
}

#[test]
fn stdio_read_returns_the_text_and_its_facts() {
    let p = Project::new();
    let o = over_stdio(
        &p,
        &[],
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "read",
            "--tool-arg",
            "path=notes.txt",
        ],
    );
    assert_exit(&o, 0);
    assert_read_notes(&result(&o));
}

#[test]
fn stdio_a_denied_call_is_a_tool_error_naming_the_layer() {
    let p = Project::new();
    let o = over_stdio(
        &p,
        &[],
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "read",
            "--tool-args-json",
            r#"{"path": "/etc/shadow"}"#,
        ],
    );
    assert_exit(&o, EXIT_TOOL_ERROR);
    let result = result(&o);
    assert_eq!(result["isError"], json!(true), "{result:#}");
    let said = result["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        said.starts_with(
            "denied by the paths policy: `/etc/shadow` matches the denied pattern `/etc/shadow`"
        ),
        "{result:#}"
    );
    assert!(said.contains("repeating it will not help"), "{said}");
}

#[test]
fn stdio_the_modern_protocol_era_calls_tools_too() {
    let p = Project::new();
    let o = over_stdio(
        &p,
        &["--protocol-era", "modern"],
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "read",
            "--tool-args-json",
            r#"{"path": "notes.txt"}"#,
        ],
    );
    assert_exit(&o, 0);
    assert_read_notes(&result(&o));
}

#[test]
fn http_with_the_bearer_token_lists_and_calls() {
    let p = Project::new();
    let served = p.serve(Some(TOKEN));
    let bearer = format!("Authorization: Bearer {TOKEN}");

    let o = over_http(
        &p,
        &served.url,
        &["--header", &bearer, "--method", "tools/list"],
    );
    assert_exit(&o, 0);
    let list = result(&o);
    assert_eq!(tool(&list, "read")["annotations"]["readOnlyHint"], true);

    let o = over_http(
        &p,
        &served.url,
        &[
            "--header",
            &bearer,
            "--method",
            "tools/call",
            "--tool-name",
            "read",
            "--tool-arg",
            "path=notes.txt",
        ],
    );
    assert_exit(&o, 0);
    assert_read_notes(&result(&o));
    drop(served);
}

#[test]
fn http_without_the_right_bearer_token_needs_authentication() {
    let p = Project::new();
    let served = p.serve(Some(TOKEN));
    let wrong = "Authorization: Bearer not-the-token".to_owned();
    // Each is told what was wrong: no token at all, or the wrong one.
    let cases: [(&str, Vec<&str>, &str); 2] = [
        ("no header", vec![], "a bearer token is required"),
        (
            "a wrong token",
            vec!["--header", &wrong],
            "the bearer token is wrong",
        ),
    ];
    for (case, header, told) in cases {
        // --stored-auth-only: fail instead of starting an interactive OAuth
        // login, which would wait for a browser forever.
        let mut args = header;
        args.extend(["--stored-auth-only", "--method", "tools/list"]);
        let o = over_http(&p, &served.url, &args);
        assert_eq!(
            o.status.code(),
            Some(EXIT_AUTH_REQUIRED),
            "{case}\nstdout:\n{}\nstderr:\n{}",
            text(&o.stdout),
            text(&o.stderr)
        );
        let error = text(&o.stderr);
        let envelope = error
            .lines()
            .find_map(|line| serde_json::from_str::<Value>(line).ok())
            .unwrap_or_else(|| panic!("{case}: no JSON error on stderr:\n{error}"));
        assert_eq!(
            envelope["error"]["code"], "auth_required",
            "{case}: {error}"
        );
        assert!(
            envelope["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains(told)),
            "{case}: {error}"
        );
    }
    drop(served);
}

//! `toolgate call` exits with a status a script can branch on: 0 success,
//! 1 tool error, 2 usage, 3 the command exited non-zero, 4 timed out,
//! 5 denied by policy.

use pretty_assertions::assert_eq;

use super::*;

#[test]
fn call_exit_status_tells_success_failure_timeout_and_denial_apart() {
    let s = Sandbox::new();
    let cases: Vec<(&str, &str, i32)> = vec![
        ("bash", r#"{"command": "true"}"#, 0),
        ("bash", r#"{"command": "exit 7"}"#, 3),
        ("bash", r#"{"command": "kill -TERM $$"}"#, 3),
        ("bash", r#"{"command": "sleep 60", "timeout": 1}"#, 4),
        ("read", r#"{"path": "no-such-file.txt"}"#, 1),
        ("bash", r#"{"command": "shutdown -h now"}"#, 5),
        ("read", r#"{"path": "/etc/shadow"}"#, 5),
        ("raed", r#"{"path": "a"}"#, 2),
        ("read", r#"{"paht": "a"}"#, 2),
    ];
    for (tool, args, code) in cases {
        let o = s.run(&["call", tool, args]);
        assert_eq!(
            o.status.code(),
            Some(code),
            "{tool} {args}:\n{}{}",
            stdout(&o),
            stderr(&o)
        );
    }
}

#[test]
fn a_command_that_fails_keeps_its_code_in_the_json_facts() {
    let s = Sandbox::new();
    let o = s.run(&["call", "bash", r#"{"command": "exit 7"}"#, "--json"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let body: Value = serde_json::from_slice(&o.stdout).unwrap();
    let facts = &body["structured"];
    assert_eq!(
        (&facts["exit_code"], &facts["timed_out"], &body["is_error"]),
        (&json!(7), &json!(false), &json!(false))
    );

    let o = s.run(&[
        "call",
        "bash",
        r#"{"command": "sleep 60", "timeout": 1}"#,
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    let body: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(body["structured"]["timed_out"], true);

    let o = s.run(&["call", "read", r#"{"path": "/etc/shadow"}"#, "--json"]);
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    let body: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(body["stage"], "paths");
}

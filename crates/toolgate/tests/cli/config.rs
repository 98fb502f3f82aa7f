//! Configuration layers through the binary: files, environment, flags.

use pretty_assertions::assert_eq;

use super::*;

#[test]
fn config_files_environment_and_flags_stack_in_order() {
    let s = Sandbox::new();
    // User file: readonly. Project file: permissive. Env: strict. Flag: standard.
    s.write(
        "home/.config/toolgate/config.toml",
        "policy = \"readonly\"\n",
    );
    assert_eq!(
        active_names(&tools_json(&s, &[], &[])),
        ["demo_echo", "demo_flood"]
    );
    let project = s.write("project/toolgate.toml", "policy = \"permissive\"\n");
    // Untrusted, the project file cannot loosen the user's readonly.
    assert_eq!(
        active_names(&tools_json(&s, &[], &[])),
        ["demo_echo", "demo_flood"]
    );
    common::trust(s.dir.path(), &project);
    assert_eq!(active_names(&tools_json(&s, &[], &[])).len(), 5);
    let strict = [("TOOLGATE_POLICY", "strict")];
    assert_eq!(
        active_names(&tools_json(&s, &[], &strict)),
        ["demo_echo", "demo_flood", "demo_touch"]
    );
    assert_eq!(
        active_names(&tools_json(&s, &["--policy", "standard"], &strict)).len(),
        4
    );

    // The project file is found from a subdirectory.
    let o = s.run_in(&s.project().join("sub"), &["--demo", "tools"], &[]);
    assert!(
        stdout(&o).starts_with("policy permissive (cap destructive)"),
        "{}",
        stdout(&o)
    );
    assert!(stdout(&o).contains("toolgate.toml"), "{}", stdout(&o));

    // Strict input from the environment and from the file.
    let call = [
        "--demo",
        "call",
        "demo_echo",
        r#"{"text": "x", "times": "2"}"#,
    ];
    let o = s.run_in(
        &s.project(),
        &call,
        &[("TOOLGATE_STRICT_TOOL_INPUT", "true")],
    );
    assert_eq!(
        stderr(&o),
        "toolgate: invalid arguments at /times: expected integer or null\n"
    );
    s.write("project/toolgate.toml", "strict_tool_input = true\n");
    let o = s.run(&call);
    assert_eq!(o.status.code(), Some(2));
    let o = s.run_in(
        &s.project(),
        &call,
        &[("TOOLGATE_STRICT_TOOL_INPUT", "false")],
    );
    assert_eq!(stdout(&o), "x\nx\n");
    let o = s.run_in(
        &s.project(),
        &call,
        &[("TOOLGATE_STRICT_TOOL_INPUT", "perhaps")],
    );
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o),
        "toolgate: environment variable TOOLGATE_STRICT_TOOL_INPUT=\"perhaps\": expected true or false\n"
    );
}

#[test]
fn config_errors_name_file_line_and_expectation() {
    let s = Sandbox::new();
    let path = s.write(
        "project/toolgate.toml",
        "policy = \"standard\"\n\n[access]\ncaps = \"read\"\n",
    );
    let o = s.run(&["tools"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o),
        format!(
            "toolgate: {}:4:1: unknown field `caps`, expected one of `allow`, `deny`, `cap`\n",
            path.display()
        )
    );
    s.write("project/toolgate.toml", "[paths]\ndeny = [\"/a/[b\"]\n");
    let o = s.run(&["tools"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("invalid path pattern `/a/[b`"),
        "{}",
        stderr(&o)
    );
    let o = s.run(&["--config", "missing.toml", "tools"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).starts_with("toolgate: cannot read "),
        "{}",
        stderr(&o)
    );
}

#[test]
fn config_layers_rules_and_output_dir_take_effect() {
    let s = Sandbox::new();
    let project = s.write(
        "project/toolgate.toml",
        r#"
output_dir = "out"

[access]
deny = ["demo_echo"]

[paths]
deny = ["**/secrets/**"]

[resources]
max_output_lines = 20

[[rules]]
pattern = "demo_touch"
action = "ask"
reason = "touching files is reviewed"

[approvals]
wait = "0s"
"#,
    );
    common::trust(s.dir.path(), &project);
    // [access] without a cap: the destructive demo tool is active.
    let rows = tools_json(&s, &[], &[]);
    assert_eq!(
        active_names(&rows),
        ["demo_flood", "demo_shell", "demo_touch", "demo_wipe"]
    );
    // Asked, nobody answers within the wait: the request stays pending.
    let o = s.run(&["--demo", "call", "demo_touch", r#"{"path": "a.txt"}"#]);
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    assert!(
        stderr(&o).starts_with("toolgate: approval apr_")
            && stderr(&o).contains(" is pending; approve it with `toolgate approvals approve apr_"),
        "{}",
        stderr(&o)
    );
    let o = s.run(&[
        "--demo",
        "policy",
        "explain",
        "demo_touch",
        r#"{"path": "x/secrets/k"}"#,
    ]);
    assert!(
        stdout(&o).contains("matches the denied pattern `**/secrets/**`"),
        "{}",
        stdout(&o)
    );
    // The defaults are kept next to the additions.
    let o = s.run(&[
        "--demo",
        "policy",
        "explain",
        "demo_touch",
        r#"{"path": "/proc/1/mem"}"#,
    ]);
    assert!(
        stdout(&o).contains("matches the denied pattern `/proc/**`"),
        "{}",
        stdout(&o)
    );

    let o = s.run(&[
        "--demo",
        "call",
        "demo_flood",
        r#"{"lines": 1000}"#,
        "--json",
    ]);
    let body: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(body["truncated"], true);
    let text = body["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("[... 981 lines omitted ...]"), "{text}");
    let saved = PathBuf::from(body["full_output"].as_str().unwrap());
    assert!(
        saved.starts_with(s.project().join("out")),
        "{}",
        saved.display()
    );
    assert_eq!(
        std::fs::read_to_string(saved).unwrap().lines().count(),
        1000
    );
}

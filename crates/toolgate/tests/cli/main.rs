//! The real `toolgate` binary, run in an isolated home and project directory.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use common::toolgate;

mod approvals;
mod call_status;
mod closed_stdout;
mod config;
mod explain_paths;
mod files;
mod hidden_names;
mod home_root;
mod leftovers;
mod limits;
mod limits_grep;
mod new_repos;
mod resolve;
mod sandbox;
mod snapshot_scope;
mod stage2_binary;
mod state_in_root;
mod symlinks;
mod tool_detail;
mod trust;
mod typos;
mod weakened;

struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        std::fs::create_dir_all(dir.path().join("project/sub")).unwrap();
        Sandbox { dir }
    }

    fn project(&self) -> PathBuf {
        self.dir.path().join("project")
    }

    fn write(&self, relative: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    fn run_in(&self, cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut cmd = toolgate(self.dir.path(), cwd);
        cmd.args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    }

    fn run(&self, args: &[&str]) -> Output {
        self.run_in(&self.project(), args, &[])
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn tools_json(
    s: &Sandbox,
    args: &[&str],
    env: &[(&str, &str)],
) -> Vec<(String, bool, Option<String>)> {
    let mut all = vec!["--demo", "tools", "--json"];
    all.extend_from_slice(args);
    let o = s.run_in(&s.project(), &all, env);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap();
    // The policy tests watch the demo tools, one per effect class.
    rows.iter()
        .filter(|r| r["name"].as_str().unwrap().starts_with("demo_"))
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_owned(),
                r["active"].as_bool().unwrap(),
                r["reason"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

fn active_names(rows: &[(String, bool, Option<String>)]) -> Vec<&str> {
    rows.iter().filter(|r| r.1).map(|r| r.0.as_str()).collect()
}

#[test]
fn tools_lists_class_idempotency_group_and_status() {
    let s = Sandbox::new();
    let o = s.run(&["--demo", "tools"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "policy standard (cap mutate-irreversible), tool preset none, config: embedded defaults\n\
NAME             CLASS                IDEMPOTENCY       GROUP          STATUS\n\
apply_patch      mutate-reversible    check-before-act  group:fs       active\n\
bash             mutate-reversible    at-most-once      group:runtime  active\n\
demo_echo        read                 -                 group:demo     active\n\
demo_flood       read                 -                 group:demo     active\n\
demo_shell       mutate-irreversible  at-most-once      group:demo     active\n\
demo_touch       mutate-reversible    check-before-act  group:demo     active\n\
demo_wipe        destructive          at-most-once      group:demo     inactive: effect class destructive exceeds the policy cap mutate-irreversible\n\
edit             mutate-reversible    check-before-act  group:fs       active\n\
find             read                 -                 group:search   active\n\
grep             read                 -                 group:search   active\n\
ls               read                 -                 group:fs       active\n\
memory_append    mutate-reversible    check-before-act  group:memory   active\n\
memory_read      read                 -                 group:memory   active\n\
memory_replace   mutate-reversible    check-before-act  group:memory   active\n\
memory_search    read                 -                 group:memory   active\n\
neuron_disk      read                 -                 group:neuron   active\n\
neuron_env       read                 -                 group:neuron   active\n\
neuron_memory    read                 -                 group:neuron   active\n\
neuron_packages  read                 -                 group:neuron   active\n\
neuron_status    read                 -                 group:neuron   active\n\
process_kill     mutate-reversible    check-before-act  group:runtime  active\n\
process_list     read                 -                 group:runtime  active\n\
process_read     read                 -                 group:runtime  active\n\
process_start    mutate-reversible    at-most-once      group:runtime  active\n\
process_write    mutate-reversible    at-most-once      group:runtime  active\n\
read             read                 -                 group:fs       active\n\
snapshot         read                 -                 group:neuron   active\n\
write            mutate-reversible    check-before-act  group:fs       active\n\
27 of 28 tools active\n"
    );
    // Without --demo: the built-in tools; readonly leaves the reading ones.
    let o = s.run(&["tools", "--policy", "readonly"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).ends_with("14 of 23 tools active\n"),
        "{}",
        stdout(&o)
    );

    let rows = tools_json(&s, &[], &[]);
    assert_eq!(
        active_names(&rows),
        ["demo_echo", "demo_flood", "demo_shell", "demo_touch"]
    );
    let o = s.run(&["--demo", "tools", "--json"]);
    let parsed: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        parsed[4],
        json!({"name": "demo_shell", "effect_class": "mutate-irreversible", "idempotency": "at-most-once",
               "group": "group:demo", "version": null, "deferred": false, "active": true, "reason": null})
    );
}

#[test]
fn policy_and_preset_flags_change_what_is_active() {
    let s = Sandbox::new();
    let cases: Vec<(&[&str], Vec<&str>)> = vec![
        (
            &["--policy", "permissive"],
            vec![
                "demo_echo",
                "demo_flood",
                "demo_shell",
                "demo_touch",
                "demo_wipe",
            ],
        ),
        (
            &["--policy", "strict"],
            vec!["demo_echo", "demo_flood", "demo_touch"],
        ),
        (&["--policy", "readonly"], vec!["demo_echo", "demo_flood"]),
        (&["--preset", "coding"], vec![]),
    ];
    for (flags, expected) in cases {
        let rows = tools_json(&s, flags, &[]);
        assert_eq!(active_names(&rows), expected, "{flags:?}");
    }
    let rows = tools_json(&s, &["--preset", "readonly"], &[]);
    assert_eq!(
        rows[0].2.as_deref(),
        Some("not in the readonly tool preset")
    );

    let o = s.run(&["--demo", "tools", "--policy", "lenient"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains(
            "unknown policy `lenient`, expected one of: permissive, standard, strict, readonly"
        ),
        "{}",
        stderr(&o)
    );
}

#[test]
fn explain_shows_every_layer_in_order_and_the_decision() {
    let s = Sandbox::new();
    let o = s.run(&[
        "--demo",
        "policy",
        "explain",
        "demo_shell",
        r#"{"command": "make && /sbin/shutdown -h now", "timeout": "30"}"#,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let stages: Vec<&str> = text
        .lines()
        .map(|l| l.split_whitespace().take(2).collect::<Vec<_>>().join(" "))
        .map(|s| Box::leak(s.into_boxed_str()) as &str)
        .collect();
    assert_eq!(
        stages,
        [
            "lookup pass",
            "validate pass",
            "access pass",
            "paths skip",
            "commands fail",
            "rules pass",
            "decision: deny:"
        ],
        "{text}"
    );
    assert!(
        text.contains("arguments fit the schema after coercion"),
        "{text}"
    );
    assert!(text.contains("`shutdown` is a denied command"), "{text}");

    let o = s.run(&[
        "--demo",
        "policy",
        "explain",
        "demo_touch",
        r#"{"path": "src/lib.rs"}"#,
        "--json",
    ]);
    let explanation: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(explanation["decision"], json!({"decision": "allow"}));
    let paths = &explanation["stages"][3];
    assert_eq!(paths["stage"], "paths");
    assert_eq!(
        paths["detail"],
        format!(
            "allowed: {}/src/lib.rs (workspace root {})",
            s.project().display(),
            s.project().display()
        )
    );
}

#[test]
fn call_runs_the_pipeline_and_reports_errors_with_exit_codes() {
    let s = Sandbox::new();
    let o = s.run(&[
        "--demo",
        "call",
        "demo_echo",
        r#"{"text": "hi", "times": "2"}"#,
    ]);
    assert_eq!(
        (o.status.code(), stdout(&o)),
        (Some(0), "hi\nhi\n".to_owned()),
        "{}",
        stderr(&o)
    );

    let o = s.run(&["--demo", "call", "demo_echo", r#"{"text": "hi"}"#, "--json"]);
    let body: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(body["content"], json!([{"type": "text", "text": "hi"}]));
    assert_eq!(body["structured"], json!({"times": 1}));
    assert_eq!(body["decision"], json!({"decision": "allow"}));

    let cases: Vec<(Vec<&str>, i32, &str)> = vec![
        (
            vec![
                "call",
                "demo_touch",
                r#"{"path": "../../../../etc/shadow"}"#,
            ],
            5,
            "toolgate: denied by the paths policy: `/etc/shadow` matches the denied pattern `/etc/shadow`",
        ),
        (
            vec![
                "call",
                "demo_echo",
                r#"{"text": "hi", "times": "1; rm -rf /"}"#,
            ],
            2,
            "toolgate: invalid arguments at /times: expected integer or null",
        ),
        (
            vec!["call", "demo_echo", r#"{"txt": "hi"}"#],
            2,
            "toolgate: invalid arguments: unknown field `txt`; did you mean `text`?; missing required field \"text\"",
        ),
        (
            vec!["call", "demo_echo", r#"{"text": "hi", "heading": "x"}"#],
            2,
            "toolgate: invalid arguments: unknown field `heading`; the fields are: text, times",
        ),
        (
            vec!["call", "demo_wipe", r#"{"target": "/"}"#],
            5,
            "toolgate: tool `demo_wipe` is inactive: effect class destructive exceeds the policy cap mutate-irreversible",
        ),
        (
            vec!["call", "demo_ech", "{}"],
            2,
            "toolgate: unknown tool `demo_ech`; did you mean `demo_echo`?",
        ),
        (
            vec!["call", "demo_echo", "{not json"],
            2,
            "toolgate: the arguments are not valid JSON",
        ),
        (
            vec!["call", "demo_echo", "[1]"],
            2,
            "toolgate: the arguments must be a JSON object, not [1]",
        ),
    ];
    for (args, code, message) in cases {
        let mut all = vec!["--demo"];
        all.extend(args.iter().copied());
        let o = s.run(&all);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).starts_with(message), "{args:?}: {}", stderr(&o));
        assert_eq!(stdout(&o), "", "{args:?}");
    }

    let o = s.run(&[
        "--demo",
        "call",
        "demo_wipe",
        r#"{"target": "/"}"#,
        "--json",
    ]);
    let body: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(body["stage"], "access");
}

//! `elevated` through the real `Executor`: it runs on the host, outside the
//! sandbox (it can write where no sandboxed command can), with only PATH,
//! HOME, LANG and allowlisted host variables in its environment.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toolgate_core::{CallContext, Content, Registry, ToolOutput, Typed};
use toolgate_policy::{
    CallError, Executor, PermissionRule, PermissionRules, Policy, PolicyPreset, RuleAction,
};
use toolgate_sandbox::{LocalWorkspace, Sandbox, SandboxConfig};
use toolgate_tools::{ElevatedTool, Fs, Limits, RuntimeConfig};

struct Host {
    _dir: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
    executor: Executor,
    ctx: CallContext,
}

/// A workspace `root` with a sibling `outside`, `elevated` registered with
/// the fake host environment `vars` (or this process's, when `None`), under
/// the permissive policy and rules that allow `elevated` explicitly.
fn host(vars: Option<Vec<(&str, &str)>>, pass_env: &[&str]) -> Host {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let root = base.join("root");
    let outside = base.join("outside");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let sandbox = Sandbox::new(SandboxConfig::new(
        // `elevated` never goes through the sandbox.
        PathBuf::from("/nonexistent/stage2"),
        base.join("state"),
    ))
    .unwrap();
    let workspace = LocalWorkspace::new("test", vec![root.clone()], root.clone(), sandbox).unwrap();
    let fs = Arc::new(Fs::new(Arc::new(workspace), Limits::default()));
    let mut config = RuntimeConfig::default();
    config.pass_env = pass_env.iter().map(|s| s.to_string()).collect();
    let mut registry = Registry::new();
    match vars {
        Some(vars) => {
            let vars = vars
                .into_iter()
                .map(|(k, v)| (OsString::from(k), OsString::from(v)));
            let tool = ElevatedTool::with_host_env(fs, config, vars);
            registry.register(Arc::new(Typed::new(tool))).unwrap();
        }
        None => toolgate_tools::register_elevated_tool(&mut registry, fs, config).unwrap(),
    }
    let mut rules = PermissionRules::standard();
    rules.push(PermissionRule::new("elevated", RuleAction::Allow));
    let policy = Policy::preset(PolicyPreset::Permissive, Some(&outside)).with_rules(rules);
    let executor = Executor::builder(registry).policy(policy).build();
    let ctx = CallContext::new("test-call", "test", root.clone()).with_roots(vec![root.clone()]);
    Host {
        _dir: dir,
        root,
        outside,
        executor,
        ctx,
    }
}

impl Host {
    async fn call(&self, args: Value) -> Result<ToolOutput, CallError> {
        self.executor
            .call("elevated", args, &self.ctx)
            .await
            .map(|r| r.output)
    }

    async fn ok(&self, args: Value) -> (String, Value) {
        let output = self.call(args).await.unwrap();
        let text = match &output.content[..] {
            [Content::Text { text }] => text.clone(),
            other => panic!("unexpected content {other:?}"),
        };
        (text, output.structured.clone().unwrap())
    }
}

/// The variable names a script sees (minus the ones bash sets itself).
fn names(env_output: &str) -> Vec<&str> {
    let mut names: Vec<&str> = env_output
        .lines()
        .filter_map(|line| line.split_once('=').map(|(name, _)| name))
        .filter(|name| !["PWD", "OLDPWD", "SHLVL", "_"].contains(name))
        .collect();
    names.sort_unstable();
    names
}

#[tokio::test]
async fn it_runs_on_the_host_and_can_write_outside_the_workspace() {
    let h = host(None, &[]);
    let target = h.outside.join("written-by-elevated");
    let (text, facts) = h
        .ok(json!({
            "command": format!("echo host > '{}' && pwd", target.display()),
            "cwd": "sub",
        }))
        .await;
    // No sandbox would let a command write beside the workspace root.
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "host\n");
    assert!(
        text.starts_with(&format!("{}\n[exit code 0; ", h.root.join("sub").display())),
        "{text}"
    );
    assert!(
        text.ends_with("[ran on the host, outside the sandbox]\n"),
        "{text}"
    );
    assert_eq!(facts["backend"], json!("host"));
    assert_eq!(facts["sandboxed"], json!(false));
    assert_eq!(facts["exit_code"], json!(0));
    assert_eq!(facts["timed_out"], json!(false));
}

#[tokio::test]
async fn its_environment_is_path_home_lang_and_allowed_names_only() {
    let host_env = vec![
        ("PATH", "/usr/bin:/bin"),
        ("HOME", "/home/op"),
        ("LANG", "C.UTF-8"),
        ("TOOLGATE_TOKEN", "host-secret-1"),
        ("AWS_SECRET_ACCESS_KEY", "host-secret-2"),
        ("ALLOWED_VAR", "shared"),
    ];
    let h = host(Some(host_env), &["ALLOWED_VAR"]);
    let (text, _) = h.ok(json!({"command": "env"})).await;
    assert!(!text.contains("host-secret"), "{text}");
    assert_eq!(names(&text), ["HOME", "LANG", "PATH"]);
    assert!(text.contains("HOME=/home/op\n"), "{text}");

    // An allowlisted variable only when the call names it.
    let (text, _) = h
        .ok(json!({"command": "env", "pass_env": ["ALLOWED_VAR"], "env": {"X": "1"}}))
        .await;
    assert_eq!(names(&text), ["ALLOWED_VAR", "HOME", "LANG", "PATH", "X"]);
    // A host variable the operator did not allow cannot be asked for.
    let err = h
        .call(json!({"command": "env", "pass_env": ["TOOLGATE_TOKEN"]}))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("`TOOLGATE_TOKEN` is not one a command may see"),
        "{err}"
    );
}

#[tokio::test]
async fn the_real_process_environment_does_not_leak() {
    // Cargo gives this test process CARGO_* variables; none may reach the command.
    let h = host(None, &[]);
    let (text, _) = h.ok(json!({"command": "env"})).await;
    for name in names(&text) {
        assert!(
            ["HOME", "LANG", "PATH"].contains(&name),
            "{name} leaked: {text}"
        );
    }
}

#[tokio::test]
async fn cwd_stays_in_the_workspace_and_results_are_bash_shaped() {
    let h = host(None, &[]);
    let err = h
        .call(json!({"command": "true", "cwd": "../outside"}))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("outside"), "{err}");

    let (_, facts) = h
        .ok(json!({"command": "echo out; echo err >&2; exit 3"}))
        .await;
    assert_eq!(facts["exit_code"], json!(3));
    let (text, facts) = h.ok(json!({"command": "sleep 5", "timeout": 1})).await;
    assert_eq!(facts["timed_out"], json!(true), "{text}");
    assert!(
        text.contains("timed out after 1 s; the process group was killed"),
        "{text}"
    );

    // A long output keeps head and tail; the whole of it is in the output dir.
    let (text, facts) = h.ok(json!({"command": "seq 1 100000"})).await;
    assert_eq!(facts["truncated"], json!(true), "{text}");
    let file = facts["output_file"].as_str().unwrap();
    assert!(file.starts_with(".toolgate/output/elevated-"), "{file}");
    let whole = std::fs::read_to_string(h.root.join(file)).unwrap();
    assert_eq!(whole.lines().count(), 100_000);
}

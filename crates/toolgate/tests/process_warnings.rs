//! What the sandbox fixes up after a background process ends reaches the agent:
//! a process that makes a repository and plants `core.fsmonitor` in it ends, and
//! `process_list`, `process_read` and `process_kill` say that toolgate removed the
//! key (text and `warnings` facts), and the log ends with the marked line. Host git
//! run there afterwards runs nothing. Through the Executor, in the real sandbox
//! (the `toolgate` binary is stage 2), under bubblewrap and landlock.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toolgate_core::{CallContext, Registry, ToolEvent};
use toolgate_policy::{Executor, Policy};
use toolgate_sandbox::{BackendChoice, LocalWorkspace, Sandbox, SandboxConfig};
use toolgate_tools::process::ProcessConfig;
use toolgate_tools::{Fs, Limits, RuntimeConfig, register_runtime_tools};

const BACKENDS: [BackendChoice; 2] = [BackendChoice::Bwrap, BackendChoice::Landlock];

struct Agent {
    executor: Executor,
    ctx: CallContext,
    _tmp: tempfile::TempDir,
    root: PathBuf,
    /// Outside the root: the planted program's marker.
    outside: PathBuf,
}

impl Agent {
    fn new(backend: BackendChoice, bounds: impl FnOnce(&mut ProcessConfig)) -> Agent {
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        let (root, outside) = (base.join("root"), base.join("outside"));
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let mut processes = ProcessConfig::default();
        processes.log_dir = base.join("logs");
        std::fs::create_dir_all(&processes.log_dir).unwrap();
        bounds(&mut processes);
        let config = SandboxConfig::new(
            PathBuf::from(env!("CARGO_BIN_EXE_toolgate")),
            base.join("state"),
        )
        .stage2_prefix(["__stage2"])
        .backend(backend);
        let sandbox = Sandbox::new(config).unwrap();
        let ws = LocalWorkspace::new("agent", vec![root.clone()], root.clone(), sandbox).unwrap();
        let fs = Arc::new(Fs::new(Arc::new(ws), Limits::default()));
        let mut registry = Registry::new();
        register_runtime_tools(&mut registry, fs, RuntimeConfig::default(), processes).unwrap();
        let executor = Executor::builder(registry)
            .policy(Policy::standard())
            .subscribe(Arc::new(|_: &ToolEvent| {}))
            .build();
        Agent {
            executor,
            ctx: CallContext::new("t", "test", root.clone()),
            _tmp: tmp,
            root,
            outside,
        }
    }

    async fn ok(&self, tool: &str, args: Value) -> (String, Value) {
        let result = self
            .executor
            .call(tool, args, &self.ctx)
            .await
            .unwrap_or_else(|e| panic!("{tool}: {e}"));
        (
            result.output.joined_text(),
            result.output.structured.unwrap_or(Value::Null),
        )
    }

    /// Starts `command` and reads with waits until it has ended.
    async fn run_to_end(&self, command: &str) -> (Value, PathBuf) {
        let (_, facts) = self
            .ok("process_start", json!({ "command": command }))
            .await;
        let pid = facts["pid"].clone();
        for _ in 0..120 {
            let (_, read) = self
                .ok("process_read", json!({"pid": pid, "wait": 5}))
                .await;
            if read["status"]["state"] != "running" {
                let log = PathBuf::from(facts["output_file"].as_str().unwrap());
                return (pid, log);
            }
        }
        panic!("process {pid} never ended");
    }

    async fn listed(&self, pid: &Value) -> (String, Value) {
        let (text, facts) = self.ok("process_list", json!({})).await;
        let entry = facts["processes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| &e["pid"] == pid)
            .cloned()
            .unwrap();
        (text, entry)
    }

    /// A script outside the root that leaves `ran` there when run.
    fn evil(&self) -> String {
        use std::os::unix::fs::PermissionsExt;
        let path = self.outside.join("evil");
        let marker = self.outside.join("ran");
        std::fs::write(&path, format!("#!/bin/sh\ntouch '{}'\n", marker.display())).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.display().to_string()
    }
}

fn host_git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

#[tokio::test]
async fn a_background_process_that_plants_core_fsmonitor_ends_and_every_result_says_it_was_removed()
{
    for backend in BACKENDS {
        let agent = Agent::new(backend, |_| {});
        let evil = agent.evil();
        let command = format!(
            "echo making sub; git init -q sub && printf '[core]\\n\\tfsmonitor = %s\\n' '{evil}' \
             >> sub/.git/config; printf no-newline-at-the-end"
        );
        let (pid, log) = agent.run_to_end(&command).await;
        let config = agent.root.join("sub/.git/config");
        let warning = format!(
            "removed `core.fsmonitor` from {} (a repository a command created): git on the \
             host would run or read what it names",
            config.display()
        );
        let line = format!("[toolgate] warning: {warning}\n");

        // The status says it, in its facts and its text.
        let (text, entry) = agent.listed(&pid).await;
        assert_eq!(entry["warnings"], json!([warning]), "{backend:?}");
        assert_eq!(entry["warnings_dropped"], json!(0), "{backend:?}");
        assert!(text.contains(&format!("  {line}")), "{backend:?}: {text}");

        // The output ends with it, on a line of its own, before the status line.
        let (text, facts) = agent
            .ok("process_read", json!({"pid": pid, "offset": 0}))
            .await;
        let size = facts["size"].as_u64().unwrap();
        assert_eq!(
            text,
            format!(
                "making sub\nno-newline-at-the-end\n{line}[process {pid} exited with code 0; \
                 continue with offset={size}]\n"
            ),
            "{backend:?}"
        );
        assert_eq!(facts["warnings"], json!([warning]), "{backend:?}");
        // And so does the file.
        let file = std::fs::read_to_string(&log).unwrap();
        assert!(
            file.ends_with(&format!("no-newline-at-the-end\n{line}")),
            "{file}"
        );

        // A read that does not show them still says them, after its status line.
        let (early, _) = agent
            .ok("process_read", json!({"pid": pid, "offset": size}))
            .await;
        assert!(
            early.ends_with(&format!(
                "[process {pid} exited with code 0; continue with offset={size}]\n{line}"
            )),
            "{backend:?}: {early}"
        );

        // process_kill of the ended process says it too.
        let (text, facts) = agent.ok("process_kill", json!({ "pid": pid })).await;
        assert_eq!(facts["warnings"], json!([warning]), "{backend:?}");
        assert!(text.ends_with(line.trim_end()), "{backend:?}: {text}");

        // What was removed is really gone: host git there runs nothing.
        let sub = agent.root.join("sub");
        host_git(&sub, &["status"]);
        assert!(
            !agent.outside.join("ran").exists(),
            "{backend:?}: core.fsmonitor ran under host git"
        );
    }
}

#[tokio::test]
async fn a_process_that_leaves_nothing_to_fix_has_no_warnings() {
    for backend in BACKENDS {
        let agent = Agent::new(backend, |_| {});
        let (pid, log) = agent.run_to_end("git init -q clean && echo done").await;
        let (text, entry) = agent.listed(&pid).await;
        assert_eq!(
            (&entry["warnings"], &entry["warnings_dropped"]),
            (&json!([]), &json!(0)),
            "{backend:?}"
        );
        assert!(!text.contains("[toolgate] warning"), "{backend:?}: {text}");
        let (text, facts) = agent
            .ok("process_read", json!({"pid": pid, "offset": 0}))
            .await;
        assert_eq!(
            text,
            format!("done\n[process {pid} exited with code 0; continue with offset=5]\n"),
            "{backend:?}"
        );
        assert_eq!(facts["warnings"], json!([]), "{backend:?}");
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "done\n");
    }
}

#[tokio::test]
async fn the_warnings_outlive_the_removed_log() {
    let agent = Agent::new(BackendChoice::Bwrap, |c| {
        c.read_log_retention = Duration::from_millis(200);
    });
    let (pid, _) = agent
        .run_to_end("git init -q sub && git -C sub config core.hooksPath /tmp")
        .await;
    // Read to the end; the log goes a while later.
    agent
        .ok("process_read", json!({"pid": pid, "offset": 0}))
        .await;
    for _ in 0..200 {
        let (_, entry) = agent.listed(&pid).await;
        if entry["output"]["removed"].is_string() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (text, facts) = agent.ok("process_read", json!({ "pid": pid })).await;
    assert!(facts["output"]["removed"].is_string(), "{facts}");
    let warnings = facts["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{facts}");
    let warning = warnings[0].as_str().unwrap();
    assert!(
        warning.starts_with("removed `core.hookspath` from "),
        "{warning}"
    );
    assert!(
        text.ends_with(&format!("[toolgate] warning: {warning}\n")),
        "{text}"
    );
}

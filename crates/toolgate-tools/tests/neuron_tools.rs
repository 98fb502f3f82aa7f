#![allow(clippy::unwrap_used, clippy::expect_used)]

//! Black-box tests of the `neuron_*` tools and `snapshot`, through the real
//! `Executor` (validation, policy, tool) over a `LocalWorkspace` whose
//! commands run in the real sandbox (bubblewrap or Landlock, with the real
//! stage-2 binary).
//!
//! The stage-2 binary belongs to toolgate-sandbox, so Cargo does not build
//! it for this crate's tests. Build it into the SAME target dir first:
//!
//! ```text
//! CARGO_TARGET_DIR=<dir> cargo build -p toolgate --bin toolgate-stage2
//! CARGO_TARGET_DIR=<dir> cargo test -p toolgate-tools --test neuron_tools
//! ```
//!
//! The tests find it next to the test executable (`<dir>/debug/toolgate-stage2`)
//! and fail loudly when it is missing; they never skip.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use sha2::Digest;
use toolgate_core::{CallContext, Registry, ToolOutput, Typed};
use toolgate_policy::{Executor, Policy, PolicyPreset};
use toolgate_sandbox::{LocalWorkspace, Sandbox, SandboxCommand, SandboxConfig, Workspace};
use toolgate_tools::neuron::{REDACTED, RuntimeFacts, is_secret_name, redact};
use toolgate_tools::snapshot::SnapshotTool;
use toolgate_tools::{Fs, Limits};

/// A variable with a secret-looking name that the sandbox passes in.
const SECRET_NAME: &str = "SERVICE_API_TOKEN";
const SECRET_VALUE: &str = "tok-5f1e9c-do-not-show";

#[path = "common/stage2.rs"]
mod stage2;
use stage2::stage2;

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    state: PathBuf,
    workspace: Arc<dyn Workspace>,
    executor: Executor,
    ctx: CallContext,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let root = base.join("root");
        let state = base.join("state");
        std::fs::create_dir_all(&root).unwrap();
        // The host environment the sandbox draws named variables from: set
        // here, so the test never changes this process's environment.
        let mut host_env: BTreeMap<String, String> = BTreeMap::new();
        if let Ok(path) = std::env::var("PATH") {
            host_env.insert("PATH".into(), path);
        }
        host_env.insert("LANG".into(), "C.UTF-8".into());
        host_env.insert(SECRET_NAME.into(), SECRET_VALUE.into());
        host_env.insert("BUILD_FLAVOR".into(), "fast".into());
        let sandbox = Sandbox::new(SandboxConfig::new(stage2(), state.join("sandbox")))
            .unwrap()
            .with_host_env(host_env);
        let workspace: Arc<dyn Workspace> = Arc::new(
            LocalWorkspace::new("agent-7", vec![root.clone()], root.clone(), sandbox).unwrap(),
        );
        let fs = Arc::new(Fs::new(workspace.clone(), Limits::default()));
        let mut facts = RuntimeFacts::new("agent-7", "standard");
        facts.active_tools = Some(Arc::new(|| 42));
        facts.pass_env = vec![SECRET_NAME.into(), "BUILD_FLAVOR".into()];
        let mut registry = Registry::new();
        toolgate_tools::neuron::register_neuron_tools(&mut registry, fs.clone(), facts).unwrap();
        registry
            .register(Arc::new(Typed::new(SnapshotTool::new(
                fs,
                state.join("toolgate"),
            ))))
            .unwrap();
        let home = base.join("home");
        let executor = Executor::builder(registry)
            .policy(Policy::preset(PolicyPreset::Standard, Some(&home)))
            .build();
        let ctx = CallContext::new("call", "agent-7", root.clone()).with_roots(vec![root.clone()]);
        Fixture {
            _dir: dir,
            root,
            state,
            workspace,
            executor,
            ctx,
        }
    }

    async fn call(&self, name: &str, args: Value) -> Result<ToolOutput, String> {
        self.executor
            .call(name, args, &self.ctx)
            .await
            .map(|r| r.output)
            .map_err(|e| e.to_string())
    }

    async fn facts(&self, name: &str, args: Value) -> Value {
        let shown = args.to_string();
        match self.call(name, args).await {
            Ok(output) => output.structured.expect("structured output"),
            Err(e) => panic!("{name} {shown} failed: {e}"),
        }
    }

    fn put(&self, rel: &str, text: &str) {
        let path = self.root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// Runs `script` with bash in the sandbox, in the workspace root.
    async fn sandboxed(&self, script: &str) {
        let outcome = self
            .workspace
            .exec(SandboxCommand::shell(script), None)
            .await
            .unwrap();
        assert_eq!(outcome.outcome.exit_code, 0, "{outcome:#?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_reports_agent_roots_backend_policy_and_tools() {
    let fx = Fixture::new();
    let mut facts = fx.facts("neuron_status", json!({})).await;
    let uptime = facts["uptime_secs"].as_u64().unwrap();
    assert!(uptime < 600, "{uptime}");
    facts["uptime_secs"] = json!(0);
    let backend = facts["sandbox_backend"].as_str().unwrap().to_owned();
    assert!(
        ["bwrap", "landlock"].contains(&backend.as_str()),
        "{backend}"
    );
    assert_eq!(
        facts,
        json!({
            "agent_id": "agent-7",
            "uptime_secs": 0,
            "cwd": fx.root.display().to_string(),
            "roots": [{ "path": fx.root.display().to_string(), "access": "rw", "usable": true }],
            "healthy": true,
            "sandbox_backend": backend,
            "policy_preset": "standard",
            "active_tools": 42,
        })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_takes_no_arguments() {
    let fx = Fixture::new();
    let err = fx
        .call("neuron_status", json!({ "verbose": true }))
        .await
        .unwrap_err();
    // The schema forbids unknown keys, and the message names the key.
    assert!(err.starts_with("invalid arguments"), "{err}");
    assert!(err.contains("unknown field `verbose`"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disk_numbers_are_positive_and_consistent() {
    let fx = Fixture::new();
    let facts = fx.facts("neuron_disk", json!({})).await;
    let roots = facts["roots"].as_array().unwrap();
    assert_eq!(roots.len(), 1);
    let root = &roots[0];
    assert_eq!(root["root"], fx.root.display().to_string());
    let total = root["total_bytes"].as_u64().unwrap();
    let used = root["used_bytes"].as_u64().unwrap();
    let available = root["available_bytes"].as_u64().unwrap();
    assert!(total > 0 && used > 0 && available > 0, "{root}");
    assert!(used + available <= total, "{root}");
    assert_eq!(root["read_only"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_reports_host_memory_and_a_consistent_cgroup() {
    let fx = Fixture::new();
    let facts = fx.facts("neuron_memory", json!({})).await;
    let total = facts["mem_total_bytes"].as_u64().unwrap();
    let available = facts["mem_available_bytes"].as_u64().unwrap();
    let usable = facts["usable_bytes"].as_u64().unwrap();
    assert!(total > 0 && available > 0 && available <= total, "{facts}");
    assert!(usable <= available, "{facts}");
    if let Some(limit) = facts["cgroup"]["limit_bytes"].as_u64() {
        assert!(limit > 0 && usable <= limit, "{facts}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn packages_finds_bash_and_python3_in_the_sandbox() {
    let fx = Fixture::new();
    let facts = fx.facts("neuron_packages", json!({})).await;
    let found = facts["found"].as_array().unwrap();
    for name in ["bash", "python3"] {
        let package = found
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("{name} not found in the sandbox: {facts:#}"));
        let version = package["version"].as_str().unwrap_or_default();
        assert!(
            version.split('.').next().unwrap().parse::<u32>().is_ok() && version.contains('.'),
            "{name}: {package}"
        );
        assert!(
            package["path"].as_str().unwrap().starts_with('/'),
            "{package}"
        );
    }
    // Every probed name is reported, found or missing, never dropped.
    let missing = facts["missing"].as_array().unwrap();
    let probed = found.len() + missing.len();
    assert!(probed >= 30, "{facts:#}");
    // The second call answers from the cache, identically.
    assert_eq!(fx.facts("neuron_packages", json!({})).await, facts);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn env_shows_the_sandbox_environment_with_secrets_redacted() {
    let fx = Fixture::new();
    let output = fx.call("neuron_env", json!({})).await.unwrap();
    let text = output.joined_text();
    let facts = output.structured.unwrap();
    let vars = &facts["vars"];
    assert_eq!(vars[SECRET_NAME], REDACTED, "{facts:#}");
    assert_eq!(vars["BUILD_FLAVOR"], "fast", "{facts:#}");
    assert_eq!(vars["LANG"], "C.UTF-8", "{facts:#}");
    assert!(vars["PATH"].as_str().is_some_and(|p| !p.is_empty()));
    assert_eq!(facts["redacted"], json!([SECRET_NAME]));
    assert!(!text.contains(SECRET_VALUE), "{text}");
    assert!(!facts.to_string().contains(SECRET_VALUE), "{facts}");
    assert!(
        text.contains(&format!("{SECRET_NAME}={REDACTED}\n")),
        "{text}"
    );
}

#[test]
fn redaction_rules() {
    for name in [
        "GITHUB_TOKEN",
        "aws_secret_access_key",
        "Api_Key",
        "PGPASSWORD",
        "SMB_PASSWD",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "HTTP_AUTH",
        "COOKIE",
        "SESSION_ID",
        "PRIVATE_PEM",
    ] {
        assert!(is_secret_name(name), "{name}");
        assert_eq!(redact(name, "value"), REDACTED, "{name}");
    }
    for name in ["PATH", "HOME", "LANG", "TERM", "CARGO_HOME"] {
        assert!(!is_secret_name(name), "{name}");
        assert_eq!(redact(name, "/usr/bin"), "/usr/bin", "{name}");
    }
    assert_eq!(
        redact("PIP_INDEX_URL", "https://me:pw@pypi.example/simple"),
        "https://[redacted]@pypi.example/simple"
    );
}

/// The tree both snapshot tests start from: tracked files, a hidden one,
/// ignored ones and `.git`.
fn seed(fx: &Fixture) {
    fx.put(".gitignore", "build/\n*.tmp\n");
    fx.put(".hidden", "h\n");
    fx.put("keep.txt", "keep\n");
    fx.put("change.txt", "before\n");
    fx.put("same-size.txt", "abcd");
    fx.put("gone.txt", "bye\n");
    fx.put("dir/nested.txt", "n\n");
    fx.put("build/out.bin", "ignored\n");
    fx.put("scratch.tmp", "ignored\n");
    fx.put(".git/HEAD", "ref: refs/heads/main\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_diff_names_exactly_what_a_sandboxed_command_changed() {
    let fx = Fixture::new();
    seed(&fx);
    let first = fx.facts("snapshot", json!({})).await;
    let id = first["id"].as_str().unwrap().to_owned();
    assert_eq!(first["files"], 7, "{first:#}");

    // The manifest on disk, outside the workspace, in the directory of this
    // workspace's scope (its only one): ignored files and .git absent.
    let scopes: Vec<_> = std::fs::read_dir(fx.state.join("toolgate/snapshots/agent-7"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(scopes.len(), 1, "{scopes:?}");
    let stored: Value =
        serde_json::from_slice(&std::fs::read(scopes[0].join(format!("{id}.json"))).unwrap())
            .unwrap();
    let paths: Vec<&str> = stored["files"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        paths,
        [
            ".gitignore",
            ".hidden",
            "change.txt",
            "dir/nested.txt",
            "gone.txt",
            "keep.txt",
            "same-size.txt"
        ]
    );
    let keep_sha: String = sha2::Sha256::digest(b"keep\n")
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(stored["files"]["keep.txt"]["sha256"], keep_sha);
    assert_eq!(stored["files"]["keep.txt"]["size"], 5);

    fx.sandboxed(
        "set -e
         echo new > added.txt
         mkdir -p sub && echo n > sub/new.txt
         echo more >> change.txt
         printf ABCD > same-size.txt
         rm gone.txt
         echo x > build/more.bin
         echo x > other.tmp",
    )
    .await;

    let second = fx.facts("snapshot", json!({ "checkpoint": id })).await;
    assert_eq!(
        json!({
            "compared_with": second["compared_with"],
            "added": second["added"],
            "modified": second["modified"],
            "deleted": second["deleted"],
            "counts": second["counts"],
            "truncated": second["truncated"],
        }),
        json!({
            "compared_with": id,
            "added": ["added.txt", "sub/new.txt"],
            "modified": ["change.txt", "same-size.txt"],
            "deleted": ["gone.txt"],
            "counts": { "added": 2, "modified": 2, "deleted": 1 },
            "truncated": false,
        })
    );
    // A new checkpoint was recorded too, and nothing changed since it.
    let new_id = second["id"].as_str().unwrap().to_owned();
    assert_ne!(new_id, id);
    let third = fx.facts("snapshot", json!({ "checkpoint": new_id })).await;
    assert_eq!(
        third["counts"],
        json!({ "added": 0, "modified": 0, "deleted": 0 })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_unknown_checkpoint_names_the_known_ones() {
    let fx = Fixture::new();
    seed(&fx);
    let err = fx
        .call("snapshot", json!({ "checkpoint": "nope" }))
        .await
        .unwrap_err();
    assert!(err.contains("no checkpoints yet"), "{err}");
    let id = fx.facts("snapshot", json!({})).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    for bad in ["nope", "../agent-7/x", "/etc/passwd"] {
        let err = fx
            .call("snapshot", json!({ "checkpoint": bad }))
            .await
            .unwrap_err();
        assert!(
            err.contains(&format!("unknown checkpoint `{bad}`")) && err.contains(&id),
            "{err}"
        );
    }
}

//! Per-call cost of the `bash` tool running `true` inside a long-running
//! process (the MCP server's case), side by side in one group with its
//! parts:
//!   - `no sandbox bash -c true`: tokio::process, the floor any tool pays;
//!   - `no sandbox sh -c true`: the same with dash, the floor of the next one;
//!   - `no sandbox true`: `true` exec'd directly, no shell (what a Python MCP
//!     shell server such as mcp-shell-server does);
//!   - `sandbox sh -c true`: `Sandbox::run` alone (probe, plan, bubblewrap,
//!     stage 2) for a temp root;
//!   - `bash tool true`: `Executor::call("bash", {"command": "true"})`, the
//!     whole pipeline: validation, policy (with the tree-sitter parse of the
//!     command), the sandboxed `bash -c true`, output shaping.
//!
//! Needs the stage-2 binary next to the bench executable:
//! `cargo build --release -p toolgate --bin toolgate-stage2` before
//! `cargo bench` (without `--release` before `cargo test --benches`). Run as
//! root or where user namespaces work (else the sandbox falls back to
//! Landlock, and the result says which backend ran).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use toolgate_core::{CallContext, Registry};
use toolgate_policy::{Executor, Policy};
use toolgate_sandbox::{LocalWorkspace, Sandbox, SandboxCommand, SandboxConfig, SandboxSpec};
use toolgate_tools::process::ProcessConfig;
use toolgate_tools::{Fs, Limits, RuntimeConfig, register_runtime_tools};

/// `toolgate-stage2` in the target directory of this bench executable
/// (`target/<profile>/deps/bash-<hash>`): cargo builds the binaries of the
/// crate under test only, so stage 2 must be built beforehand.
fn stage2() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    let candidates: Vec<PathBuf> = [deps.parent(), Some(deps)]
        .into_iter()
        .flatten()
        .map(|dir| dir.join("toolgate-stage2"))
        .collect();
    if let Some(found) = candidates.iter().find(|p| p.is_file()) {
        return found.clone();
    }
    panic!(
        "the stage-2 binary is not built (looked for {}); build it first: \
         `cargo build --release -p toolgate --bin toolgate-stage2` before `cargo bench`, \
         or `cargo build -p toolgate --bin toolgate-stage2` before `cargo test --benches` \
         (with the same CARGO_TARGET_DIR)",
        candidates
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(" or ")
    );
}

fn executor(root: &Path, sandbox: Sandbox, logs: PathBuf) -> Executor {
    let ws = LocalWorkspace::new("bench", vec![root.to_owned()], root.to_owned(), sandbox).unwrap();
    let fs = Arc::new(Fs::new(Arc::new(ws), Limits::default()));
    let mut processes = ProcessConfig::default();
    processes.log_dir = logs;
    let mut registry = Registry::new();
    register_runtime_tools(&mut registry, fs, RuntimeConfig::default(), processes).unwrap();
    Executor::builder(registry)
        .policy(Policy::standard())
        .build()
}

/// `argv` without any sandbox, output captured the way the sandbox's runner
/// captures it (pipes, read to the end).
async fn unsandboxed(argv: &[&str]) {
    let out = tokio::process::Command::new(argv[0])
        .args(&argv[1..])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(out.status.success());
}

fn bench(c: &mut Criterion) {
    let stage2 = stage2();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let root = base.join("root");
    let logs = base.join("logs");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&logs).unwrap();
    let config = SandboxConfig::new(stage2, base.join("state"));
    let sandbox = Sandbox::new(config.clone()).unwrap();
    let spec = SandboxSpec::for_root(root.clone());
    let executor = executor(&root, Sandbox::new(config).unwrap(), logs);
    let ctx = CallContext::new("bench", "bench", root.clone());
    let args = json!({"command": "true"});

    // One call up front: it must run, in a real sandbox, before it is timed.
    let first = runtime
        .block_on(executor.call("bash", args.clone(), &ctx))
        .unwrap_or_else(|e| panic!("the bash tool refused `true`: {e}"));
    let facts = first.output.structured.unwrap_or_default();
    assert_eq!(facts["exit_code"], json!(0), "{facts}");
    assert_ne!(facts["backend"], json!("none"), "{facts}");
    eprintln!("bash tool backend: {}", facts["backend"]);

    let mut group = c.benchmark_group("bash true");
    // 30 samples of a ~20 ms sandboxed spawn need ~10 s.
    group
        .sample_size(30)
        .measurement_time(Duration::from_secs(12));
    group.bench_function("no sandbox bash -c true", |b| {
        b.iter(|| runtime.block_on(unsandboxed(&["bash", "-c", "true"])))
    });
    group.bench_function("no sandbox sh -c true", |b| {
        b.iter(|| runtime.block_on(unsandboxed(&["sh", "-c", "true"])))
    });
    group.bench_function("no sandbox true", |b| {
        b.iter(|| runtime.block_on(unsandboxed(&["true"])))
    });
    group.bench_function("sandbox sh -c true", |b| {
        b.iter(|| {
            let outcome = runtime
                .block_on(sandbox.run(&spec, SandboxCommand::new(["sh", "-c", "true"])))
                .unwrap();
            assert_eq!(outcome.outcome.exit_code, 0);
        })
    });
    group.bench_function("bash tool true", |b| {
        b.iter(|| {
            let result = runtime
                .block_on(executor.call("bash", args.clone(), &ctx))
                .unwrap();
            black_box(result);
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

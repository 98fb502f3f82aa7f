//! Per-call cost of a sandboxed `sh -c true` inside a long-running process
//! (the MCP server's case), side by side with the same command spawned bare
//! and in a plain bubblewrap with the same namespaces, all through the same
//! runner; and in a sandbox started ahead of it (`SandboxConfig::pool`, as
//! servers run: the pooled sandbox is made ready before each timed call,
//! untimed, as it is while an agent reads an answer). Run as root or where
//! user namespaces work.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use toolgate_sandbox::runner::{ExecRequest, run};
use toolgate_sandbox::{Sandbox, SandboxCommand, SandboxConfig, SandboxSpec};

fn plain_bwrap(root: &std::path::Path) -> ExecRequest {
    let mut request = ExecRequest::new("/usr/bin/bwrap").args([
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--unshare-net",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--clearenv",
    ]);
    for path in ["/usr", "/etc", "/opt", "/bin", "/sbin", "/lib", "/lib64"] {
        let p = std::path::Path::new(path);
        match std::fs::read_link(p) {
            Ok(target) => {
                request = request.args(["--symlink".into(), target.into_os_string(), path.into()])
            }
            Err(_) if p.is_dir() => request = request.args(["--ro-bind", path, path]),
            Err(_) => {}
        }
    }
    request
        .args([
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--bind",
        ])
        .arg(root)
        .arg(root)
        .args(["--", "sh", "-c", "true"])
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let sandbox = Sandbox::new(SandboxConfig::new(
        PathBuf::from(env!("CARGO_BIN_EXE_toolgate-sandbox-stage2")),
        dir.path().join("state"),
    ))
    .unwrap();
    let spec = SandboxSpec::for_root(root.clone());

    let mut group = c.benchmark_group("spawn sh -c true");
    group
        .sample_size(40)
        .measurement_time(Duration::from_secs(8));
    group.bench_function("bare", |b| {
        b.iter(|| {
            runtime
                .block_on(run(ExecRequest::new("sh")
                    .args(["-c", "true"])
                    .env("PATH", "/usr/bin:/bin")))
                .unwrap()
        })
    });
    group.bench_function("plain bwrap", |b| {
        b.iter(|| runtime.block_on(run(plain_bwrap(&root))).unwrap())
    });
    group.bench_function("toolgate sandbox", |b| {
        b.iter(|| {
            let outcome = runtime
                .block_on(sandbox.run(&spec, SandboxCommand::new(["sh", "-c", "true"])))
                .unwrap();
            assert_eq!(outcome.outcome.exit_code, 0);
        })
    });
    let pooled = Sandbox::new(
        SandboxConfig::new(
            PathBuf::from(env!("CARGO_BIN_EXE_toolgate-sandbox-stage2")),
            dir.path().join("state"),
        )
        .pool(),
    )
    .unwrap();
    group.bench_function("toolgate sandbox, started ahead", |b| {
        b.iter_custom(|iterations| {
            let mut total = Duration::ZERO;
            for _ in 0..iterations {
                assert!(runtime.block_on(pooled.warm(&spec)).unwrap(), "not pooled");
                let started = std::time::Instant::now();
                let outcome = runtime
                    .block_on(pooled.run(&spec, SandboxCommand::new(["sh", "-c", "true"])))
                    .unwrap();
                total += started.elapsed();
                assert_eq!(outcome.outcome.exit_code, 0);
            }
            total
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

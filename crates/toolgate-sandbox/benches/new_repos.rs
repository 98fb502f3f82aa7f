//! What the check for repositories a command created costs after every
//! run: a sandboxed `true` in a repository of 10,000 files (100
//! directories), under each backend, where the check is one more walk of
//! the root; the same with a command that makes a new repository (`git
//! init`), whose config is then read by host git; and the walk alone.
//! Run it with the check disabled to see its share of a run.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use criterion::{Criterion, criterion_group, criterion_main};
use toolgate_sandbox::repos::scan_root_parallel;
use toolgate_sandbox::{BackendChoice, Sandbox, SandboxCommand, SandboxConfig, SandboxSpec};

/// A repository with `dirs` directories of `files` files each.
fn build_repo(root: &Path, dirs: usize, files: usize) {
    for d in 0..dirs {
        let dir = root.join(format!("src/m{}/d{d}", d % 10));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..files {
            std::fs::write(dir.join(format!("f{f}.rs")), "fn main() {}\n").unwrap();
        }
    }
    let status = Command::new("git")
        .args(["init", "-q"])
        .current_dir(root)
        .status()
        .unwrap();
    assert!(status.success());
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let root = base.join("repo");
    build_repo(&root, 100, 100);
    let mut group = c.benchmark_group("new_repos");
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    group.bench_function("walk_10k_files", |b| {
        b.iter(|| scan_root_parallel(&root, usize::MAX, threads).unwrap())
    });
    for (backend, label) in [
        (BackendChoice::Bwrap, "bwrap"),
        (BackendChoice::Landlock, "landlock"),
    ] {
        let config = SandboxConfig::new(
            PathBuf::from(env!("CARGO_BIN_EXE_toolgate-sandbox-stage2")),
            base.join(format!("state-{label}")),
        )
        .backend(backend);
        let sandbox = Sandbox::new(config).unwrap();
        let spec = SandboxSpec::for_root(&root);
        group.bench_function(format!("{label}/true_in_10k_files"), |b| {
            b.iter(|| {
                runtime
                    .block_on(sandbox.run(&spec, SandboxCommand::shell("true")))
                    .unwrap()
            })
        });
        // The new repository goes again before the next run (not timed),
        // so every run makes one.
        let new = root.join("new");
        group.bench_function(format!("{label}/git_init_in_10k_files"), |b| {
            b.iter_batched(
                || {
                    let _ = std::fs::remove_dir_all(&new);
                },
                |()| {
                    let outcome = runtime
                        .block_on(sandbox.run(&spec, SandboxCommand::shell("git init -q new")))
                        .unwrap();
                    assert_eq!(outcome.outcome.exit_code, 0, "{outcome:?}");
                },
                criterion::BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench
}
criterion_main!(benches);

//! One call of each file tool, in process, through the whole Executor
//! (validation, policy, the tool, output bounding) on a real directory:
//! the cost an agent pays per call before any MCP transport.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use toolgate_core::{CallContext, Registry};
use toolgate_policy::{Executor, Policy};
use toolgate_sandbox::{LocalWorkspace, Sandbox, SandboxConfig, Workspace};
use toolgate_tools::{Fs, Limits, register_fs_tools};

/// A small source tree: `src/` with 200 files, one 2000-line file.
fn tree(root: &Path) {
    std::fs::create_dir_all(root.join("src/nested")).unwrap();
    for i in 0..200 {
        let body = format!("// file {i}\nfn f{i}() -> u32 {{\n    {i}\n}}\n");
        std::fs::write(root.join(format!("src/m{i:03}.rs")), body).unwrap();
    }
    let mut long = String::new();
    for i in 0..2000 {
        writeln!(
            long,
            "line {i}: the quick brown fox jumps over the lazy dog"
        )
        .unwrap();
    }
    std::fs::write(root.join("big.txt"), long).unwrap();
}

fn executor(root: &Path, state: PathBuf) -> Executor {
    let sandbox = Sandbox::new(SandboxConfig::new(PathBuf::from("/nonexistent"), state)).unwrap();
    let ws = LocalWorkspace::new("bench", vec![root.to_owned()], root.to_owned(), sandbox).unwrap();
    let mut registry = Registry::new();
    register_fs_tools(
        &mut registry,
        Arc::new(Fs::new(Arc::new(ws), Limits::default())),
    )
    .unwrap();
    Executor::builder(registry)
        .policy(Policy::standard())
        .build()
}

/// Each case, `(id, tool, args)`, as one benchmark of `group`: the call
/// through the whole Executor.
fn bench_cases(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    rt: &tokio::runtime::Runtime,
    executor: &Executor,
    ctx: &CallContext,
    cases: &[(&str, &str, Value)],
) {
    for (id, tool, args) in cases {
        group.bench_function(*id, |b| {
            b.iter(|| {
                let out = rt.block_on(executor.call(tool, args.clone(), ctx)).unwrap();
                black_box(out);
            });
        });
    }
}

/// The runtime the calls are driven on (multi-threaded, as in `toolgate mcp`).
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn calls(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap().join("root");
    tree(&root);
    let executor = executor(&root, tmp.path().join("state"));
    let ctx = CallContext::new("bench", "bench", root.clone());
    let rt = runtime();
    let mut group = c.benchmark_group("fs_tools");
    let cases: [(&str, &str, Value); 8] = [
        ("read_2000_lines", "read", json!({"path": "big.txt"})),
        (
            "read_page_of_10",
            "read",
            json!({"path": "big.txt", "offset": 1000, "limit": 10}),
        ),
        ("ls_200_entries", "ls", json!({"path": "src"})),
        ("ls_tree_depth_3", "ls", json!({"depth": 3})),
        ("find_glob_200_files", "find", json!({"pattern": "*.rs"})),
        (
            "grep_literal_201_files",
            "grep",
            json!({"pattern": "fn f1", "fixed_strings": true}),
        ),
        (
            "grep_regex_201_files",
            "grep",
            json!({"pattern": r"fn f\d+\(\)", "limit": 10}),
        ),
        (
            "edit_dry_run_2000_lines",
            "edit",
            json!({"path": "big.txt", "old_text": "line 1500:", "new_text": "LINE 1500:", "dry_run": true}),
        ),
    ];
    bench_cases(&mut group, &rt, &executor, &ctx, &cases);
    group.finish();
}

/// The small calls of `bench/mcp-servers.sh`, in process: a 2 KB file and a
/// directory of 50 small files (what the whole-process comparison measures
/// over MCP, minus the transport).
fn small_calls(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap().join("root");
    std::fs::create_dir_all(root.join("dir50")).unwrap();
    let mut small = String::from("SMALL_FIRST_LINE_MARKER\n");
    for i in 0..38 {
        writeln!(
            small,
            "line {i:03} of a small text file, about two kilobytes"
        )
        .unwrap();
    }
    small.push_str("SMALL_LAST_LINE_MARKER\n");
    std::fs::write(root.join("small.txt"), small).unwrap();
    for i in 0..50 {
        std::fs::write(
            root.join(format!("dir50/entry_{i:02}.txt")),
            format!("entry {i}\n"),
        )
        .unwrap();
    }
    let executor = executor(&root, tmp.path().join("state"));
    let ctx = CallContext::new("bench", "bench", root.clone());
    let rt = runtime();
    let mut group = c.benchmark_group("fs_small");
    let cases: [(&str, &str, Value); 2] = [
        ("read_2kb_file", "read", json!({"path": "small.txt"})),
        ("ls_50_entries", "ls", json!({"path": "dir50"})),
    ];
    bench_cases(&mut group, &rt, &executor, &ctx, &cases);
    // The stages of the `ls` call: the jail's listing alone (one getdents
    // and an lstat per entry), and the call's result written as JSON (its
    // text and facts, as the transport sends them).
    let ws = LocalWorkspace::new(
        "bench",
        vec![root.clone()],
        root.clone(),
        Sandbox::new(SandboxConfig::new(
            PathBuf::from("/nonexistent"),
            tmp.path().join("state"),
        ))
        .unwrap(),
    )
    .unwrap();
    let (jail, rel) = ws.jail_for(Path::new("dir50")).unwrap();
    group.bench_function("ls_50_entries_jail_list", |b| {
        b.iter(|| black_box(jail.list(&rel).unwrap()));
    });
    let listed = rt
        .block_on(executor.call("ls", json!({"path": "dir50"}), &ctx))
        .unwrap()
        .output;
    group.bench_function("ls_50_entries_result_to_json", |b| {
        b.iter(|| black_box(serde_json::to_vec(&listed).unwrap()));
    });
    group.finish();
}

/// Paging deep into a 50 MB log: the first call scans the whole file (line
/// count, sha256); later calls of the same tool seek to the page using what
/// that scan noted.
fn large_file(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let mut log = String::new();
    let mut n = 0;
    while log.len() < 50 << 20 {
        n += 1;
        writeln!(log, "2026-12-02T14:00:00Z INFO request {n} served in 3 ms").unwrap();
    }
    std::fs::write(root.join("huge.log"), log).unwrap();
    // Facts are kept only for files whose last change is over a second old.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let ctx = CallContext::new("bench", "bench", root.clone());
    let rt = runtime();
    let args = json!({"path": "huge.log", "offset": n - 500, "limit": 100});
    let call = |executor: &Executor| {
        let out = rt
            .block_on(executor.call("read", args.clone(), &ctx))
            .unwrap();
        black_box(out);
    };
    let mut group = c.benchmark_group("read_50mb");
    group.sample_size(10);
    group.bench_function("page_near_the_end_first_call", |b| {
        b.iter_batched(
            || executor(&root, tmp.path().join("state")),
            |executor| call(&executor),
            criterion::BatchSize::PerIteration,
        );
    });
    let warm = executor(&root, tmp.path().join("state"));
    call(&warm);
    group.bench_function("page_near_the_end_later_calls", |b| {
        b.iter(|| call(&warm));
    });
    group.finish();
}

criterion_group!(benches, calls, small_calls, large_file);
criterion_main!(benches);

//! What the per-command search for nested repositories costs: one walk of
//! a node_modules-like tree (50,000 files in 10,000 directories, two
//! nested repositories), and the same tree at 200,000 files, on one thread
//! and on as many as the plan uses (the machine's cores, at most 8); then
//! what a long-lived process pays (`repos::watched`): a walk that watches
//! every directory (after a change, here a directory made and removed), and
//! the kept walk given out again when nothing changed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use toolgate_sandbox::repos::{RealDirs, scan_root, scan_root_parallel, watched};

/// `dirs` package directories of `files_per_dir` files each, three levels
/// deep like `node_modules/@scope/pkg/lib`, with two nested repositories.
fn build_tree(root: &Path, dirs: usize, files_per_dir: usize) {
    for d in 0..dirs {
        let dir = root
            .join("node_modules")
            .join(format!("@s{}", d % 50))
            .join(format!("pkg{d}"))
            .join("lib");
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..files_per_dir {
            std::fs::write(dir.join(format!("f{f}.js")), "").unwrap();
        }
    }
    for repo in ["vendor/a/.git/hooks", "node_modules/@s1/pkg1/.git/hooks"] {
        std::fs::create_dir_all(root.join(repo)).unwrap();
    }
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("nested_scan");
    for (dirs, label) in [(5_000, "50k_files"), (20_000, "200k_files")] {
        let tmp = tempfile::tempdir().unwrap();
        build_tree(tmp.path(), dirs, 10);
        let root = tmp.path().to_owned();
        // Warm: the walk runs before every command, on a tree just used.
        let found = scan_root(&root, usize::MAX, &RealDirs).unwrap();
        assert_eq!(found.repos.len(), 2, "{found:?}");
        group.bench_function(format!("{label}/1_thread"), |b| {
            b.iter(|| scan_root(&root, usize::MAX, &RealDirs).unwrap())
        });
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
        group.bench_function(format!("{label}/{threads}_threads"), |b| {
            b.iter(|| scan_root_parallel(&root, usize::MAX, threads).unwrap())
        });
        let change = root.join("changed");
        group.bench_function(format!("{label}/changed_then_watched_walk"), |b| {
            b.iter(|| {
                std::fs::create_dir(&change).unwrap();
                std::fs::remove_dir(&change).unwrap();
                watched::scan(&root, usize::MAX).unwrap()
            })
        });
        watched::scan(&root, usize::MAX).unwrap();
        group.bench_function(format!("{label}/kept"), |b| {
            b.iter(|| watched::scan(&root, usize::MAX).unwrap())
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

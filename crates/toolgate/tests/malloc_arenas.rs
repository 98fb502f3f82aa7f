//! A long-running `toolgate mcp` allocates in at most one glibc malloc arena
//! per core (main.rs `tune_malloc`), whatever threads its `find` and
//! `grep` walks start, unless the user set their own limit. Each arena keeps
//! what it touched after its thread has gone, so glibc's default of eight
//! per core left megabytes resident in a server.
//!
//! glibc places each arena other than the main one at the start of a 64 MiB
//! reservation aligned to 64 MiB: a read-write mapping, the rest of the
//! reservation inaccessible after it. That is what is counted here.

#![cfg(all(target_os = "linux", target_env = "gnu"))]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "common/stdio_client.rs"]
mod stdio_client;

use serde_json::json;

use stdio_client::{McpServer, Project};

const HEAP: u64 = 64 << 20;

/// The malloc arenas of `pid` other than the main one.
fn thread_arenas(pid: u32) -> usize {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let regions: Vec<(u64, u64, &str, bool)> = maps
        .lines()
        .map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (start, end) = fields[0].split_once('-').unwrap();
            let start = u64::from_str_radix(start, 16).unwrap();
            let end = u64::from_str_radix(end, 16).unwrap();
            (start, end, fields[1], fields.len() == 5)
        })
        .collect();
    regions
        .iter()
        .enumerate()
        .filter(|(i, (start, end, perms, anonymous))| {
            let rest = regions
                .get(i + 1)
                .filter(|next| next.0 == *end && next.2 == "---p")
                .map_or(0, |next| next.1 - next.0);
            *anonymous && *perms == "rw-p" && start % HEAP == 0 && end - start + rest == HEAP
        })
        .count()
}

/// A server in a project of 40 directories of 10 files each, after walks that
/// start worker threads again and again; its thread arenas.
fn arenas_after_walks(malloc_arena_max: Option<&str>) -> usize {
    let project = Project::new();
    for d in 0..40 {
        let dir = project.root.join(format!("dir{d:02}"));
        std::fs::create_dir(&dir).unwrap();
        for f in 0..10 {
            std::fs::write(
                dir.join(format!("f{f}.rs")),
                format!("fn f{f}() {{}} // TODO {d}\n"),
            )
            .unwrap();
        }
    }
    let mut cmd = common::toolgate(project.base.path(), &project.root);
    cmd.arg("mcp");
    if let Some(max) = malloc_arena_max {
        cmd.env("MALLOC_ARENA_MAX", max);
    }
    let mut server = McpServer::start(cmd);
    for _ in 0..10 {
        let (found, _) = server.call("find", json!({"pattern": "**/*.rs", "limit": 1000}));
        assert!(found.contains("dir39/f9.rs"), "{found}");
        let (matches, _) = server.call("grep", json!({"pattern": "TODO"}));
        assert!(matches.contains("dir00/f0.rs:1:"), "{matches}");
        server.call("read", json!({"path": "dir00/f0.rs"}));
    }
    thread_arenas(server.child.id())
}

#[test]
fn a_server_allocates_in_one_arena_per_core_and_a_users_limit_stands() {
    let cores = std::thread::available_parallelism().unwrap().get().max(2);
    let arenas = arenas_after_walks(None);
    assert!(
        (1..cores).contains(&arenas),
        "{arenas} thread arenas on {cores} cores: at most one arena per core, the main one included"
    );
    // The user's own limit is not overridden: one arena, the main one.
    assert_eq!(
        arenas_after_walks(Some("1")),
        0,
        "MALLOC_ARENA_MAX=1 was overridden"
    );
}

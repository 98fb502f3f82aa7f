//! Attack: the server is killed outright (SIGKILL: no destructor runs, no process
//! group is signalled) while a background process runs, and the process lives on
//! unsupervised: a command ticking into a file every 100 ms and a child it
//! double-forked into a session of its own (`setsid`), the classic daemon. Right
//! after `process_start` returned (bubblewrap is still setting up its mounts, its
//! own parent-death signal not yet armed) and once both tick; under bubblewrap and
//! under the landlock backend. After the kill no process of the command may remain
//! and neither file may grow; the dead server's log directory is swept by the next.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "common/stdio_client.rs"]
mod stdio_client;

use std::path::{Path, PathBuf};
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::json;

use stdio_client::{McpServer, Project, eventually, processes_with, state_dir, unique};

// How these tests start the server, and what they read of the project.
impl Project {
    fn server(&self, backend: Backend) -> McpServer {
        let mut cmd = common::toolgate(self.base.path(), &self.root);
        if let Backend::Landlock = backend {
            cmd.env("TOOLGATE_SANDBOX_BACKEND", "landlock");
        }
        cmd.arg("mcp");
        McpServer::start(cmd)
    }

    fn size(&self, file: &str) -> Option<u64> {
        std::fs::metadata(self.root.join(file))
            .ok()
            .map(|m| m.len())
    }
}

#[derive(Debug, Clone, Copy)]
enum Backend {
    Bwrap,
    Landlock,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum When {
    /// At once after process_start returned.
    RightAfterStart,
    /// Once the command and its daemon both wrote.
    WhileBothTick,
}

/// The directories of process logs in the state dir.
fn log_dirs(base: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(state_dir(base).join("processes")) else {
        return Vec::new();
    };
    entries.map_while(Result::ok).map(|e| e.path()).collect()
}

fn a_killed_server_leaves_nothing_running(backend: Backend, when: When) {
    let p = Project::new();
    let marker = unique("zzdeath");
    // The daemon's own command line carries the marker too: `D=...d`.
    let script = format!(
        "M={marker}; (setsid bash -c 'D={marker}d; while :; do echo d >> daemon.txt; \
         sleep 0.1; done' &); while :; do echo t >> tick.txt; sleep 0.1; done"
    );
    let mut server = p.server(backend);
    let (text, facts) = server.call("process_start", json!({ "command": script }));
    assert!(text.contains("Started process"), "{text}");
    assert_eq!(
        facts["backend"],
        json!(match backend {
            Backend::Bwrap => "bwrap",
            Backend::Landlock => "landlock",
        })
    );
    if when == When::WhileBothTick {
        let ticking = eventually(Duration::from_secs(30), || {
            p.size("tick.txt").is_some_and(|n| n > 2) && p.size("daemon.txt").is_some_and(|n| n > 2)
        });
        assert!(
            ticking,
            "the command never ran: {:?}",
            processes_with(&marker)
        );
        // The daemon runs, in a session of its own (else the test proves little).
        let daemon = format!(": bash -c D={marker}d;");
        let daemons: Vec<String> = processes_with(&marker)
            .into_iter()
            .filter(|p| p.contains(&daemon))
            .collect();
        assert_eq!(daemons.len(), 1, "{daemons:?}");
        let pid = daemons[0].split(':').next().unwrap();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 1..]
            .split_whitespace()
            .collect();
        assert_eq!(fields[3], pid, "the daemon leads its session: {stat}");
    }

    // Not reaped until the end of the checks: the dead server's pid stays taken (a
    // zombie), so no other toolgate starting meanwhile on this machine takes its
    // leftovers for a dead server's and sweeps them: only what this server arranged
    // before it died may end its commands.
    server.child.kill().unwrap();

    let gone = eventually(Duration::from_secs(30), || {
        processes_with(&marker).is_empty()
    });
    assert!(
        gone,
        "processes outlived the SIGKILLed server: {:?}",
        processes_with(&marker)
    );
    let before = (p.size("tick.txt"), p.size("daemon.txt"));
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        (p.size("tick.txt"), p.size("daemon.txt")),
        before,
        "something still writes after the server died"
    );

    server.child.wait().unwrap();

    // Nobody removed the dead server's logs; the next server does, at its first start.
    let left = log_dirs(p.base.path());
    assert_eq!(left.len(), 1, "{left:?}");
    let mut next = p.server(backend);
    next.call("process_start", json!({"command": "true"}));
    let now = log_dirs(p.base.path());
    assert!(
        !now.contains(&left[0]),
        "the dead server's logs were kept: {now:?}"
    );
    assert_eq!(now.len(), 1, "{now:?}");
}

#[test]
fn a_server_killed_right_after_process_start_leaves_nothing_under_bwrap() {
    a_killed_server_leaves_nothing_running(Backend::Bwrap, When::RightAfterStart);
}

#[test]
fn a_server_killed_while_its_process_and_daemon_tick_leaves_nothing_under_bwrap() {
    a_killed_server_leaves_nothing_running(Backend::Bwrap, When::WhileBothTick);
}

#[test]
fn a_server_killed_right_after_process_start_leaves_nothing_under_landlock() {
    a_killed_server_leaves_nothing_running(Backend::Landlock, When::RightAfterStart);
}

#[test]
fn a_server_killed_while_its_process_and_daemon_tick_leaves_nothing_under_landlock() {
    a_killed_server_leaves_nothing_running(Backend::Landlock, When::WhileBothTick);
}

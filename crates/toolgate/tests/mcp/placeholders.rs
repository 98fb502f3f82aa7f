//! What the host sees of the sandbox's masks through the real server: a
//! background process keeps its placeholders while it runs, host git in a
//! root below a host repository still works meanwhile, and when the server
//! is SIGKILLed (so it removes nothing) the next toolgate start does.

use std::path::Path;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::{Project, common, processes_with, spawn_piped, unique, wait_until};

fn git(dir: &Path, args: &[&str]) -> String {
    let o = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Pids of live processes whose command line contains `needle`.
fn pids_with(needle: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().map_while(Result::ok) {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(raw) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if String::from_utf8_lossy(&raw)
            .replace('\0', " ")
            .contains(needle)
        {
            pids.push(pid);
        }
    }
    pids
}

#[test]
fn placeholders_of_a_killed_server_are_gone_after_the_next_start() {
    let p = Project::new();
    let repo = p.root();
    let root = repo.join("sub");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("tracked.txt"), "x\n").unwrap();
    git(repo, &["init", "-q"]);
    git(repo, &["add", "."]);
    let status_before = git(repo, &["status", "--porcelain"]);

    let mut cmd = common::toolgate(p.base(), &root);
    cmd.arg("mcp");
    let (mut child, stdin, stdout, stderr) = spawn_piped(cmd);
    let mut stdin = stdin.unwrap();
    let mut next_id = 0;
    let mut request = |method: &str, params: Value| -> Value {
        use std::io::Write;
        next_id += 1;
        let message = json!({"jsonrpc": "2.0", "id": next_id, "method": method, "params": params});
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
        loop {
            let Some(line) = stdout.next(Duration::from_secs(60)) else {
                panic!(
                    "toolgate mcp stopped answering:\n{}",
                    stderr.rest(Duration::from_secs(5)).join("\n")
                );
            };
            let Ok(reply) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if reply["id"] == next_id && reply.get("method").is_none() {
                return reply;
            }
        }
    };
    request(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "placeholders-test", "version": "0"}}),
    );
    let marker = unique("1000.55");
    let started = request(
        "tools/call",
        json!({"name": "process_start",
               "arguments": {"command": format!("touch started; sleep {marker}")}}),
    );
    assert_eq!(started["result"]["isError"], false, "{started}");
    for _ in 0..200 {
        if root.join("started").exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(root.join("started").exists(), "the process never ran");

    // While it runs, the root's `.git` is an empty directory: host git in
    // the root finds the repository above it, and shows no placeholder.
    let dot_git = std::fs::symlink_metadata(root.join(".git")).unwrap();
    assert!(dot_git.is_dir(), "{dot_git:?}");
    assert_eq!(
        git(&root, &["rev-parse", "--show-toplevel"]).trim(),
        repo.to_str().unwrap()
    );
    assert_eq!(
        git(&root, &["status", "--porcelain"]),
        format!("{status_before}?? sub/started\n")
    );
    let while_running = names(&root);
    assert!(
        while_running.len() > 2,
        "no placeholders: {while_running:?}"
    );

    // A kill leaves toolgate no chance to clean up.
    assert!(
        std::process::Command::new("kill")
            .args(["-KILL", &child.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    wait_until(&mut child, Duration::from_secs(30));
    // Whether the sandbox dies with the server is another test's business;
    // this one needs it gone, so what is left is only placeholders.
    for _ in 0..100 {
        if processes_with(&marker).is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    for pid in pids_with(&format!("sleep {marker}")) {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    for _ in 0..100 {
        if processes_with(&marker).is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        names(&root),
        while_running,
        "the placeholders went away before any toolgate started again"
    );

    // The next start, anywhere, with the same state directory.
    let elsewhere = p.base().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let o = common::toolgate(p.base(), &elsewhere)
        .args(["call", "ls", "{}"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        names(&root),
        vec!["started".to_owned(), "tracked.txt".to_owned()],
        "left on the host after the next start"
    );
    assert_eq!(
        git(repo, &["status", "--porcelain"]),
        format!("{status_before}?? sub/started\n")
    );
}

//! What the host sees of the sandbox's masks through the real server:
//! nothing. While a background process runs (and tries to create protected
//! names), host git in a root below a host repository works as without it,
//! the root holds only what the command made, and when the server is
//! SIGKILLed (so it cleans up nothing) there is nothing to clean up.

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
fn a_background_process_leaves_the_host_view_alone_even_when_the_server_is_killed() {
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
        "arguments": {"command": format!(
            "mkdir .vscode 2>refused || echo made; echo '{{}}' 2>>refused >.mcp.json; \
             touch started; sleep {marker}"
        )}}),
    );
    assert_eq!(started["result"]["isError"], false, "{started}");
    for _ in 0..200 {
        if root.join("started").exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(root.join("started").exists(), "the process never ran");

    // While it runs, the root holds only what the command made: no
    // placeholder for `.git`, so host git in the root finds the repository
    // above it and shows only the command's files.
    let made = vec![
        "refused".to_owned(),
        "started".to_owned(),
        "tracked.txt".to_owned(),
    ];
    assert_eq!(names(&root), made);
    let refused = std::fs::read_to_string(root.join("refused")).unwrap();
    assert_eq!(refused.matches("Permission denied").count(), 2, "{refused}");
    assert_eq!(
        git(&root, &["rev-parse", "--show-toplevel"]).trim(),
        repo.to_str().unwrap()
    );
    assert_eq!(
        git(&root, &["status", "--porcelain"]),
        format!("{status_before}?? sub/refused\n?? sub/started\n")
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
    assert_eq!(names(&root), made, "after the kill");

    // The next start, anywhere, with the same state directory, finds
    // nothing of the run to undo.
    let elsewhere = p.base().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let o = common::toolgate(p.base(), &elsewhere)
        .args(["call", "ls", "{}"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(names(&root), made, "after the next start");
    assert_eq!(
        git(repo, &["status", "--porcelain"]),
        format!("{status_before}?? sub/refused\n?? sub/started\n")
    );
}

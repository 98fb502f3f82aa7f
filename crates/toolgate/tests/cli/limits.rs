//! `[limits]` through the binary: what bash sees, a fork bomb with no policy in its
//! way, an untrusted project file that tries to raise limits, a misspelt key, and the
//! doctor's account of what holds each limit.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use pretty_assertions::assert_eq;

use super::*;

/// Nothing in the policy stands between a command and the limits: no command denies
/// (the built-in ones refuse the classic fork bomb), a permissive policy.
const UNRESTRICTED: &str = "policy = \"permissive\"\n[commands]\ndefaults = false\n";

fn host_tasks() -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .count()
}

fn marked(marker: &str) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read(e.path().join("cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(marker))
                .unwrap_or(false)
        })
        .count()
}

#[test]
fn bash_sees_the_configured_limits_and_a_fork_bomb_stops_at_the_process_cap() {
    let s = Sandbox::new();
    s.write(
        "home/.config/toolgate/config.toml",
        &format!(
            "{UNRESTRICTED}[limits]\nprocesses = 64\nfile_size = \"1MiB\"\nopen_files = 100\ncpu_seconds = 77\n"
        ),
    );
    let o = s.run(&["call", "bash", r#"{"command": "cat /proc/self/limits"}"#]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let limits = stdout(&o);
    for (name, value) in [
        ("Max cpu time", "77"),
        ("Max file size", "1048576"),
        ("Max open files", "100"),
    ] {
        let line = limits
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_default();
        assert_eq!(
            line[name.len()..].split_whitespace().next(),
            Some(value),
            "{limits}"
        );
    }

    let marker = format!("toolgate-cli-bomb-{}", std::process::id());
    let bomb = json!({
        "command": format!("f(){{ $FUNCNAME|$FUNCNAME& }};f; sleep 10 # {marker}"),
        "timeout": 3,
    })
    .to_string();
    let before = host_tasks();
    let most = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (most, done) = (most.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                most.fetch_max(host_tasks(), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let o = s.run(&["call", "bash", &bomb, "--json"]);
    done.store(true, Ordering::Relaxed);
    watcher.join().unwrap();
    // It ran (the policy let it) until its timeout, and forks failed at the cap.
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    let body: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        body.to_string()
            .contains("Resource temporarily unavailable"),
        "{body}"
    );
    let most = most.load(Ordering::Relaxed);
    // Other work on the machine moves the count a little; an unbounded bomb by
    // thousands.
    assert!(
        most <= before + 64 + 200,
        "the host went from {before} to {most} tasks"
    );
    assert_eq!(marked(&marker), 0, "the bomb left processes behind");
}

#[test]
fn an_untrusted_project_file_cannot_raise_limits_or_turn_cgroups_off() {
    let s = Sandbox::new();
    s.write(
        "project/toolgate.toml",
        "[limits]\nprocesses = \"unlimited\"\nmemory = \"1TiB\"\ncgroups = false\nopen_files = 50\n",
    );
    let o = s.run(&["call", "bash", r#"{"command": "ulimit -n"}"#]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // The lowering is kept, every raise is named as ignored.
    assert!(stdout(&o).starts_with("50\n"), "{}", stdout(&o));
    let warning = stderr(&o);
    for ignored in [
        "[limits] processes = \"unlimited\" (above 1024)",
        "[limits] memory = 1 TiB (above",
        "[limits] cgroups = false",
    ] {
        assert!(warning.contains(ignored), "{ignored}: {warning}");
    }
    let o = s.run(&["doctor", "--json"]);
    let body: Value = serde_json::from_slice(&o.stdout).unwrap();
    let processes = body["limits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["limit"] == "processes")
        .unwrap()
        .clone();
    assert_eq!(processes["value"], 1024, "{body}");
}

#[test]
fn a_misspelt_limit_is_an_error_naming_the_key_meant() {
    let s = Sandbox::new();
    let path = s.write(
        "home/.config/toolgate/config.toml",
        "[limits]\nproceses = 64\n",
    );
    let o = s.run(&["tools"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o),
        format!(
            "toolgate: {}:1:1: unknown key `proceses` in [limits]; did you mean `processes`? \
             (the keys are: memory, processes, file_size, cpu_seconds, cpu_percent, open_files, cgroups)\n",
            path.display()
        )
    );
}

#[test]
fn doctor_names_the_mechanism_of_every_limit() {
    let s = Sandbox::new();
    let o = s.run(&["doctor"]);
    let out = stdout(&o);
    // This machine (and CI) has cgroup v1 pids and memory hierarchies.
    for line in [
        "limits      memory ",
        "processes 1024: cgroup v1 pids.max",
        "file_size 4 GiB: RLIMIT_FSIZE",
        "cpu_seconds 14400 s: RLIMIT_CPU",
        "open_files 8192: RLIMIT_NOFILE",
    ] {
        assert!(out.contains(line), "{line}:\n{out}");
    }
    assert!(out.contains("memory.limit_in_bytes"), "{out}");
    s.write(
        "home/.config/toolgate/config.toml",
        "[limits]\ncgroups = false\n",
    );
    let out = stdout(&s.run(&["doctor"]));
    assert!(
        out.contains("processes 1024: a pid namespace with its own pid_max (no pids cgroup: cgroups are turned off)"),
        "{out}"
    );
    assert!(out.contains("RLIMIT_DATA (per process only"), "{out}");
}

//! Resource-limit attacks on the real sandbox, as root: fork bombs, memory hogs, huge
//! files, and a command that tries to lift its own cgroup limits. Each checks that the
//! limit, not a policy (there is none at this level), stopped the command, and that
//! nothing of it is left on the host.
//!
//! Fork bombs on a shared machine: the caps are small (64 tasks), the wall timeouts
//! short, and every run is killed and its cgroup removed before the test returns.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use toolgate_sandbox::runner::{CgroupHost, Controller, ResourceLimits};
use toolgate_sandbox::{
    BackendChoice, Sandbox, SandboxCommand, SandboxConfig, SandboxOutcome, SandboxSpec,
};

const CAP: u64 = 64;

/// One test at a time: the watchers tell runs apart by this process's pid only, and
/// two fork bombs at once would be unkind to a shared machine.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

struct World {
    dir: tempfile::TempDir,
    sandbox: Sandbox,
}

impl World {
    fn new(backend: BackendChoice, limits: ResourceLimits) -> World {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("root")).unwrap();
        let config = SandboxConfig::new(
            PathBuf::from(env!("CARGO_BIN_EXE_toolgate-sandbox-stage2")),
            dir.path().join("state"),
        )
        .backend(backend)
        .limits(limits);
        World {
            dir,
            sandbox: Sandbox::new(config).unwrap(),
        }
    }

    fn spec(&self) -> SandboxSpec {
        SandboxSpec::for_root(self.dir.path().join("root"))
    }

    async fn run(&self, command: SandboxCommand) -> SandboxOutcome {
        self.sandbox.run(&self.spec(), command).await.unwrap()
    }
}

fn small_caps() -> ResourceLimits {
    ResourceLimits {
        processes: Some(CAP),
        memory_bytes: Some(256 << 20),
        file_size_bytes: Some(1 << 20),
        open_files: Some(64),
        cpu_seconds: Some(77),
        ..ResourceLimits::default()
    }
}

/// The processes on the host whose command line holds `marker` (zombies have none).
fn count_marked(marker: &str) -> usize {
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

/// What a watcher saw on the host while a command ran.
#[derive(Debug, Default)]
struct Seen {
    /// The most tasks the command's pids cgroup held at once (`pids.current`).
    cgroup_tasks: u64,
    /// How many forks the pids cgroup refused (`pids.events` max).
    refused_forks: u64,
    /// The most tasks on the host at once.
    host_tasks: usize,
}

/// The pids cgroups of this test process's runs, as the host sees them.
/// The command cgroups of this process once their removal, which a run
/// leaves to a task of its own (its processes are killed before it
/// returns), is over; those still there after 5 s.
fn run_cgroups_after_removal() -> Vec<PathBuf> {
    for _ in 0..500 {
        if run_cgroups().is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    run_cgroups()
}

fn run_cgroups() -> Vec<PathBuf> {
    let Ok((parent, _)) = CgroupHost::get().place(Controller::Pids) else {
        return Vec::new();
    };
    let prefix = format!("toolgate-{}-", std::process::id());
    std::fs::read_dir(parent)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

fn read_number(path: PathBuf, key: Option<&str>) -> u64 {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let value = match key {
        Some(key) => text.lines().find_map(|l| l.strip_prefix(key)).unwrap_or(""),
        None => &text,
    };
    value.trim().parse().unwrap_or(0)
}

/// Runs `command` while a thread watches the host every few milliseconds.
async fn run_watched(w: &World, command: SandboxCommand) -> (SandboxOutcome, Seen) {
    let done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut seen = Seen::default();
            while !done.load(Ordering::Relaxed) {
                for cgroup in run_cgroups() {
                    let current = read_number(cgroup.join("pids.current"), None);
                    let refused = read_number(cgroup.join("pids.events"), Some("max "));
                    seen.cgroup_tasks = seen.cgroup_tasks.max(current);
                    seen.refused_forks = seen.refused_forks.max(refused);
                }
                seen.host_tasks = seen.host_tasks.max(host_tasks());
                std::thread::sleep(Duration::from_millis(5));
            }
            seen
        })
    };
    let outcome = w.run(command).await;
    done.store(true, Ordering::Relaxed);
    (outcome, watcher.join().unwrap())
}

/// The fork bombs of the issue, each tagged with `marker` in its command line. They
/// run until the wall timeout: bubblewrap's init (or the runner, under landlock) would
/// kill a bomb whose first process returned at once, before it met any limit.
fn bombs(marker: &str) -> Vec<(&'static str, SandboxCommand)> {
    let python = "import os, sys\nwhile True:\n    try:\n        os.fork()\n    except OSError as e:\n        print(e.errno, flush=True)\n        sys.exit()";
    vec![
        (
            "perl",
            SandboxCommand::new(["perl", "-e", "fork while 1", marker]),
        ),
        (
            "python",
            SandboxCommand::new(["python3", "-c", python, marker]),
        ),
        (
            "bash",
            SandboxCommand::shell(&format!(
                "f(){{ $FUNCNAME|$FUNCNAME& }};f; sleep 10 # {marker}"
            )),
        ),
    ]
}

/// How a bomb is expected to be stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cap {
    Cgroup,
    PidNamespace,
}

async fn fork_bombs_are_contained(backend: BackendChoice, limits: ResourceLimits, cap: Cap) {
    // Memory enough for 64 interpreters: the process cap, not the memory limit, is
    // what must stop them.
    let limits = ResourceLimits {
        memory_bytes: Some(2 << 30),
        ..limits
    };
    let w = World::new(backend, limits);
    let marker = format!("toolgate-bomb-{}-{backend:?}-{cap:?}", std::process::id());
    for (name, bomb) in bombs(&marker) {
        let before = host_tasks();
        let (outcome, seen) = run_watched(&w, bomb.timeout(Duration::from_secs(3))).await;
        let what = format!("{name} under {backend:?} ({cap:?}): {seen:?} {outcome:?}");
        match cap {
            // The cgroup held the cap and refused forks past it: the limit stopped it.
            Cap::Cgroup => assert!(seen.cgroup_tasks <= CAP && seen.refused_forks > 0, "{what}"),
            // No cgroup to read: the host's own count, which other work on the
            // machine moves a little, and an unbounded bomb by thousands.
            Cap::PidNamespace => assert!(
                seen.host_tasks <= before + CAP as usize + 200,
                "{what} (the host had {before} tasks before)"
            ),
        }
        // The bombs that report a failed fork saw EAGAIN, not a policy refusal.
        match name {
            "python" => assert!(outcome.outcome.stdout.contains("11"), "{what}"),
            "bash" => assert!(
                outcome
                    .outcome
                    .stderr
                    .contains("Resource temporarily unavailable"),
                "{what}"
            ),
            _ => {}
        }
        // Whatever the bomb left is gone once the run is over, cgroup and all.
        assert_eq!(count_marked(&marker), 0, "{what}: processes left behind");
        assert_eq!(
            run_cgroups_after_removal(),
            Vec::<PathBuf>::new(),
            "{what}: cgroup left behind"
        );
    }
}

#[tokio::test]
async fn fork_bombs_stop_at_the_cgroup_pids_limit_under_bwrap() {
    let _serial = SERIAL.lock().await;
    assert!(
        CgroupHost::get().place(Controller::Pids).is_ok(),
        "this test needs a pids cgroup"
    );
    fork_bombs_are_contained(BackendChoice::Bwrap, small_caps(), Cap::Cgroup).await;
}

#[tokio::test]
async fn fork_bombs_stop_at_the_cgroup_pids_limit_under_landlock() {
    let _serial = SERIAL.lock().await;
    fork_bombs_are_contained(BackendChoice::Landlock, small_caps(), Cap::Cgroup).await;
}

#[tokio::test]
async fn without_cgroups_a_pid_namespace_caps_fork_bombs() {
    let _serial = SERIAL.lock().await;
    let limits = ResourceLimits {
        skip_cgroups: true,
        ..small_caps()
    };
    let mechanisms = limits.mechanisms();
    let processes = mechanisms.iter().find(|m| m.limit == "processes").unwrap();
    assert_eq!(
        processes.mechanism, "a pid namespace with its own pid_max",
        "{mechanisms:?}"
    );
    fork_bombs_are_contained(BackendChoice::Bwrap, limits.clone(), Cap::PidNamespace).await;
    fork_bombs_are_contained(BackendChoice::Landlock, limits, Cap::PidNamespace).await;
}

#[tokio::test]
async fn proc_self_limits_show_the_configured_limits_under_every_backend() {
    let _serial = SERIAL.lock().await;
    for backend in [
        BackendChoice::Bwrap,
        BackendChoice::Landlock,
        BackendChoice::None,
    ] {
        let w = World::new(backend, small_caps());
        let o = w.run(SandboxCommand::shell("cat /proc/self/limits")).await;
        assert_eq!(o.outcome.exit_code, 0, "{o:?}");
        let limits = o.outcome.stdout;
        for (name, soft, hard) in [
            ("Max cpu time", "77", "78"),
            ("Max file size", "1048576", "1048576"),
            ("Max open files", "64", "64"),
        ] {
            let line = limits
                .lines()
                .find(|l| l.starts_with(name))
                .unwrap_or_default();
            let fields: Vec<&str> = line[name.len()..].split_whitespace().collect();
            assert_eq!(
                fields.get(..2),
                Some(&[soft, hard][..]),
                "{backend:?}: {line}\n{limits}"
            );
        }
    }
}

#[tokio::test]
async fn a_command_cannot_take_more_memory_than_its_limit_in_one_or_many_processes() {
    let _serial = SERIAL.lock().await;
    let w = World::new(BackendChoice::Bwrap, small_caps());
    // One process asking for 2 GiB, touched page by page.
    let o = w
        .run(SandboxCommand::new([
            "python3",
            "-c",
            "b = bytearray(2 << 30); print('allocated')",
        ]))
        .await;
    assert!(
        o.outcome.exit_code != 0 && !o.outcome.stdout.contains("allocated"),
        "{o:?}"
    );
    // Four processes of 100 MiB each: every one stays under a per-process limit, the
    // command as a whole does not (256 MiB), so the cgroup's OOM killer ends one.
    let script = "for i in 1 2 3 4; do \
          python3 -c 'import time; b = bytearray(100 << 20); time.sleep(2)' & pids=\"$pids $!\"; \
        done; for p in $pids; do wait $p; echo $?; done";
    let o = w.run(SandboxCommand::shell(script)).await;
    let codes: Vec<&str> = o.outcome.stdout.lines().collect();
    assert_eq!(codes.len(), 4, "{o:?}");
    assert!(codes.contains(&"137"), "no process was killed: {o:?}");
}

#[tokio::test]
async fn writing_past_the_file_size_limit_fails_with_sigxfsz() {
    let _serial = SERIAL.lock().await;
    let w = World::new(BackendChoice::Bwrap, small_caps());
    let o = w
        .run(SandboxCommand::shell(
            "exec head -c 3000000 /dev/zero > big",
        ))
        .await;
    // SIGXFSZ (25); bubblewrap's init reports a death by signal n as exit 128 + n.
    assert!(
        o.outcome.signal == Some(25) || o.outcome.exit_code == 153,
        "SIGXFSZ: {o:?}"
    );
    let written = std::fs::metadata(w.dir.path().join("root/big"))
        .unwrap()
        .len();
    assert_eq!(written, 1 << 20);
    let o = w
        .run(SandboxCommand::new([
            "python3",
            "-c",
            "import signal; signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n\
             try:\n    open('big2', 'wb').write(bytes(3000000))\nexcept OSError as e:\n    print(e.errno)",
        ]))
        .await;
    assert_eq!(o.outcome.stdout.trim(), "27", "EFBIG: {o:?}");
}

#[tokio::test]
async fn a_command_cannot_lift_its_own_cgroup_limits() {
    let _serial = SERIAL.lock().await;
    for backend in [BackendChoice::Bwrap, BackendChoice::Landlock] {
        let w = World::new(backend, small_caps());
        let marker = format!("toolgate-lift-{}-{backend:?}", std::process::id());
        // Every pids.max and memory limit the command can see, its own included,
        // then a bomb that would show whether one of the writes took.
        let script = format!(
            "for f in /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/pids/*/pids.max \
             /sys/fs/cgroup/pids/*/*/pids.max /sys/fs/cgroup/memory/*/memory.limit_in_bytes \
             /sys/fs/cgroup/memory/*/*/*/memory.limit_in_bytes /sys/fs/cgroup/unified/cgroup.procs; do \
               [ -e \"$f\" ] && (echo max > \"$f\") 2>/dev/null && echo \"WROTE $f\"; \
             done; echo 1 > /proc/sys/kernel/pid_max 2>/dev/null && echo WROTE pid_max; \
             f(){{ $FUNCNAME|$FUNCNAME& }};f; sleep 10 # {marker}"
        );
        let command = SandboxCommand::shell(&script).timeout(Duration::from_secs(3));
        let (o, seen) = run_watched(&w, command).await;
        assert!(!o.outcome.stdout.contains("WROTE"), "{backend:?}: {o:?}");
        assert!(
            seen.cgroup_tasks <= CAP && seen.refused_forks > 0,
            "{backend:?}: {seen:?}"
        );
        assert_eq!(count_marked(&marker), 0);
    }
}

#[tokio::test]
async fn every_command_cgroup_is_removed_after_its_run() {
    let _serial = SERIAL.lock().await;
    let host = CgroupHost::get();
    let Ok((parent, _)) = host.place(Controller::Pids) else {
        panic!("this test needs a pids cgroup: {:?}", host.slots());
    };
    let mine = |parent: &std::path::Path| -> Vec<String> {
        std::fs::read_dir(parent)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(&format!("toolgate-{}-", std::process::id())))
            .collect()
    };
    let w = World::new(BackendChoice::Bwrap, small_caps());
    // The command sees itself in a cgroup of its own (bubblewrap's cgroup namespace
    // shows it as the root) while it runs.
    let o = w
        .run(SandboxCommand::shell(
            "cat /proc/self/cgroup; sleep 0.2 & sleep 0.1",
        ))
        .await;
    assert_eq!(o.outcome.exit_code, 0, "{o:?}");
    // A cancelled run is cleaned up too.
    let run = w.run(SandboxCommand::shell("sleep 100 & sleep 100"));
    let _ = tokio::time::timeout(Duration::from_millis(500), run).await;
    for _ in 0..500 {
        if mine(parent).is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(mine(parent), Vec::<String>::new());
}

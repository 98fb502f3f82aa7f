//! Attacks on what a command keeps from toolgate: its life past toolgate's, and the
//! descriptors toolgate inherited. Real processes, run by the runner as root.
//!
//! A command in a pid namespace of its own (as bubblewrap runs): toolgate killed with
//! SIGKILL must take every process of it along, also a process that no death signal reaches and no
//! watcher knows of (bubblewrap's pid 1 during its setup is one: forked without a death
//! signal, waiting for a parent that died with toolgate). The test plays toolgate with
//! a copy of this test binary, kills it, and looks for a daemon its command started.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use pretty_assertions::assert_eq;
use toolgate_sandbox::runner::{ExecOutcome, ExecRequest, run, run_streaming};

/// Far beyond any wait here: reaching it means something hung.
const HANG: Duration = Duration::from_secs(30);

/// Set in the environment of the copy of this binary that plays toolgate.
const PLAY_TOOLGATE: &str = "TOOLGATE_TEST_PLAY_TOOLGATE";

/// Set as well when that copy's stand-in is to exec stage 2's binary.
const PLAY_WITH_STAND_IN: &str = "TOOLGATE_TEST_PLAY_WITH_STAND_IN";

/// Stage 2's binary, as a stand-in execs it.
const STAGE2: &str = env!("CARGO_BIN_EXE_toolgate-sandbox-stage2");

/// The daemon's script: a command line that carries `marker` for as long as it runs.
fn daemon_script(marker: &str) -> String {
    format!(
        "setsid sh -c 'while :; do sleep 0.1; done # {marker}' </dev/null >/dev/null 2>&1 & \
         echo started; wait"
    )
}

/// The pids of processes whose command line holds `needle`.
fn processes_with(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().map_while(Result::ok) {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(raw) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if String::from_utf8_lossy(&raw).contains(needle) {
            found.push(name);
        }
    }
    found
}

fn eventually(mut done: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + HANG;
    while std::time::Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// The part of toolgate this test kills: runs the daemon's command as it runs
/// bubblewrap and says `started` once the command did; then waits to be killed. Run
/// only as the copy.
#[tokio::test]
#[ignore = "run by a_sigkilled_toolgate_takes_a_daemon_no_watcher_knows_along"]
async fn play_toolgate() {
    let marker = std::env::var(PLAY_TOOLGATE).unwrap();
    let mut request = ExecRequest::new("/bin/sh")
        .args(["-c", &daemon_script(&marker)])
        .env("PATH", "/usr/bin:/bin")
        .timeout(HANG * 4)
        .own_pid_namespace();
    if std::env::var_os(PLAY_WITH_STAND_IN).is_some() {
        request = request.stand_in(STAGE2);
    }
    let _ = run_streaming(request, |_, line| {
        println!("{line}");
    })
    .await;
}

#[test]
fn a_sigkilled_toolgate_takes_a_daemon_no_watcher_knows_along() {
    a_sigkilled_toolgate_takes_its_daemon_along(false);
}

/// The same attack when the stand-in is stage 2's binary, no longer a copy of toolgate
/// that shares its fate: only the death signal it kept across its exec ties it to
/// toolgate.
#[test]
fn a_sigkilled_toolgate_takes_a_daemon_along_past_an_execd_stand_in() {
    a_sigkilled_toolgate_takes_its_daemon_along(true);
}

fn a_sigkilled_toolgate_takes_its_daemon_along(stand_in: bool) {
    assert!(
        rustix::process::geteuid().is_root(),
        "this attack needs root: only root can give a command a pid namespace of its own"
    );
    let marker = format!("zzcontain{}x{}", std::process::id(), u8::from(stand_in));
    let mut toolgate = Command::new(std::env::current_exe().unwrap());
    toolgate
        .args(["--exact", "play_toolgate", "--ignored", "--nocapture"])
        .env(PLAY_TOOLGATE, &marker);
    if stand_in {
        toolgate.env(PLAY_WITH_STAND_IN, "1");
    }
    let mut toolgate = toolgate
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(toolgate.stdout.take().unwrap());
    let started = stdout.lines().map_while(Result::ok).any(|l| l == "started");
    assert!(started, "the command never started");
    // The daemon runs, in a session of its own: no group kill reaches it, and no
    // keeper watches it (the command is plain sh, not stage 2).
    assert!(
        eventually(|| !processes_with(&marker).is_empty()),
        "no daemon"
    );

    toolgate.kill().unwrap();
    toolgate.wait().unwrap();

    let gone = eventually(|| processes_with(&marker).is_empty());
    let left = processes_with(&marker);
    for pid in &left {
        let _ = rustix::process::kill_process(
            rustix::process::Pid::from_raw(pid.parse().unwrap()).unwrap(),
            rustix::process::Signal::KILL,
        );
    }
    assert!(gone, "the daemon outlived the SIGKILLed toolgate: {left:?}");
}

/// The timeout's SIGTERM reaches a command in its own pid namespace as any command,
/// although the pid namespace makes it an init (which the kernel spares the signals it
/// has no handler for): a command that handles it decides, one that does not dies of
/// it, one that ignores it is killed after the grace.
#[tokio::test]
async fn a_command_in_its_own_pid_namespace_meets_sigterm_as_any_command() {
    let cases = [
        (
            "trap 'echo term; exit 3' TERM; echo up; while :; do sleep 0.1; done",
            3,
            None,
        ),
        ("echo up; exec sleep 1000", 143, Some(15)),
        ("trap '' TERM; echo up; exec sleep 1000", 137, Some(9)),
    ];
    for (script, exit_code, signal) in cases {
        let mut outcomes = Vec::new();
        // No namespace; one with toolgate's copy as the stand-in; one with stage 2's
        // binary as the stand-in.
        for (own_namespace, stand_in) in [(false, false), (true, false), (true, true)] {
            let mut request = ExecRequest::new("/bin/sh")
                .args(["-c", script])
                .env("PATH", "/usr/bin:/bin")
                .timeout(Duration::from_secs(1))
                .kill_grace(Duration::from_secs(1));
            if own_namespace {
                request = request.own_pid_namespace();
            }
            if stand_in {
                request = request.stand_in(STAGE2);
            }
            let outcome = tokio::time::timeout(HANG, run(request))
                .await
                .expect("the run hung")
                .expect("the run failed");
            // stderr aside: whether the shell reports its foreground `sleep` as
            // "Terminated" depends on which of the two the group's signal reaches first.
            outcomes.push(ExecOutcome {
                duration_ms: 0,
                stderr: String::new(),
                ..outcome
            });
        }
        assert_eq!(outcomes[1], outcomes[0], "{script}");
        assert_eq!(
            outcomes[2], outcomes[0],
            "{script}, stage 2 as the stand-in"
        );
        assert_eq!(
            (
                outcomes[1].exit_code,
                outcomes[1].signal,
                outcomes[1].timed_out
            ),
            (exit_code, signal, true),
            "{script}"
        );
    }
}

/// Attack: a descriptor toolgate inherited without close-on-exec (from its MCP client,
/// a shell, a supervisor) reaches the command, which could write to it, or `openat`
/// past the sandbox's mounts from a directory. Only stdio and the descriptors the
/// request names may.
#[tokio::test]
async fn a_command_gets_no_descriptor_toolgate_inherited() {
    // A directory outside everything, without close-on-exec, as a parent would leave it.
    // SAFETY: a plain open; the descriptor is closed at the end of the test.
    let inherited = unsafe { libc::open(c"/".as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY) };
    assert!(inherited > 2);
    let request = ExecRequest::new("/bin/sh")
        .args(["-c", "ls /proc/self/fd"])
        .env("PATH", "/usr/bin:/bin")
        .lifeline(4);
    let outcome = tokio::time::timeout(HANG, run(request))
        .await
        .expect("the run hung")
        .expect("the run failed");
    // SAFETY: closes the descriptor opened above.
    unsafe { libc::close(inherited) };
    let fds: Vec<&str> = outcome.stdout.lines().collect();
    // 0-2, the lifeline, and the one `ls` reads /proc/self/fd through.
    assert_eq!(fds.len(), 5, "{fds:?}");
    assert!(!fds.contains(&inherited.to_string().as_str()), "{fds:?}");
    assert!(fds.contains(&"4"), "{fds:?}");
}

/// The program a process runs, by its host pid; `None` once it is gone.
fn exe_of(pid: &str) -> Option<std::path::PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/exe")).ok()
}

/// The parent of a process, by its host pid.
fn parent_of(pid: &str) -> String {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    stat[stat.rfind(')').unwrap() + 1..]
        .split_whitespace()
        .nth(1)
        .unwrap()
        .to_owned()
}

/// The process the runner waits for in place of the namespace's init is stage 2's
/// binary once given one, and a copy of toolgate (here: this test binary) otherwise:
/// a copy that lived as long as the command would share every page of toolgate's.
/// The command's exit code comes through either way.
#[tokio::test]
async fn the_inits_stand_in_is_stage_2s_binary_when_given_one() {
    assert!(
        rustix::process::geteuid().is_root(),
        "needs root: only root can give a command a pid namespace of its own"
    );
    let test_binary = std::env::current_exe().unwrap();
    for (stand_in, expected) in [
        (false, test_binary),
        (true, std::fs::canonicalize(STAGE2).unwrap()),
    ] {
        let marker = format!("zzstandin{}x{}", std::process::id(), u8::from(stand_in));
        let mut request = ExecRequest::new("/bin/sh")
            .args(["-c", &format!("sleep 1 # {marker}\nexit 7")])
            .env("PATH", "/usr/bin:/bin")
            .timeout(HANG)
            .own_pid_namespace();
        if stand_in {
            request = request.stand_in(STAGE2);
        }
        let run = tokio::spawn(run(request));
        // The shell (the namespace's init) is the one process running sh whose
        // command line holds the marker (stage 2's stand-in carries the command in
        // its own); its parent is the stand-in. Looked for off the runtime, which
        // runs the command meanwhile.
        let stand_in_exe = tokio::task::spawn_blocking(move || {
            let sh = std::fs::canonicalize("/bin/sh").unwrap();
            let mut init = Vec::new();
            let started = eventually(|| {
                init = processes_with(&marker);
                init.retain(|pid| exe_of(pid).as_ref() == Some(&sh));
                !init.is_empty()
            });
            started.then(|| exe_of(&parent_of(&init[0]))).flatten()
        })
        .await
        .unwrap();
        assert_eq!(stand_in_exe, Some(expected), "stand-in: {stand_in}");
        let outcome = tokio::time::timeout(HANG, run)
            .await
            .expect("the run hung")
            .unwrap()
            .expect("the run failed");
        assert_eq!(
            (outcome.exit_code, outcome.signal),
            (7, None),
            "stand-in: {stand_in}"
        );
    }
}

//! Black-box tests of the process runner with real processes (`/bin/sh`, `sleep`, `cat`).
//!
//! No timing assertions: the only time bounds are generous limits that turn a hang into
//! a failure instead of a stuck test run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::time::Duration;

use pretty_assertions::assert_eq;
use rustix::process::{Pid, Signal, kill_process};
use tokio::sync::mpsc;
use toolgate_sandbox::runner::{
    ExecOutcome, ExecRequest, ResourceLimits, RunnerError, Stream, run, run_streaming,
};

/// Far beyond any run here: reaching it means the runner hung.
const HANG: Duration = Duration::from_secs(30);

const PATH: &str = "/usr/bin:/bin";

fn sh(script: &str) -> ExecRequest {
    ExecRequest::new("/bin/sh")
        .args(["-c", script])
        .env("PATH", PATH)
        .timeout(Duration::from_secs(20))
}

async fn run_ok(request: ExecRequest) -> ExecOutcome {
    tokio::time::timeout(HANG, run(request))
        .await
        .expect("the run hung")
        .expect("the run failed")
}

/// What a quiet, successful run that printed `stdout` looks like, timing aside.
fn exited(exit_code: i32, stdout: &str) -> ExecOutcome {
    ExecOutcome {
        exit_code,
        signal: None,
        timed_out: false,
        duration_ms: 0,
        stdout: stdout.to_owned(),
        stderr: String::new(),
        stdout_truncated: false,
        stderr_truncated: false,
    }
}

fn without_duration(outcome: ExecOutcome) -> ExecOutcome {
    ExecOutcome {
        duration_ms: 0,
        ..outcome
    }
}

/// The group id a script printed first (`echo $$`: the shell leads its group).
fn first_line_pgid(text: &str) -> i32 {
    text.lines()
        .next()
        .and_then(|line| line.trim().parse().ok())
        .unwrap_or_else(|| panic!("no pgid printed first: {text:?}"))
}

/// Processes of group `pgid` that are still alive (zombies are dead: this machine's init
/// may be slow to reap the orphans).
fn live_members(pgid: i32) -> Vec<String> {
    let mut members = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // "pid (comm) state ppid pgrp ...": comm may contain spaces and parentheses.
        let Some((head, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let (state, group) = (fields[0], fields[2].parse::<i32>().unwrap());
        if group == pgid && state != "Z" && state != "X" {
            members.push(format!("{head}) {state}"));
        }
    }
    members
}

/// Waits, within the hang bound, until no process of the group is alive.
async fn assert_group_gone(pgid: i32) {
    let start = tokio::time::Instant::now();
    loop {
        let members = live_members(pgid);
        if members.is_empty() {
            return;
        }
        assert!(
            start.elapsed() < HANG,
            "group {pgid} still alive: {members:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn exit_codes_pass_through() {
    let cases = [
        ("exit 0", 0),
        ("exit 1", 1),
        ("exit 42", 42),
        // The shell's "not found" goes to /dev/null so the whole outcome can be compared.
        ("exec 2>/dev/null; no-such-command-toolgate-test", 127),
    ];
    for (script, code) in cases {
        let outcome = run_ok(sh(script)).await;
        assert_eq!(without_duration(outcome), exited(code, ""), "{script}");
    }
}

#[tokio::test]
async fn death_by_signal_is_reported_as_signal_and_128_plus_n() {
    let outcome = run_ok(sh("kill -9 $$")).await;
    assert_eq!(
        without_duration(outcome),
        ExecOutcome {
            signal: Some(9),
            ..exited(137, "")
        }
    );
}

#[tokio::test]
async fn timeout_terminates_the_whole_group() {
    let request = sh("echo $$; sleep 1000 & sleep 1000 & wait").timeout(Duration::from_secs(1));
    let outcome = run_ok(request).await;
    let pgid = first_line_pgid(&outcome.stdout);
    assert_eq!(
        without_duration(outcome),
        ExecOutcome {
            signal: Some(15),
            timed_out: true,
            ..exited(143, &format!("{pgid}\n"))
        }
    );
    assert_group_gone(pgid).await;
}

#[tokio::test]
async fn background_job_left_after_a_normal_exit_is_killed() {
    let outcome = run_ok(sh("echo $$; sleep 1000 & echo done")).await;
    let pgid = first_line_pgid(&outcome.stdout);
    assert_eq!(
        without_duration(outcome),
        exited(0, &format!("{pgid}\ndone\n"))
    );
    assert_group_gone(pgid).await;
}

#[tokio::test]
async fn child_ignoring_sigterm_is_killed_after_the_grace() {
    let request = sh("trap '' TERM; echo $$; sleep 1000")
        .timeout(Duration::from_secs(1))
        .kill_grace(Duration::from_millis(500));
    let outcome = run_ok(request).await;
    let pgid = first_line_pgid(&outcome.stdout);
    assert_eq!(
        without_duration(outcome),
        ExecOutcome {
            signal: Some(9),
            timed_out: true,
            ..exited(137, &format!("{pgid}\n"))
        }
    );
    assert_group_gone(pgid).await;
}

#[tokio::test]
async fn process_that_left_the_group_does_not_hang_the_run() {
    // `setsid` puts the sleeper beyond the group kill while it holds stdout open: the run
    // must stop waiting for EOF. (The sandbox's PID namespace is what kills such a one.)
    let outcome = run_ok(sh("setsid sleep 1000 & echo $!")).await;
    let escaped = first_line_pgid(&outcome.stdout);
    kill_process(Pid::from_raw(escaped).unwrap(), Signal::KILL).unwrap();
    assert_eq!(outcome.exit_code, 0);
}

#[tokio::test]
async fn child_leads_a_session_of_its_own_without_a_terminal() {
    // /proc/PID/stat: pid (comm) state ppid pgrp session tty_nr ...; comm is "sh".
    let script = "read -r pid comm state ppid pgrp sid tty rest < /proc/$$/stat; \
                  echo \"$$ $pid $pgrp $sid $tty\"; \
                  if (exec 3</dev/tty) 2>/dev/null; then echo tty; else echo no-tty; fi";
    let outcome = run_ok(sh(script)).await;
    assert_eq!(outcome.exit_code, 0, "{outcome:?}");
    let mut lines = outcome.stdout.lines();
    let ids: Vec<i32> = lines
        .next()
        .unwrap()
        .split(' ')
        .map(|field| field.parse().unwrap())
        .collect();
    let pid = ids[0];
    // Group and session are the command's own: the group kill reaches what it starts,
    // and with no controlling terminal (tty_nr 0) it cannot inject input into one.
    assert_eq!(ids, [pid, pid, pid, pid, 0], "{outcome:?}");
    assert_eq!(lines.next(), Some("no-tty"));
}

#[tokio::test]
async fn output_past_the_cap_is_drained_and_discarded() {
    let script =
        "head -c 10485760 /dev/zero | tr '\\0' o; head -c 10485760 /dev/zero | tr '\\0' e >&2";
    let outcome = run_ok(sh(script).max_output_bytes(1024)).await;
    assert_eq!(
        without_duration(outcome),
        ExecOutcome {
            stdout: "o".repeat(1024),
            stderr: "e".repeat(1024),
            stdout_truncated: true,
            stderr_truncated: true,
            ..exited(0, "")
        }
    );
}

#[tokio::test]
async fn cap_never_splits_a_character() {
    let euros = "€".repeat(1000); // 3 bytes each: a cap of 1000 falls inside one
    let request = ExecRequest::new("/bin/cat")
        .stdin(euros.clone())
        .max_output_bytes(1000);
    let outcome = run_ok(request).await;
    assert_eq!(
        without_duration(outcome),
        ExecOutcome {
            stdout_truncated: true,
            ..exited(0, &"€".repeat(333))
        }
    );
}

#[tokio::test]
async fn stdin_is_fed_and_closed() {
    let outcome = run_ok(ExecRequest::new("/bin/cat").stdin("hello\nworld\n")).await;
    assert_eq!(without_duration(outcome), exited(0, "hello\nworld\n"));
}

#[tokio::test]
async fn large_stdin_and_stdout_flow_concurrently() {
    // More than a pipe buffer both ways: feeding before reading would deadlock.
    let input: String = (0..100_000).map(|i| format!("{i}\n")).collect();
    let request = ExecRequest::new("/bin/cat")
        .stdin(input.clone())
        .max_output_bytes(input.len());
    let outcome = run_ok(request).await;
    assert_eq!(without_duration(outcome), exited(0, &input));
}

#[tokio::test]
async fn child_that_never_reads_stdin_does_not_hang_the_run() {
    let request = sh("sleep 1; echo done").stdin(vec![b'x'; 1024 * 1024]);
    let outcome = run_ok(request).await;
    assert_eq!(without_duration(outcome), exited(0, "done\n"));
}

#[tokio::test]
async fn environment_is_exactly_the_given_one() {
    let env = [
        ("PATH", PATH),
        ("TOOLGATE_TEST", "a value with spaces"),
        ("EMPTY", ""),
    ];
    let mut request = ExecRequest::new("/usr/bin/env");
    for (key, value) in env {
        request = request.env(key, value);
    }
    let outcome = run_ok(request).await;
    assert_eq!(outcome.exit_code, 0);
    let printed: BTreeSet<&str> = outcome.stdout.lines().collect();
    let given: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    assert_eq!(printed, given.iter().map(String::as_str).collect());
}

#[tokio::test]
async fn empty_environment_gives_the_child_nothing() {
    // A bare program name still resolves (execvp falls back to /bin:/usr/bin).
    let outcome = run_ok(ExecRequest::new("env")).await;
    assert_eq!(without_duration(outcome), exited(0, ""));
}

#[tokio::test]
async fn working_directory_is_honoured() {
    let dir = tempfile::tempdir().unwrap();
    let outcome = run_ok(sh("pwd -P").cwd(dir.path())).await;
    let expected = dir.path().canonicalize().unwrap();
    assert_eq!(
        without_duration(outcome),
        exited(0, &format!("{}\n", expected.display()))
    );
}

#[tokio::test]
async fn resource_limits_apply_to_the_child() {
    let limits = ResourceLimits {
        cpu_seconds: Some(7),
        address_space_bytes: Some(512 * 1024 * 1024),
        file_size_bytes: Some(1024 * 1024),
        processes: Some(77),
        open_files: Some(64),
        ..ResourceLimits::default()
    };
    // dash reports -f in 512-byte blocks and -v in KiB. The process cap is the
    // command's pids cgroup (tests/limits.rs), not RLIMIT_NPROC, which root ignores.
    let script = "ulimit -t; ulimit -H -t; ulimit -v; ulimit -f; ulimit -n; ulimit -H -n";
    let outcome = run_ok(sh(script).limits(limits)).await;
    assert_eq!(
        without_duration(outcome),
        exited(0, "7\n8\n524288\n2048\n64\n64\n")
    );
}

#[tokio::test]
async fn writing_past_the_file_size_limit_fails() {
    let dir = tempfile::tempdir().unwrap();
    let limits = ResourceLimits {
        file_size_bytes: Some(4096),
        ..ResourceLimits::default()
    };
    let request = sh("exec head -c 100000 /dev/zero > big")
        .cwd(dir.path())
        .limits(limits);
    let outcome = run_ok(request).await;
    // SIGXFSZ (25) kills the writer; a writer that ignores it gets EFBIG and exits non-zero.
    assert!(
        outcome.signal == Some(25) || (outcome.exit_code != 0 && outcome.signal.is_none()),
        "{outcome:?}"
    );
    let written = std::fs::metadata(dir.path().join("big")).unwrap().len();
    assert!(written <= 4096, "{written} bytes written");
}

#[tokio::test]
async fn cpu_limit_stops_a_busy_loop() {
    let limits = ResourceLimits {
        cpu_seconds: Some(1),
        ..ResourceLimits::default()
    };
    let outcome = run_ok(sh("while :; do :; done").limits(limits)).await;
    // SIGXCPU at the soft limit; SIGKILL at the hard one if SIGXCPU were caught.
    assert!(
        matches!(outcome.signal, Some(24) | Some(9)) && !outcome.timed_out,
        "{outcome:?}"
    );
}

#[tokio::test]
async fn streaming_delivers_lines_while_the_process_runs() {
    let (lines_tx, mut lines_rx) = mpsc::unbounded_channel();
    let request = sh("echo one; echo two; echo three; sleep 1000");
    let running = run_streaming(request, move |stream, line: &str| {
        let _ = lines_tx.send((stream, line.to_owned()));
    });
    tokio::pin!(running);
    let mut seen = Vec::new();
    while seen.len() < 3 {
        tokio::select! {
            line = lines_rx.recv() => seen.push(line.expect("the runner dropped the callback")),
            result = &mut running => panic!("the run ended before its lines arrived: {result:?}"),
            () = tokio::time::sleep(HANG) => panic!("lines did not arrive: {seen:?}"),
        }
    }
    assert_eq!(
        seen,
        [
            (Stream::Stdout, "one".to_owned()),
            (Stream::Stdout, "two".to_owned()),
            (Stream::Stdout, "three".to_owned()),
        ]
    );
}

#[tokio::test]
async fn streaming_keeps_streams_apart_and_delivers_a_last_partial_line() {
    let mut lines = Vec::new();
    let script = "echo out1; echo err1 >&2; echo out2; printf 'err2' >&2";
    let outcome = tokio::time::timeout(
        HANG,
        run_streaming(sh(script), |stream, line| {
            lines.push((stream, line.to_owned()))
        }),
    )
    .await
    .unwrap()
    .unwrap();
    let of = |wanted| -> Vec<&str> {
        lines
            .iter()
            .filter(|(stream, _)| *stream == wanted)
            .map(|(_, line)| line.as_str())
            .collect()
    };
    assert_eq!(of(Stream::Stdout), ["out1", "out2"]);
    assert_eq!(of(Stream::Stderr), ["err1", "err2"]);
    assert_eq!(
        without_duration(outcome),
        ExecOutcome {
            stderr: "err1\nerr2".to_owned(),
            ..exited(0, "out1\nout2\n")
        }
    );
}

#[tokio::test]
async fn dropping_the_run_kills_the_group() {
    let (pgid_tx, mut pgid_rx) = mpsc::unbounded_channel();
    let request = sh("echo $$; sleep 1000 & sleep 1000 & wait");
    let running = run_streaming(request, move |_, line: &str| {
        let _ = pgid_tx.send(line.to_owned());
    });
    let pgid = tokio::select! {
        line = pgid_rx.recv() => first_line_pgid(&line.expect("no line")),
        result = running => panic!("the run ended by itself: {result:?}"),
    };
    // `running` is dropped here, at the end of the select.
    assert_group_gone(pgid).await;
}

#[tokio::test]
async fn missing_program_is_a_spawn_error_naming_it() {
    let program = "/nonexistent/toolgate-no-such-program";
    let err = run(ExecRequest::new(program)).await.unwrap_err();
    let message = err.to_string();
    match err {
        RunnerError::Spawn {
            program: named,
            source,
        } => {
            assert_eq!(named, program);
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
        }
        other => panic!("expected a spawn error, got {other:?}"),
    }
    assert!(
        message.starts_with(&format!("cannot start `{program}`: ")),
        "{message}"
    );
}

#[tokio::test]
async fn missing_working_directory_is_named_in_the_error() {
    let err = run(sh("true").cwd("/nonexistent/toolgate-dir"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, RunnerError::Spawn { program, .. } if program == "/bin/sh"),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("working directory `/nonexistent/toolgate-dir`"),
        "{err}"
    );
}

#[test]
fn the_run_future_can_be_spawned() {
    fn assert_send<T: Send>(_: &T) {}
    let running = run_streaming(ExecRequest::new(OsString::from("true")), |_, _| {});
    assert_send(&running);
}

//! Attack: a `grep` call whose pattern is megabytes long, or short but
//! compiling to billions of states, used to take the process to hundreds of
//! megabytes or gigabytes before it failed. Both are refused with an error
//! that says what to change, and the process stays small.

use std::io::Write;
use std::process::{Child, ExitStatus, Stdio};

use pretty_assertions::assert_eq;

use super::*;

/// The ceiling asserted on the process's peak resident memory. A refused
/// pattern costs about 40 MiB (the process itself); before the limits, the
/// 4 MB pattern below took over 800 MiB.
const PEAK_LIMIT_KIB: u64 = 200 * 1024;

/// The child's peak resident memory so far (`VmHWM`), None once it exited.
fn peak_kib(child: &Child) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Runs `toolgate call grep -` with `args` on stdin, watching the process's
/// high-water mark until it ends (VmHWM only grows, so the last reading
/// before the exit is its peak up to then).
fn call_grep(s: &Sandbox, args: &Value) -> (ExitStatus, String, u64) {
    let mut child = common::toolgate(s.dir.path(), &s.project())
        .args(["call", "grep", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let body = serde_json::to_vec(args).unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&body));
    let mut peak = 0;
    let status = loop {
        if let Some(kib) = peak_kib(&child) {
            peak = peak.max(kib);
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    };
    writer.join().unwrap().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(peak > 0, "the process's memory was never read");
    (status, stderr, peak)
}

#[test]
fn a_four_megabyte_pattern_is_refused_by_the_schema_and_the_process_stays_small() {
    let s = Sandbox::new();
    s.write("project/a.txt", "ab\n");
    // An alternation of 1.3 million branches, 4 MB of JSON.
    let pattern = "ab|".repeat(1_333_333);
    let (status, stderr, peak) = call_grep(&s, &json!({"pattern": pattern}));
    // Arguments that do not fit the tool's schema: exit 2, like any usage
    // error, and the limit is named.
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr,
        "toolgate: invalid arguments at /pattern: must be at most 4096 characters\n"
    );
    assert!(
        peak < PEAK_LIMIT_KIB,
        "peak {peak} KiB, over {PEAK_LIMIT_KIB} KiB"
    );
}

#[test]
fn short_patterns_that_compile_huge_are_refused_and_the_process_stays_small() {
    let s = Sandbox::new();
    s.write("project/a.txt", "ab\n");
    for pattern in [r"\w{1000}{1000}", r"(?:a{1,1000}){1,1000}"] {
        let (status, stderr, peak) = call_grep(&s, &json!({"pattern": pattern}));
        // The tool ran and failed: exit 1, with what to do instead.
        assert_eq!(status.code(), Some(1), "{pattern}: {stderr}");
        assert!(
            stderr.starts_with(&format!(
                "toolgate: tool `grep` failed: invalid arguments: the regex {pattern:?} \
                 compiles to more than the limit of 10 MiB; simplify it:"
            )),
            "{pattern}: {stderr}"
        );
        assert!(
            stderr.contains("for literal text set fixed_strings: true"),
            "{stderr}"
        );
        assert!(
            peak < PEAK_LIMIT_KIB,
            "{pattern}: peak {peak} KiB, over {PEAK_LIMIT_KIB} KiB"
        );
    }
    // A pattern within the limits still searches.
    let (status, stderr, _) = call_grep(&s, &json!({"pattern": r"\w{2}"}));
    assert_eq!(status.code(), Some(0), "{stderr}");
}

//! Output that does not end, through the real `toolgate` binary: a background
//! process writing a gigabyte as fast as it can, and a `bash` call printing far more
//! than is worth keeping. What is kept is bounded on disk and in toolgate's memory,
//! the command is drained (never held up), and every result says exactly what was
//! kept and what was dropped. Process logs live in toolgate's private state dir.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "common/stdio_client.rs"]
mod stdio_client;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use stdio_client::{McpServer, Project, state_dir};

/// The default caps of a process log (`ProcessConfig`): 4 MiB of the start, 12 MiB
/// of the latest output.
const HEAD: u64 = 4 << 20;
const TAIL: u64 = 12 << 20;

// How these tests start the server, and what they read of the project.
impl Project {
    fn server(&self) -> McpServer {
        let mut cmd = common::toolgate(self.base.path(), &self.root);
        cmd.arg("mcp");
        McpServer::start(cmd)
    }
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// Reads with waits until the process has ended; its last read's facts.
fn until_ended(server: &mut McpServer, pid: &Value) -> Value {
    for _ in 0..600 {
        let (_, facts) = server.call("process_read", json!({"pid": pid, "wait": 5}));
        if facts["status"]["state"] != "running" {
            return facts;
        }
    }
    panic!("process {pid} never ended");
}

#[test]
fn a_gigabyte_of_output_is_drained_kept_at_both_ends_and_described_exactly() {
    let p = Project::new();
    let mut server = p.server();
    let script = "echo started-ok; head -c 1073741824 /dev/zero; echo; echo last-line";
    let (text, facts) = server.call("process_start", json!({ "command": script }));
    let pid = facts["pid"].clone();
    assert_eq!(
        facts["log_keeps"],
        json!({"head_bytes": HEAD, "tail_bytes": TAIL})
    );
    assert!(
        text.contains(&format!(
            "its log keeps the first {HEAD} bytes of its output and the latest {TAIL}"
        )),
        "{text}"
    );

    // In toolgate's private state directory, not in a shared temp dir.
    let log = PathBuf::from(facts["output_file"].as_str().unwrap());
    let processes = state_dir(p.base.path()).join("processes");
    assert_eq!(log.parent().unwrap().parent().unwrap(), processes);
    assert_eq!(mode(log.parent().unwrap()), 0o700);
    assert_eq!(mode(&processes), 0o700);
    assert_eq!(mode(&log), 0o600);

    // Drained to the end: it exits by itself, not killed and not stuck on a full pipe.
    let ended = until_ended(&mut server, &pid);
    assert_eq!(
        ended["status"],
        json!({"state": "exited", "exit_code": 0, "signal": null, "timed_out": false})
    );
    let written: u64 = 11 + (1 << 30) + 1 + 10;
    assert_eq!(
        ended["output"],
        json!({
            "written": written,
            "kept": [[0, HEAD], [written - TAIL, written]],
            "dropped": written - HEAD - TAIL,
            "removed": null,
        })
    );
    // Bounded on disk: the caps and one marker line at the gap.
    let on_disk = std::fs::metadata(&log).unwrap().len();
    assert!(on_disk <= HEAD + TAIL + 256, "{on_disk} bytes on disk");
    // And in memory: nothing near the gigabyte was ever held.
    let peak = server.peak_memory_kib();
    assert!(peak < 256 * 1024, "toolgate's peak RSS was {peak} KiB");

    // The tail read says what exists before it; the head is still there.
    let (tail, _) = server.call("process_read", json!({ "pid": pid }));
    assert!(
        tail.ends_with(&format!(
            "last-line\n[process {pid} exited with code 0; continue with offset={written}]\n"
        )),
        "{}",
        &tail[tail.len() - 200..]
    );
    assert!(
        tail.contains(&format!(
            "the log holds bytes 0-{HEAD} and {}-{written} of its output ({written} written; \
             the {} in between were dropped)",
            written - TAIL,
            written - HEAD - TAIL
        )),
        "{}",
        &tail[..300]
    );
    let (head, facts) = server.call("process_read", json!({"pid": pid, "offset": 0}));
    assert!(head.starts_with("started-ok\n"), "{}", &head[..40]);
    assert_eq!(facts["offset"], json!(0));
    // Following from inside the dropped range is told so and moved past it.
    let (skipped, facts) = server.call("process_read", json!({"pid": pid, "offset": HEAD + 5}));
    assert!(
        skipped.starts_with(&format!(
            "[bytes {}-{} of the output were dropped",
            HEAD + 5,
            written - TAIL
        )),
        "{}",
        &skipped[..200]
    );
    assert_eq!(facts["offset"], json!(written - TAIL));

    // Once ended, the file itself reads in order, with the gap marked.
    let file = std::fs::read(&log).unwrap();
    let marker = format!(
        "\n[toolgate: {} bytes of output dropped here (bytes {HEAD}-{} of {written}): the log \
         keeps the first {HEAD} and the last {TAIL} bytes]\n",
        written - HEAD - TAIL,
        written - TAIL
    );
    assert_eq!(
        &file[HEAD as usize..HEAD as usize + marker.len()],
        marker.as_bytes()
    );
    assert!(file.starts_with(b"started-ok\n") && file.ends_with(b"\nlast-line\n"));

    // The list says it too.
    let (list, facts) = server.call("process_list", json!({}));
    assert_eq!(
        facts["processes"][0]["output"]["written"],
        json!(written),
        "{list}"
    );

    // The server goes: its logs go with it.
    assert!(server.close(), "the server did not exit cleanly");
    let left: Vec<_> = std::fs::read_dir(&processes).unwrap().collect();
    assert!(left.is_empty(), "logs outlived the server: {left:?}");
}

#[test]
fn a_huge_bash_output_is_saved_bounded_and_the_result_says_which_lines() {
    let p = Project::new();
    let mut server = p.server();
    // 40000 lines of 1001 bytes: 40 MB, more than the 8 + 8 MiB the file keeps.
    let script = "yes \"$(printf '%01000d' 0)\" | head -n 40000 | nl -ba -nrz -w5 -s:";
    let (text, facts) = server.call("bash", json!({ "command": script }));
    assert_eq!(facts["exit_code"], json!(0), "{text}");
    assert_eq!(facts["truncated"], json!(true));
    let line_bytes: u64 = 6 + 1000 + 1;
    let keeps = &facts["output_file_keeps"];
    let head_lines = (8u64 << 20) / line_bytes;
    let tail_lines = (8u64 << 20) / line_bytes;
    let first_dropped = head_lines + 1;
    let last_dropped = 40_000 - tail_lines;
    assert_eq!(
        keeps,
        &json!({
            "complete": false,
            "lines": 40_000,
            "bytes": 40_000 * line_bytes,
            "kept_lines": [[1, head_lines], [last_dropped + 1, 40_000]],
            "kept_bytes": (head_lines + tail_lines) * line_bytes,
        })
    );
    let file = facts["output_file"].as_str().unwrap();
    assert!(
        text.contains(&format!(
            "[output cut; {file} keeps lines 1-{head_lines} and {}-40000 of 40000",
            last_dropped + 1
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "lines {first_dropped}-{last_dropped} ({} bytes) are not kept anywhere",
            (last_dropped - head_lines) * line_bytes
        )),
        "{text}"
    );
    let saved = std::fs::read_to_string(p.root.join(file)).unwrap();
    let lines: Vec<&str> = saved.lines().collect();
    assert_eq!(lines.len() as u64, head_lines + 1 + tail_lines);
    assert!(lines[0].starts_with("00001:0000"));
    assert!(lines[head_lines as usize].starts_with(&format!(
        "[toolgate: lines {first_dropped}-{last_dropped} ("
    )));
    assert!(lines.last().unwrap().starts_with("40000:0000"));
    assert!(saved.len() as u64 <= (16 << 20) + 256);
    // Never the claim that the file is the whole output.
    assert!(!text.contains("the whole of it"), "{text}");
}

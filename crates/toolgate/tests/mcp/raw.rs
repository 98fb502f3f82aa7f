//! A raw JSON-RPC client for `toolgate mcp`, for what an SDK would hide:
//! every byte on stdout, and the order of messages on the wire.

use std::io::Write;
use std::process::{Child, ChildStdin, Command, ExitStatus};
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::{Lines, Project, wait_until};

/// `toolgate mcp` with its stdout read line by line.
pub(crate) struct RawStdio {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Lines,
    stderr: Lines,
    /// Every line toolgate wrote to stdout so far.
    pub seen: Vec<String>,
    next_id: u64,
}

impl RawStdio {
    /// Starts `cmd` (a `toolgate ... mcp` command) and initializes a
    /// 2025-11-25 session.
    pub fn start(cmd: Command) -> RawStdio {
        let (child, stdin, stdout, stderr) = crate::spawn_piped(cmd);
        let mut raw = RawStdio {
            stdin,
            stdout,
            stderr,
            child,
            seen: Vec::new(),
            next_id: 1,
        };
        let init = raw.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "raw-test", "version": "0"}}),
        );
        assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
        raw.notify("notifications/initialized", json!({}));
        raw
    }

    fn write(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin is closed");
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        self.write(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Sends a request without waiting; returns its id.
    pub fn send(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.write(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// The next stdout line, recorded; fails the test after a generous wait.
    pub fn next_line(&mut self) -> String {
        let Some(line) = self.stdout.next(Duration::from_secs(60)) else {
            panic!(
                "toolgate mcp said nothing more (or closed stdout); so far:\n{:#?}",
                self.seen
            );
        };
        self.seen.push(line.clone());
        line
    }

    /// Reads until the response to `id`.
    pub fn response(&mut self, id: u64) -> Value {
        loop {
            let line = self.next_line();
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if message["id"] == id && message.get("method").is_none() {
                return message;
            }
        }
    }

    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params);
        self.response(id)
    }

    /// Closes stdin (the client goes away) and waits for toolgate to exit;
    /// `None` if it does not within a minute (then it is killed).
    pub fn close(&mut self) -> Option<ExitStatus> {
        drop(self.stdin.take());
        let status = wait_until(&mut self.child, Duration::from_secs(60));
        self.seen.extend(self.stdout.rest(Duration::from_secs(10)));
        status
    }

    /// Everything toolgate wrote to stderr (after it exited).
    pub fn stderr(&self) -> String {
        self.stderr.rest(Duration::from_secs(10)).join("\n")
    }
}

impl Drop for RawStdio {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// stdout is the protocol channel: one stray byte (a note, a log line, a
/// command's output) breaks the client's framing. Configuration notes,
/// refusals, a failing command that writes to both streams and a call of an
/// unknown tool must leave nothing on stdout but JSON-RPC messages.
#[test]
fn stdout_carries_only_json_rpc() {
    let p = Project::new();
    // A sandbox-runtime settings file with allowRead makes a configuration
    // note at start-up.
    p.write(
        ".srt.json",
        r#"{"network": {"allowedDomains": [], "deniedDomains": []},
            "filesystem": {"denyRead": [], "allowWrite": [], "denyWrite": [], "allowRead": ["x"]}}"#,
    );
    let config = p.write(
        "toolgate.toml",
        "[network]\nmode = \"proxy\"\nsettings_file = \".srt.json\"\n",
    );
    crate::common::trust(p.base(), &config);
    let mut raw = RawStdio::start(p.toolgate(&["mcp"]));
    let listed = raw.request("tools/list", json!({}));
    assert!(listed["result"]["tools"].as_array().unwrap().len() > 5);
    let denied = raw.request(
        "tools/call",
        json!({"name": "read", "arguments": {"path": "/etc/shadow"}}),
    );
    assert_eq!(denied["result"]["isError"], true, "{denied}");
    let bash = raw.send(
        "tools/call",
        json!({"name": "bash",
               // The pause lets the lines go out as progress before
               // the call ends (lines still queued at the end are dropped
               // by design: the result carries them).
               "arguments": {"command": "echo to-stdout; echo to-stderr >&2; sleep 0.5; exit 3"},
               "_meta": {"progressToken": "p1"}}),
    );
    let bash_done = raw.response(bash);
    assert_eq!(
        bash_done["result"]["structuredContent"]["exit_code"], 3,
        "{bash_done}"
    );
    let unknown = raw.request(
        "tools/call",
        json!({"name": "no_such_tool", "arguments": {}}),
    );
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    let status = raw.close();
    let stderr = raw.stderr();
    assert!(status.is_some_and(|s| s.success()), "{status:?}\n{stderr}");

    let not_json_rpc: Vec<&String> = raw
        .seen
        .iter()
        .filter(|line| {
            serde_json::from_str::<Value>(line)
                .map_or(true, |m| m["jsonrpc"] != "2.0" || !m.is_object())
        })
        .collect();
    assert_eq!(not_json_rpc, Vec::<&String>::new(), "stderr:\n{stderr}");
    // The notes and the refusal went to stderr.
    assert!(stderr.contains("toolgate: note: "), "{stderr}");
    assert!(stderr.contains("allowRead is not applied"), "{stderr}");
    assert!(stderr.contains("denied by the paths policy"), "{stderr}");

    // Progress of the bash call, and none of it after its result.
    let messages: Vec<Value> = raw
        .seen
        .iter()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let answered = messages.iter().position(|m| m["id"] == bash).unwrap();
    let progress: Vec<usize> = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| {
            m["method"] == "notifications/progress" && m["params"]["progressToken"] == "p1"
        })
        .map(|(i, _)| i)
        .collect();
    assert!(!progress.is_empty(), "no progress: {messages:#?}");
    assert!(
        progress.iter().all(|&i| i < answered),
        "progress after the result: {messages:#?}"
    );
}

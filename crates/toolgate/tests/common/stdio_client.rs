#![allow(dead_code)] // Each test binary uses a part.

//! A minimal MCP client for `toolgate mcp` over stdio, for tests that need the
//! server as a process of its own (to kill it, to read its memory use): JSON-RPC
//! lines, a 2025-11-25 handshake, tool calls.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

/// A running `toolgate mcp`, killed when dropped.
pub struct McpServer {
    pub child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    next_id: u64,
}

impl McpServer {
    /// Starts `cmd` (a `toolgate ... mcp` command) and initializes a session.
    pub fn start(mut cmd: Command) -> McpServer {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        let mut server = McpServer {
            child,
            stdin: Some(stdin),
            lines,
            next_id: 1,
        };
        let init = server.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "test", "version": "0"}}),
        );
        assert!(init.get("result").is_some(), "{init}");
        server.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        server
    }

    fn send(&mut self, message: Value) {
        let stdin = self.stdin.as_mut().expect("stdin is closed");
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    /// The client goes away (stdin closes) and the server exits as it does then;
    /// whether it exited cleanly (a generous bound against hangs).
    pub fn close(&mut self) -> bool {
        drop(self.stdin.take());
        eventually(
            Duration::from_secs(60),
            || matches!(self.child.try_wait(), Ok(Some(status)) if status.success()),
        )
    }

    /// Sends a request and returns its response (a generous bound against hangs).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(120))
                .unwrap_or_else(|_| panic!("no response to {method}"));
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if message["id"] == id && message.get("method").is_none() {
                return message;
            }
        }
    }

    /// Sends a request and returns its response and every notification
    /// that arrived before it, without waiting longer than `limit`.
    pub fn request_with_notifications(
        &mut self,
        method: &str,
        params: Value,
        limit: Duration,
    ) -> (Value, Vec<Value>) {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let mut notifications = Vec::new();
        loop {
            let line = self
                .lines
                .recv_timeout(limit)
                .unwrap_or_else(|_| panic!("no response to {method}; saw {notifications:?}"));
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if message["id"] == id && message.get("method").is_none() {
                return (message, notifications);
            }
            if message.get("id").is_none() {
                notifications.push(message);
            }
        }
    }

    /// Sends a request without waiting for its answer; its id.
    pub fn start_request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// Sends a notification.
    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// The next message, within `limit`.
    pub fn next_message(&mut self, limit: Duration) -> Option<Value> {
        let line = self.lines.recv_timeout(limit).ok()?;
        serde_json::from_str(&line).ok()
    }

    /// Calls `tool`: its text and structured content; panics on a tool error.
    pub fn call(&mut self, tool: &str, arguments: Value) -> (String, Value) {
        let response = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        let result = &response["result"];
        assert_eq!(result["isError"], json!(false), "{tool}: {response}");
        (text_of(&response), result["structuredContent"].clone())
    }

    /// The server's peak resident memory so far, in KiB (VmHWM).
    pub fn peak_memory_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }
}

impl Drop for McpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The text parts of a `tools/call` response, joined by newlines.
pub fn text_of(response: &Value) -> String {
    response["result"]["content"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// Command lines of live processes containing `needle` (zombies have none).
pub fn processes_with(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().map_while(Result::ok) {
        let name = entry.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(raw) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let line = String::from_utf8_lossy(&raw).replace('\0', " ");
        if line.contains(needle) {
            found.push(format!("{}: {}", name.to_string_lossy(), line.trim()));
        }
    }
    found
}

/// Waits, bounded against hangs (not a timing assertion), until `done` holds.
pub fn eventually(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + limit;
    while std::time::Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    done()
}

/// A string no other test (here or in a concurrent run) uses, to find a command
/// line in /proc.
pub fn unique(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "{prefix}{}x{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// The state directory `common::toolgate` gives a server with home `base/home`.
pub fn state_dir(base: &Path) -> std::path::PathBuf {
    base.join("home/.local/state/toolgate")
}

/// A temp base (the server's HOME and state) with a canonical project root in it.
pub struct Project {
    pub base: tempfile::TempDir,
    pub root: PathBuf,
}

impl Project {
    pub fn new() -> Project {
        let base = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(base.path().join("home/.config")).unwrap();
        let root = base.path().join("project");
        std::fs::create_dir_all(&root).unwrap();
        let root = std::fs::canonicalize(root).unwrap();
        Project { base, root }
    }
}

//! The MCP gateway end to end: external MCP servers (the reference servers
//! from npm, run by the Node.js 22 that `scripts/test` installs, and small
//! Python peers on the official SDK) configured in toolgate and reached
//! through the `toolgate` binary: `call`, `tools`, `mcp`, `mcp-servers`.
//!
//! Every peer is real; a missing one fails the test with how to install it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../common/mod.rs"]
mod common;
#[path = "../common/stdio_client.rs"]
mod stdio_client;

mod calls;
mod config;
mod conformance;
mod deferred;
mod http;
mod oauth;
mod pinning;
mod policy;
mod sandboxed;
mod stdio;

use std::io::BufRead;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use stdio_client::text_of;

/// A required environment variable naming an installed peer.
fn peer_path(var: &str) -> PathBuf {
    let Some(value) = std::env::var_os(var) else {
        panic!(
            "{var} is not set: the gateway tests connect real MCP servers. Run scripts/test, \
             which installs them into target/mcp-peers and sets {var}"
        );
    };
    let path = PathBuf::from(value);
    assert!(
        path.exists(),
        "{var}={} does not exist; run scripts/test",
        path.display()
    );
    path
}

/// Node.js 22.
fn node() -> PathBuf {
    peer_path("TOOLGATE_TEST_NODE")
}

/// The entry script of the npm reference server `package`
/// (`server-everything`, `server-memory`, `server-filesystem`).
fn reference_server(package: &str) -> PathBuf {
    let script = peer_path("TOOLGATE_TEST_NODE_MODULES")
        .join("@modelcontextprotocol")
        .join(package)
        .join("dist/index.js");
    assert!(
        script.is_file(),
        "{} is missing; run scripts/test",
        script.display()
    );
    script
}

/// The venv Python with the MCP SDK.
fn python() -> PathBuf {
    peer_path("TOOLGATE_TEST_PYTHON")
}

/// A Python peer of `tests/gateway/peers`.
fn python_peer(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/gateway/peers")
        .join(name)
}

/// The stdio server config of server-everything under `name`; `marker` is
/// an extra argument (the server ignores it) to find its process in /proc.
fn everything(name: &str, marker: &str) -> Value {
    json!({
        "name": name,
        "kind": "stdio",
        "command": node(),
        "args": [reference_server("server-everything"), "stdio", marker],
    })
}

/// A test's home (its user config) and project directory.
struct Setup {
    base: tempfile::TempDir,
    root: PathBuf,
    servers: Option<Value>,
    /// `TOOLGATE_MCP_DEFER_THRESHOLD`: high by default, so that a client
    /// sees every external tool; `None` leaves the configuration's.
    defer_threshold: Option<usize>,
}

impl Setup {
    fn new() -> Setup {
        let base = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(base.path().join("home/.config/toolgate")).unwrap();
        let root = base.path().join("project");
        std::fs::create_dir_all(&root).unwrap();
        let root = std::fs::canonicalize(root).unwrap();
        Setup {
            base,
            root,
            servers: None,
            defer_threshold: Some(1000),
        }
    }

    /// The configured deferral applies (default: above 10 external tools).
    fn deferring(mut self) -> Setup {
        self.defer_threshold = None;
        self
    }

    /// Servers given as `TOOLGATE_MCP_SERVERS`.
    fn with_servers(mut self, servers: Value) -> Setup {
        self.servers = Some(servers);
        self
    }

    fn base(&self) -> &Path {
        self.base.path()
    }

    /// Writes the user config (mode 0600: it may hold secrets).
    fn user_config(&self, text: &str) -> PathBuf {
        let path = self.base().join("home/.config/toolgate/config.toml");
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        path
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = common::toolgate(self.base(), &self.root);
        if let Some(servers) = &self.servers {
            cmd.env("TOOLGATE_MCP_SERVERS", servers.to_string());
        }
        if let Some(threshold) = self.defer_threshold {
            cmd.env("TOOLGATE_MCP_DEFER_THRESHOLD", threshold.to_string());
        }
        cmd.args(args);
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).stdin(Stdio::null()).output().unwrap()
    }

    /// `args` must succeed; their stdout as JSON.
    fn json(&self, args: &[&str]) -> Value {
        let o = self.run(args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {}", stdout(&o)))
    }

    /// `toolgate mcp` with a client session.
    fn mcp(&self) -> stdio_client::McpServer {
        stdio_client::McpServer::start(self.command(&["mcp"]))
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A free loopback port (bound and released: a peer takes it right after).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A peer server process, killed when dropped.
struct Peer {
    child: Child,
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `cmd` and waits until a line of its stdout or stderr contains
/// `ready`; returns the peer and that line.
fn start_peer(mut cmd: Command, ready: &str) -> (Peer, String) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (sender, lines) = std::sync::mpsc::channel::<String>();
    for pipe in [
        Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
        Box::new(child.stderr.take().unwrap()),
    ] {
        let sender = sender.clone();
        std::thread::spawn(move || {
            // Read to the end even once nobody listens: a peer whose
            // output pipe closed would die of EPIPE at its next log line.
            for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
                let _ = sender.send(line);
            }
        });
    }
    let mut said = Vec::new();
    loop {
        match lines.recv_timeout(Duration::from_secs(60)) {
            Ok(line) if line.contains(ready) => return (Peer { child }, line),
            Ok(line) => said.push(line),
            Err(_) => panic!(
                "the peer never said {ready:?}; it said: {}",
                said.join("\n")
            ),
        }
    }
}

/// server-everything over `transport` (`streamableHttp` or `sse`) on a
/// free port: the peer and its port.
fn everything_http(transport: &str) -> (Peer, u16) {
    let port = free_port();
    let mut cmd = Command::new(node());
    cmd.arg(reference_server("server-everything"))
        .arg(transport)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("PORT", port.to_string());
    let ready = if transport == "sse" {
        "running on port"
    } else {
        "listening"
    };
    let (peer, _) = start_peer(cmd, ready);
    (peer, port)
}

#[test]
fn helpers_find_the_peers() {
    // The peers the other tests need are installed (a clear failure here
    // instead of one per test).
    assert!(node().is_file());
    for package in ["server-everything", "server-memory", "server-filesystem"] {
        reference_server(package);
    }
    assert!(python().is_file());
}

//! `toolgate mcp` and `toolgate serve` driven by MCP peers nobody here
//! wrote: the MCP Inspector CLI (stdio and Streamable HTTP), the official
//! conformance suite (server mode), and raw HTTP for what neither checks
//! (session lifecycle, Host/Origin, the bearer token).
//!
//! The Node.js tools come from `scripts/test`, which installs them and
//! exports `TOOLGATE_TEST_NODE` and `TOOLGATE_TEST_NODE_MODULES`. Without
//! them every test here fails and says so; none passes by skipping.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../common/mod.rs"]
mod common;

mod conformance;
mod inspector;
mod sessions;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{Served, toolgate};

/// The text of `notes.txt` in every test project.
const NOTES: &str = "hello from the peers\n";

/// The bearer token of the token-protected servers.
const TOKEN: &str = "peer-test-token-5b1c";

/// Node.js 22 and the npm tools `scripts/test` installed.
struct Peers {
    node: PathBuf,
    bin: PathBuf,
}

impl Peers {
    fn from_env() -> Peers {
        let var = |name: &str| {
            let value = std::env::var_os(name).unwrap_or_else(|| {
                panic!(
                    "{name} is not set. These tests drive real MCP peers (Node.js 22, the MCP \
                     Inspector and the MCP conformance suite); run them through scripts/test, \
                     which installs the peers and exports TOOLGATE_TEST_NODE and \
                     TOOLGATE_TEST_NODE_MODULES."
                )
            });
            PathBuf::from(value)
        };
        let node = var("TOOLGATE_TEST_NODE");
        let bin = var("TOOLGATE_TEST_NODE_MODULES").join(".bin");
        for needed in [
            node.clone(),
            bin.join("mcp-inspector"),
            bin.join("conformance"),
        ] {
            assert!(
                needed.exists(),
                "{} does not exist; run scripts/test, which installs Node.js 22, \
                 @modelcontextprotocol/inspector and @modelcontextprotocol/conformance",
                needed.display()
            );
        }
        Peers { node, bin }
    }

    /// `node <tool>` with nothing of the host's environment but PATH, and
    /// `home` as HOME (the inspector keeps its state in ~/.mcp-inspector).
    fn command(&self, tool: &str, home: &Path) -> Command {
        let mut cmd = Command::new(&self.node);
        cmd.arg(self.bin.join(tool))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home);
        cmd
    }
}

/// A temporary home and project (`project/notes.txt`) for one test.
struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    fn new() -> Project {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        std::fs::create_dir_all(dir.path().join("project")).unwrap();
        std::fs::write(dir.path().join("project/notes.txt"), NOTES).unwrap();
        Project { dir }
    }

    fn base(&self) -> &Path {
        self.dir.path()
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    fn project(&self) -> PathBuf {
        self.dir.path().join("project")
    }

    /// `toolgate <args>` in the project, isolated as `common::toolgate` does.
    fn toolgate(&self, args: &[&str]) -> Command {
        let mut cmd = toolgate(self.base(), &self.project());
        cmd.args(args);
        cmd
    }

    /// `toolgate serve --port 0 <args>` with `token` as TOOLGATE_TOKEN (or
    /// `--no-token` when `None`), listening.
    fn serve(&self, token: Option<&str>) -> Served {
        let mut cmd = self.toolgate(&["serve", "--port", "0"]);
        match token {
            Some(token) => cmd.env("TOOLGATE_TOKEN", token),
            None => cmd.arg("--no-token"),
        };
        Served::start(cmd).unwrap()
    }
}

/// Runs `cmd` to the end and returns what it printed. The limit guards
/// against a hung peer (a missed response, an OAuth prompt) so the test
/// fails with the output instead of blocking the run; it is far above what
/// any of these commands needs and is not a timing assertion.
fn run(mut cmd: Command) -> Output {
    const HANG_GUARD: Duration = Duration::from_secs(120);
    let described = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {described}: {e}"));
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > HANG_GUARD {
            kill(&mut child);
            let out = String::from_utf8_lossy(&stdout.join().unwrap_or_default()).into_owned();
            let err = String::from_utf8_lossy(&stderr.join().unwrap_or_default()).into_owned();
            panic!(
                "{described} hung (killed after {HANG_GUARD:?})\nstdout:\n{out}\nstderr:\n{err}"
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    }
}

fn drain(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut all = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut all);
        }
        all
    })
}

fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

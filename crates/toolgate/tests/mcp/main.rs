//! `toolgate mcp` and `toolgate serve` driven end to end by a real MCP
//! client: the official Python SDK (`mcp==2.3.0`, installed by
//! `scripts/test`, found through `TOOLGATE_TEST_PYTHON`), in both of its
//! protocol modes (legacy: 2025-11-25 with the initialize handshake; auto:
//! 2026-07-28), plus raw clients where the SDK would hide what is on the wire.
//!
//! Each Python run is one scenario of `clients/scenario.py`, which prints one
//! JSON object of what the SDK observed; the tests here judge it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../common/mod.rs"]
mod common;

mod allowlist;
mod approvals;
mod approvals_http;
mod calls;
mod gate;
mod hidden_names;
mod home_root;
mod host_view;
mod http;
mod malformed;
mod own_config;
mod path_shadow;
mod pool;
mod progress;
mod raw;
mod roots;
mod shutdown;
mod snapshot_scope;
mod weakened;

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The two ways the SDK talks to a server.
#[derive(Debug, Clone, Copy)]
enum Mode {
    /// `initialize` handshake, protocol 2025-11-25.
    Legacy,
    /// `server/discover`, protocol 2026-07-28 with toolgate.
    Auto,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Legacy => "legacy",
            Mode::Auto => "auto",
        }
    }

    /// The protocol version the SDK must end up speaking with toolgate.
    fn protocol(self) -> &'static str {
        match self {
            Mode::Legacy => "2025-11-25",
            Mode::Auto => "2026-07-28",
        }
    }
}

/// A temporary home (`base/home`, under the temp dir) and project
/// (canonical, under the target directory).
///
/// The project is not under /tmp: the path layer allows the temp dir as a
/// whole, so a project there would hide whether the layer itself confines a
/// call to the roots. The home stays short, under /tmp: the egress proxy's
/// unix socket lives in its state directory, and socket paths are limited
/// to 107 bytes.
struct Project {
    base: tempfile::TempDir,
    _work: tempfile::TempDir,
    root: PathBuf,
}

impl Project {
    fn new() -> Project {
        let base = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(base.path().join("home/.config")).unwrap();
        let work = tempfile::Builder::new()
            .prefix("mcp-e2e-")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap();
        std::fs::create_dir_all(work.path().join("project")).unwrap();
        let root = std::fs::canonicalize(work.path().join("project")).unwrap();
        Project {
            base,
            _work: work,
            root,
        }
    }

    /// Where the home is, and room for directories outside the project.
    fn base(&self) -> &Path {
        self.base.path()
    }

    fn root(&self) -> &Path {
        &self.root
    }

    /// Writes `contents` to `relative` under the project, parents created.
    fn write(&self, relative: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.root.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, contents).unwrap();
        path
    }

    /// `toolgate ARGS` in the project, in the tests' isolated environment.
    fn toolgate(&self, args: &[&str]) -> Command {
        let mut cmd = common::toolgate(self.base(), &self.root);
        cmd.args(args);
        cmd
    }

    /// The scenario config that makes the SDK start `toolgate ARGS mcp`
    /// itself over stdio, with exactly the environment `common::toolgate`
    /// gives it.
    fn stdio(&self, mode: Mode, args: &[&str]) -> Value {
        let mut cmd = self.toolgate(args);
        cmd.arg("mcp");
        json!({"mode": mode.name(), "stdio": stdio_spawn(&cmd)})
    }
}

/// How the SDK spawns `cmd`: program, arguments, directory and environment.
fn stdio_spawn(cmd: &Command) -> Value {
    let env: serde_json::Map<String, Value> = cmd
        .get_envs()
        .filter_map(|(k, v)| Some((k.to_str()?.to_owned(), json!(v?.to_str()?))))
        .collect();
    json!({
        "command": cmd.get_program().to_str().unwrap(),
        "args": cmd.get_args().map(|a| a.to_str().unwrap()).collect::<Vec<_>>(),
        "cwd": cmd.get_current_dir().unwrap().to_str().unwrap(),
        "env": env,
    })
}

/// The venv Python with the MCP SDK. Missing means the test cannot run
/// here, which is a failure, never a skip.
fn python() -> PathBuf {
    let Some(python) = std::env::var_os("TOOLGATE_TEST_PYTHON") else {
        panic!(
            "TOOLGATE_TEST_PYTHON is not set: these tests drive toolgate with the real Python \
             MCP SDK (mcp==2.3.0). Run scripts/test, which installs it into \
             target/mcp-peers/venv and sets the variable, or set it to that venv's python."
        );
    };
    let python = PathBuf::from(python);
    assert!(
        python.is_file(),
        "TOOLGATE_TEST_PYTHON={} does not exist; run scripts/test to install the Python MCP SDK",
        python.display()
    );
    python
}

/// `clients/scenario.py SCENARIO` with `config` on stdin, started but not
/// waited for. Python gets no environment of the host but PATH, and never
/// writes bytecode into the source tree.
fn start_scenario(base: &Path, scenario: &str, config: &Value) -> Child {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/clients/scenario.py");
    let mut child = Command::new(python())
        .arg(script)
        .arg(scenario)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", base.join("home"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(config.to_string().as_bytes()).unwrap();
    drop(stdin);
    child
}

/// Runs a scenario to its end and returns its observations. A scenario
/// that crashes, hangs or prints no JSON fails the test with everything it
/// said.
fn scenario(base: &Path, name: &str, config: &Value) -> Value {
    let mut child = start_scenario(base, name, config);
    let stdout = Lines::of(child.stdout.take().unwrap());
    let stderr = Lines::of(child.stderr.take().unwrap());
    let status = wait_until(&mut child, Duration::from_secs(120));
    let said = stdout.rest(Duration::from_secs(10));
    let errors = stderr.rest(Duration::from_secs(10)).join("\n");
    let Some(status) = status else {
        panic!("scenario {name} did not finish within 120 s:\n{said:?}\n{errors}");
    };
    let observed: Value = said
        .last()
        .and_then(|line| serde_json::from_str(line).ok())
        .unwrap_or_else(|| {
            panic!("scenario {name} printed no JSON ({status}):\n{said:?}\nstderr:\n{errors}")
        });
    assert!(
        observed.get("crashed").is_none(),
        "scenario {name} crashed: {}\nstderr:\n{errors}",
        observed["crashed"]
    );
    observed
}

/// Waits for `child` to exit, at most `limit` (a bound against hangs, not a
/// timing assertion); kills it and returns `None` when it does not.
fn wait_until(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `cmd` started with all three streams piped: the child, its stdin, and
/// its stdout and stderr as lines.
fn spawn_piped(mut cmd: Command) -> (Child, Option<ChildStdin>, Lines, Lines) {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take();
    let stdout = Lines::of(child.stdout.take().unwrap());
    let stderr = Lines::of(child.stderr.take().unwrap());
    (child, stdin, stdout, stderr)
}

/// The lines of a pipe, read on a thread of their own.
struct Lines {
    receiver: mpsc::Receiver<String>,
}

impl Lines {
    fn of(pipe: impl std::io::Read + Send + 'static) -> Lines {
        let (sender, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Lines { receiver }
    }

    /// The next line, or `None` at the end of the pipe or after `limit`.
    fn next(&self, limit: Duration) -> Option<String> {
        self.receiver.recv_timeout(limit).ok()
    }

    /// Every line up to the end of the pipe (bounded by `limit` per line).
    fn rest(&self, limit: Duration) -> Vec<String> {
        std::iter::from_fn(|| self.next(limit)).collect()
    }
}

/// Command lines of live processes containing `needle` (zombies have none).
fn processes_with(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().map_while(Result::ok) {
        if !entry
            .file_name()
            .to_string_lossy()
            .bytes()
            .all(|b| b.is_ascii_digit())
        {
            continue;
        }
        let Ok(raw) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let line = String::from_utf8_lossy(&raw).replace('\0', " ");
        if line.contains(needle) {
            found.push(line.trim().to_owned());
        }
    }
    found
}

/// A number no other test (here or in a concurrent run) uses, to make a
/// command line findable in /proc: `1000.123` becomes `1000.123<pid><n>`,
/// still a valid argument to `sleep`.
fn unique(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "{prefix}{}{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// The text blocks of one observed call result, joined.
fn text(result: &Value) -> String {
    let Some(blocks) = result["content"].as_array() else {
        panic!("not a tool result: {result}");
    };
    blocks
        .iter()
        .filter_map(|b| b["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// `file://` URI of a local path.
fn file_uri(path: &Path) -> String {
    format!("file://{}", path.display())
}

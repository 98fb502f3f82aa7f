//! One stdio server's process and the MCP transport over its stdin and
//! stdout.
//!
//! The process runs through toolgate's own runner, confined or not: it
//! leads a process group that is killed whole when the task holding it is
//! dropped, it carries the parent-death signal and the lifeline, so no
//! server outlives the gateway however the gateway ends (peers that spawn
//! servers with a plain `Command` leak one per restart). A sandboxed server
//! runs through [`Sandbox::run_attached`] like any command, with its own
//! roots and egress allowlist.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::sync::{mpsc, oneshot};
use toolgate_sandbox::runner::{self, Attach, ExecRequest, Stream};
use toolgate_sandbox::{Sandbox, SandboxCommand, SandboxSpec};

use super::config::StdioServer;

/// Variables of toolgate's own environment a server gets, as MCP clients
/// pass them: enough to find programs and a home, and nothing else of
/// toolgate's (its token, its store URL, the user's cloud credentials).
const INHERITED: &[&str] = &["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG"];

/// Lines of stderr kept for `mcp-servers list` and error messages.
const STDERR_LINES: usize = 20;

/// Longest stdout line accepted from a server (one JSON-RPC message).
const MAX_LINE: usize = 16 * 1024 * 1024;

/// Where a server runs.
#[derive(Clone)]
pub enum Confinement {
    /// On the host, with toolgate's privileges.
    Unconfined,
    /// Inside toolgate's sandbox with this spec.
    Sandboxed {
        /// The sandbox (its egress allowlist is this server's).
        sandbox: Arc<Sandbox>,
        /// Roots, network and working directory.
        spec: SandboxSpec,
    },
}

impl std::fmt::Debug for Confinement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Confinement::Unconfined => f.write_str("Unconfined"),
            Confinement::Sandboxed { spec, .. } => f
                .debug_struct("Sandboxed")
                .field("spec", spec)
                .finish_non_exhaustive(),
        }
    }
}

/// The last lines a server wrote to stderr.
#[derive(Debug, Clone, Default)]
pub struct StderrTail(Arc<Mutex<VecDeque<String>>>);

impl StderrTail {
    fn push(&self, line: &str) {
        if let Ok(mut lines) = self.0.lock() {
            if lines.len() == STDERR_LINES {
                lines.pop_front();
            }
            lines.push_back(line.chars().take(500).collect());
        }
    }

    /// The kept lines, oldest first.
    pub fn lines(&self) -> Vec<String> {
        self.0
            .lock()
            .map(|l| l.iter().cloned().collect())
            .unwrap_or_default()
    }
}

/// A running server process: the transport to talk to it, and what tells
/// when it ended. Dropping `exited`'s task (see [`spawn`]) kills it.
pub struct Spawned {
    /// The MCP transport over stdin and stdout.
    pub transport: LineTransport,
    /// Resolves with a description of how the process ended.
    pub exited: oneshot::Receiver<String>,
    /// The task that holds the process; aborting it kills the process group.
    pub task: tokio::task::JoinHandle<()>,
    /// The process id (also its group id), once known.
    pub pid: Option<u32>,
}

/// Starts the server process.
pub async fn spawn(
    server: &StdioServer,
    confinement: &Confinement,
    stderr: StderrTail,
) -> Result<Spawned, String> {
    let (stdin_tx, stdin_rx) = mpsc::channel::<Vec<u8>>(64);
    let (message_tx, message_rx) = mpsc::unbounded_channel();
    let (pid_tx, pid_rx) = oneshot::channel();
    let (exit_tx, exit_rx) = oneshot::channel();
    let splitter = Arc::new(Mutex::new(LineSplitter::new(message_tx, stderr.clone())));
    let raw: runner::RawOutput = Arc::new(move |stream, bytes| {
        if let Ok(mut splitter) = splitter.lock() {
            splitter.feed(stream, bytes);
        }
    });
    let attach = Attach {
        stdin: Some(stdin_rx),
        spawned: Some(pid_tx),
        egress_records: None,
        raw_output: Some(raw),
    };
    // A server lives as long as the gateway: no wall-clock limit.
    let forever = Duration::from_secs(100 * 365 * 24 * 3600);
    let env = environment(server);
    let task = match confinement {
        Confinement::Unconfined => {
            let cwd = match &server.cwd {
                Some(cwd) => cwd.clone(),
                None => {
                    std::env::current_dir().map_err(|e| format!("no working directory: {e}"))?
                }
            };
            let mut request = ExecRequest::new(server.command.clone())
                .args(server.args.iter())
                .cwd(cwd)
                .timeout(forever)
                .max_output_bytes(0)
                .lifeline(3);
            for (key, value) in env {
                request = request.env(key, value);
            }
            tokio::spawn(async move {
                let end = match runner::run_attached(request, attach, |_, _| {}).await {
                    Ok(outcome) => describe_exit(&outcome),
                    Err(e) => format!("could not start: {e}"),
                };
                let _ = exit_tx.send(end);
            })
        }
        Confinement::Sandboxed { sandbox, spec } => {
            let sandbox = sandbox.clone();
            let mut spec = spec.clone();
            if let Some(cwd) = &server.cwd {
                spec.cwd.clone_from(cwd);
            }
            let mut argv = vec![OsString::from(&server.command)];
            argv.extend(server.args.iter().map(OsString::from));
            let mut command = SandboxCommand::new(argv).timeout(forever);
            for (key, value) in &server.env {
                command = command.set_env(key.clone(), value.expose());
            }
            tokio::spawn(async move {
                let end = match sandbox
                    .run_attached(&spec, command, attach, &mut |_, _| {})
                    .await
                {
                    Ok(outcome) => describe_exit(&outcome.outcome),
                    Err(e) => format!("could not start in the sandbox: {e}"),
                };
                let _ = exit_tx.send(end);
            })
        }
    };
    let pid = pid_rx.await.ok();
    Ok(Spawned {
        transport: LineTransport {
            stdin: stdin_tx,
            incoming: message_rx,
        },
        exited: exit_rx,
        task,
        pid,
    })
}

fn describe_exit(outcome: &runner::ExecOutcome) -> String {
    match outcome.signal {
        Some(signal) => format!("was killed by signal {signal}"),
        None => format!("exited with status {}", outcome.exit_code),
    }
}

/// The inherited variables that are set, then the configured ones (which
/// win).
fn environment(server: &StdioServer) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = INHERITED
        .iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| ((*k).to_owned(), v)))
        .filter(|(k, _)| !server.env.contains_key(k))
        .collect();
    if !env.iter().any(|(k, _)| k == "PATH") && !server.env.contains_key("PATH") {
        env.push(("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".to_owned()));
    }
    env.extend(
        server
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.expose().to_owned())),
    );
    env
}

/// Cuts stdout into JSON-RPC messages and stderr into kept lines.
struct LineSplitter {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    messages: mpsc::UnboundedSender<RxJsonRpcMessage<RoleClient>>,
    tail: StderrTail,
}

impl LineSplitter {
    fn new(
        messages: mpsc::UnboundedSender<RxJsonRpcMessage<RoleClient>>,
        tail: StderrTail,
    ) -> Self {
        LineSplitter {
            stdout: Vec::new(),
            stderr: Vec::new(),
            messages,
            tail,
        }
    }

    fn feed(&mut self, stream: Stream, bytes: &[u8]) {
        let buffer = match stream {
            Stream::Stdout => &mut self.stdout,
            Stream::Stderr => &mut self.stderr,
        };
        buffer.extend_from_slice(bytes);
        let mut lines = Vec::new();
        while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buffer.drain(..=end).collect();
            lines.push(
                String::from_utf8_lossy(&line[..end])
                    .trim_end_matches('\r')
                    .to_owned(),
            );
        }
        let overlong = buffer.len() > MAX_LINE;
        if overlong {
            buffer.clear();
        }
        for line in &lines {
            match stream {
                Stream::Stdout => self.message(line),
                Stream::Stderr => self.tail.push(line),
            }
        }
        if overlong {
            // A server that writes an endless line is broken; drop the line
            // rather than the gateway's memory.
            self.tail
                .push("toolgate: dropped an output line longer than 16 MiB");
        }
    }

    fn message(&self, line: &str) {
        if line.trim().is_empty() {
            return;
        }
        match serde_json::from_str::<RxJsonRpcMessage<RoleClient>>(line) {
            Ok(message) => {
                let _ = self.messages.send(message);
            }
            // Servers print banners and logs on stdout by mistake: keep
            // them where a person looks, not in the protocol.
            Err(_) => self.tail.push(&format!("(stdout, not JSON-RPC) {line}")),
        }
    }
}

/// Newline-delimited JSON-RPC over the process's stdin and stdout.
pub struct LineTransport {
    stdin: mpsc::Sender<Vec<u8>>,
    incoming: mpsc::UnboundedReceiver<RxJsonRpcMessage<RoleClient>>,
}

/// The server's stdin is closed (it exited).
#[derive(Debug, thiserror::Error)]
#[error("the MCP server's stdin is closed (the process ended)")]
pub struct Closed;

impl Transport<RoleClient> for LineTransport {
    type Error = Closed;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let stdin = self.stdin.clone();
        async move {
            let mut line = serde_json::to_vec(&item).map_err(|_| Closed)?;
            line.push(b'\n');
            stdin.send(line).await.map_err(|_| Closed)
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.incoming.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.incoming.close();
        Ok(())
    }
}

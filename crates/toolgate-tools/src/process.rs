//! Background processes of one agent: dev servers, watchers, long builds.
//!
//! Each runs as its own `bash -c` in the sandbox, like `bash`, but the call
//! returns at once with the pid; the output goes to `<pid>.log` in a
//! private directory of the table (`<log dir>/toolgate-proc-<toolgate
//! pid>-<n>/`, mode 0700) and stdin stays open for `process_write`. The
//! table is per agent: a pid another agent started is unknown here. Every
//! process is killed when its table is dropped, that is when toolgate
//! stops, and the directory with its output files is removed then.

mod host;
mod tools;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde::Serialize;
use tokio::sync::{Notify, mpsc, oneshot};
use toolgate_core::ToolError;
use toolgate_sandbox::SandboxCommand;
use toolgate_sandbox::runner::Attach;

use crate::facts_schema;
use crate::fs::{Fs, workspace_error};

pub use self::tools::{
    ProcessKillTool, ProcessListTool, ProcessReadTool, ProcessStartTool, ProcessWriteTool,
};

/// Bounds of the background processes of one agent.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProcessConfig {
    /// Processes running at once.
    pub max_running: usize,
    /// Where each table makes the private directory of its output files
    /// (outside the workspace).
    pub log_dir: PathBuf,
    /// A process still running after this long is stopped.
    pub max_lifetime: Duration,
    /// Time between TERM and KILL in `process_kill`.
    pub kill_grace: Duration,
}

impl Default for ProcessConfig {
    fn default() -> Self {
        ProcessConfig {
            max_running: 8,
            log_dir: std::env::temp_dir(),
            max_lifetime: Duration::from_secs(24 * 3600),
            kill_grace: Duration::from_secs(3),
        }
    }
}

/// Where a process is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "state")]
pub enum ProcessState {
    Running,
    Exited {
        exit_code: i32,
        signal: Option<i32>,
        /// Stopped at the end of its lifetime.
        timed_out: bool,
    },
    /// It could not be run at all.
    Failed {
        error: String,
    },
}

impl ProcessState {
    /// The JSON Schema of a state as it serializes (the `status` fact of
    /// the `process_*` tools).
    pub(crate) fn schema() -> serde_json::Value {
        facts_schema::object(
            serde_json::json!({
                "state": {
                    "enum": ["running", "exited", "failed"],
                    "description": "failed: the command could not be run at all.",
                },
                "exit_code": {
                    "type": "integer",
                    "description": "exited: the exit status (128 + n when killed by signal n).",
                },
                "signal": {
                    "type": ["integer", "null"],
                    "description": "exited: the signal that killed it, if one did.",
                },
                "timed_out": {
                    "type": "boolean",
                    "description": "exited: it was stopped at the end of its lifetime.",
                },
                "error": {"type": "string", "description": "failed: why."},
            }),
            &["state"],
        )
    }
}

/// One background process.
pub(crate) struct Entry {
    pub pid: u32,
    pub command: String,
    pub started: SystemTime,
    /// The kernel's start time of `pid` (in clock ticks since boot): a pid
    /// whose start time differs is another process that reused the number.
    pub start_ticks: Option<u64>,
    pub log: PathBuf,
    stdin: Mutex<Option<mpsc::Sender<Vec<u8>>>>,
    state: Mutex<ProcessState>,
    /// Wakes readers waiting for output or for the end.
    pub changed: Arc<Notify>,
}

impl Entry {
    pub fn state(&self) -> ProcessState {
        self.state
            .lock()
            .map_or(ProcessState::Running, |s| s.clone())
    }

    pub fn is_running(&self) -> bool {
        self.state() == ProcessState::Running
    }

    /// Sends `text` to stdin; `close` ends stdin afterwards.
    pub async fn write(&self, text: &[u8], close: bool) -> Result<(), ToolError> {
        let sender = self
            .stdin
            .lock()
            .map_err(|_| internal())?
            .clone()
            .ok_or_else(|| {
                ToolError::Failed(format!(
                    "the stdin of process {} is closed; nothing more can be sent",
                    self.pid
                ))
            })?;
        if !text.is_empty() && sender.send(text.to_vec()).await.is_err() {
            return Err(ToolError::Failed(format!(
                "process {} no longer reads its stdin (it has exited)",
                self.pid
            )));
        }
        if close {
            self.stdin.lock().map_err(|_| internal())?.take();
        }
        Ok(())
    }

    /// Sends `signal` to the process's whole tree, unless its pid now
    /// belongs to another process.
    pub fn signal(&self, signal: rustix::process::Signal) -> Result<(), ToolError> {
        if !self.is_running() {
            return Ok(());
        }
        if host::start_ticks(self.pid) != self.start_ticks {
            return Err(ToolError::Failed(format!(
                "pid {} now belongs to another process (the number was reused); refusing to \
                 signal it",
                self.pid
            )));
        }
        host::signal_tree(self.pid, signal);
        Ok(())
    }
}

fn internal() -> ToolError {
    ToolError::Failed("internal error: a process table lock was poisoned".to_owned())
}

/// The background processes of one agent.
pub struct Processes {
    fs: Arc<Fs>,
    config: ProcessConfig,
    table: Mutex<BTreeMap<u32, Arc<Entry>>>,
    /// The private directory of the output files, made at the first start
    /// and removed with the table.
    logs: Mutex<Option<PathBuf>>,
}

impl Processes {
    /// An empty table over `fs`.
    pub fn new(fs: Arc<Fs>, config: ProcessConfig) -> Processes {
        Processes {
            fs,
            config,
            table: Mutex::new(BTreeMap::new()),
            logs: Mutex::new(None),
        }
    }

    /// The table's private output directory, made on first use.
    fn log_dir(&self) -> Result<PathBuf, ToolError> {
        let mut slot = self.logs.lock().map_err(|_| internal())?;
        if let Some(dir) = slot.as_ref() {
            return Ok(dir.clone());
        }
        let dir = create_private_dir(&self.config.log_dir)?;
        *slot = Some(dir.clone());
        Ok(dir)
    }

    pub(crate) fn config(&self) -> &ProcessConfig {
        &self.config
    }

    /// This agent's process `pid`.
    pub(crate) fn get(&self, pid: u32) -> Result<Arc<Entry>, ToolError> {
        let table = self.table.lock().map_err(|_| internal())?;
        table.get(&pid).cloned().ok_or_else(|| {
            ToolError::Failed(format!(
                "pid {pid} is not a process this agent started; process_list shows yours"
            ))
        })
    }

    pub(crate) fn all(&self) -> Vec<Arc<Entry>> {
        self.table
            .lock()
            .map(|t| t.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Starts `command` in the background; returns once it runs.
    pub(crate) async fn start(
        &self,
        command: &str,
        cwd: Option<&str>,
        env: &BTreeMap<String, String>,
    ) -> Result<Arc<Entry>, ToolError> {
        let running = self.all().iter().filter(|e| e.is_running()).count();
        if running >= self.config.max_running {
            return Err(ToolError::Failed(format!(
                "{running} processes are running, the most one agent may have; stop one with \
                 process_kill first"
            )));
        }
        let mut sandboxed = SandboxCommand::shell(command).timeout(self.config.max_lifetime);
        // No `pass_env` here: nothing of the host's reaches a process.
        crate::bash::check_command_env(&crate::RuntimeConfig::default(), env, &[])?;
        for (name, value) in env {
            sandboxed = sandboxed.set_env(name.clone(), value.clone());
        }
        let (stdin_tx, stdin_rx) = mpsc::channel::<Vec<u8>>(64);
        let (pid_tx, pid_rx) = oneshot::channel();
        // The output file exists before the process does (under a name of
        // its own), so not a line is lost; it is renamed after the pid.
        let log_dir = self.log_dir()?;
        let (starting, mut log_file) = create_log(&log_dir)?;
        let changed = Arc::new(Notify::new());
        let workspace = self.fs.workspace().clone();
        let cwd = cwd.map(PathBuf::from);
        let wake = changed.clone();
        let task = tokio::spawn(async move {
            let attach = Attach {
                stdin: Some(stdin_rx),
                spawned: Some(pid_tx),
                ..Attach::default()
            };
            let mut on_line = |_stream, line: &str| {
                let _ = log_file.write_all(line.as_bytes());
                let _ = log_file.write_all(b"\n");
                wake.notify_waiters();
            };
            workspace
                .exec_attached(sandboxed, cwd.as_deref(), attach, &mut on_line)
                .await
        });
        let pid = match pid_rx.await {
            Ok(pid) => pid,
            Err(_) => {
                let _ = std::fs::remove_file(&starting);
                // Never spawned: the task has the reason.
                let result = task.await.map_err(|e| ToolError::Failed(e.to_string()))?;
                return Err(match result {
                    Err(e) => workspace_error(e),
                    Ok(_) => ToolError::Failed("the process could not be started".to_owned()),
                });
            }
        };
        let log = log_dir.join(format!("{pid}.log"));
        std::fs::rename(&starting, &log)
            .map_err(|e| ToolError::Failed(format!("cannot name {}: {e}", log.display())))?;
        let entry = Arc::new(Entry {
            pid,
            command: command.to_owned(),
            started: SystemTime::now(),
            start_ticks: host::start_ticks(pid),
            log,
            stdin: Mutex::new(Some(stdin_tx)),
            state: Mutex::new(ProcessState::Running),
            changed,
        });
        self.table
            .lock()
            .map_err(|_| internal())?
            .insert(pid, entry.clone());
        let watcher = entry.clone();
        tokio::spawn(async move {
            let outcome = task.await;
            let state = match outcome {
                Ok(Ok(done)) => ProcessState::Exited {
                    exit_code: done.outcome.exit_code,
                    signal: done.outcome.signal,
                    timed_out: done.outcome.timed_out,
                },
                Ok(Err(e)) => ProcessState::Failed {
                    error: e.to_string(),
                },
                Err(e) => ProcessState::Failed {
                    error: e.to_string(),
                },
            };
            if let Ok(mut slot) = watcher.state.lock() {
                *slot = state;
            }
            if let Ok(mut stdin) = watcher.stdin.lock() {
                stdin.take();
            }
            watcher.changed.notify_waiters();
        });
        Ok(entry)
    }
}

impl Drop for Processes {
    fn drop(&mut self) {
        // toolgate stops: every process goes with it.
        for entry in self.all() {
            let _ = entry.signal(rustix::process::Signal::KILL);
        }
        // And their output files: nothing of this table is left behind.
        // (A writer still holding a log open writes to an unlinked file.)
        if let Some(dir) = self.logs.get_mut().ok().and_then(Option::take) {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Makes a fresh directory in `base` that only its owner can enter.
fn create_private_dir(base: &Path) -> Result<PathBuf, ToolError> {
    use std::os::unix::fs::DirBuilderExt;
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut last = None;
    for _ in 0..16 {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = base.join(format!("toolgate-proc-{}-{n}", std::process::id()));
        // Attack: a name planted in advance in a shared temp dir (a symlink,
        // or a directory someone else owns). mkdir fails on anything there,
        // so the directory used is always one this call made, 0700: nobody
        // else can read the output or plant names inside it.
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(cannot_create(&dir, &e)),
        }
    }
    let e = last.unwrap_or_else(|| std::io::ErrorKind::AlreadyExists.into());
    Err(cannot_create(base, &e))
}

fn cannot_create(path: &Path, e: &std::io::Error) -> ToolError {
    ToolError::Failed(format!(
        "cannot create the output directory {}: {e}; check that the temp dir (TMPDIR) \
         exists and is writable",
        path.display()
    ))
}

/// Creates a fresh output file in `dir`, readable by its owner only.
fn create_log(dir: &Path) -> Result<(PathBuf, std::fs::File), ToolError> {
    use std::os::unix::fs::OpenOptionsExt;
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let path = dir.join(format!("starting-{n}.log"));
    // create_new: a name planted in advance (a symlink) is never opened.
    std::fs::OpenOptions::new()
        .create_new(true)
        .append(true)
        .mode(0o600)
        .open(&path)
        .map(|file| (path.clone(), file))
        .map_err(|e| ToolError::Failed(format!("cannot create {}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reused_pid_is_never_signalled() {
        // This test process stands in for a stranger that got the number:
        // its start time differs from the one recorded at spawn.
        let me = std::process::id();
        let recorded = host::start_ticks(me).map(|t| t + 1);
        let entry = Entry {
            pid: me,
            command: "sleep 1000".to_owned(),
            started: SystemTime::now(),
            start_ticks: recorded,
            log: PathBuf::from("/nonexistent"),
            stdin: Mutex::new(None),
            state: Mutex::new(ProcessState::Running),
            changed: Arc::new(Notify::new()),
        };
        let err = entry.signal(rustix::process::Signal::KILL).unwrap_err();
        assert!(err.to_string().contains("reused"), "{err}");
        // Still alive to assert it; an exited entry is left alone too.
        *entry.state.lock().unwrap() = ProcessState::Exited {
            exit_code: 0,
            signal: None,
            timed_out: false,
        };
        assert!(entry.signal(rustix::process::Signal::KILL).is_ok());
    }
}

//! Background processes of one agent: dev servers, watchers, long builds.
//!
//! Each runs as its own `bash -c` in the sandbox, like `bash`, but the call
//! returns at once with the pid; stdout and stderr go, as `2>&1` would, to
//! `<pid>.log` in a private directory of the table (see `dirs`), and stdin
//! stays open for `process_write`. The table is per agent: a pid another
//! agent started is unknown here.
//!
//! Bounds, so that no agent fills the disk or toolgate's memory: each log
//! keeps the first and the latest bytes of its output (see `log`), all logs
//! of the server share one cap (see `budget`), an ended process's log is
//! removed a while after it was read to the end (or after a longer
//! retention), and the table forgets the oldest ended processes beyond
//! [`ProcessConfig::keep_ended`]. Every process is killed when its table is
//! dropped, that is when toolgate stops, and the directory with its output
//! files is removed then; a toolgate killed outright leaves both to the
//! lifeline (see `toolgate_sandbox::runner`) and to the next start.

mod budget;
mod control;
mod dirs;
mod host;
mod log;
mod tools;
pub(crate) mod warnings;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde::Serialize;
use tokio::sync::{Notify, mpsc, oneshot};
use toolgate_core::ToolError;
use toolgate_sandbox::SandboxCommand;
use toolgate_sandbox::runner::Attach;

use self::log::{ProcessLog, Removed};
use self::warnings::EndWarnings;
use crate::facts_schema;
use crate::fs::{Fs, workspace_error};

pub use self::budget::{DEFAULT_LOGS_TOTAL_BYTES, LogBudget};
pub use self::control::{ProcessKillTool, ProcessWriteTool};
pub use self::tools::{ProcessListTool, ProcessReadTool, ProcessStartTool};

/// Bounds of the background processes of one agent.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProcessConfig {
    /// Processes running at once.
    pub max_running: usize,
    /// Where each table makes the private directory of its output files
    /// (outside the workspace): the `toolgate` binary uses
    /// `<state dir>/processes`; the default here is the temp dir.
    pub log_dir: PathBuf,
    /// A process still running after this long is stopped.
    pub max_lifetime: Duration,
    /// Time between TERM and KILL in `process_kill`.
    pub kill_grace: Duration,
    /// Bytes of the start of each process's output its log keeps (4 MiB).
    pub log_head_bytes: u64,
    /// Bytes of the latest output each log keeps besides the head, a rolling
    /// window (12 MiB).
    pub log_tail_bytes: u64,
    /// The cap of all logs together (by default [`LogBudget::server`], 256 MiB
    /// shared by every table of this process).
    pub log_budget: LogBudget,
    /// How long an ended process's log is kept once it was read to the end (5 min).
    pub read_log_retention: Duration,
    /// How long an ended process's log is kept when it was never read to the
    /// end (1 h).
    pub ended_log_retention: Duration,
    /// Ended processes the table remembers; older ones are forgotten, with
    /// their logs (64).
    pub keep_ended: usize,
}

impl Default for ProcessConfig {
    fn default() -> Self {
        ProcessConfig {
            max_running: 8,
            log_dir: std::env::temp_dir(),
            max_lifetime: Duration::from_secs(24 * 3600),
            kill_grace: Duration::from_secs(3),
            log_head_bytes: 4 << 20,
            log_tail_bytes: 12 << 20,
            log_budget: LogBudget::server(),
            read_log_retention: Duration::from_secs(5 * 60),
            ended_log_retention: Duration::from_secs(3600),
            keep_ended: 64,
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
    pub log: Arc<ProcessLog>,
    stdin: Mutex<Option<mpsc::Sender<Vec<u8>>>>,
    state: Mutex<ProcessState>,
    /// When it ended, for forgetting the oldest ended processes first.
    ended_at: Mutex<Option<std::time::Instant>>,
    /// What the sandbox fixed up after it ended, and the output range
    /// `[start, end)` of the lines that say so at the end of its log; set
    /// before its state says it ended.
    warnings: Mutex<(EndWarnings, (u64, u64))>,
    /// Wakes readers waiting for output or for the end, and the retention of the
    /// log when it was read to the end.
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

    /// What the sandbox fixed up after it ended (none while it runs), and
    /// where the lines that say so lie in its output.
    pub fn warnings(&self) -> (EndWarnings, (u64, u64)) {
        self.warnings.lock().map(|w| w.clone()).unwrap_or_default()
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
        let dir = dirs::create_private_dir(&self.config.log_dir)?;
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
                "pid {pid} is not a process this agent started (or one that ended long \
                 ago and was forgotten: the table keeps the last {} ended ones); \
                 process_list shows yours",
                self.config.keep_ended
            ))
        })
    }

    pub(crate) fn all(&self) -> Vec<Arc<Entry>> {
        self.table
            .lock()
            .map(|t| t.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Forgets the oldest ended processes beyond [`ProcessConfig::keep_ended`],
    /// removing their logs.
    fn forget_oldest_ended(&self) {
        let Ok(mut table) = self.table.lock() else {
            return;
        };
        let mut ended: Vec<(std::time::Instant, u32)> = table
            .values()
            .filter_map(|e| Some((e.ended_at.lock().ok().and_then(|t| *t)?, e.pid)))
            .collect();
        if ended.len() <= self.config.keep_ended {
            return;
        }
        ended.sort_unstable();
        let excess = ended.len() - self.config.keep_ended;
        for (_, pid) in ended.into_iter().take(excess) {
            if let Some(entry) = table.remove(&pid) {
                entry.log.remove(Removed::Forgotten);
            }
        }
    }

    /// A new log in the table's directory, with what the server's budget grants
    /// of the configured caps (the head first: the start-up is what is asked for
    /// most when something went wrong).
    fn new_log(&self) -> Result<Arc<ProcessLog>, ToolError> {
        let (head, tail) = (self.config.log_head_bytes, self.config.log_tail_bytes);
        let granted = self.config.log_budget.lease(head.saturating_add(tail));
        let head = head.min(granted);
        let tail = granted - head;
        let made = self.log_dir().and_then(|dir| dirs::create_log(&dir));
        match made {
            Ok((path, file)) => Ok(Arc::new(ProcessLog::new(
                path,
                file,
                head,
                tail,
                self.config.log_budget.clone(),
            ))),
            Err(e) => {
                self.config.log_budget.release(granted);
                Err(e)
            }
        }
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
        self.forget_oldest_ended();
        let mut sandboxed = SandboxCommand::shell(command).timeout(self.config.max_lifetime);
        // Nothing of the output is kept in memory: the log has it.
        sandboxed.max_output_bytes = 0;
        // No `pass_env` here: nothing of the host's reaches a process.
        crate::bash::check_command_env(&crate::RuntimeConfig::default(), env, &[])?;
        for (name, value) in env {
            sandboxed = sandboxed.set_env(name.clone(), value.clone());
        }
        let (stdin_tx, stdin_rx) = mpsc::channel::<Vec<u8>>(64);
        let (pid_tx, pid_rx) = oneshot::channel();
        // The output file exists before the process does (under a name of
        // its own), so not a byte is lost; it is renamed after the pid.
        let log = self.new_log()?;
        let changed = Arc::new(Notify::new());
        let workspace = self.fs.workspace().clone();
        let cwd = cwd.map(PathBuf::from);
        let (writer, wake) = (log.clone(), changed.clone());
        // Raw chunks of both streams in arrival order, as `2>&1` would write
        // them; the log bounds itself, so a flood is dropped, never queued.
        let raw_output: toolgate_sandbox::runner::RawOutput = Arc::new(move |_stream, chunk| {
            writer.write(chunk);
            wake.notify_waiters();
        });
        let task = tokio::spawn(async move {
            let attach = Attach {
                stdin: Some(stdin_rx),
                spawned: Some(pid_tx),
                raw_output: Some(raw_output),
                ..Attach::default()
            };
            workspace
                .exec_attached(sandboxed, cwd.as_deref(), attach, &mut |_, _| {})
                .await
        });
        let pid = match pid_rx.await {
            Ok(pid) => pid,
            Err(_) => {
                log.remove(Removed::Forgotten);
                // Never spawned: the task has the reason.
                let result = task.await.map_err(|e| ToolError::Failed(e.to_string()))?;
                return Err(match result {
                    Err(e) => workspace_error(e),
                    Ok(_) => ToolError::Failed("the process could not be started".to_owned()),
                });
            }
        };
        let named = log.path().with_file_name(format!("{pid}.log"));
        log.rename(named.clone())
            .map_err(|e| ToolError::Failed(format!("cannot name {}: {e}", named.display())))?;
        let entry = Arc::new(Entry {
            pid,
            command: command.to_owned(),
            started: SystemTime::now(),
            start_ticks: host::start_ticks(pid),
            log,
            stdin: Mutex::new(Some(stdin_tx)),
            state: Mutex::new(ProcessState::Running),
            ended_at: Mutex::new(None),
            warnings: Mutex::new(Default::default()),
            changed,
        });
        self.table
            .lock()
            .map_err(|_| internal())?
            .insert(pid, entry.clone());
        let watcher = entry.clone();
        let retention = (
            self.config.read_log_retention,
            self.config.ended_log_retention,
        );
        let budget = self.config.log_budget.clone();
        tokio::spawn(async move {
            let outcome = task.await;
            let (state, warnings) = match outcome {
                Ok(Ok(done)) => (
                    ProcessState::Exited {
                        exit_code: done.outcome.exit_code,
                        signal: done.outcome.signal,
                        timed_out: done.outcome.timed_out,
                    },
                    EndWarnings::bounded(done.warnings),
                ),
                Ok(Err(e)) => (
                    ProcessState::Failed {
                        error: e.to_string(),
                    },
                    EndWarnings::default(),
                ),
                Err(e) => (
                    ProcessState::Failed {
                        error: e.to_string(),
                    },
                    EndWarnings::default(),
                ),
            };
            // The sandbox has checked the roots after the run (a bash call shows
            // the same on its result): what it fixed up is kept with the process
            // and becomes the last lines of its output, so that a reader who
            // follows the log meets them where they happened, and one who only
            // asks for the status sees them too.
            let lines = watcher.log.append_lines(&warnings.lines());
            if let Ok(mut slot) = watcher.warnings.lock() {
                *slot = (warnings, lines);
            }
            // Nothing more is written: the log is put in order (a bounded copy)
            // before anyone is told the process ended.
            let log = watcher.log.clone();
            let _ = tokio::task::spawn_blocking(move || log.finish()).await;
            budget.ended(&watcher.log);
            if let Ok(mut slot) = watcher.state.lock() {
                *slot = state;
            }
            if let Ok(mut ended) = watcher.ended_at.lock() {
                *ended = Some(std::time::Instant::now());
            }
            if let Ok(mut stdin) = watcher.stdin.lock() {
                stdin.take();
            }
            watcher.changed.notify_waiters();
            keep_log_for(&watcher, retention.0, retention.1).await;
        });
        Ok(entry)
    }
}

/// Keeps an ended process's log `after_read` past the read that reached its end,
/// at most `unread` past the end of the process; then removes it (the entry stays,
/// with its exit status).
async fn keep_log_for(entry: &Entry, after_read: Duration, unread: Duration) {
    let ended = tokio::time::Instant::now();
    let expired = ended + unread;
    loop {
        let changed = entry.changed.notified();
        let read = entry.log.read_to_end_at().map(|at| {
            let since = at.elapsed();
            tokio::time::Instant::now() + after_read.saturating_sub(since)
        });
        let deadline = read.map_or(expired, |read| read.min(expired));
        if entry.log.removed().is_some() {
            return;
        }
        tokio::select! {
            () = tokio::time::sleep_until(deadline) => break,
            () = changed => {}
        }
    }
    let why = if entry.log.read_to_end_at().is_some() {
        Removed::Read
    } else {
        Removed::Expired
    };
    entry.log.remove(why);
}

impl Drop for Processes {
    fn drop(&mut self) {
        // toolgate stops: every process goes with it.
        for entry in self.all() {
            let _ = entry.signal(rustix::process::Signal::KILL);
            entry.log.remove(Removed::Forgotten);
        }
        // And their output files: nothing of this table is left behind (a
        // process still being reaped finds its log removed and only counts).
        if let Some(dir) = self.logs.get_mut().ok().and_then(Option::take) {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
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
            log: Arc::new(ProcessLog::new(
                PathBuf::from("/nonexistent"),
                tempfile::tempfile().unwrap(),
                0,
                0,
                LogBudget::new(0),
            )),
            stdin: Mutex::new(None),
            state: Mutex::new(ProcessState::Running),
            ended_at: Mutex::new(None),
            warnings: Mutex::new(Default::default()),
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

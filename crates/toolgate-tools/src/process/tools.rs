//! The five `process_*` tools over one agent's [`Processes`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use toolgate_core::{
    CallContext, EffectClass, Idempotency, ToolError, ToolOutput, ToolSpec, TypedTool,
};

use super::warnings::with_schemas;
use super::{Entry, ProcessState, Processes};
use crate::facts_schema;
use crate::fs::{unix_seconds, utc_minutes};

/// Longest `process_read` wait.
const MAX_WAIT_SECS: u64 = 60;

pub(super) fn state_text(state: &ProcessState) -> String {
    match state {
        ProcessState::Running => "running".to_owned(),
        ProcessState::Exited {
            exit_code,
            signal: Some(signal),
            ..
        } => format!("exited (killed by signal {signal}, code {exit_code})"),
        ProcessState::Exited {
            exit_code,
            timed_out: true,
            ..
        } => format!("stopped at the end of its lifetime (code {exit_code})"),
        ProcessState::Exited { exit_code, .. } => format!("exited with code {exit_code}"),
        ProcessState::Failed { error } => format!("failed: {error}"),
    }
}

/// Arguments of `process_start`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcessStartArgs {
    /// The script, run as its own `bash -c` (pipes, loops and `&&` are one job).
    pub command: String,
    /// Working directory, relative to the workspace.
    pub cwd: Option<String>,
    /// Environment variables to set: {"NAME": "value"}.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

/// `process_start`.
pub struct ProcessStartTool(pub Arc<Processes>);

#[async_trait]
impl TypedTool for ProcessStartTool {
    type Args = ProcessStartArgs;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "process_start",
            "Start a long-running command in the background, in the sandbox: dev servers, \
             watchers, long builds. Returns at once with its pid; stdout and stderr go to a \
             log that keeps the start of the output and the latest of it (the result says \
             how much). Follow it with process_read, answer prompts with process_write, stop \
             it with process_kill. For a command that finishes on its own within minutes, \
             use bash.",
            EffectClass::MutateReversible,
        )
        .idempotency(Idempotency::AtMostOnce)
        .group("group:runtime")
        .command_arg("/command")
        .path_arg("/cwd")
        .output_schema(start_schema())
    }

    async fn run(
        &self,
        args: ProcessStartArgs,
        _ctx: &CallContext,
    ) -> Result<ToolOutput, ToolError> {
        let entry = self
            .0
            .start(&args.command, args.cwd.as_deref(), &args.env)
            .await?;
        let log = entry.log.path().display().to_string();
        let (head, tail) = entry.log.caps();
        let keeps = if head == 0 && tail == 0 {
            format!(
                "nothing of its output is kept: the process logs of this toolgate are at their \
                 cap of {} bytes, all held by running processes; stop one with process_kill",
                self.0.config().log_budget.total()
            )
        } else {
            format!("its log keeps the first {head} bytes of its output and the latest {tail}")
        };
        let mut text = format!(
            "Started process {} in the background; stdout and stderr go to {log}, and {keeps} \
             (read it with process_read pid={}).",
            entry.pid, entry.pid
        );
        // Like every command result: a sandbox weaker than bubblewrap is said.
        let backend = self.0.fs.workspace().backend();
        if let Some(note) = backend.weakened_note() {
            text.push_str(&format!("\n[{note}]"));
        }
        Ok(ToolOutput::text(text).with_structured(json!({
            "pid": entry.pid, "output_file": log, "command": entry.command, "backend": backend,
            "log_keeps": {"head_bytes": head, "tail_bytes": tail},
        })))
    }
}

/// The facts of `process_start`.
fn start_schema() -> Value {
    facts_schema::object(
        json!({
            "pid": {
                "type": "integer",
                "description": "The process, for process_read, process_write and process_kill.",
            },
            "output_file": {
                "type": "string",
                "description": "The log its stdout and stderr go to, in toolgate's private \
                                state directory (read it with process_read: while the process \
                                runs past the caps the file is a ring; once it has ended it \
                                reads in order, with a marker line where bytes were dropped).",
            },
            "log_keeps": facts_schema::object(
                json!({
                    "head_bytes": {
                        "type": "integer",
                        "description": "Bytes of the start of the output kept.",
                    },
                    "tail_bytes": {
                        "type": "integer",
                        "description": "Bytes of the latest output kept besides (a rolling \
                                        window); output between the two is dropped and \
                                        counted.",
                    },
                }),
                &["head_bytes", "tail_bytes"],
            ),
            "command": {"type": "string", "description": "The script it runs."},
            "backend": {
                "enum": ["bwrap", "landlock", "none"],
                "description": "The sandbox that runs it (landlock and none are weaker than \
                                bwrap; the text says what is lost).",
            },
        }),
        &["pid", "output_file", "command", "backend", "log_keeps"],
    )
}

/// Arguments of `process_list`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcessListArgs {}

/// `process_list`.
pub struct ProcessListTool(pub Arc<Processes>);

#[async_trait]
impl TypedTool for ProcessListTool {
    type Args = ProcessListArgs;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "process_list",
            "List the background processes this agent started with process_start: pid, \
             command, state, start time, exit code, how much output it wrote and whether its \
             log still exists.",
            EffectClass::Read,
        )
        .group("group:runtime")
        .parallel_safe(true)
        .output_schema(list_schema())
    }

    async fn run(
        &self,
        _args: ProcessListArgs,
        _ctx: &CallContext,
    ) -> Result<ToolOutput, ToolError> {
        let entries = self.0.all();
        let mut text = String::new();
        let mut rows = Vec::new();
        for e in &entries {
            let started = unix_seconds(Some(e.started));
            let state = e.state();
            let output = match e.log.removed() {
                Some(_) => format!("{} bytes of output, log removed", e.log.written()),
                None => format!("{} bytes of output", e.log.written()),
            };
            text.push_str(&format!(
                "{}  {}  started {}  {output}  {}\n",
                e.pid,
                state_text(&state),
                started.map_or(String::new(), utc_minutes),
                e.command
            ));
            let (warnings, _) = e.warnings();
            for line in warnings.lines().lines() {
                text.push_str(&format!("  {line}\n"));
            }
            let mut row = json!({
                "pid": e.pid, "command": e.command, "started": started,
                "output_file": e.log.path(), "status": state, "output": e.log.facts(),
            });
            warnings.facts(&mut row);
            rows.push(row);
        }
        if entries.is_empty() {
            text.push_str("No background processes.\n");
        }
        Ok(ToolOutput::text(text).with_structured(json!({ "processes": rows })))
    }
}

/// The facts of `process_list`.
fn list_schema() -> Value {
    let process = with_schemas(
        json!({
            "pid": {"type": "integer"},
            "command": {"type": "string"},
            "started": {
                "type": ["integer", "null"],
                "description": "Start time, in seconds since the Unix epoch.",
            },
            "output_file": {
                "type": "string",
                "description": "The log its stdout and stderr go to (gone once removed).",
            },
            "status": ProcessState::schema(),
            "output": output_facts_schema(),
        }),
        &[
            "pid",
            "command",
            "started",
            "output_file",
            "status",
            "output",
        ],
    );
    facts_schema::object(
        json!({
            "processes": {
                "type": "array",
                "items": process,
                "description": "Every process this agent started, the last ended ones included.",
            },
        }),
        &["processes"],
    )
}

/// Arguments of `process_read`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcessReadArgs {
    /// The process.
    pub pid: u32,
    /// Byte offset to read from (the `next_offset` of the previous read);
    /// without it, the tail of the output.
    pub offset: Option<u64>,
    /// Seconds to wait for new output (or the end) when there is none yet (at most 60).
    #[schemars(range(max = 60))]
    pub wait: Option<u64>,
}

/// `process_read`.
pub struct ProcessReadTool(pub Arc<Processes>);

#[async_trait]
impl TypedTool for ProcessReadTool {
    type Args = ProcessReadArgs;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "process_read",
            "Read the output of a background process: its tail, or from a byte offset (the \
             next_offset of the previous read, to follow it); wait up to N seconds for new \
             output. Also says whether it still runs and how it exited.",
            EffectClass::Read,
        )
        .group("group:runtime")
        .parallel_safe(true)
        .output_schema(read_schema())
    }

    async fn run(
        &self,
        args: ProcessReadArgs,
        _ctx: &CallContext,
    ) -> Result<ToolOutput, ToolError> {
        let entry = self.0.get(args.pid)?;
        let wait = Duration::from_secs(args.wait.unwrap_or(0).min(MAX_WAIT_SECS));
        let since = match args.offset {
            Some(offset) => offset,
            None => log_len(&entry),
        };
        if !wait.is_zero() {
            wait_for_output(&entry, since, wait).await;
        }
        let budget = self.0.fs.limits().read_bytes as u64;
        read_log(&entry, args.offset, budget)
    }
}

fn log_len(entry: &Entry) -> u64 {
    entry.log.written()
}

/// Returns when the output grows past `since`, the process ends, or `wait` passes.
async fn wait_for_output(entry: &Entry, since: u64, wait: Duration) {
    let deadline = Instant::now() + wait;
    loop {
        let changed = entry.changed.notified();
        if log_len(entry) > since || !entry.is_running() {
            return;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        // A short cap on each wait: a notification between the check and
        // `notified` would otherwise be missed until the deadline.
        let _ = tokio::time::timeout(left.min(Duration::from_millis(200)), changed).await;
    }
}

fn read_log(entry: &Entry, offset: Option<u64>, budget: u64) -> Result<ToolOutput, ToolError> {
    // The state first: they are set before it says the process ended.
    let state = entry.state();
    let (warnings, (lines_start, lines_end)) = entry.warnings();
    if let Some(removed) = entry.log.removed() {
        let kept = entry.log.kept();
        let mut text = format!(
            "[process {} {}; {}: {} bytes of output were written]\n",
            entry.pid,
            state_text(&state),
            removed.describe(),
            kept.written
        );
        // The log that ended with them is gone; they are not.
        text.push_str(&warnings.lines());
        let mut facts = json!({
            "pid": entry.pid, "status": state, "offset": kept.written,
            "next_offset": kept.written, "size": kept.written, "more": false,
            "output": entry.log.facts(),
        });
        warnings.facts(&mut facts);
        return Ok(ToolOutput::text(text).with_structured(facts));
    }
    let read = entry.log.read(offset, budget).map_err(|e| {
        ToolError::Failed(format!(
            "cannot read the output of process {} ({}): {e}",
            entry.pid,
            entry.log.path().display()
        ))
    })?;
    let kept = read.kept;
    let mut bytes = read.bytes;
    let mut from = read.from;
    let tail = offset.is_none();
    if tail && from > 0 && from != kept.tail_start {
        // Start the tail at a line.
        if let Some(nl) = bytes.iter().position(|b| *b == b'\n') {
            bytes.drain(..=nl);
            from += nl as u64 + 1;
        }
    }
    let next = from + bytes.len() as u64;
    let more = next < kept.end;
    if !more && !entry.is_running() {
        // Everything it wrote has been seen: the log can go after a while.
        entry.log.mark_read_to_end();
        entry.changed.notify_waiters();
    }
    let mut text = String::new();
    if let Some((asked, resumed)) = read.skipped {
        text.push_str(&format!(
            "[bytes {asked}-{resumed} of the output were dropped (the log keeps the first \
             {} and the latest {} bytes); continuing at {resumed}]\n",
            kept.head_end,
            kept.end - kept.tail_start
        ));
    } else if tail && from > 0 {
        text.push_str(&format!(
            "[... the first {from} bytes are not shown{}]\n",
            if kept.dropped() > 0 {
                format!("; the log holds {}", kept.describe())
            } else {
                String::new()
            }
        ));
    }
    let shown = String::from_utf8_lossy(&bytes);
    text.push_str(&shown);
    if !shown.is_empty() && !shown.ends_with('\n') {
        text.push('\n');
    }
    if bytes.is_empty() {
        text.push_str("[no new output]\n");
    }
    if let Some(why) = entry.log.broken() {
        text.push_str(&format!(
            "[the log could not be written past byte {}: {why}; later output was counted, \
             not kept]\n",
            kept.end
        ));
    }
    text.push_str(&format!(
        "[process {} {}; {}continue with offset={next}]\n",
        entry.pid,
        state_text(&state),
        if more { "more output is waiting; " } else { "" }
    ));
    // A read that did not show the warning lines at the end of the output (one
    // from earlier on, or a log that could not keep them) still says them.
    if !(from <= lines_start && next >= lines_end) {
        text.push_str(&warnings.lines());
    }
    let mut facts = json!({
        "pid": entry.pid, "status": state, "offset": from, "next_offset": next,
        "size": kept.written, "more": more, "output": entry.log.facts(),
    });
    warnings.facts(&mut facts);
    Ok(ToolOutput::text(text).with_structured(facts))
}

/// The facts of what a process wrote and what its log keeps.
fn output_facts_schema() -> Value {
    facts_schema::object(
        json!({
            "written": {
                "type": "integer",
                "description": "Bytes the process wrote to stdout and stderr, kept or not.",
            },
            "kept": {
                "type": "array",
                "items": {"type": "array", "items": {"type": "integer"}},
                "description": "The byte ranges [start, end) of the output the log holds: \
                                the head, then the latest bytes (the same range twice, or \
                                an empty one, when nothing was dropped).",
            },
            "dropped": {
                "type": "integer",
                "description": "Bytes written but not kept (between the two ranges).",
            },
            "removed": {
                "type": ["string", "null"],
                "description": "Why the log no longer exists (read to the end and kept a \
                                while, retention over, room for newer logs), or null.",
            },
        }),
        &["written", "kept", "dropped", "removed"],
    )
}

/// The facts of [`read_log`].
fn read_schema() -> Value {
    with_schemas(
        json!({
            "pid": {"type": "integer"},
            "status": ProcessState::schema(),
            "offset": {
                "type": "integer",
                "description": "Byte offset in the output where the text shown starts.",
            },
            "next_offset": {
                "type": "integer",
                "description": "Byte offset after the text shown: pass it as offset to read \
                                what comes next.",
            },
            "size": {
                "type": "integer",
                "description": "Bytes of output so far (kept or not, see output).",
            },
            "more": {
                "type": "boolean",
                "description": "Output after next_offset is already waiting to be read.",
            },
            "output": output_facts_schema(),
        }),
        &[
            "pid",
            "status",
            "offset",
            "next_offset",
            "size",
            "more",
            "output",
        ],
    )
}

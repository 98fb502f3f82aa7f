//! The tools that act on a running background process: `process_write`
//! (its stdin) and `process_kill` (signals to its whole tree).

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use rustix::process::Signal;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use toolgate_core::{
    CallContext, EffectClass, Idempotency, ToolError, ToolOutput, ToolSpec, TypedTool,
};

use super::tools::state_text;
use super::warnings::{EndWarnings, with_schemas};
use super::{Entry, ProcessState, Processes};
use crate::facts_schema;

/// Arguments of `process_write`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcessWriteArgs {
    /// The process.
    pub pid: u32,
    /// Text for its stdin, sent as is (end it with "\n" to send a line).
    #[serde(default)]
    pub text: String,
    /// Close stdin afterwards (end of input).
    #[serde(default)]
    pub close: bool,
}

/// `process_write`.
pub struct ProcessWriteTool(pub Arc<Processes>);

#[async_trait]
impl TypedTool for ProcessWriteTool {
    type Args = ProcessWriteArgs;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "process_write",
            "Send text to the stdin of a background process: answer a prompt, drive a REPL \
             (python3 -i, node, psql). End the text with \"\\n\" to send a line; close=true \
             ends the input. Then process_read with wait to see the reply.",
            EffectClass::MutateReversible,
        )
        .idempotency(Idempotency::AtMostOnce)
        .group("group:runtime")
        .output_schema(write_schema())
    }

    async fn run(
        &self,
        args: ProcessWriteArgs,
        _ctx: &CallContext,
    ) -> Result<ToolOutput, ToolError> {
        let entry = self.0.get(args.pid)?;
        if !entry.is_running() {
            return Err(ToolError::Failed(format!(
                "process {} is not running ({})",
                entry.pid,
                state_text(&entry.state())
            )));
        }
        entry.write(args.text.as_bytes(), args.close).await?;
        let closed = if args.close {
            " and closed its stdin"
        } else {
            ""
        };
        Ok(ToolOutput::text(format!(
            "Sent {} bytes to process {}{closed}.",
            args.text.len(),
            entry.pid
        ))
        .with_structured(json!({"pid": entry.pid, "bytes": args.text.len(), "closed": args.close})))
    }
}

/// The facts of `process_write`.
fn write_schema() -> Value {
    facts_schema::object(
        json!({
            "pid": {"type": "integer"},
            "bytes": {"type": "integer", "description": "Bytes sent to its stdin."},
            "closed": {"type": "boolean", "description": "Its stdin was closed afterwards."},
        }),
        &["pid", "bytes", "closed"],
    )
}

/// The signals `process_kill` sends.
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum KillSignal {
    #[default]
    Term,
    Int,
    Hup,
    Kill,
}

/// Arguments of `process_kill`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcessKillArgs {
    /// The process.
    pub pid: u32,
    /// TERM (default), INT, HUP or KILL.
    #[serde(default)]
    pub signal: KillSignal,
}

/// `process_kill`.
pub struct ProcessKillTool(pub Arc<Processes>);

#[async_trait]
impl TypedTool for ProcessKillTool {
    type Args = ProcessKillArgs;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "process_kill",
            "Stop a background process this agent started, with everything it started: the \
             signal (TERM by default) goes to the whole tree, and what is still alive after \
             a grace period gets KILL.",
            EffectClass::MutateReversible,
        )
        .idempotency(Idempotency::CheckBeforeAct)
        .group("group:runtime")
        .output_schema(kill_schema())
    }

    async fn run(
        &self,
        args: ProcessKillArgs,
        _ctx: &CallContext,
    ) -> Result<ToolOutput, ToolError> {
        let entry = self.0.get(args.pid)?;
        if !entry.is_running() {
            let state = entry.state();
            let (warnings, _) = entry.warnings();
            let text = format!(
                "Process {} is not running ({}); nothing to do.{}",
                entry.pid,
                state_text(&state),
                warnings_after(&warnings)
            );
            let mut facts = json!({"pid": entry.pid, "status": state, "signalled": false});
            warnings.facts(&mut facts);
            return Ok(ToolOutput::text(text).with_structured(facts));
        }
        let signal = match args.signal {
            KillSignal::Term => Signal::TERM,
            KillSignal::Int => Signal::INT,
            KillSignal::Hup => Signal::HUP,
            KillSignal::Kill => Signal::KILL,
        };
        entry.signal(signal)?;
        let grace = self.0.config().kill_grace;
        wait_for_end(&entry, grace).await;
        let escalated = entry.is_running();
        if escalated {
            entry.signal(Signal::KILL)?;
            wait_for_end(&entry, Duration::from_secs(5)).await;
        }
        let state = entry.state();
        let (warnings, _) = entry.warnings();
        let how = if escalated {
            " (KILL after the grace period)"
        } else {
            ""
        };
        let text = format!(
            "Process {}: {}{how}.{}",
            entry.pid,
            state_text(&state),
            warnings_after(&warnings)
        );
        let mut facts =
            json!({"pid": entry.pid, "status": state, "signalled": true, "escalated": escalated});
        warnings.facts(&mut facts);
        Ok(ToolOutput::text(text).with_structured(facts))
    }
}

/// The warning lines after a one-line result, on lines of their own.
fn warnings_after(warnings: &EndWarnings) -> String {
    if warnings.is_empty() {
        return String::new();
    }
    format!("\n{}", warnings.lines().trim_end())
}

/// The facts of `process_kill`.
fn kill_schema() -> Value {
    with_schemas(
        json!({
            "pid": {"type": "integer"},
            "status": ProcessState::schema(),
            "signalled": {
                "type": "boolean",
                "description": "A signal was sent; false when the process had already ended.",
            },
            "escalated": {
                "type": "boolean",
                "description": "When signalled: it outlived the grace period and got KILL.",
            },
        }),
        &["pid", "status", "signalled"],
    )
}

async fn wait_for_end(entry: &Entry, wait: Duration) {
    let deadline = Instant::now() + wait;
    while entry.is_running() && Instant::now() < deadline {
        let changed = entry.changed.notified();
        let _ = tokio::time::timeout(Duration::from_millis(50), changed).await;
    }
}

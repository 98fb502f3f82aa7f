//! `neuron_status`: who this agent is, since when, where it works and under
//! which sandbox and policy.

use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use toolgate_core::{CallContext, EffectClass, ToolError, ToolOutput, ToolSpec, TypedTool};

use super::{GROUP, RuntimeFacts};
use crate::facts_schema;
use crate::fs::Fs;

/// Arguments of `neuron_status` (none).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StatusArgs {}

/// The `neuron_status` tool.
pub struct StatusTool {
    fs: Arc<Fs>,
    facts: Arc<RuntimeFacts>,
}

impl StatusTool {
    /// `neuron_status` over `fs`'s workspace with the binary's `facts`.
    pub fn new(fs: Arc<Fs>, facts: Arc<RuntimeFacts>) -> StatusTool {
        StatusTool { fs, facts }
    }
}

#[async_trait]
impl TypedTool for StatusTool {
    type Args = StatusArgs;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "neuron_status",
            "Show this agent's runtime: agent id, uptime, working directory, the workspace \
             roots with their access and whether each is usable, the sandbox backend, the \
             policy preset and the number of active tools. Use it first when paths or \
             commands fail unexpectedly, or to learn where you may work.",
            EffectClass::Read,
        )
        .group(GROUP)
        .parallel_safe(true)
        .output_schema(facts_schema())
    }

    async fn run(&self, _args: StatusArgs, _ctx: &CallContext) -> Result<ToolOutput, ToolError> {
        let workspace = self.fs.workspace();
        let health = workspace.health().await;
        let uptime = self.facts.started.elapsed().as_secs();
        let active_tools = self.facts.active_tools.as_ref().map(|count| count());
        let cwd = workspace.cwd().display().to_string();
        let mut text = format!(
            "agent: {}\nuptime: {}\ncwd: {cwd}\nsandbox: {}\npolicy: {}\n",
            self.facts.agent_id,
            human_duration(uptime),
            health.backend,
            self.facts.policy_preset,
        );
        if let Some(count) = active_tools {
            text.push_str(&format!("active tools: {count}\n"));
        }
        text.push_str("roots:\n");
        let mut roots = Vec::new();
        for (path, usable) in &health.roots {
            let state = if *usable { "usable" } else { "NOT usable" };
            text.push_str(&format!("  {}  rw  {state}\n", path.display()));
            roots.push(json!({
                "path": path.display().to_string(),
                // Every root is a writable root of commands and file tools.
                "access": "rw",
                "usable": usable,
            }));
        }
        if !health.ok {
            text.push_str(
                "[a root is not usable: it was removed or its permissions changed; \
                 ask the operator to restore it]\n",
            );
        }
        Ok(ToolOutput::text(text).with_structured(json!({
            "agent_id": self.facts.agent_id,
            "uptime_secs": uptime,
            "cwd": cwd,
            "roots": roots,
            "healthy": health.ok,
            "sandbox_backend": health.backend.as_str(),
            "policy_preset": self.facts.policy_preset,
            "active_tools": active_tools,
        })))
    }
}

/// The facts of [`StatusTool::run`].
fn facts_schema() -> Value {
    let root = facts_schema::object(
        json!({
            "path": {"type": "string"},
            "access": {
                "enum": ["rw"],
                "description": "rw: commands and the file tools may read and write it.",
            },
            "usable": {
                "type": "boolean",
                "description": "false: it was removed or its permissions changed.",
            },
        }),
        &["path", "access", "usable"],
    );
    facts_schema::object(
        json!({
            "agent_id": {"type": "string"},
            "uptime_secs": {"type": "integer", "description": "Seconds since toolgate started."},
            "cwd": {
                "type": "string",
                "description": "The working directory relative paths resolve against.",
            },
            "roots": {"type": "array", "items": root, "description": "The workspace roots."},
            "healthy": {"type": "boolean", "description": "Every root is usable."},
            "sandbox_backend": {
                "enum": ["bwrap", "landlock", "none"],
                "description": "The sandbox commands run in (none: unsandboxed, development \
                                only).",
            },
            "policy_preset": {"type": "string"},
            "active_tools": {
                "type": ["integer", "null"],
                "description": "Tools available now; null when unknown.",
            },
        }),
        &[
            "agent_id",
            "uptime_secs",
            "cwd",
            "roots",
            "healthy",
            "sandbox_backend",
            "policy_preset",
            "active_tools",
        ],
    )
}

/// `3d 4h 5m 6s`, leading zero units left out.
fn human_duration(secs: u64) -> String {
    let units = [(86_400, "d"), (3_600, "h"), (60, "m")];
    let mut out = String::new();
    let mut rest = secs;
    for (size, name) in units {
        if rest >= size || !out.is_empty() {
            out.push_str(&format!("{}{name} ", rest / size));
            rest %= size;
        }
    }
    out.push_str(&format!("{rest}s"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_well() {
        let cases = [
            (0, "0s"),
            (59, "59s"),
            (60, "1m 0s"),
            (3_661, "1h 1m 1s"),
            (90_000, "1d 1h 0m 0s"),
        ];
        for (secs, want) in cases {
            assert_eq!(human_duration(secs), want, "{secs}");
        }
    }
}

//! The `neuron_*` tools: what an agent can learn about the place it runs in.
//!
//! `neuron_status` (who and where: agent, uptime, roots, sandbox, policy),
//! `neuron_disk` (space on each root's file system), `neuron_memory` (host
//! memory and this process's cgroup limit), `neuron_packages` (toolchains a
//! sandboxed command can run) and `neuron_env` (the environment a sandboxed
//! command sees, secret-looking values redacted). All are read-only and in
//! the group `group:neuron`.
//!
//! The facts about commands (packages, environment) are taken *inside* the
//! sandbox through [`Workspace::exec`](toolgate_sandbox::Workspace::exec):
//! what the host has and what a command sees differ by design.

mod disk;
mod env;
mod memory;
mod packages;
mod status;

use std::sync::Arc;
use std::time::Instant;

use toolgate_core::{Registry, ToolRegistrationError, Typed};

use crate::fs::Fs;

pub use disk::{DiskArgs, DiskTool};
pub use env::{EnvArgs, EnvTool, REDACTED, is_secret_name, redact};
pub use memory::{MemoryArgs, MemoryTool};
pub use packages::{PackagesArgs, PackagesTool};
pub use status::{StatusArgs, StatusTool};

/// The group of every neuron tool (and of `snapshot`).
pub const GROUP: &str = "group:neuron";

/// Counts the tools active right now (the registry lives in the executor,
/// so the binary hands in a way to ask it).
pub type ToolCounter = Arc<dyn Fn() -> usize + Send + Sync>;

/// What only the binary knows about this run; it fills the fields in.
#[derive(Clone)]
pub struct RuntimeFacts {
    /// The agent this process serves.
    pub agent_id: String,
    /// When the process started (for the uptime).
    pub started: Instant,
    /// The name of the policy preset in force.
    pub policy_preset: String,
    /// The number of active tools, when the binary can tell.
    pub active_tools: Option<ToolCounter>,
    /// Host variables that commands are given by name besides the sandbox's
    /// defaults (the same list the command tools use), so `neuron_env`
    /// shows what those commands see.
    pub pass_env: Vec<String>,
}

impl RuntimeFacts {
    /// Facts for `agent_id` under `policy_preset`, started now, with no
    /// tool counter and no extra variables.
    pub fn new(agent_id: impl Into<String>, policy_preset: impl Into<String>) -> RuntimeFacts {
        RuntimeFacts {
            agent_id: agent_id.into(),
            started: Instant::now(),
            policy_preset: policy_preset.into(),
            active_tools: None,
            pass_env: Vec::new(),
        }
    }
}

impl std::fmt::Debug for RuntimeFacts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeFacts")
            .field("agent_id", &self.agent_id)
            .field("started", &self.started)
            .field("policy_preset", &self.policy_preset)
            .field(
                "active_tools",
                &self.active_tools.as_ref().map(|count| count()),
            )
            .field("pass_env", &self.pass_env)
            .finish()
    }
}

/// Registers `neuron_status`, `neuron_disk`, `neuron_memory`,
/// `neuron_packages` and `neuron_env` over `fs`'s workspace.
pub fn register_neuron_tools(
    registry: &mut Registry,
    fs: Arc<Fs>,
    facts: RuntimeFacts,
) -> Result<(), ToolRegistrationError> {
    let facts = Arc::new(facts);
    registry.register(Arc::new(Typed::new(StatusTool::new(
        fs.clone(),
        facts.clone(),
    ))))?;
    registry.register(Arc::new(Typed::new(DiskTool::new(fs.clone()))))?;
    registry.register(Arc::new(Typed::new(MemoryTool::new())))?;
    registry.register(Arc::new(Typed::new(PackagesTool::new(fs.clone()))))?;
    registry.register(Arc::new(Typed::new(EnvTool::new(fs, facts))))?;
    Ok(())
}

/// A sandbox run that did not produce an outcome, as the model sees it.
fn exec_error(what: &str, e: toolgate_sandbox::WorkspaceError) -> toolgate_core::ToolError {
    toolgate_core::ToolError::Failed(format!(
        "cannot {what} in the sandbox: {e}; neuron_status shows whether the sandbox is usable"
    ))
}

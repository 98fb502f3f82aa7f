//! toolgate's built-in tools.
//!
//! The file and search tools (`read`, `write`, `edit`, `apply_patch`, `grep`,
//! `find`, `ls`) do their I/O in this process, through the [`Workspace`]'s
//! file jail: every path resolves beneath a workspace root by the kernel
//! (cap-std, `openat2(RESOLVE_BENEATH)`), relative paths against the
//! workspace's working directory, never the process's. Writes are atomic and
//! keep the file's mode; protected entries (git hooks and config, shell rc
//! files, editor and agent configuration) cannot be written at all.
//!
//! Each tool is a [`TypedTool`](toolgate_core::TypedTool): its schema comes
//! from its argument struct, and it returns text for the model plus a JSON
//! object with the facts (paths, counts, truncation, the next offset).
//! Calls reach the tools only through the `Executor`, which validates the
//! arguments and applies the policy first.
//!
//! This crate is not the boundary for commands: those run in the sandbox.

mod apply_patch;
mod bash;
mod edit;
mod elevated;
mod facts_schema;
mod find;
mod fs;
mod grep;
mod ls;
pub mod memory;
pub mod neuron;
pub mod patch;
pub mod process;
pub mod prompt;
mod read;
pub mod search;
pub mod snapshot;
pub mod text;
mod write;

use std::sync::Arc;

use toolgate_core::{Registry, ToolRegistrationError, Typed};

pub use apply_patch::{ApplyPatchArgs, ApplyPatchTool};
pub use bash::{BashArgs, BashTool, RuntimeConfig};
pub use edit::{EditArgs, EditOp, EditTool, Pass};
pub use elevated::{ElevatedArgs, ElevatedTool};
pub use find::{FindArgs, FindTool};
pub use fs::{Fs, Limits};
pub use grep::{GrepArgs, GrepTool};
pub use ls::{LsArgs, LsTool};
pub use read::{ReadArgs, ReadTool};
pub use write::{WriteArgs, WriteTool};

/// Registers the file and search tools over `fs`.
pub fn register_fs_tools(
    registry: &mut Registry,
    fs: Arc<Fs>,
) -> Result<(), ToolRegistrationError> {
    registry.register(Arc::new(Typed::new(ReadTool::new(fs.clone()))))?;
    registry.register(Arc::new(Typed::new(WriteTool::new(fs.clone()))))?;
    registry.register(Arc::new(Typed::new(EditTool::new(fs.clone()))))?;
    registry.register(Arc::new(Typed::new(ApplyPatchTool::new(fs.clone()))))?;
    registry.register(Arc::new(Typed::new(GrepTool::new(fs.clone()))))?;
    registry.register(Arc::new(Typed::new(FindTool::new(fs.clone()))))?;
    registry.register(Arc::new(Typed::new(LsTool::new(fs))))?;
    Ok(())
}

/// Registers the runtime tools (`bash`, `process_*`) over `fs`.
pub fn register_runtime_tools(
    registry: &mut Registry,
    fs: Arc<Fs>,
    config: RuntimeConfig,
    processes: process::ProcessConfig,
) -> Result<(), ToolRegistrationError> {
    use process::{
        ProcessKillTool, ProcessListTool, ProcessReadTool, ProcessStartTool, ProcessWriteTool,
        Processes,
    };
    let table = Arc::new(Processes::new(fs.clone(), processes));
    registry.register(Arc::new(Typed::new(BashTool::new(fs, config))))?;
    registry.register(Arc::new(Typed::new(ProcessStartTool(table.clone()))))?;
    registry.register(Arc::new(Typed::new(ProcessListTool(table.clone()))))?;
    registry.register(Arc::new(Typed::new(ProcessReadTool(table.clone()))))?;
    registry.register(Arc::new(Typed::new(ProcessWriteTool(table.clone()))))?;
    registry.register(Arc::new(Typed::new(ProcessKillTool(table))))?;
    Ok(())
}

/// Registers `elevated`, which runs commands on the host outside the
/// sandbox. Only for an operator who enabled it: it is destructive (inactive
/// under any lower cap) and the default rules ask before every call.
pub fn register_elevated_tool(
    registry: &mut Registry,
    fs: Arc<Fs>,
    config: RuntimeConfig,
) -> Result<(), ToolRegistrationError> {
    registry.register(Arc::new(Typed::new(ElevatedTool::new(fs, config))))
}

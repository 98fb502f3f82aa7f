//! `neuron_disk`: space on the file system of each workspace root.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use toolgate_core::{CallContext, EffectClass, ToolError, ToolOutput, ToolSpec, TypedTool};

use super::GROUP;
use crate::facts_schema;
use crate::fs::{Fs, blocking, human_bytes};

/// Arguments of `neuron_disk` (none).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiskArgs {}

/// The `neuron_disk` tool.
pub struct DiskTool {
    fs: Arc<Fs>,
}

impl DiskTool {
    /// `neuron_disk` over `fs`'s workspace roots.
    pub fn new(fs: Arc<Fs>) -> DiskTool {
        DiskTool { fs }
    }
}

/// Space of one file system, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Space {
    total: u64,
    used: u64,
    /// What an unprivileged writer may still use (blocks reserved for root
    /// are neither used nor available, so used + available <= total).
    available: u64,
    inodes_total: u64,
    inodes_available: u64,
    read_only: bool,
}

impl Space {
    fn of(stat: &rustix::fs::StatVfs) -> Space {
        // f_frsize is the unit of the block counts; f_bsize only a hint.
        let unit = if stat.f_frsize > 0 {
            stat.f_frsize
        } else {
            stat.f_bsize
        };
        Space {
            total: stat.f_blocks.saturating_mul(unit),
            used: stat
                .f_blocks
                .saturating_sub(stat.f_bfree)
                .saturating_mul(unit),
            available: stat.f_bavail.saturating_mul(unit),
            inodes_total: stat.f_files,
            inodes_available: stat.f_favail,
            read_only: stat.f_flag.contains(rustix::fs::StatVfsMountFlags::RDONLY),
        }
    }
}

#[async_trait]
impl TypedTool for DiskTool {
    type Args = DiskArgs;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "neuron_disk",
            "Show total, used and available space (and inodes) of the file system holding \
             each workspace root. Use it before writing large files, installing packages or \
             building, and when a write fails with 'no space left'.",
            EffectClass::Read,
        )
        .group(GROUP)
        .parallel_safe(true)
        .output_schema(facts_schema())
    }

    async fn run(&self, _args: DiskArgs, _ctx: &CallContext) -> Result<ToolOutput, ToolError> {
        let roots: Vec<PathBuf> = self.fs.workspace().roots().to_vec();
        blocking(move || {
            let mut text = String::new();
            let mut entries: Vec<Value> = Vec::new();
            for root in &roots {
                match rustix::fs::statvfs(root) {
                    Ok(stat) => {
                        let space = Space::of(&stat);
                        text.push_str(&line(root, &space));
                        entries.push(json!({
                            "root": root.display().to_string(),
                            "total_bytes": space.total,
                            "used_bytes": space.used,
                            "available_bytes": space.available,
                            "inodes_total": space.inodes_total,
                            "inodes_available": space.inodes_available,
                            "read_only": space.read_only,
                        }));
                    }
                    Err(e) => {
                        text.push_str(&format!("{}: cannot read: {e}\n", root.display()));
                        entries.push(json!({
                            "root": root.display().to_string(),
                            "error": e.to_string(),
                        }));
                    }
                }
            }
            Ok(ToolOutput::text(text).with_structured(json!({ "roots": entries })))
        })
        .await
    }
}

/// The facts of [`DiskTool::run`]: per root its space, or the error that
/// kept it from being read.
fn facts_schema() -> Value {
    let root = facts_schema::object(
        json!({
            "root": {"type": "string", "description": "The workspace root."},
            "total_bytes": {"type": "integer", "description": "Size of its file system."},
            "used_bytes": {"type": "integer"},
            "available_bytes": {
                "type": "integer",
                "description": "What an unprivileged writer may still use (blocks reserved for \
                                root excluded).",
            },
            "inodes_total": {"type": "integer"},
            "inodes_available": {
                "type": "integer",
                "description": "Files that can still be created.",
            },
            "read_only": {"type": "boolean"},
            "error": {
                "type": "string",
                "description": "Why the file system could not be read; the other facts are \
                                then absent.",
            },
        }),
        &["root"],
    );
    facts_schema::object(
        json!({
            "roots": {
                "type": "array",
                "items": root,
                "description": "Each workspace root, in order.",
            },
        }),
        &["roots"],
    )
}

fn line(root: &std::path::Path, space: &Space) -> String {
    let percent = if space.total == 0 {
        0.0
    } else {
        space.used as f64 * 100.0 / space.total as f64
    };
    format!(
        "{}: {} available, {} used of {} ({percent:.0}%){}\n",
        root.display(),
        human_bytes(space.available),
        human_bytes(space.used),
        human_bytes(space.total),
        if space.read_only { ", read-only" } else { "" },
    )
}

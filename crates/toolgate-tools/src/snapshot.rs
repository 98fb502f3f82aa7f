//! `snapshot`: checkpoints of the workspace's files, and what changed since one.
//!
//! A checkpoint is a manifest (path -> size, mtime, SHA-256) of every file
//! the .gitignore-aware walk sees in every root (hidden files included,
//! `.git` skipped, symlinks recorded by target, never followed). Contents
//! are hashed only when size or mtime differ from the previous checkpoint,
//! so repeated checkpoints of a large tree cost a walk, not a read.
//! Checkpoints are JSON files in toolgate's state directory, outside the
//! workspace. It records file state; it does not keep contents, so it tells
//! what changed, not how to undo it.
//!
//! A checkpoint belongs to the workspace it was taken in: its agent and its
//! canonical roots ([`Scope`]). Taking one, comparing with one and reusing
//! the previous one's hashes all see only the checkpoints of the calling
//! workspace; another workspace's id is an unknown id.

mod manifest;
mod scope;
mod store;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use toolgate_core::{CallContext, EffectClass, ToolError, ToolOutput, ToolSpec, TypedTool};

use crate::facts_schema;
use crate::fs::{Fs, blocking};
use crate::neuron::GROUP;

pub use manifest::Diff;
use manifest::{Manifest, ScanRoot};
use scope::Scope;
use store::Store;

/// Arguments of `snapshot`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SnapshotArgs {
    /// A checkpoint id from an earlier snapshot call: report the files
    /// added, modified and deleted since then (a new checkpoint is taken too).
    pub checkpoint: Option<String>,
}

/// The `snapshot` tool.
pub struct SnapshotTool {
    fs: Arc<Fs>,
    state_dir: PathBuf,
}

impl SnapshotTool {
    /// `snapshot` over `fs`'s workspace, keeping checkpoints under
    /// `<state_dir>/snapshots/<agent>/<scope>/` (a directory outside the
    /// workspace, one per agent and set of roots).
    pub fn new(fs: Arc<Fs>, state_dir: PathBuf) -> SnapshotTool {
        SnapshotTool { fs, state_dir }
    }
}

#[async_trait]
impl TypedTool for SnapshotTool {
    type Args = SnapshotArgs;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "snapshot",
            "Take a checkpoint of the workspace's files (path, size, mtime, content hash; \
             .gitignored files and .git excluded) and return its id. With checkpoint=<id>, also \
             list the files added, modified and deleted since that checkpoint. Use it before \
             running a command or script whose effects on the tree you want to know, then \
             again with the id afterwards.",
            EffectClass::Read,
        )
        .group(GROUP)
        .parallel_safe(true)
        .output_schema(facts_schema())
    }

    async fn run(&self, args: SnapshotArgs, _ctx: &CallContext) -> Result<ToolOutput, ToolError> {
        let workspace = self.fs.workspace();
        // The workspace's roots are canonical (its jails opened them).
        let scope = Scope::new(workspace.agent_id(), workspace.roots());
        let store = Store::new(&self.state_dir, scope);
        let mut roots = Vec::new();
        for (i, root) in workspace.roots().iter().enumerate() {
            let (jail, _) = workspace
                .jail_for(root)
                .map_err(crate::fs::workspace_error)?;
            roots.push(ScanRoot {
                jail,
                absolute: i > 0,
            });
        }
        let limit = self.fs.limits().results;
        blocking(move || checkpoint(&store, &roots, args.checkpoint.as_deref(), limit)).await
    }
}

fn checkpoint(
    store: &Store,
    roots: &[ScanRoot],
    against: Option<&str>,
    limit: usize,
) -> Result<ToolOutput, ToolError> {
    let failed = |e: store::StoreError| ToolError::Failed(e.to_string());
    let mut warnings = Vec::new();
    // Before any lookup, and whatever id is asked for: see store::legacy.
    if let Err(e) = store.adopt_legacy() {
        warnings.push(format!("checkpoints from before they were scoped: {e}"));
    }
    // The named checkpoint is loaded first: an unknown id fails before any work.
    let base = match against {
        Some(id) => Some(store.load(id).map_err(failed)?),
        None => store.latest().map_err(failed)?,
    };
    for root in roots {
        if let Err(e) = sync_filesystem(root.jail.root()) {
            warnings.push(format!("cannot flush {}: {e}", root.jail.root().display()));
        }
    }
    let scan = manifest::scan(roots, base.as_ref());
    let mut manifest = Manifest {
        id: String::new(),
        // Both stamped by the store with its scope.
        agent: String::new(),
        taken_ns: scan.taken_ns,
        roots: Vec::new(),
        files: scan.files,
    };
    let id = store.save(&mut manifest).map_err(failed)?;
    let count = manifest.files.len();
    let mut text = format!("checkpoint {id}: {count} files ({} hashed)\n", scan.hashed);
    let mut structured = json!({
        "id": id,
        "files": count,
        "hashed": scan.hashed,
        "unreadable": scan.unreadable.iter().take(limit).collect::<Vec<_>>(),
        "warnings": warnings,
    });
    if !scan.unreadable.is_empty() {
        text.push_str(&format!(
            "[{} entries could not be read and are not in the checkpoint]\n",
            scan.unreadable.len()
        ));
    }
    for warning in &warnings {
        text.push_str(&format!("[{warning}]\n"));
    }
    if let (Some(id), Some(base)) = (against, base) {
        let diff = manifest::diff(&base.files, &manifest.files);
        render_diff(&mut text, id, &diff, limit);
        structured["compared_with"] = json!(id);
        structured["added"] = json!(diff.added.iter().take(limit).collect::<Vec<_>>());
        structured["modified"] = json!(diff.modified.iter().take(limit).collect::<Vec<_>>());
        structured["deleted"] = json!(diff.deleted.iter().take(limit).collect::<Vec<_>>());
        structured["counts"] = json!({
            "added": diff.added.len(),
            "modified": diff.modified.len(),
            "deleted": diff.deleted.len(),
        });
        structured["truncated"] = json!(
            diff.added.len() > limit || diff.modified.len() > limit || diff.deleted.len() > limit
        );
    }
    Ok(ToolOutput::text(text).with_structured(structured))
}

/// The facts of [`checkpoint`]; the comparison's only with a checkpoint
/// argument.
fn facts_schema() -> Value {
    let paths = |what: &str| {
        json!({
            "type": "array",
            "items": {"type": "string"},
            "description": format!(
                "With checkpoint: the files {what} since it, by path (at most the result \
                 limit; counts has them all)."
            ),
        })
    };
    let mut counts = facts_schema::object(
        json!({
            "added": {"type": "integer"},
            "modified": {"type": "integer"},
            "deleted": {"type": "integer"},
        }),
        &["added", "modified", "deleted"],
    );
    counts["description"] =
        json!("With checkpoint: how many files were added, modified and deleted, in all.");
    facts_schema::object(
        json!({
            "id": {
                "type": "string",
                "description": "The new checkpoint, to pass as checkpoint later.",
            },
            "files": {"type": "integer", "description": "Files recorded in the checkpoint."},
            "hashed": {
                "type": "integer",
                "description": "Files whose content was hashed this time (the rest were \
                                unchanged since the previous checkpoint).",
            },
            "unreadable": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Entries that could not be read and are not in the checkpoint, \
                                with why.",
            },
            "warnings": {"type": "array", "items": {"type": "string"}},
            "compared_with": {
                "type": "string",
                "description": "With checkpoint: the checkpoint compared with.",
            },
            "added": paths("added"),
            "modified": paths("modified"),
            "deleted": paths("deleted"),
            "counts": counts,
            "truncated": {
                "type": "boolean",
                "description": "With checkpoint: a path list was cut at the limit.",
            },
        }),
        &["id", "files", "hashed", "unreadable", "warnings"],
    )
}

fn render_diff(text: &mut String, id: &str, diff: &Diff, limit: usize) {
    text.push_str(&format!(
        "since {id}: {} added, {} modified, {} deleted\n",
        diff.added.len(),
        diff.modified.len(),
        diff.deleted.len()
    ));
    for (mark, paths) in [
        ("A", &diff.added),
        ("M", &diff.modified),
        ("D", &diff.deleted),
    ] {
        for path in paths.iter().take(limit) {
            text.push_str(&format!("{mark} {path}\n"));
        }
        if paths.len() > limit {
            text.push_str(&format!(
                "[{} more {mark} paths not shown]\n",
                paths.len() - limit
            ));
        }
    }
}

/// Flushes the file system holding `root`, so the checkpoint describes
/// what is on disk, not what a crash would lose.
fn sync_filesystem(root: &Path) -> std::io::Result<()> {
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::open(
        root,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    rustix::fs::syncfs(&fd)?;
    Ok(())
}

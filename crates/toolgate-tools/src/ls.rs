//! `ls`: a directory listing, or a tree a few levels deep.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use toolgate_core::{CallContext, EffectClass, ToolError, ToolOutput, ToolSpec, TypedTool};
use toolgate_sandbox::{EntryInfo, EntryKind};

use crate::facts_schema;
use crate::fs::{Fs, Located, blocking, human_bytes, jail_error, unix_seconds, utc_minutes};

/// Deepest tree `ls` draws.
const MAX_DEPTH: u32 = 10;

/// Arguments of `ls`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LsArgs {
    /// The directory (default: the workspace's working directory).
    #[serde(default)]
    pub path: String,
    /// Levels to show: 1 lists the directory, 2 also its subdirectories, ... (default 1, at most 10).
    #[schemars(range(min = 1, max = 10))]
    pub depth: Option<u32>,
    /// Also show entries whose names start with a dot.
    #[serde(default)]
    pub hidden: bool,
    /// Most entries to show (default 200).
    #[schemars(range(min = 1))]
    pub limit: Option<usize>,
}

/// The `ls` tool.
pub struct LsTool {
    fs: Arc<Fs>,
}

impl LsTool {
    /// `ls` over `fs`.
    pub fn new(fs: Arc<Fs>) -> LsTool {
        LsTool { fs }
    }
}

#[async_trait]
impl TypedTool for LsTool {
    type Args = LsArgs;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "ls",
            "List a directory of the workspace with each entry's type, size and modification \
             time; depth > 1 draws a tree. Hidden entries only with hidden=true. Use find to \
             search by name pattern across the tree and grep to search contents.",
            EffectClass::Read,
        )
        .group("group:fs")
        .parallel_safe(true)
        .path_arg("/path")
        .output_schema(facts_schema())
    }

    async fn run(&self, args: LsArgs, _ctx: &CallContext) -> Result<ToolOutput, ToolError> {
        let place = self.fs.locate(&args.path)?;
        let limit = args.limit.unwrap_or(self.fs.limits().results).max(1);
        let depth = args.depth.unwrap_or(1).clamp(1, MAX_DEPTH);
        blocking(move || ls(&place, depth, args.hidden, limit)).await
    }
}

struct Listing {
    text: String,
    entries: Vec<Value>,
    limit: usize,
    truncated: bool,
    hidden: bool,
}

fn ls(place: &Located, depth: u32, hidden: bool, limit: usize) -> Result<ToolOutput, ToolError> {
    let stat = place.jail.stat(&place.rel).map_err(jail_error)?;
    if stat.kind != EntryKind::Dir {
        return Err(ToolError::Failed(format!(
            "`{}` is not a directory; read it with read, or list its parent",
            place.shown
        )));
    }
    let mut listing = Listing {
        text: String::new(),
        entries: Vec::new(),
        limit,
        truncated: false,
        hidden,
    };
    walk(place, &place.rel, 0, depth, &mut listing)?;
    let mut text = format!("{}/\n{}", place.shown.trim_end_matches('/'), listing.text);
    let count = listing.entries.len();
    if count == 0 {
        text.push_str(if hidden {
            "[empty directory]\n"
        } else {
            "[no entries; hidden ones are shown with hidden=true]\n"
        });
    }
    if listing.truncated {
        text.push_str(&format!(
            "[stopped at {count} entries; list a subdirectory, lower depth, or raise limit]\n"
        ));
    }
    Ok(ToolOutput::text(text).with_structured(json!({
        "path": place.shown,
        "entries": listing.entries,
        "count": count,
        "truncated": listing.truncated,
    })))
}

/// The facts of [`ls`] (the entries as [`walk`] lists them).
fn facts_schema() -> Value {
    let entry = facts_schema::object(
        json!({
            "path": {"type": "string", "description": "The entry, as the workspace shows it."},
            "type": {
                "enum": ["file", "dir", "symlink", "other"],
                "description": "other: a socket, FIFO or device.",
            },
            "size": {"type": "integer", "description": "Bytes (for a symlink: of the link itself)."},
            "modified": {
                "type": ["integer", "null"],
                "description": "Last modification, in seconds since the Unix epoch; null when \
                                unknown.",
            },
        }),
        &["path", "type", "size", "modified"],
    );
    facts_schema::object(
        json!({
            "path": {"type": "string", "description": "The directory listed."},
            "entries": {
                "type": "array",
                "items": entry,
                "description": "Directories first, then by name; with depth > 1 each directory \
                                is followed by its own entries.",
            },
            "count": {"type": "integer", "description": "Entries listed."},
            "truncated": {
                "type": "boolean",
                "description": "The listing stopped at limit; list a subdirectory, lower \
                                depth, or raise limit.",
            },
        }),
        &["path", "entries", "count", "truncated"],
    )
}

fn walk(
    place: &Located,
    dir: &Path,
    level: u32,
    depth: u32,
    out: &mut Listing,
) -> Result<(), ToolError> {
    let mut entries = place.jail.list(dir).map_err(jail_error)?;
    entries.retain(|e| out.hidden || !e.name.starts_with('.'));
    // Directories first, each group by name (list() sorted by name already).
    entries.sort_by_key(|e| e.kind != EntryKind::Dir);
    for entry in entries {
        if out.entries.len() >= out.limit {
            out.truncated = true;
            return Ok(());
        }
        let rel: PathBuf = dir.join(&entry.name);
        line(&mut out.text, &entry, level);
        out.entries.push(json!({
            "path": place.sibling(rel.clone()).shown,
            "type": kind_word(entry.kind),
            "size": entry.size,
            "modified": unix_seconds(entry.modified),
        }));
        // `.git` is listed but not descended into: its inside is git's.
        if entry.kind == EntryKind::Dir && level + 1 < depth && entry.name != ".git" {
            walk(place, &rel, level + 1, depth, out)?;
            if out.truncated {
                return Ok(());
            }
        }
    }
    Ok(())
}

fn line(text: &mut String, entry: &EntryInfo, level: u32) {
    let indent = "  ".repeat(level as usize + 1);
    let modified = unix_seconds(entry.modified).map_or(String::new(), utc_minutes);
    let row = match entry.kind {
        EntryKind::Dir => format!("{indent}{}/", entry.name),
        EntryKind::Symlink => format!("{indent}{}@  symlink", entry.name),
        EntryKind::File => format!(
            "{indent}{}  {}  {modified}",
            entry.name,
            human_bytes(entry.size)
        ),
        EntryKind::Other => format!("{indent}{}  special file", entry.name),
    };
    text.push_str(row.trim_end());
    text.push('\n');
}

pub(crate) fn kind_word(kind: EntryKind) -> &'static str {
    match kind {
        EntryKind::File => "file",
        EntryKind::Dir => "dir",
        EntryKind::Symlink => "symlink",
        EntryKind::Other => "other",
    }
}

//! `ls`: a directory listing, or a tree a few levels deep.

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use toolgate_core::{CallContext, EffectClass, ToolError, ToolOutput, ToolSpec, TypedTool};
use toolgate_sandbox::{EntryInfo, EntryKind, JailError};

use crate::facts_schema;
use crate::fs::{Fs, HumanBytes, Located, UtcMinutes, blocking_short, jail_error, unix_seconds};

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
        blocking_short(move || ls(&place, depth, args.hidden, limit)).await
    }
}

struct Listing {
    /// The rows of the text, rendered once every width is known.
    rows: Vec<Row>,
    /// The rows' size columns, back to back: one buffer for the listing,
    /// not a String per row.
    cells: String,
    entries: Vec<Value>,
    limit: usize,
    truncated: bool,
    hidden: bool,
}

/// One row of the text listing: `   4.0 KiB  2026-12-01 13:01  name`.
struct Row {
    /// Where in [`Listing::cells`] the size column's text is: the size of a
    /// file, or what the entry is (`dir`, `symlink`, `special`).
    size: Range<usize>,
    modified: Option<u64>,
    /// Depth in the tree: the name is indented two spaces a level.
    level: u32,
    name: String,
    /// `/` for a directory and `@` for a symlink, after the name.
    suffix: &'static str,
}

fn ls(place: &Located, depth: u32, hidden: bool, limit: usize) -> Result<ToolOutput, ToolError> {
    let shown = place.shown.trim_end_matches('/');
    let mut listing = Listing {
        rows: Vec::new(),
        cells: String::new(),
        entries: Vec::new(),
        limit,
        truncated: false,
        hidden,
    };
    let absolute = place.shown.starts_with('/');
    // The listing itself tells whether the path is a directory; only when it
    // fails is the path looked at again, for the message that fits.
    let entries = match place.jail.list(&place.rel) {
        Ok(entries) => entries,
        Err(e) => return Err(not_listable(place, e)),
    };
    walk(place, &place.rel, entries, 0, depth, absolute, &mut listing)?;
    let Listing {
        rows,
        cells,
        entries,
        truncated,
        ..
    } = listing;
    let mut text = format!("{shown}/\n");
    render(&mut text, &rows, &cells);
    let count = entries.len();
    if count == 0 {
        text.push_str(if hidden {
            "[empty directory]\n"
        } else {
            "[no entries; hidden ones are shown with hidden=true]\n"
        });
    }
    if truncated {
        text.push_str(&format!(
            "[stopped at {count} entries; list a subdirectory, lower depth, or raise limit]\n"
        ));
    }
    // Built by hand, in json!'s key order: json! would deep-copy `entries`.
    let mut facts = Map::new();
    facts.insert("path".to_owned(), Value::String(place.shown.clone()));
    facts.insert("entries".to_owned(), Value::Array(entries));
    facts.insert("count".to_owned(), count.into());
    facts.insert("truncated".to_owned(), truncated.into());
    Ok(ToolOutput::text(text).with_structured(Value::Object(facts)))
}

/// Why `place` cannot be listed: a file (or a symlink to one) gets a hint to
/// read it; anything else keeps the jail's own error.
fn not_listable(place: &Located, error: JailError) -> ToolError {
    match place.jail.stat(&place.rel) {
        Err(e) => jail_error(e),
        Ok(stat) if stat.kind != EntryKind::Dir => ToolError::Failed(format!(
            "`{}` is not a directory; read it with read, or list its parent",
            place.shown
        )),
        Ok(_) => jail_error(error),
    }
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
    mut entries: Vec<EntryInfo>,
    level: u32,
    depth: u32,
    absolute: bool,
    out: &mut Listing,
) -> Result<(), ToolError> {
    entries.retain(|e| out.hidden || !e.name.starts_with('.'));
    // Directories first, each group by name (list() sorted by name already).
    entries.sort_by_key(|e| e.kind != EntryKind::Dir);
    // How the entries' paths are shown: `dir` as `Located::sibling` shows
    // it, then `/name` (no separator after an empty or `/`-ending prefix,
    // as `Path::join` does).
    let prefix = if absolute {
        place.jail.root().join(dir).display().to_string()
    } else {
        dir.display().to_string()
    };
    let separator = if prefix.is_empty() || prefix.ends_with('/') {
        ""
    } else {
        "/"
    };
    for entry in entries {
        if out.entries.len() >= out.limit {
            out.truncated = true;
            return Ok(());
        }
        let modified = unix_seconds(entry.modified);
        let mut path = String::with_capacity(prefix.len() + separator.len() + entry.name.len());
        path.push_str(&prefix);
        path.push_str(separator);
        path.push_str(&entry.name);
        // Built by hand: json! would copy the path once more (it serializes
        // every value it is given).
        let mut facts = Map::new();
        facts.insert("path".to_owned(), Value::String(path));
        facts.insert("type".to_owned(), kind_word(entry.kind).into());
        facts.insert("size".to_owned(), entry.size.into());
        facts.insert("modified".to_owned(), modified.into());
        out.entries.push(Value::Object(facts));
        // `.git` is listed but not descended into: its inside is git's.
        let descend = entry.kind == EntryKind::Dir && level + 1 < depth && entry.name != ".git";
        let rel = if descend {
            Some(dir.join(&entry.name))
        } else {
            None
        };
        let row = Row::of(entry, modified, level, &mut out.cells);
        out.rows.push(row);
        if let Some(rel) = rel {
            let inner = place.jail.list(&rel).map_err(jail_error)?;
            walk(place, &rel, inner, level + 1, depth, absolute, out)?;
            if out.truncated {
                return Ok(());
            }
        }
    }
    Ok(())
}

impl Row {
    fn of(entry: EntryInfo, modified: Option<u64>, level: u32, cells: &mut String) -> Row {
        let start = cells.len();
        let suffix = match entry.kind {
            EntryKind::File => {
                HumanBytes(entry.size).push_to(cells);
                ""
            }
            EntryKind::Dir => {
                cells.push_str("dir");
                "/"
            }
            EntryKind::Symlink => {
                cells.push_str("symlink");
                "@"
            }
            EntryKind::Other => {
                cells.push_str("special");
                ""
            }
        };
        Row {
            size: start..cells.len(),
            modified,
            level,
            name: entry.name,
            suffix,
        }
    }
}

/// Writes the rows as aligned columns: the size right-aligned to the widest
/// one, the time, then the name last (indented by its level), so a name of
/// any length never shifts the other columns. Every cell is ASCII but the
/// name, so bytes are columns.
fn render(text: &mut String, rows: &[Row], cells: &str) {
    let width = rows.iter().map(|r| r.size.len()).max().unwrap_or(0);
    // A row is about 24 bytes besides its size and name.
    text.reserve(rows.iter().map(|r| width + 24 + r.name.len()).sum());
    for row in rows {
        text.push_str("  ");
        text.extend(std::iter::repeat_n(' ', width - row.size.len()));
        text.push_str(&cells[row.size.clone()]);
        text.push_str("  ");
        match row.modified {
            Some(secs) => UtcMinutes(secs).push_to(text),
            None => text.push_str("-               "),
        }
        text.push_str("  ");
        text.extend(std::iter::repeat_n(' ', 2 * row.level as usize));
        text.push_str(&row.name);
        text.push_str(row.suffix);
        text.push('\n');
    }
}

pub(crate) fn kind_word(kind: EntryKind) -> &'static str {
    match kind {
        EntryKind::File => "file",
        EntryKind::Dir => "dir",
        EntryKind::Symlink => "symlink",
        EntryKind::Other => "other",
    }
}

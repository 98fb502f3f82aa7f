//! `memory_read`: list the memory files, or show one with line numbers.

use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use toolgate_core::{CallContext, EffectClass, ToolError, ToolOutput, ToolSpec, TypedTool};

use super::index;
use super::{MEMORY_GROUP, MemoryStore, numbered};
use crate::facts_schema;
use crate::fs::{blocking, human_bytes, unix_seconds, utc_minutes};
use crate::text;

/// Arguments of `memory_read`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryReadArgs {
    /// The memory file to show (a plain name like NOTES.md); omit it to
    /// list the memory files.
    pub file: Option<String>,
    /// With file: the first line to show, counting from 1 (default 1).
    #[schemars(range(min = 1))]
    pub offset: Option<u64>,
}

/// The `memory_read` tool.
pub struct MemoryReadTool {
    store: Arc<MemoryStore>,
}

impl MemoryReadTool {
    pub(crate) fn new(store: Arc<MemoryStore>) -> MemoryReadTool {
        MemoryReadTool { store }
    }
}

#[async_trait]
impl TypedTool for MemoryReadTool {
    type Args = MemoryReadArgs;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "memory_read",
            "Read the memory kept across sessions: without file, lists the memory files \
             (name, size, last change, number of sections); with file, shows its text with \
             line numbers and its sha256 (for memory_replace's expected_sha256). Use \
             memory_search to find a fact without reading everything; use read for files \
             outside the memory directory.",
            EffectClass::Read,
        )
        .group(MEMORY_GROUP)
        .parallel_safe(true)
        .output_schema(facts_schema())
    }

    /// The memory file (or directory) is a path like any other to the
    /// path layer: `[paths] deny` rules apply to it too.
    fn embedded_paths(&self, args: &serde_json::Value) -> Result<Vec<String>, String> {
        Ok(self.store.embedded_paths(args, true))
    }

    async fn run(&self, args: MemoryReadArgs, _ctx: &CallContext) -> Result<ToolOutput, ToolError> {
        let store = self.store.clone();
        match args.file {
            Some(file) => {
                let name = store.name(Some(&file))?;
                let offset = args.offset.unwrap_or(1).max(1);
                blocking(move || show(&store, &name, offset)).await
            }
            None if args.offset.is_some() => Err(ToolError::InvalidArguments(
                "offset applies to one file; give file too, or omit offset to list the memory \
                 files"
                    .to_owned(),
            )),
            None => blocking(move || list(&store)).await,
        }
    }
}

fn list(store: &MemoryStore) -> Result<ToolOutput, ToolError> {
    let dir = store.dir()?;
    let (files, ignored) = store.list()?;
    let mut out = if files.is_empty() {
        format!(
            "No memory files yet in `{}`; memory_append creates one.\n",
            dir.shown
        )
    } else {
        format!("{} memory file(s) in `{}`:\n", files.len(), dir.shown)
    };
    let mut facts = Vec::new();
    for file in &files {
        // A file that cannot be read (too large, not UTF-8) is still listed.
        let sections = store
            .file(&file.name)
            .and_then(|place| store.load(&place))
            .ok()
            .flatten()
            .map(|loaded| index::sections(&loaded.decoded.text).len());
        let modified = unix_seconds(file.modified);
        out.push_str(&format!(
            "{}  {}  {}  {}\n",
            file.name,
            human_bytes(file.size),
            modified.map_or("-".to_owned(), utc_minutes),
            sections.map_or("unreadable".to_owned(), |n| format!("{n} section(s)")),
        ));
        facts.push(json!({
            "name": file.name, "size": file.size, "modified": modified, "sections": sections,
        }));
    }
    if !ignored.is_empty() {
        out.push_str(&format!(
            "[not memory files, ignored: {}]\n",
            ignored.join(", ")
        ));
    }
    Ok(ToolOutput::text(out).with_structured(json!({
        "dir": dir.shown, "files": facts, "ignored": ignored,
    })))
}

fn show(store: &MemoryStore, name: &str, offset: u64) -> Result<ToolOutput, ToolError> {
    let place = store.file(name)?;
    let Some(loaded) = store.load(&place)? else {
        return Err(ToolError::Failed(format!(
            "`{}` does not exist; call memory_read without file to list the memory files",
            place.shown
        )));
    };
    let limits = store.fs().limits();
    let lines: Vec<&str> = loaded.decoded.text.lines().collect();
    let total = lines.len();
    let first = usize::try_from(offset).unwrap_or(usize::MAX);
    if first > total.max(1) {
        return Err(ToolError::InvalidArguments(format!(
            "offset {offset} is past the end of `{}`, which has {total} lines",
            place.shown
        )));
    }
    let mut out = String::new();
    let mut last = first - 1;
    for (i, line) in lines.iter().enumerate().skip(first - 1) {
        let row = numbered(i + 1, &text::cut_line(line, limits.line_chars));
        let over_lines = i + 1 >= first + limits.read_lines;
        // One row at least, so paging always advances.
        let over_bytes = last >= first && out.len() + row.len() > limits.read_bytes;
        if over_lines || over_bytes {
            break;
        }
        out.push_str(&row);
        last = i + 1;
    }
    let next = (last < total).then_some(last + 1);
    if total == 0 {
        out.push_str("[the file is empty]\n");
    }
    if let Some(next) = next {
        out.push_str(&format!(
            "[showing lines {first}-{last} of {total}; continue with offset={next}]\n"
        ));
    }
    let sections: Vec<_> = index::sections(&loaded.decoded.text)
        .into_iter()
        .map(|s| json!({"heading": s.heading, "line_start": s.first, "line_end": s.last}))
        .collect();
    Ok(ToolOutput::text(out).with_structured(json!({
        "file": name, "path": place.shown, "start_line": first, "end_line": last,
        "total_lines": total, "truncated": next.is_some(), "next_offset": next,
        "sha256": loaded.sha256, "sections": sections,
    })))
}

/// The facts of both kinds of result: the list of files ([`list`]) and one
/// file's text ([`show`]).
fn facts_schema() -> Value {
    let listed = facts_schema::object(
        json!({
            "name": {"type": "string"},
            "size": {"type": "integer", "description": "Bytes."},
            "modified": {
                "type": ["integer", "null"],
                "description": "Last change, in seconds since the Unix epoch.",
            },
            "sections": {
                "type": ["integer", "null"],
                "description": "Sections (split at headings); null when the file cannot be read.",
            },
        }),
        &["name", "size", "modified", "sections"],
    );
    let section = facts_schema::object(
        json!({
            "heading": {
                "type": ["string", "null"],
                "description": "null for the text before the first heading.",
            },
            "line_start": {"type": "integer"},
            "line_end": {"type": "integer"},
        }),
        &["heading", "line_start", "line_end"],
    );
    let mut schema = facts_schema::object(
        json!({
            "dir": {"type": "string", "description": "list: the memory directory."},
            "files": {"type": "array", "items": listed, "description": "list: the memory files."},
            "ignored": {
                "type": "array",
                "items": {"type": "string"},
                "description": "list: entries of the directory that are not memory files.",
            },
            "file": {"type": "string", "description": "show: the memory file's name."},
            "path": {"type": "string", "description": "show: the memory file in the workspace."},
            "start_line": {"type": "integer", "description": "show: the first line shown."},
            "end_line": {"type": "integer", "description": "show: the last line shown."},
            "total_lines": {"type": "integer", "description": "show: lines in the file."},
            "truncated": {
                "type": "boolean",
                "description": "show: lines after end_line were not shown; read again with \
                                offset=next_offset.",
            },
            "next_offset": {
                "type": ["integer", "null"],
                "description": "show: the offset that continues; null at the end of the file.",
            },
            "sha256": {
                "type": "string",
                "description": "show: SHA-256 (hex) of the file, for memory_replace's \
                                expected_sha256.",
            },
            "sections": {
                "type": "array",
                "items": section,
                "description": "show: the file's sections (split at headings).",
            },
        }),
        &[],
    );
    schema["oneOf"] = json!([
        {"required": ["dir", "files", "ignored"]},
        {
            "required": [
                "file", "path", "start_line", "end_line", "total_lines", "truncated",
                "next_offset", "sha256", "sections",
            ],
        },
    ]);
    schema
}

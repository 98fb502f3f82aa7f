//! `memory_replace`: correct or remove one fact, by exact text.

use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use toolgate_core::{
    CallContext, EffectClass, Idempotency, ToolError, ToolOutput, ToolSpec, TypedTool,
};

use super::{MEMORY_GROUP, MemoryStore};
use crate::facts_schema;
use crate::fs::blocking;
use crate::text::{self, LineEndings};
use crate::write::check_expected;

/// Arguments of `memory_replace`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryReplaceArgs {
    /// The memory file, a plain name like NOTES.md (default: the configured
    /// default file, MEMORY.md).
    pub file: Option<String>,
    /// The exact text to replace, copied from memory_read; it must occur
    /// exactly once in the file.
    pub old_text: String,
    /// What replaces it; empty removes old_text.
    pub new_text: String,
    /// Refuse unless the file's current SHA-256 (hex, from memory_read) is
    /// this: protects a change made by someone else since you read it.
    #[schemars(regex(pattern = r"^[0-9a-fA-F]{64}$"))]
    pub expected_sha256: Option<String>,
}

/// The `memory_replace` tool.
pub struct MemoryReplaceTool {
    store: Arc<MemoryStore>,
}

impl MemoryReplaceTool {
    pub(crate) fn new(store: Arc<MemoryStore>) -> MemoryReplaceTool {
        MemoryReplaceTool { store }
    }
}

#[async_trait]
impl TypedTool for MemoryReplaceTool {
    type Args = MemoryReplaceArgs;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "memory_replace",
            "Correct, update or remove a fact in a memory file: replaces old_text (copied \
             exactly from memory_read, unique in the file) with new_text; an empty new_text \
             deletes it. Fails and changes nothing when old_text is missing or occurs more \
             than once (the lines are listed: add surrounding text to make it unique). Use it \
             when a remembered fact became wrong or outdated; use memory_append for new facts, \
             and the file tools (edit) for files outside the memory directory. Pass \
             expected_sha256 from memory_read to refuse if the file changed meanwhile.",
            EffectClass::MutateReversible,
        )
        .idempotency(Idempotency::CheckBeforeAct)
        .group(MEMORY_GROUP)
        .output_schema(facts_schema())
    }

    /// The memory file (or directory) is a path like any other to the
    /// path layer: `[paths] deny` rules apply to it too.
    fn embedded_paths(&self, args: &serde_json::Value) -> Result<Vec<String>, String> {
        Ok(self.store.embedded_paths(args, false))
    }

    async fn run(
        &self,
        args: MemoryReplaceArgs,
        _ctx: &CallContext,
    ) -> Result<ToolOutput, ToolError> {
        let name = self.store.name(args.file.as_deref())?;
        if args.old_text.is_empty() {
            return Err(ToolError::InvalidArguments(
                "old_text is empty; copy the text to change from memory_read, or use \
                 memory_append to add new text"
                    .to_owned(),
            ));
        }
        if args.old_text == args.new_text {
            return Err(ToolError::InvalidArguments(
                "old_text and new_text are the same; there is nothing to change".to_owned(),
            ));
        }
        let store = self.store.clone();
        blocking(move || replace(&store, &name, &args)).await
    }
}

fn replace(
    store: &MemoryStore,
    name: &str,
    args: &MemoryReplaceArgs,
) -> Result<ToolOutput, ToolError> {
    let _writing = store.lock();
    let place = store.file(name)?;
    let Some(loaded) = store.load(&place)? else {
        return Err(ToolError::Failed(format!(
            "`{}` does not exist; call memory_read without file to list the memory files, or \
             memory_append to create it",
            place.shown
        )));
    };
    if let Some(expected) = &args.expected_sha256 {
        check_expected(&place, Some(&loaded.sha256), expected)?;
    }
    let decoded = &loaded.decoded;
    // The model may send CRLF copied from a CRLF file; decoded text uses LF.
    let (old, new) = if decoded.endings == LineEndings::Crlf {
        (
            args.old_text.replace("\r\n", "\n"),
            args.new_text.replace("\r\n", "\n"),
        )
    } else {
        (args.old_text.clone(), args.new_text.clone())
    };
    let current = &decoded.text;
    let found = occurrences(current, &old);
    let line_of = |at: usize| current[..at].matches('\n').count() + 1;
    let at = match found.as_slice() {
        [] => {
            return Err(ToolError::Failed(format!(
                "old_text was not found in `{}`; nothing was changed. Read the file with \
                 memory_read and copy old_text from it exactly (whitespace included)",
                place.shown
            )));
        }
        [at] => *at,
        several => {
            let lines: Vec<String> = several.iter().map(|at| line_of(*at).to_string()).collect();
            return Err(ToolError::Failed(format!(
                "old_text occurs {} times in `{}`, at lines {}; nothing was changed. Include \
                 more of the surrounding text so that it occurs once",
                several.len(),
                place.shown,
                lines.join(", ")
            )));
        }
    };
    let mut updated = current.clone();
    updated.replace_range(at..at + old.len(), &new);
    let bytes = decoded.encode(&updated);
    store.store(&place, &bytes)?;
    let diff = text::unified_diff(&place.shown, current, &updated);
    let (added, removed) = text::diff_stat(&diff);
    let line = line_of(at);
    Ok(ToolOutput::text(format!(
        "Replaced the text at line {line} of `{}` (+{added} -{removed} lines).\n{diff}",
        place.shown
    ))
    .with_structured(json!({
        "file": name, "path": place.shown, "line": line, "diff": diff,
        "lines_added": added, "lines_removed": removed,
        "sha256": text::sha256_hex(&bytes), "previous_sha256": loaded.sha256,
    })))
}

/// The facts of [`replace`].
fn facts_schema() -> Value {
    facts_schema::object(
        json!({
            "file": {"type": "string", "description": "The memory file's name."},
            "path": {"type": "string", "description": "The memory file in the workspace."},
            "line": {"type": "integer", "description": "The line where the replaced text began."},
            "diff": {"type": "string", "description": "Unified diff of the change."},
            "lines_added": {"type": "integer"},
            "lines_removed": {"type": "integer"},
            "sha256": {
                "type": "string",
                "description": "SHA-256 (hex) of the file now, the expected_sha256 of a later \
                                replace.",
            },
            "previous_sha256": {
                "type": "string",
                "description": "SHA-256 (hex) of the file before.",
            },
        }),
        &[
            "file",
            "path",
            "line",
            "diff",
            "lines_added",
            "lines_removed",
            "sha256",
            "previous_sha256",
        ],
    )
}

/// Byte offsets of every occurrence of `needle`, overlapping ones included
/// (`aa` occurs twice in `aaa`: replacing "the" one would be a guess).
fn occurrences(haystack: &str, needle: &str) -> Vec<usize> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(i) = haystack[from..].find(needle) {
        let at = from + i;
        found.push(at);
        from = at + haystack[at..].chars().next().map_or(1, char::len_utf8);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn occurrences_include_overlaps() {
        assert_eq!(occurrences("aaa", "aa"), vec![0, 1]);
        assert_eq!(occurrences("x é x é", "é"), vec![2, 7]);
        assert_eq!(occurrences("abc", "d"), Vec::<usize>::new());
    }
}

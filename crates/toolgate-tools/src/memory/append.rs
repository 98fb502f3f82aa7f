//! `memory_append`: add a fact (optionally under a new `##` heading) to the
//! end of a memory file.

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
use crate::text::{self, Decoded, LineEndings};

/// Longest section heading, in characters.
const MAX_HEADING_CHARS: usize = 200;

/// Arguments of `memory_append`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryAppendArgs {
    /// The memory file, a plain name like NOTES.md (default: the configured
    /// default file, MEMORY.md). Created if missing.
    pub file: Option<String>,
    /// A heading for the new section (one line, without `#`); omit it to
    /// add the text to the end of the file without a heading.
    pub section: Option<String>,
    /// The Markdown text to keep: short, self-contained facts.
    pub text: String,
}

/// The `memory_append` tool.
pub struct MemoryAppendTool {
    store: Arc<MemoryStore>,
}

impl MemoryAppendTool {
    pub(crate) fn new(store: Arc<MemoryStore>) -> MemoryAppendTool {
        MemoryAppendTool { store }
    }
}

#[async_trait]
impl TypedTool for MemoryAppendTool {
    type Args = MemoryAppendArgs;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "memory_append",
            "Save a fact worth keeping across sessions (a user preference, a decision and its \
             reason, how to build or deploy this project, a pitfall found the hard way) to \
             the end of a Markdown memory file, optionally under a new `## section` heading. \
             Creates the file if needed. Do not use it for scratch notes, command output, \
             plans for the current task or anything you can re-read from the workspace; do \
             not save secrets. To correct or remove an existing fact use memory_replace; \
             check memory_search first to avoid saving the same fact twice. Repeating the \
             same call does not append twice.",
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
        args: MemoryAppendArgs,
        _ctx: &CallContext,
    ) -> Result<ToolOutput, ToolError> {
        let name = self.store.name(args.file.as_deref())?;
        let block = block_of(&args)?;
        let store = self.store.clone();
        blocking(move || append(&store, &name, &block)).await
    }
}

/// The text appended: the heading (if any), a blank line, the body.
fn block_of(args: &MemoryAppendArgs) -> Result<String, ToolError> {
    let body = args.text.replace("\r\n", "\n");
    let body = body.trim_start_matches('\n').trim_end();
    if body.is_empty() {
        return Err(ToolError::InvalidArguments(
            "text is empty; give the fact to remember".to_owned(),
        ));
    }
    let Some(section) = &args.section else {
        return Ok(format!("{body}\n"));
    };
    let heading = section.trim().trim_start_matches('#').trim();
    if heading.is_empty() || heading.contains(['\n', '\r']) {
        return Err(ToolError::InvalidArguments(
            "section must be one line of heading text, such as `Deploy`; omit it to append \
             without a heading"
                .to_owned(),
        ));
    }
    if heading.chars().count() > MAX_HEADING_CHARS {
        return Err(ToolError::InvalidArguments(format!(
            "section is over {MAX_HEADING_CHARS} characters; use a short heading and put the \
             details in text"
        )));
    }
    Ok(format!("## {heading}\n\n{body}\n"))
}

fn append(store: &MemoryStore, name: &str, block: &str) -> Result<ToolOutput, ToolError> {
    let _writing = store.lock();
    let place = store.file(name)?;
    let (decoded, previous) = match store.load(&place)? {
        Some(loaded) => (loaded.decoded, Some(loaded.sha256)),
        None => (
            Decoded {
                text: String::new(),
                bom: false,
                endings: LineEndings::of(""),
            },
            None,
        ),
    };
    let current = &decoded.text;
    // Check-before-act: a retried call (the reply was lost) finds its block
    // already at the end and appends nothing.
    if let Some(at) = current.strip_suffix(block).map(str::len)
        && (at == 0 || current[..at].ends_with('\n'))
    {
        let line = current[..at].lines().count() + 1;
        let sha = previous.unwrap_or_default();
        return Ok(ToolOutput::text(format!(
            "`{}` already ends with this text (line {line}); nothing was appended.",
            place.shown
        ))
        .with_structured(json!({
            "file": name, "path": place.shown, "line": line, "appended": false,
            "created": false, "sha256": sha, "previous_sha256": sha,
        })));
    }
    let mut updated = current.clone();
    if !updated.is_empty() {
        if !updated.ends_with('\n') {
            updated.push('\n');
        }
        if !updated.ends_with("\n\n") {
            updated.push('\n');
        }
    }
    let line = updated.lines().count() + 1;
    updated.push_str(block);
    let bytes = decoded.encode(&updated);
    store.store(&place, &bytes)?;
    let sha256 = text::sha256_hex(&bytes);
    let verb = if previous.is_none() {
        "Created"
    } else {
        "Appended to"
    };
    Ok(ToolOutput::text(format!(
        "{verb} `{}`: the new text starts at line {line}.",
        place.shown
    ))
    .with_structured(json!({
        "file": name, "path": place.shown, "line": line, "appended": true,
        "created": previous.is_none(), "sha256": sha256, "previous_sha256": previous,
    })))
}

/// The facts of [`append`], both when it appended and when the text was
/// already there.
fn facts_schema() -> Value {
    facts_schema::object(
        json!({
            "file": {"type": "string", "description": "The memory file's name."},
            "path": {"type": "string", "description": "The memory file in the workspace."},
            "line": {
                "type": "integer",
                "description": "The line where the appended text starts (or, when appended is \
                                false, where the same text already was).",
            },
            "appended": {
                "type": "boolean",
                "description": "false: the file already ended with this text (a repeated call); \
                                nothing was changed.",
            },
            "created": {"type": "boolean", "description": "The file was created by this call."},
            "sha256": {"type": "string", "description": "SHA-256 (hex) of the file now."},
            "previous_sha256": {
                "type": ["string", "null"],
                "description": "SHA-256 (hex) of the file before; null when it was created.",
            },
        }),
        &[
            "file",
            "path",
            "line",
            "appended",
            "created",
            "sha256",
            "previous_sha256",
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(section: Option<&str>, text: &str) -> MemoryAppendArgs {
        MemoryAppendArgs {
            file: None,
            section: section.map(str::to_owned),
            text: text.to_owned(),
        }
    }

    #[test]
    fn blocks_have_a_heading_a_blank_line_and_the_text() {
        assert_eq!(
            block_of(&args(Some(" ## Deploy "), "\nuse make\r\n\n")).ok(),
            Some("## Deploy\n\nuse make\n".to_owned())
        );
        assert_eq!(
            block_of(&args(None, "  indented\n")).ok(),
            Some("  indented\n".to_owned())
        );
        assert!(block_of(&args(None, " \n ")).is_err());
        assert!(block_of(&args(Some("a\nb"), "x")).is_err());
        assert!(block_of(&args(Some("##"), "x")).is_err());
    }
}

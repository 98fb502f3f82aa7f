//! `edit`: replace text in one file, exactly or with whitespace-tolerant
//! fallbacks, keeping the file's line endings and BOM; several edits in one
//! call apply in order and all or none.

mod matching;

use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use toolgate_core::{
    CallContext, EffectClass, Idempotency, ToolError, ToolOutput, ToolSpec, TypedTool,
};

pub use self::matching::Pass;
use crate::facts_schema;
use crate::fs::{Fs, Located, blocking, jail_error};
use crate::text::{self, Decoded, LineEndings, NotText};
use crate::write::check_expected;

/// Lines shown around the closest region when nothing matched.
const CANDIDATE_CONTEXT: usize = 2;

/// One replacement.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditOp {
    /// The text to replace: copy it from the file, with enough surrounding
    /// lines to make it unique.
    pub old_text: String,
    /// What replaces it.
    pub new_text: String,
    /// Replace every occurrence instead of requiring exactly one.
    #[serde(default)]
    pub replace_all: bool,
}

/// Arguments of `edit`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditArgs {
    /// The file, relative to the workspace (or absolute inside it).
    pub path: String,
    /// The text to replace (one edit); use `edits` for several.
    pub old_text: Option<String>,
    /// What replaces `old_text`.
    pub new_text: Option<String>,
    /// With `old_text`: replace every occurrence.
    #[serde(default)]
    pub replace_all: bool,
    /// Several edits, applied in order to the result of the previous one;
    /// if any fails, none is applied.
    pub edits: Option<Vec<EditOp>>,
    /// Return the diff without changing the file.
    #[serde(default)]
    pub dry_run: bool,
    /// Refuse unless the file's current SHA-256 (hex, from read) is this.
    #[schemars(regex(pattern = r"^[0-9a-fA-F]{64}$"))]
    pub expected_sha256: Option<String>,
}

/// The `edit` tool.
pub struct EditTool {
    fs: Arc<Fs>,
}

impl EditTool {
    /// `edit` over `fs`.
    pub fn new(fs: Arc<Fs>) -> EditTool {
        EditTool { fs }
    }
}

#[async_trait]
impl TypedTool for EditTool {
    type Args = EditArgs;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "edit",
            "Change part of a text file: replace old_text (copied from the file, unique in it) \
             with new_text, or pass edits=[{old_text,new_text},...] to make several changes \
             atomically. Fails, changing nothing, when old_text is missing (showing the closest \
             region) or occurs more than once (listing the lines; add context or set \
             replace_all). Tolerates differing trailing whitespace and indentation and says so. \
             Keeps the file's line endings and BOM. Returns the diff; dry_run only previews it. \
             Use write for new files or whole rewrites, apply_patch for several files.",
            EffectClass::MutateReversible,
        )
        .idempotency(Idempotency::CheckBeforeAct)
        .group("group:fs")
        .path_arg("/path")
        .output_schema(facts_schema())
    }

    async fn run(&self, args: EditArgs, _ctx: &CallContext) -> Result<ToolOutput, ToolError> {
        let edits = edits_of(&args)?;
        let place = self.fs.locate(&args.path)?;
        let max = self.fs.limits().max_file_bytes;
        blocking(move || edit(&place, &args, &edits, max)).await
    }
}

fn edits_of(args: &EditArgs) -> Result<Vec<EditOp>, ToolError> {
    let edits = match (&args.old_text, &args.new_text, &args.edits) {
        (Some(old), Some(new), None) => vec![EditOp {
            old_text: old.clone(),
            new_text: new.clone(),
            replace_all: args.replace_all,
        }],
        (None, None, Some(edits)) if !edits.is_empty() => edits.clone(),
        (None, None, Some(_)) => {
            return Err(ToolError::InvalidArguments(
                "edits is empty; give at least one {old_text, new_text}".to_owned(),
            ));
        }
        (Some(_), None, None) | (None, Some(_), None) => {
            return Err(ToolError::InvalidArguments(
                "old_text and new_text go together; give both".to_owned(),
            ));
        }
        (None, None, None) => {
            return Err(ToolError::InvalidArguments(
                "nothing to do: give old_text and new_text, or edits".to_owned(),
            ));
        }
        _ => {
            return Err(ToolError::InvalidArguments(
                "give either old_text/new_text or edits, not both".to_owned(),
            ));
        }
    };
    for (i, edit) in edits.iter().enumerate() {
        let which = label(i, edits.len());
        if edit.old_text.is_empty() {
            return Err(ToolError::InvalidArguments(format!(
                "{which}old_text is empty; to create a file use write, to insert text include \
                 a neighbouring line in old_text and new_text"
            )));
        }
        if edit.old_text == edit.new_text {
            return Err(ToolError::InvalidArguments(format!(
                "{which}old_text and new_text are the same; there is nothing to change"
            )));
        }
    }
    Ok(edits)
}

fn label(i: usize, of: usize) -> String {
    if of > 1 {
        format!("edit {} of {of}: ", i + 1)
    } else {
        String::new()
    }
}

fn edit(
    place: &Located,
    args: &EditArgs,
    edits: &[EditOp],
    max: u64,
) -> Result<ToolOutput, ToolError> {
    let bytes = place.jail.read(&place.rel, max).map_err(jail_error)?;
    let before_sha = text::sha256_hex(&bytes);
    if let Some(expected) = &args.expected_sha256 {
        check_expected(place, Some(&before_sha), expected)?;
    }
    let decoded = Decoded::new(&bytes).map_err(|e| match e {
        NotText::Binary => ToolError::Failed(format!(
            "`{}` is a binary file; edit changes text files only",
            place.shown
        )),
        NotText::Encoding(at) => ToolError::Failed(format!(
            "`{}` is not valid UTF-8 (first bad byte at offset {at}); edit changes UTF-8 text \
             only, use bash (e.g. iconv, sed) for other encodings",
            place.shown
        )),
    })?;
    let mut current = decoded.text.clone();
    let mut applied = Vec::new();
    for (i, op) in edits.iter().enumerate() {
        let which = label(i, edits.len());
        // The model may send CRLF copied from a CRLF file; the decoded text
        // uses LF there.
        let (old, new) = if decoded.endings == LineEndings::Crlf {
            (
                op.old_text.replace("\r\n", "\n"),
                op.new_text.replace("\r\n", "\n"),
            )
        } else {
            (op.old_text.clone(), op.new_text.clone())
        };
        let Some(found) = matching::find(&current, &old, &new) else {
            return Err(no_match(place, &current, &old, &which));
        };
        let lines: Vec<usize> = found
            .ranges
            .iter()
            .map(|r| matching::line_number(&current, r.start))
            .collect();
        if found.ranges.len() > 1 && !op.replace_all {
            return Err(ToolError::Failed(format!(
                "{which}old_text occurs {} times in `{}` ({}), at lines {}; include more \
                 surrounding lines to make it unique, or set replace_all to change every one",
                found.ranges.len(),
                place.shown,
                found.pass.describe(),
                join(&lines)
            )));
        }
        for (range, replacement) in found.ranges.iter().zip(&found.replacements).rev() {
            current.replace_range(range.clone(), replacement);
        }
        applied.push((found.pass, lines));
    }
    let diff = text::unified_diff(&place.shown, &decoded.text, &current);
    let (added, removed) = text::diff_stat(&diff);
    let new_bytes = decoded.encode(&current);
    if new_bytes.len() as u64 > max {
        return Err(ToolError::Failed(format!(
            "the edited `{}` would be {} bytes, over the limit of {max} bytes per file; \
             nothing was changed",
            place.shown,
            new_bytes.len()
        )));
    }
    if !args.dry_run {
        place
            .jail
            .write(&place.rel, &new_bytes)
            .map_err(jail_error)?;
    }
    let replacements: usize = applied.iter().map(|(_, lines)| lines.len()).sum();
    let mut text = format!(
        "{} `{}`: {replacements} replacement(s), +{added} -{removed} lines.\n",
        if args.dry_run { "Would edit" } else { "Edited" },
        place.shown
    );
    for (i, (pass, _)) in applied.iter().enumerate() {
        if *pass != Pass::Exact {
            text.push_str(&format!(
                "[{}old_text {}]\n",
                label(i, edits.len()),
                pass.describe()
            ));
        }
    }
    let edits_json: Vec<_> = applied
        .iter()
        .map(|(pass, lines)| json!({"pass": pass, "replacements": lines.len(), "lines": lines}))
        .collect();
    if decoded.endings == LineEndings::Crlf {
        text.push_str("[CRLF line endings kept]\n");
    }
    text.push_str(&diff);
    Ok(ToolOutput::text(text).with_structured(json!({
        "path": place.shown,
        "dry_run": args.dry_run,
        "edits": edits_json,
        "replacements": replacements,
        "lines_added": added,
        "lines_removed": removed,
        "diff": diff,
        "line_endings": decoded.endings.as_str(),
        "bom": decoded.bom,
        "previous_sha256": before_sha,
        "sha256": text::sha256_hex(&new_bytes),
    })))
}

/// The facts of [`edit`].
fn facts_schema() -> Value {
    let edit = facts_schema::object(
        json!({
            "pass": {
                "enum": ["exact", "trailing-whitespace", "indentation"],
                "description": "How old_text was found: exactly, ignoring whitespace at line \
                                ends, or ignoring indentation (new_text was re-indented).",
            },
            "replacements": {"type": "integer", "description": "Occurrences replaced."},
            "lines": {
                "type": "array",
                "items": {"type": "integer"},
                "description": "The line of each occurrence, in the text this edit applied to.",
            },
        }),
        &["pass", "replacements", "lines"],
    );
    facts_schema::object(
        json!({
            "path": {"type": "string", "description": "The file, as the workspace shows it."},
            "dry_run": {
                "type": "boolean",
                "description": "The file was not changed; the facts say what the edit would do.",
            },
            "edits": {
                "type": "array",
                "items": edit,
                "description": "Each edit, in the order they were applied.",
            },
            "replacements": {"type": "integer", "description": "Occurrences replaced in all."},
            "lines_added": {"type": "integer", "description": "Lines added (the diff's + lines)."},
            "lines_removed": {
                "type": "integer",
                "description": "Lines removed (the diff's - lines).",
            },
            "diff": {"type": "string", "description": "Unified diff of the change."},
            "line_endings": {
                "enum": ["lf", "crlf", "mixed", "none"],
                "description": "The file's line endings, which the edit kept.",
            },
            "bom": {
                "type": "boolean",
                "description": "The file starts with a UTF-8 byte-order mark, which the edit kept.",
            },
            "previous_sha256": {
                "type": "string",
                "description": "SHA-256 (hex) of the file before the edit.",
            },
            "sha256": {
                "type": "string",
                "description": "SHA-256 (hex) of the file after the edit (with dry_run: what it \
                                would be), the expected_sha256 of a later edit.",
            },
        }),
        &[
            "path",
            "dry_run",
            "edits",
            "replacements",
            "lines_added",
            "lines_removed",
            "diff",
            "line_endings",
            "bom",
            "previous_sha256",
            "sha256",
        ],
    )
}

fn join(lines: &[usize]) -> String {
    let shown: Vec<String> = lines.iter().take(20).map(ToString::to_string).collect();
    let more = lines.len().saturating_sub(20);
    if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}

fn no_match(place: &Located, current: &str, old: &str, which: &str) -> ToolError {
    let mut message = format!(
        "{which}old_text was not found in `{}`, not even ignoring whitespace; nothing was \
         changed. Read the file again and copy old_text from it exactly.",
        place.shown
    );
    if let Some((first, last)) = matching::closest(current, old) {
        let lines: Vec<&str> = current.lines().collect();
        let from = first.saturating_sub(CANDIDATE_CONTEXT).max(1);
        let to = (last + CANDIDATE_CONTEXT).min(lines.len());
        message.push_str(&format!("\nThe closest region is lines {first}-{last}:\n"));
        for n in from..=to {
            let line = text::cut_line(lines[n - 1], 300);
            message.push_str(&format!("{n:>6}\t{line}\n"));
        }
    }
    ToolError::Failed(message)
}

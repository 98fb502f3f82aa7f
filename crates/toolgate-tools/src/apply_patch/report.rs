//! What `apply_patch` answers: a summary, the operations, the mode changes
//! and the diffs as text, and the same facts as JSON ([`facts_schema`]).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::{Value, json};
use toolgate_core::ToolOutput;

use super::{ModeChange, Plan};
use crate::facts_schema;
use crate::patch::MatchPass;
use crate::text;

/// Permission bits as `chmod` writes them.
fn octal(mode: u32) -> String {
    format!("{mode:04o}")
}

impl Plan {
    pub(super) fn render(
        &self,
        dry_run: bool,
        modes: &BTreeMap<PathBuf, ModeChange>,
    ) -> ToolOutput {
        let mut text = String::new();
        let mut diffs = String::new();
        let mut mode_lines = String::new();
        let mut files = Vec::new();
        let (mut added, mut removed) = (0, 0);
        for (key, slot) in &self.slots {
            let before = slot.before.as_deref().map(String::from_utf8_lossy);
            let after = slot.after.as_deref().map(String::from_utf8_lossy);
            let mode = modes.get(key);
            if before == after && mode.is_none() {
                continue;
            }
            let (a, r) = if before == after {
                (0, 0)
            } else {
                let diff = text::unified_diff(
                    &slot.place.shown,
                    before.as_deref().unwrap_or(""),
                    after.as_deref().unwrap_or(""),
                );
                diffs.push_str(&diff);
                text::diff_stat(&diff)
            };
            added += a;
            removed += r;
            let mut file = json!({
                "path": slot.place.shown,
                "status": match (&slot.before, &slot.after) {
                    (None, _) => "added",
                    (_, None) => "deleted",
                    _ => "modified",
                },
                "lines_added": a,
                "lines_removed": r,
            });
            if let Some(change) = mode {
                let before = change.before.map(octal);
                let after = octal(change.after);
                mode_lines.push_str(&match &before {
                    Some(old) => format!("mode {}: {old} -> {after}\n", slot.place.shown),
                    None => format!("mode {}: {after}\n", slot.place.shown),
                });
                file["mode"] = json!({"before": before, "after": after});
            }
            files.push(file);
        }
        let verb = if dry_run { "Would apply" } else { "Applied" };
        text.push_str(&format!(
            "{verb} the patch: {} file(s) changed, +{added} -{removed} lines.\n",
            files.len()
        ));
        let mut operations = Vec::new();
        for report in &self.reports {
            let name = match &report.to {
                Some(to) => format!("{} -> {to}", report.path),
                None => report.path.clone(),
            };
            let asked = report.mode.map(|m| format!(" (mode {})", m.as_git()));
            text.push_str(&format!(
                "{} {name}{}\n",
                report.action,
                asked.unwrap_or_default()
            ));
            for (i, pass) in report.passes.iter().enumerate() {
                if *pass != MatchPass::Exact {
                    text.push_str(&format!("  [hunk {} matched {pass}]\n", i + 1));
                }
            }
            operations.push(json!({
                "action": report.action,
                "path": report.path,
                "move_to": report.to,
                "hunks": report.passes.iter().map(|p| p.as_str()).collect::<Vec<_>>(),
                "mode": report.mode.map(|m| m.as_git()),
            }));
        }
        text.push_str(&mode_lines);
        text.push_str(&diffs);
        ToolOutput::text(text).with_structured(json!({
            "dry_run": dry_run,
            "operations": operations,
            "files": files,
            "lines_added": added,
            "lines_removed": removed,
        }))
    }
}

/// The facts of [`Plan::render`].
pub(super) fn facts_schema() -> Value {
    let operation = facts_schema::object(
        json!({
            "action": {
                "enum": ["add", "delete", "update", "move"],
                "description": "What the patch did to the file.",
            },
            "path": {"type": "string", "description": "The file, as the patch names it."},
            "move_to": {
                "type": ["string", "null"],
                "description": "move: where the file went, as the patch names it; else null.",
            },
            "hunks": {
                "type": "array",
                "items": {"enum": ["exact", "trailing-whitespace", "trimmed", "unicode-folded"]},
                "description": "How each hunk's context was found: exactly, or ignoring \
                                trailing whitespace, surrounding whitespace or Unicode \
                                punctuation look-alikes.",
            },
            "mode": {
                "enum": ["100644", "100755", null],
                "description": "The mode a git diff gave the file (`new mode`, `new file \
                                mode`): 100755 executable, 100644 not; null when it gave \
                                none.",
            },
        }),
        &["action", "path", "move_to", "hunks", "mode"],
    );
    let mut mode = facts_schema::object(
        json!({
            "before": {
                "type": ["string", "null"],
                "description": "The permission bits before, in octal (\"0644\"); null for a \
                                new file.",
            },
            "after": {"type": "string", "description": "The permission bits after (\"0755\")."},
        }),
        &["before", "after"],
    );
    mode["description"] = json!("Present when the patch changes the file's permission bits.");
    let file = facts_schema::object(
        json!({
            "path": {"type": "string", "description": "The file, as the workspace shows it."},
            "status": {"enum": ["added", "deleted", "modified"]},
            "lines_added": {"type": "integer"},
            "lines_removed": {"type": "integer"},
            "mode": mode,
        }),
        &["path", "status", "lines_added", "lines_removed"],
    );
    facts_schema::object(
        json!({
            "dry_run": {
                "type": "boolean",
                "description": "No file was changed; the facts say what the patch would do.",
            },
            "operations": {
                "type": "array",
                "items": operation,
                "description": "The patch's file operations, in order.",
            },
            "files": {
                "type": "array",
                "items": file,
                "description": "Every file whose content or permission bits changed (a moved \
                                file counts as one deleted and one added), by path.",
            },
            "lines_added": {"type": "integer", "description": "Lines added in all files."},
            "lines_removed": {"type": "integer", "description": "Lines removed in all files."},
        }),
        &[
            "dry_run",
            "operations",
            "files",
            "lines_added",
            "lines_removed",
        ],
    )
}

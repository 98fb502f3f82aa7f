//! `apply_patch`: changes to several files in one call, all or none.
//!
//! The patch is parsed ([`crate::patch`]), then its operations run in order
//! against a virtual copy of the files they touch (so a later operation sees
//! an earlier one's result and every hunk is checked before anything is
//! written), then the final state is committed with an undo log
//! ([`crate::patch::commit`]).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use toolgate_core::{
    CallContext, EffectClass, Idempotency, ToolError, ToolOutput, ToolSpec, TypedTool,
};
use toolgate_sandbox::JailError;

use crate::facts_schema;
use crate::fs::{Fs, Located, blocking, jail_error};
use crate::patch::commit::{Change, Target, commit};
use crate::patch::{FileOp, MatchPass, PatchError, apply_hunks, parse};
use crate::text;

/// Arguments of `apply_patch`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApplyPatchArgs {
    /// The patch: the `*** Begin Patch` format or a unified diff. Paths are
    /// relative to the workspace.
    pub patch: String,
    /// Check the patch and return the diffs without changing any file.
    #[serde(default)]
    pub dry_run: bool,
}

/// The `apply_patch` tool.
pub struct ApplyPatchTool {
    fs: Arc<Fs>,
}

impl ApplyPatchTool {
    /// `apply_patch` over `fs`.
    pub fn new(fs: Arc<Fs>) -> ApplyPatchTool {
        ApplyPatchTool { fs }
    }
}

const DESCRIPTION: &str = "Change several files in one atomic call: every file changes or none \
does. Accepts the `*** Begin Patch` format (*** Add File: / *** Delete File: / *** Update File: \
with optional *** Move to:, `@@` hunks of ' ' context, '-' removed and '+' added lines, \
*** End of File, *** End Patch) and unified diffs (--- a/x, +++ b/x, @@ -l,s +l,s @@). Hunks \
are found by their context lines (exact first, then tolerating whitespace and Unicode \
punctuation); give 3 lines of context, and an `@@ fn name` line to pick among repeats. Paths \
are relative to the workspace. Returns the diff of every file; dry_run only checks. For one \
change in one file, edit is simpler.";

#[async_trait]
impl TypedTool for ApplyPatchTool {
    type Args = ApplyPatchArgs;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new("apply_patch", DESCRIPTION, EffectClass::MutateReversible)
            .idempotency(Idempotency::CheckBeforeAct)
            .group("group:fs")
            .output_schema(facts_schema())
    }

    async fn run(&self, args: ApplyPatchArgs, _ctx: &CallContext) -> Result<ToolOutput, ToolError> {
        let patch = parse(&args.patch).map_err(|e| ToolError::Failed(e.to_string()))?;
        let fs = self.fs.clone();
        blocking(move || {
            let plan = Plan::build(&fs, &patch.ops)?;
            plan.finish(args.dry_run, fs.limits().max_file_bytes)
        })
        .await
    }

    /// The paths in the patch's file headers, for the path layer. A patch
    /// that does not parse names none; running it reports the parse error.
    fn embedded_paths(&self, args: &Value) -> Result<Vec<String>, String> {
        let Some(text) = args.get("patch").and_then(Value::as_str) else {
            return Ok(Vec::new());
        };
        let Ok(patch) = parse(text) else {
            // The patch does not parse (running it says why), but the path
            // layer still sees every path its headers name, so a denied
            // path is refused as such (`~/.ssh/...` is a policy matter
            // before it is a syntax one).
            return Ok(header_paths(text));
        };
        let mut paths = Vec::new();
        for op in &patch.ops {
            paths.push(op.path().to_owned());
            if let FileOp::Update {
                move_to: Some(to), ..
            } = op
            {
                paths.push(to.clone());
            }
        }
        Ok(paths)
    }
}

/// The paths named by the file headers of a patch, as written.
fn header_paths(text: &str) -> Vec<String> {
    const HEADERS: [&str; 8] = [
        "*** Add File:",
        "*** Delete File:",
        "*** Update File:",
        "*** Move to:",
        "--- ",
        "+++ ",
        "rename from ",
        "rename to ",
    ];
    let mut paths = Vec::new();
    for line in text.lines() {
        let Some(rest) = HEADERS.iter().find_map(|h| line.strip_prefix(h)) else {
            continue;
        };
        // `--- a/x\t2024-01-01 ...`: the path ends at a tab.
        let path = rest.split('\t').next().unwrap_or_default().trim();
        let path = path
            .strip_prefix("a/")
            .or_else(|| path.strip_prefix("b/"))
            .unwrap_or(path);
        if !path.is_empty() && path != "/dev/null" {
            paths.push(path.to_owned());
        }
    }
    paths
}

/// One file's before and after in the virtual tree.
struct Slot {
    place: Located,
    /// On disk before the patch (`None`: absent).
    before: Option<Vec<u8>>,
    /// After the operations so far (`None`: absent).
    after: Option<Vec<u8>>,
    /// The slot whose file was moved here.
    moved_from: Option<PathBuf>,
}

/// What the operations did, per file, for the report.
struct Report {
    action: &'static str,
    path: String,
    to: Option<String>,
    passes: Vec<MatchPass>,
}

struct Plan {
    slots: BTreeMap<PathBuf, Slot>,
    reports: Vec<Report>,
}

impl Plan {
    fn build(fs: &Fs, ops: &[FileOp]) -> Result<Plan, ToolError> {
        let mut plan = Plan {
            slots: BTreeMap::new(),
            reports: Vec::new(),
        };
        let max = fs.limits().max_file_bytes;
        for op in ops {
            match op {
                FileOp::Add { path, content } => {
                    let key = plan.load(fs, path, max)?;
                    let slot = plan.slots.get_mut(&key).ok_or_else(lost)?;
                    if slot.after.is_some() {
                        return Err(failed(PatchError::AlreadyExists { path: path.clone() }));
                    }
                    slot.after = Some(content.clone().into_bytes());
                    plan.report("add", path, None, Vec::new());
                }
                FileOp::Delete { path } => {
                    let key = plan.load(fs, path, max)?;
                    let slot = plan.slots.get_mut(&key).ok_or_else(lost)?;
                    if slot.after.take().is_none() {
                        return Err(failed(PatchError::NotFound {
                            path: path.clone(),
                            action: "delete".to_owned(),
                        }));
                    }
                    plan.report("delete", path, None, Vec::new());
                }
                FileOp::Update {
                    path,
                    move_to,
                    hunks,
                } => plan.update(fs, path, move_to.as_deref(), hunks, max)?,
            }
        }
        Ok(plan)
    }

    fn update(
        &mut self,
        fs: &Fs,
        path: &str,
        move_to: Option<&str>,
        hunks: &[crate::patch::Hunk],
        max: u64,
    ) -> Result<(), ToolError> {
        let key = self.load(fs, path, max)?;
        let slot = self.slots.get(&key).ok_or_else(lost)?;
        let Some(current) = &slot.after else {
            return Err(failed(PatchError::NotFound {
                path: path.to_owned(),
                action: "update".to_owned(),
            }));
        };
        let current = std::str::from_utf8(current).map_err(|_| {
            failed(PatchError::NotText {
                path: path.to_owned(),
            })
        })?;
        let applied = if hunks.is_empty() {
            crate::patch::Applied {
                text: current.to_owned(),
                passes: Vec::new(),
            }
        } else {
            apply_hunks(path, current, hunks).map_err(failed)?
        };
        let new = applied.text.into_bytes();
        match move_to.filter(|to| *to != path) {
            None => {
                self.slots.get_mut(&key).ok_or_else(lost)?.after = Some(new);
                self.report("update", path, None, applied.passes);
            }
            Some(to) => {
                let dest = self.load(fs, to, max)?;
                if self.slots.get(&dest).ok_or_else(lost)?.after.is_some() {
                    return Err(failed(PatchError::MoveDestinationExists {
                        path: path.to_owned(),
                        to: to.to_owned(),
                    }));
                }
                self.slots.get_mut(&key).ok_or_else(lost)?.after = None;
                let dest_slot = self.slots.get_mut(&dest).ok_or_else(lost)?;
                dest_slot.after = Some(new);
                dest_slot.moved_from = Some(key);
                self.report("move", path, Some(to), applied.passes);
            }
        }
        Ok(())
    }

    /// Makes sure `path` has a slot, reading it from disk the first time.
    fn load(&mut self, fs: &Fs, path: &str, max: u64) -> Result<PathBuf, ToolError> {
        let place = fs.locate(path)?;
        let key = place.jail.root().join(&place.rel);
        if self.slots.contains_key(&key) {
            return Ok(key);
        }
        let before = match place.jail.read(&place.rel, max) {
            Ok(bytes) => Some(bytes),
            // A parent that is a file: nothing there; writing it will fail
            // and roll everything back.
            Err(JailError::NotFound { .. } | JailError::NotADirectory { .. }) => None,
            Err(JailError::IsADirectory { .. }) => {
                return Err(ToolError::Failed(format!(
                    "{path}: is a directory; apply_patch changes files only"
                )));
            }
            Err(e) => return Err(jail_error(e)),
        };
        self.slots.insert(
            key.clone(),
            Slot {
                place,
                after: before.clone(),
                before,
                moved_from: None,
            },
        );
        Ok(key)
    }

    fn report(
        &mut self,
        action: &'static str,
        path: &str,
        to: Option<&str>,
        passes: Vec<MatchPass>,
    ) {
        self.reports.push(Report {
            action,
            path: path.to_owned(),
            to: to.map(str::to_owned),
            passes,
        });
    }

    /// The changes to commit, in a stable order.
    fn changes(&self) -> Vec<Change> {
        let target = |slot: &Slot| Target {
            jail: slot.place.jail.clone(),
            rel: slot.place.rel.clone(),
            shown: slot.place.shown.clone(),
        };
        let mut changes = Vec::new();
        let mut moved_away: Vec<PathBuf> = Vec::new();
        for slot in self.slots.values() {
            let Some(bytes) = &slot.after else { continue };
            // A move within one root that empties its source keeps the
            // file itself (and so its mode); otherwise it is a new file.
            let source = slot.moved_from.as_ref().and_then(|key| {
                let from = self.slots.get(key)?;
                let movable = from.after.is_none()
                    && from.before.is_some()
                    && Arc::ptr_eq(&from.place.jail, &slot.place.jail);
                movable.then_some((key, from))
            });
            match source {
                Some((key, from)) if slot.before.is_none() && !moved_away.contains(key) => {
                    moved_away.push(key.clone());
                    changes.push(Change::Move {
                        from: target(from),
                        to: target(slot),
                        bytes: bytes.clone(),
                    });
                }
                _ if slot.before.as_ref() != Some(bytes) => {
                    changes.push(Change::Write(target(slot), bytes.clone()));
                }
                _ => {}
            }
        }
        for (key, slot) in &self.slots {
            if slot.after.is_none() && slot.before.is_some() && !moved_away.contains(key) {
                changes.push(Change::Remove(target(slot)));
            }
        }
        changes
    }

    fn finish(self, dry_run: bool, max: u64) -> Result<ToolOutput, ToolError> {
        for slot in self.slots.values() {
            // Every file the patch changes is checked before anything is
            // written (a dry run answers like the real one): a protected
            // entry refused halfway would leave its new parents behind.
            if slot.before != slot.after {
                slot.place
                    .jail
                    .check_writable(&slot.place.rel)
                    .map_err(|e| {
                        ToolError::Failed(format!(
                            "{e}; the patch was not applied and no file was changed"
                        ))
                    })?;
            }
            if let Some(bytes) = &slot.after
                && bytes.len() as u64 > max
            {
                return Err(ToolError::Failed(format!(
                    "{}: the patched file would be {} bytes, over the limit of {max} bytes per \
                     file; the patch was not applied and no file was changed",
                    slot.place.shown,
                    bytes.len()
                )));
            }
        }
        let changes = self.changes();
        if !dry_run {
            commit(&changes).map_err(|e| {
                let mut message = format!(
                    "{}: {}; the patch was not applied and every file is as it was",
                    e.shown, e.error
                );
                if !e.unrestored.is_empty() {
                    message = format!(
                        "{}: {}; rolling back failed for: {}",
                        e.shown,
                        e.error,
                        e.unrestored.join("; ")
                    );
                }
                ToolError::Failed(message)
            })?;
        }
        Ok(self.render(dry_run))
    }

    fn render(&self, dry_run: bool) -> ToolOutput {
        let mut text = String::new();
        let mut diffs = String::new();
        let mut files = Vec::new();
        let (mut added, mut removed) = (0, 0);
        for slot in self.slots.values() {
            let before = slot.before.as_deref().map(String::from_utf8_lossy);
            let after = slot.after.as_deref().map(String::from_utf8_lossy);
            if before == after {
                continue;
            }
            let diff = text::unified_diff(
                &slot.place.shown,
                before.as_deref().unwrap_or(""),
                after.as_deref().unwrap_or(""),
            );
            let (a, r) = text::diff_stat(&diff);
            added += a;
            removed += r;
            diffs.push_str(&diff);
            files.push(json!({
                "path": slot.place.shown,
                "status": match (&slot.before, &slot.after) {
                    (None, _) => "added",
                    (_, None) => "deleted",
                    _ => "modified",
                },
                "lines_added": a,
                "lines_removed": r,
            }));
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
            text.push_str(&format!("{} {name}\n", report.action));
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
            }));
        }
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
fn facts_schema() -> Value {
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
        }),
        &["action", "path", "move_to", "hunks"],
    );
    let file = facts_schema::object(
        json!({
            "path": {"type": "string", "description": "The file, as the workspace shows it."},
            "status": {"enum": ["added", "deleted", "modified"]},
            "lines_added": {"type": "integer"},
            "lines_removed": {"type": "integer"},
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
                "description": "Every file whose content changed (a moved file counts as one \
                                deleted and one added), by path.",
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

fn failed(e: PatchError) -> ToolError {
    ToolError::Failed(format!(
        "{e}; the patch was not applied and no file was changed"
    ))
}

fn lost() -> ToolError {
    ToolError::Failed("internal error: a file of the patch was lost from the plan".to_owned())
}

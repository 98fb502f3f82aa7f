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
use serde_json::Value;
use toolgate_core::{
    CallContext, EffectClass, Idempotency, ToolError, ToolOutput, ToolSpec, TypedTool,
};
use toolgate_sandbox::JailError;

use crate::fs::{Fs, Located, blocking, jail_error};
use crate::patch::commit::{Change, Target, commit, open_for_mode};
use crate::patch::mode::creation_mode;
use crate::patch::{FileMode, FileOp, MatchPass, PatchError, apply_hunks, parse};

mod report;

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
*** End of File, *** End Patch) and unified diffs (--- a/x, +++ b/x, @@ -l,s +l,s @@; git's \
renames and modes: old mode 100644 / new mode 100755 makes a file executable). Hunks \
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
            .output_schema(report::facts_schema())
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
    /// The permission bits on disk before the patch (`None`: absent).
    before_mode: Option<u32>,
    /// The mode a git diff gives the file here (`None`: not changed).
    mode: Option<FileMode>,
}

impl Slot {
    fn target(&self) -> Target {
        Target {
            jail: self.place.jail.clone(),
            rel: self.place.rel.clone(),
            shown: self.place.shown.clone(),
        }
    }
}

/// What the operations did, per file, for the report.
struct Report {
    action: &'static str,
    path: String,
    to: Option<String>,
    passes: Vec<MatchPass>,
    /// The mode the operation asked for.
    mode: Option<FileMode>,
}

/// A file whose permission bits the patch changes.
struct ModeChange {
    /// `None`: the file is new.
    before: Option<u32>,
    after: u32,
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
                FileOp::Add {
                    path,
                    content,
                    mode,
                } => {
                    let key = plan.load(fs, path, max)?;
                    let slot = plan.slots.get_mut(&key).ok_or_else(lost)?;
                    if slot.after.is_some() {
                        return Err(failed(PatchError::AlreadyExists { path: path.clone() }));
                    }
                    slot.after = Some(content.clone().into_bytes());
                    slot.mode = *mode;
                    plan.report("add", path, None, Vec::new(), *mode);
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
                    slot.mode = None;
                    plan.report("delete", path, None, Vec::new(), None);
                }
                FileOp::Update {
                    path,
                    move_to,
                    hunks,
                    mode,
                } => plan.update(fs, path, move_to.as_deref(), hunks, *mode, max)?,
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
        mode: Option<FileMode>,
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
                let slot = self.slots.get_mut(&key).ok_or_else(lost)?;
                slot.after = Some(new);
                slot.mode = mode.or(slot.mode);
                self.report("update", path, None, applied.passes, mode);
            }
            Some(to) => {
                let dest = self.load(fs, to, max)?;
                if self.slots.get(&dest).ok_or_else(lost)?.after.is_some() {
                    return Err(failed(PatchError::MoveDestinationExists {
                        path: path.to_owned(),
                        to: to.to_owned(),
                    }));
                }
                let source = self.slots.get_mut(&key).ok_or_else(lost)?;
                source.after = None;
                // A mode an earlier operation gave the file goes with it.
                let carried = source.mode.take();
                let dest_slot = self.slots.get_mut(&dest).ok_or_else(lost)?;
                dest_slot.after = Some(new);
                dest_slot.moved_from = Some(key);
                dest_slot.mode = mode.or(carried);
                self.report("move", path, Some(to), applied.passes, mode);
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
        let before_mode = match before {
            Some(_) => place.jail.stat(&place.rel).ok().map(|s| s.mode & 0o7777),
            None => None,
        };
        self.slots.insert(
            key.clone(),
            Slot {
                place,
                after: before.clone(),
                before,
                moved_from: None,
                before_mode,
                mode: None,
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
        mode: Option<FileMode>,
    ) {
        self.reports.push(Report {
            action,
            path: path.to_owned(),
            to: to.map(str::to_owned),
            passes,
            mode,
        });
    }

    /// The changes to commit, in a stable order, and the files whose
    /// permission bits they change.
    fn changes(&self) -> (Vec<Change>, BTreeMap<PathBuf, ModeChange>) {
        let target = Slot::target;
        let mut changes = Vec::new();
        let mut modes = BTreeMap::new();
        let mut mode_changes = Vec::new();
        let mut moved_away: Vec<PathBuf> = Vec::new();
        for (key, slot) in &self.slots {
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
            // The mode the file has once its content is in place: a
            // rewrite keeps it, a move brings the source's, a new file gets
            // the jail's default.
            let had = match source {
                Some((from_key, from))
                    if slot.before.is_none() && !moved_away.contains(from_key) =>
                {
                    moved_away.push(from_key.clone());
                    changes.push(Change::Move {
                        from: target(from),
                        to: target(slot),
                        bytes: bytes.clone(),
                    });
                    from.before_mode
                }
                _ if slot.before.as_ref() != Some(bytes) => {
                    changes.push(Change::Write(target(slot), bytes.clone()));
                    slot.before.as_ref().and(slot.before_mode)
                }
                _ => slot.before_mode,
            };
            if let Some(mode) = slot.mode {
                let current = had.unwrap_or_else(creation_mode);
                let after = mode.apply(current);
                if after != current {
                    mode_changes.push(Change::Mode(target(slot), mode));
                    modes.insert(key.clone(), ModeChange { before: had, after });
                }
            }
        }
        for (key, slot) in &self.slots {
            if slot.after.is_none() && slot.before.is_some() && !moved_away.contains(key) {
                changes.push(Change::Remove(target(slot)));
            }
        }
        changes.extend(mode_changes);
        (changes, modes)
    }

    fn finish(self, dry_run: bool, max: u64) -> Result<ToolOutput, ToolError> {
        let (changes, modes) = self.changes();
        let unchanged = "the patch was not applied and no file was changed";
        for (key, slot) in &self.slots {
            // Every file the patch changes is checked before anything is
            // written (a dry run answers like the real one): a protected
            // entry refused halfway would leave its new parents behind.
            if slot.before != slot.after || modes.contains_key(key) {
                slot.place
                    .jail
                    .check_writable(&slot.place.rel)
                    .map_err(|e| ToolError::Failed(format!("{e}; {unchanged}")))?;
            }
            // A file whose mode alone changes, in place: where it really is
            // and how many names it has (see `open_for_mode`). A rewritten
            // or moved one is checked where the commit sets its mode.
            if modes.contains_key(key) && slot.before.is_some() && slot.before == slot.after {
                open_for_mode(&slot.target()).map_err(|e| {
                    ToolError::Failed(format!("{}: {e}; {unchanged}", slot.place.shown))
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
        Ok(self.render(dry_run, &modes))
    }
}

fn failed(e: PatchError) -> ToolError {
    ToolError::Failed(format!(
        "{e}; the patch was not applied and no file was changed"
    ))
}

fn lost() -> ToolError {
    ToolError::Failed("internal error: a file of the patch was lost from the plan".to_owned())
}

//! Putting a planned patch on disk all or nothing.
//!
//! Every step that changes the tree pushes its undo first; on any failure
//! the undo log runs backwards, so the tree ends byte-identical to how it
//! started (modes included: files are restored in place, and removed files
//! are renamed aside to a hidden backup rather than deleted until the end).
//!
//! What it cannot promise: a crash of this process in the middle leaves the
//! hidden backups (`.name.toolgate-backup-*`) next to the files they belong to.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use toolgate_sandbox::{Jail, JailError};

static BACKUP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A file in one root.
#[derive(Clone)]
pub(crate) struct Target {
    pub jail: Arc<Jail>,
    pub rel: PathBuf,
    /// For messages.
    pub shown: String,
}

/// What the patch does to one path, in final form.
pub(crate) enum Change {
    /// Write these bytes (creating or replacing the file).
    Write(Target, Vec<u8>),
    /// The file goes away.
    Remove(Target),
    /// The file moves (keeping its mode), then gets these bytes.
    Move {
        from: Target,
        to: Target,
        bytes: Vec<u8>,
    },
}

enum Undo {
    /// Put these bytes back (the file existed).
    Restore(Target, Vec<u8>),
    /// Remove what the patch created.
    Delete(Target),
    /// Remove a directory the patch created (only if still empty).
    DeleteDir(Target),
    /// Rename back.
    Rename { now: Target, back_to: Target },
}

/// A failed commit: the error, after the tree was restored.
pub(crate) struct CommitError {
    pub shown: String,
    pub error: JailError,
    /// Undo steps that failed themselves (the tree may differ there).
    pub unrestored: Vec<String>,
}

/// Applies `changes`: removals and moves aside first, then writes; on
/// failure everything done so far is undone.
pub(crate) fn commit(changes: &[Change]) -> Result<(), CommitError> {
    let mut undo: Vec<Undo> = Vec::new();
    let mut backups: Vec<Target> = Vec::new();
    let result = run(changes, &mut undo, &mut backups);
    match result {
        Ok(()) => {
            for backup in backups {
                // Best effort: the change itself is complete.
                let _ = backup.jail.remove(&backup.rel);
            }
            Ok(())
        }
        Err((shown, error)) => {
            let unrestored = roll_back(undo);
            Err(CommitError {
                shown,
                error,
                unrestored,
            })
        }
    }
}

type Step = Result<(), (String, JailError)>;

fn run(changes: &[Change], undo: &mut Vec<Undo>, backups: &mut Vec<Target>) -> Step {
    // 1. Everything that leaves its place is renamed aside, so a later
    //    write may reuse the name and a rollback can rename it back.
    let mut aside: Vec<(usize, Target)> = Vec::new();
    for (i, change) in changes.iter().enumerate() {
        let leaving = match change {
            Change::Remove(t) => t,
            Change::Move { from, .. } => from,
            Change::Write(..) => continue,
        };
        let backup = backup_of(leaving);
        at(leaving, leaving.jail.rename(&leaving.rel, &backup.rel))?;
        undo.push(Undo::Rename {
            now: backup.clone(),
            back_to: leaving.clone(),
        });
        aside.push((i, backup));
    }
    // 2. Moves land, then every new content is written.
    for (i, change) in changes.iter().enumerate() {
        match change {
            Change::Remove(_) => {}
            Change::Move { to, bytes, .. } => {
                let Some((_, backup)) = aside.iter().find(|(j, _)| *j == i) else {
                    continue;
                };
                create_parents(to, undo)?;
                at(to, to.jail.rename(&backup.rel, &to.rel))?;
                undo.push(Undo::Rename {
                    now: to.clone(),
                    back_to: backup.clone(),
                });
                write(to, bytes, undo)?;
            }
            Change::Write(target, bytes) => {
                create_parents(target, undo)?;
                write(target, bytes, undo)?;
            }
        }
    }
    for (i, backup) in aside {
        if matches!(changes[i], Change::Remove(_)) {
            backups.push(backup);
        }
    }
    Ok(())
}

fn at(target: &Target, result: Result<(), JailError>) -> Step {
    result.map_err(|e| (target.shown.clone(), e))
}

/// Writes `bytes` to `target`, remembering how to undo it. An unchanged
/// file is not rewritten.
fn write(target: &Target, bytes: &[u8], undo: &mut Vec<Undo>) -> Step {
    match target.jail.read(&target.rel, u64::MAX) {
        Ok(old) if old == bytes => Ok(()),
        Ok(old) => {
            at(target, target.jail.write(&target.rel, bytes))?;
            undo.push(Undo::Restore(target.clone(), old));
            Ok(())
        }
        Err(JailError::NotFound { .. }) => {
            at(target, target.jail.create_new(&target.rel, bytes))?;
            undo.push(Undo::Delete(target.clone()));
            Ok(())
        }
        Err(e) => Err((target.shown.clone(), e)),
    }
}

/// Creates the missing parents of `target` one by one, remembering each.
fn create_parents(target: &Target, undo: &mut Vec<Undo>) -> Step {
    let mut missing: Vec<PathBuf> = Vec::new();
    let mut parent = target.rel.parent();
    while let Some(dir) = parent.filter(|d| !d.as_os_str().is_empty()) {
        match target.jail.stat(dir) {
            Ok(_) => break,
            Err(JailError::NotFound { .. }) => missing.push(dir.to_owned()),
            // A file where a directory should be: the write reports it.
            Err(_) => break,
        }
        parent = dir.parent();
    }
    for dir in missing.into_iter().rev() {
        let sibling = Target {
            jail: target.jail.clone(),
            shown: dir.display().to_string(),
            rel: dir,
        };
        at(&sibling, sibling.jail.mkdir_all(&sibling.rel))?;
        undo.push(Undo::DeleteDir(sibling));
    }
    Ok(())
}

fn backup_of(target: &Target) -> Target {
    let name = target
        .rel
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let short: String = name.chars().take(96).collect();
    let n = BACKUP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let backup = format!(".{short}.toolgate-backup-{}-{n}", std::process::id());
    let rel = target
        .rel
        .parent()
        .map_or_else(|| PathBuf::from(&backup), |p| p.join(&backup));
    Target {
        jail: target.jail.clone(),
        shown: rel.display().to_string(),
        rel,
    }
}

/// Runs the undo log backwards; returns what could not be restored.
fn roll_back(undo: Vec<Undo>) -> Vec<String> {
    let mut failed = Vec::new();
    for step in undo.into_iter().rev() {
        let (target, result) = match &step {
            Undo::Restore(t, bytes) => (t, t.jail.write(&t.rel, bytes)),
            Undo::Delete(t) | Undo::DeleteDir(t) => (t, t.jail.remove(&t.rel)),
            Undo::Rename { now, back_to } => (back_to, rename_back(now, back_to)),
        };
        if let Err(e) = result {
            failed.push(format!("{}: {e}", target.shown));
        }
    }
    failed
}

fn rename_back(now: &Target, back_to: &Target) -> Result<(), JailError> {
    now.jail.rename(&now.rel, Path::new(&back_to.rel))
}

//! Putting a planned patch on disk all or nothing.
//!
//! Every step that changes the tree pushes its undo first; on any failure
//! the undo log runs backwards, so the tree ends byte-identical to how it
//! started (modes included: files are restored in place, and removed files
//! are renamed aside to a hidden backup rather than deleted until the end).
//!
//! Mode changes come last, on the files as they finally are, each through
//! the descriptor of the file it opened beneath the root.
//!
//! What it cannot promise: a crash of this process in the middle leaves the
//! hidden backups (`.name.toolgate-backup-*`) next to the files they belong to.

use std::fs::{File, Permissions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use toolgate_sandbox::{Jail, JailError};

use super::FileMode;

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
    /// The file (after every other change) gets this mode.
    Mode(Target, FileMode),
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
    /// Give the file (still open) its old permission bits back.
    Mode {
        target: Target,
        file: File,
        old: u32,
    },
}

/// Why one step of a commit failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StepError {
    #[error(transparent)]
    Jail(#[from] JailError),
    /// Attack: a hard link in the workspace to a file elsewhere (another
    /// root's, a protected one): a mode belongs to the file, so changing it
    /// through one name changes it for every name.
    #[error(
        "it has {links} hard links, and a mode belongs to the file, not to one of its names; \
         replace it with a copy of its own first (or change the mode with a command)"
    )]
    HardLinked { links: u64 },
}

/// A failed commit: the error, after the tree was restored.
pub(crate) struct CommitError {
    pub shown: String,
    pub error: StepError,
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

type Step = Result<(), (String, StepError)>;

fn run(changes: &[Change], undo: &mut Vec<Undo>, backups: &mut Vec<Target>) -> Step {
    // 1. Everything that leaves its place is renamed aside, so a later
    //    write may reuse the name and a rollback can rename it back.
    let mut aside: Vec<(usize, Target)> = Vec::new();
    for (i, change) in changes.iter().enumerate() {
        let leaving = match change {
            Change::Remove(t) => t,
            Change::Move { from, .. } => from,
            Change::Write(..) | Change::Mode(..) => continue,
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
            Change::Remove(_) | Change::Mode(..) => {}
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
    // 3. Modes, on the files as they now are.
    for change in changes {
        if let Change::Mode(target, mode) = change {
            set_mode(target, *mode, undo).map_err(|e| (target.shown.clone(), e))?;
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
    result.map_err(|e| (target.shown.clone(), e.into()))
}

/// Opens `target` for a mode change: the file and its permission bits, or
/// why its mode must not change. The planner asks before anything is
/// written (so a dry run answers alike), the commit again where it sets it.
pub(crate) fn open_for_mode(target: &Target) -> Result<(File, u32), StepError> {
    // Opened beneath the root like every file; the mode is then set on this
    // descriptor, so nothing swapped in at the path afterwards is touched.
    let (file, _) = target.jail.open_file(&target.rel)?;
    let io = |source| JailError::Io {
        path: target.rel.clone(),
        source,
    };
    let meta = file.metadata().map_err(io)?;
    if meta.nlink() > 1 {
        return Err(StepError::HardLinked {
            links: meta.nlink(),
        });
    }
    // Attack: a symlink inside the root to a protected file (`run.sh ->
    // .git/hooks/pre-commit`): the name the patch gave was checked, so the
    // file's real place is checked too, before its mode is touched.
    let real = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).map_err(io)?;
    target.jail.check_writable(&real)?;
    Ok((file, meta.mode() & 0o7777))
}

/// Gives `target` the permission bits `mode` asks for ([`FileMode::apply`]),
/// remembering the old ones.
fn set_mode(target: &Target, mode: FileMode, undo: &mut Vec<Undo>) -> Result<(), StepError> {
    let (file, old) = open_for_mode(target)?;
    let io = |source| JailError::Io {
        path: target.rel.clone(),
        source,
    };
    let new = mode.apply(old);
    if new == old {
        return Ok(());
    }
    file.set_permissions(Permissions::from_mode(new))
        .map_err(io)?;
    undo.push(Undo::Mode {
        target: target.clone(),
        file,
        old,
    });
    Ok(())
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
        Err(e) => Err((target.shown.clone(), e.into())),
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
            Undo::Mode { target, file, old } => (
                target,
                file.set_permissions(Permissions::from_mode(*old))
                    .map_err(|source| JailError::Io {
                        path: target.rel.clone(),
                        source,
                    }),
            ),
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

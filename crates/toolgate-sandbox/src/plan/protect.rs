//! The write-deny half of the plan: which paths inside the writable roots
//! a command may not change, and how each is kept (a read-only bind of
//! what is there, or a placeholder where nothing is).

use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};

use toolgate_core::normalize_path;

use super::{HostEntry, HostView, PlanError};
use crate::repos::FoundRepo;
use crate::spec::{
    CONFIG_FILE_NAME, GIT_DIR_AUDITED, GIT_DIR_PROTECTED, NESTED_SCAN_BUDGET, ROOT_PROTECTED,
    SandboxSpec, WhenAbsent,
};

/// One write-deny mount.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Mask {
    /// An existing file or directory made read-only where it is.
    ReadOnly(PathBuf),
    /// An absent name blocked with the empty read-only directory.
    EmptyDir(PathBuf),
    /// An absent name inside a git dir, blocked with the empty read-only
    /// file (git reads an empty `config` as no settings).
    EmptyFile(PathBuf),
}

impl Mask {
    pub(super) fn path(&self) -> &Path {
        match self {
            Mask::ReadOnly(p) | Mask::EmptyFile(p) | Mask::EmptyDir(p) => p,
        }
    }
}

/// What to do where a protected path is absent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IfAbsent {
    /// Block it with an empty directory.
    Dir,
    /// Block it with an empty file (only inside a git dir).
    File,
    /// Leave it creatable.
    Leave,
}

/// Pins, masks and after-run checks, collected before any is emitted so
/// they can be ordered.
#[derive(Debug, Default)]
pub(super) struct Protection {
    /// Directories on the way to a protected path, bound onto themselves so
    /// that their names cannot be renamed or removed (a mount point is busy).
    pub(super) pins: Vec<PathBuf>,
    pub(super) masks: Vec<Mask>,
    /// Absent names that no mask can block; checked after the run.
    pub(super) audited: Vec<PathBuf>,
    /// Existing empty entries made read-only: perhaps another run's
    /// placeholders, which must outlive this run too.
    pub(super) empty_masked: Vec<PathBuf>,
}

/// Everything a command in `spec` may not write, except what lies under
/// `hidden` (read-deny masks, which hide a whole subtree read-only anyway;
/// a write mask below one would bind the host's content back into view).
pub(super) fn write_deny_protection(
    spec: &SandboxSpec,
    host: &dyn HostView,
    hidden: &[PathBuf],
) -> Result<Protection, PlanError> {
    let mut targets: Vec<(PathBuf, IfAbsent)> = Vec::new();
    let mut audited = Vec::new();
    for root in &spec.writable_roots {
        root_targets(host, root, &mut targets, &mut audited)?;
    }
    // The caller's own write-denies (and toolgate's files inside a root):
    // what they name may not be created either.
    let base = Path::new("/");
    for path in &spec.write_deny {
        let path = normalize_path(path, base);
        // A new toolgate.toml cannot loosen anything (an untrusted project
        // file only tightens), so the copies on the way to the working
        // directory need no placeholder; an existing one stays read-only.
        let if_absent = if path.file_name() == Some(OsStr::new(CONFIG_FILE_NAME)) {
            IfAbsent::Leave
        } else {
            IfAbsent::Dir
        };
        targets.push((path, if_absent));
    }
    let mut protection = Protection::default();
    for (path, if_absent) in targets {
        protect(&mut protection, spec, host, &path, if_absent)?;
    }
    protection.audited = audited;
    Ok(ordered(protection, host, hidden))
}

/// Sorts and prunes: every mask once, shallow before deep; nothing below a
/// mask that already covers it (a read-only or empty directory hides its
/// whole subtree, and bwrap could not create a mount point in it).
fn ordered(protection: Protection, host: &dyn HostView, hidden: &[PathBuf]) -> Protection {
    let Protection {
        mut pins,
        mut masks,
        mut audited,
        ..
    } = protection;
    masks.sort_by_key(|m| (m.path().components().count(), m.clone()));
    masks.dedup_by(|a, b| a.path() == b.path());
    let covering: Vec<PathBuf> = masks.iter().map(|m| m.path().to_owned()).collect();
    let under = |path: &Path, strict: bool| {
        covering
            .iter()
            .any(|c| path.starts_with(c) && (!strict || path != c))
            || hidden.iter().any(|h| path.starts_with(h))
    };
    masks.retain(|m| !under(m.path(), true));
    pins.sort_by_key(|p| (p.components().count(), p.clone()));
    pins.dedup();
    // A masked path is pinned by its own mount already.
    pins.retain(|p| !under(p, false));
    audited.sort();
    audited.dedup();
    audited.retain(|p| !under(p, false));
    let empty_masked = masks
        .iter()
        .filter_map(|m| match m {
            Mask::ReadOnly(p) if host.is_empty(p) => Some(p.clone()),
            _ => None,
        })
        .collect();
    Protection {
        pins,
        masks,
        audited,
        empty_masked,
    }
}

/// The protected paths of one root: its top-level names, its own `.git`,
/// and every repository the walk finds inside it.
fn root_targets(
    host: &dyn HostView,
    root: &Path,
    targets: &mut Vec<(PathBuf, IfAbsent)>,
    audited: &mut Vec<PathBuf>,
) -> Result<(), PlanError> {
    let dot_git = root.join(".git");
    // An empty `.git` directory (another run's placeholder, or a leftover)
    // is no repository: git goes on looking upwards, and in the root itself
    // for a bare one.
    let has_git = match host.entry(&dot_git) {
        HostEntry::Missing => false,
        HostEntry::Dir => !host.is_empty(&dot_git),
        HostEntry::File | HostEntry::Symlink(_) => true,
    };
    if !has_git {
        // Attack: `git init` plus core.fsmonitor in a root that is a
        // subdirectory of a host repository (or none); the user's next
        // `git status` there runs it. An empty directory keeps host git
        // working: it is no repository, and discovery goes on upwards.
        targets.push((dot_git, IfAbsent::Dir));
    }
    for name in ROOT_PROTECTED {
        let if_absent = match name.when_absent {
            WhenAbsent::Blocked => IfAbsent::Dir,
            WhenAbsent::BlockedWithoutGit if !has_git => IfAbsent::Dir,
            _ => IfAbsent::Leave,
        };
        targets.push((root.join(name.name), if_absent));
    }
    let scan = host
        .scan_root(root, NESTED_SCAN_BUDGET)
        .map_err(|e| PlanError::ScanTooLarge(e.to_string()))?;
    for repo in scan.repos {
        match repo {
            FoundRepo::DotGitDir(dir) => {
                let git_dir = dir.join(".git");
                if host.is_empty(&git_dir) {
                    targets.push((git_dir, IfAbsent::Leave));
                } else {
                    git_dir_targets(host, &git_dir, targets, audited);
                }
            }
            FoundRepo::GitFile(dir) => gitfile_targets(host, &dir, targets, audited),
            FoundRepo::GitSymlink(dir) => {
                // Its name can be removed and recreated by the command; no
                // mount can pin a symlink.
                return Err(PlanError::UnprotectableSymlink {
                    path: dir.join(".git"),
                });
            }
            FoundRepo::Bare(dir) => git_dir_targets(host, &dir, targets, audited),
        }
    }
    // What this process cannot list, a command cannot either, but it might
    // reach a repository inside by name: read-only as a whole.
    targets.extend(scan.unlisted.into_iter().map(|d| (d, IfAbsent::Leave)));
    Ok(())
}

/// A `.git` file (a submodule checkout or a linked worktree): the pointer
/// itself, and the git dir it points to wherever that lies inside a root.
fn gitfile_targets(
    host: &dyn HostView,
    dir: &Path,
    targets: &mut Vec<(PathBuf, IfAbsent)>,
    audited: &mut Vec<PathBuf>,
) {
    let dot_git = dir.join(".git");
    // The pointer itself: rewritten, it sends git anywhere.
    targets.push((dot_git.clone(), IfAbsent::Leave));
    let Some(text) = host.read_small(&dot_git) else {
        return;
    };
    let Some(gitdir) = text.lines().find_map(|l| l.strip_prefix("gitdir:")) else {
        return;
    };
    let gitdir = normalize_path(Path::new(gitdir.trim()), dir);
    git_dir_targets(host, &gitdir, targets, audited);
}

/// The entries of a git dir that steer git, and those of its common dir
/// (a linked worktree's, named by `commondir`).
fn git_dir_targets(
    host: &dyn HostView,
    git_dir: &Path,
    targets: &mut Vec<(PathBuf, IfAbsent)>,
    audited: &mut Vec<PathBuf>,
) {
    let natural = |is_dir: bool| {
        if is_dir {
            IfAbsent::Dir
        } else {
            IfAbsent::File
        }
    };
    for (name, is_dir) in GIT_DIR_PROTECTED {
        targets.push((git_dir.join(name), natural(*is_dir)));
    }
    for name in GIT_DIR_AUDITED {
        let path = git_dir.join(name);
        if host.entry(&path) == HostEntry::Missing {
            // Any entry there, even an empty one, would change what git
            // does: watched after the run instead.
            audited.push(path);
            continue;
        }
        targets.push((path.clone(), IfAbsent::Leave));
        if let Some(common) = host.read_small(&path) {
            let common = normalize_path(Path::new(common.trim()), git_dir);
            targets.push((common.join("config"), IfAbsent::File));
            targets.push((common.join("hooks"), IfAbsent::Dir));
        }
    }
}

/// Walks from the writable root holding `path` down to it, pinning every
/// directory on the way and masking the first thing that is not one.
fn protect(
    protection: &mut Protection,
    spec: &SandboxSpec,
    host: &dyn HostView,
    path: &Path,
    if_absent: IfAbsent,
) -> Result<(), PlanError> {
    // Outside every writable root nothing can write it anyway.
    let Some(root) = spec
        .writable_roots
        .iter()
        .filter(|r| path.starts_with(r))
        .max_by_key(|r| r.components().count())
    else {
        return Ok(());
    };
    let Ok(relative) = path.strip_prefix(root) else {
        return Ok(());
    };
    let names: Vec<Component> = relative.components().collect();
    if names.is_empty() {
        // The root itself is to be read-only.
        protection.masks.push(Mask::ReadOnly(root.clone()));
        return Ok(());
    }
    let mut current = root.clone();
    for (index, name) in names.iter().enumerate() {
        current.push(name);
        let last = index + 1 == names.len();
        match host.entry(&current) {
            HostEntry::Dir if !last => protection.pins.push(current.clone()),
            // A file in the middle (a worktree's `.git` file) is masked too:
            // replaced by a directory, it would open the way below it.
            HostEntry::Dir | HostEntry::File => {
                protection.masks.push(Mask::ReadOnly(current));
                return Ok(());
            }
            // A symlink's name can be removed and recreated by the command;
            // no mount can pin a symlink, so the plan refuses.
            HostEntry::Symlink(_) => {
                return Err(PlanError::UnprotectableSymlink { path: current });
            }
            // Blocked where it would first be created: `mkdir -p .git/hooks`
            // in a root without `.git` must not be able to make `.git`. A
            // missing directory on the way is blocked with a directory, so
            // host git sees no gitfile there.
            HostEntry::Missing => {
                let mask = match if_absent {
                    IfAbsent::Leave => return Ok(()),
                    IfAbsent::File if last => Mask::EmptyFile(current),
                    IfAbsent::File | IfAbsent::Dir => Mask::EmptyDir(current),
                };
                protection.masks.push(mask);
                return Ok(());
            }
        }
    }
    Ok(())
}

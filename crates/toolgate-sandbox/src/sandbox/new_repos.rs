//! Repositories a command created, made harmless after its run.
//!
//! Attack: the plan protects the config and hooks of every repository that
//! exists when a command starts, but the command can make a new one (`git
//! init sub`, `git clone`, `mkdir -p sub/.git/hooks`, a `.git` file pointing
//! at a git dir of its own, a bare-looking directory) and write
//! `core.fsmonitor` into its config or a `post-checkout` hook; the user's
//! next `git status` there runs it on the host. No mask can exist for a
//! repository that is not there yet, so after every run (also a cancelled
//! one, and a background process when it ends) the roots are walked again
//! with the same walk ([`crate::repos`]) and every repository that was not
//! there before the run is neutralised: its hooks other than `*.sample`
//! removed, the config keys that make git run a program or read another
//! file taken out ([`super::git_config`]), pointers (`.git` files,
//! `commondir`) that lead out of the roots disabled. The walk before the
//! run is the plan's own under bubblewrap, so only the walk after it is new.

use std::collections::BTreeSet;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rustix::fs::{AtFlags, FileType};

use super::git_config::{ConfigEditor, ConfigFile, read_nofollow, remove_entry};
use crate::plan::{HostEntry, HostView, PlanError, RealHost};
use crate::repos::{
    DirSource, FoundRepo, ListedKind, RealDirs, RootScan, ScanTooLarge, open_beneath_no_symlinks,
};
use crate::spec::NESTED_SCAN_BUDGET;

/// The suffix of a pointer toolgate disabled.
const DISABLED: &str = ".disabled-by-toolgate";

/// How deep submodule git dirs (`modules/a/modules/b`, names with slashes)
/// are followed.
const MAX_MODULE_DEPTH: usize = 16;

/// The real host, keeping the plan's walk of each root for the comparison
/// after the run.
#[derive(Debug, Default)]
pub(super) struct RecordingHost {
    scans: Mutex<Vec<(PathBuf, RootScan)>>,
    /// Whether stage 2 guards creations (the sandbox's choice).
    guards_creations: bool,
}

impl RecordingHost {
    pub(super) fn new(guards_creations: bool) -> RecordingHost {
        RecordingHost {
            scans: Mutex::default(),
            guards_creations,
        }
    }

    fn take(&self) -> Vec<(PathBuf, RootScan)> {
        self.scans
            .lock()
            .map(|mut s| std::mem::take(&mut *s))
            .unwrap_or_default()
    }
}

impl HostView for RecordingHost {
    fn entry(&self, path: &Path) -> HostEntry {
        RealHost.entry(path)
    }
    fn read_small(&self, path: &Path) -> Option<String> {
        RealHost.read_small(path)
    }
    fn readable(&self, path: &Path) -> bool {
        RealHost.readable(path)
    }
    fn private_system_paths(&self) -> Vec<PathBuf> {
        RealHost.private_system_paths()
    }
    fn is_empty(&self, path: &Path) -> bool {
        RealHost.is_empty(path)
    }
    fn guards_creations(&self) -> bool {
        self.guards_creations
    }
    fn scan_root(&self, root: &Path, budget: usize) -> Result<RootScan, ScanTooLarge> {
        let scan = RealHost.scan_root(root, budget)?;
        if let Ok(mut scans) = self.scans.lock() {
            scans.push((root.to_owned(), scan.clone()));
        }
        Ok(scan)
    }
}

/// A repository as found, with what tells a changed one from the same:
/// whether a `.git` directory was empty (no repository yet), what a `.git`
/// file pointed to.
type Known = (FoundRepo, Option<Vec<u8>>);

fn known(repo: &FoundRepo) -> Known {
    let detail = match repo {
        FoundRepo::DotGitDir(dir) => RealHost
            .is_empty(&dir.join(".git"))
            .then(|| b"empty".to_vec()),
        FoundRepo::GitFile(dir) => Some(pointer_bytes(dir).unwrap_or_default()),
        FoundRepo::GitSymlink(_) | FoundRepo::Bare(_) => None,
    };
    (repo.clone(), detail)
}

fn pointer_bytes(dir: &Path) -> Option<Vec<u8>> {
    let parent = open_beneath_no_symlinks(dir)?;
    read_nofollow(&parent, ".git").ok()
}

/// Where a `.git` file points, resolved as git does (symlinks followed).
fn pointer_target(dir: &Path) -> Option<Result<PathBuf, PathBuf>> {
    let bytes = pointer_bytes(dir)?;
    let text = String::from_utf8_lossy(&bytes);
    let line = text.lines().next()?;
    let target = dir.join(line.strip_prefix("gitdir:")?.trim());
    Some(std::fs::canonicalize(&target).map_err(|_| target))
}

/// The repositories of the roots before a run.
pub(super) struct RepoWatch {
    roots: Vec<PathBuf>,
    before: BTreeSet<Known>,
    /// The git dirs of those repositories: what lies in them belongs to a
    /// repository that existed (and the plan protected) before the run.
    old_git_dirs: Vec<PathBuf>,
    state_dir: PathBuf,
    done: bool,
}

impl RepoWatch {
    /// Records what the plan's walk found (`host`), walking the roots it did
    /// not (the landlock backend has no plan to walk them); a root too large
    /// to walk refuses the run, as the plan does.
    pub(super) fn before(
        roots: &[PathBuf],
        host: &RecordingHost,
        state_dir: &Path,
    ) -> Result<RepoWatch, PlanError> {
        let mut scans = host.take();
        for root in roots {
            if !scans.iter().any(|(r, _)| r == root) {
                let scan = RealHost
                    .scan_root(root, NESTED_SCAN_BUDGET)
                    .map_err(|e| PlanError::ScanTooLarge(e.to_string()))?;
                scans.push((root.clone(), scan));
            }
        }
        let mut before = BTreeSet::new();
        let mut old_git_dirs = Vec::new();
        for repo in scans.into_iter().flat_map(|(_, scan)| scan.repos) {
            match &repo {
                // An empty `.git` is no repository yet: one filled during
                // the run is new.
                FoundRepo::DotGitDir(dir) if !RealHost.is_empty(&dir.join(".git")) => {
                    old_git_dirs.extend(real(&dir.join(".git")));
                }
                FoundRepo::DotGitDir(_) => {}
                FoundRepo::Bare(dir) => old_git_dirs.extend(real(dir)),
                FoundRepo::GitFile(dir) => {
                    old_git_dirs.extend(pointer_target(dir).and_then(Result::ok));
                }
                FoundRepo::GitSymlink(_) => {}
            }
            before.insert(known(&repo));
        }
        Ok(RepoWatch {
            roots: roots.to_vec(),
            before,
            old_git_dirs,
            state_dir: state_dir.to_owned(),
            done: false,
        })
    }

    /// Walks the roots again and neutralises every repository that is new,
    /// saying what it did. Runs once.
    pub(super) fn neutralise(&mut self) -> Vec<String> {
        let mut warnings = Vec::new();
        if std::mem::replace(&mut self.done, true) {
            return warnings;
        }
        let mut fresh = Vec::new();
        for root in &self.roots {
            // No budget: the command made whatever is there, and a tree it
            // grew past the budget must not hide a repository from this.
            // The walk before the run is given out again when nothing it
            // read changed (`repos::watched`), so a command that made no
            // directory costs no walk; what lies in a `.git` it found
            // (empty or filled, where a `.git` file points) is read anew.
            match crate::repos::watched::scan(root, usize::MAX) {
                Ok(scan) => fresh.extend(
                    scan.repos
                        .into_iter()
                        .filter(|repo| !self.before.contains(&known(repo))),
                ),
                Err(e) => warnings.push(format!(
                    "could not search {} for repositories the command created ({e}); do not run git below it before you have checked every .git/config and .git/hooks there",
                    root.display()
                )),
            }
        }
        if fresh.is_empty() {
            return warnings;
        }
        let mut pass = Pass {
            watch: self,
            editor: None,
            visited: BTreeSet::new(),
            warnings,
        };
        for repo in fresh {
            pass.repo(&repo);
        }
        pass.warnings
    }
}

fn real(path: &Path) -> Option<PathBuf> {
    std::fs::canonicalize(path).ok()
}

/// One neutralisation after a run.
struct Pass<'a> {
    watch: &'a RepoWatch,
    editor: Option<Result<ConfigEditor, String>>,
    /// Git dirs already handled (a worktree's commondir leads back).
    visited: BTreeSet<PathBuf>,
    warnings: Vec<String>,
}

/// Where a pointer leads.
enum Lead {
    /// Into a git dir made during the run: neutralise it.
    New(PathBuf),
    /// Into a repository that existed before (the plan protected it).
    Old,
    /// Out of the roots, or nowhere: something outside the command's reach
    /// (or created there later by anyone) would steer git.
    Out,
}

impl Pass<'_> {
    fn repo(&mut self, repo: &FoundRepo) {
        match repo {
            FoundRepo::DotGitDir(dir) => {
                let git_dir = dir.join(".git");
                // An empty one (a placeholder) is no repository.
                if !RealHost.is_empty(&git_dir) {
                    self.git_dir(&git_dir, false, 0);
                }
            }
            FoundRepo::Bare(dir) => self.git_dir(dir, true, 0),
            FoundRepo::GitSymlink(dir) => {
                // The plan refuses every run with one (no mount pins a
                // symlink), and it leads git anywhere.
                self.disable(
                    &dir.join(".git"),
                    "it is a symlink, which sends git to any directory",
                );
            }
            FoundRepo::GitFile(dir) => {
                let dot_git = dir.join(".git");
                let lead = match pointer_target(dir) {
                    // No `gitdir:` line: git refuses it.
                    None => return,
                    Some(Ok(target)) => self.lead(target),
                    Some(Err(_)) => Lead::Out,
                };
                match lead {
                    Lead::New(target) => self.git_dir(&target, false, 0),
                    Lead::Old => {}
                    Lead::Out => self.disable(
                        &dot_git,
                        "it points outside the writable roots or nowhere, where no command run could have made that git dir",
                    ),
                }
            }
        }
    }

    fn lead(&self, target: PathBuf) -> Lead {
        if self
            .watch
            .old_git_dirs
            .iter()
            .any(|g| target.starts_with(g))
        {
            Lead::Old
        } else if self.watch.roots.iter().any(|r| target.starts_with(r)) {
            Lead::New(target)
        } else {
            Lead::Out
        }
    }

    /// Neutralises the git dir at `path` (canonical or made so here): its
    /// hooks, config, config.worktree, commondir, and the git dirs of its
    /// submodules and linked worktrees.
    fn git_dir(&mut self, path: &Path, bare: bool, depth: usize) {
        let Some(path) = real(path) else { return };
        if depth > MAX_MODULE_DEPTH || !self.visited.insert(path.clone()) {
            return;
        }
        if !matches!(self.lead(path.clone()), Lead::New(_)) {
            return;
        }
        let Some(dir) = open_beneath_no_symlinks(&path) else {
            return;
        };
        self.hooks(&dir, &path);
        self.config(&dir, &path, ConfigFile::Main { bare });
        self.config(&dir, &path, ConfigFile::Worktree);
        self.commondir(&dir, &path, depth);
        for sub in git_dirs_below(&path.join("modules"), MAX_MODULE_DEPTH) {
            self.git_dir(&sub, false, depth + 1);
        }
        for sub in git_dirs_below(&path.join("worktrees"), 1) {
            self.git_dir(&sub, false, depth + 1);
        }
    }

    /// Removes every hook but the inert `*.sample` files of `git init`: git
    /// runs a hook by its exact name, and renamed it would keep its content
    /// and (through a hard link) its mode, so removing is the one sure way.
    fn hooks(&mut self, dir: &OwnedFd, git_dir: &Path) {
        let hooks = git_dir.join("hooks");
        let Ok(stat) = rustix::fs::statat(dir, "hooks", AtFlags::SYMLINK_NOFOLLOW) else {
            return;
        };
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::Directory => {}
            FileType::Symlink => {
                let removed = remove_entry(dir, "hooks");
                self.removed(&hooks, "hooks directory (a symlink)", removed);
                return;
            }
            _ => return,
        }
        let Some(hooks_dir) = open_beneath_no_symlinks(&hooks) else {
            return;
        };
        let Some(entries) = RealDirs.list(&hooks_dir) else {
            return;
        };
        for (name, _) in entries {
            // git runs only the exact names of hooks, none of them `*.sample`.
            if name.as_encoded_bytes().ends_with(b".sample") {
                continue;
            }
            let removed = remove_entry(&hooks_dir, &name);
            self.removed(&hooks.join(&name), "hook", removed);
        }
    }

    fn removed(&mut self, path: &Path, what: &str, result: Result<(), std::io::Error>) {
        self.warnings.push(match result {
            Ok(()) => format!(
                "removed {what} {} from a repository a command created: git on the host would run it",
                path.display()
            ),
            Err(e) => format!(
                "a command created {what} {} in a new repository, which could not be removed: {e}; delete it before running git there",
                path.display()
            ),
        });
    }

    fn config(&mut self, dir: &OwnedFd, git_dir: &Path, file: ConfigFile) {
        if rustix::fs::statat(dir, file.name(), AtFlags::SYMLINK_NOFOLLOW).is_err() {
            return;
        }
        let state_dir = &self.watch.state_dir;
        let editor = self
            .editor
            .get_or_insert_with(|| ConfigEditor::new(state_dir));
        match editor {
            Ok(editor) => editor.neutralise(dir, git_dir, file, &mut self.warnings),
            Err(e) => self.warnings.push(format!(
                "{} (a repository a command created) could not be checked: {e}; remove it before running git there",
                git_dir.join(file.name()).display()
            )),
        }
    }

    /// A `commondir` gives the git dir another's config and hooks: one
    /// made during the run is neutralised too, one leading out of the roots
    /// removed.
    fn commondir(&mut self, dir: &OwnedFd, git_dir: &Path, depth: usize) {
        let Ok(bytes) = read_nofollow(dir, "commondir") else {
            return;
        };
        let text = String::from_utf8_lossy(&bytes);
        let target = git_dir.join(text.lines().next().unwrap_or_default().trim());
        let lead = match real(&target) {
            Some(target) => self.lead(target),
            None => Lead::Out,
        };
        match lead {
            Lead::New(target) => self.git_dir(&target, false, depth + 1),
            Lead::Old => {}
            Lead::Out => {
                let removed = remove_entry(dir, "commondir");
                let path = git_dir.join("commondir");
                self.warnings.push(match removed {
                    Ok(()) => format!(
                        "removed {} from a repository a command created: it points outside the writable roots or nowhere (it would redirect git on the host)",
                        path.display()
                    ),
                    Err(e) => format!(
                        "a command created {}, which could not be removed: {e}; delete it before running git there",
                        path.display()
                    ),
                });
            }
        }
    }

    /// Renames a pointer to `<name>.disabled-by-toolgate`, where git never
    /// looks (a `.git` file or symlink is read by that exact name).
    fn disable(&mut self, path: &Path, why: &str) {
        let result = (|| -> Result<(), std::io::Error> {
            let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
                return Ok(());
            };
            let dir = open_beneath_no_symlinks(parent)
                .ok_or_else(|| std::io::Error::other("cannot open its directory"))?;
            let mut aside = name.to_owned();
            aside.push(DISABLED);
            remove_entry(&dir, &aside)?;
            rustix::fs::renameat(&dir, name, &dir, &aside)?;
            Ok(())
        })();
        self.warnings.push(match result {
            Ok(()) => format!(
                "renamed {} that a command created to {}{DISABLED}: {why}",
                path.display(),
                path.display()
            ),
            Err(e) => format!(
                "a command created {} ({why}), which could not be disabled: {e}; remove it before running git there",
                path.display()
            ),
        });
    }
}

/// The git dirs (directories holding `HEAD`) below `dir`, at most `depth`
/// levels down (a submodule's name may have slashes), not below a git dir.
fn git_dirs_below(dir: &Path, depth: usize) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack: Vec<(PathBuf, usize)> = vec![(dir.to_owned(), 0)];
    while let Some((path, level)) = stack.pop() {
        let Some(fd) = open_beneath_no_symlinks(&path) else {
            continue;
        };
        let Some(entries) = RealDirs.list(&fd) else {
            continue;
        };
        for (name, kind) in entries {
            if kind != ListedKind::Dir {
                continue;
            }
            let child = path.join(&name);
            if is_git_dir(&child) {
                found.push(child);
            } else if level + 1 < depth {
                stack.push((child, level + 1));
            }
        }
    }
    found
}

fn is_git_dir(dir: &Path) -> bool {
    std::fs::symlink_metadata(dir.join("HEAD")).is_ok()
}

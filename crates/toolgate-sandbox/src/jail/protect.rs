//! Entries no in-process write may create, replace, move or remove: the same
//! names the sandbox keeps read-only for commands ([`ROOT_PROTECTED`] at the
//! top of the root, [`GIT_DIR_PROTECTED`] in every git dir), so what a
//! command cannot change, a file tool cannot change either.
//!
//! The check runs on the directory handle the write is about to use, not on
//! the path text: the handle's real location comes from the kernel
//! (`/proc/self/fd`), so `link/config` with `link -> .git`, or a symlink
//! `notes.txt -> .bashrc` followed hop by hop, are judged by where they land.

use std::ffi::OsStr;
use std::os::fd::{AsFd, AsRawFd};
use std::path::{Component, Path, PathBuf};

use cap_std::fs::Dir;

use crate::spec::{CONFIG_FILE_NAME, GIT_DIR_AUDITED, GIT_DIR_PROTECTED, ROOT_PROTECTED};

/// The rule named for toolgate's own files (its configuration wherever the
/// discovery would read it, its data directory).
pub(crate) const TOOLGATE_OWN: &str = "toolgate's own configuration";

/// Where `name` in `dir` lies relative to `root`, if the kernel can tell.
pub(crate) fn location(root: &Path, dir: &Dir, name: &OsStr) -> Option<PathBuf> {
    let fd = dir.as_fd().as_raw_fd();
    let real = std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()?;
    let parent = real.strip_prefix(root).ok()?;
    Some(parent.join(name))
}

/// The protected entry `rel` (relative to the root `root`) falls under, if
/// any.
///
/// [`ROOT_PROTECTED`] names are matched at the top of the root, like the
/// sandbox's masks; git's own files (`.git/config`, `.git/hooks/...`) at any
/// depth, and so are those of a directory git would take for a repository
/// itself (`HEAD`, `objects/` and `refs/` side by side: a bare repository,
/// or the git dir a `.git` file points to), because a nested repository's
/// hooks and config run just the same when someone works in it. A file
/// named `.git` is refused anywhere: it would point git at a directory of
/// the writer's choosing (`gitdir: evil/`) with its own config.
pub(crate) fn protected_rule(root: &Dir, rel: &Path) -> Option<&'static str> {
    let parts: Vec<&OsStr> = rel
        .components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name),
            _ => None,
        })
        .collect();
    if parts.last() == Some(&OsStr::new(".git")) {
        return Some(".git");
    }
    // Attack: `write toolgate.toml` with `backend = "none"` turns the next
    // start's sandbox off. Refused at any depth: the discovery reads the
    // file in whatever directory toolgate is next started in.
    if parts.last() == Some(&OsStr::new(CONFIG_FILE_NAME)) {
        return Some(CONFIG_FILE_NAME);
    }
    if let Some(first) = parts.first()
        && let Some(name) = ROOT_PROTECTED.iter().find(|n| OsStr::new(n.name) == *first)
    {
        return Some(name.name);
    }
    let git_names: Vec<&str> = GIT_DIR_PROTECTED
        .iter()
        .map(|(name, _)| *name)
        .chain(GIT_DIR_AUDITED.iter().copied())
        .collect();
    // The outermost match names the rule (`.git/modules`, not the hooks of
    // a submodule below it).
    for (i, part) in parts.iter().enumerate() {
        let Some(name) = git_names.iter().find(|n| OsStr::new(n) == *part) else {
            continue;
        };
        let in_dot_git = i > 0 && parts[i - 1] == OsStr::new(".git");
        let git_dir: PathBuf = parts[..i].iter().collect();
        if in_dot_git || looks_like_git_dir(root, &git_dir) {
            return Some(git_rule(name));
        }
    }
    None
}

/// The rule's name as messages show it.
fn git_rule(name: &str) -> &'static str {
    match name {
        "hooks" => ".git/hooks",
        "config" => ".git/config",
        "config.worktree" => ".git/config.worktree",
        "worktrees" => ".git/worktrees",
        "modules" => ".git/modules",
        _ => ".git/commondir",
    }
}

/// Whether git would take `dir` (relative to the root) for a git dir:
/// `HEAD` beside `objects/` and `refs/`, looked at without following
/// symlinks out of the root.
fn looks_like_git_dir(root: &Dir, dir: &Path) -> bool {
    let at = |name: &str| {
        let path = if dir.as_os_str().is_empty() {
            PathBuf::from(name)
        } else {
            dir.join(name)
        };
        root.symlink_metadata(path).ok()
    };
    at("HEAD").is_some_and(|m| m.is_file())
        && at("objects").is_some_and(|m| m.is_dir())
        && at("refs").is_some_and(|m| m.is_dir())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protected_entries_are_matched_where_git_and_shells_look() {
        let cases = [
            (".git/config", Some(".git/config")),
            (".git/hooks/pre-commit", Some(".git/hooks")),
            ("vendor/lib/.git/config", Some(".git/config")),
            ("vendor/lib/.git/hooks/post-checkout", Some(".git/hooks")),
            (".git/commondir", Some(".git/commondir")),
            ("sub/.git", Some(".git")),
            (".git", Some(".git")),
            (".git/modules/sub/hooks/post-checkout", Some(".git/modules")),
            (".git/worktrees/wt/commondir", Some(".git/worktrees")),
            (".bashrc", Some(".bashrc")),
            (".vscode/tasks.json", Some(".vscode")),
            (".gemini/settings.json", Some(".gemini")),
            ("opencode.json", Some("opencode.json")),
            (".kiro/hooks/run.kiro.hook", Some(".kiro")),
            (".aider.conf.yml", Some(".aider.conf.yml")),
            ("HEAD", Some("HEAD")),
            ("toolgate.toml", Some("toolgate.toml")),
            ("sub/dir/toolgate.toml", Some("toolgate.toml")),
            // Only at the top, like the sandbox's masks.
            ("docs/.bashrc", None),
            ("src/HEAD", None),
            (".git/objects/ab/cdef", None),
            (".git/COMMIT_EDITMSG", None),
            (".github/workflows/ci.yml", None),
            ("src/main.rs", None),
            (".gitignore", None),
            ("AGENTS.md", None),
            ("src/config", None),
            ("docs/hooks/intro.md", None),
            // A bare repository at any depth, and the root itself as one.
            ("mirror.git/config", Some(".git/config")),
            ("mirror.git/hooks/pre-receive", Some(".git/hooks")),
            ("mirror.git/description", None),
            ("half/config", None),
        ];
        let dir = tempfile::tempdir().unwrap();
        for made in ["mirror.git/objects", "mirror.git/refs", "half/refs"] {
            std::fs::create_dir_all(dir.path().join(made)).unwrap();
        }
        std::fs::write(dir.path().join("mirror.git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(dir.path().join("half/HEAD"), "ref: refs/heads/main\n").unwrap();
        let root = Dir::open_ambient_dir(dir.path(), cap_std::ambient_authority()).unwrap();
        for (path, expected) in cases {
            assert_eq!(protected_rule(&root, Path::new(path)), expected, "{path}");
        }
        assert_eq!(protected_rule(&root, Path::new("config")), None);
        for made in ["objects", "refs"] {
            std::fs::create_dir(dir.path().join(made)).unwrap();
        }
        std::fs::write(dir.path().join("HEAD"), "ref: refs/heads/main\n").unwrap();
        assert_eq!(
            protected_rule(&root, Path::new("config")),
            Some(".git/config")
        );
    }
}

//! Entries no in-process write may create, replace, move or remove: the same
//! names the sandbox keeps read-only for commands ([`MANDATORY_WRITE_DENY`]),
//! so what a command cannot change, a file tool cannot change either.
//!
//! The check runs on the directory handle the write is about to use, not on
//! the path text: the handle's real location comes from the kernel
//! (`/proc/self/fd`), so `link/config` with `link -> .git`, or a symlink
//! `notes.txt -> .bashrc` followed hop by hop, are judged by where they land.

use std::ffi::OsStr;
use std::os::fd::{AsFd, AsRawFd};
use std::path::{Component, Path, PathBuf};

use cap_std::fs::Dir;

use crate::spec::{AUDITED_AFTER_RUN, CONFIG_FILE_NAME, MANDATORY_WRITE_DENY};

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

/// The protected entry `rel` falls under, if any.
///
/// Entries are matched at the top of the root, like the sandbox's masks;
/// git's own files (`.git/...`) also at any depth, because a nested
/// repository's hooks and config run just the same when someone works in it.
/// A file named `.git` is refused anywhere: it would point git at a
/// directory of the writer's choosing (`gitdir: evil/`) with its own config.
pub(crate) fn protected_rule(rel: &Path) -> Option<&'static str> {
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
    let rules = MANDATORY_WRITE_DENY
        .iter()
        .map(|(entry, _)| *entry)
        .chain(AUDITED_AFTER_RUN.iter().copied());
    for rule in rules {
        let rule_parts: Vec<&OsStr> = Path::new(rule).iter().collect();
        let matches_at = |i: usize| {
            parts
                .get(i..)
                .is_some_and(|rest| rest.starts_with(&rule_parts))
        };
        let hit = if rule.starts_with(".git/") {
            (0..parts.len()).any(matches_at)
        } else {
            matches_at(0)
        };
        if hit {
            return Some(rule);
        }
    }
    None
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
            (".bashrc", Some(".bashrc")),
            (".vscode/tasks.json", Some(".vscode")),
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
        ];
        for (path, expected) in cases {
            assert_eq!(protected_rule(Path::new(path)), expected, "{path}");
        }
    }
}

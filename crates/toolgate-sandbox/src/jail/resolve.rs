//! Symlinks whose absolute target lies inside the root.
//!
//! cap-std (like `openat2(RESOLVE_BENEATH)`) refuses every absolute symlink
//! target, yet real repositories hold links such as `docs/current ->
//! /home/me/project/docs/v2` that stay inside the root. When cap-std refuses a
//! path, [`links`] walks it one component at a time beneath the root: each
//! component is lstat'ed relative to the root handle (through components
//! already known to be real directories), a symlink's target is read, and an
//! absolute target under the root is translated into a root-relative path
//! whose walk starts over at the root. The result names no symlink on the way
//! and is opened beneath the root by cap-std again, so a link swapped in
//! between the walk and the open is refused there, never followed out.

use std::ffi::OsString;
use std::io;
use std::path::{Component, Path, PathBuf};

use super::error::invalid;
use super::{Jail, JailError, MAX_SYMLINK_HOPS, cap_path};

/// A symlink being followed: its target's components are the top `floor..`
/// of the walk's stack.
struct Following {
    floor: usize,
    link: PathBuf,
}

/// `rel` with every symlink on its way resolved beneath the root (the final
/// component's too when `follow_last`). What does not exist (or lies under a
/// file) is kept as given, for the operation to report or create. A symlink
/// that leads out (an absolute target elsewhere, or `..` above the root in its
/// target) is an `Escape` that names it.
pub(super) fn links(jail: &Jail, rel: &Path, follow_last: bool) -> Result<PathBuf, JailError> {
    let mut todo: Vec<OsString> = Vec::new();
    push_components(&mut todo, rel);
    let mut done = PathBuf::new();
    let mut following: Vec<Following> = Vec::new();
    let mut hops = 0u32;
    while let Some(name) = todo.pop() {
        while following.last().is_some_and(|f| todo.len() < f.floor) {
            following.pop();
        }
        if name == ".." {
            if !done.pop() {
                return Err(escape(jail, rel, following.pop().map(|f| f.link)));
            }
            continue;
        }
        let here = done.join(&name);
        let meta = match jail.dir.symlink_metadata(cap_path(&here)) {
            Ok(meta) => meta,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) =>
            {
                return Ok(rest(here, todo));
            }
            Err(e) => return Err(jail.err(&here, e)),
        };
        if !meta.is_symlink() || (todo.is_empty() && !follow_last) {
            if !meta.is_dir() {
                return Ok(rest(here, todo));
            }
            done = here;
            continue;
        }
        // Attack: symlink loops (`a -> b -> a`): bounded like the kernel's ELOOP.
        hops += 1;
        if hops > MAX_SYMLINK_HOPS {
            return Err(invalid(rel, "too many levels of symbolic links"));
        }
        // cap-std's `read_link` refuses absolute targets; the raw contents
        // are only text here, judged below and never opened as they are.
        let target = jail
            .dir
            .read_link_contents(&here)
            .map_err(|e| jail.err(&here, e))?;
        let lead = here;
        let inner = if target.has_root() {
            // Attack: `f -> /etc/passwd`, `d -> /w2` (a prefix sibling of the
            // root `/w`): whole components are compared, and anything not
            // under the root is refused before it is touched.
            match target
                .strip_prefix(&jail.root)
                .or_else(|_| target.strip_prefix(&jail.given))
            {
                Ok(inner) => {
                    done = PathBuf::new();
                    inner.to_path_buf()
                }
                Err(_) => return Err(escape(jail, rel, Some(lead))),
            }
        } else {
            // A relative target continues from the link's directory; its
            // `..` are walked physically like any other (`l -> ../../x`
            // climbs out and is refused above).
            target
        };
        following.push(Following {
            floor: todo.len(),
            link: lead,
        });
        push_components(&mut todo, &inner);
    }
    Ok(done)
}

/// Pushes `path`'s components onto the stack, first component on top. `.`
/// goes; `..` stays for the walk to resolve physically.
fn push_components(todo: &mut Vec<OsString>, path: &Path) {
    let start = todo.len();
    for component in path.components() {
        match component {
            Component::Normal(name) => todo.push(name.to_owned()),
            Component::ParentDir => todo.push("..".into()),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    todo[start..].reverse();
}

/// `here` followed by what is left of the walk, unresolved.
fn rest(mut here: PathBuf, mut todo: Vec<OsString>) -> PathBuf {
    while let Some(name) = todo.pop() {
        here.push(name);
    }
    here
}

fn escape(jail: &Jail, rel: &Path, link: Option<PathBuf>) -> JailError {
    JailError::Escape {
        path: rel.to_path_buf(),
        root: jail.root.clone(),
        link,
    }
}

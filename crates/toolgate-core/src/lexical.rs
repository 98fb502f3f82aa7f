//! Paths folded on paper, without asking the filesystem.

use std::path::{Component, Path, PathBuf};

/// `path` made absolute against `base`, with `.` and `..` folded
/// lexically; `..` at the root stays at the root. Symlinks are not
/// resolved: this is for comparing and reporting paths, and whatever opens
/// them must still confine itself (the file jail, the sandbox).
pub fn normalize_path(path: &Path, base: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    let joined;
    let full = if path.is_absolute() {
        path
    } else {
        joined = base.join(path);
        &joined
    };
    for component in full.components() {
        match component {
            Component::Prefix(p) => out.push(p.as_os_str()),
            Component::RootDir => out.push(Component::RootDir.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => out.push(name),
        }
    }
    out
}

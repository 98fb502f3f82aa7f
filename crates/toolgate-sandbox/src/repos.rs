//! Finding every git repository inside a writable root, so that the
//! sandbox can protect a nested repository's config and hooks as it does
//! the root's own.
//!
//! Attack: a sandboxed command writes `core.fsmonitor` into
//! `vendor/lib/.git/config` (or a hook under it); the user's next
//! `git status` in `vendor/lib` runs it on the host. Masks only at the top
//! of a root would miss it, so every command's plan walks the whole root.
//!
//! The walk reads directory entries only (their types come from
//! `getdents`, no `stat` per file), follows no symlink, ignores no ignore
//! file (a repository inside `node_modules/` or `target/` runs its hooks
//! all the same), and never descends into a git directory. It stops at a
//! budget of entries and says so; the caller refuses the run then.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

pub mod watched;

/// What a directory listing says an entry is, without following symlinks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListedKind {
    /// A directory.
    Dir,
    /// A regular file.
    File,
    /// A symlink.
    Symlink,
    /// Anything else (fifo, socket, device).
    Other,
}

/// One entry of a directory listing.
pub type Listed = (OsString, ListedKind);

/// A repository (or something git would take for one) inside a root.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum FoundRepo {
    /// `dir/.git` is a directory.
    DotGitDir(PathBuf),
    /// `dir/.git` is a file: a submodule checkout or a linked worktree,
    /// pointing at its git dir.
    GitFile(PathBuf),
    /// `dir/.git` is a symlink, which no mount can keep in place.
    GitSymlink(PathBuf),
    /// `dir` itself holds `HEAD`, `objects/` and `refs/`: git takes it for
    /// a (bare) repository when it finds no `.git` first.
    Bare(PathBuf),
}

/// What the walk of one root found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RootScan {
    /// Repositories, in walk order.
    pub repos: Vec<FoundRepo>,
    /// Directories this process could not list. A command (with fewer
    /// rights) cannot list them either, but might still reach into them by
    /// name, so the caller makes them read-only as a whole.
    pub unlisted: Vec<PathBuf>,
}

/// The walk read more entries than its budget allows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{}` holds more than {budget} directory entries (or directories deeper than {MAX_DEPTH} levels or {MAX_PATH_BYTES} bytes), too many to search for nested git repositories before every command; use narrower roots (the project directory, without large generated trees)",
    root.display()
)]
pub struct ScanTooLarge {
    /// The root.
    pub root: PathBuf,
    /// The budget.
    pub budget: usize,
}

/// How many directories deep the walk goes before it gives up (it holds
/// one open directory per level). Past it the run is refused too.
pub const MAX_DEPTH: usize = 256;

/// The longest directory path the walk accepts: a mask needs an absolute
/// path the kernel takes (PATH_MAX is 4096), with room for the names below
/// it. Past it the run is refused too.
pub const MAX_PATH_BYTES: usize = 3800;

/// Where the walk reads directories from: the real filesystem, or a
/// fixture in tests.
pub trait DirSource {
    /// An open directory.
    type Dir;
    /// Opens the root.
    fn open_root(&self, path: &Path) -> Option<Self::Dir>;
    /// Opens `name` (a directory, never through a symlink) in `parent`,
    /// which is at `parent_path`.
    fn open_child(&self, parent: &Self::Dir, parent_path: &Path, name: &OsStr)
    -> Option<Self::Dir>;
    /// Lists an open directory.
    fn list(&self, dir: &Self::Dir) -> Option<Vec<Listed>>;
    /// Called with each directory's path before it is opened (a watch is
    /// added there, see [`watched`]).
    fn entering(&self, _path: &Path) {}
}

/// One directory on the way down: its path, its handle and the
/// subdirectories still to visit.
struct Frame<D> {
    path: PathBuf,
    dir: D,
    pending: Vec<OsString>,
}

/// Walks `root`, reading at most `budget` entries and going at most
/// [`MAX_DEPTH`] levels deep.
pub fn scan_root<S: DirSource>(
    root: &Path,
    budget: usize,
    source: &S,
) -> Result<RootScan, ScanTooLarge> {
    let too_large = || ScanTooLarge {
        root: root.to_owned(),
        budget,
    };
    let mut scan = RootScan::default();
    let mut seen = 0usize;
    source.entering(root);
    let Some(dir) = source.open_root(root) else {
        scan.unlisted.push(root.to_owned());
        return Ok(scan);
    };
    let mut stack = Vec::new();
    if let Some(frame) = visit(&mut scan, &mut seen, source, root.to_owned(), dir) {
        stack.push(frame);
    }
    if seen > budget {
        return Err(too_large());
    }
    while let Some(top) = stack.last_mut() {
        let Some(name) = top.pending.pop() else {
            stack.pop();
            continue;
        };
        let path = top.path.join(&name);
        source.entering(&path);
        let Some(dir) = source.open_child(&top.dir, &top.path, &name) else {
            scan.unlisted.push(path);
            continue;
        };
        if path.as_os_str().len() > MAX_PATH_BYTES {
            return Err(too_large());
        }
        if let Some(frame) = visit(&mut scan, &mut seen, source, path, dir) {
            if stack.len() >= MAX_DEPTH {
                return Err(too_large());
            }
            stack.push(frame);
        }
        if seen > budget {
            return Err(too_large());
        }
    }
    Ok(scan)
}

/// Lists one directory, records what git would find there, and returns the
/// frame to descend with (none for a git directory).
fn visit<S: DirSource>(
    scan: &mut RootScan,
    seen: &mut usize,
    source: &S,
    path: PathBuf,
    dir: S::Dir,
) -> Option<Frame<S::Dir>> {
    let Some(entries) = source.list(&dir) else {
        scan.unlisted.push(path);
        return None;
    };
    *seen += entries.len();
    let kind_of = |name: &str| {
        entries
            .iter()
            .find(|(n, _)| n == OsStr::new(name))
            .map(|(_, k)| *k)
    };
    match kind_of(".git") {
        Some(ListedKind::Dir) => scan.repos.push(FoundRepo::DotGitDir(path.clone())),
        Some(ListedKind::File) => scan.repos.push(FoundRepo::GitFile(path.clone())),
        Some(ListedKind::Symlink) => scan.repos.push(FoundRepo::GitSymlink(path.clone())),
        Some(ListedKind::Other) | None => {
            // git checks a directory for a bare repository only after
            // finding no `.git` in it.
            if kind_of("HEAD") == Some(ListedKind::File)
                && kind_of("objects") == Some(ListedKind::Dir)
                && kind_of("refs") == Some(ListedKind::Dir)
            {
                scan.repos.push(FoundRepo::Bare(path));
                // A git directory: nothing below it is a work tree.
                return None;
            }
        }
    }
    // Not into `.git` itself: its entries are protected as a whole, and a
    // submodule's git dir under `.git/modules` lies under that mask.
    let pending = entries
        .into_iter()
        .filter(|(name, kind)| *kind == ListedKind::Dir && name != ".git")
        .map(|(name, _)| name)
        .collect();
    Some(Frame { path, dir, pending })
}

/// [`scan_root`] over the real filesystem on `threads` threads: the same
/// walk and the same findings (in another order), for large trees on
/// machines with several cores.
///
/// Directories are opened by their full path with `RESOLVE_NO_SYMLINKS`
/// (no worker holds its parent open): a directory swapped for a symlink
/// while the walk runs is not followed but recorded as unlisted, which the
/// plan then refuses to protect through.
pub fn scan_root_parallel(
    root: &Path,
    budget: usize,
    threads: usize,
) -> Result<RootScan, ScanTooLarge> {
    scan_parallel_with(root, budget, threads, &RealDirs)
}

/// [`scan_root_parallel`] listing each directory through `source` (which
/// may watch it first, see [`watched`]); directories are still opened by
/// their full path.
pub(crate) fn scan_parallel_with<S>(
    root: &Path,
    budget: usize,
    threads: usize,
    source: &S,
) -> Result<RootScan, ScanTooLarge>
where
    S: DirSource<Dir = std::os::fd::OwnedFd> + Sync,
{
    use std::sync::atomic::{AtomicUsize, Ordering};

    if threads <= 1 {
        return scan_root(root, budget, source);
    }
    let seen = AtomicUsize::new(0);
    let list_one = |(path, depth): (PathBuf, usize), scan: &mut RootScan| {
        if depth > MAX_DEPTH || path.as_os_str().len() > MAX_PATH_BYTES {
            return Err(crate::walk::Stopped);
        }
        source.entering(&path);
        let Some(dir) = open_beneath_no_symlinks(&path) else {
            scan.unlisted.push(path);
            return Ok(Vec::new());
        };
        let mut count = 0;
        let children =
            visit(scan, &mut count, source, path.clone(), dir).map_or_else(Vec::new, |frame| {
                frame
                    .pending
                    .into_iter()
                    .map(|name| (path.join(name), depth + 1))
                    .collect()
            });
        if seen.fetch_add(count, Ordering::SeqCst) + count > budget {
            return Err(crate::walk::Stopped);
        }
        Ok(children)
    };
    let Ok(scans) = crate::walk::parallel(vec![(root.to_owned(), 0)], threads, list_one) else {
        return Err(ScanTooLarge {
            root: root.to_owned(),
            budget,
        });
    };
    let mut merged = RootScan::default();
    for scan in scans {
        merged.repos.extend(scan.repos);
        merged.unlisted.extend(scan.unlisted);
    }
    merged.repos.sort();
    merged.unlisted.sort();
    Ok(merged)
}

/// Opens a directory by its absolute path, refusing a symlink anywhere on
/// the way (openat2 `RESOLVE_NO_SYMLINKS`; without openat2, `O_NOFOLLOW`
/// on the last component only, as the sequential walk's first open).
pub(crate) fn open_beneath_no_symlinks(path: &Path) -> Option<std::os::fd::OwnedFd> {
    use rustix::fs::{CWD, Mode, ResolveFlags};
    match rustix::fs::openat2(
        CWD,
        path,
        dir_flags(),
        Mode::empty(),
        ResolveFlags::NO_SYMLINKS,
    ) {
        Ok(fd) => Some(fd),
        Err(rustix::io::Errno::NOSYS) => {
            rustix::fs::openat(CWD, path, dir_flags(), Mode::empty()).ok()
        }
        Err(_) => None,
    }
}

/// The real filesystem: directories opened relative to their parent
/// (`O_NOFOLLOW`, so a symlink swapped in is not followed) and read with
/// `getdents64`, whose entry types need no `stat` per file.
#[derive(Debug, Clone, Copy, Default)]
pub struct RealDirs;

impl DirSource for RealDirs {
    type Dir = std::os::fd::OwnedFd;

    fn open_root(&self, path: &Path) -> Option<Self::Dir> {
        rustix::fs::openat(
            rustix::fs::CWD,
            path,
            dir_flags(),
            rustix::fs::Mode::empty(),
        )
        .ok()
    }

    fn open_child(&self, parent: &Self::Dir, _: &Path, name: &OsStr) -> Option<Self::Dir> {
        rustix::fs::openat(parent, name, dir_flags(), rustix::fs::Mode::empty()).ok()
    }

    fn list(&self, dir: &Self::Dir) -> Option<Vec<Listed>> {
        use rustix::fs::FileType;
        use std::os::unix::ffi::OsStrExt;
        let mut buf = Vec::with_capacity(32 * 1024);
        let mut raw = rustix::fs::RawDir::new(dir, buf.spare_capacity_mut());
        let mut listed = Vec::new();
        while let Some(entry) = raw.next() {
            let entry = entry.ok()?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let mut kind = match entry.file_type() {
                FileType::Directory => ListedKind::Dir,
                FileType::RegularFile => ListedKind::File,
                FileType::Symlink => ListedKind::Symlink,
                _ => ListedKind::Other,
            };
            if entry.file_type() == FileType::Unknown {
                // Filesystems without d_type: ask, without following.
                let flags = rustix::fs::AtFlags::SYMLINK_NOFOLLOW;
                if let Ok(stat) = rustix::fs::statat(dir, entry.file_name(), flags) {
                    kind = match FileType::from_raw_mode(stat.st_mode) {
                        FileType::Directory => ListedKind::Dir,
                        FileType::RegularFile => ListedKind::File,
                        FileType::Symlink => ListedKind::Symlink,
                        _ => ListedKind::Other,
                    };
                }
            }
            listed.push((OsStr::from_bytes(name).to_owned(), kind));
        }
        Some(listed)
    }
}

fn dir_flags() -> rustix::fs::OFlags {
    use rustix::fs::OFlags;
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use pretty_assertions::assert_eq;

    use super::*;

    struct Fixture {
        dirs: BTreeMap<PathBuf, Vec<Listed>>,
        unreadable: Vec<PathBuf>,
    }

    impl DirSource for Fixture {
        type Dir = PathBuf;
        fn open_root(&self, path: &Path) -> Option<PathBuf> {
            Some(path.to_owned())
        }
        fn open_child(&self, _: &PathBuf, parent: &Path, name: &OsStr) -> Option<PathBuf> {
            Some(parent.join(name))
        }
        fn list(&self, dir: &PathBuf) -> Option<Vec<Listed>> {
            if self.unreadable.contains(dir) {
                return None;
            }
            self.dirs.get(dir).cloned()
        }
    }

    fn tree(entries: &[(&str, ListedKind)]) -> BTreeMap<PathBuf, Vec<Listed>> {
        let mut dirs: BTreeMap<PathBuf, Vec<Listed>> = BTreeMap::new();
        dirs.entry("/r".into()).or_default();
        for (path, kind) in entries {
            let path = Path::new(path);
            let parent = path.parent().unwrap_or(Path::new("/")).to_owned();
            let name = path.file_name().unwrap_or_default().to_owned();
            dirs.entry(parent).or_default().push((name, *kind));
            if *kind == ListedKind::Dir {
                dirs.entry(path.to_owned()).or_default();
            }
        }
        dirs
    }

    #[test]
    fn repositories_are_found_at_any_depth_and_git_dirs_are_not_entered() {
        use ListedKind::{Dir, File, Symlink};
        let dirs = tree(&[
            ("/r/.git", Dir),
            ("/r/.git/modules", Dir),
            ("/r/.git/modules/sub", Dir),
            ("/r/.git/modules/sub/HEAD", File),
            ("/r/.git/modules/sub/objects", Dir),
            ("/r/.git/modules/sub/refs", Dir),
            ("/r/sub", Dir),
            ("/r/sub/.git", File),
            ("/r/node_modules", Dir),
            ("/r/node_modules/dep", Dir),
            ("/r/node_modules/dep/.git", Dir),
            ("/r/mirror.git", Dir),
            ("/r/mirror.git/HEAD", File),
            ("/r/mirror.git/objects", Dir),
            ("/r/mirror.git/refs", Dir),
            ("/r/mirror.git/inner", Dir),
            ("/r/mirror.git/inner/.git", Dir),
            ("/r/half", Dir),
            ("/r/half/HEAD", File),
            ("/r/half/refs", Dir),
            ("/r/linked", Dir),
            ("/r/linked/.git", Symlink),
            ("/r/secret", Dir),
        ]);
        let source = Fixture {
            dirs,
            unreadable: vec!["/r/secret".into()],
        };
        let mut scan = scan_root(Path::new("/r"), 1000, &source).unwrap();
        scan.repos.sort();
        assert_eq!(
            scan,
            RootScan {
                repos: vec![
                    FoundRepo::DotGitDir("/r".into()),
                    FoundRepo::DotGitDir("/r/node_modules/dep".into()),
                    FoundRepo::GitFile("/r/sub".into()),
                    FoundRepo::GitSymlink("/r/linked".into()),
                    FoundRepo::Bare("/r/mirror.git".into()),
                ],
                unlisted: vec!["/r/secret".into()],
            }
        );
    }

    #[test]
    fn the_parallel_walk_finds_what_the_sequential_one_does() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        for made in [
            "a/b/c/.git/hooks",
            "a/b/d",
            "node_modules/x/.git",
            "bare.git/objects",
            "bare.git/refs",
            "deep/1/2/3/4/5/6",
            "sub/inner",
        ] {
            std::fs::create_dir_all(root.join(made)).unwrap();
        }
        std::fs::write(root.join("bare.git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(root.join("sub/.git"), "gitdir: ../bare.git\n").unwrap();
        std::os::unix::fs::symlink("../a", root.join("deep/1/.git")).unwrap();
        let mut sequential = scan_root(&root, 1000, &RealDirs).unwrap();
        sequential.repos.sort();
        sequential.unlisted.sort();
        assert_eq!(sequential.repos.len(), 5, "{sequential:?}");
        for threads in [2, 3, 8] {
            assert_eq!(
                scan_root_parallel(&root, 1000, threads).unwrap(),
                sequential
            );
        }
        assert!(scan_root_parallel(&root, 5, 2).is_err());
    }

    #[test]
    fn a_tree_past_the_budget_is_reported_not_skipped() {
        use ListedKind::{Dir, File};
        let dirs = tree(&[("/r/a", Dir), ("/r/a/1", File), ("/r/a/2", File)]);
        let source = Fixture {
            dirs,
            unreadable: Vec::new(),
        };
        assert!(scan_root(Path::new("/r"), 3, &source).is_ok());
        assert_eq!(
            scan_root(Path::new("/r"), 2, &source),
            Err(ScanTooLarge {
                root: "/r".into(),
                budget: 2
            })
        );
    }
}

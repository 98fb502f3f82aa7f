//! The file jail: all in-process file I/O of tools goes through a [`Jail`]
//! rooted at the workspace root.
//!
//! # What it is
//!
//! A capability, not a check. [`Jail::open`] opens the root once as a
//! directory handle ([`cap_std::fs::Dir`]); every later path is resolved
//! *beneath that handle* by cap-std, which uses `openat2(RESOLVE_BENEATH |
//! RESOLVE_NO_MAGICLINKS)` where the kernel has it and a careful
//! component-by-component `O_NOFOLLOW` resolver otherwise. No string-prefix
//! or realpath comparison ever decides whether a path is inside: the kernel
//! (or cap-std's resolver) walks the real tree, so a path is inside because
//! it was *resolved* inside, even while other processes change the tree.
//!
//! Rules (each one has an attack test in `tests/jail_attacks.rs`):
//! - Paths are relative to the root. An absolute path is accepted only when it
//!   lies under the root component-wise (`/w/a` for root `/w`, never `/w2/a`)
//!   and is then made relative; any other absolute path is an escape.
//! - `..` may not climb above the root, neither on the text of the path nor
//!   physically (`a/up/../x` with `a/up -> ..` looks inside on paper; cap-std
//!   sees it climb out).
//! - Symlinks are followed only while they stay inside the root. An absolute
//!   target counts as inside when it lies under the root component-wise
//!   (`docs -> /w/doc/v2` for root `/w`): it is translated into a path
//!   relative to the root and resolved beneath it again (`jail/resolve.rs`),
//!   at most [`MAX_SYMLINK_HOPS`] links deep. A link that leads outside is
//!   refused with an error that names it.
//! - Writes are atomic (hidden temp file, fsync, rename) and never open the
//!   destination, so a symlink swapped in at the last moment is replaced, not
//!   written through. Removal and rename act on the entry itself (a symlink,
//!   not its target).
//! - Paths with NUL bytes are refused before they reach the kernel.
//!
//! # What it is not
//! - It protects only I/O that this process does through it. Commands that
//!   tools run are confined by the OS sandbox, not by the jail.
//! - A hard link inside the root to a file outside it (the jail cannot make
//!   one, but someone else could) is read like any file. Writes replace such
//!   a link instead of writing through it, so the outside file never changes.
//! - Mount points inside the root are crossed like directories.
//! - It sets no quota on the size or number of files written.
//! - It assumes whoever races it can write inside the root only: a process
//!   that can also write outside could move a directory out of the root
//!   while an operation holds it open (but could then write there anyway).

mod atomic;
mod error;
mod list;
mod protect;
mod resolve;

use std::ffi::OsStr;
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::time::SystemTime;

use cap_std::ambient_authority;
use cap_std::fs::{Dir, File, FileType, Metadata, MetadataExt, OpenOptions, OpenOptionsExt};
use rustix::fs::OFlags;

use self::atomic::Commit;
pub use self::error::JailError;
use self::error::{from_io, invalid};

/// How many symlinks a write, or a walk through links with absolute
/// targets, follows before giving up, like the kernel's ELOOP.
const MAX_SYMLINK_HOPS: u32 = 40;

/// Mode bits that survive a rewrite: permissions and sticky, but not
/// setuid/setgid (rewriting a setuid program must not keep it setuid).
const KEPT_MODE_BITS: u32 = 0o1777;

/// Initial buffer size cap for reads, so a large `limit` does not reserve it all.
const READ_CAPACITY_CAP: u64 = 1 << 20;

const NOT_REGULAR: &str =
    "not a regular file (a FIFO, socket or device); only regular files are read or written";

/// What a directory entry or a path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EntryKind {
    File,
    Dir,
    Symlink,
    Other,
}

/// One entry of [`Jail::list`]. Symlinks are described, not followed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryInfo {
    /// The entry's name, lossily converted to UTF-8.
    pub name: String,
    pub kind: EntryKind,
    pub size: u64,
    pub modified: Option<SystemTime>,
    pub mode: u32,
}

/// What [`Jail::stat`] (symlinks inside the root followed) and
/// [`Jail::lstat`] report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStat {
    pub kind: EntryKind,
    pub size: u64,
    pub modified: Option<SystemTime>,
    pub mode: u32,
}

/// A workspace root, opened as a capability. See the module docs.
#[derive(Debug)]
pub struct Jail {
    /// The root, opened once; every operation resolves beneath it.
    dir: Dir,
    /// The root's canonical path: for messages and absolute-path input.
    root: PathBuf,
    /// The root as given (made absolute), also accepted for absolute input.
    given: PathBuf,
    /// More protected entries, relative to the root: toolgate's own
    /// configuration, data and the files its config discovery reads
    /// ([`Jail::protect`]).
    extra_protected: Vec<PathBuf>,
    /// Entries no tool may read either, relative to the root: toolgate's
    /// own state and data ([`Jail::conceal`]).
    concealed: Vec<PathBuf>,
}

impl Jail {
    /// Opens `root`, which must be an existing directory.
    pub fn open(root: &Path) -> Result<Jail, JailError> {
        check_nul(root)?;
        let fail = |e: io::Error| from_io(root, root, e);
        let given = std::path::absolute(root).map_err(fail)?;
        let canonical = std::fs::canonicalize(&given).map_err(fail)?;
        let dir = Dir::open_ambient_dir(&canonical, ambient_authority()).map_err(fail)?;
        Ok(Jail {
            dir,
            root: canonical,
            given,
            extra_protected: Vec::new(),
            concealed: Vec::new(),
        })
    }

    /// Protects `path` (absolute) and everything under it like the built-in
    /// protected entries, when it lies inside this root; a path elsewhere is
    /// ignored. Attack: an agent that rewrites toolgate's own configuration
    /// (`backend = "none"`) or trust records runs unsandboxed next time.
    pub fn protect(&mut self, path: &Path) {
        let inside = path
            .strip_prefix(&self.root)
            .or_else(|_| path.strip_prefix(&self.given));
        if let Ok(rel) = inside {
            self.extra_protected.push(rel.to_owned());
        }
    }

    /// The same root opened again, with the same protected and concealed
    /// entries (for a caller that must change a jail others share).
    pub fn reopen(&self) -> Result<Jail, JailError> {
        let mut jail = Jail::open(&self.root)?;
        jail.given.clone_from(&self.given);
        jail.extra_protected.clone_from(&self.extra_protected);
        jail.concealed.clone_from(&self.concealed);
        Ok(jail)
    }

    /// Keeps `path` (absolute) and everything under it from being read,
    /// listed or written, when it lies inside this root; a path elsewhere is
    /// ignored. Attack: a root that holds toolgate's state directory (a root
    /// of `~/.local`, or `XDG_STATE_HOME` set inside the project) would let
    /// the agent read the checkpoints, process logs and audit records of
    /// every other workspace, which `snapshot` and the rest keep apart.
    pub fn conceal(&mut self, path: &Path) {
        let inside = path
            .strip_prefix(&self.root)
            .or_else(|_| path.strip_prefix(&self.given));
        if let Ok(rel) = inside {
            self.concealed.push(rel.to_owned());
        }
        self.protect(path);
    }

    /// Whether `rel` (relative to the root, as given) names a concealed
    /// entry or one under it, on its text alone (a walker that never follows
    /// symlinks needs no more).
    #[must_use]
    pub fn is_concealed(&self, rel: &Path) -> bool {
        self.concealed.iter().any(|c| rel.starts_with(c))
    }

    /// The concealed entries, relative to the root.
    #[must_use]
    pub fn concealed(&self) -> &[PathBuf] {
        &self.concealed
    }

    /// Refuses `opened` (found at `rel`) when its real location, as the
    /// kernel reports it, is concealed: a symlink inside the root may lead
    /// there under another name.
    fn refuse_concealed(
        &self,
        rel: &Path,
        opened: std::os::fd::BorrowedFd<'_>,
    ) -> Result<(), JailError> {
        if self.concealed.is_empty() {
            return Ok(());
        }
        let real = std::fs::read_link(format!("/proc/self/fd/{}", opened.as_raw_fd()));
        let located = real
            .ok()
            .and_then(|p| p.strip_prefix(&self.root).ok().map(Path::to_owned));
        // Without /proc the path as given decides.
        if self.is_concealed(located.as_deref().unwrap_or(rel)) || self.is_concealed(rel) {
            return Err(JailError::Concealed {
                path: rel.to_owned(),
            });
        }
        Ok(())
    }

    /// The workspace root (canonical).
    #[must_use]
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Accepts a relative path, or an absolute one that lies lexically under
    /// root (it is made relative). Anything else: `Escape`. NUL: `NulByte`.
    ///
    /// The result keeps inner `..` components (they are resolved physically
    /// later, so `link/..` means what the kernel says) and drops `.`.
    pub fn relative(&self, path: &Path) -> Result<PathBuf, JailError> {
        // Attack: `f\0../../etc/passwd` (C strings stop at NUL).
        check_nul(path)?;
        let rel = if path.has_root() {
            // Attack: absolute paths elsewhere (`/etc/passwd`) and prefix
            // siblings (`/w2/f`, `/w.bak/f` for root `/w`): `strip_prefix`
            // compares whole components, never string prefixes.
            path.strip_prefix(&self.root)
                .or_else(|_| path.strip_prefix(&self.given))
                .map_err(|_| self.escape(path))?
        } else {
            path
        };
        // Attack: `../x`, `a/../../x`, `"../".repeat(1000)`: a `..` that
        // climbs above the root on the text alone is refused outright.
        let mut depth = 0usize;
        let mut out = PathBuf::new();
        for component in rel.components() {
            match component {
                Component::Normal(name) => {
                    depth += 1;
                    out.push(name);
                }
                Component::ParentDir if depth > 0 => {
                    depth -= 1;
                    out.push("..");
                }
                Component::CurDir => {}
                Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                    return Err(self.escape(path));
                }
            }
        }
        Ok(out)
    }

    /// Reads a whole regular file, refusing one over `limit` bytes.
    pub fn read(&self, path: &Path, limit: u64) -> Result<Vec<u8>, JailError> {
        let rel = self.relative(path)?;
        let (mut file, meta) = self.open_regular(&rel)?;
        let too_large = |size| JailError::TooLarge {
            path: rel.clone(),
            size,
            limit,
        };
        if meta.len() > limit {
            return Err(too_large(meta.len()));
        }
        let capacity = meta.len().min(READ_CAPACITY_CAP);
        let mut buf = Vec::with_capacity(usize::try_from(capacity).unwrap_or(0));
        // Attack: a file that grows after the size check (or lies about its
        // size, like /proc files): never read more than limit + 1 bytes.
        (&mut file)
            .take(limit.saturating_add(1))
            .read_to_end(&mut buf)
            .map_err(|e| self.err(&rel, e))?;
        let read = buf.len() as u64;
        if read > limit {
            return Err(too_large(read.max(meta.len())));
        }
        Ok(buf)
    }

    /// Opens a regular file for reading, resolved beneath the root like every
    /// other path (symlinks followed only while they stay inside). Search and
    /// streaming readers use it to read without loading the file whole.
    pub fn open_file(&self, path: &Path) -> Result<(std::fs::File, FileStat), JailError> {
        let rel = self.relative(path)?;
        let (file, meta) = self.open_regular(&rel)?;
        Ok((file.into_std(), FileStat::of(&meta)))
    }

    /// Refuses `path` if it is (or lies under) a protected entry, on its text
    /// alone: a caller planning several writes checks them all before it
    /// makes the first. The writes themselves check again, where the path
    /// really leads.
    pub fn check_writable(&self, path: &Path) -> Result<(), JailError> {
        let rel = self.relative(path)?;
        self.refuse_protected_path(&rel)
    }

    /// Replaces (or creates) a file atomically: a temp file in the same
    /// directory is written, fsynced and renamed over the target. An existing
    /// file keeps its mode; a new one gets 0o644 minus the umask. Missing
    /// parent directories are created. A symlink at the target is followed
    /// while it stays inside the root.
    pub fn write(&self, path: &Path, data: &[u8]) -> Result<(), JailError> {
        let rel = self.relative(path)?;
        self.refuse_protected_path(&rel)?;
        self.write_at(&rel, data, 0)
    }

    /// Creates a new file atomically, failing with `AlreadyExists` if anything
    /// (even a dangling symlink) is at `path`. Missing parents are created.
    pub fn create_new(&self, path: &Path, data: &[u8]) -> Result<(), JailError> {
        let rel = self.relative(path)?;
        self.refuse_protected_path(&rel)?;
        let (parent, name) = self.split(&rel)?;
        self.make_dirs(parent)?;
        let dir = self.open_dir(parent)?;
        self.refuse_protected(&dir, &rel, name)?;
        // Attack: a dangling symlink `new -> ../outside/x`. O_CREAT would
        // follow it and create `x` outside; we never open `new` at all, and
        // the final rename is RENAME_NOREPLACE, which sees the link as taken.
        match dir.symlink_metadata(name) {
            Ok(_) => return Err(JailError::AlreadyExists { path: rel }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(self.err(&rel, e)),
        }
        atomic::replace(&dir, name, data, None, Commit::NoReplace).map_err(|e| self.err(&rel, e))
    }

    /// Metadata of `path`, following symlinks that stay inside the root.
    pub fn stat(&self, path: &Path) -> Result<FileStat, JailError> {
        self.metadata(path, true)
    }

    /// Metadata of the entry at `path` itself: a final symlink is described,
    /// not followed; the directories on the way must stay inside the root.
    pub fn lstat(&self, path: &Path) -> Result<FileStat, JailError> {
        self.metadata(path, false)
    }

    fn metadata(&self, path: &Path, follow_last: bool) -> Result<FileStat, JailError> {
        let rel = self.relative(path)?;
        let meta = self.beneath(&rel, follow_last, |p| {
            if follow_last {
                self.dir.metadata(p)
            } else {
                self.dir.symlink_metadata(p)
            }
        })?;
        Ok(FileStat::of(&meta))
    }

    /// Whether `path` exists (following symlinks inside the root). A path
    /// through a file (`file/x`) does not exist; an escape is still an error.
    pub fn exists(&self, path: &Path) -> Result<bool, JailError> {
        match self.stat(path) {
            Ok(_) => Ok(true),
            Err(JailError::NotFound { .. } | JailError::NotADirectory { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The entries of a directory, sorted by name. Symlink entries are
    /// reported as [`EntryKind::Symlink`] and not followed.
    pub fn list(&self, path: &Path) -> Result<Vec<EntryInfo>, JailError> {
        let rel = self.relative(path)?;
        let mut options = OpenOptions::new();
        // Opened for reading its entries (cap-std's `open_dir` gives an
        // O_PATH handle that getdents cannot read), resolved beneath the
        // root like every other path. O_DIRECTORY: a file, FIFO or device
        // at `rel` fails here (ENOTDIR) and is never opened.
        options
            .read(true)
            .custom_flags(OFlags::DIRECTORY.bits().cast_signed());
        let dir = self.beneath(&rel, true, |p| self.dir.open_with(p, &options))?;
        self.refuse_concealed(&rel, dir.as_fd())?;
        list::entries(&Dir::from_std_file(dir.into_std())).map_err(|(name, e)| match name {
            Some(name) => self.err(&rel.join(name), e),
            None => self.err(&rel, e),
        })
    }

    /// Creates a directory and its missing parents. Fine if it exists.
    pub fn mkdir_all(&self, path: &Path) -> Result<(), JailError> {
        let rel = self.relative(path)?;
        self.make_dirs(&rel)
    }

    /// Renames `from` to `to` (the entry itself: a symlink is moved, not its
    /// target), refusing to overwrite: `AlreadyExists`. Missing parents of `to`
    /// are created.
    pub fn rename(&self, from: &Path, to: &Path) -> Result<(), JailError> {
        let from_rel = self.relative(from)?;
        let to_rel = self.relative(to)?;
        self.refuse_protected_path(&to_rel)?;
        let (from_parent, from_name) = self.split(&from_rel)?;
        let (to_parent, to_name) = self.split(&to_rel)?;
        let from_dir = self.open_dir(from_parent)?;
        self.refuse_protected(&from_dir, &from_rel, from_name)?;
        from_dir
            .symlink_metadata(from_name)
            .map_err(|e| self.err(&from_rel, e))?;
        self.make_dirs(to_parent)?;
        let to_dir = self.open_dir(to_parent)?;
        self.refuse_protected(&to_dir, &to_rel, to_name)?;
        atomic::rename_noreplace(&from_dir, from_name, &to_dir, to_name).map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                self.err(&from_rel, e)
            } else {
                self.err(&to_rel, e)
            }
        })
    }

    /// Removes a file, a symlink (the link itself), or an empty directory.
    pub fn remove(&self, path: &Path) -> Result<(), JailError> {
        let rel = self.relative(path)?;
        let (parent, name) = self.split(&rel)?;
        let dir = self.open_dir(parent)?;
        self.refuse_protected(&dir, &rel, name)?;
        // Attack: `remove("link")` with `link -> ../outside/canary`: the entry
        // is inspected with lstat and unlinked by name in its own directory,
        // so the link goes and its target stays.
        let meta = dir.symlink_metadata(name).map_err(|e| self.err(&rel, e))?;
        let result = if meta.is_dir() {
            dir.remove_dir(name)
        } else {
            dir.remove_file(name)
        };
        result.map_err(|e| self.err(&rel, e))
    }

    fn write_at(&self, rel: &Path, data: &[u8], hops: u32) -> Result<(), JailError> {
        let (parent, name) = self.split(rel)?;
        if hops == 0 {
            self.make_dirs(parent)?;
        }
        let dir = self.open_dir(parent)?;
        self.refuse_protected(&dir, rel, name)?;
        let mode = match dir.symlink_metadata(name) {
            Ok(meta) if meta.is_symlink() => return self.write_through_link(&dir, rel, data, hops),
            Ok(meta) if meta.is_dir() => return Err(JailError::IsADirectory { path: rel.into() }),
            Ok(meta) if meta.is_file() => Some(meta.mode() & KEPT_MODE_BITS),
            Ok(_) => return Err(invalid(rel, NOT_REGULAR)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(self.err(rel, e)),
        };
        // Attack: `f` swapped for a symlink to outside after the lstat above.
        // The rename replaces whatever entry is at `name` (a symlink included)
        // and never opens it, so nothing outside is written.
        atomic::replace(&dir, name, data, mode, Commit::Replace).map_err(|e| self.err(rel, e))
    }

    /// Writes through the symlink at `rel` by writing its target's path,
    /// which goes through every check again.
    fn write_through_link(
        &self,
        dir: &Dir,
        rel: &Path,
        data: &[u8],
        hops: u32,
    ) -> Result<(), JailError> {
        // Attack: symlink loops (`a -> b -> a`): bounded like the kernel's ELOOP.
        if hops >= MAX_SYMLINK_HOPS {
            return Err(invalid(rel, "too many levels of symbolic links"));
        }
        let (parent, name) = self.split(rel)?;
        // Attack: `f -> /etc/passwd`, `f -> /w2/x` for root `/w`: an absolute
        // target is taken only when it lies under the root component-wise,
        // and then as a path relative to the root. A relative target is
        // joined to the link's directory. Either is resolved by cap-std
        // again, `..` included, so `f -> ../outside/x` is refused there, and
        // a dangling one is never created outside.
        let target = dir.read_link_contents(name).map_err(|e| self.err(rel, e))?;
        let next: PathBuf = if target.has_root() {
            let inside = target
                .strip_prefix(&self.root)
                .or_else(|_| target.strip_prefix(&self.given));
            match inside {
                Ok(inside) => inside.components().collect(),
                Err(_) => {
                    return Err(JailError::Escape {
                        path: rel.to_owned(),
                        root: self.root.clone(),
                        link: Some(rel.to_owned()),
                    });
                }
            }
        } else {
            parent.join(target).components().collect()
        };
        self.write_at(&next, data, hops + 1)
    }

    /// Creates `rel` and its missing parents, one component at a time. A
    /// symlink on the way with an absolute target inside the root is
    /// resolved first ([`resolve::links`]).
    fn make_dirs(&self, rel: &Path) -> Result<(), JailError> {
        match self.make_dirs_at(rel) {
            Err(JailError::Escape { .. }) => self.make_dirs_at(&resolve::links(self, rel, true)?),
            done => done,
        }
    }

    fn make_dirs_at(&self, rel: &Path) -> Result<(), JailError> {
        let mut prefix = PathBuf::new();
        for component in rel.components() {
            prefix.push(component);
            if let Component::Normal(_) = component {
                match self.dir.create_dir(&prefix) {
                    Ok(()) => continue,
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(self.err(&prefix, e)),
                }
            }
            // Already there, or `..`: resolve it (following symlinks beneath
            // the root) and require a directory. Attack: `link_out/x` where
            // `link_out -> ../outside` (EEXIST on the link must not count as
            // "directory exists"), and `link/../..` climbing out physically.
            let meta = self
                .dir
                .metadata(&prefix)
                .map_err(|e| self.err(&prefix, e))?;
            if !meta.is_dir() {
                return Err(JailError::NotADirectory { path: prefix });
            }
        }
        Ok(())
    }

    /// Opens a regular file for reading, beneath the root.
    fn open_regular(&self, rel: &Path) -> Result<(File, Metadata), JailError> {
        let mut options = OpenOptions::new();
        // Attack: a FIFO planted in the workspace would block open() forever
        // (O_NONBLOCK); a tty must not become our controlling one (O_NOCTTY).
        let flags = (OFlags::NONBLOCK | OFlags::NOCTTY).bits();
        options.read(true).custom_flags(flags.cast_signed());
        let file = self.beneath(rel, true, |p| self.dir.open_with(p, &options))?;
        self.refuse_concealed(rel, file.as_fd())?;
        let meta = file.metadata().map_err(|e| self.err(rel, e))?;
        if meta.is_dir() {
            return Err(JailError::IsADirectory { path: rel.into() });
        }
        if !meta.is_file() {
            return Err(invalid(rel, NOT_REGULAR));
        }
        Ok((file, meta))
    }

    /// Opens the directory `rel` beneath the root (`""` is the root).
    fn open_dir(&self, rel: &Path) -> Result<Dir, JailError> {
        self.beneath(rel, true, |p| self.dir.open_dir(p))
    }

    /// Runs `op` on `rel` (spelled for cap-std) beneath the root. When
    /// cap-std refuses it as leading out, the path is walked again with
    /// [`resolve::links`], which translates symlinks whose absolute target
    /// lies inside the root, and `op` runs once more on the result, beneath
    /// the root as before. A link that really leads out is refused by name.
    fn beneath<T>(
        &self,
        rel: &Path,
        follow_last: bool,
        op: impl Fn(&Path) -> io::Result<T>,
    ) -> Result<T, JailError> {
        match op(cap_path(rel)) {
            Err(e) if error::is_escape(&e) => {
                let resolved = resolve::links(self, rel, follow_last)?;
                op(cap_path(&resolved)).map_err(|e| self.err(rel, e))
            }
            result => result.map_err(|e| self.err(rel, e)),
        }
    }

    /// Splits `rel` into its parent and final name. A path with no final name
    /// (the root, or one ending in `..`) names a directory: `IsADirectory`, or
    /// `Escape` when that directory is outside the root.
    fn split<'a>(&self, rel: &'a Path) -> Result<(&'a Path, &'a OsStr), JailError> {
        if let (Some(parent), Some(name)) = (rel.parent(), rel.file_name()) {
            return Ok((parent, name));
        }
        self.beneath(rel, true, |p| self.dir.metadata(p))?;
        Err(JailError::IsADirectory { path: rel.into() })
    }

    /// Refuses to change `name` in `dir` when it is a protected entry. The
    /// directory's real location decides (see `protect`); without /proc the
    /// path as given does.
    fn refuse_protected(&self, dir: &Dir, rel: &Path, name: &OsStr) -> Result<(), JailError> {
        let located = protect::location(&self.root, dir, name);
        self.refuse_protected_path(located.as_deref().unwrap_or(rel))
    }

    /// Refuses a protected path on its text alone: checked before any missing
    /// parent is created, so a refused write leaves no empty directories behind.
    fn refuse_protected_path(&self, rel: &Path) -> Result<(), JailError> {
        let extra = self
            .extra_protected
            .iter()
            .any(|p| rel.starts_with(p))
            .then_some(protect::TOOLGATE_OWN);
        match extra.or_else(|| protect::protected_rule(&self.dir, rel)) {
            Some(rule) => Err(JailError::Protected {
                path: rel.to_owned(),
                rule,
            }),
            None => Ok(()),
        }
    }

    fn err(&self, rel: &Path, e: io::Error) -> JailError {
        from_io(&self.root, rel, e)
    }

    fn escape(&self, path: &Path) -> JailError {
        JailError::Escape {
            path: path.to_path_buf(),
            root: self.root.clone(),
            link: None,
        }
    }
}

fn check_nul(path: &Path) -> Result<(), JailError> {
    if path.as_os_str().as_bytes().contains(&0) {
        return Err(JailError::NulByte {
            path: path.to_path_buf(),
        });
    }
    Ok(())
}

/// cap-std spells the root itself `.`.
fn cap_path(rel: &Path) -> &Path {
    if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    }
}

impl FileStat {
    fn of(meta: &Metadata) -> FileStat {
        FileStat {
            kind: kind_of(meta.file_type()),
            size: meta.len(),
            modified: modified(meta),
            mode: meta.mode(),
        }
    }
}

fn kind_of(file_type: FileType) -> EntryKind {
    if file_type.is_symlink() {
        EntryKind::Symlink
    } else if file_type.is_dir() {
        EntryKind::Dir
    } else if file_type.is_file() {
        EntryKind::File
    } else {
        EntryKind::Other
    }
}

fn modified(meta: &Metadata) -> Option<SystemTime> {
    meta.modified()
        .ok()
        .map(cap_std::time::SystemTime::into_std)
}

#[cfg(test)]
mod tests;

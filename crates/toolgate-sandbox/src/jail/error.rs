//! The jail's error type and the mapping from `std::io::Error` to it.

use std::io;
use std::path::{Path, PathBuf};

/// Why a jailed file operation failed.
///
/// Every variant names the path it is about, relative to the workspace root
/// (except [`JailError::Escape`] and [`JailError::NulByte`], which repeat the
/// path as it was given), and its message says what to do next.
#[derive(Debug, thiserror::Error)]
pub enum JailError {
    /// The path leaves the root (absolute path outside it, `..` above it, a
    /// symlink pointing out). `link` names the symlink inside the root that
    /// leads out, when one does (its target is not shown: what lies outside
    /// the root stays out of the answers).
    #[error("{}", escape_message(path, root, link.as_deref()))]
    Escape {
        path: PathBuf,
        root: PathBuf,
        link: Option<PathBuf>,
    },
    /// The path is (or lies under) an entry no tool may change: git's hooks
    /// and config, shell start-up files, editor and agent configuration.
    #[error("{}", protected_message(path, rule))]
    Protected { path: PathBuf, rule: &'static str },
    /// The path is (or lies under) toolgate's own state or data directory,
    /// which lies inside this root: no tool may read it.
    #[error(
        "`{}` is toolgate's own state (approvals, audit records, checkpoints and process logs \
         of every workspace); no tool may read it and commands do not see it",
        shown(path)
    )]
    Concealed { path: PathBuf },
    /// The path contains a NUL byte, which no file name can hold.
    #[error("the path {path:?} contains a NUL byte; remove it, no file name can contain one")]
    NulByte { path: PathBuf },
    /// Nothing exists at the path.
    #[error(
        "`{}` does not exist; check the path, or list its directory to see what is there",
        shown(path)
    )]
    NotFound { path: PathBuf },
    /// Something already exists at the path and the operation refuses to replace it.
    #[error(
        "`{}` already exists; choose another name, or remove it first",
        shown(path)
    )]
    AlreadyExists { path: PathBuf },
    /// The path (or one of its leading components) is not a directory.
    #[error(
        "`{}` is not a directory (the path goes through a file); use a directory path",
        shown(path)
    )]
    NotADirectory { path: PathBuf },
    /// The path is a directory where a file was needed.
    #[error("`{}` is a directory; give the path of a file inside it", shown(path))]
    IsADirectory { path: PathBuf },
    /// The file is larger than the caller's limit.
    #[error(
        "`{}` is {size} bytes, over the limit of {limit} bytes; it cannot be read whole",
        shown(path)
    )]
    TooLarge {
        path: PathBuf,
        size: u64,
        limit: u64,
    },
    /// Any other I/O failure.
    #[error(
        "could not access `{}`: {source}; check the path and try again",
        shown(path)
    )]
    Io { path: PathBuf, source: io::Error },
}

fn escape_message(path: &Path, root: &Path, link: Option<&Path>) -> String {
    match link {
        None => format!(
            "`{}` is outside the workspace root {}; use a path inside it",
            shown(path),
            root.display()
        ),
        Some(link) => format!(
            "`{}` is outside the workspace root {}: the symlink `{}` leads outside the root; \
             the file tools reach only what lies inside it, so use a path inside it",
            shown(path),
            root.display(),
            link.display()
        ),
    }
}

/// How a relative path is shown in messages: the root itself is `.`.
fn shown(path: &Path) -> std::path::Display<'_> {
    if path.as_os_str().is_empty() {
        Path::new(".").display()
    } else {
        path.display()
    }
}

/// True for cap-std's "a path led outside of the filesystem" error. It is how
/// cap-std reports both openat2's `EXDEV` (`RESOLVE_BENEATH` refused) and its
/// own resolver's refusal: a `PermissionDenied` that carries no OS error code
/// (a real `EACCES` always carries one).
pub(crate) fn is_escape(err: &io::Error) -> bool {
    err.kind() == io::ErrorKind::PermissionDenied && err.raw_os_error().is_none()
}

/// Maps an I/O error about `path` (relative to `root`) to a [`JailError`].
pub(crate) fn from_io(root: &Path, path: &Path, err: io::Error) -> JailError {
    let path = path.to_path_buf();
    if is_escape(&err) {
        return JailError::Escape {
            path,
            root: root.to_path_buf(),
            link: None,
        };
    }
    match err.kind() {
        io::ErrorKind::NotFound => JailError::NotFound { path },
        io::ErrorKind::AlreadyExists => JailError::AlreadyExists { path },
        io::ErrorKind::NotADirectory => JailError::NotADirectory { path },
        io::ErrorKind::IsADirectory => JailError::IsADirectory { path },
        _ => JailError::Io { path, source: err },
    }
}

/// An `Io` error with a message of our own.
pub(crate) fn invalid(path: &Path, message: &'static str) -> JailError {
    JailError::Io {
        path: path.to_path_buf(),
        source: io::Error::new(io::ErrorKind::InvalidInput, message),
    }
}

fn protected_message(path: &Path, rule: &str) -> String {
    let why = if rule == super::protect::TOOLGATE_OWN || rule == crate::spec::CONFIG_FILE_NAME {
        "toolgate's own configuration and data decide how commands are sandboxed and what \
         the policy allows"
    } else {
        "git hooks and config, shell start-up files and editor or agent configuration can run \
         programs on the host"
    };
    format!(
        "`{}` is protected (`{rule}`): {why}, so no tool may write, move or remove them; ask \
         the user to change it",
        shown(path)
    )
}

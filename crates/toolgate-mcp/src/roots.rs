//! Client roots narrow the operator's roots; they never widen them.
//!
//! An MCP client may say which directories the user is working in. toolgate
//! takes that as a restriction: the roots a session works in are the parts
//! of the operator's roots that the client's roots cover. A client root
//! outside every operator root is refused (and logged): a client, or a
//! prompt-injected model steering it, must not be able to point the
//! sandbox at `/` or at someone else's home.

use std::path::{Path, PathBuf};

use percent_encoding::percent_decode_str;

/// The outcome of narrowing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Narrowed {
    /// The roots the session works in, each inside an operator root.
    pub roots: Vec<PathBuf>,
    /// The client roots that were not used, and why.
    pub refused: Vec<RefusedRoot>,
}

/// A client root that does not narrow anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedRoot {
    /// The URI as the client sent it.
    pub uri: String,
    /// Why it was refused.
    pub reason: String,
}

/// Intersects the client's roots (`file://` URIs) with the operator's roots
/// (absolute, canonical directories).
///
/// A client root inside an operator root becomes a root of the session; a
/// client root that contains operator roots keeps those operator roots (the
/// intersection); anything else is refused. Client roots are resolved
/// (symlinks included) before they are compared, so a link inside a root that
/// points outside it is judged by where it leads.
pub fn narrow_roots(operator: &[PathBuf], client: &[String]) -> Narrowed {
    let mut narrowed = Narrowed {
        roots: Vec::new(),
        refused: Vec::new(),
    };
    for uri in client {
        let mut refuse = |reason: String| {
            narrowed.refused.push(RefusedRoot {
                uri: uri.clone(),
                reason,
            })
        };
        let path = match file_uri_path(uri) {
            Ok(path) => path,
            Err(reason) => {
                refuse(reason);
                continue;
            }
        };
        let path = match std::fs::canonicalize(&path) {
            Ok(path) if path.is_dir() => path,
            Ok(_) => {
                refuse(format!("{} is not a directory", path.display()));
                continue;
            }
            Err(e) => {
                refuse(format!("{}: {e}", path.display()));
                continue;
            }
        };
        let inside = operator.iter().any(|root| path.starts_with(root));
        let covered: Vec<&PathBuf> = operator.iter().filter(|r| r.starts_with(&path)).collect();
        if inside {
            narrowed.roots.push(path);
        } else if !covered.is_empty() {
            narrowed.roots.extend(covered.into_iter().cloned());
        } else {
            refuse(format!(
                "{} is outside every root toolgate was started with ({})",
                path.display(),
                shown(operator)
            ));
        }
    }
    narrowed.roots.sort();
    narrowed.roots.dedup();
    // A root inside another adds nothing.
    let all = narrowed.roots.clone();
    narrowed
        .roots
        .retain(|r| !all.iter().any(|other| other != r && r.starts_with(other)));
    narrowed
}

pub(crate) fn shown(roots: &[PathBuf]) -> String {
    let names: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
    names.join(", ")
}

/// The local path of a `file://` URI (host empty or `localhost`).
fn file_uri_path(uri: &str) -> Result<PathBuf, String> {
    let rest = uri
        .strip_prefix("file://")
        .ok_or_else(|| format!("`{uri}` is not a file:// URI"))?;
    let path = rest.strip_prefix("localhost").unwrap_or(rest);
    if !path.starts_with('/') {
        return Err(format!(
            "`{uri}` names a remote host or a relative path; only local file:///… roots are used"
        ));
    }
    let path = path.split(['?', '#']).next().unwrap_or(path);
    let decoded: Vec<u8> = percent_decode_str(path).collect();
    if decoded.contains(&0) {
        return Err(format!("`{uri}` contains a NUL byte"));
    }
    use std::os::unix::ffi::OsStrExt;
    Ok(Path::new(std::ffi::OsStr::from_bytes(&decoded)).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn uri(path: &Path) -> String {
        format!("file://{}", path.display())
    }

    #[test]
    fn client_roots_narrow_and_never_widen() -> std::io::Result<()> {
        let base = tempfile::tempdir()?;
        let base = std::fs::canonicalize(base.path())?;
        let root = base.join("project");
        let sub = root.join("src");
        let other = base.join("other");
        for dir in [&sub, &other] {
            std::fs::create_dir_all(dir)?;
        }
        std::os::unix::fs::symlink(&other, root.join("escape"))?;
        let operator = vec![root.clone()];
        let cases: Vec<(Vec<String>, Vec<PathBuf>, usize)> = vec![
            // Inside: the session works in the client's directory only.
            (vec![uri(&sub)], vec![sub.clone()], 0),
            // Wider: the operator's root, not the client's.
            (vec![uri(&base)], vec![root.clone()], 0),
            (vec![uri(Path::new("/"))], vec![root.clone()], 0),
            // Outside: refused.
            (vec![uri(&other)], vec![], 1),
            // A link inside the root that leads outside it: refused.
            (vec![uri(&root.join("escape"))], vec![], 1),
            // `..` cannot climb out either.
            (vec![format!("{}/../other", uri(&root))], vec![], 1),
            // Percent-encoding is decoded before the comparison.
            (
                vec![format!("file://localhost{}/%73rc", root.display())],
                vec![sub.clone()],
                0,
            ),
            (vec!["https://example.com/".to_owned()], vec![], 1),
            (vec!["file://server/share".to_owned()], vec![], 1),
            (vec![uri(&root.join("missing"))], vec![], 1),
            // Nested roots collapse into the outer one.
            (vec![uri(&sub), uri(&root)], vec![root.clone()], 0),
        ];
        for (client, roots, refused) in cases {
            let narrowed = narrow_roots(&operator, &client);
            assert_eq!(narrowed.roots, roots, "{client:?}");
            assert_eq!(narrowed.refused.len(), refused, "{client:?}: {narrowed:?}");
        }
        Ok(())
    }
}

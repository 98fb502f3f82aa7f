//! Workspace roots from portable hints.
//!
//! A stored definition (a tool server's configuration, a task template)
//! names its roots as hints, never as resolved absolute paths, so it works
//! on any machine. At task time each hint is resolved: an alias in the
//! operator's root map wins; otherwise the hint is a path relative to the
//! caller's working directory and must stay inside it. An absolute hint is
//! not portable and is refused, and so is any hint that escapes the cwd,
//! by `..` or through a symlink.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

/// Aliases the operator defined, such as `repo -> /srv/checkouts/app`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RootMap {
    aliases: BTreeMap<String, PathBuf>,
}

/// A hint that does not resolve to a usable root.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RootError {
    /// An absolute path is machine-specific.
    #[error(
        "root `{hint}` is an absolute path, which is not portable: use a path relative to the working directory or an alias from the operator's root map"
    )]
    AbsoluteRootNotPortable {
        /// The hint.
        hint: String,
    },
    /// The hint leaves the caller's working directory.
    #[error("root `{hint}` escapes the caller's working directory {}", cwd.display())]
    RootEscapesCallerCwd {
        /// The hint.
        hint: String,
        /// The cwd it must stay in.
        cwd: PathBuf,
    },
    /// The resolved path is not an existing directory.
    #[error("root `{hint}` resolves to {}, which is not an existing directory", path.display())]
    NotADirectory {
        /// The hint.
        hint: String,
        /// Where it led.
        path: PathBuf,
    },
    /// An alias definition is malformed.
    #[error("root alias `{0}` is invalid: write it as name=/absolute/path")]
    InvalidAlias(String),
}

impl RootMap {
    /// An empty map.
    pub fn new() -> Self {
        RootMap::default()
    }

    /// Adds `name -> path`; the path must be absolute.
    pub fn insert(&mut self, name: &str, path: PathBuf) -> Result<(), RootError> {
        let valid = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
            && path.is_absolute();
        if !valid {
            return Err(RootError::InvalidAlias(format!(
                "{name}={}",
                path.display()
            )));
        }
        self.aliases.insert(name.to_owned(), path);
        Ok(())
    }

    /// Parses `name=/absolute/path`.
    pub fn insert_definition(&mut self, definition: &str) -> Result<(), RootError> {
        let Some((name, path)) = definition.split_once('=') else {
            return Err(RootError::InvalidAlias(definition.to_owned()));
        };
        self.insert(name, PathBuf::from(path))
    }

    /// The alias's path.
    pub fn get(&self, name: &str) -> Option<&Path> {
        self.aliases.get(name).map(PathBuf::as_path)
    }

    /// Resolves one hint for a caller working in `cwd`.
    pub fn resolve(&self, hint: &str, cwd: &Path) -> Result<PathBuf, RootError> {
        if let Some(path) = self.get(hint) {
            return existing_dir(hint, path);
        }
        let relative = Path::new(hint);
        if relative.is_absolute() {
            return Err(RootError::AbsoluteRootNotPortable {
                hint: hint.to_owned(),
            });
        }
        let escape = || RootError::RootEscapesCallerCwd {
            hint: hint.to_owned(),
            cwd: cwd.to_owned(),
        };
        // Lexically first: `..` may never climb above the cwd, whatever exists.
        let mut depth = 0usize;
        for component in relative.components() {
            match component {
                Component::ParentDir => depth = depth.checked_sub(1).ok_or_else(escape)?,
                Component::Normal(_) => depth += 1,
                _ => {}
            }
        }
        // Then physically: a symlink inside the cwd may point out of it.
        let base = std::fs::canonicalize(cwd).map_err(|_| RootError::NotADirectory {
            hint: hint.to_owned(),
            path: cwd.to_owned(),
        })?;
        let resolved = existing_dir(hint, &cwd.join(relative))?;
        if !resolved.starts_with(&base) {
            return Err(escape());
        }
        Ok(resolved)
    }

    /// Resolves every hint; duplicates are kept once, in order.
    pub fn resolve_all(&self, hints: &[String], cwd: &Path) -> Result<Vec<PathBuf>, RootError> {
        let mut roots: Vec<PathBuf> = Vec::new();
        for hint in hints {
            let root = self.resolve(hint, cwd)?;
            if !roots.contains(&root) {
                roots.push(root);
            }
        }
        Ok(roots)
    }
}

fn existing_dir(hint: &str, path: &Path) -> Result<PathBuf, RootError> {
    match std::fs::canonicalize(path) {
        Ok(real) if real.is_dir() => Ok(real),
        _ => Err(RootError::NotADirectory {
            hint: hint.to_owned(),
            path: path.to_owned(),
        }),
    }
}

/// `path` with its longest existing ancestor canonicalized (symlinks
/// resolved) and the rest, which does not exist yet, kept as it is: the
/// form to compare with canonical roots for a path toolgate may create
/// later (its own data directory).
pub fn canonical_lenient(path: &Path) -> PathBuf {
    let mut missing = Vec::new();
    for ancestor in path.ancestors() {
        if let Ok(canonical) = std::fs::canonicalize(ancestor) {
            return missing.iter().rev().fold(canonical, |p, name| p.join(name));
        }
        if let Some(name) = ancestor.file_name() {
            missing.push(name.to_owned());
        }
    }
    path.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn hints_resolve_or_fail_with_typed_errors() {
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        let cwd = base.join("cwd");
        for dir in ["cwd/src", "cwd/lib", "elsewhere", "aliased"] {
            std::fs::create_dir_all(base.join(dir)).unwrap();
        }
        std::os::unix::fs::symlink(base.join("elsewhere"), cwd.join("out")).unwrap();
        std::os::unix::fs::symlink(cwd.join("lib"), cwd.join("in")).unwrap();
        std::fs::write(cwd.join("file"), "").unwrap();
        let mut map = RootMap::new();
        map.insert("repo", base.join("aliased")).unwrap();
        map.insert("src", base.join("elsewhere")).unwrap();

        let escape = |hint: &str| RootError::RootEscapesCallerCwd {
            hint: hint.into(),
            cwd: cwd.clone(),
        };
        let cases: Vec<(&str, Result<PathBuf, RootError>)> = vec![
            (".", Ok(cwd.clone())),
            ("lib", Ok(cwd.join("lib"))),
            ("src/../lib", Ok(cwd.join("lib"))),
            ("in", Ok(cwd.join("lib"))),
            // An alias wins over a directory of the same name.
            ("src", Ok(base.join("elsewhere"))),
            ("repo", Ok(base.join("aliased"))),
            (
                "/etc",
                Err(RootError::AbsoluteRootNotPortable {
                    hint: "/etc".into(),
                }),
            ),
            ("..", Err(escape(".."))),
            ("../elsewhere", Err(escape("../elsewhere"))),
            ("src/../../elsewhere", Err(escape("src/../../elsewhere"))),
            ("out", Err(escape("out"))),
            (
                "missing",
                Err(RootError::NotADirectory {
                    hint: "missing".into(),
                    path: cwd.join("missing"),
                }),
            ),
            (
                "file",
                Err(RootError::NotADirectory {
                    hint: "file".into(),
                    path: cwd.join("file"),
                }),
            ),
        ];
        for (hint, expected) in cases {
            assert_eq!(map.resolve(hint, &cwd), expected, "{hint}");
        }
        let deep = "../".repeat(1000) + "etc";
        assert_eq!(map.resolve(&deep, &cwd), Err(escape(&deep)));
        assert_eq!(
            map.resolve_all(&["lib".into(), "in".into(), "repo".into()], &cwd),
            Ok(vec![cwd.join("lib"), base.join("aliased")])
        );
    }

    #[test]
    fn alias_definitions_are_checked() {
        let mut map = RootMap::new();
        map.insert_definition("app=/srv/app").unwrap();
        assert_eq!(map.get("app"), Some(Path::new("/srv/app")));
        for bad in ["app", "=/srv", "app=relative", "a b=/srv"] {
            assert_eq!(
                map.insert_definition(bad),
                Err(RootError::InvalidAlias(bad.to_owned())),
                "{bad}"
            );
        }
    }
}

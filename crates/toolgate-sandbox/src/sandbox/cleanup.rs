//! Protected names that can only be checked after a run (the placeholders
//! bwrap needs as mount points are the journal's business, [`super::journal`]).

use std::path::PathBuf;

use super::SandboxError;
use super::new_repos::RepoWatch;
use crate::spec::{GIT_DIR_AUDITED, SandboxSpec};

/// The protected names that can only be checked after a run (the plan
/// lists them: `commondir` of every git dir inside a root where none
/// exists). A git dir that has none never gets one legitimately, so one a
/// command made is removed after the run, whichever run made it.
pub(super) struct Audit {
    watched: Vec<(PathBuf, PathBuf)>,
    /// The repositories before the run, to neutralise those made during it.
    repos: Option<RepoWatch>,
}

impl Audit {
    /// Refuses a root whose own repository is already redirected.
    pub(super) fn before(spec: &SandboxSpec) -> Result<Audit, SandboxError> {
        for root in &spec.writable_roots {
            if !root.join(".git").is_dir() {
                continue;
            }
            for name in GIT_DIR_AUDITED {
                let path = root.join(".git").join(name);
                if std::fs::symlink_metadata(&path).is_ok() {
                    return Err(SandboxError::Setup(format!(
                        "{} exists; it redirects git on the host to another directory's config and hooks. Inspect and remove it before running commands here",
                        path.display()
                    )));
                }
            }
        }
        Ok(Audit {
            watched: Vec::new(),
            repos: None,
        })
    }

    /// Watches `paths` (absolute, each inside one of `roots`).
    pub(super) fn watch(&mut self, paths: &[PathBuf], roots: &[PathBuf]) {
        for path in paths {
            let root = roots
                .iter()
                .filter(|r| path.starts_with(r))
                .max_by_key(|r| r.components().count());
            if let Some(root) = root
                && let Ok(relative) = path.strip_prefix(root)
            {
                self.watched.push((root.clone(), relative.to_owned()));
            }
        }
    }

    /// Neutralises, after the run, every repository `repos` did not know.
    pub(super) fn watch_repos(&mut self, repos: RepoWatch) {
        self.repos = Some(repos);
    }

    /// Removes what a command created, saying so.
    pub(super) fn after(mut self) -> Vec<String> {
        let mut warnings = self.sweep();
        if let Some(repos) = &mut self.repos {
            warnings.extend(repos.neutralise());
        }
        warnings
    }

    fn sweep(&mut self) -> Vec<String> {
        let mut warnings = Vec::new();
        for (root, name) in std::mem::take(&mut self.watched) {
            let Ok(dir) = cap_std::fs::Dir::open_ambient_dir(&root, cap_std::ambient_authority())
            else {
                continue;
            };
            if dir.symlink_metadata(&name).is_ok() {
                let path = root.join(&name);
                let removed = dir
                    .remove_file(&name)
                    .or_else(|_| dir.remove_dir_all(&name));
                warnings.push(match removed {
                    Ok(()) => format!(
                        "removed {} that a command created (it would redirect git on the host)",
                        path.display()
                    ),
                    Err(e) => format!(
                        "a command created {}, which could not be removed: {e}; delete it before running git there",
                        path.display()
                    ),
                });
            }
        }
        warnings
    }
}

impl Drop for Audit {
    /// A cancelled run is checked too (its warnings have nowhere to go).
    fn drop(&mut self) {
        self.sweep();
        if let Some(repos) = &mut self.repos {
            repos.neutralise();
        }
    }
}

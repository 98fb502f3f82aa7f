//! What is undone after a run: the placeholders bwrap leaves on the host,
//! and protected names that can only be checked afterwards.

use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::SandboxError;
use crate::spec::{AUDITED_AFTER_RUN, SandboxSpec};

/// The placeholders bwrap creates on the host as mount points for absent
/// protected names, removed again once no run uses their root.
///
/// Every run holds a shared lock on a lock file per writable root (in the
/// state dir) for its whole duration and records the placeholders it
/// creates there. At the end it tries for the exclusive lock: only the last
/// run in a root gets it, and only then are the recorded placeholders
/// removed. Removing them earlier would detach the masks of another run
/// still using them (unlinking a mount point in another mount namespace
/// detaches that mount) and let its command create the protected name.
/// The kernel drops the locks of a crashed process, so a later run cleans up
/// after it.
pub(super) struct Placeholders {
    roots: Vec<(PathBuf, std::fs::File)>,
    created: Vec<PathBuf>,
}

impl Placeholders {
    /// Takes the shared lock on each root's lock file.
    pub(super) fn lock(state_dir: &Path, roots: &[PathBuf]) -> Result<Placeholders, SandboxError> {
        let dir = state_dir.join("roots");
        std::fs::create_dir_all(&dir)
            .map_err(|e| SandboxError::Setup(format!("{}: {e}", dir.display())))?;
        let mut locks = Vec::new();
        for root in roots {
            let path = dir.join(format!(
                "{:016x}.lock",
                fnv1a(root.as_os_str().as_encoded_bytes())
            ));
            let file = std::fs::OpenOptions::new()
                .create(true)
                .read(true)
                .append(true)
                .open(&path)
                .map_err(|e| SandboxError::Setup(format!("{}: {e}", path.display())))?;
            rustix::fs::flock(&file, rustix::fs::FlockOperation::LockShared)
                .map_err(|e| SandboxError::Setup(format!("lock {}: {e}", path.display())))?;
            locks.push((root.clone(), file));
        }
        Ok(Placeholders {
            roots: locks,
            created: Vec::new(),
        })
    }

    /// Records the placeholders this run's plan creates.
    pub(super) fn record(&mut self, created: &[PathBuf]) -> Result<(), SandboxError> {
        for path in created {
            // The deepest root, as the plan chose it: a placeholder must be
            // recorded (and later removed) under the root whose lock every
            // run that uses it holds.
            let Some((_, file)) = self
                .roots
                .iter_mut()
                .filter(|(r, _)| path.starts_with(r))
                .max_by_key(|(r, _)| r.components().count())
            else {
                continue;
            };
            let mut line = path.as_os_str().as_encoded_bytes().to_vec();
            line.push(b'\n');
            // One append per path: atomic between runs sharing the file.
            file.write_all(&line)
                .map_err(|e| SandboxError::Setup(format!("recording {}: {e}", path.display())))?;
        }
        self.created.extend(created.iter().cloned());
        Ok(())
    }
}

impl Drop for Placeholders {
    fn drop(&mut self) {
        for (root, file) in &mut self.roots {
            use rustix::fs::FlockOperation::{NonBlockingLockExclusive, Unlock};
            // If two runs end together, each may see the other's shared lock;
            // unlocking and trying again lets the later of them through.
            if rustix::fs::flock(&*file, NonBlockingLockExclusive).is_err()
                && (rustix::fs::flock(&*file, Unlock).is_err()
                    || rustix::fs::flock(&*file, NonBlockingLockExclusive).is_err())
            {
                // Another run still uses this root; the last one cleans up.
                continue;
            }
            let mut recorded = Vec::new();
            if std::io::Seek::rewind(file).is_ok()
                && std::io::Read::read_to_end(file, &mut recorded).is_ok()
            {
                remove_placeholders(root, &recorded);
            }
            let _ = file.set_len(0);
        }
    }
}

/// Removes each recorded placeholder that is still an empty file or an
/// empty directory, resolving paths beneath the root without following a
/// symlink out of it.
fn remove_placeholders(root: &Path, recorded: &[u8]) {
    let Ok(dir) = cap_std::fs::Dir::open_ambient_dir(root, cap_std::ambient_authority()) else {
        return;
    };
    let mut paths: Vec<&[u8]> = recorded
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    paths.sort();
    paths.dedup();
    // Deepest first, so a placeholder's parent can go after it.
    paths.sort_by_key(|p| std::cmp::Reverse(p.iter().filter(|b| **b == b'/').count()));
    for raw in paths {
        let path = Path::new(std::ffi::OsStr::from_bytes(raw));
        let Ok(relative) = path.strip_prefix(root) else {
            continue;
        };
        match dir.symlink_metadata(relative) {
            Ok(m) if m.is_file() && m.len() == 0 => {
                let _ = dir.remove_file(relative);
            }
            // remove_dir refuses anything but an empty directory.
            Ok(m) if m.is_dir() => {
                let _ = dir.remove_dir(relative);
            }
            _ => {}
        }
    }
}

/// The protected names that can only be checked after a run. A main
/// repository (`.git` a directory) never holds them legitimately, so they
/// are refused before and removed after every run, whichever run made them.
pub(super) struct Audit {
    watched: Vec<(PathBuf, PathBuf)>,
}

impl Audit {
    pub(super) fn before(spec: &SandboxSpec) -> Result<Audit, SandboxError> {
        let mut watched = Vec::new();
        for root in &spec.writable_roots {
            if !root.join(".git").is_dir() {
                continue;
            }
            for name in AUDITED_AFTER_RUN {
                let path = root.join(name);
                if std::fs::symlink_metadata(&path).is_ok() {
                    return Err(SandboxError::Setup(format!(
                        "{} exists; it redirects git on the host to another directory's config and hooks. Inspect and remove it before running commands here",
                        path.display()
                    )));
                }
                watched.push((root.clone(), PathBuf::from(name)));
            }
        }
        Ok(Audit { watched })
    }

    /// Removes what a command created, saying so.
    pub(super) fn after(mut self) -> Vec<String> {
        self.sweep()
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
    }
}

/// FNV-1a: a stable name for a root's lock file.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

//! The placeholders toolgate creates on the host as mount points for absent
//! protected names, written down before they exist and removed once no run
//! needs them, also after a crash.
//!
//! Every run keeps a journal of its own in `STATE/placeholders/`, locked
//! (flock, exclusive) for as long as the run lives: the placeholders it
//! made, and the existing empty entries it masks (which may be another
//! run's placeholders). Planning and recording happen under a shared lock
//! on `STATE/placeholders/lock`; a sweep takes that lock exclusively, so it
//! never sees a run between its plan and its journal.
//!
//! A sweep (at the end of every run, and whenever a [`super::Sandbox`] is
//! made, i.e. at every toolgate start) removes each placeholder recorded in
//! a journal nobody holds any more, unless a live journal lists the same
//! path, it is no longer an empty placeholder of ours (an empty directory
//! of mode 0555, an empty file of mode 0444, toolgate's marks), or, where
//! the owner died, some mount namespace still has a mount on it (a sandbox
//! that outlived its toolgate). Removing a mount point that another
//! namespace uses would detach that mount and let its command create the
//! protected name.

use std::collections::HashSet;
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::PermissionsExt;

use cap_std::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use rustix::fs::FlockOperation;
use toolgate_core::text::hex;

use super::SandboxError;
use crate::plan::BwrapPlan;

/// The mode of a placeholder directory: how a sweep knows it for one of ours.
const DIR_MODE: u32 = 0o555;
/// The mode of a placeholder file.
const FILE_MODE: u32 = 0o444;

/// This run's journal, held until the run ends.
pub(super) struct Journal {
    dir: PathBuf,
    /// The shared planning lock, released once the placeholders exist.
    planning: Option<File>,
    /// This run's journal, locked; `None` after the final sweep.
    own: Option<(PathBuf, File)>,
}

impl Journal {
    /// Starts this run's journal (under the planning lock, which stays held
    /// until [`Journal::create`]).
    pub(super) fn begin(state_dir: &Path) -> Result<Journal, SandboxError> {
        let dir = state_dir.join("placeholders");
        std::fs::create_dir_all(&dir).map_err(|e| setup(&dir, e))?;
        let planning = lock_file(&dir.join("lock"), FlockOperation::LockShared)?;
        static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let pid = std::process::id();
        let path = dir.join(format!("{pid}-{seq}.journal"));
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| setup(&path, e))?;
        rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive)
            .map_err(|e| setup(&path, e.into()))?;
        let ticks = start_ticks(pid).unwrap_or(0);
        file.write_all(format!("owner {pid} {ticks}\n").as_bytes())
            .map_err(|e| setup(&path, e))?;
        Ok(Journal {
            dir,
            planning: Some(planning),
            own: Some((path, file)),
        })
    }

    /// Records, then creates, the placeholders of `plan` (and records the
    /// empty entries it masks), then releases the planning lock.
    pub(super) fn create(
        &mut self,
        plan: &BwrapPlan,
        roots: &[PathBuf],
    ) -> Result<(), SandboxError> {
        let Some((path, file)) = &mut self.own else {
            return Ok(());
        };
        let mut text = Vec::new();
        for used in &plan.empty_masked {
            text.extend_from_slice(b"uses ");
            text.extend_from_slice(hex(used.as_os_str().as_bytes()).as_bytes());
            text.push(b'\n');
        }
        let mut made = Vec::new();
        for placeholder in &plan.created_mount_points {
            // The deepest root holding it: removal opens that root and
            // works beneath it, never following a symlink out.
            let Some(root) = roots
                .iter()
                .filter(|r| placeholder.starts_with(r))
                .max_by_key(|r| r.components().count())
            else {
                continue;
            };
            text.extend_from_slice(b"made ");
            text.extend_from_slice(hex(root.as_os_str().as_bytes()).as_bytes());
            text.push(b' ');
            text.extend_from_slice(hex(placeholder.as_os_str().as_bytes()).as_bytes());
            text.push(b'\n');
            made.push((root.clone(), placeholder.clone()));
        }
        // Written down before any exists: a crash after this leaves
        // records a later sweep acts on, never an unrecorded placeholder.
        // Only what is made must outlive a crash of the machine: the entries
        // a run uses matter to other runs while it lives, which read them
        // from the same page cache, and no run outlives a reboot. Nothing to
        // record (stage 2 guards absent names), nothing to write.
        if !text.is_empty() {
            file.write_all(&text).map_err(|e| setup(path, e))?;
        }
        if !made.is_empty() {
            file.sync_data().map_err(|e| setup(path, e))?;
        }
        for (root, placeholder) in &made {
            let as_file = plan.placeholder_files.contains(placeholder);
            make_placeholder(root, placeholder, as_file)?;
        }
        self.planning = None;
        Ok(())
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        self.planning = None;
        let own = self.own.take();
        sweep_dir(&self.dir, own);
    }
}

/// Removes what runs that are over left behind, in `state_dir` (called at
/// every start: a toolgate that was killed removed nothing).
pub(super) fn sweep(state_dir: &Path) {
    let dir = state_dir.join("placeholders");
    if dir.is_dir() {
        sweep_dir(&dir, None);
    }
}

/// One record of a journal.
enum Record {
    Owner { pid: u32, ticks: u64 },
    Made { root: PathBuf, path: PathBuf },
    Uses { path: PathBuf },
}

fn sweep_dir(dir: &Path, own: Option<(PathBuf, File)>) {
    // No run is planning while this is held: every journal is either
    // locked by a live run, complete, or over.
    let Ok(_sweeping) = lock_file(&dir.join("lock"), FlockOperation::LockExclusive) else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut live: HashSet<PathBuf> = HashSet::new();
    let mut over: Vec<(PathBuf, File, Vec<Record>)> = Vec::new();
    let own_path = own.as_ref().map(|(p, _)| p.clone());
    if let Some((path, mut file)) = own {
        let records = read_records(&mut file);
        over.push((path, file, records));
    }
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension() != Some(std::ffi::OsStr::new("journal"))
            || Some(&path) == own_path.as_ref()
        {
            continue;
        }
        let Ok(mut file) = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
        else {
            continue;
        };
        let records = read_records(&mut file);
        if rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive).is_err() {
            // A live run: everything it made or masks stays.
            live.extend(records.into_iter().filter_map(|r| match r {
                Record::Made { path, .. } | Record::Uses { path } => Some(path),
                Record::Owner { .. } => None,
            }));
        } else {
            over.push((path, file, records));
        }
    }
    let mut mounts: Option<Option<HashSet<PathBuf>>> = None;
    for (path, mut file, records) in over {
        let owner = records.iter().find_map(|r| match r {
            Record::Owner { pid, ticks } => Some((*pid, *ticks)),
            _ => None,
        });
        let owner_alive = owner.is_some_and(|(pid, ticks)| start_ticks(pid) == Some(ticks));
        let mut made: Vec<(PathBuf, PathBuf)> = records
            .into_iter()
            .filter_map(|r| match r {
                Record::Made { root, path } => Some((root, path)),
                _ => None,
            })
            .collect();
        // Deepest first, so a placeholder's parent could go after it.
        made.sort_by_key(|(_, p)| std::cmp::Reverse(p.components().count()));
        let mut kept = Vec::new();
        for (root, placeholder) in made {
            if live.contains(&placeholder) {
                kept.push((root, placeholder));
                continue;
            }
            if !owner_alive {
                // Its sandbox may have outlived it: a path still mounted
                // somewhere is left for a later sweep.
                let mounted = mounts.get_or_insert_with(mount_points);
                if mounted.as_ref().is_none_or(|m| m.contains(&placeholder)) {
                    kept.push((root, placeholder));
                    continue;
                }
            }
            remove_placeholder(&root, &placeholder);
        }
        if kept.is_empty() {
            // Emptied first: whoever opened it before the unlink finds
            // nothing to act on.
            let _ = file.set_len(0);
            let _ = std::fs::remove_file(&path);
        } else {
            let mut text = Vec::new();
            if let Some((pid, ticks)) = owner {
                text.extend_from_slice(format!("owner {pid} {ticks}\n").as_bytes());
            }
            for (root, placeholder) in &kept {
                text.extend_from_slice(
                    format!(
                        "made {} {}\n",
                        hex(root.as_os_str().as_bytes()),
                        hex(placeholder.as_os_str().as_bytes())
                    )
                    .as_bytes(),
                );
            }
            let _ = file.set_len(0);
            let _ = file.rewind();
            let _ = file.write_all(&text);
        }
    }
}

fn read_records(file: &mut File) -> Vec<Record> {
    let mut bytes = Vec::new();
    if file.rewind().is_err() || file.read_to_end(&mut bytes).is_err() {
        return Vec::new();
    }
    String::from_utf8_lossy(&bytes)
        .lines()
        .filter_map(|line| {
            let words: Vec<&str> = line.split(' ').collect();
            match words.as_slice() {
                ["owner", pid, ticks] => Some(Record::Owner {
                    pid: pid.parse().ok()?,
                    ticks: ticks.parse().ok()?,
                }),
                ["made", root, path] => Some(Record::Made {
                    root: unhex(root)?,
                    path: unhex(path)?,
                }),
                ["uses", path] => Some(Record::Uses { path: unhex(path)? }),
                // A line cut short by a crash.
                _ => None,
            }
        })
        .collect()
}

/// Creates one placeholder beneath `root`: an empty directory of mode
/// 0555, or for a few names inside a git dir an empty file of mode 0444.
fn make_placeholder(root: &Path, placeholder: &Path, as_file: bool) -> Result<(), SandboxError> {
    let dir = cap_std::fs::Dir::open_ambient_dir(root, cap_std::ambient_authority())
        .map_err(|e| setup(root, e))?;
    let Ok(relative) = placeholder.strip_prefix(root) else {
        return Ok(());
    };
    let made = if as_file {
        dir.open_with(
            relative,
            cap_std::fs::OpenOptions::new().write(true).create_new(true),
        )
        .and_then(|f| f.set_permissions(permissions(FILE_MODE)))
    } else {
        dir.create_dir(relative)
            .and_then(|()| dir.set_permissions(relative, permissions(DIR_MODE)))
    };
    match made {
        // Made meanwhile by someone else: bwrap mounts over it all the same.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        other => other.map_err(|e| setup(placeholder, e)),
    }
}

/// Removes a placeholder that is still an empty one of ours.
fn remove_placeholder(root: &Path, placeholder: &Path) {
    let Ok(dir) = cap_std::fs::Dir::open_ambient_dir(root, cap_std::ambient_authority()) else {
        return;
    };
    let Ok(relative) = placeholder.strip_prefix(root) else {
        return;
    };
    let Ok(meta) = dir.symlink_metadata(relative) else {
        return;
    };
    let mode = meta.permissions().mode() & 0o7777;
    if meta.is_dir() && mode == DIR_MODE {
        // remove_dir refuses anything but an empty directory.
        let _ = dir.remove_dir(relative);
    } else if meta.is_file() && meta.len() == 0 && mode == FILE_MODE {
        let _ = dir.remove_file(relative);
    }
}

/// Every mount point of every mount namespace this process can see, or
/// `None` if /proc cannot tell (then nothing of a dead owner is removed).
fn mount_points() -> Option<HashSet<PathBuf>> {
    let mut namespaces = HashSet::new();
    let mut points = HashSet::new();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let name = entry.file_name();
        if !name.as_bytes().iter().all(u8::is_ascii_digit) {
            continue;
        }
        let Ok(ns) = std::fs::read_link(entry.path().join("ns/mnt")) else {
            continue;
        };
        if !namespaces.insert(ns) {
            continue;
        }
        let Ok(text) = std::fs::read(entry.path().join("mountinfo")) else {
            continue;
        };
        for line in text.split(|b| *b == b'\n') {
            if let Some(point) = line.split(|b| *b == b' ').nth(4) {
                points.insert(crate::mountinfo::unescape(point));
            }
        }
    }
    Some(points)
}

/// When `pid` started (clock ticks since boot), to tell it from a later
/// process with the same pid.
fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses; fields after it
    // start behind the last `)`.
    let rest = stat.rsplit_once(')')?.1;
    rest.split_whitespace().nth(19)?.parse().ok()
}

fn lock_file(path: &Path, operation: FlockOperation) -> Result<File, SandboxError> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| setup(path, e))?;
    rustix::fs::flock(&file, operation).map_err(|e| setup(path, e.into()))?;
    Ok(file)
}

fn permissions(mode: u32) -> cap_std::fs::Permissions {
    cap_std::fs::Permissions::from_std(std::fs::Permissions::from_mode(mode))
}

fn unhex(text: &str) -> Option<PathBuf> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect();
    Some(PathBuf::from(std::ffi::OsString::from_vec(bytes?)))
}

fn setup(path: &Path, e: std::io::Error) -> SandboxError {
    SandboxError::Setup(format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A journal as a toolgate killed mid-run leaves it: its owner is gone.
    fn dead_owners_journal(state: &Path, root: &Path, placeholder: &Path) {
        let dir = state.join("placeholders");
        std::fs::create_dir_all(&dir).unwrap();
        // No pid reaches 2^22 (the kernel's largest pid_max).
        let text = format!(
            "owner 4194304 1\nmade {} {}\n",
            hex(root.as_os_str().as_bytes()),
            hex(placeholder.as_os_str().as_bytes())
        );
        std::fs::write(dir.join("4194304-0.journal"), text).unwrap();
    }

    #[test]
    fn a_dead_owners_placeholder_is_removed_once_no_namespace_mounts_it() {
        use std::io::BufRead;
        assert!(
            rustix::process::geteuid().is_root(),
            "this test mounts in a namespace of its own and needs root (CI runs as root)"
        );
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let root = base.join("root");
        let placeholder = root.join(".claude");
        std::fs::create_dir_all(&placeholder).unwrap();
        std::fs::set_permissions(&placeholder, std::fs::Permissions::from_mode(DIR_MODE)).unwrap();
        let state = base.join("state");
        dead_owners_journal(&state, &root, &placeholder);
        // A sandbox that outlived its toolgate: a mount on the placeholder
        // in another mount namespace.
        let mut survivor = std::process::Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c"])
            .arg(format!(
                "mount -t tmpfs none '{}' && echo mounted && exec sleep 60",
                placeholder.display()
            ))
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(survivor.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line, "mounted\n");
        sweep(&state);
        assert!(placeholder.is_dir(), "removed while still mounted");
        let _ = survivor.kill();
        let _ = survivor.wait();
        sweep(&state);
        assert!(!placeholder.exists(), "left after its last user ended");
        assert_eq!(
            std::fs::read_dir(state.join("placeholders"))
                .unwrap()
                .filter(|e| e.as_ref().unwrap().path().extension().is_some())
                .count(),
            0,
            "the journal outlived its placeholders"
        );
    }

    #[test]
    fn only_empty_placeholders_of_ours_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let root = base.join("root");
        let state = base.join("state");
        // The user's own empty directory of the same name (mode 0755), and
        // a placeholder someone filled.
        for (name, mode, filled) in [(".vscode", 0o755, false), (".claude", DIR_MODE, true)] {
            let path = root.join(name);
            std::fs::create_dir_all(&path).unwrap();
            if filled {
                std::fs::write(path.join("settings.json"), "{}").unwrap();
            }
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            dead_owners_journal(&state, &root, &path);
            sweep(&state);
            assert!(path.exists(), "{name} removed");
        }
    }

    #[test]
    fn paths_survive_the_journal_encoding() {
        let path = PathBuf::from(std::ffi::OsString::from_vec(b"/r/a b\n\xff".to_vec()));
        assert_eq!(unhex(&hex(path.as_os_str().as_bytes())), Some(path));
        assert_eq!(unhex("abc"), None);
    }
}

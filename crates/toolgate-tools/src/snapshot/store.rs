//! Where checkpoints live: `<state_dir>/snapshots/<agent>/<scope>/<id>.json`,
//! outside the workspace, so a sandboxed command cannot rewrite the
//! baseline it is compared against, and one directory per [`Scope`]
//! (agent and canonical roots), so a workspace never reads another's.

mod legacy;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use super::manifest::Manifest;
use super::scope::Scope;

/// Characters of an id: base36 of the Unix time in milliseconds, fixed
/// width, so name order is time order (until the year 5188).
const ID_WIDTH: usize = 9;

/// Largest manifest read back.
const MAX_MANIFEST_BYTES: u64 = 1 << 30;

/// Why the store failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("unknown checkpoint `{id}`; {known}")]
    Unknown { id: String, known: String },
    #[error("checkpoint store {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("checkpoint {} is damaged ({source}); take a new one with snapshot", path.display())]
    Damaged {
        path: PathBuf,
        source: serde_json::Error,
    },
}

/// The checkpoints of one scope.
pub struct Store {
    /// `<state_dir>/snapshots/<agent>`: the scopes of the agent, and the
    /// checkpoints it took before they were scoped ([`legacy`]).
    agent_dir: PathBuf,
    /// `<agent_dir>/<scope digest>`: this scope's checkpoints.
    dir: PathBuf,
    scope: Scope,
}

impl Store {
    /// The store of `scope` under `state_dir`. The scope comes from the
    /// workspace the tool was built over, never from a call's arguments.
    pub fn new(state_dir: &Path, scope: Scope) -> Store {
        let agent_dir = state_dir
            .join("snapshots")
            .join(agent_dir_name(scope.agent()));
        Store {
            dir: agent_dir.join(scope.dir_name()),
            agent_dir,
            scope,
        }
    }

    /// The ids stored, oldest first.
    pub fn ids(&self) -> Result<Vec<String>, StoreError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(self.io(&self.dir, e)),
        };
        let mut ids: Vec<String> = entries
            .filter_map(Result::ok)
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let id = name.strip_suffix(".json")?;
                is_id(id).then(|| id.to_owned())
            })
            .collect();
        ids.sort();
        Ok(ids)
    }

    /// The newest checkpoint, if any.
    pub fn latest(&self) -> Result<Option<Manifest>, StoreError> {
        match self.ids()?.pop() {
            Some(id) => self.load(&id).map(Some),
            None => Ok(None),
        }
    }

    /// The checkpoint `id`; an unknown (or malformed) id names the known
    /// ones. Another scope's id is unknown here, with the same message as
    /// an id nobody took: the answer must not tell B that A has it.
    pub fn load(&self, id: &str) -> Result<Manifest, StoreError> {
        // Attack: `../other-scope/x` or an absolute path as the id would
        // read another workspace's checkpoint or any JSON file: only the id
        // alphabet is accepted, so the name stays inside this scope's dir.
        let path = self.dir.join(format!("{id}.json"));
        if !is_id(id) || !path.is_file() {
            return Err(self.unknown(id));
        }
        let manifest = read_manifest(&path)?;
        if !self.scope.owns(&manifest) {
            return Err(self.unknown(id));
        }
        Ok(manifest)
    }

    /// Stores `manifest` under a fresh id (set in it) and returns the id.
    /// The manifest is stamped with this store's scope, which is what
    /// [`Store::load`] checks.
    pub fn save(&self, manifest: &mut Manifest) -> Result<String, StoreError> {
        manifest.agent = self.scope.agent().to_owned();
        manifest.roots = self.scope.roots().to_vec();
        create_private_dir(&self.dir).map_err(|e| self.io(&self.dir, e))?;
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let tmp = self
            .dir
            .join(format!(".tmp-{}-{now_ms}", std::process::id()));
        let result = self.commit(manifest, &tmp, now_ms);
        let _ = std::fs::remove_file(&tmp);
        result
    }

    /// Writes the manifest to `tmp`, then links it to the first free id
    /// from `now_ms` on: a link never replaces an existing checkpoint, so
    /// two snapshots in the same millisecond get different ids.
    fn commit(
        &self,
        manifest: &mut Manifest,
        tmp: &Path,
        now_ms: u64,
    ) -> Result<String, StoreError> {
        for ms in now_ms..now_ms.saturating_add(1000) {
            let id = base36(ms);
            let path = self.dir.join(format!("{id}.json"));
            if path.exists() {
                continue;
            }
            manifest.id.clone_from(&id);
            let json = serde_json::to_vec(manifest).map_err(|source| StoreError::Damaged {
                path: path.clone(),
                source,
            })?;
            let mut file = std::fs::File::create(tmp).map_err(|e| self.io(tmp, e))?;
            file.write_all(&json).map_err(|e| self.io(tmp, e))?;
            file.sync_all().map_err(|e| self.io(tmp, e))?;
            match std::fs::hard_link(tmp, &path) {
                Ok(()) => return Ok(id),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(self.io(&path, e)),
            }
        }
        Err(self.io(
            &self.dir,
            std::io::Error::other("no free checkpoint id; remove old checkpoints"),
        ))
    }

    fn unknown(&self, id: &str) -> StoreError {
        let known = match self.ids() {
            Ok(ids) if ids.is_empty() => {
                "there are no checkpoints yet; call snapshot without `checkpoint` to take one"
                    .to_owned()
            }
            Ok(ids) => format!("known checkpoints (oldest first): {}", ids.join(", ")),
            Err(e) => format!("the known ones cannot be listed: {e}"),
        };
        StoreError::Unknown {
            id: id.to_owned(),
            known,
        }
    }

    fn io(&self, path: &Path, source: std::io::Error) -> StoreError {
        io_error(path, source)
    }
}

fn io_error(path: &Path, source: std::io::Error) -> StoreError {
    StoreError::Io {
        path: path.to_owned(),
        source,
    }
}

/// The manifest at `path`, at most [`MAX_MANIFEST_BYTES`] of it.
fn read_manifest(path: &Path) -> Result<Manifest, StoreError> {
    let file = std::fs::File::open(path).map_err(|e| io_error(path, e))?;
    let mut data = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(file, MAX_MANIFEST_BYTES),
        &mut data,
    )
    .map_err(|e| io_error(path, e))?;
    serde_json::from_slice(&data).map_err(|source| StoreError::Damaged {
        path: path.to_owned(),
        source,
    })
}

/// Whether `id` is in the id alphabet (lower-case base36, at most 16).
fn is_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 16
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase())
}

fn base36(mut n: u64) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = vec![b'0'; ID_WIDTH];
    for slot in out.iter_mut().rev() {
        *slot = DIGITS[(n % 36) as usize];
        n /= 36;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The directory name of an agent: its id with every byte outside
/// `[A-Za-z0-9_-]` (and a leading `.`) written as `%XX`.
// Attack: an agent id like `../x` or `/etc` would otherwise place (and
// read) checkpoints outside this agent's directory.
fn agent_dir_name(agent: &str) -> String {
    let mut out = String::with_capacity(agent.len());
    for (i, b) in agent.bytes().enumerate() {
        let plain = b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || (b == b'.' && i > 0);
        if plain {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if out.is_empty() {
        out.push_str("%00");
    }
    out
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::collections::BTreeMap;

    #[test]
    fn agent_names_cannot_leave_the_snapshot_dir() {
        let cases = [
            ("agent-1", "agent-1"),
            ("a.b", "a.b"),
            ("..", "%2E."),
            ("../x", "%2E.%2Fx"),
            ("/etc", "%2Fetc"),
            ("a%b", "a%25b"),
            ("", "%00"),
        ];
        for (agent, want) in cases {
            assert_eq!(agent_dir_name(agent), want, "{agent}");
        }
    }

    #[test]
    fn ids_are_fixed_width_and_time_ordered() {
        assert_eq!(base36(0), "000000000");
        assert_eq!(base36(35), "00000000z");
        assert!(base36(1_800_000_000_000) < base36(1_800_000_000_001));
        assert!(is_id(&base36(1_800_000_000_000)));
        for bad in ["", "../x", "A1", "a.json", "a/b", &"a".repeat(17)] {
            assert!(!is_id(bad), "{bad}");
        }
    }

    pub(super) fn scope(root: &str) -> Scope {
        Scope::new("agent", &[PathBuf::from(root)])
    }

    pub(super) fn manifest() -> Manifest {
        Manifest {
            id: String::new(),
            agent: String::new(),
            taken_ns: 1,
            roots: vec![],
            files: BTreeMap::new(),
        }
    }

    #[test]
    fn saved_checkpoints_load_and_unknown_ids_list_the_known() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path(), scope("/w/a"));
        let err = store.load("abc").unwrap_err().to_string();
        assert!(err.contains("no checkpoints yet"), "{err}");
        let mut manifest = manifest();
        let first = store.save(&mut manifest).unwrap();
        let second = store.save(&mut manifest).unwrap();
        assert_ne!(first, second);
        assert_eq!(store.ids().unwrap(), vec![first.clone(), second.clone()]);
        let loaded = store.load(&first).unwrap();
        assert_eq!(loaded.id, first);
        // Stamped with the store's scope, whatever the caller put there.
        assert_eq!(
            (loaded.agent.as_str(), loaded.roots),
            ("agent", vec![PathBuf::from("/w/a")])
        );
        assert_eq!(store.latest().unwrap().unwrap().id, second);
        for bad in ["zzz", "../agent/x"] {
            let err = store.load(bad).unwrap_err().to_string();
            assert!(err.contains(&first) && err.contains(&second), "{err}");
        }
        // No temp files left behind.
        let names = std::fs::read_dir(&store.dir).unwrap().count();
        assert_eq!(names, 2);
    }

    /// The error B gets for `id`, with the id itself blanked out.
    fn refusal(store: &Store, id: &str) -> String {
        store.load(id).unwrap_err().to_string().replace(id, "ID")
    }

    #[test]
    fn another_scopes_checkpoints_are_unknown_ids() {
        let dir = tempfile::tempdir().unwrap();
        let a = Store::new(dir.path(), scope("/w/a"));
        let b = Store::new(dir.path(), scope("/w/b"));
        let a_id = a.save(&mut manifest()).unwrap();
        // Not even the newest checkpoint is shared (its hashes would be reused).
        assert!(b.ids().unwrap().is_empty());
        assert!(b.latest().unwrap().is_none());
        let never = "zzzzzzzzz";
        assert_eq!(refusal(&b, &a_id), refusal(&b, never));
        // Ids are unique per scope only (the millisecond of the save): B's
        // own checkpoint taken in the same millisecond would carry A's id
        // and answer for it, which is B's own data, not a leak. Let the
        // clock move on so the two differ.
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b_id = b.save(&mut manifest()).unwrap();
        assert_ne!(a.dir, b.dir);
        assert_eq!(refusal(&b, &a_id), refusal(&b, never));
        let listed = b.load(&a_id).unwrap_err().to_string();
        assert!(
            listed.contains(&b_id) && !listed.replace(&format!("`{a_id}`"), "").contains(&a_id),
            "{listed}"
        );
        assert_eq!(b.ids().unwrap(), vec![b_id]);
        assert_eq!(a.ids().unwrap(), vec![a_id.clone()]);
        assert_eq!(a.load(&a_id).unwrap().id, a_id);
    }

    #[test]
    fn a_manifest_of_another_scope_in_this_directory_is_still_unknown() {
        let dir = tempfile::tempdir().unwrap();
        let a = Store::new(dir.path(), scope("/w/a"));
        let b = Store::new(dir.path(), scope("/w/b"));
        let a_id = a.save(&mut manifest()).unwrap();
        // As if a digest collided, or someone copied the file by hand.
        std::fs::create_dir_all(&b.dir).unwrap();
        std::fs::copy(
            a.dir.join(format!("{a_id}.json")),
            b.dir.join(format!("{a_id}.json")),
        )
        .unwrap();
        let err = b.load(&a_id).unwrap_err();
        assert!(matches!(err, StoreError::Unknown { .. }), "{err}");
    }
}

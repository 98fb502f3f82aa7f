//! Checkpoints taken before they were scoped: `<agent_dir>/<id>.json`,
//! keyed by the agent id alone, which every session shared.
//!
//! Each is adopted by the scope it records (the same agent and the same
//! canonical roots, in order) the first time that scope's store is used:
//! moved into the scope's directory, where it works as before. The others
//! stay where they are and no call reads them; an operator may delete them.
//! The work is done once per scope and does not depend on the id a call
//! names, so how long a call takes does not tell B whether A has an id.

use std::io::Read;

use super::{Store, StoreError, create_private_dir, is_id, read_manifest};

/// Written into a scope's directory once its legacy checkpoints were
/// adopted, so later calls skip the scan.
const ADOPTED: &str = ".legacy-adopted";

/// Bytes of a manifest's start enough to hold everything before `files`:
/// the id (at most 16), `taken_ns` (at most 20 digits) and the keys, besides
/// the agent and the roots, whose length is added.
const HEAD_SLACK: u64 = 128;

/// What this scope's manifests start with, as serde_json writes them
/// (fields in declaration order: id, agent, taken_ns, roots, files).
struct Needles {
    agent: Vec<u8>,
    roots: Vec<u8>,
    head_len: u64,
}

impl Needles {
    fn of(store: &Store) -> Option<Needles> {
        let agent = serde_json::to_string(store.scope.agent()).ok()?;
        // Roots that are not UTF-8 cannot be written as JSON: no
        // checkpoint of the old layout can have them.
        let roots = serde_json::to_string(store.scope.roots()).ok()?;
        let agent = format!(",\"agent\":{agent},").into_bytes();
        let roots = format!(",\"roots\":{roots},\"files\":").into_bytes();
        let head_len = HEAD_SLACK + (agent.len() + roots.len()) as u64;
        Some(Needles {
            agent,
            roots,
            head_len,
        })
    }

    /// Whether `head` can be the start of this scope's manifest: a cheap
    /// filter, so that the manifests of other scopes (which may be large)
    /// are not parsed. The full parse and [`super::Scope::owns`] decide.
    fn match_head(&self, head: &[u8]) -> bool {
        let has = |needle: &[u8]| head.windows(needle.len()).any(|w| w == needle);
        has(&self.agent) && has(&self.roots)
    }
}

impl Store {
    /// Moves the checkpoints of the old layout that this scope took into
    /// its directory, once per scope; returns how many were moved.
    pub fn adopt_legacy(&self) -> Result<usize, StoreError> {
        let marker = self.dir.join(ADOPTED);
        if marker.symlink_metadata().is_ok() {
            return Ok(0);
        }
        let entries = match std::fs::read_dir(&self.agent_dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(self.io(&self.agent_dir, e)),
        };
        let mut candidates: Vec<String> = entries
            .filter_map(Result::ok)
            // Scope directories (and anything but a plain file) are not
            // checkpoints of the old layout.
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let id = name.strip_suffix(".json")?;
                is_id(id).then(|| id.to_owned())
            })
            .collect();
        candidates.sort();
        create_private_dir(&self.dir).map_err(|e| self.io(&self.dir, e))?;
        let mut adopted = 0;
        if let Some(needles) = Needles::of(self) {
            for id in &candidates {
                if self.adopt_one(id, &needles)? {
                    adopted += 1;
                }
            }
        }
        std::fs::File::create(&marker).map_err(|e| self.io(&marker, e))?;
        Ok(adopted)
    }

    /// Moves `<agent_dir>/<id>.json` here if this scope took it. Another
    /// process of the same scope may be moving it at the same time: a file
    /// already gone or already here is not an error.
    fn adopt_one(&self, id: &str, needles: &Needles) -> Result<bool, StoreError> {
        let from = self.agent_dir.join(format!("{id}.json"));
        // A file that cannot be read (vanished, damaged) is left alone like
        // another scope's, and silently: an error naming it would tell this
        // workspace the id of a checkpoint it does not own.
        let mut head = Vec::new();
        let read = std::fs::File::open(&from)
            .and_then(|file| file.take(needles.head_len).read_to_end(&mut head));
        if read.is_err() || !needles.match_head(&head) {
            return Ok(false);
        }
        let Ok(manifest) = read_manifest(&from) else {
            return Ok(false);
        };
        if !self.scope.owns(&manifest) || manifest.id != id {
            return Ok(false);
        }
        let to = self.dir.join(format!("{id}.json"));
        // A link never replaces a checkpoint this scope already has.
        match std::fs::hard_link(&from, &to) {
            Ok(()) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::AlreadyExists | std::io::ErrorKind::NotFound
                ) =>
            {
                return Ok(false);
            }
            Err(e) => return Err(self.io(&to, e)),
        }
        match std::fs::remove_file(&from) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(true),
            Err(e) => Err(self.io(&from, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{manifest, scope};
    use super::*;
    use pretty_assertions::assert_eq;
    use std::path::{Path, PathBuf};

    /// Writes a checkpoint of the old layout, as the old store did.
    fn legacy(agent_dir: &Path, id: &str, agent: &str, roots: &[&str]) {
        let mut m = manifest();
        m.id = id.to_owned();
        m.agent = agent.to_owned();
        m.roots = roots.iter().map(PathBuf::from).collect();
        m.files.insert(
            "secret.txt".into(),
            crate::snapshot::manifest::FileEntry {
                kind: crate::snapshot::manifest::EntryKind::File,
                size: 3,
                mtime_ns: 1,
                sha256: "00".repeat(32),
            },
        );
        std::fs::create_dir_all(agent_dir).unwrap();
        std::fs::write(
            agent_dir.join(format!("{id}.json")),
            serde_json::to_vec(&m).unwrap(),
        )
        .unwrap();
    }

    #[test]
    fn old_checkpoints_go_to_the_scope_they_recorded_and_nowhere_else() {
        let dir = tempfile::tempdir().unwrap();
        let a = Store::new(dir.path(), scope("/w/a"));
        let agent_dir = a.agent_dir.clone();
        legacy(&agent_dir, "000000001", "agent", &["/w/a"]);
        legacy(&agent_dir, "000000002", "agent", &["/w/b"]);
        legacy(&agent_dir, "000000003", "agent", &["/w/a", "/w/b"]);
        legacy(&agent_dir, "000000004", "agent", &["/w/a"]);
        // A prefix of A's root, and the same roots under another agent's name.
        legacy(&agent_dir, "000000005", "agent", &["/w/"]);
        legacy(&agent_dir, "000000006", "other", &["/w/a"]);
        std::fs::write(agent_dir.join("000000007.json"), "{damaged").unwrap();

        // B (another root) gets nothing of A's, before and after A adopts.
        let b = Store::new(dir.path(), scope("/w/b/sub"));
        assert_eq!(b.adopt_legacy().unwrap(), 0);
        assert!(b.ids().unwrap().is_empty());

        assert_eq!(a.adopt_legacy().unwrap(), 2);
        assert_eq!(a.ids().unwrap(), ["000000001", "000000004"]);
        assert_eq!(a.load("000000004").unwrap().files.len(), 1);
        let mut left: Vec<String> = std::fs::read_dir(&agent_dir)
            .unwrap()
            .filter_map(|e| {
                let e = e.unwrap();
                e.file_type()
                    .unwrap()
                    .is_file()
                    .then(|| e.file_name().into_string().unwrap())
            })
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "000000002.json",
                "000000003.json",
                "000000005.json",
                "000000006.json",
                "000000007.json"
            ]
        );

        // Once per scope: a file of the old layout written later stays put.
        legacy(&agent_dir, "000000008", "agent", &["/w/a"]);
        assert_eq!(a.adopt_legacy().unwrap(), 0);
        assert_eq!(a.ids().unwrap(), ["000000001", "000000004"]);

        let ab = Store::new(
            dir.path(),
            super::super::Scope::new("agent", &[PathBuf::from("/w/a"), PathBuf::from("/w/b")]),
        );
        assert_eq!(ab.adopt_legacy().unwrap(), 1);
        assert_eq!(ab.ids().unwrap(), ["000000003"]);
    }

    #[test]
    fn no_old_layout_no_work() {
        let dir = tempfile::tempdir().unwrap();
        let a = Store::new(dir.path(), scope("/w/a"));
        assert_eq!(a.adopt_legacy().unwrap(), 0);
        // Nothing created for a scope that never took a checkpoint.
        assert!(!dir.path().join("snapshots").exists());
    }
}

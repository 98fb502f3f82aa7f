//! A checkpoint's manifest: every file of the workspace with its size,
//! modification time and content hash, and the difference of two manifests.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use toolgate_core::text::hex;
use toolgate_sandbox::Jail;

use crate::search::walk::{self, Target, WalkOptions};

/// A file whose mtime is this close to (or after) the time its previous
/// checkpoint was taken is hashed again even when size and mtime match:
/// file systems stamp mtimes coarsely (jiffies, or 2 s on FAT), so a write
/// right after the checkpoint can leave both unchanged (git's "racy clean").
const RACY_NS: u64 = 2_000_000_000;

/// What kind of entry a manifest records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryKind {
    /// A regular file; the hash is of its contents.
    File,
    /// A symbolic link (never followed); the hash is of its target.
    Symlink,
}

/// One file of a manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    pub kind: EntryKind,
    pub size: u64,
    /// Modification time, nanoseconds since the Unix epoch.
    pub mtime_ns: u64,
    /// Hex SHA-256.
    pub sha256: String,
}

/// A checkpoint as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub id: String,
    pub agent: String,
    /// When the scan started, nanoseconds since the Unix epoch.
    pub taken_ns: u64,
    /// The workspace roots scanned; paths in the first are relative, in the
    /// others absolute.
    pub roots: Vec<PathBuf>,
    pub files: BTreeMap<String, FileEntry>,
}

/// One root to scan and how its paths are named in the manifest.
pub struct ScanRoot {
    pub jail: Arc<Jail>,
    /// Relative names (the first root) or absolute ones.
    pub absolute: bool,
}

/// What a scan found.
pub struct Scan {
    pub taken_ns: u64,
    pub files: BTreeMap<String, FileEntry>,
    /// Files hashed this time (the rest reused the previous hash).
    pub hashed: usize,
    /// Entries that could not be read, with why.
    pub unreadable: Vec<String>,
}

/// Added, modified and deleted paths, each sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Diff {
    pub added: Vec<String>,
    pub modified: Vec<String>,
    pub deleted: Vec<String>,
}

/// Nanoseconds since the Unix epoch (0 before it).
pub fn unix_ns(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// A file found by the walk, before hashing.
struct Found {
    key: String,
    jail: Arc<Jail>,
    rel: PathBuf,
    kind: EntryKind,
    size: u64,
    mtime_ns: u64,
}

/// Walks every root (.gitignore-aware, hidden files included, `.git`
/// skipped, symlinks recorded and never followed) and hashes what changed
/// since `previous`.
pub fn scan(roots: &[ScanRoot], previous: Option<&Manifest>) -> Scan {
    let taken_ns = unix_ns(SystemTime::now());
    let mut unreadable = Vec::new();
    let mut found = Vec::new();
    let opts = WalkOptions {
        hidden: true,
        ..WalkOptions::default()
    };
    for root in roots {
        match walk::prepare(&root.jail, Path::new(""), &opts) {
            Ok(Target::Dir(builder)) => walk_root(root, &builder, &mut found, &mut unreadable),
            Ok(Target::File(_)) => {}
            Err(e) => unreadable.push(format!("{}: {e}", root.jail.root().display())),
        }
    }
    let mut files = BTreeMap::new();
    let mut to_hash = Vec::new();
    for item in found {
        let reusable = previous
            .and_then(|m| m.files.get(&item.key).map(|e| (e, m.taken_ns)))
            .filter(|(e, taken)| {
                e.kind == item.kind
                    && e.size == item.size
                    && e.mtime_ns == item.mtime_ns
                    && e.mtime_ns.saturating_add(RACY_NS) < *taken
            });
        match reusable {
            Some((entry, _)) => {
                files.insert(item.key, entry.clone());
            }
            None => to_hash.push(item),
        }
    }
    let hashed = hash_all(to_hash, &mut files, &mut unreadable);
    Scan {
        taken_ns,
        files,
        hashed,
        unreadable,
    }
}

fn walk_root(
    root: &ScanRoot,
    builder: &ignore::WalkBuilder,
    found: &mut Vec<Found>,
    unreadable: &mut Vec<String>,
) {
    let base = root.jail.root();
    for result in builder.build() {
        let entry = match result {
            Ok(entry) => entry,
            Err(e) => {
                unreadable.push(e.to_string());
                continue;
            }
        };
        let Some(file_type) = entry.file_type() else {
            continue;
        };
        let kind = if file_type.is_file() {
            EntryKind::File
        } else if file_type.is_symlink() {
            EntryKind::Symlink
        } else {
            continue;
        };
        let Ok(rel) = entry.path().strip_prefix(base) else {
            continue;
        };
        let key = if root.absolute {
            entry.path().display().to_string()
        } else {
            walk::display_rel(rel)
        };
        match entry.metadata() {
            Ok(meta) => found.push(Found {
                key,
                jail: root.jail.clone(),
                rel: rel.to_owned(),
                kind,
                size: meta.len(),
                mtime_ns: meta.modified().map_or(0, unix_ns),
            }),
            Err(e) => unreadable.push(format!("{key}: {e}")),
        }
    }
}

/// Hashes `items` on the machine's cores; returns how many were hashed.
fn hash_all(
    items: Vec<Found>,
    files: &mut BTreeMap<String, FileEntry>,
    unreadable: &mut Vec<String>,
) -> usize {
    let threads = walk::threads().min(items.len()).max(1);
    let chunk = items.len().div_ceil(threads).max(1);
    let results: Vec<Vec<(String, Result<FileEntry, String>)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .map(|part| scope.spawn(move || part.iter().map(hash_one).collect::<Vec<_>>()))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| vec![(String::new(), Err("hashing panicked".into()))])
            })
            .collect()
    });
    let mut hashed = 0;
    for (key, result) in results.into_iter().flatten() {
        match result {
            Ok(entry) => {
                hashed += 1;
                files.insert(key, entry);
            }
            Err(why) => unreadable.push(why),
        }
    }
    hashed
}

fn hash_one(item: &Found) -> (String, Result<FileEntry, String>) {
    let fail = |e: &dyn std::fmt::Display| Err(format!("{}: {e}", item.key));
    let digest = match item.kind {
        EntryKind::File => {
            // Opened through the jail: a file swapped for a symlink that
            // leaves the root after the walk saw it is refused, not read.
            let file = match item.jail.open_file(&item.rel) {
                Ok((file, _)) => file,
                Err(e) => return (item.key.clone(), fail(&e)),
            };
            match sha256_of(file) {
                Ok(digest) => digest,
                Err(e) => return (item.key.clone(), fail(&e)),
            }
        }
        EntryKind::Symlink => {
            // Reading a link's target does not follow it.
            match std::fs::read_link(item.jail.root().join(&item.rel)) {
                Ok(target) => hex(&Sha256::digest(target.as_os_str().as_encoded_bytes())),
                Err(e) => return (item.key.clone(), fail(&e)),
            }
        }
    };
    let entry = FileEntry {
        kind: item.kind,
        size: item.size,
        mtime_ns: item.mtime_ns,
        sha256: digest,
    };
    (item.key.clone(), Ok(entry))
}

fn sha256_of(mut file: std::fs::File) -> std::io::Result<String> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

/// What changed from `old` to `new`: paths only in `new`, paths whose
/// content hash (or kind) differs, paths only in `old`.
pub fn diff(old: &BTreeMap<String, FileEntry>, new: &BTreeMap<String, FileEntry>) -> Diff {
    let mut out = Diff::default();
    for (path, entry) in new {
        match old.get(path) {
            None => out.added.push(path.clone()),
            Some(before) if before.sha256 != entry.sha256 || before.kind != entry.kind => {
                out.modified.push(path.clone());
            }
            Some(_) => {}
        }
    }
    out.deleted = old
        .keys()
        .filter(|path| !new.contains_key(*path))
        .cloned()
        .collect();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn entry(hash: &str) -> FileEntry {
        FileEntry {
            kind: EntryKind::File,
            size: 1,
            mtime_ns: 1,
            sha256: hash.into(),
        }
    }

    #[test]
    fn diff_names_added_modified_and_deleted_sorted() {
        let old: BTreeMap<String, FileEntry> = [("b", "1"), ("a", "1"), ("gone", "1"), ("z", "2")]
            .into_iter()
            .map(|(p, h)| (p.to_owned(), entry(h)))
            .collect();
        let new: BTreeMap<String, FileEntry> = [("b", "2"), ("a", "1"), ("new", "1"), ("z", "2")]
            .into_iter()
            .map(|(p, h)| (p.to_owned(), entry(h)))
            .collect();
        assert_eq!(
            diff(&old, &new),
            Diff {
                added: vec!["new".into()],
                modified: vec!["b".into()],
                deleted: vec!["gone".into()],
            }
        );
    }

    fn jail(dir: &Path) -> Vec<ScanRoot> {
        vec![ScanRoot {
            jail: Arc::new(Jail::open(dir).unwrap()),
            absolute: false,
        }]
    }

    #[test]
    fn scan_hashes_reuses_and_skips_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join(".gitignore"), "target/\n*.log\n").unwrap();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::create_dir_all(root.join("target")).unwrap();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::write(root.join("src/a.rs"), "fn a() {}\n").unwrap();
        std::fs::write(root.join(".env.example"), "X=1\n").unwrap();
        std::fs::write(root.join("target/out"), "bin").unwrap();
        std::fs::write(root.join("run.log"), "log").unwrap();
        std::fs::write(root.join(".git/HEAD"), "ref").unwrap();
        std::os::unix::fs::symlink("src/a.rs", root.join("link")).unwrap();

        let first = scan(&jail(root), None);
        let keys: Vec<&str> = first.files.keys().map(String::as_str).collect();
        assert_eq!(keys, [".env.example", ".gitignore", "link", "src/a.rs"]);
        assert_eq!(first.hashed, 4);
        assert_eq!(first.files["link"].kind, EntryKind::Symlink);
        assert_eq!(
            first.files["src/a.rs"].sha256,
            hex(&Sha256::digest(b"fn a() {}\n"))
        );

        // A previous manifest taken long after the files' mtimes: reused.
        let previous = Manifest {
            id: "x".into(),
            agent: "a".into(),
            taken_ns: first.taken_ns + 10 * RACY_NS,
            roots: vec![root.to_owned()],
            files: first.files.clone(),
        };
        let second = scan(&jail(root), Some(&previous));
        assert_eq!(second.hashed, 0);
        assert_eq!(second.files, first.files);

        // Taken right after the mtimes (racy): hashed again.
        let racy = Manifest {
            taken_ns: first.taken_ns,
            ..previous
        };
        assert_eq!(scan(&jail(root), Some(&racy)).hashed, 4);
    }
}

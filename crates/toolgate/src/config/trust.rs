//! Trusted project files: `toolgate trust`.
//!
//! A project's `toolgate.toml` comes with the project, and a cloned
//! repository is someone else's: on its own it may tighten toolgate's
//! policy, never loosen it (see `untrusted`). The user lifts that for one
//! file by trusting it: the record holds the file's canonical path and the
//! SHA-256 of its exact bytes (and of the sandbox-runtime settings file it
//! names, which is configuration too), so any later change to either voids
//! the trust until the user looks again.
//!
//! The records live in the data directory (`trusted.json`, mode 0600 in a
//! 0700 directory), which toolgate protects from the agent like its other
//! own files; they are rewritten atomically (a temp file renamed over).

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The record file's name in the data directory.
pub const TRUST_FILE: &str = "trusted.json";

/// One trusted file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustRecord {
    /// The file's canonical path.
    pub path: PathBuf,
    /// SHA-256 of its bytes and of the settings file it names, as hex.
    pub sha256: String,
    /// When it was trusted (RFC 3339, UTC).
    pub trusted_at: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TrustFile {
    version: u32,
    #[serde(default)]
    files: Vec<TrustRecord>,
}

/// What the records say about a file as read now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustStatus {
    /// Trusted as it is.
    Trusted,
    /// Trusted once, and changed since (the record's time).
    Changed {
        /// When the older content was trusted.
        trusted_at: String,
    },
    /// Never trusted.
    Unknown,
}

/// The trust records of one data directory.
#[derive(Debug, Clone)]
pub struct TrustStore {
    path: PathBuf,
}

impl TrustStore {
    /// The store in `data_dir`.
    pub fn new(data_dir: &Path) -> Self {
        TrustStore {
            path: data_dir.join(TRUST_FILE),
        }
    }

    /// The record file.
    #[cfg(test)]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every record, in the order trusted.
    pub fn list(&self) -> Result<Vec<TrustRecord>, String> {
        Ok(self.read()?.files)
    }

    /// Whether `path` (canonical) with content digest `digest` is trusted.
    pub fn status(&self, path: &Path, digest: &str) -> Result<TrustStatus, String> {
        let records = self.read()?;
        Ok(match records.files.iter().find(|r| r.path == path) {
            Some(r) if r.sha256 == digest => TrustStatus::Trusted,
            Some(r) => TrustStatus::Changed {
                trusted_at: r.trusted_at.clone(),
            },
            None => TrustStatus::Unknown,
        })
    }

    /// Records `path` (canonical) as trusted with `digest`, replacing an
    /// older record of it.
    pub fn trust(&self, path: &Path, digest: &str) -> Result<TrustRecord, String> {
        let mut records = self.read()?;
        records.files.retain(|r| r.path != path);
        let record = TrustRecord {
            path: path.to_owned(),
            sha256: digest.to_owned(),
            trusted_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        };
        records.files.push(record.clone());
        self.write(&records)?;
        Ok(record)
    }

    /// Removes the record of `path`; whether there was one.
    pub fn revoke(&self, path: &Path) -> Result<bool, String> {
        let mut records = self.read()?;
        let before = records.files.len();
        records.files.retain(|r| r.path != path);
        if records.files.len() == before {
            return Ok(false);
        }
        self.write(&records)?;
        Ok(true)
    }

    fn read(&self) -> Result<TrustFile, String> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(TrustFile {
                    version: 1,
                    files: Vec::new(),
                });
            }
            Err(e) => return Err(format!("cannot read {}: {e}", self.path.display())),
        };
        let file: TrustFile = serde_json::from_str(&text).map_err(|e| {
            format!(
                "{} is not a toolgate trust file ({e}); remove it to trust files anew",
                self.path.display()
            )
        })?;
        if file.version != 1 {
            return Err(format!(
                "{} has version {}, which this toolgate does not know",
                self.path.display(),
                file.version
            ));
        }
        Ok(file)
    }

    /// Writes the records through a temp file renamed over the old one, so a
    /// crash leaves either the old records or the new ones.
    fn write(&self, records: &TrustFile) -> Result<(), String> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let temp = dir.join(format!(".{TRUST_FILE}.{}", std::process::id()));
        let text = serde_json::to_string_pretty(&TrustFile {
            version: 1,
            files: records.files.clone(),
        })
        .map_err(|e| e.to_string())?;
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)
            .and_then(|mut f| {
                f.write_all(text.as_bytes())?;
                f.write_all(b"\n")?;
                f.sync_all()
            })
            .and_then(|()| std::fs::rename(&temp, &self.path));
        written.map_err(|e| {
            let _ = std::fs::remove_file(&temp);
            format!("cannot write {}: {e}", self.path.display())
        })
    }
}

/// The digest trust is recorded under: the file's bytes, and the bytes of
/// the sandbox-runtime settings file it names (`[network] settings_file`),
/// if any, which is configuration too.
pub fn digest(bytes: &[u8], settings_file: Option<&Path>) -> String {
    let mut hash = Sha256::new();
    hash.update(b"toolgate.toml\0");
    hash.update((bytes.len() as u64).to_le_bytes());
    hash.update(bytes);
    if let Some(path) = settings_file {
        hash.update(b"settings_file\0");
        match std::fs::read(path) {
            Ok(extra) => {
                hash.update((extra.len() as u64).to_le_bytes());
                hash.update(&extra);
            }
            Err(_) => hash.update(b"absent"),
        }
    }
    toolgate_core::text::hex(&hash.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn trust_is_for_the_exact_content_and_revocable() {
        let dir = tempfile::tempdir().unwrap();
        let store = TrustStore::new(&dir.path().join("data"));
        let file = Path::new("/p/toolgate.toml");
        let one = digest(b"policy = \"permissive\"\n", None);
        let two = digest(b"policy = \"permissive\"\n\n", None);
        assert_ne!(one, two);
        assert_eq!(store.status(file, &one).unwrap(), TrustStatus::Unknown);
        let record = store.trust(file, &one).unwrap();
        assert_eq!(store.status(file, &one).unwrap(), TrustStatus::Trusted);
        assert_eq!(
            store.status(file, &two).unwrap(),
            TrustStatus::Changed {
                trusted_at: record.trusted_at
            }
        );
        assert_eq!(
            store.status(Path::new("/q/toolgate.toml"), &one).unwrap(),
            TrustStatus::Unknown
        );
        store.trust(file, &two).unwrap();
        assert_eq!(store.list().unwrap().len(), 1);
        assert!(store.revoke(file).unwrap());
        assert!(!store.revoke(file).unwrap());
        assert_eq!(store.status(file, &two).unwrap(), TrustStatus::Unknown);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(store.path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn the_settings_file_it_names_is_part_of_the_digest() {
        let dir = tempfile::tempdir().unwrap();
        let settings = dir.path().join("srt.json");
        std::fs::write(&settings, "{}").unwrap();
        let before = digest(b"x", Some(&settings));
        std::fs::write(&settings, r#"{"filesystem": {}}"#).unwrap();
        assert_ne!(before, digest(b"x", Some(&settings)));
        assert_ne!(before, digest(b"x", None));
    }

    #[test]
    fn a_broken_record_file_is_an_error_not_an_empty_list() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(TRUST_FILE), "not json").unwrap();
        let store = TrustStore::new(dir.path());
        let error = store.status(Path::new("/p"), "d").unwrap_err();
        assert!(error.contains("not a toolgate trust file"), "{error}");
    }
}

//! The project file and toolgate's own files: whether the user trusted the
//! project's `toolgate.toml` (`toolgate trust`), what an untrusted one
//! loses, and which files toolgate protects from the agent.

use std::path::{Path, PathBuf};

use super::trust::{self, TrustRecord, TrustStatus, TrustStore};
use super::{
    ConfigError, ConfigFile, Environment, PROJECT_FILE, Settings, parse, read_file, untrusted,
};

/// What became of an untrusted project file.
pub(super) struct Untrusted {
    pub(super) path: PathBuf,
    pub(super) status: Result<TrustStatus, String>,
    pub(super) ignored: Vec<String>,
    pub(super) narrow_to: Option<Vec<String>>,
}

impl Untrusted {
    pub(super) fn warning(&self) -> String {
        let why = match &self.status {
            Ok(TrustStatus::Changed { trusted_at }) => {
                format!("changed since it was trusted ({trusted_at})")
            }
            Ok(_) => "not trusted".to_owned(),
            Err(e) => format!("not trusted ({e})"),
        };
        format!(
            "{} is {why}, so it may tighten toolgate's configuration but not loosen it; \
             ignored: {}. Its other settings apply. If you wrote it (or read it) and want it \
             applied as written: toolgate trust {}",
            self.path.display(),
            self.ignored.join("; "),
            self.path.display()
        )
    }
}

/// Whether the user trusted the project file `path` as read (`bytes`).
pub(super) fn project_trust(
    env: &Environment,
    path: &Path,
    bytes: &[u8],
    file: &ConfigFile,
) -> Result<TrustStatus, String> {
    let canonical = std::fs::canonicalize(path).map_err(|e| e.to_string())?;
    let digest = trust::digest(bytes, settings_file(file, path).as_deref());
    TrustStore::new(&env.data_dir()).status(&canonical, &digest)
}

/// The sandbox-runtime settings file a config file names, as a path.
fn settings_file(file: &ConfigFile, path: &Path) -> Option<PathBuf> {
    let base = path.parent().unwrap_or(Path::new("."));
    let named = file.network.as_ref()?.settings_file.as_ref()?;
    Some(base.join(named))
}

/// Trusts the project file `path` as it is now: its canonical path and the
/// digest of its content (and of the settings file it names). Also returns
/// what of it the trust lets apply (what an untrusted file loses).
pub fn trust_project_file(
    env: &Environment,
    path: &Path,
) -> Result<(TrustRecord, Vec<String>), ConfigError> {
    let bytes = std::fs::read(path).map_err(|source| ConfigError::Read {
        path: path.to_owned(),
        source,
    })?;
    // A file that does not parse cannot be applied; say so now.
    let file = parse(&String::from_utf8_lossy(&bytes), path)?;
    let canonical = std::fs::canonicalize(path).map_err(|source| ConfigError::Read {
        path: path.to_owned(),
        source,
    })?;
    let digest = trust::digest(&bytes, settings_file(&file, path).as_deref());
    let base = match env.user_config().filter(|p| p.is_file()) {
        Some(user) => read_file(&user)?,
        None => ConfigFile::default(),
    };
    let loosening = untrusted::restrict(file, &base).ignored;
    let record = TrustStore::new(&env.data_dir())
        .trust(&canonical, &digest)
        .map_err(|message| ConfigError::Policy {
            origin: canonical.clone(),
            message,
        })?;
    Ok((record, loosening))
}

/// Each trusted file and whether it is still as trusted (`None`: the file
/// is gone or unreadable).
pub fn trusted_files(env: &Environment) -> Result<Vec<(TrustRecord, Option<bool>)>, String> {
    let store = TrustStore::new(&env.data_dir());
    let records = store.list()?;
    Ok(records
        .into_iter()
        .map(|record| {
            let current = std::fs::read(&record.path).ok().map(|bytes| {
                let file = parse(&String::from_utf8_lossy(&bytes), &record.path).ok();
                let settings = file.and_then(|f| settings_file(&f, &record.path));
                trust::digest(&bytes, settings.as_deref()) == record.sha256
            });
            (record, current)
        })
        .collect())
}

/// Revokes the trust of `path`; whether it was trusted.
pub fn revoke_trust(env: &Environment, path: &Path) -> Result<bool, String> {
    let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| env.cwd.join(path));
    TrustStore::new(&env.data_dir()).revoke(&canonical)
}

/// The project file the discovery finds from the working directory.
pub fn discovered_project_file(env: &Environment) -> Option<PathBuf> {
    env.project_config()
}

/// toolgate's own files (see [`Settings::own_files`]).
pub(super) fn own_files(env: &Environment, settings: &Settings) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = env
        .cwd
        .ancestors()
        .map(|dir| dir.join(PROJECT_FILE))
        .collect();
    files.extend(env.user_config());
    files.extend(settings.sources.files.iter().cloned());
    files.extend(settings.filesystem_source.iter().cloned());
    files.push(env.data_dir());
    files.extend(store_files(settings));
    // The binaries that run: toolgate itself and its stage 2 beside it,
    // run again by the user, a client and every sandbox.
    if let Ok(exe) = std::env::current_exe() {
        files.push(exe.with_file_name(crate::sandbox::STAGE2_BINARY));
        files.push(exe);
    }
    // The roots are canonical, and so must be what is compared with them.
    let mut files: Vec<PathBuf> = files
        .iter()
        .map(|f| toolgate_sandbox::canonical_lenient(f))
        .collect();
    files.sort();
    files.dedup();
    files
}

/// The SQLite store's files that exist. The store holds the grants: an
/// agent that could write it could approve its own calls (and edit the
/// audit log), wherever it lies. Only the files that exist: a missing
/// protected path gets a placeholder in the sandbox, and a placeholder
/// where SQLite is about to create its -wal or -shm file would break the
/// store.
pub fn store_files(settings: &Settings) -> Vec<PathBuf> {
    let super::approvals::StoreUrl::Sqlite(db) = &settings.store else {
        return Vec::new();
    };
    ["", "-wal", "-shm"]
        .into_iter()
        .map(|suffix| {
            let mut name = db.as_os_str().to_owned();
            name.push(suffix);
            PathBuf::from(name)
        })
        .filter(|path| path.exists())
        .collect()
}

/// Adds the store's files to toolgate's own once the store is open: on the
/// first start they did not exist when the configuration was read.
pub fn protect_store_files(settings: &mut Settings) {
    for file in store_files(settings) {
        let file = toolgate_sandbox::canonical_lenient(&file);
        if !settings.own_files.contains(&file) {
            settings.own_files.push(file);
        }
    }
}

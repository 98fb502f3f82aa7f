//! The process environment the configuration reads, and the directories
//! toolgate derives from it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::PROJECT_FILE;

/// The process environment the configuration reads, passed in explicitly.
#[derive(Debug, Clone, Default)]
pub struct Environment {
    /// Variables by name.
    pub vars: BTreeMap<String, String>,
    /// The working directory.
    pub cwd: PathBuf,
}

impl Environment {
    /// The real process environment.
    pub fn capture() -> std::io::Result<Self> {
        Ok(Environment {
            vars: std::env::vars().collect(),
            cwd: std::env::current_dir()?,
        })
    }

    /// A variable, unless unset or empty.
    pub fn var(&self, name: &str) -> Option<&str> {
        self.vars
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    pub(super) fn home(&self) -> Option<PathBuf> {
        self.var("HOME").map(PathBuf::from)
    }

    pub(super) fn user_config(&self) -> Option<PathBuf> {
        let base = match self.var("XDG_CONFIG_HOME") {
            Some(dir) => PathBuf::from(dir),
            None => self.home()?.join(".config"),
        };
        Some(base.join("toolgate").join("config.toml"))
    }

    /// Where toolgate keeps data that outlives a run (the serve token).
    pub fn data_dir(&self) -> PathBuf {
        match (self.var("XDG_DATA_HOME"), self.home()) {
            (Some(dir), _) => PathBuf::from(dir).join("toolgate"),
            (None, Some(home)) => home.join(".local/share/toolgate"),
            (None, None) => self.state_dir(),
        }
    }

    /// Where toolgate keeps its own state (sandbox mask files, private temp dirs).
    pub fn state_dir(&self) -> PathBuf {
        match (self.var("XDG_STATE_HOME"), self.home()) {
            (Some(dir), _) => PathBuf::from(dir).join("toolgate"),
            (None, Some(home)) => home.join(".local/state/toolgate"),
            (None, None) => std::env::temp_dir().join("toolgate-state"),
        }
    }

    /// `toolgate.toml` in the working directory or the nearest parent.
    pub(super) fn project_config(&self) -> Option<PathBuf> {
        self.cwd
            .ancestors()
            .map(|dir| dir.join(PROJECT_FILE))
            .find(|p| p.is_file())
    }
}

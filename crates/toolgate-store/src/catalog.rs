//! The catalogue's records, as the store keeps them.
//!
//! A manifest is opaque JSON here and its pin a digest the caller computed
//! (toolgate-catalog's `Manifest::pin_digest`): what a manifest is, and
//! which of its fields make the pin, is the catalogue's business.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Where a tool stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CatalogState {
    /// Registered, not installed (or re-pinned since it was).
    Shelved,
    /// Installed and verified for its current pin.
    Installed,
    /// Its last install failed.
    Failed,
}

impl CatalogState {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            CatalogState::Shelved => "shelved",
            CatalogState::Installed => "installed",
            CatalogState::Failed => "failed",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Self> {
        [
            CatalogState::Shelved,
            CatalogState::Installed,
            CatalogState::Failed,
        ]
        .into_iter()
        .find(|v| v.as_str() == s)
    }
}

/// One registered tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CatalogTool {
    /// Its id.
    pub id: String,
    /// The manifest as registered.
    pub manifest: Value,
    /// The digest of its pin.
    pub pin: String,
    /// Where it stands.
    pub state: CatalogState,
    /// Where its installed files are (fetched tools).
    pub install_dir: Option<String>,
    /// Why its last install failed.
    pub last_error: Option<String>,
    /// Registered at, unix ms.
    pub added_ms: i64,
    /// Last changed at, unix ms.
    pub updated_ms: i64,
}

/// What registering a manifest did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Registered {
    /// A new tool.
    Added,
    /// The same manifest as before.
    Unchanged,
    /// Other fields changed; the pin did not, so its state stays.
    Updated,
    /// The pin changed: the tool is shelved again.
    Repinned,
}

/// One install, health check or run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CatalogRun {
    /// Its id (`run_...`).
    pub run_id: String,
    /// The tool.
    pub tool_id: String,
    /// `install`, `health` or `run`.
    pub kind: String,
    /// The bin, for health checks and runs.
    pub bin: Option<String>,
    /// The arguments.
    pub argv: Vec<String>,
    /// `ran`, `blocked`, `denied`, `unavailable` or `failed`.
    pub outcome: String,
    /// The exit code, when it ran to an end.
    pub exit_code: Option<i64>,
    /// The signal that ended it.
    pub signal: Option<i64>,
    /// How long it took.
    pub duration_ms: i64,
    /// The grant spent or the request filed.
    pub approval_id: Option<String>,
    /// A line about how it ended (a reason, an error).
    pub detail: Option<String>,
    /// Started at, unix ms (set by the store when zero).
    pub started_ms: i64,
}

impl CatalogRun {
    /// A run of `tool_id` of `kind` that the caller fills in.
    pub fn new(tool_id: impl Into<String>, kind: impl Into<String>) -> Self {
        CatalogRun {
            run_id: crate::model::new_id("run"),
            tool_id: tool_id.into(),
            kind: kind.into(),
            bin: None,
            argv: Vec::new(),
            outcome: String::new(),
            exit_code: None,
            signal: None,
            duration_ms: 0,
            approval_id: None,
            detail: None,
            started_ms: 0,
        }
    }
}

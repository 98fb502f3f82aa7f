//! toolgate's governed catalogue: command-line tools an agent may install
//! and run, each declared in a manifest pinned to an exact version.
//!
//! - [`manifest`]: the manifest format (TOML or JSON), checked field by
//!   field; an error names the file, the tool, the field and what was
//!   expected.
//! - [`gate`]: two gates per tenant, `install` and `execute`, each
//!   `deny | approval | allow_safe | allow_all`, asking a person through
//!   the store's approvals (grants and refusals) when they ask.
//! - [`Catalog`]: the shelf of one tenant over the store: add, list,
//!   remove, install (in the sandbox, network only to the registry, held to
//!   the bytes the first install of a pin recorded), run and health-check
//!   (always under bubblewrap, argv only, writable only the caller's
//!   working directory), every install and run recorded.
//! - [`image`]: the image manifest of the shelf.
//! - [`tool`]: the catalogue as agent tools (`catalog__<id>`,
//!   `catalog_install`), through the same Executor as every tool.
//!
//! This crate is not the sandbox (toolgate-sandbox is) and not the store
//! (toolgate-store keeps its records); it decides what may be installed
//! and run, and runs it there.

mod catalog;
pub mod gate;
pub mod image;
mod install;
pub mod installers;
pub mod manifest;
pub mod release;
mod run;
pub mod tool;
mod version;

pub use catalog::{Catalog, CatalogConfig, Entry, OutcomeKind, SandboxFactory, Stopped};
pub use gate::{Action, GatePolicies, GatePolicy};
pub use install::InstallReport;
pub use manifest::{Manifest, ManifestError, SourceKind};
pub use run::{Health, MAX_ARG_BYTES, MAX_ARGS, RunReport, RunRequest, check_argv};
pub use tool::{CATALOG_GROUP, CatalogInstallTool, CatalogRunTool};

/// What went wrong with a catalogue command (the outcomes of the gates are
/// not errors: see [`OutcomeKind`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogError {
    /// No tool of that id.
    #[error("no catalogue tool `{id}`{hint}{}", known_list(.known))]
    UnknownTool {
        /// The id asked for.
        id: String,
        /// `; did you mean ...?` or empty.
        hint: String,
        /// The ids there are.
        known: Vec<String>,
    },
    /// A manifest does not read.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// The request is not acceptable (a bin, an argument).
    #[error("{0}")]
    Invalid(String),
    /// The store failed.
    #[error("the catalogue store: {0}")]
    Store(String),
    /// A file operation failed.
    #[error("{0}")]
    Io(String),
}

fn known_list(known: &[String]) -> String {
    if known.is_empty() {
        " (the catalogue is empty: add tools with `toolgate catalog add FILE`)".to_owned()
    } else {
        format!(" (the catalogue has: {})", known.join(", "))
    }
}

impl From<toolgate_store::StoreError> for CatalogError {
    fn from(e: toolgate_store::StoreError) -> Self {
        CatalogError::Store(e.to_string())
    }
}

/// Now, unix ms: when a recorded install, health check or run started (the
/// store orders them by it).
pub(crate) fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Lowercase hex SHA-256.
pub(crate) fn digest_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    toolgate_core::text::hex(&Sha256::digest(bytes))
}

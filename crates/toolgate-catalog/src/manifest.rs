//! Catalogue manifests: what one installable tool is, pinned exactly.
//!
//! A file holds one manifest (its fields at the top level) or many
//! (`[[tools]]` in TOML; an array, or `{"tools": [...]}`, in JSON). Every
//! field is checked by hand before anything is built, so an error names the
//! file, the tool, the field and what was expected, and a misspelt field is
//! an error with a did-you-mean rather than a silently ignored line.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use toolgate_core::{EffectClass, Idempotency};

mod parse;

pub use parse::{parse_document, parse_file};

/// Where a tool's bytes come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SourceKind {
    /// An npm package, installed with `npm install --ignore-scripts`.
    #[serde(rename = "npm-package")]
    Npm,
    /// A PyPI package, installed into a virtual environment of its own.
    #[serde(rename = "pypi-package")]
    Pypi,
    /// A crate, installed with `cargo install --locked`.
    #[serde(rename = "cargo-crate")]
    Cargo,
    /// A Debian package that the image must already hold: never installed
    /// at run time, only verified.
    #[serde(rename = "apt-package")]
    Apt,
    /// An executable the image already holds, outside any package manager.
    BinaryPath,
}

toolgate_core::wire_enum!(SourceKind, "source kind", {
    Npm => "npm-package",
    Pypi => "pypi-package",
    Cargo => "cargo-crate",
    Apt => "apt-package",
    BinaryPath => "binary-path",
});

impl SourceKind {
    /// Whether the tool's files are fetched into its own directory (as
    /// opposed to found in the image).
    pub fn is_fetched(self) -> bool {
        matches!(self, SourceKind::Npm | SourceKind::Pypi | SourceKind::Cargo)
    }

    /// The fields naming the package and its version.
    fn package_fields(self) -> Option<(&'static str, &'static str)> {
        match self {
            SourceKind::Npm | SourceKind::Pypi | SourceKind::Cargo => {
                Some(("package_name", "package_version"))
            }
            SourceKind::Apt => Some(("apt_package", "apt_version")),
            SourceKind::BinaryPath => None,
        }
    }
}

/// How much harm a call can do, as the person who wrote the manifest judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Risk {
    /// Reads its input and writes its output.
    Low,
    /// Writes files or runs long.
    Medium,
    /// Anything else.
    High,
}

toolgate_core::wire_enum!(Risk, "risk", {
    Low => "low",
    Medium => "medium",
    High => "high",
});

/// What a grant for a run covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunScope {
    /// This bin with exactly these arguments.
    #[default]
    Exact,
    /// Any run of this bin: for tools whose every call is equally safe.
    Command,
}

toolgate_core::wire_enum!(RunScope, "approval scope", {
    Exact => "exact",
    Command => "command",
});

/// The network a tool's runs get.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Network {
    /// None at all.
    #[default]
    None,
    /// These domains, through toolgate's egress proxy.
    Allow(Vec<String>),
}

impl Network {
    /// Whether the tool runs without any network.
    pub fn is_none(&self) -> bool {
        matches!(self, Network::None)
    }
}

/// One executable of a tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bin {
    /// The name a caller picks it by.
    pub name: String,
    /// Where it is: relative to the tool's install directory for fetched
    /// tools, absolute for apt and binary-path tools.
    pub bin: String,
    /// Arguments of the health check (`--version`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub health_check_args: Vec<String>,
}

/// Ceilings of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Limits {
    /// CPU seconds per process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_seconds: Option<u64>,
    /// Memory of the whole run, in MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<u64>,
    /// Processes and threads of the whole run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<u64>,
    /// Open files per process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_files: Option<u64>,
    /// Largest file a run may write, in MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_size_mb: Option<u64>,
    /// Wall-clock limit, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
    /// Bytes of stdout and of stderr kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_bytes: Option<u64>,
}

/// A package and its exact version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Package {
    /// The name in its registry (or Debian's archive).
    pub name: String,
    /// The exact version.
    pub version: String,
}

/// One catalogue tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Manifest {
    /// `[A-Za-z0-9_-]{1,48}`: the agent tool is `catalog__<id>`.
    pub id: String,
    /// A display name.
    pub name: String,
    /// What it does (shown to the model, bounded).
    pub description: String,
    /// Where its bytes come from.
    pub source_kind: SourceKind,
    /// The package and version (none for binary-path tools).
    pub package: Option<Package>,
    /// The manifest author's judgement.
    pub risk: Risk,
    /// Free-form tags.
    pub capabilities: Vec<String>,
    /// Its executables.
    pub bins: Vec<Bin>,
    /// Network of its runs.
    pub network: Network,
    /// What a grant for a run covers.
    pub approval_scope: RunScope,
    /// Effect class of a run (default mutate-irreversible).
    pub effect_class: EffectClass,
    /// Idempotency of a run (default at-most-once).
    pub idempotency: Idempotency,
    /// Ceilings of a run.
    pub limits: Limits,
    /// Where its documentation is.
    pub docs_url: Option<String>,
    /// Overrides `[catalog] min_release_age` for this pin, in days: a
    /// person who vouches for a fresh release says so here.
    pub min_release_age_days: Option<u32>,
}

/// The longest description kept.
pub const MAX_DESCRIPTION: usize = 1024;
/// The most bins of one tool.
const MAX_BINS: usize = 32;

/// What is wrong with a manifest: where, and what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {tool}{field}{message}")]
pub struct ManifestError {
    file: String,
    tool: String,
    field: String,
    message: String,
}

impl ManifestError {
    fn new(file: &str, tool: &str, field: &str, message: impl Into<String>) -> Self {
        ManifestError {
            file: file.to_owned(),
            tool: if tool.is_empty() {
                String::new()
            } else {
                format!("{tool}: ")
            },
            field: if field.is_empty() {
                String::new()
            } else {
                format!("field `{field}`: ")
            },
            message: message.into(),
        }
    }

    /// The field the error is about (empty for the whole file or tool).
    pub fn field(&self) -> &str {
        self.field
            .trim_start_matches("field `")
            .trim_end_matches("`: ")
    }
}

/// `text` cut to at most `max` bytes on a character boundary, marked.
pub(crate) fn bounded(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let end = toolgate_core::text::floor_char_boundary(text, max.saturating_sub(3));
    format!("{}...", &text[..end])
}

/// Directories of the image a sandboxed run sees read-only: an apt or
/// binary-path tool's executable must lie in one.
pub const SYSTEM_DIRS: &[&str] = &["/usr", "/bin", "/sbin", "/opt", "/lib", "/lib64"];

impl Manifest {
    /// The manifest as a document of its own fields, which
    /// [`parse_document`] reads back to the same manifest.
    pub fn to_document(&self) -> Value {
        let mut map = Map::new();
        let mut put = |k: &str, v: Value| {
            map.insert(k.to_owned(), v);
        };
        put("id", Value::from(self.id.clone()));
        put("name", Value::from(self.name.clone()));
        put("description", Value::from(self.description.clone()));
        put("source_kind", Value::from(self.source_kind.as_str()));
        if let (Some(package), Some((n, v))) = (&self.package, self.source_kind.package_fields()) {
            put(n, Value::from(package.name.clone()));
            put(v, Value::from(package.version.clone()));
        }
        put("risk", Value::from(self.risk.as_str()));
        put("capabilities", serde_json::json!(self.capabilities));
        put("bins", serde_json::json!(self.bins));
        put(
            "network",
            match &self.network {
                Network::None => Value::from("none"),
                Network::Allow(domains) => serde_json::json!({ "allow": domains }),
            },
        );
        put("approval_scope", Value::from(self.approval_scope.as_str()));
        put("effect_class", Value::from(self.effect_class.as_str()));
        put("idempotency", Value::from(self.idempotency.as_str()));
        put("limits", serde_json::json!(self.limits));
        if let Some(url) = &self.docs_url {
            put("docs_url", Value::from(url.clone()));
        }
        if let Some(days) = self.min_release_age_days {
            put("min_release_age_days", Value::from(days));
        }
        Value::Object(map)
    }

    /// What an install is pinned to: the source kind, the package and
    /// version, and the bins. A change of any of these makes the tool
    /// not installed again.
    pub fn pin_digest(&self) -> String {
        let pin = serde_json::json!({
            "source_kind": self.source_kind.as_str(),
            "package": self.package,
            "bins": self.bins.iter().map(|b| (&b.name, &b.bin)).collect::<Vec<_>>(),
        });
        crate::digest_hex(toolgate_policy::canonical_json(&pin).as_bytes())
    }

    /// The bin called `name`, or an error naming the bins there are.
    pub fn bin(&self, name: Option<&str>) -> Result<&Bin, String> {
        match name {
            None => match self.bins.as_slice() {
                [only] => Ok(only),
                bins => Err(format!(
                    "tool `{}` has {} bins; name one of: {}",
                    self.id,
                    bins.len(),
                    bins.iter()
                        .map(|b| b.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            },
            Some(name) => self.bins.iter().find(|b| b.name == name).ok_or_else(|| {
                let names: Vec<&str> = self.bins.iter().map(|b| b.name.as_str()).collect();
                let hint = toolgate_core::suggest::did_you_mean(name, names.iter().copied());
                format!(
                    "tool `{}` has no bin `{name}`{hint} (its bins: {})",
                    self.id,
                    names.join(", ")
                )
            }),
        }
    }

    /// Whether a run counts as safe for `allow_safe`: low risk and no
    /// network while it runs.
    pub fn is_safe(&self) -> bool {
        self.risk == Risk::Low && self.network.is_none()
    }
}

#[cfg(test)]
mod tests;

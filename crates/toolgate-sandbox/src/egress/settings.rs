//! Anthropic sandbox-runtime (`srt`) settings files, so its users can bring
//! their policy as it is.
//!
//! The format follows `SandboxRuntimeConfigSchema` in sandbox-runtime's
//! `src/sandbox/sandbox-config.ts`: `network` and `filesystem` with their
//! lists are required there and here. Unlike `srt`, which falls back to its
//! defaults when the file is empty or invalid, every such file is an error:
//! a policy the user believes in must never silently become another one.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::rule::{RuleList, RuleProblem};
use super::rules::EgressRules;

/// A settings file that could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SettingsError {
    #[error("cannot read sandbox-runtime settings file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "sandbox-runtime settings file {path} is empty; write at least \
         {{\"network\": {{\"allowedDomains\": [], \"deniedDomains\": []}}, \"filesystem\": \
         {{\"denyRead\": [], \"allowWrite\": [], \"denyWrite\": []}}}}"
    )]
    Empty { path: PathBuf },
    #[error("{path}:{line}:{column}: invalid sandbox-runtime settings: {message}")]
    Json {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{path}: invalid {field} entry {entry:?}: {problem}")]
    Entry {
        path: PathBuf,
        field: &'static str,
        entry: String,
        problem: RuleProblem,
    },
    #[error("{path}: {field} must be a JSON object")]
    NotAnObject { path: PathBuf, field: &'static str },
    #[error("{path}: {field} holds an empty path; remove it or name a path")]
    EmptyPath { path: PathBuf, field: &'static str },
}

/// A loaded and validated sandbox-runtime settings file.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SandboxRuntimeSettings {
    /// The file it came from.
    pub path: PathBuf,
    /// `filesystem.allowWrite`, as written (`~` and relative paths unexpanded).
    pub allow_write: Vec<String>,
    /// `filesystem.denyWrite`, as written.
    pub deny_write: Vec<String>,
    /// `filesystem.denyRead`, as written.
    pub deny_read: Vec<String>,
    /// `filesystem.allowRead`, as written (optional in the file).
    pub allow_read: Vec<String>,
    /// Unknown fields, and known ones toolgate does not apply, one line each.
    pub warnings: Vec<String>,
    egress: EgressRules,
}

#[derive(Deserialize)]
#[serde(
    rename_all = "camelCase",
    expecting = "a JSON object with `network` and `filesystem`"
)]
struct SettingsFile {
    network: NetworkSection,
    filesystem: FilesystemSection,
    ignore_violations: Option<BTreeMap<String, Vec<String>>>,
    enable_weaker_nested_sandbox: Option<bool>,
    ripgrep: Option<RipgrepSection>,
    mandatory_deny_search_depth: Option<u8>,
    allow_pty: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", expecting = "the `network` object")]
struct NetworkSection {
    allowed_domains: Vec<String>,
    denied_domains: Vec<String>,
    allow_unix_sockets: Option<Vec<String>>,
    allow_all_unix_sockets: Option<bool>,
    allow_local_binding: Option<bool>,
    http_proxy_port: Option<u16>,
    socks_proxy_port: Option<u16>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", expecting = "the `filesystem` object")]
struct FilesystemSection {
    deny_read: Vec<String>,
    allow_write: Vec<String>,
    deny_write: Vec<String>,
    allow_read: Option<Vec<String>>,
    allow_git_config: Option<bool>,
}

#[derive(Deserialize)]
#[serde(expecting = "the `ripgrep` object")]
struct RipgrepSection {
    #[serde(rename = "command")]
    _command: String,
    #[serde(rename = "args")]
    _args: Option<Vec<String>>,
}

const TOP_FIELDS: &[&str] = &[
    "network",
    "filesystem",
    "ignoreViolations",
    "enableWeakerNestedSandbox",
    "ripgrep",
    "mandatoryDenySearchDepth",
    "allowPty",
];
const NETWORK_FIELDS: &[&str] = &[
    "allowedDomains",
    "deniedDomains",
    "allowUnixSockets",
    "allowAllUnixSockets",
    "allowLocalBinding",
    "httpProxyPort",
    "socksProxyPort",
];
const FILESYSTEM_FIELDS: &[&str] = &[
    "denyRead",
    "allowWrite",
    "denyWrite",
    "allowRead",
    "allowGitConfig",
];

impl SandboxRuntimeSettings {
    /// Reads and validates a settings file: JSON, types, every domain entry
    /// and every path. Errors name the file.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, SettingsError> {
        let path = path.as_ref();
        let text = fs::read_to_string(path).map_err(|source| SettingsError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Validates settings text that came from `path`.
    pub fn parse(text: &str, path: &Path) -> Result<Self, SettingsError> {
        if text.trim().is_empty() {
            return Err(SettingsError::Empty {
                path: path.to_owned(),
            });
        }
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| json_error(path, &e))?;
        // serde would also take `[[...], [...]]` for a struct, a shape
        // sandbox-runtime rejects: only objects are settings.
        let object = |v: Option<&serde_json::Value>| v.is_none_or(serde_json::Value::is_object);
        for (field, ok) in [
            ("the top level", value.is_object()),
            ("network", object(value.get("network"))),
            ("filesystem", object(value.get("filesystem"))),
            ("ripgrep", object(value.get("ripgrep"))),
        ] {
            if !ok {
                return Err(SettingsError::NotAnObject {
                    path: path.to_owned(),
                    field,
                });
            }
        }
        let file: SettingsFile = serde_json::from_str(text).map_err(|e| json_error(path, &e))?;
        let egress = EgressRules::new(&file.network.allowed_domains, &file.network.denied_domains)
            .map_err(|e| SettingsError::Entry {
                path: path.to_owned(),
                field: match e.list {
                    RuleList::Allow => "network.allowedDomains",
                    RuleList::Deny => "network.deniedDomains",
                },
                entry: e.entry,
                problem: e.problem,
            })?;
        let mut warnings = unknown_fields(&value);
        warnings.extend(unapplied_fields(&file));
        let fs = file.filesystem;
        let allow_read = fs.allow_read.clone().unwrap_or_default();
        for (field, list) in [
            ("filesystem.denyRead", &fs.deny_read),
            ("filesystem.allowWrite", &fs.allow_write),
            ("filesystem.denyWrite", &fs.deny_write),
            ("filesystem.allowRead", &allow_read),
        ] {
            if list.iter().any(String::is_empty) {
                return Err(SettingsError::EmptyPath {
                    path: path.to_owned(),
                    field,
                });
            }
        }
        Ok(SandboxRuntimeSettings {
            path: path.to_owned(),
            allow_write: fs.allow_write,
            deny_write: fs.deny_write,
            deny_read: fs.deny_read,
            allow_read,
            warnings,
            egress,
        })
    }

    /// The network rules: `allowedDomains` and `deniedDomains`.
    pub fn egress_rules(&self) -> &EgressRules {
        &self.egress
    }
}

fn json_error(path: &Path, error: &serde_json::Error) -> SettingsError {
    // serde_json appends the position to its message; it is reported apart.
    let full = error.to_string();
    let suffix = format!(" at line {} column {}", error.line(), error.column());
    SettingsError::Json {
        path: path.to_owned(),
        line: error.line(),
        column: error.column(),
        message: full.strip_suffix(&suffix).unwrap_or(&full).to_owned(),
    }
}

/// Fields sandbox-runtime does not know: most likely typos, listed so that
/// a misspelt `deniedDomain` does not pass unnoticed.
fn unknown_fields(value: &serde_json::Value) -> Vec<String> {
    let Some(top) = value.as_object() else {
        return Vec::new();
    };
    let mut warnings = Vec::new();
    let mut check =
        |prefix: &str, object: &serde_json::Map<String, serde_json::Value>, known: &[&str]| {
            for key in object.keys().filter(|k| !known.contains(&k.as_str())) {
                warnings.push(format!("unknown field `{prefix}{key}` ignored"));
            }
        };
    check("", top, TOP_FIELDS);
    for (section, known) in [
        ("network", NETWORK_FIELDS),
        ("filesystem", FILESYSTEM_FIELDS),
    ] {
        if let Some(serde_json::Value::Object(object)) = top.get(section) {
            check(&format!("{section}."), object, known);
        }
    }
    warnings
}

/// sandbox-runtime settings toolgate does not apply, when set to anything
/// but their default. Each is ignored in the safe direction: toolgate's own
/// sandbox stays at least as strict.
fn unapplied_fields(file: &SettingsFile) -> Vec<String> {
    let net = &file.network;
    let allow_git_config = file.filesystem.allow_git_config;
    let set = [
        (
            "network.allowUnixSockets",
            net.allow_unix_sockets
                .as_ref()
                .is_some_and(|v| !v.is_empty()),
        ),
        (
            "network.allowAllUnixSockets",
            net.allow_all_unix_sockets == Some(true),
        ),
        (
            "network.allowLocalBinding",
            net.allow_local_binding == Some(true),
        ),
        ("network.httpProxyPort", net.http_proxy_port.is_some()),
        ("network.socksProxyPort", net.socks_proxy_port.is_some()),
        ("filesystem.allowGitConfig", allow_git_config == Some(true)),
        (
            "ignoreViolations",
            file.ignore_violations
                .as_ref()
                .is_some_and(|m| !m.is_empty()),
        ),
        (
            "enableWeakerNestedSandbox",
            file.enable_weaker_nested_sandbox == Some(true),
        ),
        ("ripgrep", file.ripgrep.is_some()),
        (
            "mandatoryDenySearchDepth",
            file.mandatory_deny_search_depth.is_some(),
        ),
        ("allowPty", file.allow_pty == Some(true)),
    ];
    set.iter()
        .filter(|(_, set)| *set)
        .map(|(field, _)| format!("`{field}` is not applied by toolgate and is ignored"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn write(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("srt-settings.json");
        fs::write(&path, text).unwrap();
        (dir, path)
    }

    const GOOD: &str = r#"{
  "network": {
    "allowedDomains": ["github.com", "*.github.com", "*.npmjs.org"],
    "deniedDomains": ["malicious.com"],
    "allowUnixSockets": ["/var/run/docker.sock"],
    "allowLocalBinding": false
  },
  "filesystem": {
    "denyRead": ["~/.ssh"],
    "allowWrite": [".", "src/", "/tmp"],
    "denyWrite": [".env"],
    "allowRead": ["~/.ssh/known_hosts"],
    "denyReed": []
  },
  "ignoreViolations": {"*": ["/usr/bin"]},
  "enableWeakerNestedSandbox": false,
  "colour": "blue"
}"#;

    #[test]
    fn loads_a_good_file() {
        let (_dir, path) = write(GOOD);
        let settings = SandboxRuntimeSettings::load(&path).unwrap();
        let want_rules = EgressRules::new(
            &["github.com", "*.github.com", "*.npmjs.org"],
            &["malicious.com"],
        )
        .unwrap();
        assert_eq!(
            settings,
            SandboxRuntimeSettings {
                path: path.clone(),
                allow_write: vec![".".into(), "src/".into(), "/tmp".into()],
                deny_write: vec![".env".into()],
                deny_read: vec!["~/.ssh".into()],
                allow_read: vec!["~/.ssh/known_hosts".into()],
                warnings: vec![
                    "unknown field `colour` ignored".into(),
                    "unknown field `filesystem.denyReed` ignored".into(),
                    "`network.allowUnixSockets` is not applied by toolgate and is ignored".into(),
                    "`ignoreViolations` is not applied by toolgate and is ignored".into(),
                ],
                egress: want_rules,
            }
        );
        assert!(
            settings
                .egress_rules()
                .decide("api.github.com", 443)
                .allowed
        );
        assert!(!settings.egress_rules().decide("malicious.com", 443).allowed);
    }

    #[test]
    fn minimal_file_without_optional_fields() {
        let (_dir, path) = write(
            r#"{"network": {"allowedDomains": [], "deniedDomains": []},
                "filesystem": {"denyRead": [], "allowWrite": [], "denyWrite": []}}"#,
        );
        let settings = SandboxRuntimeSettings::load(&path).unwrap();
        assert_eq!(settings.warnings, Vec::<String>::new());
        assert_eq!(settings.allow_read, Vec::<String>::new());
        assert!(!settings.egress_rules().decide("github.com", 443).allowed);
    }

    #[test]
    fn bad_files_are_errors_naming_the_file() {
        let cases: Vec<(&str, String)> = vec![
            ("", "is empty; write at least".into()),
            (" \n\t", "is empty".into()),
            (
                "{\n  \"network\": {\"allowedDomains\": [\"a.test\",]}\n}",
                ":2:43: invalid sandbox-runtime settings: trailing comma".into(),
            ),
            (
                "{\"network\": 1}",
                ": network must be a JSON object".into(),
            ),
            ("[]", ": the top level must be a JSON object".into()),
            ("null", ": the top level must be a JSON object".into()),
            (
                r#"{"network": [["a.test"], []], "filesystem": [[], [], []]}"#,
                ": network must be a JSON object".into(),
            ),
            (
                r#"{"network": {"allowedDomains": "github.com", "deniedDomains": []}}"#,
                ":1:43: invalid sandbox-runtime settings: invalid type: string \"github.com\", expected a sequence".into(),
            ),
            (
                r#"{"network": {"allowedDomains": [], "deniedDomains": []}}"#,
                ":1:56: invalid sandbox-runtime settings: missing field `filesystem`".into(),
            ),
            (
                r#"{"network": {"allowedDomains": [], "deniedDomains": [], "allowLocalBinding": "yes"},
                   "filesystem": {"denyRead": [], "allowWrite": [], "denyWrite": []}}"#,
                ":1:82: invalid sandbox-runtime settings: invalid type: string \"yes\", expected a boolean".into(),
            ),
            (
                r#"{"network": {"allowedDomains": ["ok.test", "*.com"], "deniedDomains": []},
                   "filesystem": {"denyRead": [], "allowWrite": [], "denyWrite": []}}"#,
                ": invalid network.allowedDomains entry \"*.com\": `*.com` covers a whole public suffix".into(),
            ),
            (
                r#"{"network": {"allowedDomains": [], "deniedDomains": ["https://evil.test"]},
                   "filesystem": {"denyRead": [], "allowWrite": [], "denyWrite": []}}"#,
                ": invalid network.deniedDomains entry \"https://evil.test\": it has a scheme".into(),
            ),
            (
                r#"{"network": {"allowedDomains": [], "deniedDomains": []},
                   "filesystem": {"denyRead": [], "allowWrite": [""], "denyWrite": []}}"#,
                ": filesystem.allowWrite holds an empty path".into(),
            ),
        ];
        for (text, want) in cases {
            let (_dir, path) = write(text);
            let err = SandboxRuntimeSettings::load(&path).unwrap_err().to_string();
            let shown = path.display().to_string();
            assert!(err.contains(&shown), "{text:?}: {err}");
            assert!(err.contains(&want), "{text:?}:\n got {err}\nwant {want}");
        }
    }

    #[test]
    fn unreadable_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("absent.json");
        let err = SandboxRuntimeSettings::load(&missing).unwrap_err();
        assert!(matches!(&err, SettingsError::Read { path, .. } if *path == missing));
        assert!(err.to_string().starts_with(&format!(
            "cannot read sandbox-runtime settings file {}: ",
            missing.display()
        )));
        let err = SandboxRuntimeSettings::load(dir.path()).unwrap_err();
        assert!(
            matches!(err, SettingsError::Read { .. }),
            "a directory: {err}"
        );
    }

    #[test]
    fn json_error_position_is_structured() {
        let err = SandboxRuntimeSettings::parse("{\n\n  oops", Path::new("s.json")).unwrap_err();
        let SettingsError::Json {
            line,
            column,
            message,
            ..
        } = &err
        else {
            panic!("not a JSON error: {err}");
        };
        assert_eq!(
            (*line, *column, message.as_str()),
            (3, 3, "key must be a string")
        );
        assert_eq!(
            err.to_string(),
            "s.json:3:3: invalid sandbox-runtime settings: key must be a string"
        );
    }
}

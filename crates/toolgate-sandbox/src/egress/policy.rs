//! The `[network]` table of toolgate.toml (per policy and per catalogue
//! tool) and the egress mode it builds.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::rule::EgressRuleError;
use super::rules::EgressRules;
use super::settings::{SandboxRuntimeSettings, SettingsError};

/// Network configuration as written in toolgate.toml:
/// `{ mode = "proxy", allow = [...], deny = [...], settings_file = "srt.json" }`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct NetworkPolicy {
    /// `none` (the default), `proxy` or `host`.
    #[serde(default)]
    pub mode: NetworkModeName,
    /// Allowed hosts (proxy mode only).
    #[serde(default)]
    pub allow: Vec<String>,
    /// Denied hosts, checked first (proxy mode only).
    #[serde(default)]
    pub deny: Vec<String>,
    /// A sandbox-runtime settings file whose domain lists are added to
    /// `allow` and `deny`; relative to the configuration's directory.
    #[serde(default)]
    pub settings_file: Option<PathBuf>,
}

/// The `mode` key.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NetworkModeName {
    /// No network.
    #[default]
    None,
    /// Only through toolgate's allowlist proxy.
    Proxy,
    /// The host's network, unfiltered.
    Host,
}

impl fmt::Display for NetworkModeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NetworkModeName::None => "none",
            NetworkModeName::Proxy => "proxy",
            NetworkModeName::Host => "host",
        })
    }
}

/// What a sandboxed command's network will be.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EgressMode {
    /// No network at all.
    None,
    /// Only through the proxy, which applies these rules.
    Proxy(EgressRules),
    /// The host's network.
    Host,
}

/// A `[network]` table that cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NetworkPolicyError {
    #[error("network: {0}")]
    Rule(#[from] EgressRuleError),
    #[error(
        "network.{field} applies only with mode = \"proxy\", but mode is \"{mode}\"; \
         set mode = \"proxy\" or remove {field}"
    )]
    ProxyOnlyField {
        field: &'static str,
        mode: NetworkModeName,
    },
    #[error("network.settings_file: {0}")]
    Settings(#[from] SettingsError),
}

impl NetworkPolicy {
    /// Builds the mode, loading `settings_file` relative to `base_dir`.
    ///
    /// Lists under `none` or `host` are an error rather than ignored: a user
    /// who wrote `deny = [...]` under `host` would believe it enforced.
    pub fn build(&self, base_dir: &Path) -> Result<EgressMode, NetworkPolicyError> {
        if self.mode != NetworkModeName::Proxy {
            let field = [
                ("allow", !self.allow.is_empty()),
                ("deny", !self.deny.is_empty()),
                ("settings_file", self.settings_file.is_some()),
            ]
            .into_iter()
            .find_map(|(field, set)| set.then_some(field));
            if let Some(field) = field {
                return Err(NetworkPolicyError::ProxyOnlyField {
                    field,
                    mode: self.mode,
                });
            }
            return Ok(match self.mode {
                NetworkModeName::Host => EgressMode::Host,
                _ => EgressMode::None,
            });
        }
        let rules = EgressRules::new(&self.allow, &self.deny)?;
        let rules = match self.load_settings(base_dir)? {
            Some(settings) => rules.merge(settings.egress_rules().clone()),
            None => rules,
        };
        Ok(EgressMode::Proxy(rules))
    }

    /// The settings file, if one is named: its filesystem lists and
    /// warnings are for the caller, its domain lists are part of `build`.
    pub fn load_settings(
        &self,
        base_dir: &Path,
    ) -> Result<Option<SandboxRuntimeSettings>, SettingsError> {
        self.settings_file
            .as_ref()
            .map(|file| SandboxRuntimeSettings::load(base_dir.join(file)))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn policy(json: &str) -> Result<NetworkPolicy, String> {
        serde_json::from_str(json).map_err(|e| e.to_string())
    }

    #[test]
    fn deserialises_strictly() {
        assert_eq!(policy("{}"), Ok(NetworkPolicy::default()));
        assert_eq!(
            policy(
                r#"{"mode": "proxy", "allow": ["a.test"], "deny": ["b.test"], "settings_file": "s.json"}"#
            ),
            Ok(NetworkPolicy {
                mode: NetworkModeName::Proxy,
                allow: vec!["a.test".into()],
                deny: vec!["b.test".into()],
                settings_file: Some("s.json".into()),
            })
        );
        let err = policy(r#"{"mode": "proxy", "allowed": []}"#).unwrap_err();
        assert!(err.starts_with("unknown field `allowed`"), "{err}");
        let err = policy(r#"{"mode": "open"}"#).unwrap_err();
        assert!(
            err.starts_with("unknown variant `open`, expected one of `none`, `proxy`, `host`"),
            "{err}"
        );
    }

    #[test]
    fn builds_each_mode() {
        let base = Path::new("/nonexistent");
        let build = |json: &str| policy(json).unwrap().build(base);
        assert_eq!(build("{}").unwrap(), EgressMode::None);
        assert_eq!(build(r#"{"mode": "host"}"#).unwrap(), EgressMode::Host);
        assert_eq!(
            build(r#"{"mode": "proxy"}"#).unwrap(),
            EgressMode::Proxy(EgressRules::default())
        );
        assert_eq!(
            build(r#"{"mode": "proxy", "allow": ["*.a.test"], "deny": ["x.a.test"]}"#).unwrap(),
            EgressMode::Proxy(EgressRules::new(&["*.a.test"], &["x.a.test"]).unwrap())
        );
        let errors = [
            (
                r#"{"allow": ["a.test"]}"#,
                "network.allow applies only with mode = \"proxy\", but mode is \"none\"; \
                 set mode = \"proxy\" or remove allow",
            ),
            (
                r#"{"mode": "host", "deny": ["a.test"]}"#,
                "network.deny applies only with mode = \"proxy\", but mode is \"host\"; \
                 set mode = \"proxy\" or remove deny",
            ),
            (
                r#"{"mode": "host", "settings_file": "s.json"}"#,
                "network.settings_file applies only with mode = \"proxy\", but mode is \"host\"; \
                 set mode = \"proxy\" or remove settings_file",
            ),
            (
                r#"{"mode": "proxy", "allow": ["*"]}"#,
                "network: invalid allow entry \"*\": `*` alone would allow every host; \
                 list the domains the command needs",
            ),
            (
                r#"{"mode": "proxy", "deny": ["::1"]}"#,
                "network: invalid deny entry \"::1\": it looks like an IPv6 address without \
                 brackets; write `[::1]` or `[::1]:443`",
            ),
        ];
        for (json, want) in errors {
            assert_eq!(build(json).unwrap_err().to_string(), want, "{json}");
        }
    }

    #[test]
    fn settings_file_is_relative_to_base_and_merged() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("srt.json"),
            r#"{"network": {"allowedDomains": ["*.pkg.test"], "deniedDomains": ["bad.pkg.test"]},
                "filesystem": {"denyRead": [], "allowWrite": ["."], "denyWrite": []}}"#,
        )
        .unwrap();
        let p =
            policy(r#"{"mode": "proxy", "allow": ["api.test:443"], "settings_file": "srt.json"}"#)
                .unwrap();
        let EgressMode::Proxy(rules) = p.build(dir.path()).unwrap() else {
            panic!("not proxy mode");
        };
        assert!(rules.decide("api.test", 443).allowed);
        assert!(rules.decide("x.pkg.test", 443).allowed);
        assert!(!rules.decide("bad.pkg.test", 443).allowed);
        let settings = p.load_settings(dir.path()).unwrap().unwrap();
        assert_eq!(settings.allow_write, vec![".".to_owned()]);

        let missing = policy(r#"{"mode": "proxy", "settings_file": "absent.json"}"#).unwrap();
        let err = missing.build(dir.path()).unwrap_err().to_string();
        let want = format!(
            "network.settings_file: cannot read sandbox-runtime settings file {}: ",
            dir.path().join("absent.json").display()
        );
        assert!(err.starts_with(&want), "{err}");
    }
}

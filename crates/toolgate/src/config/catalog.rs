//! `[catalog]`: the gates' default policies and the minimum release age.
//!
//! ```toml
//! [catalog]
//! install = "approval"        # deny | approval | allow_safe | allow_all
//! execute = "allow_safe"
//! min_release_age = "7d"      # refuse installs of younger releases
//! ```
//!
//! A tenant's policies in the store override `install` and `execute`.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use toolgate_catalog::{GatePolicies, GatePolicy};

use super::approvals::{format_duration, parse_duration, unknown};

const CATALOG_KEYS: [&str; 3] = ["install", "execute", "min_release_age"];

/// `[catalog]` as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(try_from = "BTreeMap<String, toml::Value>")]
pub struct CatalogSection {
    pub install: Option<GatePolicy>,
    pub execute: Option<GatePolicy>,
    pub min_release_age: Option<Duration>,
}

impl TryFrom<BTreeMap<String, toml::Value>> for CatalogSection {
    type Error = String;

    fn try_from(table: BTreeMap<String, toml::Value>) -> Result<Self, String> {
        let mut section = CatalogSection::default();
        for (key, value) in table {
            let text = value
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| format!("[catalog] {key}: expected a string, got {value}"))?;
            let policy = || {
                text.parse::<GatePolicy>()
                    .map(Some)
                    .map_err(|e| format!("[catalog] {key}: {e}"))
            };
            match key.as_str() {
                "install" => section.install = policy()?,
                "execute" => section.execute = policy()?,
                "min_release_age" => {
                    section.min_release_age =
                        Some(parse_duration(&text).map_err(|e| format!("[catalog] {key}: {e}"))?);
                }
                other => return Err(unknown("catalog", other, &CATALOG_KEYS)),
            }
        }
        Ok(section)
    }
}

/// `[catalog]` over the defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogDefaults {
    pub policies: GatePolicies,
    pub min_release_age: Duration,
}

impl Default for CatalogDefaults {
    fn default() -> Self {
        CatalogDefaults {
            policies: GatePolicies::default(),
            min_release_age: Duration::from_secs(7 * 24 * 3600),
        }
    }
}

impl CatalogDefaults {
    pub fn from_section(section: Option<&CatalogSection>) -> Self {
        let mut out = CatalogDefaults::default();
        if let Some(s) = section {
            out.policies.install = s.install.unwrap_or(out.policies.install);
            out.policies.execute = s.execute.unwrap_or(out.policies.execute);
            out.min_release_age = s.min_release_age.unwrap_or(out.min_release_age);
        }
        out
    }
}

/// How much a policy lets through: an untrusted project may only lower it.
fn openness(policy: GatePolicy) -> u8 {
    match policy {
        GatePolicy::Deny => 0,
        GatePolicy::Approval => 1,
        GatePolicy::AllowSafe => 2,
        GatePolicy::AllowAll => 3,
    }
}

/// The project's `[catalog]` over the user's where it tightens: a gate no
/// more open than the user's, a minimum release age no shorter.
pub fn restrict(
    project: CatalogSection,
    base: Option<&CatalogSection>,
    ignored: &mut Vec<String>,
) -> CatalogSection {
    let own = CatalogDefaults::from_section(base);
    let mut section = base.cloned().unwrap_or_default();
    for (name, theirs, ours, slot) in [
        (
            "install",
            project.install,
            own.policies.install,
            &mut section.install,
        ),
        (
            "execute",
            project.execute,
            own.policies.execute,
            &mut section.execute,
        ),
    ] {
        if let Some(theirs) = theirs {
            if openness(theirs) <= openness(ours) {
                *slot = Some(theirs);
            } else {
                ignored.push(format!(
                    "[catalog] {name} = \"{theirs}\" (more open than \"{ours}\")"
                ));
            }
        }
    }
    if let Some(theirs) = project.min_release_age {
        if theirs >= own.min_release_age {
            section.min_release_age = Some(theirs);
        } else {
            ignored.push(format!(
                "[catalog] min_release_age = \"{}\" (shorter than \"{}\")",
                format_duration(theirs),
                format_duration(own.min_release_age)
            ));
        }
    }
    section
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(text: &str) -> Result<CatalogSection, String> {
        let table: BTreeMap<String, toml::Value> =
            toml::from_str(text).map_err(|e| e.to_string())?;
        CatalogSection::try_from(table)
    }

    #[test]
    fn keys_are_checked_with_the_key_meant() {
        assert!(
            section("instal = \"deny\"")
                .unwrap_err()
                .contains("did you mean `install`?")
        );
        assert!(section("execute = \"allow-safe\"")
            .unwrap_err()
            .contains("unknown gate policy `allow-safe`, expected one of: deny, approval, allow_safe, allow_all"));
        assert!(
            section("min_release_age = \"a week\"")
                .unwrap_err()
                .starts_with("[catalog] min_release_age:")
        );
        let s = section("install = \"deny\"\nexecute = \"allow_all\"\nmin_release_age = \"14d\"")
            .unwrap();
        assert_eq!(s.install, Some(GatePolicy::Deny));
        assert_eq!(s.min_release_age, Some(Duration::from_secs(14 * 86_400)));
    }

    #[test]
    fn an_untrusted_project_may_only_tighten() {
        let user = section("install = \"approval\"\nexecute = \"allow_safe\"").unwrap();
        let project =
            section("install = \"allow_all\"\nexecute = \"deny\"\nmin_release_age = \"1d\"")
                .unwrap();
        let mut ignored = Vec::new();
        let out = restrict(project, Some(&user), &mut ignored);
        assert_eq!(out.install, Some(GatePolicy::Approval));
        assert_eq!(out.execute, Some(GatePolicy::Deny));
        assert_eq!(out.min_release_age, None);
        assert_eq!(ignored.len(), 2, "{ignored:?}");
        assert!(
            ignored[0].contains("[catalog] install = \"allow_all\""),
            "{ignored:?}"
        );
    }
}

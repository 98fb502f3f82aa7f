//! When a pinned version was published, from its registry.
//!
//! Fresh releases are how registry attacks land (a stolen token publishes
//! a poisoned patch release; it is found and pulled within days), so an
//! install refuses a version younger than `[catalog] min_release_age`
//! unless its manifest states an override.

use std::time::Duration;

use serde_json::Value;

use crate::manifest::{Package, SourceKind};

/// Where the registries are asked.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Registries {
    /// npm's registry (`https://registry.npmjs.org`).
    pub npm: String,
    /// PyPI (`https://pypi.org`).
    pub pypi: String,
    /// The crates.io sparse index (`https://index.crates.io`).
    pub crates_index: String,
}

impl Default for Registries {
    fn default() -> Self {
        Registries {
            npm: "https://registry.npmjs.org".to_owned(),
            pypi: "https://pypi.org".to_owned(),
            crates_index: "https://index.crates.io".to_owned(),
        }
    }
}

/// The hosts an install of `kind` fetches from: its only network.
pub fn install_hosts(kind: SourceKind) -> Vec<String> {
    let hosts: &[&str] = match kind {
        SourceKind::Npm => &["registry.npmjs.org"],
        SourceKind::Pypi => &["pypi.org", "files.pythonhosted.org"],
        SourceKind::Cargo => &["index.crates.io", "static.crates.io"],
        SourceKind::Apt | SourceKind::BinaryPath => &[],
    };
    hosts.iter().map(|h| (*h).to_owned()).collect()
}

/// When `package` was published, in unix seconds; `Ok(None)` when the
/// registry does not say (crates published before the index kept dates).
pub async fn published(
    registries: &Registries,
    kind: SourceKind,
    package: &Package,
) -> Result<Option<i64>, String> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .map_err(|e| format!("cannot build an HTTP client: {e}"))?;
    let (url, accept) = match kind {
        SourceKind::Npm => (
            format!("{}/{}", registries.npm, package.name.replace('/', "%2F")),
            "application/json",
        ),
        SourceKind::Pypi => (
            format!("{}/pypi/{}/json", registries.pypi, package.name),
            "application/json",
        ),
        SourceKind::Cargo => (
            format!("{}/{}", registries.crates_index, index_path(&package.name)),
            "text/plain",
        ),
        SourceKind::Apt | SourceKind::BinaryPath => return Ok(None),
    };
    let response = client
        .get(&url)
        .header("accept", accept)
        .send()
        .await
        .map_err(|e| format!("cannot reach {url}: {e}"))?;
    if response.status() == reqwest::StatusCode::NOT_FOUND {
        return Err(format!(
            "the registry has no package `{}` ({url} answered 404)",
            package.name
        ));
    }
    if !response.status().is_success() {
        return Err(format!("{url} answered {}", response.status()));
    }
    let body = response
        .text()
        .await
        .map_err(|e| format!("reading {url}: {e}"))?;
    let missing = || {
        format!(
            "the registry lists no version {} of `{}`",
            package.version, package.name
        )
    };
    match kind {
        SourceKind::Npm => {
            let doc: Value = serde_json::from_str(&body).map_err(|e| format!("{url}: {e}"))?;
            let stamp = doc["time"][&package.version].as_str().ok_or_else(missing)?;
            parse_time(stamp).map(Some)
        }
        SourceKind::Pypi => {
            let doc: Value = serde_json::from_str(&body).map_err(|e| format!("{url}: {e}"))?;
            let files = doc["releases"][&package.version]
                .as_array()
                .filter(|f| !f.is_empty())
                .ok_or_else(missing)?;
            // The release's first upload: a later wheel added to an old
            // release does not make the release young.
            let mut earliest: Option<i64> = None;
            for file in files {
                if let Some(stamp) = file["upload_time_iso_8601"].as_str() {
                    let t = parse_time(stamp)?;
                    earliest = Some(earliest.map_or(t, |e| e.min(t)));
                }
            }
            Ok(earliest)
        }
        SourceKind::Cargo => {
            for line in body.lines() {
                let Ok(entry) = serde_json::from_str::<Value>(line) else {
                    continue;
                };
                if entry["vers"] == package.version.as_str() {
                    return match entry["pubtime"].as_str() {
                        Some(stamp) => parse_time(stamp).map(Some),
                        None => Ok(None),
                    };
                }
            }
            Err(missing())
        }
        SourceKind::Apt | SourceKind::BinaryPath => Ok(None),
    }
}

/// The sparse index's path of a crate (`1/a`, `2/ab`, `3/a/abc`,
/// `ri/pg/ripgrep`).
pub fn index_path(name: &str) -> String {
    let lower = name.to_ascii_lowercase();
    match lower.len() {
        1 => format!("1/{lower}"),
        2 => format!("2/{lower}"),
        3 => format!("3/{}/{lower}", &lower[..1]),
        _ => format!("{}/{}/{lower}", &lower[..2], &lower[2..4]),
    }
}

/// RFC 3339 (`2024-12-07T08:02:57.288Z`, `...+00:00`) to unix seconds.
pub fn parse_time(stamp: &str) -> Result<i64, String> {
    chrono::DateTime::parse_from_rfc3339(stamp)
        .map(|t| t.timestamp())
        .map_err(|e| format!("the registry's date {stamp:?} does not parse: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_paths_follow_the_sparse_layout() {
        for (name, path) in [
            ("a", "1/a"),
            ("ab", "2/ab"),
            ("abc", "3/a/abc"),
            ("ripgrep", "ri/pg/ripgrep"),
            ("Serde", "se/rd/serde"),
        ] {
            assert_eq!(index_path(name), path);
        }
    }

    #[test]
    fn registry_dates_parse() {
        assert_eq!(parse_time("1970-01-01T00:00:10Z"), Ok(10));
        assert_eq!(parse_time("1970-01-01T00:00:10.500+00:00"), Ok(10));
        assert!(parse_time("yesterday").is_err());
    }
}

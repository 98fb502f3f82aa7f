//! The image manifest: every package of the shelf with its pin, so an
//! image can be built that holds them (apt tools must be in the image;
//! registry tools can be baked in to spare the install).
//!
//! The output is deterministic: sorted by source kind and package name,
//! keys in a fixed order, so two runs over the same shelf are
//! byte-identical and a diff of two images' manifests is meaningful.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::manifest::{Manifest, SourceKind};

/// One package of the image.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pinned {
    version: String,
    tools: Vec<String>,
    bins: Vec<String>,
}

/// The packages of `manifests` by kind and name, or the first conflict:
/// one package pinned at two versions by two tools.
fn packages(manifests: &[Manifest]) -> Result<BTreeMap<(SourceKind, String), Pinned>, String> {
    let mut sorted: Vec<&Manifest> = manifests.iter().collect();
    sorted.sort_by(|a, b| a.id.cmp(&b.id));
    let mut out: BTreeMap<(SourceKind, String), Pinned> = BTreeMap::new();
    for m in sorted {
        let (name, version) = match &m.package {
            Some(p) => (p.name.clone(), p.version.clone()),
            None => continue,
        };
        let bins = m.bins.iter().map(|b| b.bin.clone());
        match out.get_mut(&(m.source_kind, name.clone())) {
            Some(pinned) if pinned.version != version => {
                return Err(format!(
                    "{} `{name}` is pinned twice: {} by tool `{}`, {version} by tool `{}`; pin one version in both manifests",
                    m.source_kind,
                    pinned.version,
                    pinned.tools.first().map(String::as_str).unwrap_or_default(),
                    m.id
                ));
            }
            Some(pinned) => {
                pinned.tools.push(m.id.clone());
                pinned.bins.extend(bins);
            }
            None => {
                out.insert(
                    (m.source_kind, name),
                    Pinned {
                        version,
                        tools: vec![m.id.clone()],
                        bins: bins.collect(),
                    },
                );
            }
        }
    }
    for pinned in out.values_mut() {
        pinned.bins.sort();
        pinned.bins.dedup();
    }
    Ok(out)
}

/// The image manifest as JSON text (pretty, one trailing newline).
pub fn manifest_json(manifests: &[Manifest]) -> Result<String, String> {
    let packages = packages(manifests)?;
    let mut sections: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
    for ((kind, name), pinned) in &packages {
        let section = match kind {
            SourceKind::Apt => "apt",
            SourceKind::Npm => "npm",
            SourceKind::Pypi => "pypi",
            SourceKind::Cargo => "cargo",
            SourceKind::BinaryPath => continue,
        };
        sections.entry(section).or_default().push(json!({
            "name": name,
            "version": pinned.version,
            "tools": pinned.tools,
            "bins": pinned.bins,
        }));
    }
    let mut binaries: Vec<Value> = Vec::new();
    let mut sorted: Vec<&Manifest> = manifests.iter().collect();
    sorted.sort_by(|a, b| a.id.cmp(&b.id));
    for m in sorted
        .iter()
        .filter(|m| m.source_kind == SourceKind::BinaryPath)
    {
        for bin in &m.bins {
            binaries.push(json!({"tool": m.id, "name": bin.name, "path": bin.bin}));
        }
    }
    let document = json!({
        "apt": sections.remove("apt").unwrap_or_default(),
        "npm": sections.remove("npm").unwrap_or_default(),
        "pypi": sections.remove("pypi").unwrap_or_default(),
        "cargo": sections.remove("cargo").unwrap_or_default(),
        "binaries": binaries,
    });
    // serde_json's map keeps keys sorted (no preserve_order), so the text
    // is the same on every run.
    let mut text = serde_json::to_string_pretty(&document).map_err(|e| e.to_string())?;
    text.push('\n');
    Ok(text)
}

/// `apt-get install -y --no-install-recommends name=version ...` for the
/// shelf's apt tools (empty when there are none).
pub fn apt_fragment(manifests: &[Manifest]) -> Result<String, String> {
    let packages = packages(manifests)?;
    let pins: Vec<String> = packages
        .iter()
        .filter(|((kind, _), _)| *kind == SourceKind::Apt)
        .map(|((_, name), p)| format!("{name}={}", p.version))
        .collect();
    if pins.is_empty() {
        return Ok(String::new());
    }
    Ok(format!(
        "apt-get install -y --no-install-recommends {}\n",
        pins.join(" ")
    ))
}

/// A Dockerfile fragment that installs the whole shelf: the apt packages
/// pinned, npm packages globally with scripts off, PyPI packages each in
/// a virtual environment of its own, crates with `--locked`.
pub fn dockerfile(manifests: &[Manifest]) -> Result<String, String> {
    let packages = packages(manifests)?;
    let of = |kind: SourceKind| -> Vec<String> {
        packages
            .iter()
            .filter(|((k, _), _)| *k == kind)
            .map(|((_, name), p)| match kind {
                SourceKind::Npm => format!("{name}@{}", p.version),
                SourceKind::Pypi => format!("{name}=={}", p.version),
                _ => format!("{name}={}", p.version),
            })
            .collect()
    };
    let mut out =
        String::from("# The toolgate catalogue's shelf (toolgate catalog image --dockerfile)\n");
    let apt = of(SourceKind::Apt);
    let mut apt_needs: Vec<&str> = Vec::new();
    if !of(SourceKind::Npm).is_empty() {
        apt_needs.push("npm");
    }
    if !of(SourceKind::Pypi).is_empty() {
        apt_needs.extend(["python3", "python3-venv"]);
    }
    if !apt.is_empty() || !apt_needs.is_empty() {
        out.push_str(&format!(
            "RUN apt-get update \\\n && apt-get install -y --no-install-recommends {} \\\n && rm -rf /var/lib/apt/lists/*\n",
            apt_needs
                .iter()
                .map(|s| (*s).to_owned())
                .chain(apt)
                .collect::<Vec<_>>()
                .join(" ")
        ));
    }
    let npm = of(SourceKind::Npm);
    if !npm.is_empty() {
        out.push_str(&format!(
            "RUN npm install --global --ignore-scripts --no-audit --no-fund {}\n",
            npm.join(" ")
        ));
    }
    for ((kind, name), p) in &packages {
        if *kind == SourceKind::Pypi {
            out.push_str(&format!(
                "RUN python3 -m venv /opt/toolgate/{name} && /opt/toolgate/{name}/bin/pip install --no-cache-dir --only-binary :all: {name}=={}\n",
                p.version
            ));
        }
    }
    for ((kind, name), p) in &packages {
        if *kind == SourceKind::Cargo {
            out.push_str(&format!(
                "RUN cargo install --locked --version {} --root /usr/local {name}\n",
                p.version
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::parse_document;
    use pretty_assertions::assert_eq;

    fn tool(id: &str, kind: &str, name: &str, version: &str) -> Manifest {
        let mut doc = json!({"id": id, "description": "d", "source_kind": kind, "risk": "low",
            "bins": [{"name": id, "bin": format!("/usr/bin/{id}")}]});
        if kind == "apt-package" {
            doc["apt_package"] = json!(name);
            doc["apt_version"] = json!(version);
        } else {
            doc["package_name"] = json!(name);
            doc["package_version"] = json!(version);
            doc["bins"] = json!([{"name": id}]);
        }
        parse_document("t", doc).unwrap().remove(0)
    }

    #[test]
    fn the_image_manifest_is_the_same_whatever_the_order_of_the_shelf() {
        let a = vec![
            tool("jq", "apt-package", "jq", "1.6-2.1"),
            tool("cowsay", "npm-package", "cowsay", "1.6.0"),
            tool("ruff", "pypi-package", "ruff", "0.6.9"),
            tool("jq2", "apt-package", "jq", "1.6-2.1"),
        ];
        let mut b = a.clone();
        b.reverse();
        assert_eq!(manifest_json(&a).unwrap(), manifest_json(&b).unwrap());
        let text = manifest_json(&a).unwrap();
        let doc: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(doc["apt"][0]["tools"], json!(["jq", "jq2"]));
        assert_eq!(
            apt_fragment(&a).unwrap(),
            "apt-get install -y --no-install-recommends jq=1.6-2.1\n"
        );
        let dockerfile = dockerfile(&a).unwrap();
        assert!(
            dockerfile.contains(
                "npm install --global --ignore-scripts --no-audit --no-fund cowsay@1.6.0"
            ),
            "{dockerfile}"
        );
        assert!(dockerfile.contains("ruff==0.6.9"), "{dockerfile}");
        assert!(
            dockerfile.contains("npm python3 python3-venv jq=1.6-2.1"),
            "{dockerfile}"
        );
    }

    #[test]
    fn two_pins_of_one_package_are_an_error_naming_both_tools() {
        let shelf = vec![
            tool("jq", "apt-package", "jq", "1.6-2.1"),
            tool("jq-new", "apt-package", "jq", "1.7.1-3"),
        ];
        let error = manifest_json(&shelf).unwrap_err();
        assert_eq!(
            error,
            "apt-package `jq` is pinned twice: 1.6-2.1 by tool `jq`, 1.7.1-3 by tool `jq-new`; pin one version in both manifests"
        );
        assert_eq!(apt_fragment(&shelf).unwrap_err(), error);
        assert_eq!(dockerfile(&shelf).unwrap_err(), error);
    }
}

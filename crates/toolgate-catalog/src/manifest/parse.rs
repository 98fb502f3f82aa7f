//! Reading manifests: every field checked by hand before anything is
//! built, so that an error names the file, the tool, the field and what was
//! expected, and a misspelt field gets a did-you-mean.

use std::collections::BTreeMap;
use std::path::{Component, Path};

use serde_json::{Map, Value};
use toolgate_core::{EffectClass, Idempotency};

use super::{
    Bin, Limits, MAX_BINS, MAX_DESCRIPTION, Manifest, ManifestError, Network, Package, Risk,
    SYSTEM_DIRS, SourceKind, bounded,
};
use crate::version::check_exact;

const LIMIT_FIELDS: &[&str] = &[
    "cpu_seconds",
    "memory_mb",
    "processes",
    "open_files",
    "file_size_mb",
    "timeout_seconds",
    "output_bytes",
];
const FIELDS: &[&str] = &[
    "id",
    "name",
    "description",
    "source_kind",
    "package_name",
    "package_version",
    "apt_package",
    "apt_version",
    "risk",
    "capabilities",
    "bins",
    "network",
    "approval_scope",
    "effect_class",
    "idempotency",
    "limits",
    "docs_url",
    "min_release_age_days",
];
/// Reads every manifest of one file: TOML unless the name ends in `.json`.
/// `file` names it in errors.
pub fn parse_file(file: &Path, text: &str) -> Result<Vec<Manifest>, ManifestError> {
    let shown = file.display().to_string();
    let is_json = file
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    let document: Value = if is_json {
        serde_json::from_str(text)
            .map_err(|e| ManifestError::new(&shown, "", "", format!("not valid JSON: {e}")))?
    } else {
        toml::from_str(text)
            .map_err(|e| ManifestError::new(&shown, "", "", format!("not valid TOML: {e}")))?
    };
    parse_document(&shown, document)
}

/// Reads the manifests of a parsed document.
pub fn parse_document(file: &str, document: Value) -> Result<Vec<Manifest>, ManifestError> {
    let items = match document {
        Value::Array(items) => items,
        Value::Object(mut map) if map.contains_key("tools") && !map.contains_key("id") => {
            if map.len() > 1 {
                let other = map
                    .keys()
                    .find(|k| *k != "tools")
                    .cloned()
                    .unwrap_or_default();
                return Err(ManifestError::new(
                    file,
                    "",
                    &other,
                    "a file of many tools holds only `tools` (each tool's fields go inside its [[tools]] entry)",
                ));
            }
            match map.remove("tools") {
                Some(Value::Array(items)) => items,
                _ => {
                    return Err(ManifestError::new(
                        file,
                        "",
                        "tools",
                        "expected an array of tools ([[tools]] in TOML)",
                    ));
                }
            }
        }
        single @ Value::Object(_) => vec![single],
        _ => {
            return Err(ManifestError::new(
                file,
                "",
                "",
                "expected a tool (a table of fields) or a list of tools",
            ));
        }
    };
    if items.is_empty() {
        return Err(ManifestError::new(file, "", "", "holds no tool"));
    }
    let mut seen = BTreeMap::new();
    let mut out = Vec::with_capacity(items.len());
    for (index, item) in items.into_iter().enumerate() {
        let manifest = parse_one(file, index, item)?;
        if let Some(first) = seen.insert(manifest.id.clone(), index) {
            return Err(ManifestError::new(
                file,
                &format!("tool `{}`", manifest.id),
                "id",
                format!("used by tools {} and {} of this file", first + 1, index + 1),
            ));
        }
        out.push(manifest);
    }
    Ok(out)
}

/// A reader of one tool's fields that names the tool in every error.
struct Fields<'a> {
    file: &'a str,
    tool: String,
    map: Map<String, Value>,
}

impl Fields<'_> {
    fn error(&self, field: &str, message: impl Into<String>) -> ManifestError {
        ManifestError::new(self.file, &self.tool, field, message)
    }

    fn expected(&self, field: &str, expected: &str, got: &Value) -> ManifestError {
        self.error(field, format!("expected {expected}, got {}", shown(got)))
    }

    fn string(&self, field: &str) -> Result<Option<String>, ManifestError> {
        match self.map.get(field) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(self.expected(field, "a string", other)),
        }
    }

    fn required(&self, field: &str, what: &str) -> Result<String, ManifestError> {
        match self.string(field)? {
            Some(s) if !s.trim().is_empty() => Ok(s),
            Some(_) => Err(self.error(field, format!("expected {what}, got an empty string"))),
            None => Err(self.error(field, format!("missing: expected {what}"))),
        }
    }

    fn word<T: std::str::FromStr<Err = toolgate_core::ParseEnumError>>(
        &self,
        field: &str,
    ) -> Result<Option<T>, ManifestError> {
        match self.string(field)? {
            None => Ok(None),
            Some(s) => s
                .parse::<T>()
                .map(Some)
                .map_err(|e| self.error(field, e.to_string())),
        }
    }

    fn strings(&self, field: &str) -> Result<Vec<String>, ManifestError> {
        match self.map.get(field) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s.clone()),
                    other => Err(self.expected(field, "a list of strings", other)),
                })
                .collect(),
            Some(other) => Err(self.expected(field, "a list of strings", other)),
        }
    }
}

fn shown(v: &Value) -> String {
    let text = v.to_string();
    if text.chars().count() > 80 {
        format!("{}…", text.chars().take(80).collect::<String>())
    } else {
        text
    }
}

/// `[A-Za-z0-9_-]{1,max}`.
fn is_name(s: &str, max: usize) -> bool {
    !s.is_empty()
        && s.len() <= max
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn unknown_keys(
    fields: &Fields<'_>,
    keys: impl Iterator<Item = String>,
    known: &[&str],
    inside: &str,
) -> Result<(), ManifestError> {
    for key in keys {
        if !known.contains(&key.as_str()) {
            let hint = toolgate_core::suggest::did_you_mean(&key, known.iter().copied());
            let field = if inside.is_empty() {
                key.clone()
            } else {
                format!("{inside}.{key}")
            };
            return Err(fields.error(
                &field,
                format!("unknown field{hint} (the fields are: {})", known.join(", ")),
            ));
        }
    }
    Ok(())
}

fn parse_one(file: &str, index: usize, item: Value) -> Result<Manifest, ManifestError> {
    let Value::Object(map) = item else {
        return Err(ManifestError::new(
            file,
            &format!("tool {}", index + 1),
            "",
            format!("expected a table of fields, got {}", shown(&item)),
        ));
    };
    let tool = match map.get("id") {
        Some(Value::String(id)) => format!("tool `{id}`"),
        _ => format!("tool {}", index + 1),
    };
    let f = Fields { file, tool, map };
    unknown_keys(&f, f.map.keys().cloned(), FIELDS, "")?;

    let id = f.required("id", "an id of letters, digits, `_` and `-`")?;
    if !is_name(&id, 48) {
        return Err(f.error(
            "id",
            format!("expected 1 to 48 letters, digits, `_` or `-`, got {id:?}"),
        ));
    }
    let name = f.string("name")?.unwrap_or_else(|| id.clone());
    let description = f.required("description", "what the tool does, in a sentence")?;
    let description = bounded(&description, MAX_DESCRIPTION);
    let source_kind: SourceKind = f.word("source_kind")?.ok_or_else(|| {
        f.error(
            "source_kind",
            format!("missing: expected one of {}", SourceKind::NAMES.join(", ")),
        )
    })?;
    let package = package(&f, source_kind)?;
    let risk: Risk = f.word("risk")?.ok_or_else(|| {
        f.error(
            "risk",
            format!("missing: expected one of {}", Risk::NAMES.join(", ")),
        )
    })?;
    let bins = bins(&f, source_kind)?;
    let network = network(&f)?;
    let limits = limits(&f)?;
    let docs_url = f.string("docs_url")?;
    if let Some(url) = &docs_url
        && !(url.starts_with("https://") || url.starts_with("http://"))
    {
        return Err(f.expected("docs_url", "an http(s) URL", &Value::String(url.clone())));
    }
    let min_release_age_days = match f.map.get("min_release_age_days") {
        None => None,
        Some(v) => Some(
            v.as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| f.expected("min_release_age_days", "a whole number of days", v))?,
        ),
    };
    Ok(Manifest {
        capabilities: f.strings("capabilities")?,
        approval_scope: f.word("approval_scope")?.unwrap_or_default(),
        effect_class: f
            .word("effect_class")?
            .unwrap_or(EffectClass::MutateIrreversible),
        idempotency: f.word("idempotency")?.unwrap_or(Idempotency::AtMostOnce),
        id,
        name,
        description,
        source_kind,
        package,
        risk,
        bins,
        network,
        limits,
        docs_url,
        min_release_age_days,
    })
}

fn package(f: &Fields<'_>, kind: SourceKind) -> Result<Option<Package>, ManifestError> {
    // Fields of another kind are a mistake (an npm manifest with
    // apt_version would otherwise pin nothing it says).
    for (other_name, other_version) in [
        ("package_name", "package_version"),
        ("apt_package", "apt_version"),
    ] {
        if kind.package_fields() != Some((other_name, other_version)) {
            for field in [other_name, other_version] {
                if f.map.contains_key(field) {
                    let fix = match kind.package_fields() {
                        Some((n, v)) => format!("a {kind} names its package with `{n}` and `{v}`"),
                        None => {
                            format!("a {kind} tool has no package: its bins name the executables")
                        }
                    };
                    return Err(f.error(field, format!("not a field of a {kind} tool: {fix}")));
                }
            }
        }
    }
    let Some((name_field, version_field)) = kind.package_fields() else {
        return Ok(None);
    };
    let name = f.required(name_field, "the package's name in its registry")?;
    if name.chars().any(|c| c.is_whitespace() || c.is_control()) || name.starts_with('-') {
        return Err(f.expected(
            name_field,
            "a package name (no spaces, not starting with `-`)",
            &Value::String(name),
        ));
    }
    let version = f.required(version_field, "the exact version")?;
    check_exact(kind, &version).map_err(|expected| {
        f.error(
            version_field,
            format!("expected {expected}, got {version:?}"),
        )
    })?;
    Ok(Some(Package { name, version }))
}

fn bins(f: &Fields<'_>, kind: SourceKind) -> Result<Vec<Bin>, ManifestError> {
    let items = match f.map.get("bins") {
        Some(Value::Array(items)) if !items.is_empty() => items,
        Some(Value::Array(_)) | None => {
            return Err(f.error(
                "bins",
                "missing: expected at least one [[bins]] entry with `name` and `bin`",
            ));
        }
        Some(other) => return Err(f.expected("bins", "a list of bins ([[bins]])", other)),
    };
    if items.len() > MAX_BINS {
        return Err(f.error(
            "bins",
            format!("at most {MAX_BINS} bins, got {}", items.len()),
        ));
    }
    let mut bins: Vec<Bin> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let at = format!("bins[{i}]");
        let Value::Object(map) = item else {
            return Err(f.expected(&at, "a table with `name` and `bin`", item));
        };
        unknown_keys(
            f,
            map.keys().cloned(),
            &["name", "bin", "health_check_args"],
            &at,
        )?;
        let sub = Fields {
            file: f.file,
            tool: f.tool.clone(),
            map: map.clone(),
        };
        let name = sub
            .required("name", "the bin's name")
            .map_err(|_| f.error(&format!("{at}.name"), "missing: expected the bin's name"))?;
        if !is_name(&name, 64) {
            return Err(f.error(
                &format!("{at}.name"),
                format!("expected 1 to 64 letters, digits, `_` or `-`, got {name:?}"),
            ));
        }
        if bins.iter().any(|b| b.name == name) {
            return Err(f.error(
                &format!("{at}.name"),
                format!("bin `{name}` is listed twice"),
            ));
        }
        let bin = match sub
            .string("bin")
            .map_err(|_| f.error(&format!("{at}.bin"), "expected a path"))?
        {
            Some(bin) => bin,
            None => match kind {
                SourceKind::Npm => format!("node_modules/.bin/{name}"),
                SourceKind::Pypi => format!("venv/bin/{name}"),
                SourceKind::Cargo => format!("bin/{name}"),
                SourceKind::Apt | SourceKind::BinaryPath => {
                    return Err(f.error(
                        &format!("{at}.bin"),
                        format!("missing: a {kind} tool names the absolute path of each executable (for example /usr/bin/{name})"),
                    ));
                }
            },
        };
        check_bin_path(kind, &bin).map_err(|m| f.error(&format!("{at}.bin"), m))?;
        let health_check_args = sub.strings("health_check_args").map_err(|_| {
            f.error(
                &format!("{at}.health_check_args"),
                "expected a list of strings",
            )
        })?;
        bins.push(Bin {
            name,
            bin,
            health_check_args,
        });
    }
    Ok(bins)
}

/// A fetched tool's bin lies inside its install directory (relative, no
/// `..`): `../../bin/sh` would hand a caller the image's shell under the
/// tool's grant. An image tool's lies in the system directories a run sees.
fn check_bin_path(kind: SourceKind, bin: &str) -> Result<(), String> {
    let path = Path::new(bin);
    if bin.contains('\0') || bin.is_empty() {
        return Err("expected a path".to_owned());
    }
    if kind.is_fetched() {
        let inside = path
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
        if !inside {
            return Err(format!(
                "expected a path inside the tool's install directory (relative, without `..`), got {bin:?}"
            ));
        }
        return Ok(());
    }
    let normal = path.is_absolute()
        && path
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::RootDir));
    if !normal || !SYSTEM_DIRS.iter().any(|d| path.starts_with(d)) {
        return Err(format!(
            "expected an absolute path without `..` under {} (the image's directories a run sees), got {bin:?}",
            SYSTEM_DIRS.join(", ")
        ));
    }
    Ok(())
}

fn network(f: &Fields<'_>) -> Result<Network, ManifestError> {
    let expected = "\"none\" or { allow = [\"registry.example.com\", ...] }";
    match f.map.get("network") {
        None => Ok(Network::None),
        Some(Value::String(s)) if s == "none" => Ok(Network::None),
        Some(Value::Object(map)) => {
            unknown_keys(f, map.keys().cloned(), &["allow"], "network")?;
            let Some(Value::Array(items)) = map.get("allow") else {
                return Err(f.error("network.allow", format!("expected {expected}")));
            };
            let mut domains = Vec::new();
            for item in items {
                let Value::String(domain) = item else {
                    return Err(f.expected("network.allow", "a list of domains", item));
                };
                let plain = domain.trim_start_matches("*.");
                let ok = !plain.is_empty()
                    && plain
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b':');
                if !ok {
                    return Err(f.error(
                        "network.allow",
                        format!("expected a domain such as api.example.com or *.example.com (no scheme, no path), got {domain:?}"),
                    ));
                }
                domains.push(domain.to_ascii_lowercase());
            }
            if domains.is_empty() {
                return Ok(Network::None);
            }
            Ok(Network::Allow(domains))
        }
        Some(other) => Err(f.expected("network", expected, other)),
    }
}

fn limits(f: &Fields<'_>) -> Result<Limits, ManifestError> {
    let map = match f.map.get("limits") {
        None => return Ok(Limits::default()),
        Some(Value::Object(map)) => map,
        Some(other) => return Err(f.expected("limits", "a table of limits", other)),
    };
    unknown_keys(f, map.keys().cloned(), LIMIT_FIELDS, "limits")?;
    let get = |field: &str| -> Result<Option<u64>, ManifestError> {
        match map.get(field) {
            None => Ok(None),
            Some(v) => match v.as_u64() {
                Some(n) if n > 0 => Ok(Some(n)),
                _ => Err(f.expected(&format!("limits.{field}"), "a whole number above 0", v)),
            },
        }
    };
    Ok(Limits {
        cpu_seconds: get("cpu_seconds")?,
        memory_mb: get("memory_mb")?,
        processes: get("processes")?,
        open_files: get("open_files")?,
        file_size_mb: get("file_size_mb")?,
        timeout_seconds: get("timeout_seconds")?,
        output_bytes: get("output_bytes")?,
    })
}

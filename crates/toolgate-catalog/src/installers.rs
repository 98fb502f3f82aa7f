//! The installer commands of each registry, and what an install resolved.
//!
//! A plan is files to write and argv to run in the sandbox, in order; no
//! step goes through a shell. The record of what was resolved is what the
//! first install of a pin leaves in the store, and what every later
//! install of that pin must match.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::manifest::{Package, SourceKind};

/// One installer command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// What it does, for progress and errors.
    pub say: String,
    /// Its argv.
    pub argv: Vec<String>,
}

/// How to install one package into one directory.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    /// Files to write first (relative path, contents).
    pub files: Vec<(String, String)>,
    /// Commands to run, in order.
    pub steps: Vec<Step>,
    /// Variables of every step.
    pub env: Vec<(String, String)>,
    /// Directories to remove afterwards (caches, the installer's home).
    pub caches: Vec<String>,
    /// Paths of the host the steps need to read (a toolchain).
    pub read_only: Vec<PathBuf>,
}

fn step(say: impl Into<String>, argv: &[&str]) -> Step {
    Step {
        say: say.into(),
        argv: argv.iter().map(|s| (*s).to_owned()).collect(),
    }
}

/// The plan of installing `package` into `dir`, held to `locked` (the
/// record of the pin's first install) when there is one.
pub fn plan(
    kind: SourceKind,
    package: &Package,
    dir: &Path,
    locked: Option<&Value>,
) -> Result<Plan, String> {
    let d = dir.display().to_string();
    let home = format!("{d}/.home");
    let spec = match kind {
        SourceKind::Npm => format!("{}@{}", package.name, package.version),
        SourceKind::Pypi => format!("{}=={}", package.name, package.version),
        _ => String::new(),
    };
    let mut plan = Plan {
        env: vec![
            ("HOME".into(), home),
            ("TMPDIR".into(), format!("{d}/.tmp")),
        ],
        caches: vec![".home".into(), ".tmp".into()],
        ..Plan::default()
    };
    match kind {
        SourceKind::Npm => {
            plan.env.extend([
                ("npm_config_cache".into(), format!("{d}/.npm-cache")),
                ("npm_config_update_notifier".into(), "false".into()),
                ("npm_config_fund".into(), "false".into()),
                ("npm_config_audit".into(), "false".into()),
                // Lifecycle scripts are the registry's code.
                ("npm_config_ignore_scripts".into(), "true".into()),
            ]);
            plan.caches.push(".npm-cache".into());
            let flags = ["--ignore-scripts", "--no-audit", "--no-fund", "--omit=dev"];
            match locked {
                None => {
                    plan.files.push((
                        "package.json".into(),
                        "{\"name\": \"toolgate-catalog-tool\", \"private\": true}\n".into(),
                    ));
                    let mut argv = vec!["npm", "install", "--save-exact"];
                    argv.extend(flags);
                    argv.push(&spec);
                    plan.steps.push(step(format!("npm install {spec}"), &argv));
                }
                Some(record) => {
                    for (file, key) in [
                        ("package.json", "package_json"),
                        ("package-lock.json", "package_lock"),
                    ] {
                        let text = serde_json::to_string_pretty(&record[key])
                            .map_err(|e| format!("the recorded {file}: {e}"))?;
                        plan.files.push((file.into(), text));
                    }
                    let mut argv = vec!["npm", "ci"];
                    argv.extend(flags);
                    plan.steps.push(step(
                        format!("npm ci {spec} (held to the recorded lockfile)"),
                        &argv,
                    ));
                }
            }
        }
        SourceKind::Pypi => {
            let python = "/usr/bin/python3";
            if !Path::new(python).exists() {
                return Err("PyPI tools need /usr/bin/python3 in the image (Debian: python3 and python3-venv)".into());
            }
            plan.env
                .push(("PIP_DISABLE_PIP_VERSION_CHECK".into(), "1".into()));
            plan.env.push(("PIP_NO_INPUT".into(), "1".into()));
            let venv = format!("{d}/venv");
            let pip = format!("{venv}/bin/python");
            let report = format!("{d}/.pip-report.json");
            plan.caches.push(".pip-report.json".into());
            plan.steps.push(step(
                "creating the virtual environment",
                &[python, "-m", "venv", &venv],
            ));
            let mut argv = vec![
                pip.as_str(),
                "-m",
                "pip",
                "install",
                "--no-cache-dir",
                // Building an sdist runs the package's code at install time.
                "--only-binary",
                ":all:",
                "--report",
                report.as_str(),
            ];
            let requirements = format!("{d}/requirements.lock");
            match locked {
                None => {
                    argv.push(&spec);
                    plan.steps.push(step(format!("pip install {spec}"), &argv));
                }
                Some(record) => {
                    let mut lines = String::new();
                    for p in record["packages"].as_array().into_iter().flatten() {
                        let (Some(name), Some(version), Some(sha)) = (
                            p["name"].as_str(),
                            p["version"].as_str(),
                            p["sha256"].as_str(),
                        ) else {
                            return Err(format!(
                                "the recorded install of this pin is malformed: {p}"
                            ));
                        };
                        lines.push_str(&format!("{name}=={version} --hash=sha256:{sha}\n"));
                    }
                    plan.files.push(("requirements.lock".into(), lines));
                    argv.extend(["--require-hashes", "--no-deps", "-r", requirements.as_str()]);
                    plan.steps.push(step(
                        format!("pip install {spec} (held to the recorded hashes)"),
                        &argv,
                    ));
                }
            }
        }
        SourceKind::Cargo => {
            let sysroot = std::process::Command::new("rustc")
                .args(["--print", "sysroot"])
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
                .ok_or("cargo-crate tools need a Rust toolchain on the host (`rustc --print sysroot` failed; with rustup, set RUSTUP_HOME when toolgate runs with another HOME)")?;
            let cargo = format!("{sysroot}/bin/cargo");
            plan.read_only.push(PathBuf::from(&sysroot));
            plan.env.extend([
                ("CARGO_HOME".into(), format!("{d}/.cargo-home")),
                ("CARGO_TARGET_DIR".into(), format!("{d}/.target")),
                ("RUSTC".into(), format!("{sysroot}/bin/rustc")),
                ("PATH".into(), format!("{sysroot}/bin:/usr/bin:/bin")),
            ]);
            plan.caches.extend([".cargo-home".into(), ".target".into()]);
            plan.steps.push(step(
                format!("cargo install {} {}", package.name, package.version),
                &[
                    &cargo,
                    "install",
                    "--locked",
                    "--version",
                    &package.version,
                    "--root",
                    &d,
                    "--",
                    &package.name,
                ],
            ));
        }
        SourceKind::Apt | SourceKind::BinaryPath => {
            return Err(format!("a {kind} tool is not installed at run time"));
        }
    }
    Ok(plan)
}

/// What an install in `dir` resolved: every package's version and hash.
pub fn resolved(kind: SourceKind, dir: &Path) -> Result<Value, String> {
    let read = |name: &str| -> Result<Value, String> {
        let path = dir.join(name);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("the installer left no {name}: {e}"))?;
        serde_json::from_str(&text).map_err(|e| format!("{name}: {e}"))
    };
    match kind {
        SourceKind::Npm => {
            let lock = read("package-lock.json")?;
            let mut packages = serde_json::Map::new();
            for (path, p) in lock["packages"].as_object().into_iter().flatten() {
                if path.is_empty() {
                    continue;
                }
                packages.insert(
                    path.clone(),
                    json!({"version": p["version"], "integrity": p["integrity"]}),
                );
            }
            Ok(json!({
                "kind": "npm",
                "package_json": read("package.json")?,
                "package_lock": lock,
                "packages": packages,
            }))
        }
        SourceKind::Pypi => {
            let report = read(".pip-report.json")?;
            let mut packages = Vec::new();
            for item in report["install"].as_array().into_iter().flatten() {
                let info = &item["download_info"];
                let sha = info["archive_info"]["hashes"]["sha256"]
                    .as_str()
                    .map(str::to_owned)
                    .or_else(|| {
                        info["archive_info"]["hash"]
                            .as_str()
                            .and_then(|h| h.strip_prefix("sha256="))
                            .map(str::to_owned)
                    })
                    .ok_or_else(|| {
                        format!("pip reported no sha256 for {}", item["metadata"]["name"])
                    })?;
                packages.push(json!({
                    "name": item["metadata"]["name"],
                    "version": item["metadata"]["version"],
                    "url": info["url"],
                    "sha256": sha,
                }));
            }
            packages.sort_by_key(|p| p["name"].as_str().unwrap_or_default().to_ascii_lowercase());
            Ok(json!({"kind": "pypi", "packages": packages}))
        }
        SourceKind::Cargo => {
            let tracked = read(".crates2.json")?;
            let installs: Vec<&String> = tracked["installs"]
                .as_object()
                .map(|m| m.keys().collect())
                .unwrap_or_default();
            Ok(json!({"kind": "cargo", "installs": installs}))
        }
        SourceKind::Apt | SourceKind::BinaryPath => Ok(Value::Null),
    }
}

/// Whether a later install fetched exactly what the first one recorded.
pub fn same_bytes(locked: &Value, now: &Value) -> Result<(), String> {
    let key = match locked["kind"].as_str() {
        Some("npm") => "packages",
        Some("pypi") => "packages",
        Some("cargo") => "installs",
        _ => return Err("the recorded install has no kind".into()),
    };
    if locked[key] == now[key] {
        return Ok(());
    }
    Err(format!(
        "recorded {}, now {}",
        crate::manifest::bounded(&locked[key].to_string(), 400),
        crate::manifest::bounded(&now[key].to_string(), 400)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn package(name: &str, version: &str) -> Package {
        Package {
            name: name.into(),
            version: version.into(),
        }
    }

    #[test]
    fn npm_ignores_scripts_and_a_locked_pin_installs_with_npm_ci() {
        let dir = Path::new("/data/catalog/t/cowsay/x");
        let first = plan(SourceKind::Npm, &package("cowsay", "1.6.0"), dir, None).unwrap();
        let argv: Vec<&str> = first.steps[0].argv.iter().map(String::as_str).collect();
        assert_eq!(
            argv,
            [
                "npm",
                "install",
                "--save-exact",
                "--ignore-scripts",
                "--no-audit",
                "--no-fund",
                "--omit=dev",
                "cowsay@1.6.0"
            ]
        );
        assert!(
            first
                .env
                .contains(&("npm_config_ignore_scripts".into(), "true".into()))
        );
        let record = json!({"kind": "npm", "package_json": {"dependencies": {"cowsay": "1.6.0"}},
            "package_lock": {"lockfileVersion": 3, "packages": {}}});
        let later = plan(
            SourceKind::Npm,
            &package("cowsay", "1.6.0"),
            dir,
            Some(&record),
        )
        .unwrap();
        assert_eq!(
            later.steps[0].argv[..2],
            ["npm".to_owned(), "ci".to_owned()]
        );
        assert!(later.steps[0].argv.contains(&"--ignore-scripts".to_owned()));
        assert_eq!(later.files.len(), 2);
    }

    #[test]
    fn pip_installs_wheels_only_and_a_locked_pin_requires_its_hashes() {
        let dir = Path::new("/d");
        let first = plan(SourceKind::Pypi, &package("cowsay", "6.1"), dir, None).unwrap();
        assert_eq!(
            first.steps[0].argv,
            ["/usr/bin/python3", "-m", "venv", "/d/venv"]
        );
        let install = &first.steps[1].argv;
        assert!(install.windows(2).any(|w| w == ["--only-binary", ":all:"]));
        assert_eq!(install.last().map(String::as_str), Some("cowsay==6.1"));
        let record = json!({"kind": "pypi", "packages": [{"name": "cowsay", "version": "6.1", "sha256": "ab12"}]});
        let later = plan(
            SourceKind::Pypi,
            &package("cowsay", "6.1"),
            dir,
            Some(&record),
        )
        .unwrap();
        assert!(later.steps[1].argv.contains(&"--require-hashes".to_owned()));
        assert_eq!(
            later.files,
            [(
                "requirements.lock".to_owned(),
                "cowsay==6.1 --hash=sha256:ab12\n".to_owned()
            )]
        );
    }

    #[test]
    fn image_tools_have_no_install_plan() {
        assert!(
            plan(
                SourceKind::Apt,
                &package("jq", "1.6-2.1"),
                Path::new("/d"),
                None
            )
            .is_err()
        );
    }

    #[test]
    fn other_bytes_than_recorded_are_named() {
        let a = json!({"kind": "pypi", "packages": [{"name": "x", "sha256": "aa"}]});
        let b = json!({"kind": "pypi", "packages": [{"name": "x", "sha256": "bb"}]});
        assert!(same_bytes(&a, &a).is_ok());
        let why = same_bytes(&a, &b).unwrap_err();
        assert!(why.contains("aa") && why.contains("bb"), "{why}");
    }
}

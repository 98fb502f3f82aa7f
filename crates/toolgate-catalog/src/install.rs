//! Installs: through the install gate, inside the sandbox, into a
//! directory of the tool's own that becomes its install only when the
//! store points at it.
//!
//! - npm packages with `--ignore-scripts`: lifecycle scripts are the
//!   registry's code with the installer's reach; a tool that needs them is
//!   not a managed tool.
//! - PyPI packages into a virtual environment of their own, wheels only
//!   (`--only-binary :all:`): building an sdist runs the package's code
//!   at install time, which is the same hole.
//! - crates with `cargo install --locked --version`.
//! - Network only to the package registry, through the egress proxy;
//!   nothing writable but the install directory.
//! - The first install of a pin records what it resolved (every
//!   dependency's version and hash) in the store; every later install of
//!   the same pin is held to exactly those bytes (`npm ci` against the
//!   recorded lockfile, `pip --require-hashes`).
//! - apt and binary-path tools are never installed at run time: the image
//!   must hold them, and an install only verifies that it does.
//!
//! A killed or failed install leaves a directory the store does not point
//! at; the next install of that tool (holding its lock) removes it.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;
use toolgate_sandbox::{NetworkMode, Sandbox, SandboxCommand, SandboxSpec};
use toolgate_store::{CatalogRun, CatalogState};

use toolgate_core::CallContext;

use crate::catalog::{Catalog, OutcomeKind, Question, Stopped};
use crate::gate::{self, Action};
use crate::manifest::{Manifest, SourceKind};
use crate::release;
use crate::run::Health;

/// How long one installer command may take.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(600);

/// What an install did.
#[derive(Debug, Clone, Serialize)]
pub struct InstallReport {
    /// The tool.
    pub id: String,
    /// `ran` (installed, or found installed), or why not.
    pub outcome: OutcomeKind,
    /// A sentence about it.
    pub detail: String,
    /// The request a person is asked, when blocked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// The grant spent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<String>,
    /// Where its files are.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub install_dir: Option<String>,
    /// What was resolved (versions and hashes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolved: Option<Value>,
    /// The health checks after the install.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub health: Vec<Health>,
    /// Whether this install put the files there (not another, earlier one).
    #[serde(skip)]
    fresh: bool,
}

impl InstallReport {
    /// A finished install of `id` (or one found done), saying `detail`.
    fn ran(id: &str, detail: String, install_dir: Option<String>) -> Self {
        InstallReport {
            id: id.to_owned(),
            outcome: OutcomeKind::Ran,
            detail,
            request_id: None,
            approval_id: None,
            install_dir,
            resolved: None,
            health: Vec::new(),
            fresh: false,
        }
    }

    fn stopped(id: &str, stopped: Stopped) -> Self {
        InstallReport {
            outcome: stopped.outcome,
            request_id: stopped.request_id,
            ..InstallReport::ran(id, stopped.reason, None)
        }
    }
}

/// An exclusive lock on one tool's installs (`<tool dir>.lock`): two
/// installs of one tool, in one process or many, install once.
/// The lock is held while the value lives and let go when it is dropped.
pub(crate) struct InstallLock {
    _held: File,
}

impl InstallLock {
    fn open(path: &Path) -> Result<File, String> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))
    }

    /// The lock, waiting for an install that holds it.
    async fn take(path: PathBuf) -> Result<InstallLock, String> {
        tokio::task::spawn_blocking(move || {
            let file = InstallLock::open(&path)?;
            file.lock()
                .map_err(|e| format!("cannot lock {}: {e}", path.display()))?;
            Ok(InstallLock { _held: file })
        })
        .await
        .map_err(|e| format!("the install lock task failed: {e}"))?
    }

    /// The lock if no install holds it now, else `None`.
    fn try_take(path: &Path) -> Option<InstallLock> {
        let file = InstallLock::open(path).ok()?;
        file.try_lock().ok()?;
        Some(InstallLock { _held: file })
    }
}

/// Takes `id`'s install lock, waiting for an install that holds it.
pub(crate) async fn lock_tool(
    catalog: &Catalog,
    id: &str,
) -> Result<InstallLock, crate::CatalogError> {
    InstallLock::take(catalog.tool_dir(id).with_extension("lock"))
        .await
        .map_err(crate::CatalogError::Io)
}

impl Catalog {
    /// Installs (or, for image tools, verifies) `id` through the install
    /// gate. `say` hears a line per step.
    pub async fn install(
        &self,
        id: &str,
        ctx: &CallContext,
        say: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<InstallReport, crate::CatalogError> {
        let entry = self.get(id).await?;
        let manifest = &entry.manifest;
        if entry.state == CatalogState::Installed
            && entry
                .install_dir
                .as_deref()
                .is_none_or(|d| Path::new(d).is_dir())
        {
            return Ok(InstallReport::ran(
                id,
                format!("`{id}` is installed already"),
                entry.install_dir.clone(),
            ));
        }
        let started = Instant::now();
        let mut run = CatalogRun::new(id, "install");
        run.started_ms = crate::now_ms();
        run.argv = vec![manifest.source_kind.as_str().to_owned()];
        let report = match self.install_gated(manifest, &entry.pin, ctx, say).await {
            Ok(report) => report,
            Err(stopped) => InstallReport::stopped(id, stopped),
        };
        run.outcome = report.outcome.as_str().to_owned();
        run.approval_id = report.approval_id.clone().or(report.request_id.clone());
        run.detail = Some(report.detail.clone());
        run.duration_ms = started.elapsed().as_millis() as i64;
        self.record(&run).await;
        if report.outcome == OutcomeKind::Failed {
            let _ = self
                .store
                .set_catalog_state(
                    &self.tenant,
                    id,
                    &entry.pin,
                    CatalogState::Failed,
                    None,
                    Some(&report.detail),
                )
                .await;
        }
        Ok(report)
    }

    async fn install_gated(
        &self,
        manifest: &Manifest,
        pin: &str,
        ctx: &CallContext,
        say: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<InstallReport, Stopped> {
        let id = &manifest.id;
        // What cannot happen here is said before a person is asked.
        let sandbox = self.sandbox(&release::install_hosts(manifest.source_kind))?;
        if manifest.source_kind.is_fetched() {
            self.check_release_age(manifest, say).await?;
        }
        let arguments = gate::install_arguments(manifest);
        let exact = toolgate_policy::ScopeKey::exact(gate::INSTALL_TOOL, &arguments);
        let question = Question {
            tool: gate::INSTALL_TOOL.to_owned(),
            arguments,
            scope: toolgate_policy::ApprovalScope::Exact,
            covering: vec![exact.clone()],
            exact,
        };
        let grant = self.pass(Action::Install, manifest, question, ctx).await?;
        // Held until the tool is marked installed: another install waiting
        // on it then finds the tool installed, and never sweeps away a
        // directory whose health check is still running.
        let _lock = if manifest.source_kind.is_fetched() {
            Some(
                lock_tool(self, id)
                    .await
                    .map_err(|e| Stopped::failed(e.to_string()))?,
            )
        } else {
            None
        };
        let mut report = if manifest.source_kind.is_fetched() {
            self.fetch(manifest, pin, &sandbox, say).await?
        } else {
            self.verify_image(manifest, say).await?
        };
        report.approval_id = grant;
        if !report.fresh {
            return Ok(report);
        }
        // The health checks of the installed tool; a failing one fails
        // the install (a tool that cannot say its version is not usable).
        let dir = report.install_dir.clone().map(PathBuf::from);
        for bin in &manifest.bins {
            let health = self.health_check(manifest, dir.as_deref(), bin).await;
            let healthy = health.healthy;
            report.health.push(health);
            if !healthy {
                if let Some(dir) = &dir {
                    let _ = std::fs::remove_dir_all(dir);
                }
                return Err(Stopped::failed(format!(
                    "the health check of `{}` failed: {}",
                    bin.name,
                    report
                        .health
                        .last()
                        .map(|h| h.detail.clone())
                        .unwrap_or_default()
                )));
            }
        }
        let marked = self
            .store
            .set_catalog_state(
                &self.tenant,
                id,
                pin,
                CatalogState::Installed,
                report.install_dir.as_deref(),
                None,
            )
            .await
            .map_err(|e| Stopped::unavailable(e.to_string()))?;
        if !marked {
            if let Some(dir) = &dir {
                let _ = std::fs::remove_dir_all(dir);
            }
            return Err(Stopped::failed(format!(
                "`{id}` was re-pinned or removed while it installed; install it again"
            )));
        }
        if let Some(dir) = &dir {
            self.sweep(id, Some(dir));
        }
        Ok(report)
    }

    async fn check_release_age(
        &self,
        manifest: &Manifest,
        say: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<(), Stopped> {
        let Some(package) = &manifest.package else {
            return Ok(());
        };
        let min = match manifest.min_release_age_days {
            Some(days) => Duration::from_secs(u64::from(days) * 86_400),
            None => self.config.min_release_age,
        };
        if min.is_zero() {
            return Ok(());
        }
        say(&format!(
            "checking when {} {} was published",
            package.name, package.version
        ));
        let published = release::published(&self.config.registries, manifest.source_kind, package)
            .await
            .map_err(|e| Stopped::unavailable(format!("cannot check the release's age: {e}")))?;
        let Some(published) = published else {
            return Ok(());
        };
        let age = chrono::Utc::now().timestamp() - published;
        let min_secs = min.as_secs() as i64;
        if age < min_secs {
            return Err(Stopped::denied(format!(
                "{} {} was published {} ago, less than the minimum release age of {} days: fresh releases are how registry attacks land; wait, or state `min_release_age_days` in the manifest to vouch for it",
                package.name,
                package.version,
                human_age(age),
                min_secs / 86_400
            )));
        }
        Ok(())
    }

    /// Verifies that the image holds an apt or binary-path tool: each bin
    /// exists and is executable, resolves inside the system directories,
    /// and an apt package is installed at the pinned version.
    async fn verify_image(
        &self,
        manifest: &Manifest,
        say: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<InstallReport, Stopped> {
        let rebuild = "the image must be rebuilt with it (`toolgate catalog image --apt-fragment`)";
        if let (SourceKind::Apt, Some(package)) = (manifest.source_kind, &manifest.package) {
            say(&format!(
                "checking that {} {} is installed",
                package.name, package.version
            ));
            let installed = dpkg_version(&package.name).await;
            match installed {
                Some(v) if v == package.version => {}
                Some(v) => {
                    return Err(Stopped::unavailable(format!(
                        "the image holds {} {v}, the manifest pins {}: {rebuild}",
                        package.name, package.version
                    )));
                }
                None => {
                    return Err(Stopped::unavailable(format!(
                        "apt package {} is not installed: {rebuild}",
                        package.name
                    )));
                }
            }
        }
        for bin in &manifest.bins {
            check_image_bin(&bin.bin).map_err(|why| {
                Stopped::unavailable(format!("bin `{}`: {why}: {rebuild}", bin.name))
            })?;
        }
        Ok(InstallReport {
            fresh: true,
            ..InstallReport::ran(
                &manifest.id,
                format!("`{}` is in the image", manifest.id),
                None,
            )
        })
    }

    /// Fetches a registry tool into a new directory of its own; the caller
    /// holds the tool's lock.
    async fn fetch(
        &self,
        manifest: &Manifest,
        pin: &str,
        sandbox: &Sandbox,
        say: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<InstallReport, Stopped> {
        let id = &manifest.id;
        let tool_dir = self.tool_dir(id);
        // Another install may have finished while this one waited.
        let entry = self
            .get(id)
            .await
            .map_err(|e| Stopped::unavailable(e.to_string()))?;
        if entry.pin != pin {
            return Err(Stopped::failed(format!(
                "`{id}` was re-pinned while it waited to install; install it again"
            )));
        }
        if entry.state == CatalogState::Installed
            && let Some(dir) = entry
                .install_dir
                .as_deref()
                .filter(|d| Path::new(d).is_dir())
        {
            return Ok(InstallReport::ran(
                id,
                format!("`{id}` was installed by another install meanwhile"),
                Some(dir.to_owned()),
            ));
        }
        self.sweep(id, None);
        let dir = tool_dir.join(format!("{}-{}", &pin[..12], random_suffix()));
        std::fs::create_dir_all(&dir)
            .map_err(|e| Stopped::failed(format!("cannot create {}: {e}", dir.display())))?;
        let result = self.fetch_into(manifest, pin, sandbox, &dir, say).await;
        match result {
            Ok(resolved) => Ok(InstallReport {
                resolved: Some(resolved),
                fresh: true,
                ..InstallReport::ran(
                    id,
                    format!("installed `{id}` into {}", dir.display()),
                    Some(dir.display().to_string()),
                )
            }),
            Err(stopped) => {
                let _ = std::fs::remove_dir_all(&dir);
                Err(stopped)
            }
        }
    }

    async fn fetch_into(
        &self,
        manifest: &Manifest,
        pin: &str,
        sandbox: &Sandbox,
        dir: &Path,
        say: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<Value, Stopped> {
        let Some(package) = &manifest.package else {
            return Err(Stopped::failed("a fetched tool without a package"));
        };
        let locked = self
            .store
            .catalog_lock(&self.tenant, pin)
            .await
            .map_err(|e| Stopped::unavailable(e.to_string()))?;
        let plan = crate::installers::plan(manifest.source_kind, package, dir, locked.as_ref())
            .map_err(Stopped::failed)?;
        for (path, contents) in &plan.files {
            std::fs::write(dir.join(path), contents)
                .map_err(|e| Stopped::failed(format!("cannot write {path}: {e}")))?;
        }
        let mut spec = SandboxSpec::for_root(dir).network(NetworkMode::Proxy);
        spec.read_only_paths.extend(plan.read_only.iter().cloned());
        for step in &plan.steps {
            say(&step.say);
            let mut command =
                SandboxCommand::new(step.argv.iter().map(String::as_str)).timeout(INSTALL_TIMEOUT);
            for (k, v) in &plan.env {
                command = command.set_env(k.clone(), v.clone());
            }
            command.max_output_bytes = 256 * 1024;
            let outcome = sandbox
                .run(&spec, command)
                .await
                .map_err(|e| Stopped::failed(format!("{}: {e}", step.say)))?
                .outcome;
            if outcome.exit_code != 0 {
                return Err(Stopped::failed(format!(
                    "{} failed (exit {}{}): {}",
                    step.say,
                    outcome.exit_code,
                    if outcome.timed_out { ", timed out" } else { "" },
                    tail(&outcome.stderr, &outcome.stdout)
                )));
            }
        }
        let resolved =
            crate::installers::resolved(manifest.source_kind, dir).map_err(Stopped::failed)?;
        if let Some(locked) = &locked {
            crate::installers::same_bytes(locked, &resolved).map_err(|why| {
                Stopped::failed(format!(
                    "the registry served other bytes than the first install of this pin recorded: {why}"
                ))
            })?;
        } else {
            self.store
                .record_catalog_lock(&self.tenant, pin, &resolved)
                .await
                .map_err(|e| Stopped::unavailable(e.to_string()))?;
        }
        for cache in &plan.caches {
            let _ = std::fs::remove_dir_all(dir.join(cache));
        }
        for bin in &manifest.bins {
            crate::run::resolve_bin(dir, &bin.bin)
                .map_err(|why| Stopped::failed(format!("bin `{}`: {why}", bin.name)))?;
        }
        Ok(resolved)
    }

    /// Removes what failed or killed installs left behind: in the
    /// directory of every tool that no install holds right now, each
    /// install the store does not point at. Catalogue commands and servers
    /// run it at their start, so a killed install leaves nothing once
    /// toolgate runs again.
    pub async fn sweep_leftovers(&self) -> Result<(), crate::CatalogError> {
        let Ok(tools) = std::fs::read_dir(self.config.dir.join(self.tenant.as_str())) else {
            return Ok(());
        };
        for tool in tools.flatten() {
            let dir = tool.path();
            if !dir.is_dir() {
                continue;
            }
            let Some(_lock) = InstallLock::try_take(&dir.with_extension("lock")) else {
                continue;
            };
            // Read under the lock: an install that finished just before it
            // was taken has pointed the store at its directory by now.
            let id = tool.file_name().to_string_lossy().into_owned();
            let keep = self
                .store
                .catalog_tools(&self.tenant, Some(&id))
                .await?
                .into_iter()
                .find(|t| t.state == CatalogState::Installed)
                .and_then(|t| t.install_dir)
                .map(PathBuf::from);
            self.sweep(&id, keep.as_deref());
        }
        Ok(())
    }

    /// Removes every install directory of `id` but `keep`: what killed or
    /// failed installs left, and older pins. Only under the tool's lock
    /// (or with the tool removed).
    pub(crate) fn sweep(&self, id: &str, keep: Option<&Path>) {
        let Ok(entries) = std::fs::read_dir(self.tool_dir(id)) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if Some(path.as_path()) == keep {
                continue;
            }
            // An installer killed with its toolgate may still be writing
            // for a moment (it dies by the parent-death signal): try again
            // briefly rather than leave half a tree.
            for _ in 0..5 {
                if std::fs::remove_dir_all(&path).is_ok() || !path.exists() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        }
    }
}

/// A bin of an image tool: it exists, is an executable file, and its real
/// path is still inside the system directories (a symlink out of /usr
/// would hand a caller whatever it points at).
fn check_image_bin(bin: &str) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let real = std::fs::canonicalize(bin).map_err(|_| format!("{bin} does not exist"))?;
    if !crate::manifest::SYSTEM_DIRS
        .iter()
        .any(|d| real.starts_with(d))
    {
        return Err(format!(
            "{bin} leads to {}, outside the system directories",
            real.display()
        ));
    }
    let meta = std::fs::metadata(&real).map_err(|e| format!("{bin}: {e}"))?;
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        return Err(format!("{bin} is not an executable file"));
    }
    Ok(())
}

/// The installed version of a Debian package, from dpkg's own database.
async fn dpkg_version(package: &str) -> Option<String> {
    let output = tokio::process::Command::new("dpkg-query")
        .args([
            "--show",
            "--showformat=${Status}\t${Version}",
            "--",
            package,
        ])
        .output()
        .await
        .ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    let (status, version) = text.split_once('\t')?;
    status
        .ends_with(" installed")
        .then(|| version.trim().to_owned())
}

fn random_suffix() -> String {
    let mut bytes = [0u8; 6];
    let _ = getrandom::fill(&mut bytes);
    toolgate_core::text::hex(&bytes)
}

fn human_age(secs: i64) -> String {
    match secs {
        s if s < 3600 => format!("{} minutes", s / 60),
        s if s < 2 * 86_400 => format!("{} hours", s / 3600),
        s => format!("{} days", s / 86_400),
    }
}

/// The last lines of what an installer said, for its error.
pub(crate) fn tail(stderr: &str, stdout: &str) -> String {
    let text = if stderr.trim().is_empty() {
        stdout
    } else {
        stderr
    };
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let start = lines.len().saturating_sub(6);
    crate::manifest::bounded(&lines[start..].join(" | "), 1500)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_bin_must_stay_in_the_system_directories() {
        assert!(check_image_bin("/bin/sh").is_ok());
        assert!(check_image_bin("/usr/bin/definitely-not-here").is_err());
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("sh");
        std::os::unix::fs::symlink("/bin/sh", &link).unwrap();
        // A link from outside is refused by the manifest; one from inside
        // /usr to outside is refused here.
        let target = dir.path().join("evil");
        std::fs::write(&target, "#!/bin/sh\n").unwrap();
        let error = check_image_bin(target.to_str().unwrap()).unwrap_err();
        assert!(error.contains("outside the system directories"), "{error}");
    }

    #[test]
    fn installer_errors_keep_the_last_lines() {
        let stderr = (1..=20)
            .map(|i| format!("line {i}"))
            .collect::<Vec<_>>()
            .join("\n");
        assert_eq!(
            tail(&stderr, ""),
            "line 15 | line 16 | line 17 | line 18 | line 19 | line 20"
        );
        assert_eq!(tail("", "only stdout"), "only stdout");
    }
}

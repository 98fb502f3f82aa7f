//! Runs and health checks: always under bubblewrap, argv only.
//!
//! A run sees the image's system directories and the tool's own files
//! read-only, can write only the caller's working directory, has no
//! network unless its manifest lists domains (then only those, through the
//! egress proxy), and runs under the manifest's limits. A health check
//! runs with no network and nothing writable, in the tool's own directory
//! (or `/`), which exists inside the sandbox.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;
use toolgate_sandbox::runner::{ExecOutcome, ResourceLimits};
use toolgate_sandbox::{NetworkMode, SandboxCommand, SandboxSpec};
use toolgate_store::{CatalogRun, CatalogState};

use toolgate_core::CallContext;

use crate::catalog::{Catalog, OutcomeKind, Question, Stopped};
use crate::gate::{self, Action};
use crate::manifest::{Bin, Manifest, Network};

/// The most arguments of one run.
pub const MAX_ARGS: usize = 128;
/// The longest argument.
pub const MAX_ARG_BYTES: usize = 4096;
/// Output kept per stream unless the manifest says otherwise.
const DEFAULT_OUTPUT_BYTES: usize = 1 << 20;
/// Wall clock of a run unless the manifest says otherwise.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// Wall clock of a health check.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(30);

/// What a caller asks to run.
#[derive(Debug, Clone, Default)]
pub struct RunRequest {
    /// The bin (may be left out when the tool has one).
    pub bin: Option<String>,
    /// Its arguments.
    pub argv: Vec<String>,
    /// The working directory, the only writable place.
    pub workdir: PathBuf,
    /// Bytes for stdin.
    pub stdin: Option<Vec<u8>>,
}

/// How a run ended.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// The tool.
    pub id: String,
    /// The bin.
    pub bin: String,
    /// `ran`, or why not.
    pub outcome: OutcomeKind,
    /// Why it did not run, when it did not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The request a person is asked, when blocked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// The grant spent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<String>,
    /// How it ended and what it printed, when it ran: exit code (128 + n
    /// when killed by signal n), signal, timeout, duration, the capped
    /// output and whether it was cut.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub ended: Option<ExecOutcome>,
    /// The record of the run in the store.
    pub run_id: String,
}

/// A health check's result.
#[derive(Debug, Clone, Serialize)]
pub struct Health {
    /// The bin.
    pub bin: String,
    /// Whether it exited 0.
    pub healthy: bool,
    /// Its first output line, or why it failed.
    pub detail: String,
}

/// Checks a caller's arguments: no NUL byte (it would cut the argument
/// short at exec, so the tool would run something else than was
/// approved), at most [`MAX_ARGS`] of at most [`MAX_ARG_BYTES`] each.
pub fn check_argv(argv: &[String]) -> Result<(), String> {
    if argv.len() > MAX_ARGS {
        return Err(format!(
            "{} arguments; at most {MAX_ARGS} are accepted",
            argv.len()
        ));
    }
    for (i, arg) in argv.iter().enumerate() {
        if arg.contains('\0') {
            return Err(format!("argument {} holds a NUL byte", i + 1));
        }
        if arg.len() > MAX_ARG_BYTES {
            return Err(format!(
                "argument {} is {} bytes; at most {MAX_ARG_BYTES} are accepted",
                i + 1,
                arg.len()
            ));
        }
    }
    Ok(())
}

/// The bin's path in `dir`, checked to stay there once every symlink is
/// followed: a package that ships `bin/x -> /bin/sh` would otherwise hand
/// out the image's shell under the tool's grant.
pub fn resolve_bin(dir: &Path, bin: &str) -> Result<PathBuf, String> {
    let root = std::fs::canonicalize(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = root.join(bin);
    let real =
        std::fs::canonicalize(&path).map_err(|_| format!("{bin} does not exist in the install"))?;
    if !real.starts_with(&root) {
        return Err(format!(
            "{bin} leads to {}, outside the tool's install directory",
            real.display()
        ));
    }
    if !real.is_file() {
        return Err(format!("{bin} is not a file"));
    }
    Ok(path)
}

/// The manifest's limits as the sandbox's.
fn limits(manifest: &Manifest) -> ResourceLimits {
    let l = &manifest.limits;
    let mib = |n: Option<u64>| n.map(|n| n.saturating_mul(1 << 20));
    ResourceLimits {
        cpu_seconds: l.cpu_seconds,
        memory_bytes: mib(l.memory_mb),
        processes: l.processes,
        open_files: l.open_files,
        file_size_bytes: mib(l.file_size_mb),
        ..ResourceLimits::default()
    }
}

impl Catalog {
    /// The path a run execs for `bin`, and the install directory to show
    /// the run read-only.
    fn bin_path(
        &self,
        manifest: &Manifest,
        install_dir: Option<&Path>,
        bin: &Bin,
    ) -> Result<(PathBuf, Option<PathBuf>), String> {
        if manifest.source_kind.is_fetched() {
            let dir = install_dir.ok_or("it has no install directory")?;
            let path = resolve_bin(dir, &bin.bin)?;
            Ok((path, Some(dir.to_path_buf())))
        } else {
            Ok((PathBuf::from(&bin.bin), None))
        }
    }

    /// Runs `bin`'s health check: no network, nothing writable.
    pub(crate) async fn health_check(
        &self,
        manifest: &Manifest,
        install_dir: Option<&Path>,
        bin: &Bin,
    ) -> Health {
        let started = Instant::now();
        let started_ms = crate::now_ms();
        let result = self.health_inner(manifest, install_dir, bin).await;
        let mut run = CatalogRun::new(&manifest.id, "health");
        run.started_ms = started_ms;
        run.bin = Some(bin.name.clone());
        run.argv.clone_from(&bin.health_check_args);
        run.duration_ms = started.elapsed().as_millis() as i64;
        let health = match result {
            Ok(outcome) => {
                run.exit_code = Some(i64::from(outcome.exit_code));
                run.signal = outcome.signal.map(i64::from);
                let healthy = outcome.exit_code == 0;
                let text = if outcome.stdout.trim().is_empty() {
                    &outcome.stderr
                } else {
                    &outcome.stdout
                };
                let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
                Health {
                    bin: bin.name.clone(),
                    healthy,
                    detail: if healthy {
                        crate::manifest::bounded(first, 200)
                    } else {
                        format!(
                            "exit {}: {}",
                            outcome.exit_code,
                            crate::install::tail(&outcome.stderr, &outcome.stdout)
                        )
                    },
                }
            }
            Err(why) => Health {
                bin: bin.name.clone(),
                healthy: false,
                detail: why,
            },
        };
        run.outcome = if health.healthy { "ran" } else { "failed" }.to_owned();
        run.detail = Some(health.detail.clone());
        self.record(&run).await;
        health
    }

    async fn health_inner(
        &self,
        manifest: &Manifest,
        install_dir: Option<&Path>,
        bin: &Bin,
    ) -> Result<toolgate_sandbox::runner::ExecOutcome, String> {
        let sandbox = self.sandbox(&[]).map_err(|s| s.reason)?;
        let (path, dir) = self.bin_path(manifest, install_dir, bin)?;
        let mut spec = SandboxSpec::default().network(NetworkMode::None);
        // A working directory that exists inside the sandbox, bound
        // read-only: the tool's install, or (an image tool) an empty
        // directory of its own.
        let cwd = match dir {
            Some(dir) => dir,
            None => {
                let empty = self.tool_dir(&manifest.id);
                std::fs::create_dir_all(&empty)
                    .map_err(|e| format!("cannot create {}: {e}", empty.display()))?;
                empty
            }
        };
        spec.cwd.clone_from(&cwd);
        spec.read_only_paths.push(cwd);
        let mut argv = vec![path.display().to_string()];
        argv.extend(bin.health_check_args.iter().cloned());
        let mut command = SandboxCommand::new(argv)
            .timeout(HEALTH_TIMEOUT)
            .limits(limits(manifest));
        command.max_output_bytes = 64 * 1024;
        sandbox
            .run(&spec, command)
            .await
            .map(|o| o.outcome)
            .map_err(|e| e.to_string())
    }

    /// Runs a bin of an installed tool through the execute gate.
    pub async fn run(
        &self,
        id: &str,
        request: RunRequest,
        ctx: &CallContext,
    ) -> Result<RunReport, crate::CatalogError> {
        let entry = self.get(id).await?;
        let manifest = &entry.manifest;
        let bin = manifest
            .bin(request.bin.as_deref())
            .map_err(crate::CatalogError::Invalid)?
            .clone();
        check_argv(&request.argv).map_err(crate::CatalogError::Invalid)?;
        let mut run = CatalogRun::new(id, "run");
        run.started_ms = crate::now_ms();
        run.bin = Some(bin.name.clone());
        run.argv.clone_from(&request.argv);
        let mut report = RunReport {
            id: id.to_owned(),
            bin: bin.name.clone(),
            outcome: OutcomeKind::Ran,
            reason: None,
            request_id: None,
            approval_id: None,
            ended: None,
            run_id: run.run_id.clone(),
        };
        match self
            .run_gated(&entry, &bin, &request, ctx, &mut report)
            .await
        {
            Ok(()) => {}
            Err(stopped) => {
                report.outcome = stopped.outcome;
                report.reason = Some(stopped.reason);
                report.request_id = stopped.request_id;
            }
        }
        run.outcome = report.outcome.as_str().to_owned();
        if let Some(ended) = &report.ended {
            run.exit_code = Some(i64::from(ended.exit_code));
            run.signal = ended.signal.map(i64::from);
            run.duration_ms = ended.duration_ms as i64;
        }
        run.approval_id = report.approval_id.clone().or(report.request_id.clone());
        run.detail.clone_from(&report.reason);
        self.record(&run).await;
        Ok(report)
    }

    async fn run_gated(
        &self,
        entry: &crate::catalog::Entry,
        bin: &Bin,
        request: &RunRequest,
        ctx: &CallContext,
        report: &mut RunReport,
    ) -> Result<(), Stopped> {
        let manifest = &entry.manifest;
        if entry.state != CatalogState::Installed {
            return Err(Stopped::unavailable(format!(
                "`{}` is not installed ({}): run `toolgate catalog install {}` (or ask with catalog_install)",
                manifest.id,
                entry.state.as_str(),
                manifest.id
            )));
        }
        let allow = match &manifest.network {
            Network::None => Vec::new(),
            Network::Allow(domains) => domains.clone(),
        };
        let sandbox = self.sandbox(&allow)?;
        let install_dir = entry.install_dir.as_deref().map(Path::new);
        let (path, dir) = self.bin_path(manifest, install_dir, bin).map_err(|why| {
            Stopped::unavailable(format!("`{}` is not healthy: {why}", manifest.id))
        })?;
        let workdir = std::fs::canonicalize(&request.workdir).map_err(|e| {
            Stopped::denied(format!(
                "the working directory {} does not exist: {e}",
                request.workdir.display()
            ))
        })?;
        let (exact, covering, scope) = gate::run_keys(manifest, &bin.name, &request.argv);
        let question = Question {
            tool: gate::run_tool_name(&manifest.id),
            arguments: serde_json::json!({
                "bin": bin.name,
                "argv": request.argv,
                "workdir": workdir.display().to_string(),
                "version": manifest.package.as_ref().map(|p| &p.version),
            }),
            scope,
            exact,
            covering,
        };
        report.approval_id = self.pass(Action::Execute, manifest, question, ctx).await?;
        let mut spec = SandboxSpec::for_root(&workdir).network(if allow.is_empty() {
            NetworkMode::None
        } else {
            NetworkMode::Proxy
        });
        spec.read_only_paths.extend(dir);
        // toolgate's own files inside the working directory: its
        // configuration read-only, its state, data and store unseen (an
        // agent's tool could otherwise approve its own calls).
        let inside = |p: &&PathBuf| p.starts_with(&workdir);
        spec.write_deny
            .extend(self.config.protect.iter().filter(inside).cloned());
        spec.write_deny
            .extend(self.config.conceal.iter().filter(inside).cloned());
        spec.read_deny
            .extend(self.config.conceal.iter().filter(inside).cloned());
        // The operator's rules hold for catalogue runs as for every command.
        spec.read_deny.extend(self.config.read_deny.iter().cloned());
        spec.write_deny
            .extend(self.config.write_deny.iter().cloned());
        let mut argv = vec![path.display().to_string()];
        argv.extend(request.argv.iter().cloned());
        let timeout = manifest
            .limits
            .timeout_seconds
            .map_or(DEFAULT_TIMEOUT, Duration::from_secs);
        let mut command = SandboxCommand::new(argv)
            .timeout(timeout)
            .limits(limits(manifest));
        command.max_output_bytes = manifest
            .limits
            .output_bytes
            .map_or(DEFAULT_OUTPUT_BYTES, |n| {
                usize::try_from(n).unwrap_or(usize::MAX)
            });
        if let Some(stdin) = &request.stdin {
            command = command.stdin(stdin.clone());
        }
        let outcome = sandbox
            .run(&spec, command)
            .await
            .map_err(|e| Stopped::unavailable(format!("the sandbox could not run it: {e}")))?
            .outcome;
        report.ended = Some(outcome);
        Ok(())
    }

    /// Runs every bin's health check of an installed tool.
    pub async fn health(&self, id: &str) -> Result<Vec<Health>, crate::CatalogError> {
        let entry = self.get(id).await?;
        if entry.state != CatalogState::Installed {
            return Err(crate::CatalogError::Invalid(format!(
                "`{id}` is not installed ({})",
                entry.state.as_str()
            )));
        }
        let dir = entry.install_dir.as_deref().map(Path::new);
        let mut out = Vec::new();
        for bin in &entry.manifest.bins {
            out.push(self.health_check(&entry.manifest, dir, bin).await);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_bounded_and_free_of_nul_bytes() {
        let ok = vec!["-r".to_owned(), ".".to_owned()];
        assert!(check_argv(&ok).is_ok());
        let nul = vec!["a\0b".to_owned()];
        assert_eq!(check_argv(&nul).unwrap_err(), "argument 1 holds a NUL byte");
        let many = vec!["x".to_owned(); MAX_ARGS + 1];
        assert!(check_argv(&many).unwrap_err().contains("129 arguments"));
        let long = vec!["y".repeat(MAX_ARG_BYTES + 1)];
        assert!(check_argv(&long).unwrap_err().contains("4097 bytes"));
        assert!(check_argv(&vec!["z".repeat(MAX_ARG_BYTES); MAX_ARGS]).is_ok());
    }

    #[test]
    fn a_bin_that_leads_out_of_its_install_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("bin")).unwrap();
        std::fs::write(dir.path().join("bin/ok"), "#!/bin/sh\n").unwrap();
        std::os::unix::fs::symlink("/bin/sh", dir.path().join("bin/sh")).unwrap();
        std::os::unix::fs::symlink("../bin/ok", dir.path().join("bin/inner")).unwrap();
        assert!(resolve_bin(dir.path(), "bin/ok").is_ok());
        assert!(resolve_bin(dir.path(), "bin/inner").is_ok());
        let error = resolve_bin(dir.path(), "bin/sh").unwrap_err();
        assert!(
            error.contains("outside the tool's install directory"),
            "{error}"
        );
        assert!(resolve_bin(dir.path(), "bin/none").is_err());
    }
}

//! `toolgate catalog`: the governed catalogue from a terminal, and the
//! shelf whose tools every surface offers agents (`catalog__<id>` for each
//! installed tool, `catalog_install` for the rest).

use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use toolgate_catalog::{
    Catalog, CatalogConfig, CatalogInstallTool, CatalogRunTool, Entry, GatePolicy, InstallReport,
    Manifest, OutcomeKind, RunReport, RunRequest, SandboxFactory,
};
use toolgate_core::{CallContext, Registry};
use toolgate_sandbox::BackendChoice;
use toolgate_store::CatalogState;

use crate::config::{Environment, Settings};

/// `toolgate catalog`.
#[derive(Debug, clap::Subcommand)]
pub enum CatalogCommand {
    /// Register the manifests of FILEs (TOML, or JSON by extension): a new
    /// pin (source, package, version, bins) makes a tool not installed.
    Add {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// The shelf: every tool with its pin, risk, network and state.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// One tool: its manifest, state and recorded installs and runs.
    Show {
        id: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Install a tool (or, for apt and binary-path tools, verify that the
    /// image holds it) through the install gate.
    Install {
        id: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run a bin of an installed tool through the execute gate:
    /// `toolgate catalog run jq -- -r .name package.json`.
    Run {
        id: String,
        /// Which bin (may be left out when the tool has one).
        bin: Option<String>,
        /// The working directory, the only writable place (default: the
        /// current directory; it must lie in a root).
        #[arg(long, value_name = "DIR")]
        workdir: Option<PathBuf>,
        /// Pass toolgate's standard input to the tool.
        #[arg(long)]
        stdin: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// The tool's arguments, after `--`.
        #[arg(last = true)]
        argv: Vec<String>,
    },
    /// Run an installed tool's health checks.
    Health {
        id: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remove a tool and its installed files.
    Remove {
        id: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// The image manifest of the shelf (deterministic JSON), or the
    /// `apt-get install` line, or a Dockerfile fragment.
    Image {
        /// Print the `apt-get install -y --no-install-recommends` line.
        #[arg(long, conflicts_with = "dockerfile")]
        apt_fragment: bool,
        /// Print a Dockerfile fragment that installs the whole shelf.
        #[arg(long)]
        dockerfile: bool,
        /// Print JSON (the default: the image manifest is JSON).
        #[arg(long, conflicts_with_all = ["apt_fragment", "dockerfile"])]
        json: bool,
    },
    /// The tenant's gate policies (deny, approval, allow_safe, allow_all);
    /// with --install or --execute, set them in the store (they override
    /// [catalog] in toolgate.toml).
    Policy {
        #[arg(long, value_name = "POLICY")]
        install: Option<GatePolicy>,
        #[arg(long, value_name = "POLICY")]
        execute: Option<GatePolicy>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Builds each install's and run's sandbox: bubblewrap, with an egress
/// allowlist of exactly the domains asked for (none: no network). A
/// configuration that chooses another backend gets no sandbox, and the
/// catalogue says its tools are unavailable.
fn sandboxes(settings: &Settings, env: &Environment) -> SandboxFactory {
    let (settings, env) = (settings.clone(), env.clone());
    Arc::new(move |allow: &[String]| {
        let backend = settings.backend;
        if !matches!(backend, BackendChoice::Auto | BackendChoice::Bwrap) {
            return Err(format!(
                "the configuration chooses the {backend} backend ([sandbox] backend)"
            ));
        }
        crate::sandbox::allowlisted(&settings, &env, BackendChoice::Bwrap, allow, "catalogue")
            .map(|(sandbox, _)| sandbox)
            .map_err(|e| format!("{e:#}"))
    })
}

/// The catalogue of this configuration over the gate's store.
pub fn catalog(settings: &Settings, env: &Environment, gate: &crate::store::Gate) -> Catalog {
    let mut config = CatalogConfig::new(env.data_dir().join("catalog"));
    config.defaults = settings.catalog.policies;
    config.min_release_age = settings.catalog.min_release_age;
    config.protect.clone_from(&settings.own_files);
    config.conceal = crate::sandbox::concealed(settings, env);
    config.read_deny.clone_from(&settings.filesystem.read_deny);
    config
        .write_deny
        .clone_from(&settings.filesystem.write_deny);
    Catalog::new(
        gate.store.clone(),
        gate.tenant.clone(),
        Some(gate.approvals.clone()),
        sandboxes(settings, env),
        config,
    )
}

/// The catalogue's agent tools, read from the store at start: one tool per
/// installed catalogue tool, and `catalog_install` while any is shelved.
#[derive(Clone)]
pub struct Shelf {
    catalog: Arc<Catalog>,
    entries: Vec<Entry>,
}

impl Shelf {
    /// Reads the shelf of the gate's store.
    pub async fn open(
        settings: &Settings,
        env: &Environment,
        gate: &crate::store::Gate,
    ) -> Result<Shelf> {
        let catalog = Arc::new(catalog(settings, env, gate));
        let entries = catalog.list().await?;
        Ok(Shelf { catalog, entries })
    }

    /// Removes what failed or killed installs left (see
    /// [`Catalog::sweep_leftovers`]): at a server's start, not on every
    /// `toolgate call`.
    pub async fn sweep(&self) -> Result<()> {
        self.catalog.sweep_leftovers().await?;
        Ok(())
    }

    /// Registers the agent tools.
    pub fn register_into(&self, registry: &mut Registry) -> Result<()> {
        let mut shelved = Vec::new();
        for entry in &self.entries {
            if entry.state == CatalogState::Installed {
                let tool = CatalogRunTool::new(entry, self.catalog.clone());
                registry.register(Arc::new(tool))?;
            } else {
                shelved.push(entry.clone());
            }
        }
        if !shelved.is_empty() {
            let tool = CatalogInstallTool::new(&shelved, self.catalog.clone());
            registry.register(Arc::new(tool))?;
        }
        Ok(())
    }
}

/// Reads the shelf into `gate`, so that executors built over it offer the
/// catalogue's tools. A store that does not exist yet (a SQLite file never
/// created) has no shelf, and is not created for this.
pub async fn attach(
    gate: &mut crate::store::Gate,
    settings: &Settings,
    env: &Environment,
) -> Result<()> {
    if !crate::store::existing(settings) {
        return Ok(());
    }
    gate.shelf = Some(Arc::new(Shelf::open(settings, env, gate).await?));
    Ok(())
}

/// `toolgate catalog ...`.
pub fn run(command: CatalogCommand, settings: &Settings, env: &Environment) -> Result<ExitCode> {
    let runtime = crate::runtime()?;
    let catalog = runtime.block_on(open(settings, env))?;
    let agent = settings.agent.clone().unwrap_or_else(|| "cli".to_owned());
    let cwd = crate::sandbox::working_dir(settings, env);
    let ctx = CallContext::new(crate::call_id(), agent, cwd.clone())
        .with_roots(settings.roots.clone())
        .with_progress(toolgate_core::Progress::new(|line: &str| {
            if line.starts_with("waiting for approval") {
                eprintln!("toolgate: {line}");
            }
        }));
    let mut out = std::io::stdout().lock();
    match command {
        CatalogCommand::Image {
            apt_fragment,
            dockerfile,
            json: _,
        } => {
            let manifests: Vec<Manifest> = runtime
                .block_on(catalog.list())?
                .into_iter()
                .map(|e| e.manifest)
                .collect();
            let text = if apt_fragment {
                toolgate_catalog::image::apt_fragment(&manifests)
            } else if dockerfile {
                toolgate_catalog::image::dockerfile(&manifests)
            } else {
                toolgate_catalog::image::manifest_json(&manifests)
            }
            .map_err(anyhow::Error::msg)?;
            out.write_all(text.as_bytes())?;
            Ok(ExitCode::SUCCESS)
        }
        CatalogCommand::Add { files, json } => {
            let mut manifests = Vec::new();
            for file in &files {
                let text = std::fs::read_to_string(file)
                    .with_context(|| format!("cannot read {}", file.display()))?;
                manifests.extend(toolgate_catalog::manifest::parse_file(file, &text)?);
            }
            let done = runtime.block_on(catalog.add(&manifests))?;
            if json {
                let rows: Vec<Value> = done
                    .iter()
                    .map(|(id, r)| json!({"id": id, "registered": r}))
                    .collect();
                writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
            } else {
                for (id, registered) in &done {
                    let what = match registered {
                        toolgate_store::Registered::Added => "added (not installed)",
                        toolgate_store::Registered::Unchanged => "unchanged",
                        toolgate_store::Registered::Updated => "updated (pin unchanged)",
                        toolgate_store::Registered::Repinned => {
                            "re-pinned: not installed until installed again"
                        }
                    };
                    writeln!(out, "{id}: {what}")?;
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        CatalogCommand::List { json } => {
            let entries = runtime.block_on(catalog.list())?;
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&entries)?)?;
            } else if entries.is_empty() {
                writeln!(
                    out,
                    "the catalogue is empty: add tools with `toolgate catalog add FILE`"
                )?;
            } else {
                let rows: Vec<[String; 6]> = entries.iter().map(list_row).collect();
                let header = ["id", "source", "pin", "risk", "network", "state"].map(String::from);
                crate::approvals::table(&mut out, &header, &rows)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        CatalogCommand::Show { id, json } => {
            let entry = runtime.block_on(catalog.get(&id))?;
            let runs = runtime.block_on(catalog.runs(Some(&id)))?;
            if json {
                let value = json!({"tool": entry, "runs": runs});
                writeln!(out, "{}", serde_json::to_string_pretty(&value)?)?;
            } else {
                let m = &entry.manifest;
                writeln!(out, "{} ({}): {}", m.id, m.name, m.description)?;
                writeln!(out, "source   {}", pin_text(m))?;
                writeln!(out, "state    {}", entry.state.as_str())?;
                if let Some(dir) = &entry.install_dir {
                    writeln!(out, "files    {dir}")?;
                }
                if let Some(error) = &entry.last_error {
                    writeln!(out, "error    {error}")?;
                }
                writeln!(out, "risk     {}, effect class {}", m.risk, m.effect_class)?;
                writeln!(out, "network  {}", network_text(m))?;
                for bin in &m.bins {
                    writeln!(out, "bin      {} = {}", bin.name, bin.bin)?;
                }
                for run in runs.iter().rev().take(10) {
                    writeln!(
                        out,
                        "{}  {} {} {}{}",
                        crate::store::time(run.started_ms),
                        run.kind,
                        run.outcome,
                        run.bin.as_deref().unwrap_or_default(),
                        run.exit_code
                            .map(|c| format!(" exit {c}"))
                            .unwrap_or_default()
                    )?;
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        CatalogCommand::Install { id, json } => {
            let report = runtime.block_on(install(&catalog, &id, &ctx, json))?;
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
            } else {
                writeln!(out, "{}: {}", report.outcome.as_str(), report.detail)?;
                for health in &report.health {
                    writeln!(
                        out,
                        "health {}: {}",
                        health.bin,
                        if health.healthy {
                            &health.detail
                        } else {
                            "FAILED"
                        }
                    )?;
                }
            }
            Ok(outcome_code(report.outcome, 0))
        }
        CatalogCommand::Run {
            id,
            bin,
            workdir,
            stdin,
            json,
            argv,
        } => {
            let workdir = match workdir {
                Some(dir) => env.cwd.join(dir),
                None => cwd,
            };
            let workdir = std::fs::canonicalize(&workdir)
                .with_context(|| format!("the working directory {}", workdir.display()))?;
            if !settings.roots.iter().any(|r| workdir.starts_with(r)) {
                bail!(
                    "the working directory {} lies outside the workspace roots ({}); pass --root or --workdir",
                    workdir.display(),
                    settings
                        .roots
                        .iter()
                        .map(|r| r.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
            let stdin = if stdin {
                let mut bytes = Vec::new();
                std::io::stdin()
                    .read_to_end(&mut bytes)
                    .context("cannot read standard input")?;
                Some(bytes)
            } else {
                None
            };
            let request = RunRequest {
                bin,
                argv,
                workdir,
                stdin,
            };
            let report = runtime.block_on(catalog.run(&id, request, &ctx))?;
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
            } else {
                print_run(&mut out, &report)?;
            }
            let status = report.ended.as_ref().map_or(1, |e| e.exit_code);
            Ok(outcome_code(report.outcome, status))
        }
        CatalogCommand::Health { id, json } => {
            let checks = runtime.block_on(catalog.health(&id))?;
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&checks)?)?;
            } else {
                for h in &checks {
                    let state = if h.healthy { "healthy" } else { "UNHEALTHY" };
                    writeln!(out, "{}: {state}: {}", h.bin, h.detail)?;
                }
            }
            Ok(if checks.iter().all(|h| h.healthy) {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        CatalogCommand::Remove { id, json } => {
            let entry = runtime.block_on(catalog.remove(&id))?;
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&entry)?)?;
            } else {
                writeln!(out, "removed {id}")?;
            }
            Ok(ExitCode::SUCCESS)
        }
        CatalogCommand::Policy {
            install,
            execute,
            json,
        } => {
            let (mut policies, mut own) = runtime.block_on(catalog.policies())?;
            if install.is_some() || execute.is_some() {
                policies.install = install.unwrap_or(policies.install);
                policies.execute = execute.unwrap_or(policies.execute);
                runtime.block_on(catalog.set_policies(policies))?;
                own = true;
            }
            let source = if own {
                "the tenant's, in the store"
            } else {
                "[catalog] in the configuration"
            };
            if json {
                let value = json!({"install": policies.install, "execute": policies.execute, "source": if own { "store" } else { "config" }});
                writeln!(out, "{}", serde_json::to_string_pretty(&value)?)?;
            } else {
                writeln!(out, "install  {}", policies.install)?;
                writeln!(out, "execute  {}", policies.execute)?;
                writeln!(out, "({source})")?;
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

async fn open(settings: &Settings, env: &Environment) -> Result<Catalog> {
    let gate = crate::store::gate(settings).await?;
    let catalog = catalog(settings, env, &gate);
    catalog.sweep_leftovers().await?;
    Ok(catalog)
}

/// An install with its steps on stderr: a spinner on a terminal, plain
/// lines otherwise (and none with --json).
async fn install(
    catalog: &Catalog,
    id: &str,
    ctx: &CallContext,
    json: bool,
) -> Result<InstallReport> {
    let terminal = std::io::stderr().is_terminal() && !json;
    let bar = terminal.then(|| {
        let bar = indicatif::ProgressBar::new_spinner();
        bar.enable_steady_tick(Duration::from_millis(120));
        bar
    });
    let shown = bar.clone();
    let say = move |line: &str| match &shown {
        Some(bar) => bar.set_message(line.to_owned()),
        None if !json => eprintln!("toolgate: {line}"),
        None => {}
    };
    let report = catalog.install(id, ctx, &say).await;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    Ok(report?)
}

/// Exit codes: the tool's own when it ran; 3 blocked (a person was
/// asked), 4 denied, 5 unavailable, 1 failed.
fn outcome_code(outcome: OutcomeKind, ran: i32) -> ExitCode {
    match outcome {
        OutcomeKind::Ran => ExitCode::from(u8::try_from(ran.clamp(0, 255)).unwrap_or(1)),
        OutcomeKind::Blocked => ExitCode::from(3),
        OutcomeKind::Denied => ExitCode::from(4),
        OutcomeKind::Unavailable => ExitCode::from(5),
        OutcomeKind::Failed => ExitCode::from(1),
    }
}

fn print_run(out: &mut impl Write, report: &RunReport) -> Result<()> {
    let Some(ended) = &report.ended else {
        eprintln!(
            "toolgate: {}: {}",
            report.outcome.as_str(),
            report.reason.as_deref().unwrap_or_default()
        );
        return Ok(());
    };
    out.write_all(ended.stdout.as_bytes())?;
    std::io::stderr().write_all(ended.stderr.as_bytes())?;
    if ended.stdout_truncated || ended.stderr_truncated {
        eprintln!("toolgate: output cut at the tool's output_bytes limit");
    }
    if ended.timed_out {
        eprintln!("toolgate: the tool ran past its timeout and was stopped");
    } else if let Some(signal) = ended.signal {
        eprintln!("toolgate: the tool was killed by signal {signal}");
    }
    Ok(())
}

fn pin_text(m: &Manifest) -> String {
    match &m.package {
        Some(p) => format!("{} {} {}", m.source_kind, p.name, p.version),
        None => m.source_kind.to_string(),
    }
}

fn network_text(m: &Manifest) -> String {
    match &m.network {
        toolgate_catalog::manifest::Network::None => "none".to_owned(),
        toolgate_catalog::manifest::Network::Allow(domains) => domains.join(", "),
    }
}

fn list_row(e: &Entry) -> [String; 6] {
    let m = &e.manifest;
    [
        m.id.clone(),
        m.source_kind.to_string(),
        m.package
            .as_ref()
            .map(|p| format!("{} {}", p.name, p.version))
            .unwrap_or_else(|| "-".to_owned()),
        m.risk.to_string(),
        network_text(m),
        e.state.as_str().to_owned(),
    ]
}

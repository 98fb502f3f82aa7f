//! The catalogue as agent tools: one `catalog__<id>` per installed tool,
//! and `catalog_install` to ask for a shelved one. Both go through the
//! same Executor as every tool (access, rules, audit) and then through the
//! catalogue's own gate.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use toolgate_core::{
    CallContext, EffectClass, Idempotency, Tool, ToolError, ToolHandler, ToolOutput, ToolSpec,
};

use crate::catalog::{Catalog, Entry, OutcomeKind};
use crate::gate;
use crate::run::{MAX_ARG_BYTES, MAX_ARGS, RunReport, RunRequest};

pub use toolgate_policy::access::CATALOG_GROUP;

/// The agent tool of one installed catalogue tool.
pub struct CatalogRunTool {
    spec: ToolSpec,
    id: String,
    catalog: Arc<Catalog>,
}

impl CatalogRunTool {
    /// The tool of `entry`.
    pub fn new(entry: &Entry, catalog: Arc<Catalog>) -> Self {
        let m = &entry.manifest;
        let bins: Vec<&str> = m.bins.iter().map(|b| b.name.as_str()).collect();
        let version = m
            .package
            .as_ref()
            .map(|p| format!(" {}", p.version))
            .unwrap_or_default();
        let description = crate::manifest::bounded(
            &format!(
                "{} (catalogue tool `{}`{version}; bins: {}; risk {}; {}). Runs one bin with argv (no shell) in the sandbox; only workdir is writable.",
                m.description,
                m.id,
                bins.join(", "),
                m.risk,
                if m.network.is_none() {
                    "no network".to_owned()
                } else {
                    "network: listed domains only".to_owned()
                },
            ),
            crate::manifest::MAX_DESCRIPTION,
        );
        let schema = json!({
            "type": "object",
            "properties": {
                "bin": {"type": "string", "enum": bins, "description": "Which bin to run (may be left out when there is one)."},
                "argv": {"type": "array", "items": {"type": "string", "maxLength": MAX_ARG_BYTES}, "maxItems": MAX_ARGS,
                    "description": "Arguments, passed as they are (no shell)."},
                "workdir": {"type": "string", "description": "Working directory, the only writable place (default: the current directory)."},
                "stdin": {"type": "string", "description": "Text for standard input."}
            },
            "additionalProperties": false
        });
        let mut spec = ToolSpec::new(gate::run_tool_name(&m.id), description, m.effect_class)
            .group(CATALOG_GROUP)
            .parallel_safe(false)
            .input_schema(schema)
            .path_arg("/workdir");
        spec.idempotency = (m.effect_class != EffectClass::Read).then_some(m.idempotency);
        if let Some(package) = &m.package {
            spec = spec.version(package.version.clone());
        }
        CatalogRunTool {
            spec,
            id: m.id.clone(),
            catalog,
        }
    }
}

impl Tool for CatalogRunTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
}

fn workdir(args: &Value, ctx: &CallContext) -> PathBuf {
    match args["workdir"].as_str() {
        Some(dir) if !dir.is_empty() => ctx.cwd.join(dir),
        _ => ctx.cwd.clone(),
    }
}

#[async_trait]
impl ToolHandler for CatalogRunTool {
    async fn call(&self, args: Value, ctx: &CallContext) -> Result<ToolOutput, ToolError> {
        let argv: Vec<String> = match &args["argv"] {
            Value::Null => Vec::new(),
            Value::Array(items) => items
                .iter()
                .map(|v| v.as_str().map(str::to_owned))
                .collect::<Option<_>>()
                .ok_or_else(|| ToolError::InvalidArguments("argv: expected strings".into()))?,
            _ => {
                return Err(ToolError::InvalidArguments(
                    "argv: expected an array of strings".into(),
                ));
            }
        };
        let asked = workdir(&args, ctx);
        // Writable is only the working directory, and only inside a root:
        // compared once every `..` and symlink is resolved (`../x` or a
        // link out of the root starts with the root as written).
        let workdir = std::fs::canonicalize(&asked).map_err(|e| {
            ToolError::InvalidArguments(format!("workdir {}: {e}", asked.display()))
        })?;
        let inside = ctx
            .roots
            .iter()
            .any(|root| std::fs::canonicalize(root).is_ok_and(|root| workdir.starts_with(root)));
        if !inside {
            return Err(ToolError::InvalidArguments(format!(
                "workdir {} is outside the workspace roots",
                asked.display()
            )));
        }
        let request = RunRequest {
            bin: args["bin"].as_str().map(str::to_owned),
            argv,
            workdir,
            stdin: args["stdin"].as_str().map(|s| s.as_bytes().to_vec()),
        };
        let report = self
            .catalog
            .run(&self.id, request, ctx)
            .await
            .map_err(|e| ToolError::Failed(e.to_string()))?;
        Ok(run_output(&report))
    }
}

/// A run's result for the model: its output and one status line, and the
/// facts as structured content.
pub fn run_output(report: &RunReport) -> ToolOutput {
    let mut text = String::new();
    match &report.ended {
        Some(ended) => {
            text.push_str(&ended.stdout);
            if !ended.stderr.is_empty() {
                if !text.is_empty() && !text.ends_with('\n') {
                    text.push('\n');
                }
                text.push_str(&ended.stderr);
            }
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&format!(
                "[exit {}{}{}; {} ms]",
                ended.exit_code,
                ended
                    .signal
                    .map(|s| format!(", signal {s}"))
                    .unwrap_or_default(),
                if ended.timed_out { ", timed out" } else { "" },
                ended.duration_ms
            ));
        }
        None => text.push_str(&format!(
            "{}: {}",
            report.outcome.as_str(),
            report.reason.as_deref().unwrap_or_default()
        )),
    }
    let mut output = ToolOutput::text(text).with_structured(json!(report));
    output.is_error = report.outcome != OutcomeKind::Ran;
    output
}

/// `catalog_install`: asks for a shelved tool to be installed, through the
/// install gate.
pub struct CatalogInstallTool {
    spec: ToolSpec,
    catalog: Arc<Catalog>,
}

impl CatalogInstallTool {
    /// The tool, listing the shelved tools it can ask for.
    pub fn new(shelved: &[Entry], catalog: Arc<Catalog>) -> Self {
        let listed: Vec<String> = shelved
            .iter()
            .map(|e| {
                format!(
                    "{} ({})",
                    e.manifest.id,
                    crate::manifest::bounded(&e.manifest.description, 80)
                )
            })
            .collect();
        let description = crate::manifest::bounded(
            &format!(
                "Ask for a catalogue tool to be installed (through the install gate: a person may have to approve). Shelved: {}.",
                if listed.is_empty() {
                    "none".to_owned()
                } else {
                    listed.join("; ")
                }
            ),
            crate::manifest::MAX_DESCRIPTION,
        );
        let ids: Vec<&str> = shelved.iter().map(|e| e.manifest.id.as_str()).collect();
        let mut id_schema = json!({"type": "string", "description": "The catalogue id."});
        if !ids.is_empty() {
            id_schema["enum"] = json!(ids);
        }
        let spec = ToolSpec::new(
            gate::INSTALL_TOOL,
            description,
            EffectClass::MutateIrreversible,
        )
        .idempotency(Idempotency::CheckBeforeAct)
        .group(CATALOG_GROUP)
        .parallel_safe(false)
        .input_schema(json!({
            "type": "object",
            "properties": {"id": id_schema},
            "required": ["id"],
            "additionalProperties": false
        }));
        CatalogInstallTool { spec, catalog }
    }
}

impl Tool for CatalogInstallTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
}

#[async_trait]
impl ToolHandler for CatalogInstallTool {
    async fn call(&self, args: Value, ctx: &CallContext) -> Result<ToolOutput, ToolError> {
        let id = args["id"]
            .as_str()
            .ok_or_else(|| ToolError::InvalidArguments("id: expected a string".into()))?;
        let progress = ctx.progress.clone();
        let report = self
            .catalog
            .install(id, ctx, &move |line: &str| progress.report(line))
            .await
            .map_err(|e| ToolError::Failed(e.to_string()))?;
        let text = match &report.request_id {
            Some(request) if report.outcome == OutcomeKind::Blocked => format!(
                "blocked: {} (request {request}); the tool becomes available once a person approves and it installs",
                report.detail
            ),
            _ if report.outcome == OutcomeKind::Ran => format!(
                "ran: {}; it is offered as `{}` from the next session",
                report.detail,
                gate::run_tool_name(id)
            ),
            _ => format!("{}: {}", report.outcome.as_str(), report.detail),
        };
        let mut output = ToolOutput::text(text).with_structured(json!(report));
        output.is_error = report.outcome != OutcomeKind::Ran;
        Ok(output)
    }
}

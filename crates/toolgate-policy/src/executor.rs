//! The one call pipeline. Every surface (MCP, HTTP, CLI, the agent loop)
//! calls [`Executor::call`]; none re-implements a check.
//!
//! ```text
//! lookup -> validate -> access -> paths -> commands -> rules -> (approval)
//!        -> run -> bound -> events, audit record
//! ```
//!
//! Deferred tools (see `find_tools`) are not callable until
//! `mcp_find_tools` activates them; from then on they are ordinary tools
//! of this executor, through every stage above.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use toolgate_core::{
    CallContext, Content, Decision, EventSink, InputMode, RegisteredTool, Registry, ToolEvent,
    ToolEventKind, ToolOutput, ToolPreset, ToolSpec,
};

use crate::access::Access;
use crate::approval::ApprovalScope;
use crate::audit::AuditSink;
use crate::policy::Policy;
use crate::rules::PermissionRules;
use checks::strings_at;
use find_tools::Catalogue;
use names::KnownNames;
use record::AuditTrail;

mod ask;
mod checks;
mod deferred;
mod find_tools;
mod names;
mod record;
mod report;

pub use find_tools::{FIND_TOOLS, FIND_TOOLS_LIMIT};
pub use names::ExecutorBuildError;
pub use report::{
    ApprovalChannel, ApprovalOutcome, ApprovalRequest, CallError, CallResult, Explanation, Stage,
    StageOutcome, StageReport, ToolStatus,
};

/// Builds an [`Executor`].
pub struct ExecutorBuilder {
    registry: Registry,
    policy: Option<Policy>,
    input_mode: InputMode,
    preset: Option<ToolPreset>,
    only: Vec<Vec<String>>,
    /// Where each list of `only` came from, for errors.
    only_origins: Vec<String>,
    /// Tools this program has that are not registered now.
    also_known: Vec<String>,
    sinks: Vec<Arc<dyn EventSink>>,
    approvals: Option<Arc<dyn ApprovalChannel>>,
    audit: Vec<Arc<dyn AuditSink>>,
    output_dir: Option<PathBuf>,
}

impl ExecutorBuilder {
    /// Only these tools (names, or groups as `group:fs`) are active, on top
    /// of the preset and the access layer: a server that exposes a subset
    /// (the filesystem tools, the shell tools). Called again, it narrows
    /// further: a tool must be in every list (`--tools` and an untrusted
    /// project's allow list).
    pub fn only_tools(self, tools: Vec<String>) -> Self {
        self.only_tools_from("the list of tools to expose", tools)
    }

    /// [`ExecutorBuilder::only_tools`], with where the list came from
    /// (`--tools`, a project's `[access] allow`) for the error
    /// [`ExecutorBuilder::try_build`] gives when it names an unknown tool.
    pub fn only_tools_from(mut self, origin: impl Into<String>, tools: Vec<String>) -> Self {
        self.only.push(tools);
        self.only_origins.push(origin.into());
        self
    }

    /// Names of tools this program has that are not registered now (a tool
    /// switched off, such as `elevated` by default), so that naming them
    /// in a list or a rule is not a typo. The standard rules' tools are
    /// always known.
    pub fn also_known(mut self, names: impl IntoIterator<Item = String>) -> Self {
        self.also_known.extend(names);
        self
    }

    /// The policy (default: [`Policy::standard`]).
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = Some(policy);
        self
    }

    /// Coerce (default) or strict input validation.
    pub fn input_mode(mut self, mode: InputMode) -> Self {
        self.input_mode = mode;
        self
    }

    /// Only the preset's tools are active (tools of MCP servers are not affected).
    pub fn tool_preset(mut self, preset: ToolPreset) -> Self {
        self.preset = Some(preset);
        self
    }

    /// Adds an event subscriber.
    pub fn subscribe(mut self, sink: Arc<dyn EventSink>) -> Self {
        self.sinks.push(sink);
        self
    }

    /// Where `ask` decisions go; without one, `ask` refuses.
    pub fn approvals(mut self, channel: Arc<dyn ApprovalChannel>) -> Self {
        self.approvals = Some(channel);
        self
    }

    /// Where every call's [`crate::AuditRecord`] goes (called again, adds a
    /// sink).
    pub fn audit(mut self, sink: Arc<dyn AuditSink>) -> Self {
        self.audit.push(sink);
        self
    }

    /// Directory where uncut output of truncated results is saved.
    pub fn output_dir(mut self, dir: PathBuf) -> Self {
        self.output_dir = Some(dir);
        self
    }

    /// The executor, after checking that every tool and group the tool
    /// lists, the access policy and the rules name exists (tools of MCP
    /// servers excepted); a name that does not is an error with the name
    /// probably meant and where it came from.
    pub fn try_build(self) -> Result<Executor, ExecutorBuildError> {
        let standard = PermissionRules::standard();
        let also: Vec<String> = self
            .also_known
            .iter()
            .cloned()
            // Named in a deny list whether or not this configuration
            // defers any tool.
            .chain([FIND_TOOLS.to_owned()])
            .chain(standard.rules().iter().map(|r| r.pattern.clone()))
            .collect();
        let known = KnownNames::of(&self.registry, &also);
        for (list, origin) in self.only.iter().zip(&self.only_origins) {
            for entry in list {
                known.check(origin, entry)?;
            }
        }
        if let Some(policy) = &self.policy {
            known.check_policy(policy)?;
        }
        Ok(self.build())
    }

    /// The executor, without checking names (see
    /// [`ExecutorBuilder::try_build`]). When the registry has deferred
    /// tools, it also gets [`FIND_TOOLS`], the tool that activates them.
    pub fn build(self) -> Executor {
        let mut executor = Executor {
            registry: self.registry,
            policy: self.policy.unwrap_or_default(),
            input_mode: self.input_mode,
            preset: self.preset,
            only: self.only,
            sinks: self.sinks,
            approvals: self.approvals,
            audit: self.audit,
            output_dir: self.output_dir,
            catalogue: None,
        };
        executor.install_find_tools();
        executor
    }
}

/// The call pipeline over a registry and a policy.
pub struct Executor {
    registry: Registry,
    policy: Policy,
    input_mode: InputMode,
    preset: Option<ToolPreset>,
    only: Vec<Vec<String>>,
    sinks: Vec<Arc<dyn EventSink>>,
    approvals: Option<Arc<dyn ApprovalChannel>>,
    audit: Vec<Arc<dyn AuditSink>>,
    output_dir: Option<PathBuf>,
    /// The deferred tools this executor may activate, when it has any.
    catalogue: Option<Arc<Catalogue>>,
}

/// A call that passed every check.
struct Cleared<'a> {
    tool: &'a RegisteredTool,
    args: Value,
    decision: Decision,
    /// The winning `ask` rule's approval scope.
    scope: ApprovalScope,
    /// Validation changed the arguments (coercion), so they differ from
    /// what the caller sent.
    coerced: bool,
}

impl Executor {
    /// A builder over `registry`.
    pub fn builder(registry: Registry) -> ExecutorBuilder {
        ExecutorBuilder {
            registry,
            policy: None,
            input_mode: InputMode::default(),
            preset: None,
            only: Vec::new(),
            only_origins: Vec::new(),
            also_known: Vec::new(),
            sinks: Vec::new(),
            approvals: None,
            audit: Vec::new(),
            output_dir: None,
        }
    }

    /// The registry.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Every tool, active and deferred, with whether it is active and why
    /// not. An activated deferred tool is not `deferred` any more.
    pub fn tools(&self) -> Vec<ToolStatus> {
        let active = self.registry.active().map(|t| (t, false));
        let deferred = self
            .registry
            .deferred()
            .map(|t| (t, !self.is_activated(&t.spec().name)));
        active
            .chain(deferred)
            .map(|(tool, deferred)| ToolStatus {
                spec: tool.spec().clone(),
                deferred,
                access: self.access(tool.spec()),
            })
            .collect()
    }

    /// The tools a caller can call now: active or activated, and let
    /// through by the preset, the tool lists and the access policy (what
    /// an MCP client's tool list shows), by name within each pool.
    pub fn visible_tools(&self) -> impl Iterator<Item = &ToolSpec> {
        let activated = self
            .registry
            .deferred()
            .filter(|t| self.is_activated(&t.spec().name));
        self.registry
            .active()
            .chain(activated)
            .map(RegisteredTool::spec)
            .filter(|spec| self.access(spec) == Access::Active)
    }

    /// The names of [`Executor::visible_tools`]. Did-you-mean hints come
    /// only from these.
    pub fn visible_names(&self) -> impl Iterator<Item = &str> {
        self.visible_tools().map(|spec| spec.name.as_str())
    }

    fn access(&self, spec: &ToolSpec) -> Access {
        if spec.name == FIND_TOOLS
            && let Some(catalogue) = &self.catalogue
        {
            return self.find_tools_access(catalogue);
        }
        if let Some(preset) = self.preset
            && !spec.is_mcp()
            && !preset.contains(&spec.name)
        {
            return Access::Inactive {
                reason: format!("not in the {preset} tool preset"),
            };
        }
        for only in &self.only {
            let listed = only
                .iter()
                .any(|t| *t == spec.name || spec.group.as_deref() == Some(t.as_str()));
            if !listed {
                return Access::Inactive {
                    reason: format!("not among this server's tools ({})", only.join(", ")),
                };
            }
        }
        self.policy.access.check(spec)
    }

    /// Every stage's verdict on a call, without running it. Stages after a
    /// failure are still evaluated so the whole picture is shown.
    pub fn explain(&self, name: &str, args: Value, ctx: &CallContext) -> Explanation {
        let mut stages = Vec::new();
        let decision = match self.clear(name, args, ctx, Some(&mut stages)) {
            Ok(cleared) => cleared.decision,
            Err(e) => Decision::Deny {
                reason: e.to_string(),
            },
        };
        Explanation {
            tool: name.to_owned(),
            stages,
            decision,
        }
    }

    /// Runs one call through the whole pipeline, and records it: every
    /// call, whatever happens to it, leaves exactly one
    /// [`crate::AuditRecord`] with each audit sink.
    pub async fn call(
        &self,
        name: &str,
        args: Value,
        ctx: &CallContext,
    ) -> Result<CallResult, CallError> {
        let mut trail = AuditTrail::start(&self.audit, name, ctx, &args);
        let result = self.run(name, args, ctx, &mut trail).await;
        trail.finish(&result).await;
        result
    }

    async fn run(
        &self,
        name: &str,
        args: Value,
        ctx: &CallContext,
        trail: &mut AuditTrail,
    ) -> Result<CallResult, CallError> {
        let started = Instant::now();
        let spec = self.callable(name).map(RegisteredTool::spec);
        if let Some(spec) = spec {
            trail.tool(spec);
        }
        let event = |kind, decision: Option<&Decision>| {
            let mut e = ToolEvent::new(kind, name, &ctx.call_id, &ctx.caller);
            e.effect_class = spec.map(|s| s.effect_class);
            e.idempotency = spec.and_then(|s| s.idempotency);
            e.duration = started.elapsed();
            e.decision = decision.cloned();
            for sink in &self.sinks {
                sink.emit(&e);
            }
        };
        let fail = |error: CallError, decision: Option<&Decision>| {
            let decision = decision.cloned().unwrap_or_else(|| Decision::Deny {
                reason: error.to_string(),
            });
            event(
                ToolEventKind::Error {
                    message: error.to_string(),
                },
                Some(&decision),
            );
            Err(error)
        };
        let cleared = match self.clear(name, args, ctx, None) {
            Ok(cleared) => cleared,
            Err(error) => return fail(error, None),
        };
        trail.cleared(&cleared.args, cleared.coerced, &cleared.decision);
        let ctx = &self.call_context(name, ctx, trail.egress_log());
        match self.approve(&cleared, ctx).await {
            Ok(grant) => trail.granted(grant),
            Err(error) => return fail(error, Some(&cleared.decision)),
        }
        event(ToolEventKind::Start, Some(&cleared.decision));
        let output = match cleared.tool.handler().call(cleared.args, ctx).await {
            Ok(output) => output,
            Err(source) => {
                let error = CallError::Tool {
                    tool: name.to_owned(),
                    source,
                };
                return fail(error, Some(&cleared.decision));
            }
        };
        let (output, truncated, full_output) = self.bound(output, ctx);
        event(
            ToolEventKind::End {
                is_error: output.is_error,
            },
            Some(&cleared.decision),
        );
        Ok(CallResult {
            output,
            truncated,
            full_output,
            decision: cleared.decision,
            duration: started.elapsed(),
        })
    }

    /// Stages lookup to rules. With `report`, every stage is evaluated and
    /// recorded (the first failure is still the result); without, the first
    /// failure returns at once.
    fn clear<'a>(
        &'a self,
        name: &str,
        args: Value,
        ctx: &CallContext,
        report: Option<&mut Vec<StageReport>>,
    ) -> Result<Cleared<'a>, CallError> {
        let mut trace = Trace {
            report,
            first_error: None,
        };
        let tool = match self.lookup(name) {
            Ok(tool) => tool,
            Err(e) => {
                trace.record(Stage::Lookup, Err(e.clone()));
                return Err(e);
            }
        };
        let spec = tool.spec();
        let found = if self.is_activated(&spec.name) {
            format!(
                "deferred tool activated by {FIND_TOOLS}, {}",
                spec.effect_class
            )
        } else {
            format!("active tool, {}", spec.effect_class)
        };
        trace.record(Stage::Lookup, Ok((StageOutcome::Pass, found)));
        let (args, coerced) = match self.validate(tool, args) {
            Ok((args, coerced, detail)) => {
                trace.record(Stage::Validate, Ok((StageOutcome::Pass, detail)));
                (args, coerced)
            }
            Err((args, e)) => {
                trace.record(Stage::Validate, Err(e));
                (args, false)
            }
        };
        trace.stop()?;
        trace.record(Stage::Access, self.check_access(spec));
        trace.stop()?;
        trace.record(Stage::Paths, self.check_paths(tool, &args, ctx));
        trace.stop()?;
        trace.record(Stage::Commands, self.check_commands(spec, &args));
        trace.stop()?;
        let (decision, scope) = self.policy.rules.decide_with_scope(spec);
        let rules = match &decision {
            Decision::Allow => Ok((StageOutcome::Pass, "allow".to_owned())),
            Decision::Ask { reason } if scope != ApprovalScope::Exact => Ok((
                StageOutcome::Ask,
                format!("ask: {reason} (approving grants the {scope} scope)"),
            )),
            Decision::Ask { reason } => Ok((StageOutcome::Ask, format!("ask: {reason}"))),
            Decision::Deny { reason } => Err(CallError::Denied {
                stage: Stage::Rules,
                reason: reason.clone(),
            }),
        };
        trace.record(Stage::Rules, rules);
        match trace.first_error {
            Some(e) => Err(e),
            None => Ok(Cleared {
                tool,
                args,
                decision,
                scope,
                coerced,
            }),
        }
    }

    fn lookup(&self, name: &str) -> Result<&RegisteredTool, CallError> {
        if let Some(tool) = self.callable(name) {
            return Ok(tool);
        }
        // A deferred tool the access layer refuses is not in the
        // catalogue, and is as unknown here as it is to a search.
        let hint = if self.catalogue.as_ref().is_some_and(|c| c.admits(name)) {
            format!(": it is deferred; activate it with {FIND_TOOLS} first")
        } else {
            // Attack: probing a narrowed server (`--tools`, a preset, an
            // access list) with near-misses to learn the names it hides.
            // Only tools the caller can call are suggested.
            toolgate_core::suggest::did_you_mean(name, self.visible_names())
        };
        Err(CallError::UnknownTool {
            name: name.to_owned(),
            hint,
        })
    }

    /// The arguments to use and whether coercion changed them, or the raw
    /// ones with the error.
    fn validate(
        &self,
        tool: &RegisteredTool,
        args: Value,
    ) -> Result<(Value, bool, String), (Value, CallError)> {
        let mut args = args;
        let Some(checked) = tool.check_input(&mut args, self.input_mode) else {
            return Ok((
                args,
                false,
                "external schema: passed through unchanged".to_owned(),
            ));
        };
        match checked {
            Ok(false) => Ok((args, false, "arguments fit the schema".to_owned())),
            Ok(true) => Ok((
                args,
                true,
                "arguments fit the schema after coercion".to_owned(),
            )),
            Err(e) => Err((args, e.into())),
        }
    }

    fn check_access(&self, spec: &ToolSpec) -> Result<(StageOutcome, String), CallError> {
        match self.access(spec) {
            Access::Active => {
                let detail = match (self.preset, self.policy.access.cap) {
                    (_, Some(cap)) => {
                        format!("active ({} within the cap {cap})", spec.effect_class)
                    }
                    (_, None) => "active (no effect-class cap)".to_owned(),
                };
                Ok((StageOutcome::Pass, detail))
            }
            Access::Inactive { reason } => Err(CallError::Inactive {
                tool: spec.name.clone(),
                reason,
            }),
        }
    }

    /// Applies the resource caps to every text part; saves the uncut text
    /// when an output dir is configured.
    fn bound(
        &self,
        mut output: ToolOutput,
        ctx: &CallContext,
    ) -> (ToolOutput, bool, Option<PathBuf>) {
        let mut truncated = false;
        let mut full = String::new();
        for part in &mut output.content {
            if let Content::Text { text } = part {
                let bounded = self.policy.resources.bound(text);
                if bounded.truncated() {
                    truncated = true;
                    full.push_str(text);
                    *text = bounded.text;
                }
            }
        }
        if !truncated {
            return (output, false, None);
        }
        let saved = self.output_dir.as_ref().and_then(|dir| {
            let id = ctx.call_id_for_file();
            let path = dir.join(format!("toolgate-output-{id}.txt"));
            std::fs::create_dir_all(dir).ok()?;
            std::fs::write(&path, &full).ok()?;
            Some(path)
        });
        if let Some(path) = &saved {
            output.content.push(Content::Text {
                text: format!("[full output saved to {}]", path.display()),
            });
        }
        (output, true, saved)
    }
}

/// What the stages found, while clearing a call.
struct Trace<'r> {
    /// Where to record every stage (explain); `None` stops at the first failure.
    report: Option<&'r mut Vec<StageReport>>,
    first_error: Option<CallError>,
}

impl Trace<'_> {
    fn record(&mut self, stage: Stage, result: Result<(StageOutcome, String), CallError>) {
        // Only an explanation keeps the details: a call does not copy them.
        if let Some(stages) = self.report.as_deref_mut() {
            let (outcome, detail) = match &result {
                Ok((outcome, detail)) => (*outcome, detail.clone()),
                Err(e) => (StageOutcome::Fail, e.to_string()),
            };
            stages.push(StageReport {
                stage,
                outcome,
                detail,
            });
        }
        if let Err(e) = result {
            self.first_error.get_or_insert(e);
        }
    }

    /// The first failure, unless every stage is being explained.
    fn stop(&mut self) -> Result<(), CallError> {
        match (&self.report, self.first_error.take()) {
            (None, Some(e)) => Err(e),
            (_, e) => {
                self.first_error = e;
                Ok(())
            }
        }
    }
}

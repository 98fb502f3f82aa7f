//! [`Catalog`]: one tenant's shelf of tools over the store, and the two
//! gates every install and run passes first.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use toolgate_core::{CallContext, EffectClass};
use toolgate_policy::{ApprovalChannel, ApprovalOutcome, ApprovalRequest, ScopeKey};
use toolgate_sandbox::{Backend, Sandbox};
use toolgate_store::{CatalogRun, CatalogState, CatalogTool, Registered, Store, Tenant};

use crate::CatalogError;
use crate::gate::{self, Action, GatePolicies, GatePolicy, Verdict};
use crate::manifest::{Manifest, parse_document};

/// Builds the sandbox of one install or run: bubblewrap, with an egress
/// allowlist of exactly these domains (empty: no network).
pub type SandboxFactory = Arc<dyn Fn(&[String]) -> Result<Sandbox, String> + Send + Sync>;

/// How the catalogue is set up.
#[derive(Clone)]
#[non_exhaustive]
pub struct CatalogConfig {
    /// Where installed tools live (`<data dir>/catalog`).
    pub dir: PathBuf,
    /// The gates' policies unless the tenant has its own in the store.
    pub defaults: GatePolicies,
    /// The youngest release an install accepts (default 7 days).
    pub min_release_age: Duration,
    /// Where registries' release dates are asked.
    pub registries: crate::release::Registries,
    /// Paths a run may not change where they lie in its working directory
    /// (toolgate's own configuration files).
    pub protect: Vec<PathBuf>,
    /// Paths a run may not see where they lie in its working directory
    /// (toolgate's state and data directories, the store's files).
    pub conceal: Vec<PathBuf>,
    /// Paths hidden from every run wherever they are (the operator's
    /// filesystem rules: a sandbox-runtime settings file's denyRead).
    pub read_deny: Vec<PathBuf>,
    /// Paths read-only in every run (denyWrite).
    pub write_deny: Vec<PathBuf>,
}

impl CatalogConfig {
    /// The defaults, installing under `dir`.
    pub fn new(dir: PathBuf) -> Self {
        CatalogConfig {
            dir,
            defaults: GatePolicies::default(),
            min_release_age: Duration::from_secs(7 * 24 * 3600),
            registries: crate::release::Registries::default(),
            protect: Vec::new(),
            conceal: Vec::new(),
            read_deny: Vec::new(),
            write_deny: Vec::new(),
        }
    }
}

/// How a gated action ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeKind {
    /// It ran (or installed).
    Ran,
    /// A person was asked; the request id says which question.
    Blocked,
    /// Refused, with the reason.
    Denied,
    /// It cannot run here: not installed, not healthy, no bubblewrap.
    Unavailable,
    /// It was attempted and failed (an install that did not finish).
    Failed,
}

impl OutcomeKind {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            OutcomeKind::Ran => "ran",
            OutcomeKind::Blocked => "blocked",
            OutcomeKind::Denied => "denied",
            OutcomeKind::Unavailable => "unavailable",
            OutcomeKind::Failed => "failed",
        }
    }
}

/// Why a gated action did not go ahead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Stopped {
    /// `blocked`, `denied`, `unavailable` or `failed`.
    pub outcome: OutcomeKind,
    /// Why.
    pub reason: String,
    /// The request a person is asked (blocked), or the refusal (denied).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl Stopped {
    pub(crate) fn unavailable(reason: impl Into<String>) -> Self {
        Stopped {
            outcome: OutcomeKind::Unavailable,
            reason: reason.into(),
            request_id: None,
        }
    }

    pub(crate) fn denied(reason: impl Into<String>) -> Self {
        Stopped {
            outcome: OutcomeKind::Denied,
            reason: reason.into(),
            request_id: None,
        }
    }

    pub(crate) fn failed(reason: impl Into<String>) -> Self {
        Stopped {
            outcome: OutcomeKind::Failed,
            reason: reason.into(),
            request_id: None,
        }
    }
}

/// One registered tool, read back.
#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    /// The manifest.
    pub manifest: Manifest,
    /// Where it stands.
    pub state: CatalogState,
    /// Where its files are.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub install_dir: Option<String>,
    /// Why its last install failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// The pin's digest.
    pub pin: String,
}

/// One tenant's catalogue.
pub struct Catalog {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) tenant: Tenant,
    pub(crate) approvals: Option<Arc<dyn ApprovalChannel>>,
    pub(crate) sandboxes: SandboxFactory,
    pub(crate) config: CatalogConfig,
}

impl Catalog {
    /// The catalogue of `tenant` in `store`, asking people through
    /// `approvals`, running in the sandboxes `sandboxes` builds.
    pub fn new(
        store: Arc<dyn Store>,
        tenant: Tenant,
        approvals: Option<Arc<dyn ApprovalChannel>>,
        sandboxes: SandboxFactory,
        config: CatalogConfig,
    ) -> Self {
        Catalog {
            store,
            tenant,
            approvals,
            sandboxes,
            config,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &CatalogConfig {
        &self.config
    }

    /// Registers manifests: a new pin shelves the tool again.
    pub async fn add(
        &self,
        manifests: &[Manifest],
    ) -> Result<Vec<(String, Registered)>, CatalogError> {
        let mut done = Vec::with_capacity(manifests.len());
        for manifest in manifests {
            let registered = self
                .store
                .register_catalog_tool(
                    &self.tenant,
                    &manifest.id,
                    &manifest.to_document(),
                    &manifest.pin_digest(),
                )
                .await?;
            done.push((manifest.id.clone(), registered));
        }
        Ok(done)
    }

    /// Every registered tool, by id.
    pub async fn list(&self) -> Result<Vec<Entry>, CatalogError> {
        let tools = self.store.catalog_tools(&self.tenant, None).await?;
        tools.into_iter().map(entry).collect()
    }

    /// One tool, or an error with a did-you-mean.
    pub async fn get(&self, id: &str) -> Result<Entry, CatalogError> {
        let mut found = self.store.catalog_tools(&self.tenant, Some(id)).await?;
        match found.pop() {
            Some(tool) => entry(tool),
            None => Err(self.unknown(id).await),
        }
    }

    pub(crate) async fn unknown(&self, id: &str) -> CatalogError {
        let ids: Vec<String> = match self.store.catalog_tools(&self.tenant, None).await {
            Ok(tools) => tools.into_iter().map(|t| t.id).collect(),
            Err(e) => return e.into(),
        };
        let hint = toolgate_core::suggest::did_you_mean(id, ids.iter().map(String::as_str));
        CatalogError::UnknownTool {
            id: id.to_owned(),
            hint,
            known: ids,
        }
    }

    /// Removes a tool and its installed files.
    pub async fn remove(&self, id: &str) -> Result<Entry, CatalogError> {
        let Some(tool) = self.store.remove_catalog_tool(&self.tenant, id).await? else {
            return Err(self.unknown(id).await);
        };
        let entry = entry(tool)?;
        let dir = self.tool_dir(id);
        // Not under an install of the same tool still running.
        let _lock = crate::install::lock_tool(self, id).await?;
        if dir.exists() {
            std::fs::remove_dir_all(&dir)
                .map_err(|e| CatalogError::Io(format!("cannot remove {}: {e}", dir.display())))?;
        }
        Ok(entry)
    }

    /// The tenant's gate policies: its own in the store, else the defaults.
    pub async fn policies(&self) -> Result<(GatePolicies, bool), CatalogError> {
        match self.store.catalog_policies(&self.tenant).await? {
            Some((install, execute)) => {
                let parse = |s: &str| {
                    s.parse::<GatePolicy>()
                        .map_err(|e| CatalogError::Store(format!("a stored gate policy: {e}")))
                };
                Ok((
                    GatePolicies {
                        install: parse(&install)?,
                        execute: parse(&execute)?,
                    },
                    true,
                ))
            }
            None => Ok((self.config.defaults, false)),
        }
    }

    /// Sets the tenant's policies in the store.
    pub async fn set_policies(&self, policies: GatePolicies) -> Result<(), CatalogError> {
        self.store
            .set_catalog_policies(
                &self.tenant,
                policies.install.as_str(),
                policies.execute.as_str(),
            )
            .await?;
        Ok(())
    }

    /// Every install, health check and run of `id` (all tools: `None`).
    pub async fn runs(&self, id: Option<&str>) -> Result<Vec<CatalogRun>, CatalogError> {
        Ok(self.store.catalog_runs(&self.tenant, id).await?)
    }

    pub(crate) async fn record(&self, run: &CatalogRun) {
        if let Err(e) = self.store.record_catalog_run(&self.tenant, run).await {
            tracing::warn!(tool = %run.tool_id, "the catalogue run could not be recorded: {e}");
        }
    }

    /// Where a tool's installs live.
    pub(crate) fn tool_dir(&self, id: &str) -> PathBuf {
        self.config.dir.join(self.tenant.as_str()).join(id)
    }

    /// A bubblewrap sandbox with this egress allowlist, or why there is
    /// none: the catalogue never runs under the weaker backends.
    pub(crate) fn sandbox(&self, allow: &[String]) -> Result<Sandbox, Stopped> {
        let sandbox = (self.sandboxes)(allow)
            .map_err(|e| Stopped::unavailable(format!("the catalogue needs bubblewrap: {e}")))?;
        match sandbox.backend() {
            Backend::Bwrap => Ok(sandbox),
            other => Err(Stopped::unavailable(format!(
                "the catalogue runs tools only under bubblewrap, and this machine offers the {other} backend (install bubblewrap; `toolgate doctor` says what is missing)"
            ))),
        }
    }

    /// Passes `action`'s gate for `manifest`: the grant spent, if any, or
    /// why not.
    pub(crate) async fn pass(
        &self,
        action: Action,
        manifest: &Manifest,
        question: Question,
        ctx: &CallContext,
    ) -> Result<Option<String>, Stopped> {
        let (policies, _) = self
            .policies()
            .await
            .map_err(|e| Stopped::unavailable(e.to_string()))?;
        let reason = match gate::decide(policies.of(action), action, manifest) {
            Verdict::Allow => return Ok(None),
            Verdict::Deny(reason) => return Err(Stopped::denied(reason)),
            Verdict::Ask(reason) => reason,
        };
        let Some(channel) = &self.approvals else {
            return Err(Stopped::unavailable(format!(
                "{reason}, and no approval store is open"
            )));
        };
        let request = ApprovalRequest {
            tool: question.tool,
            arguments: question.arguments,
            reason: reason.clone(),
            caller: ctx.caller.clone(),
            call_id: ctx.call_id.clone(),
            effect_class: match action {
                Action::Install => EffectClass::MutateIrreversible,
                Action::Execute => manifest.effect_class,
            },
            group: Some(crate::CATALOG_GROUP.to_owned()),
            scope: question.scope,
            exact: question.exact,
            covering: question.covering,
            suggested_prefix: Vec::new(),
            progress: ctx.progress.clone(),
            asker: ctx.asker.clone(),
        };
        match channel.request(&request).await {
            ApprovalOutcome::Approved { grant } => Ok(grant),
            ApprovalOutcome::Refused { reason, id } => Err(Stopped {
                outcome: OutcomeKind::Denied,
                reason: format!("refused by a person: {reason}"),
                request_id: id,
            }),
            ApprovalOutcome::Pending { id } => Err(Stopped {
                outcome: OutcomeKind::Blocked,
                reason: format!("{reason}: waiting for a person (toolgate approvals approve {id})"),
                request_id: Some(id),
            }),
            ApprovalOutcome::Unavailable { reason } => Err(Stopped::unavailable(reason)),
            _ => Err(Stopped::unavailable("the approval gate gave no answer")),
        }
    }
}

/// What a gate asks a person: under which tool name, about what, and
/// which grants cover it.
pub(crate) struct Question {
    pub tool: String,
    pub arguments: Value,
    pub scope: toolgate_policy::ApprovalScope,
    pub exact: ScopeKey,
    pub covering: Vec<ScopeKey>,
}

fn entry(tool: CatalogTool) -> Result<Entry, CatalogError> {
    let manifest = parse_document(
        &format!("the stored manifest of `{}`", tool.id),
        tool.manifest,
    )
    .map_err(|e| CatalogError::Store(e.to_string()))?
    .pop()
    .ok_or_else(|| CatalogError::Store(format!("the stored manifest of `{}` is empty", tool.id)))?;
    Ok(Entry {
        manifest,
        state: tool.state,
        install_dir: tool.install_dir,
        last_error: tool.last_error,
        pin: tool.pin,
    })
}

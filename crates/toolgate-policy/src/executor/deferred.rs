//! The executor's side of deferred tools: which are callable, the
//! generation surfaces watch, and `mcp_find_tools`' place among the tools.

use std::sync::Arc;

use toolgate_core::RegisteredTool;

use super::Executor;
use super::find_tools::{Catalogue, FIND_TOOLS, FindTools};
use crate::access::Access;

impl Executor {
    /// An active tool, or a deferred one that was activated.
    pub(super) fn callable(&self, name: &str) -> Option<&RegisteredTool> {
        self.registry.get(name).or_else(|| {
            self.registry
                .get_deferred(name)
                .filter(|_| self.is_activated(name))
        })
    }

    /// Changes whenever [`Executor::visible_tools`] gains a tool (an
    /// activation by [`FIND_TOOLS`]); a surface that compares it before and
    /// after a call knows when to tell its client that the list changed.
    pub fn tool_generation(&self) -> u64 {
        self.catalogue.as_ref().map_or(0, |c| c.generation())
    }

    /// Waits until [`Executor::tool_generation`] is not `seen` and returns
    /// it; never returns for an executor without deferred tools.
    pub async fn tools_changed(&self, seen: u64) -> u64 {
        match &self.catalogue {
            Some(catalogue) => catalogue.changed_since(seen).await,
            None => std::future::pending().await,
        }
    }

    /// The deferred tools activated so far, by name.
    pub fn activated(&self) -> Vec<String> {
        self.catalogue
            .as_ref()
            .map_or_else(Vec::new, |c| c.activated())
    }

    /// Activates deferred tools by name, as [`FIND_TOOLS`] does (a session
    /// that moves to another executor keeps what it had found); a name the
    /// access layer refuses, or of no deferred tool, is skipped. Returns
    /// the names that were not active before.
    pub fn activate<'n>(&self, names: impl IntoIterator<Item = &'n str>) -> Vec<String> {
        self.catalogue
            .as_ref()
            .map_or_else(Vec::new, |c| c.activate(names))
    }

    pub(super) fn is_activated(&self, name: &str) -> bool {
        self.catalogue
            .as_ref()
            .is_some_and(|c| c.is_activated(name))
    }

    /// Registers [`FIND_TOOLS`] over the deferred tools the access layer
    /// admits, when there are deferred tools at all.
    pub(super) fn install_find_tools(&mut self) {
        if self.registry.deferred().next().is_none() {
            return;
        }
        if self.registry.get(FIND_TOOLS).is_some() {
            tracing::warn!(
                "a tool is already named {FIND_TOOLS}; the deferred tools cannot be activated"
            );
            return;
        }
        // Decided once: the preset, the lists and the policy are fixed for
        // the executor's life.
        let admitted = self
            .registry
            .deferred()
            .map(RegisteredTool::spec)
            .filter(|spec| self.access(spec) == Access::Active);
        let catalogue = Arc::new(Catalogue::new(admitted));
        match self
            .registry
            .register(Arc::new(FindTools::new(catalogue.clone())))
        {
            Ok(()) => self.catalogue = Some(catalogue),
            Err(error) => tracing::warn!("{FIND_TOOLS} is not registered: {error}"),
        }
    }

    /// [`FIND_TOOLS`] can only show and activate tools that pass the
    /// preset, the tool lists and the access policy themselves, so it is
    /// active whenever one does (a preset or `--tools` list need not name
    /// it) and not otherwise; the operator can still deny it by name.
    pub(super) fn find_tools_access(&self, catalogue: &Catalogue) -> Access {
        if self.policy.access.deny.iter().any(|e| e == FIND_TOOLS) {
            return Access::Inactive {
                reason: format!("denied by the access policy entry `{FIND_TOOLS}`"),
            };
        }
        if catalogue.is_empty() {
            return Access::Inactive {
                reason:
                    "no deferred tool passes the tool preset, the tool lists and the access policy"
                        .to_owned(),
            };
        }
        Access::Active
    }
}

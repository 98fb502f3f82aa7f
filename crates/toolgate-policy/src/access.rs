//! AccessPolicy: which tools are active at all.
//!
//! Allow and deny entries name a tool exactly or a group (`group:fs`). A deny
//! always wins. The effect-class cap makes every tool above it inactive; an
//! allow entry that names a tool exactly lifts the cap for that tool (the
//! operator chose it by name), a group entry does not. Tools of external MCP
//! servers cannot be listed in advance, so an allow list does not have to
//! name them, but they stay under the cap.

use serde::{Deserialize, Serialize};
use toolgate_core::{EffectClass, ToolSpec};

/// The group every tool of an external MCP server belongs to.
pub const MCP_GROUP: &str = "group:mcp";

/// The group of the catalogue's tools (`catalog__<id>`, `catalog_install`).
/// Known whether or not any is installed, so that an access list or a rule
/// may name it ahead of the tools.
pub const CATALOG_GROUP: &str = "group:catalog";

/// Allow and deny lists plus an optional effect-class cap.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessPolicy {
    /// Tool names or groups; empty means every tool.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Tool names or groups that are never active.
    #[serde(default)]
    pub deny: Vec<String>,
    /// The highest effect class a tool may have; `None` means no cap.
    #[serde(default)]
    pub cap: Option<EffectClass>,
}

/// Whether a tool is active under an access policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    /// Callable.
    Active,
    /// Not callable, and why.
    Inactive {
        /// Why.
        reason: String,
    },
}

impl AccessPolicy {
    /// Only a cap, no lists.
    pub fn capped(cap: EffectClass) -> Self {
        AccessPolicy {
            cap: Some(cap),
            ..AccessPolicy::default()
        }
    }

    /// Whether the tool described by `spec` is active.
    pub fn check(&self, spec: &ToolSpec) -> Access {
        if let Some(entry) = self.deny.iter().find(|e| names(e, spec)) {
            return Access::Inactive {
                reason: format!("denied by the access policy entry `{entry}`"),
            };
        }
        let named_exactly = self.allow.contains(&spec.name);
        if let Some(cap) = self.cap
            && spec.effect_class > cap
            && !named_exactly
        {
            return Access::Inactive {
                reason: format!(
                    "effect class {} exceeds the policy cap {cap}",
                    spec.effect_class
                ),
            };
        }
        // An allow list names external tools like any other (by exact
        // name or `group:mcp`): one that names none leaves them all out.
        let listed =
            self.allow.is_empty() || named_exactly || self.allow.iter().any(|e| names(e, spec));
        if !listed {
            return Access::Inactive {
                reason: "not in the access policy's allow list".to_owned(),
            };
        }
        Access::Active
    }
}

/// Whether an allow/deny entry names the tool or one of its groups.
fn names(entry: &str, spec: &ToolSpec) -> bool {
    entry == spec.name
        || spec.group.as_deref() == Some(entry)
        || (spec.is_mcp() && entry == MCP_GROUP)
}

//! The verdict on one call.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Whether a call may run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "decision")]
pub enum Decision {
    /// The call runs.
    Allow,
    /// The call runs only after someone approves it.
    Ask {
        /// Why approval is needed.
        reason: String,
    },
    /// The call does not run.
    Deny {
        /// Why, naming the layer that refused.
        reason: String,
    },
}

impl Decision {
    /// The short wire name: `allow`, `ask` or `deny`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Ask { .. } => "ask",
            Decision::Deny { .. } => "deny",
        }
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Decision::Allow => f.write_str("allow"),
            Decision::Ask { reason } => write!(f, "ask: {reason}"),
            Decision::Deny { reason } => write!(f, "deny: {reason}"),
        }
    }
}

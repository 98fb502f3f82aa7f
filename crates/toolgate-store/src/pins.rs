//! The pins of external MCP tools, as the rest of toolgate sees them.
//!
//! The store keeps a definition as opaque JSON and compares digests the
//! caller computed (toolgate-mcp's `ToolDefinition::digest`): what a
//! definition is, and which of its parts count, is the gateway's business.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One tool as a server lists it now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListedTool {
    /// The server's name in the configuration.
    pub server: String,
    /// The tool's name on the server.
    pub tool: String,
    /// The digest of `definition`: equal digests are the same definition.
    pub digest: String,
    /// The whole definition (what is shown in a review).
    pub definition: Value,
}

/// A tool's trusted definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PinnedTool {
    /// The server's name in the configuration.
    pub server: String,
    /// The tool's name on the server.
    pub tool: String,
    /// The pinned definition's digest.
    pub digest: String,
    /// The pinned definition.
    pub definition: Value,
    /// Pinned (first seen, or approved) at, unix ms.
    pub pinned_ms: i64,
    /// Who approved it; `None`: pinned when first seen.
    pub approved_by: Option<String>,
}

/// What [`Store::check_tool_pins`](crate::Store::check_tool_pins) says of
/// one listed tool.
///
/// Not `non_exhaustive`: a caller matches every verdict, so that a new one
/// cannot fall into a catch-all arm that trusts it.
#[derive(Debug, Clone, PartialEq)]
pub enum PinCheck {
    /// It is the pinned definition.
    Trusted,
    /// No pin existed: this definition is now the pin.
    FirstSeen,
    /// It differs from the pin: recorded as a change (pending, unless a
    /// person rejected this very definition already); the tool is not to
    /// be used.
    Changed {
        /// The trusted definition.
        pinned: PinnedTool,
    },
}

/// Where a change stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChangeState {
    /// Waiting for a person.
    Pending,
    /// A person said no: the tool stays disabled while the server serves
    /// this definition, and it is not queued for review again.
    Rejected,
}

impl ChangeState {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeState::Pending => "pending",
            ChangeState::Rejected => "rejected",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<ChangeState> {
        [ChangeState::Pending, ChangeState::Rejected]
            .into_iter()
            .find(|state| state.as_str() == s)
    }
}

/// A definition a server serves in place of the pinned one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolChange {
    /// The trusted definition.
    pub pinned: PinnedTool,
    /// The changed definition's digest: what an approval must name.
    pub digest: String,
    /// The changed definition.
    pub definition: Value,
    /// When this definition was first seen, unix ms.
    pub seen_ms: i64,
    /// Pending or rejected.
    pub state: ChangeState,
    /// Who rejected it.
    pub decided_by: Option<String>,
    /// When, unix ms.
    pub decided_ms: Option<i64>,
}

//! What a person's yes or no covers: approval scopes and their digests.
//!
//! A grant or a refusal is stored under the digest of a scope, and a call
//! is covered by it when one of the call's [`ScopeKey`]s has that digest.
//! The digest of the exact call is taken over the canonical JSON of the
//! validated arguments, so the same question asked with its keys in another
//! order is the same question, and any changed value is a different one.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The tag that starts every digested scope, so that a digest of another
/// kind of document can never be mistaken for a scope digest.
const SCOPE_TAG: &str = "toolgate-scope-v1";

/// How wide a person's yes or no is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalScope {
    /// This tool with exactly these arguments.
    #[default]
    Exact,
    /// Any call of this tool.
    Tool,
    /// For shell tools: any script whose every command starts with the
    /// approved words (`cargo test` covers `cargo test -p x`).
    CommandPrefix,
}

impl ApprovalScope {
    /// Every scope, narrowest first.
    pub const ALL: [ApprovalScope; 3] = [
        ApprovalScope::Exact,
        ApprovalScope::Tool,
        ApprovalScope::CommandPrefix,
    ];

    /// The wire name: `exact`, `tool` or `command-prefix`.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalScope::Exact => "exact",
            ApprovalScope::Tool => "tool",
            ApprovalScope::CommandPrefix => "command-prefix",
        }
    }
}

impl fmt::Display for ApprovalScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is not an approval scope.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown approval scope `{0}`; the scopes are exact, tool and command-prefix")]
pub struct UnknownApprovalScope(pub String);

impl FromStr for ApprovalScope {
    type Err = UnknownApprovalScope;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ApprovalScope::ALL
            .into_iter()
            .find(|scope| scope.as_str() == s)
            .ok_or_else(|| UnknownApprovalScope(s.to_owned()))
    }
}

/// One way a grant or a refusal may cover a call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScopeKey {
    /// The kind of scope.
    pub kind: ApprovalScope,
    /// [`scope_digest`] of the scope.
    pub digest: String,
    /// The prefix words for [`ApprovalScope::CommandPrefix`], else empty.
    pub prefix: Vec<String>,
}

impl ScopeKey {
    /// The key of exactly this call of `tool` with `arguments`.
    pub fn exact(tool: &str, arguments: &Value) -> ScopeKey {
        ScopeKey {
            kind: ApprovalScope::Exact,
            digest: scope_digest(ApprovalScope::Exact, tool, arguments),
            prefix: Vec::new(),
        }
    }

    /// The key of every call of `tool`.
    pub fn tool(tool: &str) -> ScopeKey {
        ScopeKey {
            kind: ApprovalScope::Tool,
            digest: scope_digest(ApprovalScope::Tool, tool, &Value::Null),
            prefix: Vec::new(),
        }
    }

    /// The key of every script of `tool` whose commands all start with `prefix`.
    pub fn command_prefix(tool: &str, prefix: Vec<String>) -> ScopeKey {
        let words = Value::Array(prefix.iter().cloned().map(Value::String).collect());
        ScopeKey {
            kind: ApprovalScope::CommandPrefix,
            digest: scope_digest(ApprovalScope::CommandPrefix, tool, &words),
            prefix,
        }
    }
}

/// The digest of a scope: lowercase hex SHA-256 of the canonical JSON array
/// `["toolgate-scope-v1", kind, tool, payload]`, where payload is the
/// validated arguments ([`ApprovalScope::Exact`]), null
/// ([`ApprovalScope::Tool`]) or the prefix as an array of words
/// ([`ApprovalScope::CommandPrefix`]).
pub fn scope_digest(kind: ApprovalScope, tool: &str, payload: &Value) -> String {
    let document = Value::Array(vec![
        Value::String(SCOPE_TAG.to_owned()),
        Value::String(kind.as_str().to_owned()),
        Value::String(tool.to_owned()),
        payload.clone(),
    ]);
    let hash = Sha256::digest(canonical_json(&document).as_bytes());
    let mut hex = String::with_capacity(64);
    for byte in hash {
        hex.push_str(&format!("{byte:02x}"));
    }
    hex
}

/// `v` as canonical JSON: object keys sorted by their UTF-8 bytes, no
/// whitespace, numbers as serde_json prints them, strings as serde_json
/// escapes them. Nothing depends on a locale or on the order the keys
/// arrived in.
pub fn canonical_json(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {
            out.push_str(&v.to_string());
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            for (i, (key, value)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(value, out);
            }
            out.push('}');
        }
    }
}

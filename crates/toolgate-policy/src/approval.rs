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
    // The array written in place, exactly as `canonical_json` writes it,
    // without copying the payload into a document first.
    let mut document = Vec::new();
    document.push(b'[');
    for part in [SCOPE_TAG, kind.as_str(), tool] {
        write_scalar(&mut document, &part);
        document.push(b',');
    }
    write_canonical(payload, &mut document);
    document.push(b']');
    toolgate_core::text::hex(&Sha256::digest(&document))
}

/// `v` as canonical JSON: object keys sorted by their UTF-8 bytes, no
/// whitespace, numbers as serde_json prints them, strings as serde_json
/// escapes them. Nothing depends on a locale or on the order the keys
/// arrived in.
pub fn canonical_json(v: &Value) -> String {
    let mut out = Vec::new();
    write_canonical(v, &mut out);
    // serde_json writes UTF-8 only, and so does everything else here.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// A string or scalar as serde_json prints it, compact.
fn write_scalar<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    // Writing a string, number, bool or null to a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, value);
}

fn write_canonical(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => write_scalar(out, v),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            out.push(b'{');
            let by_bytes = |a: &&String, b: &&String| a.as_bytes() <= b.as_bytes();
            // serde_json's map is usually sorted already (a BTreeMap of
            // Strings, which orders by bytes); an insertion-ordered one
            // (its `preserve_order` feature) is sorted here.
            if map.keys().is_sorted_by(by_bytes) {
                write_entries(map.iter(), out);
            } else {
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
                write_entries(entries.into_iter(), out);
            }
            out.push(b'}');
        }
    }
}

fn write_entries<'a>(entries: impl Iterator<Item = (&'a String, &'a Value)>, out: &mut Vec<u8>) {
    for (i, (key, value)) in entries.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_scalar(out, key.as_str());
        out.push(b':');
        write_canonical(value, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn canonical_json_sorts_keys_by_bytes_at_every_depth() {
        let cases = [
            (json!({"b": 1, "a": 2}), r#"{"a":2,"b":1}"#),
            (
                json!({"z": {"y": [3, {"d": null, "c": true}], "x": "s"}, "a": []}),
                r#"{"a":[],"z":{"x":"s","y":[3,{"c":true,"d":null}]}}"#,
            ),
            // Bytes, not characters or a locale's collation: `B` (0x42)
            // before `a` (0x61), `é` (0xc3 0xa9) after `z`, and `_` (0x5f)
            // between them.
            (
                json!({"é": 1, "z": 2, "a": 3, "B": 4, "_": 5}),
                r#"{"B":4,"_":5,"a":3,"z":2,"é":1}"#,
            ),
            // Strings as serde_json escapes them: quotes, backslashes and
            // control characters escaped, other text as UTF-8.
            (
                json!({"s": "a\"b\\c\nd\u{1}é😀"}),
                "{\"s\":\"a\\\"b\\\\c\\nd\\u0001é😀\"}",
            ),
            // Numbers as serde_json prints them.
            (
                json!([0, -1, 1.5, 1e300, 12345678901234567890u64, -0.0]),
                "[0,-1,1.5,1e+300,12345678901234567890,-0.0]",
            ),
            (json!([]), "[]"),
            (json!({}), "{}"),
            (json!("x"), r#""x""#),
            (Value::Null, "null"),
        ];
        for (value, expected) in cases {
            assert_eq!(canonical_json(&value), expected, "{value}");
        }
    }

    #[test]
    fn digests_are_equal_for_reordered_keys() {
        let a: Value = serde_json::from_str(r#"{"path": "a", "opts": {"x": 1, "y": [1, 2]}}"#)
            .unwrap_or_default();
        let b: Value = serde_json::from_str(r#"{"opts": {"y": [1, 2], "x": 1}, "path": "a"}"#)
            .unwrap_or_default();
        assert_eq!(
            scope_digest(ApprovalScope::Exact, "write", &a),
            scope_digest(ApprovalScope::Exact, "write", &b)
        );
    }

    #[test]
    fn any_changed_value_changes_the_digest() {
        let base = json!({"path": "a", "n": 1, "opts": {"x": [1, 2], "s": "é"}, "f": 1.0});
        let changed = [
            json!({"path": "b", "n": 1, "opts": {"x": [1, 2], "s": "é"}, "f": 1.0}),
            json!({"path": "a", "n": 2, "opts": {"x": [1, 2], "s": "é"}, "f": 1.0}),
            json!({"path": "a", "n": "1", "opts": {"x": [1, 2], "s": "é"}, "f": 1.0}),
            json!({"path": "a", "n": 1, "opts": {"x": [2, 1], "s": "é"}, "f": 1.0}),
            json!({"path": "a", "n": 1, "opts": {"x": [1, 2, 3], "s": "é"}, "f": 1.0}),
            json!({"path": "a", "n": 1, "opts": {"x": [1, 2], "s": "e"}, "f": 1.0}),
            json!({"path": "a", "n": 1, "opts": {"x": [1, 2], "s": "é", "t": null}, "f": 1.0}),
            json!({"path": "a", "n": 1, "opts": {"x": [1, 2]}, "f": 1.0}),
            // 1.0 and 1 are different JSON texts, so different questions.
            json!({"path": "a", "n": 1, "opts": {"x": [1, 2], "s": "é"}, "f": 1}),
            json!({"path": "a", "n": 1, "opts": {"X": [1, 2], "s": "é"}, "f": 1.0}),
        ];
        let digest = |v: &Value| scope_digest(ApprovalScope::Exact, "write", v);
        let mut seen = std::collections::BTreeSet::from([digest(&base)]);
        for value in &changed {
            assert!(seen.insert(digest(value)), "{value} collides");
        }
        // The tool and the kind of scope are part of what is digested.
        assert_ne!(
            digest(&base),
            scope_digest(ApprovalScope::Exact, "edit", &base)
        );
        assert_ne!(
            ScopeKey::tool("bash").digest,
            ScopeKey::exact("bash", &Value::Null).digest
        );
        assert_ne!(
            ScopeKey::command_prefix("bash", vec!["cargo".into(), "test".into()]).digest,
            ScopeKey::command_prefix("bash", vec!["cargo test".into()]).digest
        );
    }

    /// A pinned digest: stores written by one build are read by the next,
    /// so the digest of a scope must never change.
    #[test]
    fn the_digest_is_sha256_of_the_tagged_canonical_array() {
        let args = json!({"b": [1, "x"], "a": null});
        let text = r#"["toolgate-scope-v1","exact","bash",{"a":null,"b":[1,"x"]}]"#;
        let expected = toolgate_core::text::hex(&Sha256::digest(text.as_bytes()));
        assert_eq!(scope_digest(ApprovalScope::Exact, "bash", &args), expected);
        assert_eq!(
            ScopeKey::command_prefix("bash", vec!["cargo".into(), "test".into()]).digest,
            // hashlib.sha256(b'["toolgate-scope-v1","command-prefix","bash",["cargo","test"]]')
            "433c142ae9af9ad2d67a8c9751c650cd2f33de0c4630ba8f0e1e28ecfd327b0f"
        );
    }

    #[test]
    fn scopes_read_and_print_their_wire_names() {
        for scope in ApprovalScope::ALL {
            assert_eq!(scope.as_str().parse::<ApprovalScope>(), Ok(scope));
            assert_eq!(
                serde_json::to_value(scope).ok(),
                Some(Value::String(scope.to_string()))
            );
        }
        assert_eq!(
            "prefix".parse::<ApprovalScope>().map_err(|e| e.to_string()),
            Err(
                "unknown approval scope `prefix`; the scopes are exact, tool and command-prefix"
                    .to_owned()
            )
        );
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            "\\PC{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map("\\PC{0,6}", inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// Keys in any order give one text.
    fn shuffled(value: &Value, seed: u64) -> Value {
        match value {
            Value::Object(map) => {
                let mut entries: Vec<(String, Value)> = map
                    .iter()
                    .map(|(k, v)| (k.clone(), shuffled(v, seed.rotate_left(7))))
                    .collect();
                let n = entries.len().max(1) as u64;
                entries.rotate_left((seed % n) as usize);
                if seed & 1 == 1 {
                    entries.reverse();
                }
                Value::Object(entries.into_iter().collect())
            }
            Value::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|v| shuffled(v, seed.rotate_left(3)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    proptest! {
        #[test]
        fn canonical_json_reads_back_and_ignores_key_order(value in json_value(), seed in any::<u64>()) {
            let text = canonical_json(&value);
            let back: Value = serde_json::from_str(&text).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(&back, &value);
            prop_assert_eq!(canonical_json(&shuffled(&value, seed)), text);
        }
    }
}

//! The audit hook: one record for every call through the Executor.
//!
//! The Executor builds an [`AuditRecord`] whatever happens to a call (an
//! unknown tool, invalid arguments, a denial at any stage, an approval
//! pending or refused, a tool error, a success) and hands it to every
//! [`AuditSink`]. Where the records go, their tenant, sequence and hash
//! chain are the sink's business (toolgate-store).

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolgate_core::EgressNote;

/// Where audit records go.
#[async_trait]
pub trait AuditSink: Send + Sync {
    /// Appends one record. An error is logged by the caller
    /// (`tracing::warn`); it never changes the call's result: the call
    /// already ran.
    async fn record(&self, record: &AuditRecord) -> Result<(), String>;

    /// Waits until every record handed to [`AuditSink::record`] so far is
    /// written (a sink that writes in the background; the default writes
    /// nothing later). Surfaces call it before they exit.
    async fn flush(&self) {}
}

/// What one call did, as the audit log keeps it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AuditRecord {
    /// When the call arrived: RFC 3339, UTC, millisecond precision.
    pub time: String,
    /// The call's id.
    pub call_id: String,
    /// Who called (the call context's caller).
    pub agent: String,
    /// The tool as asked for.
    pub tool: String,
    /// The tool's effect class, when the tool exists.
    pub effect_class: Option<String>,
    /// The tool's idempotency, when it has one.
    pub idempotency: Option<String>,
    /// `allow`, `ask` or `deny`.
    pub decision: String,
    /// The stage that decided (`lookup`, `validate`, `access`, `paths`,
    /// `commands`, `rules`, `approval`, `run`).
    pub layer: String,
    /// The approval request or refusal that answered, if any.
    pub approval_id: Option<String>,
    /// The grant spent, if any.
    pub grant_id: Option<String>,
    /// `scope_digest(Exact, tool, arguments)`.
    pub args_digest: String,
    /// The arguments: values of secret-looking keys redacted, and replaced
    /// by a note with their size past 8 KiB of canonical JSON.
    pub arguments: Value,
    /// `ok`, `error`, `denied`, `pending`, `refused`, `unknown-tool` or `invalid`.
    pub status: String,
    /// The command's exit code, from the output's structured `exit_code`.
    pub exit_code: Option<i64>,
    /// Time in the pipeline.
    pub duration_ms: u64,
    /// Connections the call's command made through the egress proxy.
    pub egress: Vec<EgressNote>,
    /// What went wrong, for a call that did not succeed.
    pub error: Option<String>,
}

/// How much of a call's arguments the log keeps: canonical JSON bytes.
pub(crate) const MAX_AUDIT_ARGUMENT_BYTES: usize = 8 * 1024;

/// Longest string kept whole when the arguments are over
/// [`MAX_AUDIT_ARGUMENT_BYTES`]: a 1 MiB file body is cut, its path kept.
const CUT_STRING_BYTES: usize = 256;

/// Key names whose values are never written to the log (case-insensitive,
/// anywhere in the key): an agent passing a token to a tool must not leave
/// it in a log that people and other agents read.
pub(crate) const SECRET_KEY_PARTS: &[&str] = &[
    "token",
    "secret",
    "password",
    "passwd",
    "api_key",
    "apikey",
    "authorization",
    "cookie",
    "credential",
    "private_key",
];

/// What stands in for a redacted value.
pub(crate) const REDACTED: &str = "[redacted]";

/// `arguments` as the log keeps them: the value of every key that looks
/// like it holds a secret replaced by `"[redacted]"`, at any depth; past
/// [`MAX_AUDIT_ARGUMENT_BYTES`] of canonical JSON, long strings cut, and if
/// that is not enough, a note with the size instead.
pub(crate) fn audit_arguments(arguments: &Value) -> Value {
    let redacted = redact(arguments);
    let size = crate::canonical_json(&redacted).len();
    if size <= MAX_AUDIT_ARGUMENT_BYTES {
        return redacted;
    }
    let cut = cut_strings(&redacted);
    if crate::canonical_json(&cut).len() <= MAX_AUDIT_ARGUMENT_BYTES {
        return cut;
    }
    serde_json::json!({
        "omitted": format!(
            "{size} bytes of arguments (canonical JSON), more than the {MAX_AUDIT_ARGUMENT_BYTES} the audit log keeps"
        )
    })
}

fn is_secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    SECRET_KEY_PARTS.iter().any(|part| key.contains(part))
}

fn redact(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, value)| {
                    let value = match is_secret_key(key) {
                        true => Value::String(REDACTED.to_owned()),
                        false => redact(value),
                    };
                    (key.clone(), value)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(redact).collect()),
        other => other.clone(),
    }
}

fn cut_strings(value: &Value) -> Value {
    match value {
        Value::String(s) if s.len() > CUT_STRING_BYTES => {
            let end = toolgate_core::text::floor_char_boundary(s, CUT_STRING_BYTES);
            Value::String(format!("{}… [{} bytes in all]", &s[..end], s.len()))
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, value)| (key.clone(), cut_strings(value)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(cut_strings).collect()),
        other => other.clone(),
    }
}

/// `time` as RFC 3339 in UTC with milliseconds (`2026-12-04T02:58:00.123Z`),
/// computed from the Unix time: no time zone database, no locale.
pub(crate) fn rfc3339_millis(time: std::time::SystemTime) -> String {
    let since = time
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = since.as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        since.subsec_millis()
    )
}

/// The proleptic Gregorian date of `days` after 1970-01-01 (Howard
/// Hinnant's `civil_from_days`, for days on or after the epoch).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn times_are_utc_with_milliseconds() {
        let at = |ms: u64| rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms));
        assert_eq!(at(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(at(1_709_208_000_999), "2024-02-29T12:00:00.999Z");
        assert_eq!(at(1_798_761_599_001), "2026-12-31T23:59:59.001Z");
        assert_eq!(at(4_107_542_400_000), "2100-03-01T00:00:00.000Z");
    }

    #[test]
    fn secret_looking_keys_are_redacted_at_any_depth() {
        let args = json!({
            "command": "deploy",
            "GITHUB_TOKEN": "ghp_x",
            "env": {"Api_Key": "k", "HOME": "/root", "db_password": 7},
            "headers": [{"Authorization": "Bearer x"}, {"Accept": "*/*"}],
            "session_cookie": {"a": 1},
            "private_key_path": "/k",
            "passwd": null,
            "client_secret": ["s"],
            "aws_credentials": "c",
            "apikey": "a",
        });
        assert_eq!(
            audit_arguments(&args),
            json!({
                "command": "deploy",
                "GITHUB_TOKEN": REDACTED,
                "env": {"Api_Key": REDACTED, "HOME": "/root", "db_password": REDACTED},
                "headers": [{"Authorization": REDACTED}, {"Accept": "*/*"}],
                "session_cookie": REDACTED,
                "private_key_path": REDACTED,
                "passwd": REDACTED,
                "client_secret": REDACTED,
                "aws_credentials": REDACTED,
                "apikey": REDACTED,
            })
        );
    }

    #[test]
    fn arguments_are_bounded() {
        let small = json!({"path": "a.txt", "content": "hi"});
        assert_eq!(audit_arguments(&small), small);
        // A big file body is cut; the path stays.
        let body = "é".repeat(10_000);
        let cut = audit_arguments(&json!({"path": "a.txt", "content": body}));
        assert_eq!(cut["path"], "a.txt");
        let content = cut["content"].as_str().unwrap_or_default();
        assert!(content.ends_with("… [20000 bytes in all]"), "{content}");
        assert!(crate::canonical_json(&cut).len() <= MAX_AUDIT_ARGUMENT_BYTES);
        // Many small values cannot be cut: a note with the size.
        let many: Vec<Value> = (0..5000).map(|i| json!(i)).collect();
        let many = json!({ "items": many });
        let size = crate::canonical_json(&many).len();
        assert_eq!(
            audit_arguments(&many),
            json!({"omitted": format!("{size} bytes of arguments (canonical JSON), more than the 8192 the audit log keeps")})
        );
    }
}

//! The rows of the store, as the rest of toolgate sees them.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolgate_policy::{ApprovalScope, ScopeKey};

/// Whose rows these are. Every row of the store carries one, and every
/// query names one: a tenant never sees nor spends another's rows.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Tenant(pub String);

impl Tenant {
    /// The tenant of local use.
    pub fn default_local() -> Tenant {
        Tenant("default".to_owned())
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Where the store lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// One SQLite file, created (with its directory) on first use.
    Sqlite(PathBuf),
    /// A PostgreSQL URL (`postgres://user:password@host:port/db`).
    Postgres(String),
}

/// The store's clock: unix milliseconds, the system's plus an offset a
/// test may move forward to see grants, refusals and requests expire.
#[derive(Debug, Clone, Default)]
pub struct Clock {
    offset_ms: Arc<AtomicI64>,
}

impl Clock {
    /// The system clock.
    pub fn system() -> Clock {
        Clock::default()
    }

    /// Now, in unix milliseconds.
    pub fn now_ms(&self) -> i64 {
        let system = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        system.saturating_add(self.offset_ms.load(Ordering::Relaxed))
    }

    /// Moves this clock (and every clone of it) forward.
    pub fn advance(&self, by: Duration) {
        self.offset_ms.fetch_add(duration_ms(by), Ordering::Relaxed);
    }
}

/// A duration in whole milliseconds, saturated.
pub(crate) fn duration_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// A question to file: what the gate knows about the call that asks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewRequest {
    /// The tool.
    pub tool: String,
    /// The validated arguments.
    pub arguments: Value,
    /// Why the rules ask.
    pub reason: String,
    /// Who calls.
    pub agent: String,
    /// The call that asked first.
    pub call_id: String,
    /// The tool's effect class, for the person.
    pub effect_class: Option<String>,
    /// What a plain approve grants.
    pub scope: ApprovalScope,
    /// The exact key: a pending request is reused by its digest.
    pub exact: ScopeKey,
    /// Every key whose grant or refusal covers this call.
    pub covering: Vec<ScopeKey>,
    /// For shell tools: the words a command-prefix approve covers by default.
    pub suggested_prefix: Vec<String>,
    /// How long the request waits for an answer.
    pub ttl: Duration,
}

/// Where a request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RequestState {
    /// Waiting for a person.
    Pending,
    /// Approved: a grant exists.
    Approved,
    /// Denied: a refusal exists.
    Denied,
    /// Nobody answered within the pending TTL.
    Expired,
}

impl RequestState {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            RequestState::Pending => "pending",
            RequestState::Approved => "approved",
            RequestState::Denied => "denied",
            RequestState::Expired => "expired",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<RequestState> {
        [
            RequestState::Pending,
            RequestState::Approved,
            RequestState::Denied,
            RequestState::Expired,
        ]
        .into_iter()
        .find(|state| state.as_str() == s)
    }
}

/// A filed request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Request {
    /// `apr_` and 10 base32 characters.
    pub id: String,
    /// The tool.
    pub tool: String,
    /// The validated arguments.
    pub arguments: Value,
    /// Why the rules ask.
    pub reason: String,
    /// Who asked.
    pub agent: String,
    /// The call that filed it.
    pub call_id: String,
    /// The tool's effect class.
    pub effect_class: Option<String>,
    /// What a plain approve grants.
    pub scope: ApprovalScope,
    /// The exact key's digest.
    pub exact_digest: String,
    /// Every key whose grant or refusal covers the call.
    pub covering: Vec<ScopeKey>,
    /// For shell tools: the default command prefix.
    pub suggested_prefix: Vec<String>,
    /// Where it stands (a pending request past its TTL reads `Expired`).
    pub state: RequestState,
    /// Filed at, unix ms.
    pub created_ms: i64,
    /// Expires at (while pending), unix ms.
    pub expires_ms: i64,
    /// Answered at, unix ms.
    pub decided_ms: Option<i64>,
    /// Who answered (`cli:<user>`, `elicitation`, `reviewer` …).
    pub decided_by: Option<String>,
    /// The grant (approved) or refusal (denied) the answer made.
    pub outcome_id: Option<String>,
    /// The person's reason (denied) or note.
    pub answer_reason: Option<String>,
}

/// The details kept as one JSON column.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RequestDetails {
    pub arguments: Value,
    pub reason: String,
    pub call_id: String,
    pub effect_class: Option<String>,
    pub covering: Vec<ScopeKey>,
    pub suggested_prefix: Vec<String>,
}

/// What `file_or_reuse` did.
#[derive(Debug, Clone, PartialEq)]
pub struct Filed {
    /// The pending request.
    pub request: Request,
    /// Whether it was there already (the same question, still pending).
    pub reused: bool,
}

/// Which requests to list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestFilter {
    /// Only pending (not expired) ones.
    pub pending_only: bool,
    /// Only those filed at or after this unix ms.
    pub since_ms: Option<i64>,
    /// At most this many, newest first (`None`: 1000).
    pub limit: Option<u32>,
}

/// A person's answer to a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Yes.
    Approve {
        /// How many calls the grant covers; `None`: unlimited (only when a
        /// person asked for it).
        uses: Option<u32>,
        /// How long the grant lives.
        ttl: Duration,
        /// How wide: the request's own scope unless the person widened it.
        scope: ApprovalScope,
        /// For `CommandPrefix`: the words; empty = the request's suggestion.
        prefix: Vec<String>,
    },
    /// No.
    Deny {
        /// The person's reason, told to the agent.
        reason: String,
        /// How long the refusal lasts.
        ttl: Duration,
        /// How wide.
        scope: ApprovalScope,
        /// For `CommandPrefix`: the words; empty = the request's suggestion.
        prefix: Vec<String>,
    },
}

/// What an answer made.
#[derive(Debug, Clone, PartialEq)]
pub enum Decided {
    /// A grant.
    Granted(Grant),
    /// A refusal.
    Refused(Refusal),
}

/// Permission for some calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Grant {
    /// `grt_…`.
    pub id: String,
    /// The request it answers.
    pub request_id: String,
    /// The tool.
    pub tool: String,
    /// The key it covers.
    pub key: ScopeKey,
    /// Uses granted; `None`: unlimited.
    pub uses: Option<u32>,
    /// Uses spent so far.
    pub spent: u32,
    /// Granted at, unix ms.
    pub created_ms: i64,
    /// Expires at, unix ms.
    pub expires_ms: i64,
    /// Who granted.
    pub by: String,
}

/// A person's no, lasting until it expires.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Refusal {
    /// `ref_…`.
    pub id: String,
    /// The request it answers.
    pub request_id: String,
    /// The tool.
    pub tool: String,
    /// The key it covers.
    pub key: ScopeKey,
    /// The person's reason.
    pub reason: String,
    /// Refused at, unix ms.
    pub created_ms: i64,
    /// Expires at, unix ms.
    pub expires_ms: i64,
    /// Who refused.
    pub by: String,
}

/// One spend of a grant: the call that used it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpendFor<'a> {
    /// The digests of every key covering the call.
    pub covering: &'a [String],
    /// The call.
    pub call_id: &'a str,
    /// The tool.
    pub tool: &'a str,
    /// The digest of the exact call.
    pub args_digest: &'a str,
}

/// A spent use, as recorded beside the grant in the same transaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spend {
    /// `spd_…`.
    pub id: String,
    /// The grant spent.
    pub grant_id: String,
    /// The call.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// The exact call's digest.
    pub args_digest: String,
    /// At, unix ms.
    pub at_ms: i64,
}

/// Alphabet of ids: lowercase base32 without the letters that read like
/// digits (no `l`, `o`), so that an id copied by hand survives.
const ID_ALPHABET: &[u8; 32] = b"abcdefghijkmnpqrstuvwxyz23456789";

/// A new id: `prefix` and 10 random base32 characters (50 bits).
pub(crate) fn new_id(prefix: &str) -> String {
    let mut bytes = [0u8; 10];
    // The OS's randomness; a failure falls back to the clock and the
    // address of a local, which is still unique enough for ids (they are
    // not secrets: tenant checks guard every row).
    if getrandom::fill(&mut bytes).is_err() {
        let seed = Clock::system().now_ms() as u64 ^ (&bytes as *const _ as u64);
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (seed >> ((i % 8) * 8)) as u8 ^ (i as u8).wrapping_mul(37);
        }
    }
    let mut id = String::with_capacity(prefix.len() + 10);
    id.push_str(prefix);
    for b in bytes {
        id.push(char::from(ID_ALPHABET[usize::from(b & 31)]));
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_prefixed_base32_without_look_alikes() {
        let ids: Vec<String> = (0..200).map(|_| new_id("apr_")).collect();
        for id in &ids {
            assert_eq!(id.len(), 14, "{id}");
            assert!(id.starts_with("apr_"));
            assert!(id[4..].bytes().all(|b| ID_ALPHABET.contains(&b)), "{id}");
        }
        let mut unique = ids.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), ids.len());
    }

    #[test]
    fn the_clock_moves_forward_for_every_clone() {
        let clock = Clock::system();
        let other = clock.clone();
        let before = other.now_ms();
        clock.advance(Duration::from_secs(3600));
        assert!(other.now_ms() >= before + 3_600_000);
    }
}

//! What can go wrong in the store, said so that the reader knows what to do.

/// A store error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The database could not be reached (PostgreSQL down, wrong URL, a
    /// SQLite file that cannot be created).
    #[error("the approval store is unreachable: {0}")]
    Unreachable(String),
    /// The database stayed busy or locked past the retry deadline. Never
    /// a denial: the caller reports it as an error and may try again.
    #[error(
        "the approval store stayed busy for {seconds} s (another process holds its lock): {message}"
    )]
    Busy {
        /// How long we retried.
        seconds: u64,
        /// The database's last word.
        message: String,
    },
    /// The database refused a statement for another reason.
    #[error("the approval store failed: {0}")]
    Database(String),
    /// The store's schema is newer than this toolgate, or a migration it
    /// applied earlier was changed since.
    #[error("the approval store's schema does not fit this toolgate: {0}")]
    Schema(String),
    /// No request, grant or refusal with that id in this tenant.
    #[error("no approval request `{0}` (see `toolgate approvals list`)")]
    NotFound(String),
    /// The request was answered already, or it expired.
    #[error("approval request `{id}` is {state}, not pending: it cannot be answered any more")]
    NotPending {
        /// The request.
        id: String,
        /// `approved`, `denied` or `expired`.
        state: String,
    },
    /// The answer asks for a scope that does not cover the request's call.
    #[error("{0}")]
    BadAnswer(String),
    /// No pin of that tool in this tenant: the gateway never saw it.
    #[error(
        "tool `{tool}` of MCP server `{server}` has no pinned definition (see `toolgate mcp-servers review`)"
    )]
    NoPin {
        /// The server.
        server: String,
        /// The tool.
        tool: String,
    },
    /// The tool's pinned definition is the one served: nothing to review.
    #[error(
        "tool `{tool}` of MCP server `{server}` has no change to review: the last definition seen of it is its pinned one"
    )]
    NoChange {
        /// The server.
        server: String,
        /// The tool.
        tool: String,
    },
    /// The server changed the tool again after the person saw the change:
    /// what they saw is not what would be approved.
    #[error(
        "tool `{tool}` of MCP server `{server}` changed again since the change you reviewed \
         (digest {seen}); it now serves digest {now}: review the new change with \
         `toolgate mcp-servers review`"
    )]
    ChangedAgain {
        /// The server.
        server: String,
        /// The tool.
        tool: String,
        /// The digest the person named.
        seen: String,
        /// The digest of the change now recorded.
        now: String,
    },
    /// A stored row does not decode (edited by hand?).
    #[error("a stored row of the approval store does not decode: {0}")]
    Corrupt(String),
}

impl StoreError {
    /// Whether trying the same operation again may succeed (busy or locked
    /// SQLite, a serialisation failure or deadlock in PostgreSQL).
    pub(crate) fn is_contention(&self) -> bool {
        matches!(self, StoreError::Busy { .. })
    }
}

/// SQLite's primary result codes for a busy or locked database; the
/// extended codes (`SQLITE_BUSY_SNAPSHOT` = 517 …) share the low byte.
const SQLITE_BUSY: i64 = 5;
const SQLITE_LOCKED: i64 = 6;
/// PostgreSQL's error classes for a server that cannot serve us: connection
/// exceptions, a database that is gone, refused credentials, a server
/// shutting down.
const PG_GONE: [&str; 4] = ["08", "3D", "28", "57P"];
/// PostgreSQL's serialization_failure and deadlock_detected.
const PG_RETRY: [&str; 2] = ["40001", "40P01"];

impl From<sqlx::Error> for StoreError {
    fn from(error: sqlx::Error) -> Self {
        match &error {
            sqlx::Error::Database(db) => {
                let code = db.code().map(|c| c.into_owned()).unwrap_or_default();
                let sqlite_busy = code
                    .parse::<i64>()
                    .is_ok_and(|n| matches!(n & 0xff, SQLITE_BUSY | SQLITE_LOCKED));
                if PG_GONE.iter().any(|class| code.starts_with(class)) {
                    StoreError::Unreachable(format!("{} (code {code})", db.message()))
                } else if sqlite_busy || PG_RETRY.contains(&code.as_str()) {
                    StoreError::Busy {
                        seconds: 0,
                        message: db.message().to_owned(),
                    }
                } else {
                    StoreError::Database(format!("{} (code {code})", db.message()))
                }
            }
            sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed
            | sqlx::Error::Protocol(_) => StoreError::Unreachable(error.to_string()),
            _ => StoreError::Database(error.to_string()),
        }
    }
}

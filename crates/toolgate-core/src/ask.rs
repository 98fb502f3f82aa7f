//! Asking the person behind a client, in-line.
//!
//! A surface that can put a question to the user while a call waits (MCP
//! elicitation) puts an [`Asker`] on the call's context. The approval gate
//! asks it before it waits; `None` (the client cannot ask, the person
//! dismissed the question, the client failed) means "no answer here", and
//! the call falls back to waiting for another channel. An answer is the
//! same grant or refusal any other channel records: the asker never runs
//! anything itself.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What the person is asked about: one pending approval request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct AskQuestion {
    /// The approval request's id (`apr_…`).
    pub request_id: String,
    /// The tool.
    pub tool: String,
    /// The validated arguments.
    pub arguments: Value,
    /// Why the rules ask.
    pub reason: String,
    /// Who calls.
    pub agent: String,
    /// What a plain approve grants by default: uses (`None`: unlimited).
    pub default_uses: Option<u32>,
    /// What a plain approve grants by default: how long the grant lives.
    pub default_ttl: Duration,
}

impl AskQuestion {
    /// A question about request `request_id` on a call of `tool`.
    pub fn new(
        request_id: impl Into<String>,
        tool: impl Into<String>,
        arguments: Value,
        reason: impl Into<String>,
        agent: impl Into<String>,
    ) -> Self {
        AskQuestion {
            request_id: request_id.into(),
            tool: tool.into(),
            arguments,
            reason: reason.into(),
            agent: agent.into(),
            default_uses: Some(1),
            default_ttl: Duration::from_secs(8 * 3600),
        }
    }

    /// Sets the defaults a plain approve grants.
    pub fn with_defaults(mut self, uses: Option<u32>, ttl: Duration) -> Self {
        self.default_uses = uses;
        self.default_ttl = ttl;
        self
    }
}

/// The person's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "answer")]
#[non_exhaustive]
pub enum AskAnswer {
    /// Yes: a grant of `uses` uses for `ttl` (`None`: the question's defaults).
    Approve {
        /// How many calls the grant covers.
        uses: Option<u32>,
        /// How long it lives.
        ttl: Option<Duration>,
    },
    /// No: a refusal with the person's reason.
    Deny {
        /// Why, for the agent.
        reason: String,
    },
}

type AskFuture = Pin<Box<dyn Future<Output = Option<AskAnswer>> + Send>>;
type AskFn = dyn Fn(AskQuestion) -> AskFuture + Send + Sync;

/// Puts an [`AskQuestion`] to the person; `None` is no answer.
#[derive(Clone)]
pub struct Asker(Arc<AskFn>);

impl Asker {
    /// An asker that calls `ask`.
    pub fn new<F, Fut>(ask: F) -> Self
    where
        F: Fn(AskQuestion) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Option<AskAnswer>> + Send + 'static,
    {
        Asker(Arc::new(move |question| Box::pin(ask(question))))
    }

    /// Asks; `None` when there is no answer.
    pub async fn ask(&self, question: AskQuestion) -> Option<AskAnswer> {
        (self.0)(question).await
    }
}

impl std::fmt::Debug for Asker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Asker")
    }
}

/// Askers are not part of a context's identity.
impl PartialEq for Asker {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Asker {}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_asker_hands_the_question_over_and_the_answer_back() {
        let asker = Asker::new(|q: AskQuestion| async move {
            Some(AskAnswer::Deny {
                reason: format!("not {}", q.tool),
            })
        });
        let answer = asker
            .ask(AskQuestion::new("apr_1", "bash", Value::Null, "ask", "me"))
            .await;
        assert_eq!(
            answer,
            Some(AskAnswer::Deny {
                reason: "not bash".to_owned()
            })
        );
    }
}

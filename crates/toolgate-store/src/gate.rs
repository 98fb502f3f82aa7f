//! The approval gate: [`StoreApprovals`] answers the Executor's `ask`
//! decisions from the store, in the same order for every tool:
//!
//! 1. a usable grant covering the call is spent and the call runs;
//! 2. else a live refusal covering it refuses at once, with the person's
//!    reason (an agent told no cannot re-ask in a loop);
//! 3. else the pending request for the same question is reused;
//! 4. else a new request is filed.
//!
//! Then the call waits up to `wait` for an answer from any channel (another
//! terminal's `toolgate approvals approve`, the person in-line through the
//! call's asker (MCP elicitation), the external reviewer), saying "waiting for approval <id>" at least every 10 s. A
//! store error is [`ApprovalOutcome::Unavailable`]: the call does not run.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use toolgate_core::{AskAnswer, AskQuestion};
use toolgate_policy::{ApprovalChannel, ApprovalOutcome, ApprovalRequest};

use crate::error::StoreError;
use crate::model::{Answer, Filed, NewRequest, Refusal, RequestState, SpendFor, Tenant};
use crate::reviewer::{REVIEWER_TIMEOUT, Review, review};
use crate::store::Store;

/// How often a waiting call looks at its request.
const POLL: Duration = Duration::from_millis(200);
/// The longest silence while a call waits (clients time out after 60 s).
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// The defaults of `[approvals]`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ApprovalSettings {
    /// How long a call waits for an answer before it returns "pending".
    pub wait: Duration,
    /// How long a request stays pending.
    pub pending_ttl: Duration,
    /// How long a grant lives unless the person says otherwise.
    pub grant_ttl: Duration,
    /// How long a refusal lasts unless the person says otherwise.
    pub refusal_ttl: Duration,
    /// Uses of a grant unless the person says otherwise (`None`: unlimited).
    pub uses: Option<u32>,
    /// The external reviewer's command, if any.
    pub reviewer: Option<Vec<String>>,
    /// How long the reviewer may take before it counts as abstaining.
    pub reviewer_timeout: Duration,
}

impl Default for ApprovalSettings {
    fn default() -> Self {
        ApprovalSettings {
            wait: Duration::from_secs(90),
            pending_ttl: Duration::from_secs(3600),
            grant_ttl: Duration::from_secs(8 * 3600),
            refusal_ttl: Duration::from_secs(3600),
            uses: Some(1),
            reviewer: None,
            reviewer_timeout: REVIEWER_TIMEOUT,
        }
    }
}

impl ApprovalSettings {
    /// Sets how long a call waits.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }
    /// Sets the pending TTL.
    pub fn pending_ttl(mut self, ttl: Duration) -> Self {
        self.pending_ttl = ttl;
        self
    }
    /// Sets the default grant TTL.
    pub fn grant_ttl(mut self, ttl: Duration) -> Self {
        self.grant_ttl = ttl;
        self
    }
    /// Sets the default refusal TTL.
    pub fn refusal_ttl(mut self, ttl: Duration) -> Self {
        self.refusal_ttl = ttl;
        self
    }
    /// Sets the default uses (`None`: unlimited).
    pub fn uses(mut self, uses: Option<u32>) -> Self {
        self.uses = uses;
        self
    }
    /// Sets the external reviewer.
    pub fn reviewer(mut self, command: Option<Vec<String>>) -> Self {
        self.reviewer = command;
        self
    }
    /// Sets how long the reviewer may take.
    pub fn reviewer_timeout(mut self, timeout: Duration) -> Self {
        self.reviewer_timeout = timeout;
        self
    }
}

/// The gate over a store, for one tenant.
pub struct StoreApprovals {
    store: Arc<dyn Store>,
    tenant: Tenant,
    settings: ApprovalSettings,
}

impl StoreApprovals {
    /// A gate over `store` for `tenant`.
    pub fn new(store: Arc<dyn Store>, tenant: Tenant, settings: ApprovalSettings) -> Self {
        StoreApprovals {
            store,
            tenant,
            settings,
        }
    }

    fn covering(request: &ApprovalRequest) -> Vec<String> {
        let mut digests: Vec<String> = request.covering.iter().map(|k| k.digest.clone()).collect();
        if !digests.contains(&request.exact.digest) {
            digests.push(request.exact.digest.clone());
        }
        digests
    }

    async fn spend(
        &self,
        request: &ApprovalRequest,
        covering: &[String],
    ) -> Result<Option<String>, StoreError> {
        let spend = SpendFor {
            covering,
            call_id: &request.call_id,
            tool: &request.tool,
            args_digest: &request.exact.digest,
        };
        self.store.spend(&self.tenant, &spend).await
    }

    async fn file(&self, request: &ApprovalRequest) -> Result<Filed, StoreError> {
        let new = NewRequest {
            tool: request.tool.clone(),
            arguments: request.arguments.clone(),
            reason: request.reason.clone(),
            agent: request.caller.clone(),
            call_id: request.call_id.clone(),
            effect_class: Some(request.effect_class.as_str().to_owned()),
            scope: request.scope,
            exact: request.exact.clone(),
            covering: request.covering.clone(),
            suggested_prefix: request.suggested_prefix.clone(),
            ttl: self.settings.pending_ttl,
        };
        self.store.file_or_reuse(&self.tenant, &new).await
    }

    fn approve(
        &self,
        request: &ApprovalRequest,
        uses: Option<u32>,
        ttl: Option<Duration>,
    ) -> Answer {
        Answer::Approve {
            uses: uses.or(self.settings.uses),
            ttl: ttl.unwrap_or(self.settings.grant_ttl),
            scope: request.scope,
            prefix: Vec::new(),
        }
    }

    fn deny(&self, request: &ApprovalRequest, reason: String) -> Answer {
        Answer::Deny {
            reason,
            ttl: self.settings.refusal_ttl,
            scope: request.scope,
            prefix: Vec::new(),
        }
    }

    /// Records an answer from a channel; one that lost to another answer
    /// (already decided, expired) is dropped: the poll sees the winner.
    async fn answer(&self, id: &str, answer: &Answer, by: &str) -> Result<(), StoreError> {
        match self.store.decide(&self.tenant, id, answer, by).await {
            Ok(_) | Err(StoreError::NotPending { .. }) => Ok(()),
            Err(StoreError::BadAnswer(m)) => {
                tracing::warn!(request = id, by, "an answer did not fit the request: {m}");
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    async fn gate(&self, request: &ApprovalRequest) -> Result<ApprovalOutcome, StoreError> {
        let covering = Self::covering(request);
        if let Some(outcome) = self.granted_or_refused(request, &covering).await? {
            return Ok(outcome);
        }
        let filed = self.file(request).await?;
        let reviewer = match (&self.settings.reviewer, filed.reused) {
            // A reused request was shown to the reviewer when it was filed.
            (Some(command), false) => Some(command.clone()),
            _ => None,
        };
        self.wait(request, &covering, filed.request.id, reviewer)
            .await
    }

    /// Waits for an answer to request `id`, from the store (any process)
    /// and from the reviewer, until `wait` has passed.
    async fn wait(
        &self,
        request: &ApprovalRequest,
        covering: &[String],
        mut id: String,
        reviewer: Option<Vec<String>>,
    ) -> Result<ApprovalOutcome, StoreError> {
        let deadline = Instant::now() + self.settings.wait;
        let mut last_progress: Option<Instant> = None;
        let timeout = self.settings.reviewer_timeout;
        let mut reviewing = match reviewer {
            Some(command) => self
                .store
                .request(&self.tenant, &id)
                .await?
                .map(|filed| Box::pin(async move { review(&command, &filed, timeout).await })),
            None => None,
        };
        let mut asking = request.asker.clone().map(|asker| {
            let question = AskQuestion::new(
                id.clone(),
                request.tool.clone(),
                request.arguments.clone(),
                request.reason.clone(),
                request.caller.clone(),
            )
            .with_defaults(self.settings.uses, self.settings.grant_ttl);
            Box::pin(async move { asker.ask(question).await })
        });
        loop {
            let shown = self.store.request(&self.tenant, &id).await?;
            match shown.as_ref().map(|r| r.state) {
                Some(RequestState::Approved) => {
                    if let Some(grant) = self.spend(request, covering).await? {
                        return Ok(ApprovalOutcome::Approved { grant: Some(grant) });
                    }
                    // Another caller of the same question took the use:
                    // this call asks again.
                    if let Some(outcome) = self.granted_or_refused(request, covering).await? {
                        return Ok(outcome);
                    }
                    id = self.file(request).await?.request.id;
                }
                Some(RequestState::Denied) => {
                    if let Some(refusal) = self.store.live_refusal(&self.tenant, covering).await? {
                        return Ok(refused(refusal));
                    }
                    let reason = shown
                        .and_then(|r| r.answer_reason)
                        .unwrap_or_else(|| "denied".to_owned());
                    return Ok(ApprovalOutcome::Refused {
                        reason,
                        id: Some(id),
                    });
                }
                Some(RequestState::Expired) | None => {
                    if let Some(outcome) = self.granted_or_refused(request, covering).await? {
                        return Ok(outcome);
                    }
                    id = self.file(request).await?.request.id;
                }
                Some(RequestState::Pending) => {}
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(ApprovalOutcome::Pending { id });
            }
            if last_progress.is_none_or(|at| now.duration_since(at) >= PROGRESS_EVERY) {
                request
                    .progress
                    .report(&format!("waiting for approval {id}"));
                last_progress = Some(now);
            }
            let pause = POLL.min(deadline - now);
            // The reviewer and the person in-line answer while the store is
            // polled, so that an approve from another terminal still wins.
            let event = tokio::select! {
                review = next_of(&mut reviewing) => Event::Review(review),
                answer = next_of(&mut asking) => Event::Asked(answer),
                _ = tokio::time::sleep(pause) => Event::Tick,
            };
            match event {
                Event::Tick => {}
                Event::Review(review) => {
                    reviewing = None;
                    match review {
                        Review::Approve { uses, ttl } => {
                            self.answer(&id, &self.approve(request, uses, ttl), "reviewer")
                                .await?
                        }
                        Review::Deny { reason } => {
                            self.answer(&id, &self.deny(request, reason), "reviewer")
                                .await?
                        }
                        Review::Abstain(why) => {
                            tracing::info!(request = %id, "the reviewer abstained: {why}")
                        }
                    }
                }
                Event::Asked(answer) => {
                    asking = None;
                    match answer {
                        Some(AskAnswer::Approve { uses, ttl }) => {
                            self.answer(&id, &self.approve(request, uses, ttl), "elicitation")
                                .await?
                        }
                        Some(AskAnswer::Deny { reason }) => {
                            self.answer(&id, &self.deny(request, reason), "elicitation")
                                .await?
                        }
                        // No answer in-line (dismissed, unsupported, failed):
                        // the call goes on waiting for another channel.
                        Some(_) | None => {}
                    }
                }
            }
        }
    }

    /// Steps 1 and 2 of the gate: a usable grant is spent, else a live
    /// refusal refuses. Also run again before a question is filed anew
    /// (its request expired, or another caller took its grant's use).
    async fn granted_or_refused(
        &self,
        request: &ApprovalRequest,
        covering: &[String],
    ) -> Result<Option<ApprovalOutcome>, StoreError> {
        if let Some(grant) = self.spend(request, covering).await? {
            return Ok(Some(ApprovalOutcome::Approved { grant: Some(grant) }));
        }
        if let Some(refusal) = self.store.live_refusal(&self.tenant, covering).await? {
            return Ok(Some(refused(refusal)));
        }
        Ok(None)
    }
}

/// What woke a waiting call.
enum Event {
    Tick,
    Review(Review),
    Asked(Option<AskAnswer>),
}

/// The output of the future in `slot`; never ready when the slot is empty.
async fn next_of<F: Future + Unpin>(slot: &mut Option<F>) -> F::Output {
    match slot {
        Some(future) => future.await,
        None => std::future::pending().await,
    }
}

/// The outcome of a live refusal: the person's reason, who and which.
fn refused(refusal: Refusal) -> ApprovalOutcome {
    ApprovalOutcome::Refused {
        reason: format!(
            "{} (refused by {}, refusal {})",
            refusal.reason, refusal.by, refusal.id
        ),
        id: Some(refusal.id),
    }
}

#[async_trait]
impl ApprovalChannel for StoreApprovals {
    async fn request(&self, request: &ApprovalRequest) -> ApprovalOutcome {
        match self.gate(request).await {
            Ok(outcome) => outcome,
            // Never an allow: the call does not run and says why.
            Err(error) => ApprovalOutcome::Unavailable {
                reason: error.to_string(),
            },
        }
    }
}

//! Asking the person in-line when a call needs their yes: MCP elicitation.
//!
//! A client that declares elicitation (form mode) gets an [`Asker`] on each
//! call: the approval gate puts its question to the person through it
//! (approve once / approve with uses and a lifetime / deny with a reason),
//! and the answer becomes the same grant or refusal as an answer from
//! `toolgate approvals`. Up to protocol 2025-11-25 the question is an
//! `elicitation/create` request to the client while the call waits; on
//! 2026-07-28, which forbids server-to-client requests, the call ends with
//! an input-required result carrying the question, and the client's retry
//! brings the answer (with the request id as the request state).
//!
//! The answer only ever decides the request it was asked about: a retry
//! whose state names another request id is not an answer (a client cannot
//! carry one person's yes over to a different call). Dismissing the
//! question, a client error or an answer that does not parse is no answer:
//! the call waits for the other channels, as without elicitation.

use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{
    CallToolRequestParams, ElicitRequestParams, ElicitResult, ElicitationAction, InputRequest,
    InputRequests, InputRequiredResult,
};
use rmcp::service::RequestContext;
use rmcp::{Peer, RoleServer};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use toolgate_core::{AskAnswer, AskQuestion, Asker};

/// The key of the question among a 2026-07-28 call's input requests.
const INPUT_KEY: &str = "approval";

/// How long the person has to answer an `elicitation/create` before the
/// call falls back to waiting; the gate's own wait still bounds the call.
const ANSWER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// Whether the client can be asked in forms: its capabilities from
/// initialize, or on 2026-07-28 from the request's own metadata. A client
/// that declares elicitation without naming a mode means forms.
pub(crate) fn offers_forms(context: &RequestContext<RoleServer>) -> bool {
    context
        .client_capabilities()
        .and_then(|caps| caps.elicitation)
        .is_some_and(|e| e.form.is_some() || e.url.is_none())
}

/// The asker of a call on a connection up to 2025-11-25: an
/// `elicitation/create` request to `peer`.
pub(crate) fn request_asker(peer: Peer<RoleServer>, client: String) -> Asker {
    Asker::new(move |question: AskQuestion| {
        let peer = peer.clone();
        let client = client.clone();
        async move {
            let params = params(&question)?;
            match peer
                .create_elicitation_with_timeout(params, Some(ANSWER_TIMEOUT))
                .await
            {
                Ok(result) => answer(&result, &client),
                Err(e) => {
                    eprintln!(
                        "toolgate: {client} did not answer the question about approval {}: {e}",
                        question.request_id
                    );
                    None
                }
            }
        }
    })
}

/// Where a 2026-07-28 call's question goes, once the gate asks it.
type Asked = Arc<Mutex<Option<oneshot::Sender<AskQuestion>>>>;

/// The asker of a call on a 2026-07-28 connection: the answer the client's
/// retry brought for this very request, else the question goes to `asked`
/// (the call then ends with an input-required result) and no answer comes.
pub(crate) fn input_asker(
    request: &CallToolRequestParams,
    client: String,
) -> (Asker, oneshot::Receiver<AskQuestion>) {
    let answered = request
        .input_responses
        .as_ref()
        .and_then(|r| r.get(INPUT_KEY))
        .and_then(|v| serde_json::from_value::<ElicitResult>(v.clone()).ok());
    let state = request.request_state.clone();
    let (sender, receiver) = oneshot::channel();
    let slot: Asked = Arc::new(Mutex::new(Some(sender)));
    let asker = Asker::new(move |question: AskQuestion| {
        let answer = match (&answered, &state) {
            // Only an answer to this request decides it.
            (Some(result), Some(id)) if *id == question.request_id => answer(result, &client),
            _ => None,
        };
        let slot = slot.clone();
        async move {
            if answer.is_some() {
                return answer;
            }
            let sender = slot.lock().unwrap_or_else(PoisonError::into_inner).take();
            if let Some(sender) = sender {
                let _ = sender.send(question);
                // The call is ended (and this future dropped) by the server,
                // which answers input-required instead.
                std::future::pending::<()>().await;
            }
            None
        }
    });
    (asker, receiver)
}

/// The input-required result that puts `question` to a 2026-07-28 client.
pub(crate) fn input_required(question: &AskQuestion) -> Option<InputRequiredResult> {
    let params = params(question)?;
    let request: rmcp::model::ElicitRequest = serde_json::from_value(json!({
        "method": "elicitation/create",
        "params": params,
    }))
    .ok()?;
    let mut ask = InputRequests::new();
    ask.insert(INPUT_KEY.into(), InputRequest::Elicitation(request));
    let mut result = InputRequiredResult::from_input_requests(ask);
    result.request_state = Some(question.request_id.clone());
    Some(result)
}

/// The form: what is asked and the choices.
fn params(question: &AskQuestion) -> Option<ElicitRequestParams> {
    let uses = match question.default_uses {
        Some(1) => "one call".to_owned(),
        Some(n) => format!("{n} calls"),
        None => "any number of calls".to_owned(),
    };
    let args = serde_json::to_string(&question.arguments).unwrap_or_default();
    let shown: String = args.chars().take(2000).collect();
    let cut = if shown.len() < args.len() { " …" } else { "" };
    let message = format!(
        "{agent} wants to call `{tool}` with {shown}{cut}\n\nWhy a person is asked: {reason}\n\
         Approval request {id}. A plain approve covers {uses} for {ttl} min.",
        agent = question.agent,
        tool = question.tool,
        reason = question.reason,
        id = question.request_id,
        ttl = question.default_ttl.as_secs().div_ceil(60),
    );
    let schema = json!({
        "type": "object",
        "properties": {
            "decision": {
                "type": "string",
                "title": "Decision",
                "oneOf": [
                    {"const": "approve", "title": "Approve once"},
                    {"const": "approve-with-limits", "title": "Approve with the uses and lifetime below"},
                    {"const": "deny", "title": "Deny"},
                ],
            },
            "uses": {
                "type": "integer",
                "title": "Uses",
                "description": "How many calls the approval covers (approve with limits)",
                "minimum": 1,
            },
            "ttl_minutes": {
                "type": "integer",
                "title": "Lifetime in minutes",
                "description": "How long the approval lasts (approve with limits)",
                "minimum": 1,
            },
            "reason": {
                "type": "string",
                "title": "Reason",
                "description": "Why not (deny); the agent is told",
            },
        },
        "required": ["decision"],
    });
    serde_json::from_value(json!({
        "mode": "form",
        "message": message,
        "requestedSchema": schema,
    }))
    .map_err(|e| eprintln!("toolgate: cannot build the approval question: {e}"))
    .ok()
}

/// The person's answer as the gate takes it.
fn answer(result: &ElicitResult, client: &str) -> Option<AskAnswer> {
    match result.action {
        ElicitationAction::Accept => {}
        ElicitationAction::Decline => {
            return Some(AskAnswer::Deny {
                reason: format!("declined in {client}"),
            });
        }
        // Dismissed (or an action this version does not know): no answer,
        // the call waits for another channel.
        _ => return None,
    }
    let content = result.content.as_ref()?;
    let count = |key: &str| -> Result<Option<u64>, ()> {
        match content.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v.as_u64().filter(|n| *n > 0).map(Some).ok_or(()),
        }
    };
    match content.get("decision").and_then(Value::as_str) {
        Some("approve") => Some(AskAnswer::Approve {
            uses: Some(1),
            ttl: None,
        }),
        Some("approve-with-limits") => {
            let uses = count("uses").ok()?;
            let minutes = count("ttl_minutes").ok()?;
            Some(AskAnswer::Approve {
                uses: uses.map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
                ttl: minutes.map(|m| std::time::Duration::from_secs(m.saturating_mul(60))),
            })
        }
        Some("deny") => {
            let reason = content
                .get("reason")
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|r| !r.is_empty())
                .map_or_else(|| format!("denied in {client}"), str::to_owned);
            Some(AskAnswer::Deny { reason })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn accepted(content: Value) -> ElicitResult {
        ElicitResult::new(ElicitationAction::Accept).with_content(content)
    }

    #[test]
    fn answers_become_grants_refusals_or_nothing() {
        let cases: Vec<(ElicitResult, Option<AskAnswer>)> = vec![
            (
                accepted(json!({"decision": "approve"})),
                Some(AskAnswer::Approve {
                    uses: Some(1),
                    ttl: None,
                }),
            ),
            (
                accepted(json!({"decision": "approve-with-limits", "uses": 3, "ttl_minutes": 10})),
                Some(AskAnswer::Approve {
                    uses: Some(3),
                    ttl: Some(std::time::Duration::from_secs(600)),
                }),
            ),
            (
                accepted(json!({"decision": "approve-with-limits"})),
                Some(AskAnswer::Approve {
                    uses: None,
                    ttl: None,
                }),
            ),
            (
                accepted(json!({"decision": "approve-with-limits", "uses": -1})),
                None,
            ),
            (
                accepted(json!({"decision": "approve-with-limits", "uses": "lots"})),
                None,
            ),
            (
                accepted(json!({"decision": "deny", "reason": " not on main "})),
                Some(AskAnswer::Deny {
                    reason: "not on main".to_owned(),
                }),
            ),
            (
                accepted(json!({"decision": "deny"})),
                Some(AskAnswer::Deny {
                    reason: "denied in claude".to_owned(),
                }),
            ),
            (accepted(json!({"decision": "maybe"})), None),
            (accepted(json!({})), None),
            (
                ElicitResult::new(ElicitationAction::Decline),
                Some(AskAnswer::Deny {
                    reason: "declined in claude".to_owned(),
                }),
            ),
            (ElicitResult::new(ElicitationAction::Cancel), None),
        ];
        for (result, expected) in cases {
            assert_eq!(answer(&result, "claude"), expected, "{result:?}");
        }
    }

    /// Attack: a 2026-07-28 retry that carries a yes given for another
    /// request (or none) must not decide this one; the person is asked about
    /// this request instead.
    #[tokio::test]
    async fn a_retry_answer_decides_only_the_request_it_names() {
        let yes = json!({"action": "accept", "content": {"decision": "approve"}});
        let question = || AskQuestion::new("apr_b", "bash", json!({}), "asks", "claude");
        let retry = |state: Option<&str>| -> CallToolRequestParams {
            let mut params = json!({"name": "bash", "inputResponses": {INPUT_KEY: yes}});
            if let Some(state) = state {
                params["requestState"] = json!(state);
            }
            serde_json::from_value(params).unwrap()
        };
        for state in [Some("apr_a"), None] {
            let (asker, asked) = input_asker(&retry(state), "claude".to_owned());
            tokio::select! {
                answer = asker.ask(question()) => panic!("{state:?} decided apr_b: {answer:?}"),
                asked = asked => assert_eq!(asked.unwrap().request_id, "apr_b"),
            }
        }
        let (asker, _asked) = input_asker(&retry(Some("apr_b")), "claude".to_owned());
        assert_eq!(
            asker.ask(question()).await,
            Some(AskAnswer::Approve {
                uses: Some(1),
                ttl: None
            })
        );
    }

    #[test]
    fn the_question_is_a_form_naming_the_request() {
        let question = AskQuestion::new(
            "apr_x",
            "bash",
            json!({"command": "rm -rf build"}),
            "bash asks",
            "claude",
        );
        let params = serde_json::to_value(params(&question).unwrap()).unwrap();
        assert_eq!(params["mode"], "form");
        let message = params["message"].as_str().unwrap();
        assert!(
            message.contains("apr_x") && message.contains("rm -rf build"),
            "{message}"
        );
        assert_eq!(params["requestedSchema"]["required"], json!(["decision"]));
        let input = input_required(&question).unwrap();
        assert_eq!(input.request_state.as_deref(), Some("apr_x"));
    }
}

//! An external server's tool as a toolgate tool: its name in toolgate, a
//! spec in which nothing the server declares decides policy, and calls
//! forwarded with timeout, progress and cancellation.

use std::sync::Arc;

use async_trait::async_trait;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotification, CancelledNotificationParam,
    ClientNotification, ClientRequest, ContentBlock, RequestId, ServerResult,
};
use rmcp::service::PeerRequestOptions;
use rmcp::{Peer, RoleClient};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use toolgate_core::{
    CallContext, Content, EffectClass, Idempotency, Tool, ToolError, ToolHandler, ToolOutput,
    ToolSpec,
};

use toolgate_policy::access::MCP_GROUP;

use super::upstream::Upstream;

/// Longest tool name (MCP clients and model APIs reject longer ones).
const MAX_NAME: usize = 64;

/// Longest description kept: a server's description is model input that a
/// server controls, and a long one is the usual carrier of injected
/// instructions.
pub const MAX_DESCRIPTION: usize = 1024;

/// `mcp__<server>__<tool>`, at most 64 characters of `[A-Za-z0-9_-]`. A
/// name that does not fit (too long, or with other characters, which
/// become `_`) ends in `_` and 8 hex digits of a SHA-256 of the server and
/// the original name, so it is deterministic and two different names never
/// meet by shortening.
pub fn toolgate_name(server: &str, tool: &str) -> String {
    let cleaned: String = tool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let full = format!("mcp__{server}__{cleaned}");
    if cleaned == tool && full.len() <= MAX_NAME && !tool.is_empty() {
        return full;
    }
    let digest = Sha256::digest(format!("{server}\0{tool}").as_bytes());
    let suffix = toolgate_core::text::hex(&digest[..4]);
    // ASCII only by now, so any byte index is a char boundary.
    let keep = MAX_NAME - suffix.len() - 1;
    let head = &full[..full.len().min(keep)];
    format!("{head}_{suffix}")
}

/// Cuts a server's description to [`MAX_DESCRIPTION`] bytes at a character
/// boundary, saying so.
fn bounded_description(description: &str) -> String {
    if description.len() <= MAX_DESCRIPTION {
        return description.to_owned();
    }
    let marker = " [description cut at 1 KB by toolgate]";
    let end = toolgate_core::text::floor_char_boundary(description, MAX_DESCRIPTION - marker.len());
    format!("{}{marker}", &description[..end])
}

/// The operator's word on one tool's effect class, else mutate-irreversible
/// and at-most-once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Class {
    /// The class.
    pub effect_class: EffectClass,
    /// The repeat contract (none for read).
    pub idempotency: Option<Idempotency>,
}

impl Default for Class {
    fn default() -> Self {
        Class {
            effect_class: EffectClass::MutateIrreversible,
            idempotency: Some(Idempotency::AtMostOnce),
        }
    }
}

/// The spec of `tool` of `server` under the name `name`.
pub fn spec(server: &str, name: &str, tool: &rmcp::model::Tool, class: Class) -> ToolSpec {
    let description = tool.description.as_deref().unwrap_or_default();
    let mut spec = ToolSpec::new(name, bounded_description(description), class.effect_class)
        .group(MCP_GROUP)
        .parallel_safe(false)
        .passthrough_schema(Value::Object((*tool.input_schema).clone()))
        .mcp(server);
    spec.idempotency = class.idempotency;
    if let Some(schema) = &tool.output_schema {
        spec = spec.output_schema(Value::Object((**schema).clone()));
    }
    let mut declared = serde_json::Map::new();
    declared.insert("name".to_owned(), json!(tool.name));
    if let Some(title) = &tool.title {
        let title: String = title.chars().take(200).collect();
        declared.insert("title".to_owned(), json!(title));
    }
    if let Some(annotations) = &tool.annotations
        && let Ok(value) = serde_json::to_value(annotations)
    {
        declared.insert("annotations".to_owned(), value);
    }
    spec.declared(Value::Object(declared))
}

/// One external tool.
pub struct McpTool {
    spec: ToolSpec,
    /// The server's own name for it.
    remote_name: String,
    upstream: Arc<Upstream>,
}

impl McpTool {
    pub(crate) fn new(spec: ToolSpec, remote_name: String, upstream: Arc<Upstream>) -> Self {
        McpTool {
            spec,
            remote_name,
            upstream,
        }
    }
}

impl Tool for McpTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
}

#[async_trait]
impl ToolHandler for McpTool {
    async fn call(&self, args: Value, ctx: &CallContext) -> Result<ToolOutput, ToolError> {
        let peer = self.upstream.peer().map_err(ToolError::Failed)?;
        let arguments = match args {
            Value::Object(map) => map,
            Value::Null => serde_json::Map::new(),
            other => {
                return Err(ToolError::InvalidArguments(format!(
                    "the arguments must be a JSON object, not {other}"
                )));
            }
        };
        let params = CallToolRequestParams::new(self.remote_name.clone()).with_arguments(arguments);
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let timeout = self.upstream.config.call_timeout();
        let handle = peer
            .send_request_with_option(request, PeerRequestOptions::with_timeout(timeout))
            .await
            .map_err(|e| self.failed(&e))?;
        let token = handle.progress_token.clone();
        if ctx.progress.is_listening() {
            self.upstream
                .routes
                .insert(token.clone(), ctx.progress.clone());
        }
        let mut guard = CancelOnDrop {
            peer: Some(peer),
            id: handle.id.clone(),
        };
        let response = handle.await_response().await;
        guard.peer = None;
        self.upstream.routes.remove(&token);
        match response {
            Ok(ServerResult::CallToolResult(result)) => Ok(output(result)),
            Ok(other) => Err(ToolError::Failed(format!(
                "MCP server `{}` answered tools/call with something else than a tool result: {}",
                self.upstream.name(),
                serde_json::to_string(&other)
                    .unwrap_or_default()
                    .chars()
                    .take(200)
                    .collect::<String>()
            ))),
            Err(e) => Err(self.failed(&e)),
        }
    }
}

impl McpTool {
    fn failed(&self, error: &rmcp::ServiceError) -> ToolError {
        let server = self.upstream.name();
        ToolError::Failed(match error {
            rmcp::ServiceError::Timeout { timeout } => format!(
                "MCP server `{server}` did not answer `{}` within {} s (call_timeout); the call \
                 was cancelled there",
                self.remote_name,
                timeout.as_secs()
            ),
            rmcp::ServiceError::McpError(e) => {
                format!("MCP server `{server}` refused the call: {}", e.message)
            }
            rmcp::ServiceError::TransportClosed | rmcp::ServiceError::TransportSend(_) => format!(
                "MCP server `{server}` went away during the call; toolgate is reconnecting: try \
                 again shortly"
            ),
            other => format!("MCP server `{server}`: {other}"),
        })
    }
}

/// Tells the server a call was abandoned (the client cancelled, the agent
/// gave up): without it the server would go on working for nobody.
struct CancelOnDrop {
    peer: Option<Peer<RoleClient>>,
    id: RequestId,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(peer) = self.peer.take() {
            let id = self.id.clone();
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move {
                    let notification = CancelledNotification::new(CancelledNotificationParam::new(
                        Some(id),
                        Some("the toolgate call was cancelled".to_owned()),
                    ));
                    let _ = peer
                        .send_notification(ClientNotification::CancelledNotification(notification))
                        .await;
                });
            }
        }
    }
}

/// A server's result as toolgate's: text and images as they are, other
/// content (audio, resources, links) as its JSON in a text part so nothing
/// is lost; structured content forwarded.
fn output(result: rmcp::model::CallToolResult) -> ToolOutput {
    let content = result
        .content
        .into_iter()
        .map(|block| match block {
            ContentBlock::Text(text) => Content::Text { text: text.text },
            ContentBlock::Image(image) => Content::Image {
                data: image.data,
                mime_type: image.mime_type,
            },
            other => Content::Text {
                text: serde_json::to_string(&other).unwrap_or_default(),
            },
        })
        .collect();
    let mut output = ToolOutput::new(content);
    output.structured = result.structured_content;
    output.is_error = result.is_error.unwrap_or(false);
    output
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn names_are_namespaced_and_shortened_deterministically() {
        assert_eq!(toolgate_name("git", "status"), "mcp__git__status");
        let long = "a".repeat(80);
        let shortened = toolgate_name("srv", &long);
        assert_eq!(shortened.len(), 64);
        assert!(shortened.starts_with("mcp__srv__aaaa"));
        assert_eq!(shortened, toolgate_name("srv", &long));
        assert_ne!(shortened, toolgate_name("srv", &"a".repeat(81)));
        // Characters outside the set are replaced, and the hash keeps the
        // replaced name apart from one that was already written that way.
        let dotted = toolgate_name("srv", "files.read");
        assert!(dotted.starts_with("mcp__srv__files_read_"), "{dotted}");
        assert_ne!(dotted, toolgate_name("srv", "files_read"));
        assert!(
            dotted
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        );
    }

    #[test]
    fn descriptions_are_cut_at_one_kilobyte_on_a_character_boundary() {
        let text = "é".repeat(2000);
        let cut = bounded_description(&text);
        assert!(cut.len() <= MAX_DESCRIPTION, "{}", cut.len());
        assert!(cut.ends_with("[description cut at 1 KB by toolgate]"));
        assert_eq!(bounded_description("short"), "short");
    }
}

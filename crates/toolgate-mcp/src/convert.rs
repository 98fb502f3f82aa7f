//! Specs to MCP tools, pipeline results to MCP results.

use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use serde_json::Value;
use toolgate_core::{Content, EffectClass, Idempotency, ToolOutput, ToolSpec};
use toolgate_policy::{CallError, CallResult};

/// The MCP hints of a spec: read-only for `read`, destructive for everything
/// that cannot be undone (false for the reversible classes), idempotent when
/// the repeat contract makes a second identical call a no-op, and closed
/// world for built-ins (tools of external MCP servers may reach anything).
pub fn annotations(spec: &ToolSpec) -> ToolAnnotations {
    let read_only = spec.effect_class == EffectClass::Read;
    let destructive = matches!(
        spec.effect_class,
        EffectClass::MutateIrreversible | EffectClass::Destructive
    );
    let idempotent = read_only
        || matches!(
            spec.idempotency,
            Some(Idempotency::ProviderNative | Idempotency::CheckBeforeAct)
        );
    ToolAnnotations::new()
        .read_only(read_only)
        .destructive(destructive)
        .idempotent(idempotent)
        .open_world(spec.is_mcp())
}

/// The MCP description of a tool: name, description, input schema, output
/// schema (when the tool returns structured facts) and annotations.
pub fn to_mcp_tool(spec: &ToolSpec) -> Tool {
    let mut tool = Tool::new(
        spec.name.clone(),
        spec.description.clone(),
        object(&spec.input_schema),
    )
    .with_annotations(annotations(spec));
    if let Some(schema) = &spec.output_schema {
        tool = tool.with_raw_output_schema(object(schema));
    }
    tool
}

fn object(schema: &Value) -> Arc<JsonObject> {
    match schema {
        Value::Object(map) => Arc::new(map.clone()),
        _ => Arc::new(JsonObject::new()),
    }
}

/// A finished call as the model sees it.
pub(crate) fn call_result(result: CallResult) -> CallToolResult {
    output_result(result.output)
}

fn output_result(output: ToolOutput) -> CallToolResult {
    let content = output
        .content
        .into_iter()
        .filter_map(content_block)
        .collect();
    let mut result = if output.is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    // MCP wants an object here; anything else stays in the text.
    if let Some(structured @ Value::Object(_)) = output.structured {
        result.structured_content = Some(structured);
    }
    result
}

fn content_block(content: Content) -> Option<ContentBlock> {
    match content {
        Content::Text { text } => Some(ContentBlock::text(text)),
        Content::Image { data, mime_type } => Some(ContentBlock::image(data, mime_type)),
        _ => None,
    }
}

/// A call the pipeline stopped, as a tool error: what happened, in which
/// layer, and what the model should do instead of retrying blindly.
pub(crate) fn refusal(error: &CallError) -> CallToolResult {
    let advice = match error {
        CallError::Denied { .. } => {
            "The operator's policy refuses this call; repeating it will not help. \
             Use a path or command the policy allows, or ask the user to change the policy."
        }
        CallError::InvalidArguments(_) => {
            "Fix the arguments to match the tool's input schema and call again."
        }
        CallError::Inactive { .. } => {
            "This tool is not available in this session; use another tool or ask the user."
        }
        CallError::ApprovalRequired { .. } | CallError::ApprovalRefused { .. } => {
            "This call needs the operator's approval, which was not given; \
             do not retry it, ask the user instead."
        }
        CallError::ApprovalPending { .. } => {
            "Wait for the operator's decision, then call again with the same arguments."
        }
        _ => "",
    };
    let text = if advice.is_empty() {
        format!("{error}")
    } else {
        format!("{error}\n{advice}")
    };
    CallToolResult::error(vec![ContentBlock::text(text)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use toolgate_core::Idempotency;

    #[test]
    fn hints_follow_the_effect_class_and_the_repeat_contract() {
        let cases = [
            (EffectClass::Read, None, (true, false, true)),
            (
                EffectClass::MutateReversible,
                Some(Idempotency::CheckBeforeAct),
                (false, false, true),
            ),
            (
                EffectClass::MutateIrreversible,
                Some(Idempotency::AtMostOnce),
                (false, true, false),
            ),
            (
                EffectClass::Destructive,
                Some(Idempotency::ProviderNative),
                (false, true, true),
            ),
        ];
        for (class, idempotency, (read_only, destructive, idempotent)) in cases {
            let mut spec = ToolSpec::new("t", "d", class);
            spec.idempotency = idempotency;
            let hints = annotations(&spec);
            assert_eq!(
                (
                    hints.read_only_hint,
                    hints.destructive_hint,
                    hints.idempotent_hint,
                    hints.open_world_hint
                ),
                (
                    Some(read_only),
                    Some(destructive),
                    Some(idempotent),
                    Some(false)
                ),
                "{class}"
            );
        }
        let external = ToolSpec::new("t", "d", EffectClass::Read).mcp("github");
        assert_eq!(annotations(&external).open_world_hint, Some(true));
    }

    #[test]
    fn a_denial_names_the_layer_and_the_reason() {
        let error = CallError::Denied {
            stage: toolgate_policy::Stage::Paths,
            reason: "`/etc/shadow` is outside the workspace roots".to_owned(),
        };
        let result = refusal(&error);
        assert_eq!(result.is_error, Some(true));
        let text = serde_json::to_value(&result.content).unwrap_or_default();
        let text = text[0]["text"].as_str().unwrap_or_default().to_owned();
        assert!(
            text.starts_with("denied by the paths policy: `/etc/shadow` is outside"),
            "{text}"
        );
        assert!(text.contains("repeating it will not help"), "{text}");
    }
}

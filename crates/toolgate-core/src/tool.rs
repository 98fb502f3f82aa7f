//! The `Tool` trait, what a call gets and gives back, and the typed adapter
//! that lets a tool be written against a Rust struct.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::spec::ToolSpec;

/// One network connection a sandboxed command made (or tried) through the
/// egress proxy, as a tool reports it while it runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct EgressNote {
    /// The host asked for.
    pub host: String,
    /// The port asked for.
    pub port: u16,
    /// `http-connect`, `http-forward` or `socks5`.
    pub protocol: String,
    /// Whether the egress policy let it through.
    pub allowed: bool,
    /// Why.
    pub reason: String,
    /// Bytes from the command to the host.
    pub bytes_up: u64,
    /// Bytes from the host to the command.
    pub bytes_down: u64,
}

impl EgressNote {
    /// A note about `host:port`.
    pub fn new(
        host: impl Into<String>,
        port: u16,
        allowed: bool,
        reason: impl Into<String>,
    ) -> Self {
        EgressNote {
            host: host.into(),
            port,
            protocol: String::new(),
            allowed,
            reason: reason.into(),
            bytes_up: 0,
            bytes_down: 0,
        }
    }
}

/// Where a running tool reports progress, such as the output lines of a
/// long command and the network connections its command makes. Surfaces
/// listen (MCP sends progress notifications, the Executor emits `Progress`
/// and `Egress` events); without a listener reporting costs nothing.
#[derive(Clone, Default)]
pub struct Progress {
    lines: Option<Arc<ProgressListener>>,
    egress: Option<Arc<EgressListener>>,
}

/// What listens to a [`Progress`].
type ProgressListener = dyn Fn(&str) + Send + Sync;
/// What listens to egress notes.
type EgressListener = dyn Fn(&EgressNote) + Send + Sync;

impl Progress {
    /// Progress delivered to `listener`.
    pub fn new(listener: impl Fn(&str) + Send + Sync + 'static) -> Self {
        Progress {
            lines: Some(Arc::new(listener)),
            egress: None,
        }
    }

    /// Also delivers egress notes to `listener`.
    pub fn with_egress(mut self, listener: impl Fn(&EgressNote) + Send + Sync + 'static) -> Self {
        self.egress = Some(Arc::new(listener));
        self
    }

    /// Reports one message.
    pub fn report(&self, message: &str) {
        if let Some(listener) = &self.lines {
            listener(message);
        }
    }

    /// Reports one connection through the egress proxy.
    pub fn report_egress(&self, note: &EgressNote) {
        if let Some(listener) = &self.egress {
            listener(note);
        }
    }

    /// Whether anyone listens.
    pub fn is_listening(&self) -> bool {
        self.lines.is_some() || self.egress.is_some()
    }
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.is_listening() {
            "Progress(listening)"
        } else {
            "Progress(none)"
        })
    }
}

/// Listeners are not part of a context's identity.
impl PartialEq for Progress {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Progress {}

/// Who is calling and from where.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CallContext {
    /// Unique id of this call, stamped on every event it causes.
    pub call_id: String,
    /// The agent (or person) making the call.
    pub caller: String,
    /// The caller's working directory; relative paths resolve against it.
    pub cwd: PathBuf,
    /// The workspace roots the caller may work in (default: its cwd).
    pub roots: Vec<PathBuf>,
    /// Where the tool reports progress while it runs.
    #[serde(skip)]
    pub progress: Progress,
    /// Who can be asked in-line when the call needs a person's yes (MCP
    /// elicitation); `None`: nobody, the call waits for another channel.
    #[serde(skip)]
    pub asker: Option<crate::Asker>,
}

impl CallContext {
    /// A context for `caller` working in `cwd`, which is also its only root.
    pub fn new(call_id: impl Into<String>, caller: impl Into<String>, cwd: PathBuf) -> Self {
        CallContext {
            call_id: call_id.into(),
            caller: caller.into(),
            roots: vec![cwd.clone()],
            cwd,
            progress: Progress::default(),
            asker: None,
        }
    }

    /// The call id as a safe file-name part: it comes from the client, so
    /// anything but ASCII letters, digits and `-` becomes `_` (no `/`, no
    /// `..`), at most 64 characters.
    pub fn call_id_for_file(&self) -> String {
        self.call_id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .take(64)
            .collect()
    }

    /// Sets where progress goes.
    pub fn with_progress(mut self, progress: Progress) -> Self {
        self.progress = progress;
        self
    }

    /// Sets who can be asked in-line for an approval.
    pub fn with_asker(mut self, asker: crate::Asker) -> Self {
        self.asker = Some(asker);
        self
    }

    /// Sets the workspace roots.
    pub fn with_roots(mut self, roots: Vec<PathBuf>) -> Self {
        self.roots = roots;
        self
    }
}

/// One piece of what a tool returns to the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "type")]
#[non_exhaustive]
pub enum Content {
    /// Text for the model.
    Text {
        /// The text.
        text: String,
    },
    /// An image, base64-encoded.
    Image {
        /// Base64 of the bytes.
        data: String,
        /// `image/png`, ...
        mime_type: String,
    },
}

/// What a tool call produced.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolOutput {
    /// Content for the model.
    pub content: Vec<Content>,
    /// The facts as a JSON object (paths, counts, exit codes, truncation).
    pub structured: Option<Value>,
    /// The tool ran but reports failure to the model (not a pipeline error).
    pub is_error: bool,
}

impl ToolOutput {
    /// A result with one text part.
    pub fn text(text: impl Into<String>) -> Self {
        ToolOutput {
            content: vec![Content::Text { text: text.into() }],
            structured: None,
            is_error: false,
        }
    }

    /// A result with these parts.
    pub fn new(content: Vec<Content>) -> Self {
        ToolOutput {
            content,
            structured: None,
            is_error: false,
        }
    }

    /// Adds the structured facts.
    pub fn with_structured(mut self, structured: Value) -> Self {
        self.structured = Some(structured);
        self
    }

    /// Marks the result as a failure reported to the model.
    pub fn into_error(mut self) -> Self {
        self.is_error = true;
        self
    }

    /// All text parts joined by newlines.
    pub fn joined_text(&self) -> String {
        let texts: Vec<&str> = self
            .content
            .iter()
            .filter_map(|c| match c {
                Content::Text { text } => Some(text.as_str()),
                Content::Image { .. } => None,
            })
            .collect();
        texts.join("\n")
    }
}

/// A tool failed to run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The arguments passed the schema but the tool cannot use them.
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    /// The tool could not do its job; the message says what to do next.
    #[error("{0}")]
    Failed(String),
    /// The call was cancelled before it finished.
    #[error("the call was cancelled")]
    Cancelled,
}

/// Runs calls. Registered tools implement [`Tool`]; tools that arrive at run
/// time (with a [`crate::DynamicToolSpec`]) only need this half.
#[async_trait]
pub trait ToolHandler: Send + Sync {
    /// Runs one call with arguments that already passed validation and policy.
    async fn call(&self, args: Value, ctx: &CallContext) -> Result<ToolOutput, ToolError>;

    /// Paths named inside the arguments where no JSON pointer of
    /// [`ToolSpec::path_args`] can reach them, such as the file headers of a
    /// patch. The path layer checks them like path arguments; an `Err` (the
    /// arguments cannot be read) is refused there with its message.
    fn embedded_paths(&self, _args: &Value) -> Result<Vec<String>, String> {
        Ok(Vec::new())
    }
}

/// A tool: a spec and a handler.
pub trait Tool: ToolHandler {
    /// The tool's description.
    fn spec(&self) -> &ToolSpec;
}

/// A tool written against a Rust struct for its arguments. Wrap it in
/// [`Typed`] to register it: the schema is generated from `Args` and the
/// arguments are deserialised before `run` sees them.
#[async_trait]
pub trait TypedTool: Send + Sync + 'static {
    /// The arguments; `#[serde(deny_unknown_fields)]` makes unknown keys errors.
    type Args: DeserializeOwned + JsonSchema + Send;

    /// The spec without a schema (the adapter fills it in).
    fn spec(&self) -> ToolSpec;

    /// Runs one call.
    async fn run(&self, args: Self::Args, ctx: &CallContext) -> Result<ToolOutput, ToolError>;

    /// See [`ToolHandler::embedded_paths`].
    fn embedded_paths(&self, _args: &Value) -> Result<Vec<String>, String> {
        Ok(Vec::new())
    }
}

/// Adapter from [`TypedTool`] to [`Tool`].
pub struct Typed<T> {
    inner: T,
    spec: ToolSpec,
}

impl<T: TypedTool> Typed<T> {
    /// Generates the schema of `T::Args` and wraps the tool.
    pub fn new(inner: T) -> Self {
        let schema = schemars::schema_for!(T::Args).to_value();
        let spec = inner.spec().input_schema(schema);
        Typed { inner, spec }
    }
}

#[async_trait]
impl<T: TypedTool> ToolHandler for Typed<T> {
    async fn call(&self, args: Value, ctx: &CallContext) -> Result<ToolOutput, ToolError> {
        let args: T::Args =
            serde_json::from_value(args).map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
        self.inner.run(args, ctx).await
    }

    fn embedded_paths(&self, args: &Value) -> Result<Vec<String>, String> {
        self.inner.embedded_paths(args)
    }
}

impl<T: TypedTool> Tool for Typed<T> {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::effect::EffectClass;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct AddArgs {
        /// First operand.
        a: i64,
        /// Second operand.
        #[serde(default)]
        b: Option<i64>,
    }

    struct Add;

    #[async_trait]
    impl TypedTool for Add {
        type Args = AddArgs;
        fn spec(&self) -> ToolSpec {
            ToolSpec::new("add", "Adds two numbers.", EffectClass::Read)
        }
        async fn run(&self, args: AddArgs, _ctx: &CallContext) -> Result<ToolOutput, ToolError> {
            Ok(ToolOutput::text((args.a + args.b.unwrap_or(0)).to_string()))
        }
    }

    #[test]
    fn typed_adapter_generates_the_schema_from_the_struct() {
        let tool = Typed::new(Add);
        let schema = &tool.spec().input_schema;
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["properties"]["a"]["type"], "integer");
        assert_eq!(schema["properties"]["a"]["description"], "First operand.");
        assert_eq!(schema["required"], json!(["a"]));
        assert_eq!(schema["additionalProperties"], json!(false));
    }

    #[tokio::test]
    async fn typed_adapter_deserialises_arguments() {
        let tool = Typed::new(Add);
        let ctx = CallContext::new("c1", "test", PathBuf::from("/"));
        let out = tool.call(json!({"a": 2, "b": 3}), &ctx).await.unwrap();
        assert_eq!(out.joined_text(), "5");
        let err = tool.call(json!({"a": "x"}), &ctx).await.unwrap_err();
        assert!(matches!(err, ToolError::InvalidArguments(_)), "{err:?}");
    }
}

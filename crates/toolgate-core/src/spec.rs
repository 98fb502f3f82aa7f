//! The description of a tool that every surface (MCP, HTTP, CLI) and every
//! policy layer reads.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::effect::{EffectClass, Idempotency};
use crate::registry::ToolRegistrationError;

/// Where a tool comes from. Tools of external MCP servers are all in
/// `group:mcp` for access lists and rules, and nothing they declare about
/// themselves is trusted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
#[non_exhaustive]
pub enum ToolOrigin {
    /// Implemented in this process.
    Native,
    /// A tool of an external MCP server, by that server's name.
    Mcp {
        /// The server's name in the configuration.
        server: String,
    },
}

/// How the arguments of a call are checked against `input_schema`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SchemaMode {
    /// Validated (and, outside strict mode, coerced) before the tool runs.
    Validated,
    /// The schema is an external one (an MCP server's); the arguments are handed
    /// to the owner of that schema unchanged, and it validates them itself.
    Passthrough,
}

/// Everything toolgate knows about a tool before calling it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolSpec {
    /// Unique name, `[A-Za-z0-9_-]{1,64}`.
    pub name: String,
    /// What the tool does, when to use it and when not (read by models).
    pub description: String,
    /// JSON Schema of the arguments object.
    pub input_schema: Value,
    /// JSON Schema of [`crate::ToolOutput::structured`] when the tool returns
    /// facts (MCP's `outputSchema`); every non-error result conforms to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// Whether the arguments are validated against `input_schema`.
    pub schema_mode: SchemaMode,
    /// What the tool can change.
    pub effect_class: EffectClass,
    /// The repeat contract; required above `read`, absent on `read`.
    pub idempotency: Option<Idempotency>,
    /// Group used by access lists, such as `group:fs`.
    pub group: Option<String>,
    /// Whether calls may run concurrently with other calls.
    pub parallel_safe: bool,
    /// Version stamped by downstream wrappers (catalogue, MCP); unset on built-ins.
    pub version: Option<String>,
    /// JSON pointers of arguments that hold a path or an array of paths.
    pub path_args: Vec<String>,
    /// JSON pointers of arguments that hold a shell script.
    pub command_args: Vec<String>,
    /// Where the tool comes from.
    pub origin: ToolOrigin,
    /// What the tool's origin declares about itself (an MCP server's title
    /// and annotations such as `readOnlyHint`): shown to people, never read
    /// by policy, since nothing a server says can be trusted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declared: Option<Value>,
}

impl ToolSpec {
    /// A native tool with an empty-object schema, no group, not parallel safe.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        effect_class: EffectClass,
    ) -> Self {
        ToolSpec {
            name: name.into(),
            description: description.into(),
            input_schema: serde_json::json!({"type": "object", "properties": {}}),
            output_schema: None,
            schema_mode: SchemaMode::Validated,
            effect_class,
            idempotency: None,
            group: None,
            parallel_safe: false,
            version: None,
            path_args: Vec::new(),
            command_args: Vec::new(),
            origin: ToolOrigin::Native,
            declared: None,
        }
    }

    /// Sets the repeat contract.
    pub fn idempotency(mut self, idempotency: Idempotency) -> Self {
        self.idempotency = Some(idempotency);
        self
    }

    /// Sets the access group (`group:fs`, ...).
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.group = Some(group.into());
        self
    }

    /// Marks the tool safe to run concurrently with other calls.
    pub fn parallel_safe(mut self, parallel_safe: bool) -> Self {
        self.parallel_safe = parallel_safe;
        self
    }

    /// Sets the version (for wrapped tools).
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.version = Some(version.into());
        self
    }

    /// Sets the JSON Schema of the arguments; they will be validated.
    pub fn input_schema(mut self, schema: Value) -> Self {
        self.input_schema = schema;
        self.schema_mode = SchemaMode::Validated;
        self
    }

    /// Declares the JSON Schema of the structured facts the tool returns.
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema);
        self
    }

    /// Sets an external schema whose owner validates the arguments itself.
    pub fn passthrough_schema(mut self, schema: Value) -> Self {
        self.input_schema = schema;
        self.schema_mode = SchemaMode::Passthrough;
        self
    }

    /// Declares the argument at `pointer` (`/path`) as a path or array of paths,
    /// so that the path policy checks it.
    pub fn path_arg(mut self, pointer: impl Into<String>) -> Self {
        self.path_args.push(pointer.into());
        self
    }

    /// Declares the argument at `pointer` (`/command`) as a shell script, so that
    /// the command policy checks every command in it.
    pub fn command_arg(mut self, pointer: impl Into<String>) -> Self {
        self.command_args.push(pointer.into());
        self
    }

    /// Marks the tool as belonging to the external MCP server `server`.
    pub fn mcp(mut self, server: impl Into<String>) -> Self {
        self.origin = ToolOrigin::Mcp {
            server: server.into(),
        };
        self
    }

    /// Records what the tool's origin declares about itself (see
    /// [`ToolSpec::declared`]).
    pub fn declared(mut self, declared: Value) -> Self {
        self.declared = Some(declared);
        self
    }

    /// Whether the tool is a tool of an external MCP server.
    pub fn is_mcp(&self) -> bool {
        matches!(self.origin, ToolOrigin::Mcp { .. })
    }
}

/// A tool description that arrived at run time (from an MCP server, a
/// manifest or the network), with its class and idempotency still strings.
///
/// Turning it into a [`ToolSpec`] parses them; a value that does not parse is a
/// [`ToolRegistrationError`] naming the tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct DynamicToolSpec {
    /// Tool name.
    pub name: String,
    /// Description.
    #[serde(default)]
    pub description: String,
    /// JSON Schema of the arguments.
    #[serde(default = "empty_object_schema")]
    pub input_schema: Value,
    /// Effect class as a string (`read`, `mutate-reversible`, ...).
    pub effect_class: String,
    /// Idempotency as a string, required above `read`.
    #[serde(default)]
    pub idempotency: Option<String>,
    /// Access group.
    #[serde(default)]
    pub group: Option<String>,
    /// Whether concurrent calls are safe.
    #[serde(default)]
    pub parallel_safe: bool,
    /// Version of the wrapped tool.
    #[serde(default)]
    pub version: Option<String>,
}

fn empty_object_schema() -> Value {
    serde_json::json!({"type": "object", "properties": {}})
}

impl DynamicToolSpec {
    /// A dynamic description with the given strings and an empty-object schema.
    pub fn new(
        name: impl Into<String>,
        effect_class: impl Into<String>,
        idempotency: Option<&str>,
    ) -> Self {
        DynamicToolSpec {
            name: name.into(),
            description: String::new(),
            input_schema: empty_object_schema(),
            effect_class: effect_class.into(),
            idempotency: idempotency.map(str::to_owned),
            group: None,
            parallel_safe: false,
            version: None,
        }
    }

    /// Parses the class and idempotency strings into a validated-schema spec.
    pub fn into_spec(self) -> Result<ToolSpec, ToolRegistrationError> {
        let effect_class = self.effect_class.parse::<EffectClass>().map_err(|source| {
            ToolRegistrationError::InvalidEffectClass {
                tool: self.name.clone(),
                source,
            }
        })?;
        let idempotency = self
            .idempotency
            .as_deref()
            .map(str::parse)
            .transpose()
            .map_err(|source| ToolRegistrationError::InvalidIdempotency {
                tool: self.name.clone(),
                source,
            })?;
        let mut spec = ToolSpec::new(self.name, self.description, effect_class)
            .input_schema(self.input_schema)
            .parallel_safe(self.parallel_safe);
        spec.idempotency = idempotency;
        spec.group = self.group;
        spec.version = self.version;
        Ok(spec)
    }
}

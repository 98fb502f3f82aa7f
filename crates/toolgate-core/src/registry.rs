//! The set of tools a runtime knows: an active pool that callers see and a
//! deferred pool that is searched and activated on demand (large MCP servers).

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::effect::{EffectClass, Idempotency};
use crate::spec::{DynamicToolSpec, SchemaMode, ToolSpec};
use crate::tool::{Tool, ToolHandler};
use crate::validate::{CompiledSchema, InputMode, InvalidInput};
use crate::wire::ParseEnumError;

/// Why a tool was not registered. Every variant names the tool.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolRegistrationError {
    /// Another tool, active or deferred, has the name.
    #[error("tool `{tool}` is already registered")]
    DuplicateName {
        /// The name.
        tool: String,
    },
    /// The name does not fit `[A-Za-z0-9_-]{{1,64}}`.
    #[error(
        "tool name `{tool}` is invalid: use 1 to 64 characters from A-Z, a-z, 0-9, `_` and `-`"
    )]
    InvalidName {
        /// The name.
        tool: String,
    },
    /// The effect class string does not parse.
    #[error("tool `{tool}`: {source}")]
    InvalidEffectClass {
        /// The name.
        tool: String,
        /// What was wrong.
        source: ParseEnumError,
    },
    /// The idempotency string does not parse.
    #[error("tool `{tool}`: {source}")]
    InvalidIdempotency {
        /// The name.
        tool: String,
        /// What was wrong.
        source: ParseEnumError,
    },
    /// A tool above `read` did not declare its repeat contract.
    #[error(
        "tool `{tool}` is {effect_class} and must declare an idempotency: provider-native, check-before-act or at-most-once"
    )]
    MissingIdempotency {
        /// The name.
        tool: String,
        /// Its class.
        effect_class: EffectClass,
    },
    /// A `read` tool declared a repeat contract, which reads do not have.
    #[error("tool `{tool}` is read-only and must not declare an idempotency")]
    UnexpectedIdempotency {
        /// The name.
        tool: String,
    },
    /// The input schema is not a valid JSON Schema.
    #[error("tool `{tool}` has an invalid input schema: {message}")]
    InvalidSchema {
        /// The name.
        tool: String,
        /// The schema compiler's message.
        message: String,
    },
}

/// One line of a listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolListing {
    /// Name.
    pub name: String,
    /// Class.
    pub effect_class: EffectClass,
    /// Repeat contract, above read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotency: Option<Idempotency>,
    /// Version of a wrapped tool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// A tool as the registry holds it: spec, handler and compiled schema.
#[derive(Clone)]
pub struct RegisteredTool {
    described: Described,
    handler: Arc<dyn ToolHandler>,
    /// `None` for pass-through (external) schemas.
    validator: Option<Arc<LazySchema>>,
}

/// Where a registered tool's spec lives: a tool keeps its own (so the
/// registry holds no copy of its schemas); a spec that came without a tool
/// object is kept here.
#[derive(Clone)]
enum Described {
    ByTool(Arc<dyn Tool>),
    Given(Arc<ToolSpec>),
}

/// A tool's input schema, compiled on the tool's first call. Registration
/// compiles it once to refuse an invalid schema there and drops the result,
/// so a session holds compiled schemas only of the tools it calls (each is
/// a few kilobytes of heap, and most sessions call a handful of the tools
/// they list).
#[derive(Default)]
struct LazySchema(OnceLock<CompiledSchema>);

impl RegisteredTool {
    /// The tool's spec.
    pub fn spec(&self) -> &ToolSpec {
        match &self.described {
            Described::ByTool(tool) => tool.spec(),
            Described::Given(spec) => spec,
        }
    }

    /// The code that runs calls.
    pub fn handler(&self) -> &Arc<dyn ToolHandler> {
        &self.handler
    }

    /// Checks `args` against the input schema, repairing them where they
    /// are as `mode` allows (see [`crate::InputValidator::check_in_place`]);
    /// `None` for pass-through schemas, which are not checked.
    pub fn check_input(
        &self,
        args: &mut Value,
        mode: InputMode,
    ) -> Option<Result<bool, InvalidInput>> {
        let lazy = self.validator.as_ref()?;
        let schema = &self.spec().input_schema;
        let compiled = match lazy.0.get() {
            Some(compiled) => compiled,
            None => match CompiledSchema::new(schema) {
                Ok(compiled) => lazy.0.get_or_init(|| compiled),
                // Compiled once at registration already; a schema cannot
                // stop compiling since, but say so rather than panic.
                Err(message) => {
                    return Some(Err(InvalidInput {
                        pointer: String::new(),
                        message: format!("the tool's input schema does not compile: {message}"),
                        more: Vec::new(),
                    }));
                }
            },
        };
        Some(compiled.check_in_place(schema, args, mode))
    }

    fn listing(&self) -> ToolListing {
        let spec = self.spec();
        ToolListing {
            name: spec.name.clone(),
            effect_class: spec.effect_class,
            idempotency: spec.idempotency,
            version: spec.version.clone(),
        }
    }
}

impl std::fmt::Debug for RegisteredTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegisteredTool")
            .field("spec", self.spec())
            .finish_non_exhaustive()
    }
}

/// Active and deferred tools by name.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    active: BTreeMap<String, RegisteredTool>,
    deferred: BTreeMap<String, RegisteredTool>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Registry::default()
    }

    /// Adds an active tool.
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> Result<(), ToolRegistrationError> {
        self.insert(tool.clone(), Described::ByTool(tool), false)
    }

    /// Adds a deferred tool: known, searchable, but not callable until activated.
    pub fn register_deferred(&mut self, tool: Arc<dyn Tool>) -> Result<(), ToolRegistrationError> {
        self.insert(tool.clone(), Described::ByTool(tool), true)
    }

    /// Adds a tool that arrived at run time with its class and idempotency as
    /// strings; they are parsed here.
    pub fn register_dynamic(
        &mut self,
        spec: DynamicToolSpec,
        handler: Arc<dyn ToolHandler>,
    ) -> Result<(), ToolRegistrationError> {
        self.insert(
            handler,
            Described::Given(Arc::new(spec.into_spec()?)),
            false,
        )
    }

    /// Like [`Registry::register_dynamic`], into the deferred pool.
    pub fn register_dynamic_deferred(
        &mut self,
        spec: DynamicToolSpec,
        handler: Arc<dyn ToolHandler>,
    ) -> Result<(), ToolRegistrationError> {
        self.insert(handler, Described::Given(Arc::new(spec.into_spec()?)), true)
    }

    fn insert(
        &mut self,
        handler: Arc<dyn ToolHandler>,
        described: Described,
        deferred: bool,
    ) -> Result<(), ToolRegistrationError> {
        let tool = RegisteredTool {
            described,
            handler,
            validator: None,
        };
        let spec = tool.spec();
        check_spec(spec)?;
        if self.active.contains_key(&spec.name) || self.deferred.contains_key(&spec.name) {
            return Err(ToolRegistrationError::DuplicateName {
                tool: spec.name.clone(),
            });
        }
        let validator = match spec.schema_mode {
            SchemaMode::Validated => {
                CompiledSchema::new(&spec.input_schema).map_err(|message| {
                    ToolRegistrationError::InvalidSchema {
                        tool: spec.name.clone(),
                        message,
                    }
                })?;
                Some(Arc::default())
            }
            SchemaMode::Passthrough => None,
        };
        let name = spec.name.clone();
        let pool = if deferred {
            &mut self.deferred
        } else {
            &mut self.active
        };
        pool.insert(name, RegisteredTool { validator, ..tool });
        Ok(())
    }

    /// An active tool by name.
    pub fn get(&self, name: &str) -> Option<&RegisteredTool> {
        self.active.get(name)
    }

    /// A deferred tool by name.
    pub fn get_deferred(&self, name: &str) -> Option<&RegisteredTool> {
        self.deferred.get(name)
    }

    /// Moves a deferred tool into the active pool; `false` if there is none by that name.
    pub fn activate(&mut self, name: &str) -> bool {
        match self.deferred.remove(name) {
            Some(tool) => {
                self.active.insert(name.to_owned(), tool);
                true
            }
            None => false,
        }
    }

    /// Active tools, by name.
    pub fn active(&self) -> impl Iterator<Item = &RegisteredTool> {
        self.active.values()
    }

    /// Deferred tools, by name.
    pub fn deferred(&self) -> impl Iterator<Item = &RegisteredTool> {
        self.deferred.values()
    }

    /// The active tools as listing lines, sorted by name.
    pub fn list(&self) -> Vec<ToolListing> {
        self.active.values().map(RegisteredTool::listing).collect()
    }

    /// The deferred tools as listing lines, sorted by name.
    pub fn list_deferred(&self) -> Vec<ToolListing> {
        self.deferred
            .values()
            .map(RegisteredTool::listing)
            .collect()
    }
}

fn check_spec(spec: &ToolSpec) -> Result<(), ToolRegistrationError> {
    let name_ok = (1..=64).contains(&spec.name.len())
        && spec
            .name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !name_ok {
        return Err(ToolRegistrationError::InvalidName {
            tool: spec.name.clone(),
        });
    }
    match (spec.effect_class, spec.idempotency) {
        (EffectClass::Read, Some(_)) => Err(ToolRegistrationError::UnexpectedIdempotency {
            tool: spec.name.clone(),
        }),
        (class, None) if class > EffectClass::Read => {
            Err(ToolRegistrationError::MissingIdempotency {
                tool: spec.name.clone(),
                effect_class: class,
            })
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::{CallContext, ToolError, ToolOutput};
    use serde_json::json;

    struct Nothing;

    #[async_trait::async_trait]
    impl ToolHandler for Nothing {
        async fn call(&self, _args: Value, _ctx: &CallContext) -> Result<ToolOutput, ToolError> {
            Ok(ToolOutput::text(""))
        }
    }

    #[test]
    fn a_schema_is_compiled_and_kept_on_its_tools_first_call_only() {
        let mut registry = Registry::new();
        for name in ["called", "listed"] {
            let mut spec = DynamicToolSpec::new(name, "read", None);
            spec.input_schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
            registry.register_dynamic(spec, Arc::new(Nothing)).unwrap();
        }
        let compiled = |name: &str| {
            let lazy = registry.get(name).unwrap().validator.as_ref().unwrap();
            lazy.0.get().is_some()
        };
        assert!(!compiled("called") && !compiled("listed"));
        let mut args = json!({"n": 1});
        let checked = registry
            .get("called")
            .unwrap()
            .check_input(&mut args, InputMode::Strict);
        assert_eq!(checked, Some(Ok(false)));
        assert!(compiled("called"));
        assert!(!compiled("listed"));
    }
}

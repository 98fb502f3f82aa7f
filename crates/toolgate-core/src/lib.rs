//! The types every toolgate crate speaks.
//!
//! A tool is a [`ToolSpec`] (name, schema, [`EffectClass`], [`Idempotency`],
//! group) plus a [`ToolHandler`] that runs calls. The [`Registry`] holds the
//! tools a runtime knows, in an active and a deferred pool, and refuses specs
//! that are malformed. [`InputValidator`] checks arguments against a tool's
//! schema before anything runs. [`ToolEvent`]s describe what the pipeline did.
//!
//! This crate does no I/O and makes no decisions: policy lives in
//! `toolgate-policy`, the call pipeline in its `Executor`. It holds the
//! facts several layers share: which environment variables change what a
//! command runs ([`command_env`]) and the did-you-mean of a misspelt name
//! ([`suggest`]).

mod ask;
pub mod command_env;
mod decision;
mod effect;
mod event;
mod lexical;
mod preset;
mod registry;
mod spec;
pub mod suggest;
pub mod text;
mod tool;
mod validate;
mod wire;

pub use ask::{AskAnswer, AskQuestion, Asker};
pub use decision::Decision;
pub use effect::{EffectClass, Idempotency};
pub use event::{EventSink, ToolEvent, ToolEventKind};
pub use lexical::normalize_path;
pub use preset::{BUILTIN_TOOLS, ToolPreset};
pub use registry::{RegisteredTool, Registry, ToolListing, ToolRegistrationError};
pub use spec::{DynamicToolSpec, SchemaMode, ToolOrigin, ToolSpec};
pub use tool::{
    CallContext, Content, EgressNote, Progress, Tool, ToolError, ToolHandler, ToolOutput, Typed,
    TypedTool,
};
pub use validate::{InputMode, InputValidator, InvalidInput};
pub use wire::ParseEnumError;

pub use async_trait::async_trait;

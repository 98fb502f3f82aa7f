//! toolgate as an MCP server.
//!
//! [`McpServer`] exposes the callable tools of an [`Executor`](toolgate_policy::Executor)
//! (the active ones, and the deferred ones its `mcp_find_tools` activated
//! in the client's session, announced with `notifications/tools/list_changed`)
//! to any MCP client, over stdio ([`serve_stdio`]) or Streamable HTTP
//! ([`serve_http`]). Every `tools/call` runs through the Executor's whole
//! pipeline (validation, policy, sandbox, output bounds); this crate only
//! translates: specs to MCP tools with annotations and schemas, results to
//! content plus `structuredContent`, pipeline refusals to tool errors that
//! tell the model what to do next, output lines to progress notifications,
//! and a client's cancellation to dropping the call (which kills its
//! process group).
//!
//! A message that is not JSON-RPC (not JSON, not UTF-8, too long, the wrong
//! shape) gets the JSON-RPC error for it instead of silence, and the
//! session goes on: see `incoming`.
//!
//! It is also the MCP client side: [`gateway`] connects external MCP
//! servers and turns their tools into governed toolgate tools.
//!
//! Client roots narrow the operator's roots and never widen them: see
//! [`narrow_roots`].

mod convert;
mod elicit;
pub mod gateway;
mod http;
mod incoming;
pub mod resolve;
mod roots;
mod server;
mod stdio;

pub use convert::{annotations, to_mcp_tool};
pub use http::{HttpError, HttpOptions, serve_http};
pub use resolve::{NativeTooling, Resolution, resolve};
pub use roots::{Narrowed, RefusedRoot, narrow_roots};
pub use server::{McpServer, Scope, ScopeSource, ServeError, serve_stdio};

/// The MCP protocol library this crate is built on, for callers that need
/// its types.
pub use rmcp;

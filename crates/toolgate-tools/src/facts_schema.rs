//! The shape of the JSON Schemas that describe the tools' structured facts
//! (each tool's `output_schema`, MCP's `outputSchema`).
//!
//! MCP clients validate a result's `structuredContent` against the schema and
//! reject a result that does not conform, so each schema sits beside the
//! `json!` that builds its facts, and `tests/output_schemas.rs` runs every
//! tool and checks that the two agree. Two rules hold for every schema:
//! - no `additionalProperties: false`: a fact added later must not break a
//!   client that validates against an older schema;
//! - draft-07 keywords only (`type`, `properties`, `required`, `items`,
//!   `enum`, `const`, `oneOf`): ajv, which the TypeScript SDK uses, rejects a
//!   schema with keywords its default draft does not know.

use serde_json::{Value, json};

/// An object with `properties` (name -> schema), of which `required` are in
/// every value.
pub(crate) fn object(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required})
}

//! `toolgate tools NAME`: one tool's description, effect class, status,
//! and its arguments and facts as tables, so a user can call it without
//! reading its source.

use std::io::Write;

use anyhow::{Result, bail};
use serde_json::{Value, json};
use toolgate_policy::{Access, Executor};

use super::write_table;

/// `toolgate tools NAME`: one tool as a user needs it to call it.
pub fn tool(executor: &Executor, name: &str, as_json: bool) -> Result<()> {
    let statuses = executor.tools();
    let Some(status) = statuses.iter().find(|s| s.spec.name == name) else {
        // Suggested like the pipeline does: only tools a caller can call, so
        // a misspelling never hints at a tool this configuration hides.
        let hint = toolgate_core::suggest::did_you_mean(name, executor.visible_names());
        bail!("unknown tool `{name}`{hint} (`toolgate tools` lists them all)");
    };
    let spec = &status.spec;
    let (active, reason) = match &status.access {
        Access::Active => (true, None),
        Access::Inactive { reason } => (false, Some(reason)),
    };
    let mut out = std::io::stdout().lock();
    if as_json {
        let mut body = serde_json::to_value(spec)?;
        body["deferred"] = json!(status.deferred);
        body["active"] = json!(active);
        body["reason"] = json!(reason);
        writeln!(out, "{}", serde_json::to_string_pretty(&body)?)?;
        return Ok(());
    }
    let state = match (&status.access, status.deferred) {
        (Access::Active, true) => "deferred (activate it with mcp_find_tools)".to_owned(),
        (Access::Active, false) => "active".to_owned(),
        (Access::Inactive { reason }, _) => format!("inactive: {reason}"),
    };
    let mut rows = vec![
        ["tool".to_owned(), spec.name.clone()],
        ["class".to_owned(), spec.effect_class.to_string()],
        [
            "idempotency".to_owned(),
            spec.idempotency.map_or("-".to_owned(), |i| i.to_string()),
        ],
        [
            "group".to_owned(),
            spec.group.clone().unwrap_or_else(|| "-".to_owned()),
        ],
        ["status".to_owned(), state],
    ];
    if let toolgate_core::ToolOrigin::Mcp { server } = &spec.origin {
        rows.push(["server".to_owned(), format!("MCP server `{server}`")]);
    }
    // Shown for what it is: the server's word, which policy never reads.
    if let Some(annotations) = spec.declared.as_ref().and_then(|d| d.get("annotations")) {
        rows.push([
            "server says".to_owned(),
            format!("{annotations} (not trusted: the class above decides)"),
        ]);
    }
    write_table(&mut out, &rows)?;
    writeln!(out, "\n{}", spec.description.trim_end())?;
    writeln!(out, "\narguments:")?;
    write_schema(&mut out, &spec.input_schema, "  (none)")?;
    if let Some(facts) = &spec.output_schema {
        writeln!(out, "\nfacts (structured result, `call --json`):")?;
        write_schema(&mut out, facts, "  (none)")?;
    }
    writeln!(
        out,
        "\nthe whole schema: toolgate tools {} --json",
        spec.name
    )?;
    Ok(())
}

/// An object schema's properties as a table: name, type, required,
/// default, description (last, as it is the long one). The fields of
/// nested objects follow their parent as `parent.field` (`parent[].field`
/// for an array of objects).
fn write_schema(out: &mut impl Write, schema: &Value, empty: &str) -> Result<()> {
    let mut rows = vec![[
        "  NAME".to_owned(),
        "TYPE".to_owned(),
        "REQUIRED".to_owned(),
        "DEFAULT".to_owned(),
        "DESCRIPTION".to_owned(),
    ]];
    property_rows(schema, schema, "", 0, &mut rows);
    if rows.len() == 1 {
        writeln!(out, "{empty}")?;
        return Ok(());
    }
    write_table(out, &rows)
}

/// How deep nested objects are spelled out; deeper ones are in `--json`.
const NESTED_DEPTH: usize = 2;

fn property_rows(
    root: &Value,
    object: &Value,
    prefix: &str,
    depth: usize,
    rows: &mut Vec<[String; 5]>,
) {
    let Some(properties) = object.get("properties").and_then(Value::as_object) else {
        return;
    };
    let required: Vec<&str> = object
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for (name, property) in properties {
        // Beside a `$ref`, the property's own default and description win.
        let target = resolve_ref(root, property);
        let field = |key: &str| property.get(key).or_else(|| target.get(key));
        let required = if required.contains(&name.as_str()) {
            "yes"
        } else {
            "no"
        };
        let description = field("description")
            .and_then(Value::as_str)
            .map_or(String::new(), |d| {
                d.split_whitespace().collect::<Vec<_>>().join(" ")
            });
        rows.push([
            format!("  {prefix}{name}"),
            type_of(root, property),
            required.to_owned(),
            field("default").map_or("-".to_owned(), Value::to_string),
            description,
        ]);
        if depth < NESTED_DEPTH
            && let Some((inner, marker)) = nested_object(root, target)
        {
            let prefix = format!("{prefix}{name}{marker}.");
            property_rows(root, inner, &prefix, depth + 1, rows);
        }
    }
}

/// The object schema inside `schema` (itself, its array items, or one
/// alternative of an optional one), and how its fields are named.
fn nested_object<'a>(root: &'a Value, schema: &'a Value) -> Option<(&'a Value, &'static str)> {
    let schema = resolve_ref(root, schema);
    if schema.get("properties").is_some() {
        return Some((schema, ""));
    }
    if let Some(items) = schema.get("items") {
        let items = resolve_ref(root, items);
        if items.get("properties").is_some() {
            return Some((items, "[]"));
        }
    }
    ["anyOf", "oneOf"]
        .iter()
        .filter_map(|key| schema.get(*key).and_then(Value::as_array))
        .flatten()
        .find_map(|option| nested_object(root, option))
}

/// `{"$ref": "#/$defs/X"}` as the schema it points to (within `root`).
fn resolve_ref<'a>(root: &'a Value, schema: &'a Value) -> &'a Value {
    schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix('#'))
        .and_then(|pointer| root.pointer(pointer))
        .unwrap_or(schema)
}

/// A short type for people: `string`, `integer or null`, `array of string`,
/// `"a" | "b"`, `object`.
fn type_of(root: &Value, schema: &Value) -> String {
    let schema = resolve_ref(root, schema);
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return values
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join(" | ");
    }
    if let Some(value) = schema.get("const") {
        return value.to_string();
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(options) = schema.get(key).and_then(Value::as_array) {
            let options: Vec<String> = options.iter().map(|o| type_of(root, o)).collect();
            // Alternatives that are all values read as one list of values.
            let values = options.iter().all(|o| o.starts_with('"'));
            return options.join(if values { " | " } else { " or " });
        }
    }
    let names: Vec<String> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.clone()],
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => return "any".to_owned(),
    };
    names
        .into_iter()
        .map(|t| match (t.as_str(), schema.get("items")) {
            ("array", Some(items)) => format!("array of {}", type_of(root, items)),
            _ => t,
        })
        .collect::<Vec<_>>()
        .join(" or ")
}

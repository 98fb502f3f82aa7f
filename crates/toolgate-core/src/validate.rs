//! Checking a call's arguments against its tool's JSON Schema before it runs.
//!
//! Models often send `"5"` where a schema says integer, or `null` for an
//! optional field they mean to leave out. By default the validator repairs
//! exactly those cases: a string holding a scalar of the declared type becomes
//! that scalar, a string holding a JSON array or object where one is declared
//! becomes it, and `null` on a field that is not required is dropped. Nothing
//! else is repaired, and the result is then validated in full. Strict mode
//! drops optional nulls but refuses every coercion.
//!
//! Because coercion only ever turns a string into a value of a declared type
//! and the full schema is checked afterwards, an integer field can never carry
//! `"1; rm -rf /"` to a tool.

use jsonschema::error::{TypeKind, ValidationErrorKind};
use serde_json::{Map, Value};

/// How lenient validation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InputMode {
    /// Repair stringified scalars and optional nulls, then validate.
    #[default]
    Coerce,
    /// Drop optional nulls, refuse every coercion.
    Strict,
}

/// Arguments that do not fit the schema.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid arguments{}: {message}{}", location(pointer), others(more))]
pub struct InvalidInput {
    /// JSON pointer of the first offending value (`""` for the whole object).
    pub pointer: String,
    /// What was expected there.
    pub message: String,
    /// Further problems, as `(pointer, message)`, so that one answer can fix all.
    pub more: Vec<(String, String)>,
}

/// How many problems one error lists at most.
const MAX_PROBLEMS: usize = 5;

fn location(pointer: &str) -> String {
    if pointer.is_empty() {
        String::new()
    } else {
        format!(" at {pointer}")
    }
}

fn others(more: &[(String, String)]) -> String {
    more.iter()
        .map(|(pointer, message)| format!(";{} {message}", location(pointer)))
        .collect()
}

/// A compiled schema with the schema it was compiled from.
pub struct InputValidator {
    schema: Value,
    compiled: CompiledSchema,
}

impl std::fmt::Debug for InputValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InputValidator")
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

/// How deep `$ref` chains and nesting are followed while repairing; deeper
/// values are still validated, just not coerced.
const MAX_DEPTH: usize = 64;

impl InputValidator {
    /// Compiles `schema`. Remote `$ref`s are not fetched.
    pub fn new(schema: &Value) -> Result<Self, String> {
        Ok(InputValidator {
            compiled: CompiledSchema::new(schema)?,
            schema: schema.clone(),
        })
    }

    /// The schema this validator checks.
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// Validates `args`, returning them repaired as `mode` allows.
    ///
    /// A missing arguments object (`null`) is taken as `{}`.
    pub fn check(&self, mut args: Value, mode: InputMode) -> Result<Value, InvalidInput> {
        self.check_in_place(&mut args, mode)?;
        Ok(args)
    }

    /// Like [`InputValidator::check`], repairing `args` where they are (no
    /// copy of a large argument); returns whether anything was repaired.
    /// On an error `args` may be partly repaired.
    pub fn check_in_place(&self, args: &mut Value, mode: InputMode) -> Result<bool, InvalidInput> {
        self.compiled.check_in_place(&self.schema, args, mode)
    }
}

/// A compiled schema without a copy of its source: whoever holds the
/// source passes it to each check (the registry keeps a tool's schema
/// once, in its spec).
pub(crate) struct CompiledSchema(jsonschema::Validator);

impl CompiledSchema {
    /// Compiles `schema`. Remote `$ref`s are not fetched.
    pub(crate) fn new(schema: &Value) -> Result<Self, String> {
        jsonschema::validator_for(schema)
            .map(CompiledSchema)
            .map_err(|e| e.to_string())
    }

    /// [`InputValidator::check_in_place`] against `schema`, the schema this
    /// was compiled from.
    pub(crate) fn check_in_place(
        &self,
        schema: &Value,
        args: &mut Value,
        mode: InputMode,
    ) -> Result<bool, InvalidInput> {
        Checker {
            schema,
            compiled: &self.0,
        }
        .check_in_place(args, mode)
    }
}

/// A schema and its compiled form, for one check.
struct Checker<'s> {
    schema: &'s Value,
    compiled: &'s jsonschema::Validator,
}

impl<'s> Checker<'s> {
    fn check_in_place(&self, args: &mut Value, mode: InputMode) -> Result<bool, InvalidInput> {
        let mut repair = Repair {
            validator: self,
            mode,
            pointer: String::new(),
            changed: false,
        };
        if args.is_null() {
            *args = Value::Object(Map::new());
            repair.changed = true;
        }
        repair.value(args, self.schema, 0)?;
        let args: &Value = args;
        let mut problems: Vec<(String, String)> = self
            .compiled
            .iter_errors(args)
            .take(MAX_PROBLEMS)
            .map(|e| {
                let path = e.instance_path().as_str();
                match (e.kind(), args.pointer(path)) {
                    // `additionalProperties: false` with no properties (an
                    // argument struct without fields) fails the object as
                    // a `false` schema: every key it has is unknown.
                    (ValidationErrorKind::FalseSchema, Some(Value::Object(map)))
                        if !map.is_empty() =>
                    {
                        let keys: Vec<&str> = map.keys().map(String::as_str).collect();
                        (
                            path.to_owned(),
                            format!("unknown field `{}`", keys.join("`, `")),
                        )
                    }
                    (ValidationErrorKind::AdditionalProperties { unexpected }, _) => (
                        path.to_owned(),
                        unknown_fields(unexpected, &self.fields_at(path)),
                    ),
                    (kind, _) => (path.to_owned(), describe(kind)),
                }
            })
            .collect();
        if problems.is_empty() {
            return Ok(repair.changed);
        }
        let (pointer, message) = problems.remove(0);
        Err(InvalidInput {
            pointer,
            message,
            more: problems,
        })
    }

    /// The fields the schema declares for the object at `pointer` (an
    /// instance path), for "did you mean"; empty when it cannot tell.
    fn fields_at(&self, pointer: &str) -> Vec<&'s str> {
        let mut schema = self.resolve(self.schema);
        for segment in pointer.split('/').skip(1) {
            let segment = segment.replace("~1", "/").replace("~0", "~");
            let next = schema
                .get("properties")
                .and_then(|p| p.get(&segment))
                .or_else(|| {
                    schema
                        .get("items")
                        .filter(|_| segment.parse::<usize>().is_ok())
                });
            match next {
                Some(next) => schema = self.resolve(next),
                None => return Vec::new(),
            }
        }
        schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.keys().map(String::as_str).collect())
            .unwrap_or_default()
    }

    fn resolve(&self, mut schema: &'s Value) -> &'s Value {
        for _ in 0..MAX_DEPTH {
            match schema.get("$ref").and_then(Value::as_str) {
                Some(reference) if reference.starts_with('#') => {
                    match self.schema.pointer(&reference[1..]) {
                        Some(target) => schema = target,
                        None => return schema,
                    }
                }
                _ => return schema,
            }
        }
        schema
    }

    /// The types a schema admits, looking through `anyOf` / `oneOf`; `None`
    /// when any branch admits every type.
    fn declared_types(&self, schema: &'s Value, depth: usize) -> Option<Vec<&'s str>> {
        let schema = self.resolve(schema);
        match schema.get("type") {
            Some(Value::String(t)) => return Some(vec![t.as_str()]),
            Some(Value::Array(ts)) => return Some(ts.iter().filter_map(Value::as_str).collect()),
            _ => {}
        }
        if depth >= MAX_DEPTH {
            return None;
        }
        let branches = schema
            .get("anyOf")
            .or_else(|| schema.get("oneOf"))
            .and_then(Value::as_array)?;
        let mut types = Vec::new();
        for branch in branches {
            for t in self.declared_types(branch, depth + 1)? {
                if !types.contains(&t) {
                    types.push(t);
                }
            }
        }
        Some(types)
    }

    /// The branch of an `anyOf` / `oneOf` whose declared type fits `value`,
    /// or the schema itself.
    fn branch_for(&self, schema: &'s Value, value: &Value, depth: usize) -> &'s Value {
        let schema = self.resolve(schema);
        let Some(branches) = schema
            .get("anyOf")
            .or_else(|| schema.get("oneOf"))
            .and_then(Value::as_array)
        else {
            return schema;
        };
        if depth >= MAX_DEPTH {
            return schema;
        }
        branches
            .iter()
            .find(|b| {
                self.declared_types(b, depth + 1)
                    .is_some_and(|ts| ts.iter().any(|t| fits(value, t)))
            })
            .map(|b| self.branch_for(b, value, depth + 1))
            .unwrap_or(schema)
    }
}

/// One walk over a value, repairing it in place.
struct Repair<'v> {
    validator: &'v Checker<'v>,
    mode: InputMode,
    /// JSON pointer of the value being looked at.
    pointer: String,
    /// Whether anything was coerced or dropped.
    changed: bool,
}

impl Repair<'_> {
    fn value(
        &mut self,
        value: &mut Value,
        schema: &Value,
        depth: usize,
    ) -> Result<(), InvalidInput> {
        if depth >= MAX_DEPTH {
            return Ok(());
        }
        let v = self.validator;
        if let Some(types) = v.declared_types(schema, depth) {
            if !types.iter().any(|t| fits(value, t)) {
                let coerced = match (self.mode, &*value) {
                    (InputMode::Coerce, Value::String(s)) => coerce(s, &types),
                    _ => None,
                };
                let Some(coerced) = coerced else {
                    return Err(InvalidInput {
                        pointer: self.pointer.clone(),
                        message: format!("expected {}", types.join(" or ")),
                        more: Vec::new(),
                    });
                };
                *value = coerced;
                self.changed = true;
            }
            // JSON Schema counts 10.0 as an integer; hand it to the tool as
            // 10 so that typed deserialisation (u64, i64) accepts it.
            if types.contains(&"integer")
                && !types.contains(&"number")
                && let Some(whole) = as_whole_number(value)
            {
                *value = whole;
                self.changed = true;
            }
        }
        let schema = v.branch_for(schema, value, depth);
        match value {
            Value::Object(map) => self.object(map, schema, depth),
            Value::Array(items) => self.array(items, schema, depth),
            _ => Ok(()),
        }
    }

    fn object(
        &mut self,
        map: &mut Map<String, Value>,
        schema: &Value,
        depth: usize,
    ) -> Result<(), InvalidInput> {
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let properties = schema.get("properties").and_then(Value::as_object);
        // `null` on a declared optional field means "not given", in both
        // modes; on an unknown field it stays, for the schema to judge.
        let declared = |k: &str| properties.is_some_and(|p| p.contains_key(k));
        let before = map.len();
        map.retain(|k, v| !v.is_null() || required.contains(&k.as_str()) || !declared(k));
        self.changed |= map.len() != before;
        let additional = schema.get("additionalProperties").filter(|a| a.is_object());
        for (key, item) in map.iter_mut() {
            let Some(sub) = properties.and_then(|p| p.get(key)).or(additional) else {
                continue;
            };
            let segment = key.replace('~', "~0").replace('/', "~1");
            self.descend(&segment, item, sub, depth)?;
        }
        Ok(())
    }

    fn array(
        &mut self,
        items: &mut [Value],
        schema: &Value,
        depth: usize,
    ) -> Result<(), InvalidInput> {
        let prefix = schema.get("prefixItems").and_then(Value::as_array);
        let rest = schema.get("items").filter(|i| i.is_object());
        for (index, item) in items.iter_mut().enumerate() {
            let Some(sub) = prefix.and_then(|p| p.get(index)).or(rest) else {
                continue;
            };
            self.descend(&index.to_string(), item, sub, depth)?;
        }
        Ok(())
    }

    /// Repairs a child, with its segment on the pointer meanwhile.
    fn descend(
        &mut self,
        segment: &str,
        item: &mut Value,
        schema: &Value,
        depth: usize,
    ) -> Result<(), InvalidInput> {
        let len = self.pointer.len();
        self.pointer.push('/');
        self.pointer.push_str(segment);
        let result = self.value(item, schema, depth + 1);
        self.pointer.truncate(len);
        result
    }
}

/// A float with no fractional part, as an integer `Value`, when it fits.
fn as_whole_number(value: &Value) -> Option<Value> {
    let n = value.as_number()?;
    if n.is_i64() || n.is_u64() {
        return None;
    }
    let f = n.as_f64()?;
    if f.fract() != 0.0 {
        return None;
    }
    // The casts are exact: `f` is whole and checked to be in range first.
    if f >= -(2f64.powi(63)) && f < 2f64.powi(63) {
        Some(Value::from(f as i64))
    } else if f >= 0.0 && f < 2f64.powi(64) {
        Some(Value::from(f as u64))
    } else {
        None
    }
}

/// Whether `value` is an instance of the JSON Schema type `t`.
fn fits(value: &Value, t: &str) -> bool {
    match (t, value) {
        ("null", Value::Null)
        | ("boolean", Value::Bool(_))
        | ("number", Value::Number(_))
        | ("string", Value::String(_))
        | ("array", Value::Array(_))
        | ("object", Value::Object(_)) => true,
        ("integer", Value::Number(n)) => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => false,
    }
}

/// The value a string stands for, if it is written as one of `types`.
/// Parsing follows JSON's grammar, so `" 5"`, `"5 "`, `"0x10"` or `"5abc"`
/// stay strings (JSON would allow the whitespace around a document; a
/// value written with it is not exactly that value).
fn coerce(s: &str, types: &[&str]) -> Option<Value> {
    let candidate: Value = match s {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        _ => {
            let first = s.as_bytes().first()?;
            if !(first.is_ascii_digit() || matches!(first, b'-' | b'[' | b'{')) {
                return None;
            }
            if s.as_bytes().last().is_some_and(u8::is_ascii_whitespace) {
                return None;
            }
            serde_json::from_str(s).ok()?
        }
    };
    types
        .iter()
        .any(|t| fits(&candidate, t))
        .then_some(candidate)
}

fn describe(kind: &ValidationErrorKind) -> String {
    match kind {
        ValidationErrorKind::Type {
            kind: TypeKind::Single(t),
        } => format!("expected {t}"),
        ValidationErrorKind::Type {
            kind: TypeKind::Multiple(ts),
        } => {
            let names: Vec<String> = ts.iter().map(|t| t.to_string()).collect();
            format!("expected {}", names.join(" or "))
        }
        ValidationErrorKind::Required { property } => {
            format!("missing required field {property}")
        }
        ValidationErrorKind::AdditionalProperties { unexpected } => {
            format!("unknown field `{}`", unexpected.join("`, `"))
        }
        other => other_message(other),
    }
}

/// `unknown field `txt`; did you mean `text`?`, or, when no field is near
/// the name (`heading` for `section`), the fields there are.
fn unknown_fields(unexpected: &[String], fields: &[&str]) -> String {
    let all = || fields.join(", ");
    if let [name] = unexpected {
        let hint = crate::suggest::did_you_mean(name, fields.iter().copied());
        return match (hint.is_empty(), fields.is_empty()) {
            (false, _) => format!("unknown field `{name}`{hint}"),
            (true, false) => format!("unknown field `{name}`; the fields are: {}", all()),
            (true, true) => format!("unknown field `{name}`"),
        };
    }
    let names: Vec<String> = unexpected
        .iter()
        .map(
            |name| match crate::suggest::closest(name, fields.iter().copied()) {
                Some(near) => format!("`{name}` (did you mean `{near}`?)"),
                None => format!("`{name}`"),
            },
        )
        .collect();
    match fields.is_empty() {
        true => format!("unknown fields {}", names.join(", ")),
        false => format!(
            "unknown fields {}; the fields are: {}",
            names.join(", "),
            all()
        ),
    }
}

fn other_message(kind: &ValidationErrorKind) -> String {
    match kind {
        ValidationErrorKind::Enum { options } => format!("expected one of {options}"),
        ValidationErrorKind::Minimum { limit } => format!("must be at least {limit}"),
        ValidationErrorKind::Maximum { limit } => format!("must be at most {limit}"),
        ValidationErrorKind::MinLength { limit } => format!("must be at least {limit} characters"),
        ValidationErrorKind::MaxLength { limit } => format!("must be at most {limit} characters"),
        ValidationErrorKind::Pattern { pattern } => format!("must match the pattern {pattern}"),
        _ => format!("does not satisfy the schema keyword `{}`", kind.keyword()),
    }
}

#[cfg(test)]
mod unknown_key_tests {
    use super::*;

    #[test]
    fn an_extra_key_on_an_argument_struct_without_fields_is_named() {
        let schema = serde_json::json!({"type": "object", "additionalProperties": false});
        let validator = InputValidator::new(&schema).unwrap();
        let mut args = serde_json::json!({"verbose": true});
        let err = validator
            .check_in_place(&mut args, InputMode::Coerce)
            .unwrap_err();
        assert_eq!(err.message, "unknown field `verbose`");
    }

    #[test]
    fn an_unknown_field_gets_the_name_meant_or_the_fields_there_are() {
        let schema = serde_json::json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "section": {"type": "string"},
                "opts": {"$ref": "#/$defs/Opts"}
            },
            "additionalProperties": false,
            "$defs": {"Opts": {
                "type": "object",
                "properties": {"depth": {"type": "integer"}},
                "additionalProperties": false
            }}
        });
        let validator = InputValidator::new(&schema).unwrap();
        let message = |args: serde_json::Value| {
            let mut args = args;
            validator
                .check_in_place(&mut args, InputMode::Coerce)
                .unwrap_err()
                .to_string()
        };
        let cases = [
            (
                serde_json::json!({"sectoin": "a"}),
                "invalid arguments: unknown field `sectoin`; did you mean `section`?",
            ),
            (
                serde_json::json!({"heading": "a"}),
                "invalid arguments: unknown field `heading`; the fields are: opts, path, section",
            ),
            (
                serde_json::json!({"heading": "a", "pth": "b"}),
                "invalid arguments: unknown fields `heading`, `pth` (did you mean `path`?); the fields are: opts, path, section",
            ),
            (
                serde_json::json!({"opts": {"dpeth": 1}}),
                "invalid arguments at /opts: unknown field `dpeth`; did you mean `depth`?",
            ),
        ];
        for (args, expected) in cases {
            assert_eq!(message(args), expected);
        }
    }
}

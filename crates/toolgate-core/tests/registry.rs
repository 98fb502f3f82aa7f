//! Registration rules, driven through the public API.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toolgate_core::{
    CallContext, DynamicToolSpec, EffectClass, Idempotency, Registry, Tool, ToolError, ToolHandler,
    ToolListing, ToolOutput, ToolRegistrationError, ToolSpec, async_trait,
};

struct Fixed(ToolSpec);

#[async_trait]
impl ToolHandler for Fixed {
    async fn call(&self, _args: Value, _ctx: &CallContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text("ok"))
    }
}

impl Tool for Fixed {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
}

fn tool(name: &str, class: EffectClass, idem: Option<Idempotency>) -> Arc<dyn Tool> {
    let mut spec = ToolSpec::new(name, "test tool", class);
    spec.idempotency = idem;
    Arc::new(Fixed(spec))
}

fn handler() -> Arc<dyn ToolHandler> {
    Arc::new(Fixed(ToolSpec::new("unused", "", EffectClass::Read)))
}

#[test]
fn valid_names_and_contracts_register() {
    let mut reg = Registry::new();
    for (name, class, idem) in [
        ("read", EffectClass::Read, None),
        ("a", EffectClass::Read, None),
        (
            "Tool_2-x",
            EffectClass::MutateReversible,
            Some(Idempotency::CheckBeforeAct),
        ),
        (
            &"n".repeat(64)[..],
            EffectClass::Destructive,
            Some(Idempotency::AtMostOnce),
        ),
    ] {
        reg.register(tool(name, class, idem)).unwrap();
    }
    assert_eq!(reg.active().count(), 4);
}

#[test]
fn registration_errors_name_the_tool_and_the_problem() {
    let long = "n".repeat(65);
    let cases: Vec<(&str, EffectClass, Option<Idempotency>, &str)> = vec![
        ("", EffectClass::Read, None, "tool name `` is invalid"),
        (
            "has space",
            EffectClass::Read,
            None,
            "tool name `has space` is invalid",
        ),
        ("dots.not.allowed", EffectClass::Read, None, "is invalid"),
        ("ünïcode", EffectClass::Read, None, "is invalid"),
        (&long, EffectClass::Read, None, "is invalid"),
        (
            "write_it",
            EffectClass::MutateReversible,
            None,
            "tool `write_it` is mutate-reversible and must declare an idempotency",
        ),
        (
            "peek",
            EffectClass::Read,
            Some(Idempotency::AtMostOnce),
            "tool `peek` is read-only and must not declare an idempotency",
        ),
    ];
    for (name, class, idem, expected) in cases {
        let mut reg = Registry::new();
        let err = reg.register(tool(name, class, idem)).unwrap_err();
        assert!(
            err.to_string().contains(expected),
            "{name:?}: `{err}` does not contain `{expected}`"
        );
        let err = reg.register_deferred(tool(name, class, idem)).unwrap_err();
        assert!(
            err.to_string().contains(expected),
            "deferred {name:?}: {err}"
        );
        assert_eq!(reg.active().count() + reg.deferred().count(), 0);
    }
}

#[test]
fn duplicate_names_are_refused_across_both_pools() {
    let mut reg = Registry::new();
    reg.register(tool("grep", EffectClass::Read, None)).unwrap();
    reg.register_deferred(tool("lazy", EffectClass::Read, None))
        .unwrap();
    for name in ["grep", "lazy"] {
        assert_eq!(
            reg.register(tool(name, EffectClass::Read, None))
                .unwrap_err(),
            ToolRegistrationError::DuplicateName { tool: name.into() }
        );
        assert_eq!(
            reg.register_deferred(tool(name, EffectClass::Read, None))
                .unwrap_err(),
            ToolRegistrationError::DuplicateName { tool: name.into() }
        );
    }
}

#[test]
fn dynamic_specs_parse_their_strings_or_are_refused() {
    let mut reg = Registry::new();
    reg.register_dynamic(
        DynamicToolSpec::new(
            "remote_write",
            "mutate-irreversible",
            Some("provider-native"),
        ),
        handler(),
    )
    .unwrap();
    let cases = [
        (
            DynamicToolSpec::new("bad_class", "mutating", Some("at-most-once")),
            "tool `bad_class`: unknown effect class `mutating`, expected one of: read, mutate-reversible, mutate-irreversible, destructive",
        ),
        (
            DynamicToolSpec::new("bad_idem", "destructive", Some("sometimes")),
            "tool `bad_idem`: unknown idempotency `sometimes`, expected one of: provider-native, check-before-act, at-most-once",
        ),
        (
            DynamicToolSpec::new("no_idem", "destructive", None),
            "tool `no_idem` is destructive and must declare an idempotency",
        ),
        (
            DynamicToolSpec::new("CamelCase", "Read", None),
            "unknown effect class `Read`",
        ),
    ];
    for (spec, expected) in cases {
        let err = reg.register_dynamic(spec.clone(), handler()).unwrap_err();
        assert!(err.to_string().contains(expected), "{err}");
        let err = reg.register_dynamic_deferred(spec, handler()).unwrap_err();
        assert!(err.to_string().contains(expected), "{err}");
    }
    let mut bad_schema = DynamicToolSpec::new("bad_schema", "read", None);
    bad_schema.input_schema = json!({"type": "no-such-type"});
    let err = reg.register_dynamic(bad_schema, handler()).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("tool `bad_schema` has an invalid input schema"),
        "{err}"
    );
    assert_eq!(reg.list().len(), 1);
}

#[test]
fn listing_shows_class_idempotency_and_version_and_deferred_tools_activate() {
    let mut reg = Registry::new();
    reg.register(tool("zeta", EffectClass::Read, None)).unwrap();
    let versioned = ToolSpec::new("alpha", "", EffectClass::MutateIrreversible)
        .idempotency(Idempotency::AtMostOnce)
        .version("1.2.3");
    reg.register(Arc::new(Fixed(versioned))).unwrap();
    reg.register_deferred(tool("later", EffectClass::Read, None))
        .unwrap();

    let listing = serde_json::to_value(reg.list()).unwrap();
    assert_eq!(
        listing,
        json!([
            {"name": "alpha", "effect_class": "mutate-irreversible", "idempotency": "at-most-once", "version": "1.2.3"},
            {"name": "zeta", "effect_class": "read"},
        ])
    );
    assert_eq!(
        reg.list_deferred(),
        vec![ToolListing {
            name: "later".into(),
            effect_class: EffectClass::Read,
            idempotency: None,
            version: None
        }]
    );
    assert!(reg.get("later").is_none());
    assert!(reg.activate("later"));
    assert!(reg.get("later").is_some());
    assert!(reg.get_deferred("later").is_none());
    assert!(!reg.activate("later"));
}

fn with_schema(name: &str, schema: Value) -> Arc<dyn Tool> {
    Arc::new(Fixed(
        ToolSpec::new(name, "test tool", EffectClass::Read).input_schema(schema),
    ))
}

#[test]
fn a_registered_tool_is_described_by_its_own_spec_not_a_copy() {
    let tool = with_schema("counted", json!({"type": "object"}));
    let mut reg = Registry::new();
    reg.register(tool.clone()).unwrap();
    reg.register_deferred(with_schema("later", json!({"type": "object"})))
        .unwrap();
    assert!(std::ptr::eq(
        reg.get("counted").unwrap().spec(),
        tool.spec()
    ));
    assert_eq!(reg.get_deferred("later").unwrap().spec().name, "later");
}

#[test]
fn a_schema_that_does_not_compile_is_refused_at_registration() {
    // Valid against the meta-schema; only compiling finds the bad pattern.
    let schema = json!({"type": "object", "properties": {"p": {"type": "string", "pattern": "("}}});
    let mut reg = Registry::new();
    let err = reg
        .register(with_schema("bad_pattern", schema))
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("tool `bad_pattern` has an invalid input schema"),
        "{err}"
    );
    assert!(reg.get("bad_pattern").is_none());
}

#[test]
fn input_is_checked_and_repaired_on_every_call() {
    let schema = json!({
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
        "additionalProperties": false,
    });
    let mut reg = Registry::new();
    reg.register(with_schema("typed", schema)).unwrap();
    reg.register(Arc::new(Fixed(
        ToolSpec::new("external", "an external tool", EffectClass::Read).passthrough_schema(
            json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
        ),
    )))
    .unwrap();
    let typed = reg.get("typed").unwrap();
    for _ in 0..2 {
        let mut args = json!({"n": "5"});
        assert_eq!(
            typed.check_input(&mut args, toolgate_core::InputMode::Coerce),
            Some(Ok(true))
        );
        assert_eq!(args, json!({"n": 5}));
        let mut wrong = json!({"n": "five", "m": 1});
        let err = typed
            .check_input(&mut wrong, toolgate_core::InputMode::Coerce)
            .unwrap()
            .unwrap_err();
        assert_eq!(err.pointer, "/n", "{err}");
    }
    let mut anything = json!({"n": "five"});
    assert_eq!(
        reg.get("external")
            .unwrap()
            .check_input(&mut anything, toolgate_core::InputMode::Strict),
        None
    );
    assert_eq!(anything, json!({"n": "five"}));
}

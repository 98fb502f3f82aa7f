//! The coercion matrix in both modes, and property tests that validation
//! never lets through a value the schema forbids.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use pretty_assertions::assert_eq;
use proptest::prelude::*;
use serde_json::{Value, json};
use toolgate_core::{InputMode, InputValidator};

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "i": {"type": "integer"},
            "n": {"type": "number"},
            "b": {"type": "boolean"},
            "s": {"type": "string"},
            "req": {"type": "integer"},
            "opt": {"type": ["integer", "null"]},
            "maybe": {"anyOf": [{"$ref": "#/$defs/Item"}, {"type": "null"}]},
            "nested": {
                "type": "object",
                "properties": {"depth": {"type": "integer"}, "flag": {"type": "boolean"}},
                "required": ["depth"],
                "additionalProperties": false
            },
            "list": {"type": "array", "items": {"type": "integer"}},
            "items": {"type": "array", "items": {"$ref": "#/$defs/Item"}},
            "limit": {"type": "number", "minimum": 0}
        },
        "required": ["req"],
        "additionalProperties": false,
        "$defs": {
            "Item": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
        }
    })
}

/// `(arguments, result in coerce mode, result in strict mode)`; an `Err`
/// holds the exact message.
type Case = (
    Value,
    Result<Value, &'static str>,
    Result<Value, &'static str>,
);

fn cases() -> Vec<Case> {
    vec![
        // Well-typed input passes unchanged in both modes.
        (
            json!({"req": 1, "i": 2, "n": 1.5, "b": true, "s": "x"}),
            Ok(json!({"req": 1, "i": 2, "n": 1.5, "b": true, "s": "x"})),
            Ok(json!({"req": 1, "i": 2, "n": 1.5, "b": true, "s": "x"})),
        ),
        // Stringified scalars.
        (
            json!({"req": "5"}),
            Ok(json!({"req": 5})),
            Err("invalid arguments at /req: expected integer"),
        ),
        (
            json!({"req": 1, "i": "-7"}),
            Ok(json!({"req": 1, "i": -7})),
            Err("invalid arguments at /i: expected integer"),
        ),
        (
            json!({"req": 1, "n": "2.5"}),
            Ok(json!({"req": 1, "n": 2.5})),
            Err("invalid arguments at /n: expected number"),
        ),
        (
            json!({"req": 1, "n": "3"}),
            Ok(json!({"req": 1, "n": 3})),
            Err("invalid arguments at /n: expected number"),
        ),
        (
            json!({"req": 1, "b": "true"}),
            Ok(json!({"req": 1, "b": true})),
            Err("invalid arguments at /b: expected boolean"),
        ),
        (
            json!({"req": 1, "b": "false"}),
            Ok(json!({"req": 1, "b": false})),
            Err("invalid arguments at /b: expected boolean"),
        ),
        (
            json!({"req": 1, "limit": "10"}),
            Ok(json!({"req": 1, "limit": 10})),
            Err("invalid arguments at /limit: expected number"),
        ),
        // Strings that are not exactly a scalar of the declared type stay refused.
        (
            json!({"req": "1; rm -rf /"}),
            Err("invalid arguments at /req: expected integer"),
            Err("invalid arguments at /req: expected integer"),
        ),
        (
            json!({"req": "2.5"}),
            Err("invalid arguments at /req: expected integer"),
            Err("invalid arguments at /req: expected integer"),
        ),
        (
            json!({"req": " 5"}),
            Err("invalid arguments at /req: expected integer"),
            Err("invalid arguments at /req: expected integer"),
        ),
        (
            json!({"req": "0 "}),
            Err("invalid arguments at /req: expected integer"),
            Err("invalid arguments at /req: expected integer"),
        ),
        (
            json!({"req": "0x10"}),
            Err("invalid arguments at /req: expected integer"),
            Err("invalid arguments at /req: expected integer"),
        ),
        (
            json!({"req": 1, "b": "yes"}),
            Err("invalid arguments at /b: expected boolean"),
            Err("invalid arguments at /b: expected boolean"),
        ),
        (
            json!({"req": 1, "b": "True"}),
            Err("invalid arguments at /b: expected boolean"),
            Err("invalid arguments at /b: expected boolean"),
        ),
        (
            json!({"req": 1, "n": "NaN"}),
            Err("invalid arguments at /n: expected number"),
            Err("invalid arguments at /n: expected number"),
        ),
        (
            json!({"req": 1, "n": "1e999"}),
            Err("invalid arguments at /n: expected number"),
            Err("invalid arguments at /n: expected number"),
        ),
        // Only strings are coerced: nothing becomes a string, no number becomes a bool.
        (
            json!({"req": 1, "s": 5}),
            Err("invalid arguments at /s: expected string"),
            Err("invalid arguments at /s: expected string"),
        ),
        (
            json!({"req": 1, "b": 1}),
            Err("invalid arguments at /b: expected boolean"),
            Err("invalid arguments at /b: expected boolean"),
        ),
        (
            json!({"req": true}),
            Err("invalid arguments at /req: expected integer"),
            Err("invalid arguments at /req: expected integer"),
        ),
        // A string stays a string where a string is declared.
        (
            json!({"req": 1, "s": "5"}),
            Ok(json!({"req": 1, "s": "5"})),
            Ok(json!({"req": 1, "s": "5"})),
        ),
        // Null on optional fields is absence, in both modes; on a required one it is an error.
        (
            json!({"req": 1, "i": null, "s": null, "opt": null, "nested": null}),
            Ok(json!({"req": 1})),
            Ok(json!({"req": 1})),
        ),
        (
            json!({"req": null}),
            Err("invalid arguments at /req: expected integer"),
            Err("invalid arguments at /req: expected integer"),
        ),
        (
            json!({"i": 1}),
            Err("invalid arguments: missing required field \"req\""),
            Err("invalid arguments: missing required field \"req\""),
        ),
        (
            Value::Null,
            Err("invalid arguments: missing required field \"req\""),
            Err("invalid arguments: missing required field \"req\""),
        ),
        (
            json!({"req": 1, "opt": "4"}),
            Ok(json!({"req": 1, "opt": 4})),
            Err("invalid arguments at /opt: expected integer or null"),
        ),
        // Nested objects, through anyOf and $ref too.
        (
            json!({"req": 1, "nested": {"depth": "3", "flag": "true"}}),
            Ok(json!({"req": 1, "nested": {"depth": 3, "flag": true}})),
            Err("invalid arguments at /nested/depth: expected integer"),
        ),
        (
            json!({"req": 1, "nested": {"depth": 3, "flag": null}}),
            Ok(json!({"req": 1, "nested": {"depth": 3}})),
            Ok(json!({"req": 1, "nested": {"depth": 3}})),
        ),
        (
            json!({"req": 1, "nested": {"flag": true}}),
            Err("invalid arguments at /nested: missing required field \"depth\""),
            Err("invalid arguments at /nested: missing required field \"depth\""),
        ),
        (
            json!({"req": 1, "nested": {"depth": 1, "extra": 1}}),
            Err("invalid arguments at /nested: unknown field `extra`; the fields are: depth, flag"),
            Err("invalid arguments at /nested: unknown field `extra`; the fields are: depth, flag"),
        ),
        (
            json!({"req": 1, "maybe": {"n": "8"}}),
            Ok(json!({"req": 1, "maybe": {"n": 8}})),
            Err("invalid arguments at /maybe/n: expected integer"),
        ),
        // Arrays, of scalars and of objects.
        (
            json!({"req": 1, "list": ["1", 2, "3"]}),
            Ok(json!({"req": 1, "list": [1, 2, 3]})),
            Err("invalid arguments at /list/0: expected integer"),
        ),
        (
            json!({"req": 1, "list": [1, "two"]}),
            Err("invalid arguments at /list/1: expected integer"),
            Err("invalid arguments at /list/1: expected integer"),
        ),
        (
            json!({"req": 1, "items": [{"n": 1}, {"n": "2"}]}),
            Ok(json!({"req": 1, "items": [{"n": 1}, {"n": 2}]})),
            Err("invalid arguments at /items/1/n: expected integer"),
        ),
        // Stringified arrays and objects where those are declared.
        (
            json!({"req": 1, "list": "[1, 2]"}),
            Ok(json!({"req": 1, "list": [1, 2]})),
            Err("invalid arguments at /list: expected array"),
        ),
        (
            json!({"req": 1, "nested": "{\"depth\": 2}"}),
            Ok(json!({"req": 1, "nested": {"depth": 2}})),
            Err("invalid arguments at /nested: expected object"),
        ),
        (
            json!({"req": 1, "list": "[1, \"x\"]"}),
            Err("invalid arguments at /list/1: expected integer"),
            Err("invalid arguments at /list: expected array"),
        ),
        // Whole floats reach integer fields as integers; unknown nulls are judged.
        (
            json!({"req": 10.0}),
            Ok(json!({"req": 10})),
            Ok(json!({"req": 10})),
        ),
        (
            json!({"req": "1e1"}),
            Ok(json!({"req": 10})),
            Err("invalid arguments at /req: expected integer"),
        ),
        (
            json!({"req": 1, "surprise": null}),
            Err(
                "invalid arguments: unknown field `surprise`; the fields are: b, i, items, limit, list, maybe, n, nested, opt, req, s",
            ),
            Err(
                "invalid arguments: unknown field `surprise`; the fields are: b, i, items, limit, list, maybe, n, nested, opt, req, s",
            ),
        ),
        // Other keywords are reported with what they expect.
        (
            json!({"req": 1, "limit": -1}),
            Err("invalid arguments at /limit: must be at least 0"),
            Err("invalid arguments at /limit: must be at least 0"),
        ),
        (
            json!({"req": 1, "surprise": 1}),
            Err(
                "invalid arguments: unknown field `surprise`; the fields are: b, i, items, limit, list, maybe, n, nested, opt, req, s",
            ),
            Err(
                "invalid arguments: unknown field `surprise`; the fields are: b, i, items, limit, list, maybe, n, nested, opt, req, s",
            ),
        ),
        (
            json!([1]),
            Err("invalid arguments: expected object"),
            Err("invalid arguments: expected object"),
        ),
    ]
}

#[test]
fn coercion_matrix_in_both_modes() {
    let validator = InputValidator::new(&schema()).unwrap();
    for (input, coerced, strict) in cases() {
        for (mode, expected) in [(InputMode::Coerce, coerced), (InputMode::Strict, strict)] {
            let got = validator
                .check(input.clone(), mode)
                .map_err(|e| e.to_string());
            let expected = expected.map_err(str::to_owned);
            assert_eq!(got, expected, "{mode:?} on {input}");
        }
    }
}

#[test]
fn error_carries_the_pointer_and_expectation() {
    let validator = InputValidator::new(&schema()).unwrap();
    let err = validator
        .check(json!({"req": 1, "items": [{"n": "x"}]}), InputMode::Coerce)
        .unwrap_err();
    assert_eq!(err.pointer, "/items/0/n");
    assert_eq!(err.message, "expected integer");
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|i| json!(i)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        "[a-z0-9 ;.\\-]{0,8}".prop_map(Value::String),
        any::<i64>().prop_map(|i| Value::String(i.to_string())),
        Just(Value::String("true".into())),
        Just(Value::String("[1,2]".into())),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("i".to_owned()),
                    Just("n".to_owned()),
                    Just("b".to_owned()),
                    Just("s".to_owned()),
                    Just("req".to_owned()),
                    Just("opt".to_owned()),
                    Just("nested".to_owned()),
                    Just("list".to_owned()),
                    Just("items".to_owned()),
                    Just("depth".to_owned()),
                ],
                inner,
                0..5
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Whatever comes in, what comes out satisfies the schema, and the
    /// integer fields hold integers.
    #[test]
    fn accepted_values_always_satisfy_the_schema(input in arb_json()) {
        let schema = schema();
        let validator = InputValidator::new(&schema).unwrap();
        let reference = jsonschema::validator_for(&schema).unwrap();
        for mode in [InputMode::Coerce, InputMode::Strict] {
            if let Ok(out) = validator.check(input.clone(), mode) {
                prop_assert!(reference.is_valid(&out), "{mode:?}: {input} -> {out}");
                prop_assert!(out["req"].is_i64() || out["req"].is_u64() || out["req"].is_f64());
                prop_assert!(!out["req"].is_string());
            }
        }
    }

    /// Strict mode changes nothing but dropping optional nulls: what it
    /// accepts, coerce mode accepts identically.
    #[test]
    fn strict_acceptance_implies_identical_coerce_acceptance(input in arb_json()) {
        let validator = InputValidator::new(&schema()).unwrap();
        if let Ok(strict) = validator.check(input.clone(), InputMode::Strict) {
            prop_assert_eq!(validator.check(input, InputMode::Coerce), Ok(strict));
        }
    }

    /// No string that is not exactly an integer ever reaches an integer field.
    #[test]
    fn integer_fields_never_carry_text(text in "\\PC{0,16}") {
        let validator = InputValidator::new(&schema()).unwrap();
        if let Ok(out) = validator.check(json!({"req": text.clone()}), InputMode::Coerce) {
            prop_assert_eq!(out["req"].to_string(), text);
        }
    }
}

#[test]
fn check_in_place_says_whether_it_repaired() {
    let validator = InputValidator::new(&schema()).unwrap();
    for (input, repaired) in [
        (json!({"req": 1, "s": "x"}), false),
        (json!({"req": "1"}), true),
        (json!({"req": 1, "i": null}), true),
        (json!({"req": 2.0}), true),
        (json!({"req": 1, "items": [{"n": "3"}]}), true),
        (Value::Null, true),
    ] {
        let mut args = input.clone();
        let result = validator.check_in_place(&mut args, InputMode::Coerce);
        if input.is_null() {
            assert!(result.is_err(), "`req` is required");
            continue;
        }
        assert_eq!(result, Ok(repaired), "{input}");
        assert_eq!(
            Ok(args),
            validator.check(input.clone(), InputMode::Coerce),
            "{input}"
        );
    }
}

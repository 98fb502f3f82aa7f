#![allow(clippy::unwrap_used, clippy::expect_used)]

//! Every tool's structured facts against the `output_schema` it declares.
//!
//! MCP clients validate a result's `structuredContent` against the tool's
//! `outputSchema` and reject the result when it does not conform, so a
//! schema that drifts from the facts breaks every call of that tool. Here
//! each tool runs through the real `Executor` (validation, policy, tool) in
//! the scenarios that reach its different results (text, image, binary and
//! huge files for `read`; the three modes of `grep`; a timeout, a signal and
//! a cut output for `bash`; ...), and every result is checked three ways:
//! - it conforms to the schema, read as draft 7 (ajv, the TypeScript SDK)
//!   and as draft 2020-12 (the Python SDK's `jsonschema`);
//! - it has no fact the schema does not declare (a new fact needs its
//!   schema entry too);
//! - over all the scenarios, every fact the schema declares was seen (a
//!   schema entry that no result has any more is stale), except the few
//!   listed in [`NOT_REACHED`].
//!
//! Commands run in the real sandbox with the real stage-2 binary, which
//! belongs to toolgate-sandbox, so Cargo does not build it for this crate's
//! tests. Build it into the SAME target dir first:
//!
//! ```text
//! CARGO_TARGET_DIR=<dir> cargo build -p toolgate --bin toolgate-stage2
//! CARGO_TARGET_DIR=<dir> cargo test -p toolgate-tools --test output_schemas
//! ```
//!
//! The test finds it next to the test executable and fails loudly when it is
//! missing; it never skips.

mod scenarios;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toolgate_core::{CallContext, Registry, Typed};
use toolgate_policy::{
    Executor, PermissionRule, PermissionRules, Policy, PolicyPreset, RuleAction,
};
use toolgate_sandbox::{LocalWorkspace, Sandbox, SandboxConfig, Workspace};
use toolgate_tools::memory::{MemoryConfig, register_memory_tools};
use toolgate_tools::neuron::{RuntimeFacts, register_neuron_tools};
use toolgate_tools::process::ProcessConfig;
use toolgate_tools::snapshot::SnapshotTool;
use toolgate_tools::{
    ElevatedTool, Fs, Limits, RuntimeConfig, register_fs_tools, register_runtime_tools,
};

/// Declared facts no scenario here reaches, with why; a prefix matches the
/// facts under it.
const NOT_REACHED: &[(&str, &str, &str)] = &[
    (
        "neuron_disk",
        "/roots/*/error",
        "a workspace root whose file system cannot be read",
    ),
    (
        "neuron_memory",
        "/cgroup/",
        "depends on the host: null without a memory controller",
    ),
    (
        "process_list",
        "/processes/*/status/error",
        "a command that cannot be run at all",
    ),
    (
        "process_read",
        "/status/error",
        "a command that cannot be run at all",
    ),
    (
        "process_kill",
        "/status/error",
        "a command that cannot be run at all",
    ),
];

/// The JSON Schema keywords a schema may use: draft 7's, which every
/// client knows (ajv rejects keywords its draft does not have).
const KEYWORDS: &[&str] = &[
    "type",
    "description",
    "properties",
    "required",
    "items",
    "additionalProperties",
    "enum",
    "const",
    "oneOf",
];

#[path = "../common/stage2.rs"]
mod stage2;
use stage2::stage2;

/// Every tool of the crate over one workspace, behind one executor, and
/// the facts each call returned.
struct Runtime {
    _dir: tempfile::TempDir,
    root: PathBuf,
    executor: Executor,
    ctx: CallContext,
    /// Per tool, the declared facts seen in some result (`/a/*/b` paths).
    seen: BTreeMap<String, BTreeSet<String>>,
}

impl Runtime {
    /// The runtime whose commands run with the stage-2 binary at `stage2`.
    fn new(stage2: PathBuf) -> Runtime {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let root = base.join("root");
        let state = base.join("state");
        let logs = base.join("logs");
        let home = base.join("home");
        for dir in [&root, &state, &logs, &home] {
            std::fs::create_dir_all(dir).unwrap();
        }
        // The host environment commands draw named variables from: set here,
        // so the test never changes this process's environment.
        let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".to_owned());
        let host_env = BTreeMap::from([
            ("PATH".to_owned(), path.clone()),
            ("LANG".to_owned(), "C.UTF-8".to_owned()),
        ]);
        let sandbox = Sandbox::new(SandboxConfig::new(stage2, state.join("sandbox")))
            .unwrap()
            .with_host_env(host_env);
        let workspace: Arc<dyn Workspace> = Arc::new(
            LocalWorkspace::new("agent-1", vec![root.clone()], root.clone(), sandbox).unwrap(),
        );
        let fs = Arc::new(Fs::new(workspace, Limits::default()));

        let mut registry = Registry::new();
        register_fs_tools(&mut registry, fs.clone()).unwrap();
        let mut processes = ProcessConfig::default();
        processes.log_dir = logs;
        processes.kill_grace = Duration::from_millis(300);
        register_runtime_tools(
            &mut registry,
            fs.clone(),
            RuntimeConfig::default(),
            processes,
        )
        .unwrap();
        let host_vars = [("PATH", path.as_str()), ("HOME", "/nonexistent")]
            .map(|(k, v)| (OsString::from(k), OsString::from(v)));
        let elevated = ElevatedTool::with_host_env(fs.clone(), RuntimeConfig::default(), host_vars);
        registry.register(Arc::new(Typed::new(elevated))).unwrap();
        register_memory_tools(&mut registry, fs.clone(), MemoryConfig::default()).unwrap();
        let mut facts = RuntimeFacts::new("agent-1", "permissive");
        facts.active_tools = Some(Arc::new(|| 24));
        register_neuron_tools(&mut registry, fs.clone(), facts).unwrap();
        let snapshot = SnapshotTool::new(fs, state.join("toolgate"));
        registry.register(Arc::new(Typed::new(snapshot))).unwrap();

        // `elevated` is destructive: only the permissive preset keeps it
        // active, and the rules must allow it explicitly.
        let mut rules = PermissionRules::standard();
        rules.push(PermissionRule::new("elevated", RuleAction::Allow));
        let policy = Policy::preset(PolicyPreset::Permissive, Some(&home)).with_rules(rules);
        let executor = Executor::builder(registry).policy(policy).build();
        let ctx =
            CallContext::new("call-1", "agent-1", root.clone()).with_roots(vec![root.clone()]);
        Runtime {
            _dir: dir,
            root,
            executor,
            ctx,
            seen: BTreeMap::new(),
        }
    }

    fn put(&self, rel: &str, bytes: impl AsRef<[u8]>) {
        let path = self.root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }

    /// The tool's declared output schema.
    fn schema(&self, tool: &str) -> Option<Value> {
        let registered = self.executor.registry().get(tool);
        registered
            .unwrap_or_else(|| panic!("{tool} is not registered"))
            .spec()
            .output_schema
            .clone()
    }

    /// Calls `tool`, which must succeed with facts that its schema
    /// describes exactly; returns the facts.
    async fn check(&mut self, tool: &str, args: Value) -> Value {
        let shown = args.to_string();
        let output = match self.executor.call(tool, args, &self.ctx).await {
            Ok(result) => result.output,
            Err(e) => panic!("{tool} {shown} failed: {e}"),
        };
        let facts = output
            .structured
            .unwrap_or_else(|| panic!("{tool} {shown} returned no structured facts"));
        let schema = self
            .schema(tool)
            .unwrap_or_else(|| panic!("{tool} returns structured facts but declares no schema"));
        let problems = conformance(&schema, &facts);
        assert!(
            problems.is_empty(),
            "the facts of {tool} {shown} do not match its output schema:\n{}\nfacts: {:#}",
            problems.join("\n"),
            facts
        );
        let seen = self.seen.entry(tool.to_owned()).or_default();
        record(&schema, &facts, "", seen);
        facts
    }
}

/// Why `facts` do not match `schema`: validation errors under draft 7 and
/// draft 2020-12, and facts the schema does not declare.
fn conformance(schema: &Value, facts: &Value) -> Vec<String> {
    let draft7 = jsonschema::draft7::new(schema).unwrap();
    let draft2020 = jsonschema::draft202012::new(schema).unwrap();
    let closed = jsonschema::draft7::new(&closed(schema)).unwrap();
    let mut problems = Vec::new();
    for (what, validator) in [
        ("draft 7", &draft7),
        ("draft 2020-12", &draft2020),
        ("undeclared fact", &closed),
    ] {
        for error in validator.iter_errors(facts) {
            problems.push(format!("{what}: {error} (at {})", error.instance_path()));
        }
    }
    problems
}

/// `schema` with `additionalProperties: false` on every object that lists
/// its properties: a fact the schema does not declare fails it.
fn closed(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => {
            let mut map: serde_json::Map<String, Value> = map
                .iter()
                .map(|(key, value)| {
                    let value = match key.as_str() {
                        "properties" => Value::Object(
                            value
                                .as_object()
                                .unwrap()
                                .iter()
                                .map(|(name, schema)| (name.clone(), closed(schema)))
                                .collect(),
                        ),
                        "items" | "oneOf" => closed(value),
                        _ => value.clone(),
                    };
                    (key.clone(), value)
                })
                .collect();
            if map.contains_key("properties") && map.contains_key("type") {
                map.insert("additionalProperties".to_owned(), json!(false));
            }
            Value::Object(map)
        }
        Value::Array(items) => Value::Array(items.iter().map(closed).collect()),
        other => other.clone(),
    }
}

/// Adds to `out` the paths (`/edits/*/pass`) of the declared facts present
/// in `value`.
fn record(schema: &Value, value: &Value, at: &str, out: &mut BTreeSet<String>) {
    if let (Some(properties), Some(object)) = (
        schema.get("properties").and_then(Value::as_object),
        value.as_object(),
    ) {
        for (name, value) in object {
            if let Some(schema) = properties.get(name) {
                let path = format!("{at}/{name}");
                record(schema, value, &path, out);
                out.insert(path);
            }
        }
    }
    if let (Some(items), Some(array)) = (schema.get("items"), value.as_array()) {
        for value in array {
            record(items, value, &format!("{at}/*"), out);
        }
    }
}

/// The paths of every fact `schema` declares.
fn declared(schema: &Value, at: &str, out: &mut BTreeSet<String>) {
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, schema) in properties {
            let path = format!("{at}/{name}");
            declared(schema, &path, out);
            out.insert(path);
        }
    }
    if let Some(items) = schema.get("items") {
        declared(items, &format!("{at}/*"), out);
    }
}

/// What is wrong with `schema` as a tool's output schema (see
/// `facts_schema.rs`): keywords outside [`KEYWORDS`], `additionalProperties:
/// false`, required facts that are not declared.
fn schema_problems(schema: &Value, at: &str, declared_here: Option<&Value>) -> Vec<String> {
    let Some(map) = schema.as_object() else {
        return vec![format!("{at}: not a schema object")];
    };
    let mut problems = Vec::new();
    for (key, value) in map {
        if !KEYWORDS.contains(&key.as_str()) {
            problems.push(format!(
                "{at}: keyword `{key}` is not a draft-7 one used here"
            ));
        }
        if key == "additionalProperties" && value == &json!(false) {
            problems.push(format!(
                "{at}: additionalProperties is false (a fact added later would break clients)"
            ));
        }
    }
    // `required` names facts of this object, or (in a oneOf branch) of the
    // object the branch belongs to.
    let known = |name: &str| {
        [map.get("properties"), declared_here]
            .into_iter()
            .flatten()
            .any(|properties| properties.get(name).is_some())
    };
    for name in map
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = name.as_str().unwrap_or_default();
        if !known(name) {
            problems.push(format!(
                "{at}: required `{name}` is not a declared property"
            ));
        }
    }
    if let Some(properties) = map.get("properties").and_then(Value::as_object) {
        for (name, schema) in properties {
            problems.extend(schema_problems(schema, &format!("{at}/{name}"), None));
        }
    }
    if let Some(items) = map.get("items") {
        problems.extend(schema_problems(items, &format!("{at}/*"), None));
    }
    if let Some(branches) = map.get("oneOf").and_then(Value::as_array) {
        for (i, branch) in branches.iter().enumerate() {
            problems.extend(schema_problems(
                branch,
                &format!("{at} oneOf[{i}]"),
                map.get("properties"),
            ));
        }
    }
    problems
}

#[test]
fn the_check_catches_facts_that_drifted_from_their_schema() {
    let item =
        json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]});
    let schema = json!({
        "type": "object",
        "properties": {
            "n": {"type": "integer"},
            "next": {"type": ["integer", "null"]},
            "list": {"type": "array", "items": item},
        },
        "required": ["n"],
    });
    let cases = [
        (
            "conforms",
            json!({"n": 1, "next": null, "list": [{"a": "x"}]}),
            false,
        ),
        ("optional fact left out", json!({"n": 1}), false),
        ("wrong type", json!({"n": "1"}), true),
        ("null where not nullable", json!({"n": null}), true),
        ("required fact missing", json!({"next": 2}), true),
        ("undeclared fact", json!({"n": 1, "extra": true}), true),
        (
            "undeclared fact in an item",
            json!({"n": 1, "list": [{"a": "x", "b": 1}]}),
            true,
        ),
        (
            "required fact of an item missing",
            json!({"n": 1, "list": [{}]}),
            true,
        ),
    ];
    for (case, facts, drifted) in cases {
        let problems = conformance(&schema, &facts);
        assert_eq!(!problems.is_empty(), drifted, "{case}: {problems:?}");
    }
}

#[test]
fn every_declared_schema_is_a_json_schema_of_an_object() {
    // No command runs: the stage-2 binary is not needed.
    let runtime = Runtime::new(PathBuf::from("/nonexistent/stage2"));
    let mut problems = Vec::new();
    let mut without = Vec::new();
    for tool in runtime.executor.registry().active() {
        let name = &tool.spec().name;
        let Some(schema) = &tool.spec().output_schema else {
            without.push(name.clone());
            continue;
        };
        if let Err(e) = jsonschema::draft7::meta::validate(schema) {
            problems.push(format!("{name}: not a draft-7 schema: {e}"));
        }
        if let Err(e) = jsonschema::draft202012::meta::validate(schema) {
            problems.push(format!("{name}: not a draft 2020-12 schema: {e}"));
        }
        if schema.get("type") != Some(&json!("object")) {
            problems.push(format!("{name}: the top level is not of type object"));
        }
        problems.extend(
            schema_problems(schema, "", None)
                .into_iter()
                .map(|p| format!("{name}{p}")),
        );
    }
    // Every tool of the crate returns structured facts.
    assert_eq!(
        without,
        Vec::<String>::new(),
        "tools without an output schema"
    );
    assert_eq!(problems, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_result_matches_its_tool_output_schema() {
    let mut rt = Runtime::new(stage2());
    scenarios::file_tools(&mut rt).await;
    scenarios::runtime_tools(&mut rt).await;
    scenarios::memory_tools(&mut rt).await;
    scenarios::neuron_tools(&mut rt).await;

    // Every registered tool ran, and every fact its schema declares showed
    // up in some result.
    let registered: BTreeSet<String> = rt
        .executor
        .registry()
        .active()
        .map(|t| t.spec().name.clone())
        .collect();
    let ran: BTreeSet<String> = rt.seen.keys().cloned().collect();
    assert_eq!(ran, registered, "tools run by this test");
    let mut stale = Vec::new();
    for (tool, seen) in &rt.seen {
        let mut all = BTreeSet::new();
        declared(&rt.schema(tool).unwrap(), "", &mut all);
        for path in all.difference(seen) {
            let excused = NOT_REACHED
                .iter()
                .any(|(t, prefix, _)| t == tool && path.starts_with(prefix));
            if !excused {
                stale.push(format!("{tool} {path}"));
            }
        }
    }
    assert_eq!(
        stale,
        Vec::<String>::new(),
        "declared facts no result had (stale schema entries, or a scenario is missing)"
    );
}

//! tools/list and tools/call as the SDK sees them: annotations, schemas,
//! text and image content, structured results the SDK validates against the
//! output schema, refusals, unknown tools and bad arguments.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::{Mode, Project, scenario, text};

/// A 1×1 PNG.
const PIXEL_PNG: &str = "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489\
                         0000000d49444154789c63f8cfc0f01f00050001ff89993d1d0000000049454e44ae426082";

fn pixel() -> Vec<u8> {
    (0..PIXEL_PNG.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&PIXEL_PNG[i..i + 2], 16).unwrap())
        .collect()
}

fn lists_tools_with_hints_and_schemas(mode: Mode) {
    let p = Project::new();
    let observed = scenario(p.base(), "tools", &p.stdio(mode, &[]));
    assert_eq!(observed["protocol_version"], mode.protocol());
    let tools = observed["tools"].as_object().unwrap();

    let expected = [
        "read",
        "write",
        "edit",
        "apply_patch",
        "grep",
        "find",
        "ls",
        "bash",
        "process_start",
        "process_list",
        "process_read",
        "process_write",
        "process_kill",
        "memory_append",
        "memory_replace",
        "memory_search",
        "memory_read",
        "neuron_status",
        "neuron_disk",
        "neuron_memory",
        "neuron_packages",
        "neuron_env",
        "snapshot",
    ];
    let missing: Vec<&str> = expected
        .into_iter()
        .filter(|name| !tools.contains_key(*name))
        .collect();
    assert_eq!(
        missing,
        Vec::<&str>::new(),
        "tools listed: {:?}",
        tools.keys()
    );

    let hints = |name: &str| -> Value {
        let a = &tools[name]["annotations"];
        json!({
            "readOnly": a["readOnlyHint"],
            "destructive": a["destructiveHint"],
            "idempotent": a["idempotentHint"],
            "openWorld": a["openWorldHint"],
        })
    };
    assert_eq!(
        hints("read"),
        json!({"readOnly": true, "destructive": false, "idempotent": true, "openWorld": false})
    );
    assert_eq!(
        [
            hints("write")["readOnly"].clone(),
            hints("write")["destructive"].clone()
        ],
        [json!(false), json!(false)],
        "write: {}",
        hints("write")
    );
    // The hints follow the effect class: bash is mutate-reversible (its
    // writes are confined to the workspace), so not destructive, and
    // at-most-once, so not idempotent. Whether a call needs a person's
    // confirmation is the rules layer's decision, not the client's.
    assert_eq!(
        hints("bash"),
        json!({"readOnly": false, "destructive": false, "idempotent": false, "openWorld": false})
    );

    for (name, tool) in tools {
        assert_eq!(tool["input_schema"]["type"], "object", "{name}");
    }
    let read_output = &tools["read"]["output_schema"];
    assert_eq!(read_output["type"], "object", "read: {read_output}");
}

#[test]
fn lists_tools_with_hints_and_schemas_legacy() {
    lists_tools_with_hints_and_schemas(Mode::Legacy);
}

#[test]
fn lists_tools_with_hints_and_schemas_auto() {
    lists_tools_with_hints_and_schemas(Mode::Auto);
}

/// The calls every transport must answer the same way.
pub(crate) fn call_config() -> Value {
    json!([
        ["read", {"path": "notes.txt"}],
        ["read", {"path": "pixel.png"}],
        ["read", {"path": "/etc/shadow"}],
        ["bash", {"command": "cat /etc/shadow"}],
        ["bash", {"command": "shutdown -h now"}],
        ["no_such_tool", {}],
        ["read", {}],
        ["read", {"path": "notes.txt", "bogus": 1}],
    ])
}

/// Writes the files `call_config` reads.
pub(crate) fn call_files(p: &Project) {
    p.write("notes.txt", "alpha\nbeta\n");
    p.write("pixel.png", pixel());
}

/// Judges the observations of `call_config`'s calls.
pub(crate) fn check_calls(observed: &Value) {
    let results = observed["results"].as_array().unwrap();
    let [
        read,
        png,
        shadow,
        bash_shadow,
        bash_denied,
        unknown,
        missing,
        extra,
    ] = results.as_slice()
    else {
        panic!("expected 8 results: {observed}");
    };

    // A text read: numbered lines, and structured facts the SDK accepted
    // (it validates structuredContent against the outputSchema and raises
    // when they disagree, which would show up here as `raised`).
    assert_eq!(read["raised"], Value::Null, "{read}");
    assert_eq!(read["is_error"], false);
    assert_eq!(text(read), "     1\talpha\n     2\tbeta\n");
    let facts = &read["structured"];
    assert_eq!(
        json!({"path": facts["path"], "total_lines": facts["total_lines"], "sha256": facts["sha256"]}),
        json!({
            "path": "notes.txt",
            "total_lines": 2,
            // sha256 of "alpha\nbeta\n"
            "sha256": "e49c81e2d2f84e259d40e2fb8192f3bcd198b355184845d76d8f58807d0d78ee",
        })
    );

    // An image comes back as image content with the file's bytes.
    assert_eq!(png["raised"], Value::Null, "{png}");
    let image = png["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["type"] == "image")
        .unwrap_or_else(|| panic!("no image content: {png}"));
    assert_eq!(
        (image["mime_type"].as_str(), image["bytes"].as_str()),
        (Some("image/png"), Some(PIXEL_PNG))
    );

    // Refusals are tool errors that name the layer.
    assert_eq!(shadow["is_error"], true, "{shadow}");
    assert!(
        text(shadow).starts_with("denied by the paths policy: "),
        "{shadow}"
    );
    assert!(
        text(shadow).contains("repeating it will not help"),
        "{shadow}"
    );
    // The policy lets `cat /etc/shadow` through to the sandbox, which must
    // not let it read the file (it is masked, and the user is unprivileged).
    let out = text(bash_shadow);
    assert!(
        bash_shadow["is_error"] == true || bash_shadow["structured"]["exit_code"] != 0,
        "{bash_shadow}"
    );
    assert!(!out.contains("root:"), "{out}");
    assert_eq!(bash_denied["is_error"], true, "{bash_denied}");
    assert!(
        text(bash_denied).starts_with("denied by the commands policy: "),
        "{bash_denied}"
    );

    // An unknown tool is a protocol error, raised by the SDK.
    assert_eq!(unknown["raised"]["type"], "MCPError", "{unknown}");
    assert_eq!(unknown["raised"]["code"], -32602, "{unknown}");
    assert!(
        unknown["raised"]["message"]
            .as_str()
            .unwrap()
            .contains("no_such_tool"),
        "{unknown}"
    );

    // Bad arguments are tool errors that say what to fix.
    for bad in [missing, extra] {
        assert_eq!(bad["is_error"], true, "{bad}");
        let said = text(bad);
        assert!(said.starts_with("invalid arguments: "), "{said}");
        assert!(said.contains("Fix the arguments"), "{said}");
    }
    assert!(text(missing).contains("path"), "{missing}");
    assert!(text(extra).contains("bogus"), "{extra}");
}

fn calls_over_stdio(mode: Mode) {
    let p = Project::new();
    call_files(&p);
    let mut config = p.stdio(mode, &[]);
    config["calls"] = call_config();
    let observed = scenario(p.base(), "calls", &config);
    assert_eq!(observed["protocol_version"], mode.protocol());
    check_calls(&observed);
}

#[test]
fn calls_over_stdio_legacy() {
    calls_over_stdio(Mode::Legacy);
}

#[test]
fn calls_over_stdio_auto() {
    calls_over_stdio(Mode::Auto);
}

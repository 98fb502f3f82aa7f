//! `toolgate tools NAME`: one tool's description and arguments, for a user
//! who wants to call it without reading its source.

use pretty_assertions::assert_eq;

use super::*;

#[test]
fn tools_name_shows_the_description_and_the_arguments_as_a_table() {
    let s = Sandbox::new();
    let o = s.run(&["--demo", "tools", "demo_echo"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "tool         demo_echo\n\
         class        read\n\
         idempotency  -\n\
         group        group:demo\n\
         status       active\n\
         \n\
         Returns `text`, `times` times. Demonstration tool: touches nothing.\n\
         \n\
         arguments:\n  \
           NAME   TYPE             REQUIRED  DEFAULT  DESCRIPTION\n  \
           text   string           yes       -        Text to return.\n  \
           times  integer or null  no        null     How many times.\n\
         \n\
         the whole schema: toolgate tools demo_echo --json\n"
    );

    // An inactive tool says why; a built-in one shows its facts too, and
    // the fields of nested objects.
    let o = s.run(&["--demo", "tools", "demo_wipe"]);
    assert!(
        stdout(&o).contains(
            "status       inactive: effect class destructive exceeds the policy cap \
             mutate-irreversible\n"
        ),
        "{}",
        stdout(&o)
    );
    let o = s.run(&["tools", "edit"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    let rows: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split_whitespace().take(4).collect())
        .collect();
    for row in [
        vec!["class", "mutate-reversible"],
        vec!["path", "string", "yes", "-"],
        vec!["replace_all", "boolean", "no", "false"],
        vec!["edits[].old_text", "string", "yes", "-"],
        vec!["facts", "(structured", "result,", "`call"],
        vec!["sha256", "string", "yes", "-"],
    ] {
        assert!(rows.contains(&row), "no row {row:?} in\n{text}");
    }
    assert!(!text.contains("\"properties\""), "raw JSON:\n{text}");
}

#[test]
fn tools_name_json_is_the_whole_spec_with_its_status() {
    let s = Sandbox::new();
    let o = s.run(&["tools", "read", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let spec: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (
            &spec["name"],
            &spec["effect_class"],
            &spec["group"],
            &spec["active"],
            &spec["deferred"],
            &spec["input_schema"]["required"],
            &spec["output_schema"]["type"],
        ),
        (
            &json!("read"),
            &json!("read"),
            &json!("group:fs"),
            &json!(true),
            &json!(false),
            &json!(["path"]),
            &json!("object"),
        )
    );
    assert!(
        spec["description"]
            .as_str()
            .unwrap()
            .starts_with("Read a file")
    );
    assert_eq!(spec["input_schema"]["properties"]["path"]["type"], "string");
}

#[test]
fn an_unknown_tool_name_is_an_error_with_a_suggestion() {
    let s = Sandbox::new();
    for args in [&["tools", "raed"][..], &["tools", "raed", "--json"]] {
        let o = s.run(args);
        assert_eq!(
            (o.status.code(), stdout(&o), stderr(&o)),
            (
                Some(2),
                String::new(),
                "toolgate: unknown tool `raed`; did you mean `read`? (`toolgate tools` lists \
                 them all)\n"
                    .to_owned()
            ),
            "{args:?}"
        );
    }
}

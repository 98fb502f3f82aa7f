//! A misspelt tool, group or field is an error with a did-you-mean, never a
//! server that silently exposes fewer tools.

use pretty_assertions::assert_eq;

use super::*;

#[test]
fn unknown_names_in_tools_access_and_rules_are_errors_with_a_hint() {
    let s = Sandbox::new();
    for (args, expected) in [
        (
            vec!["mcp", "--tools", "raed,grep"],
            "unknown tool `raed` in --tools; did you mean `read`?",
        ),
        (
            vec!["mcp", "--tools", "group:fss"],
            "unknown group `group:fss` in --tools; did you mean `group:fs`?",
        ),
    ] {
        let o = s.run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(expected), "{args:?}: {}", stderr(&o));
        // The server never started: nothing on the protocol channel.
        assert_eq!(stdout(&o), "", "{args:?}");
    }
    s.write(
        "home/.config/toolgate/config.toml",
        "[access]\ndeny = [\"bsah\"]\n",
    );
    let o = s.run(&["tools"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("unknown tool `bsah` in [access] deny; did you mean `bash`?"),
        "{}",
        stderr(&o)
    );
    s.write(
        "home/.config/toolgate/config.toml",
        "[[rules]]\npattern = \"bash(git push*)\"\naction = \"deny\"\n",
    );
    let o = s.run(&["tools"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("bash(git push*)"), "{}", stderr(&o));
}

#[test]
fn an_unknown_argument_field_names_the_field_meant_or_lists_them() {
    let s = Sandbox::new();
    let o = s.run(&["call", "read", r#"{"paht": "README.md"}"#]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("unknown field `paht`; did you mean `path`?"),
        "{}",
        stderr(&o)
    );
    let o = s.run(&["call", "memory_read", r#"{"heading": "Build"}"#]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("unknown field `heading`; the fields are:"),
        "{}",
        stderr(&o)
    );
}

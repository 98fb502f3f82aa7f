//! Attack: probing a narrowed configuration with near-misses of tool names
//! (`bahs`, `wirte`) to learn, from the did-you-mean, which tools it hides.
//! A hint names only a tool the caller could call; a visible tool is still
//! suggested.

use pretty_assertions::assert_eq;

use super::*;

/// `toolgate ARGS` in the project: (exit code, stdout, stderr).
fn run(s: &Sandbox, args: &[&str]) -> (Option<i32>, String, String) {
    let o = s.run(args);
    (o.status.code(), stdout(&o), stderr(&o))
}

fn unknown(name: &str, hint: &str) -> (Option<i32>, String, String) {
    (
        Some(2),
        String::new(),
        format!("toolgate: unknown tool `{name}`{hint}\n"),
    )
}

#[test]
fn call_under_a_preset_suggests_only_the_presets_tools() {
    let s = Sandbox::new();
    // The readonly preset leaves write, edit, bash ... inactive.
    for name in ["wirte", "bahs", "edti"] {
        assert_eq!(
            run(&s, &["call", "--preset", "readonly", name, "{}"]),
            unknown(name, ""),
            "{name}"
        );
    }
    assert_eq!(
        run(&s, &["call", "--preset", "readonly", "raed", "{}"]),
        unknown("raed", "; did you mean `read`?")
    );
    // Without the preset the same typo names the tool meant.
    assert_eq!(
        run(&s, &["call", "wirte", "{}"]),
        unknown("wirte", "; did you mean `write`?")
    );
}

#[test]
fn call_under_access_lists_suggests_only_what_they_let_through() {
    let s = Sandbox::new();
    // The user's deny list hides bash.
    s.write(
        "home/.config/toolgate/config.toml",
        "[access]\ndeny = [\"bash\"]\n",
    );
    assert_eq!(run(&s, &["call", "bahs", "{}"]), unknown("bahs", ""));
    assert_eq!(
        run(&s, &["call", "grpe", "{}"]),
        unknown("grpe", "; did you mean `grep`?")
    );
    // An untrusted project file narrows to its allow list.
    std::fs::remove_file(s.dir.path().join("home/.config/toolgate/config.toml")).unwrap();
    s.write(
        "project/toolgate.toml",
        "[access]\nallow = [\"read\", \"grep\"]\n",
    );
    assert_eq!(run(&s, &["call", "wirte", "{}"]), unknown("wirte", ""));
    assert_eq!(
        run(&s, &["call", "raed", "{}"]),
        unknown("raed", "; did you mean `read`?")
    );
}

#[test]
fn tools_name_suggests_like_the_pipeline_and_still_shows_an_exact_name() {
    let s = Sandbox::new();
    let listed = " (`toolgate tools` lists them all)";
    assert_eq!(
        run(&s, &["tools", "--preset", "readonly", "wirte"]),
        unknown("wirte", listed)
    );
    assert_eq!(
        run(&s, &["tools", "--preset", "readonly", "raed"]),
        unknown("raed", &format!("; did you mean `read`?{listed}"))
    );
    // The operator's own listing shows every tool, with why it is inactive.
    let (code, out, err) = run(&s, &["tools", "--preset", "readonly", "write"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("status       inactive: not in the readonly tool preset"),
        "{out}"
    );
}

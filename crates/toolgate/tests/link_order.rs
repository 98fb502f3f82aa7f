//! `toolgate.order`, the functions a release build links together at the
//! front of the code (crates/toolgate/build.rs, scripts/orderfile): the
//! linker reads one symbol name per line and silently skips what it does
//! not know, so a list that lost its phases or was cut short still builds and
//! only shows up as memory. These checks catch that before a benchmark does.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;

/// The list's phases in order: each `# phase N: what` line and the names
/// under it.
fn phases() -> Vec<(String, Vec<String>)> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("toolgate.order");
    let text = std::fs::read_to_string(&path).expect("read toolgate.order");
    let mut phases: Vec<(String, Vec<String>)> = Vec::new();
    for line in text.lines() {
        if let Some(comment) = line.strip_prefix('#') {
            if let Some((_, what)) = comment
                .split_once(": ")
                .filter(|_| comment.starts_with(" phase "))
            {
                phases.push((what.to_owned(), Vec::new()));
            }
            continue;
        }
        let (_, names) = phases
            .last_mut()
            .expect("a name before the first `# phase` line");
        names.push(line.to_owned());
    }
    phases
}

#[test]
fn every_line_is_one_symbol_name_listed_once() {
    let mut seen = HashSet::new();
    for (phase, names) in phases() {
        for name in names {
            assert!(!name.is_empty(), "an empty line in phase {phase:?}");
            assert!(
                !name.contains(char::is_whitespace),
                "not one name in phase {phase:?}: {name:?}"
            );
            assert!(seen.insert(name.clone()), "{name} is listed twice");
        }
    }
    assert!(
        seen.len() > 2000,
        "only {} names: the list was cut short",
        seen.len()
    );
}

#[test]
fn each_phase_holds_the_functions_only_it_runs() {
    // Mangled path prefixes (`_ZN` + length-prefixed path segments) of
    // functions that run in one phase and in none before it.
    let expected: [(&str, &[&str]); 7] = [
        (
            "the start",
            &["_ZN8toolgate4main", "_ZN12toolgate_mcp6server11serve_stdio"],
        ),
        ("read and ls", &["_ZN14toolgate_tools4read"]),
        ("sandboxed commands", &["_ZN14toolgate_tools4bash"]),
        ("find and grep", &["_ZN14toolgate_tools6search"]),
        (
            "write, edit, apply_patch",
            &["_ZN14toolgate_tools11apply_patch"],
        ),
        ("memory tools and refusals", &["_ZN14toolgate_tools6memory"]),
        // Run by the processes a server starts, not by the server: last, so
        // that a server does not map them.
        (
            "stage 2 and one-shot sandboxes",
            &["_ZN16toolgate_sandbox6stage2", "_ZN8toolgate7sandbox"],
        ),
    ];
    let phases = phases();
    let names: Vec<&str> = phases.iter().map(|(what, _)| what.as_str()).collect();
    let wanted: Vec<&str> = expected.iter().map(|(what, _)| *what).collect();
    assert_eq!(names, wanted, "the list's phases");
    for ((what, listed), (_, prefixes)) in phases.iter().zip(expected) {
        for prefix in prefixes {
            assert!(
                listed.iter().any(|name| name.starts_with(prefix)),
                "phase {what:?} lists no function under {prefix}"
            );
        }
    }
}

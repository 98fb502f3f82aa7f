//! `policy explain` and the file tools agree on paths outside the roots:
//! the temp dir is not allowed by the path layer, since the jail refuses it.

use pretty_assertions::assert_eq;

use super::*;

#[test]
fn explain_of_a_temp_dir_path_outside_the_roots_says_deny_and_names_the_roots() {
    let s = Sandbox::new();
    // The sandbox's directory lies in the temp dir, and outside the root.
    let outside = s.write("outside.txt", "outside\n");
    assert!(outside.starts_with(std::env::temp_dir()));
    let root = std::fs::canonicalize(s.project()).unwrap();
    let args = json!({ "path": outside }).to_string();
    let o = s.run(&["policy", "explain", "read", &args]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let said = stdout(&o);
    let decision = said
        .lines()
        .find(|l| l.starts_with("decision:"))
        .unwrap_or_default();
    assert!(decision.starts_with("decision: deny"), "{said}");
    assert!(
        decision.contains(&format!("outside the workspace roots ({})", root.display())),
        "{said}"
    );
    // The call itself is refused the same way, and reads nothing.
    let o = s.run(&["call", "read", &args]);
    assert_eq!(o.status.code(), Some(5), "{}", stdout(&o));
    assert!(!stdout(&o).contains("outside\n"), "{}", stdout(&o));
    assert!(
        stderr(&o).contains(&format!("outside the workspace roots ({})", root.display())),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_paths_section_keeps_the_temp_dir_out_unless_it_says_otherwise() {
    let s = Sandbox::new();
    let outside = s.write("outside.txt", "outside\n");
    let args = json!({ "path": outside }).to_string();
    let decision = |s: &Sandbox| {
        let o = s.run(&["policy", "explain", "read", &args]);
        stdout(&o)
            .lines()
            .find(|l| l.starts_with("decision:"))
            .unwrap_or_default()
            .to_owned()
    };
    s.write(
        "home/.config/toolgate/config.toml",
        "[paths]\ndeny = [\"**/secrets/**\"]\n",
    );
    assert!(
        decision(&s).starts_with("decision: deny"),
        "{}",
        decision(&s)
    );
    s.write(
        "home/.config/toolgate/config.toml",
        "[paths]\ntemp_dir = true\n",
    );
    assert!(
        decision(&s).starts_with("decision: allow"),
        "{}",
        decision(&s)
    );
}

//! `toolgate prompt` through the real binary: AGENTS.md, SOUL.md, TOOLS.md
//! and the runtime facts, as markdown and as JSON parts.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::Output;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use common::toolgate;

fn run(dir: &Path, args: &[&str]) -> Output {
    let o = toolgate(dir, &dir.join("project"))
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    o
}

fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("home")).unwrap();
    std::fs::create_dir_all(dir.path().join("project")).unwrap();
    dir
}

#[test]
fn markdown_has_the_parts_in_order_with_only_active_tools() {
    let dir = project();
    let root = std::fs::canonicalize(dir.path().join("project")).unwrap();
    std::fs::write(root.join("AGENTS.md"), "Use `just test`.\n").unwrap();
    let o = run(
        dir.path(),
        &["--policy", "readonly", "prompt", "--session", "s-42"],
    );
    let md = String::from_utf8(o.stdout).unwrap();
    let headings: Vec<&str> = md.lines().filter(|l| l.starts_with("# ")).collect();
    assert_eq!(
        headings,
        [
            "# Project instructions (AGENTS.md)",
            "# Persona (SOUL.md)",
            "# Tools (TOOLS.md)",
            "# Runtime"
        ]
    );
    assert!(
        md.starts_with("# Project instructions (AGENTS.md)\n\nUse `just test`.\n"),
        "{md}"
    );
    assert!(md.contains("\n### read\n"), "{md}");
    // Inactive under readonly: not offered.
    assert!(
        !md.contains("\n### write\n") && !md.contains("\n### bash\n"),
        "{md}"
    );
    assert!(md.contains("- agent: cli\n- session: s-42\n"), "{md}");
    assert!(
        md.contains(&format!("- working directory: {}\n", root.display())),
        "{md}"
    );
    assert!(
        md.contains(&format!("  - {} (rw)\n", root.display())),
        "{md}"
    );
    assert!(
        md.ends_with("- elevated: off (not enabled by the operator)\n"),
        "{md}"
    );
}

#[test]
fn json_gives_each_part_separately() {
    let dir = project();
    let root = dir.path().join("project");
    std::fs::write(root.join("SOUL.md"), "You are a pirate.\n").unwrap();
    std::fs::write(root.join("toolgate.toml"), "[tools]\nelevated = true\n").unwrap();
    common::trust(dir.path(), &root.join("toolgate.toml"));
    let o = run(dir.path(), &["prompt", "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["agents"], json!(null));
    assert_eq!(
        v["soul"],
        json!({"file": "SOUL.md", "source": "workspace", "text": "You are a pirate.\n", "truncated": false})
    );
    assert_eq!(v["tools"]["source"], json!("generated"));
    assert!(
        v["tools"]["text"]
            .as_str()
            .unwrap()
            .contains("\n### bash\n")
    );
    // Enabled but above the standard cap: not offered, and the facts say why.
    assert!(
        !v["tools"]["text"]
            .as_str()
            .unwrap()
            .contains("### elevated")
    );
    assert_eq!(
        v["runtime"]["elevated"],
        json!({"state": "inactive", "reason": "effect class destructive exceeds the policy cap mutate-irreversible"})
    );
    assert!(
        v["runtime"]["session_id"]
            .as_str()
            .unwrap()
            .starts_with("session-")
    );
    assert_eq!(v["runtime"]["roots"][0]["access"], json!("rw"));
    assert!(
        ["bwrap", "landlock", "none"].contains(&v["runtime"]["sandbox_backend"].as_str().unwrap())
    );
    assert!(
        v["markdown"]
            .as_str()
            .unwrap()
            .starts_with("# Persona (SOUL.md)\n\nYou are a pirate.\n")
    );
}

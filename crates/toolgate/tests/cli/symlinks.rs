//! Symlinks with absolute targets through `toolgate call`: one that stays
//! inside the root works like any path, one that leaves it is refused by name
//! and nothing outside changes.

use pretty_assertions::assert_eq;

use super::*;

fn call(s: &Sandbox, tool: &str, args: &Value) -> Output {
    s.run(&["call", tool, &args.to_string(), "--json"])
}

#[test]
fn absolute_symlinks_inside_the_root_are_read_edited_and_written() {
    let s = Sandbox::new();
    let project = std::fs::canonicalize(s.project()).unwrap();
    s.write("project/docs/v2/guide.md", "version two\n");
    std::os::unix::fs::symlink(project.join("docs/v2"), project.join("docs/current")).unwrap();
    std::os::unix::fs::symlink(project.join("docs/v2/guide.md"), project.join("GUIDE.md")).unwrap();

    let o = call(&s, "read", &json!({"path": "GUIDE.md"}));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let body: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(body["content"][0]["text"], "     1\tversion two\n");

    let o = call(
        &s,
        "edit",
        &json!({"path": "docs/current/guide.md", "old_text": "two", "new_text": "three"}),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = call(
        &s,
        "write",
        &json!({"path": "docs/current/new.md", "content": "new\n"}),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = call(
        &s,
        "write",
        &json!({"path": "GUIDE.md", "content": "four\n"}),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));

    assert_eq!(
        std::fs::read_to_string(project.join("docs/v2/guide.md")).unwrap(),
        "four\n"
    );
    assert_eq!(
        std::fs::read_to_string(project.join("docs/v2/new.md")).unwrap(),
        "new\n"
    );
    // The links are still links.
    for link in ["GUIDE.md", "docs/current"] {
        let meta = std::fs::symlink_metadata(project.join(link)).unwrap();
        assert!(meta.is_symlink(), "{link}");
    }
}

#[test]
fn absolute_symlinks_out_of_the_root_are_refused_by_name() {
    let s = Sandbox::new();
    let project = s.project();
    let sibling = s.dir.path().join("sibling");
    s.write("sibling/secret.txt", "outside\n");
    std::os::unix::fs::symlink(&sibling, project.join("shared")).unwrap();
    std::os::unix::fs::symlink("/etc", project.join("etc")).unwrap();
    std::os::unix::fs::symlink(sibling.join("secret.txt"), project.join("secret")).unwrap();
    let planted = format!("toolgate-symlink-test-{}", std::process::id());

    for (tool, args, link) in [
        ("read", json!({"path": "shared/secret.txt"}), "shared"),
        ("read", json!({"path": "secret"}), "secret"),
        ("read", json!({"path": "etc/hostname"}), "etc"),
        (
            "write",
            json!({"path": "shared/new.txt", "content": "pwned"}),
            "shared",
        ),
        (
            "write",
            json!({"path": "secret", "content": "pwned"}),
            "secret",
        ),
        (
            "write",
            json!({"path": format!("etc/{planted}"), "content": "pwned"}),
            "etc",
        ),
        (
            "edit",
            json!({"path": "shared/secret.txt", "old_text": "outside", "new_text": "pwned"}),
            "shared",
        ),
    ] {
        let o = call(&s, tool, &args);
        assert_eq!(o.status.code(), Some(1), "{tool} {args}: {}", stdout(&o));
        let message = format!("the symlink `{link}` leads outside the root");
        // With --json the error is the JSON on stdout.
        let said = stdout(&o);
        assert!(said.contains(&message), "{tool} {args}: {said}");
    }
    assert_eq!(
        std::fs::read_to_string(sibling.join("secret.txt")).unwrap(),
        "outside\n"
    );
    let entries: Vec<_> = std::fs::read_dir(&sibling).unwrap().collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert!(!std::path::Path::new("/etc").join(&planted).exists());
}

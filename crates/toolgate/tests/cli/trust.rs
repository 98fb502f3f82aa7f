//! Attacks on toolgate's own configuration: an agent that rewrites
//! `toolgate.toml`, and a cloned project whose `toolgate.toml` loosens the
//! sandbox. A project file tightens on its own; it loosens only once the
//! user trusted exactly its content.

use pretty_assertions::assert_eq;

use super::*;

const WEAKENING: &str = "[sandbox]\nbackend = \"none\"\n";

fn bash(s: &Sandbox, command: &str) -> Output {
    s.run(&["call", "bash", &json!({ "command": command }).to_string()])
}

#[test]
fn the_file_tools_cannot_write_toolgates_configuration() {
    let s = Sandbox::new();
    for path in [
        "toolgate.toml",
        "sub/toolgate.toml",
        "./sub/../toolgate.toml",
    ] {
        let args = json!({"path": path, "content": WEAKENING}).to_string();
        let o = s.run(&["call", "write", &args]);
        assert_eq!(o.status.code(), Some(1), "{path}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("is protected"),
            "{path}: {}",
            stderr(&o)
        );
        assert!(
            stderr(&o).contains("toolgate's own configuration"),
            "{}",
            stderr(&o)
        );
    }
    // Nor by moving a file onto it, or adding it, with a patch.
    s.write("project/staged.txt", WEAKENING);
    for patch in [
        "*** Begin Patch\n*** Update File: staged.txt\n*** Move to: toolgate.toml\n@@\n [sandbox]\n*** End Patch\n",
        "*** Begin Patch\n*** Add File: sub/toolgate.toml\n+[sandbox]\n+backend = \"none\"\n*** End Patch\n",
    ] {
        let args = json!({ "patch": patch }).to_string();
        let o = s.run(&["call", "apply_patch", &args]);
        assert_eq!(o.status.code(), Some(1), "{patch}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("is protected"),
            "{patch}: {}",
            stderr(&o)
        );
    }
    assert_eq!(
        std::fs::read_to_string(s.project().join("staged.txt")).unwrap(),
        WEAKENING
    );
    assert!(!s.project().join("toolgate.toml").exists());
    assert!(!s.project().join("sub/toolgate.toml").exists());
}

#[test]
fn a_sandboxed_command_cannot_write_toolgates_configuration() {
    let s = Sandbox::new();
    // A new one is no mask's business (none is put in the host's project
    // for it): an untrusted project file only tightens, so the next
    // command still runs sandboxed.
    let o = bash(
        &s,
        "printf '[sandbox]\\nbackend = \"none\"\\n' > toolgate.toml",
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let outside = s.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let marker = outside.join("marker");
    let o = bash(&s, &format!("touch {}", marker.display()));
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(!marker.exists(), "the command ran outside the sandbox");
    assert!(stderr(&o).contains("is not trusted"), "{}", stderr(&o));
    std::fs::remove_file(s.project().join("toolgate.toml")).unwrap();
    // An existing file is read-only inside, unchanged outside.
    s.write("project/toolgate.toml", "policy = \"standard\"\n");
    let o = bash(
        &s,
        "cat toolgate.toml; echo 'policy = \"permissive\"' >> toolgate.toml",
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("policy = \"standard\""),
        "{}",
        stdout(&o)
    );
    assert_eq!(
        std::fs::read_to_string(s.project().join("toolgate.toml")).unwrap(),
        "policy = \"standard\"\n"
    );
}

#[test]
fn an_untrusted_project_file_cannot_turn_the_sandbox_off() {
    let s = Sandbox::new();
    let outside = s.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let marker = outside.join("marker");
    let touch = format!("touch {}", marker.display());
    s.write(
        "project/toolgate.toml",
        "policy = \"permissive\"\n[sandbox]\nbackend = \"none\"\n[tools]\nelevated = true\n",
    );
    let o = bash(&s, &touch);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(!marker.exists(), "the command ran outside the sandbox");
    let warning = stderr(&o);
    for ignored in [
        "is not trusted",
        "policy = \"permissive\"",
        "[sandbox] backend = \"none\"",
        "[tools] elevated = true",
        "toolgate trust ",
    ] {
        assert!(warning.contains(ignored), "{ignored}: {warning}");
    }
    // `elevated` stayed unregistered.
    let o = s.run(&["call", "elevated", r#"{"command": "true"}"#]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    // The policy preset stayed standard.
    let o = s.run(&["tools"]);
    assert!(stdout(&o).starts_with("policy standard"), "{}", stdout(&o));
}

#[test]
fn trusting_exactly_this_content_lets_it_loosen_and_any_change_voids_it() {
    let s = Sandbox::new();
    let outside = s.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let file = s.write("project/toolgate.toml", WEAKENING);
    let o = s.run(&["trust"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("[sandbox] backend = \"none\""),
        "{}",
        stdout(&o)
    );

    let marker = outside.join("trusted");
    let o = bash(&s, &format!("touch {}", marker.display()));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(marker.exists(), "a trusted file's backend was not applied");
    assert!(!stderr(&o).contains("not trusted"), "{}", stderr(&o));

    // One byte more and the trust is gone.
    std::fs::write(&file, format!("{WEAKENING}\n")).unwrap();
    let marker = outside.join("changed");
    let o = bash(&s, &format!("touch {}", marker.display()));
    assert!(!marker.exists(), "a changed file kept its trust");
    assert!(
        stderr(&o).contains("changed since it was trusted"),
        "{}",
        stderr(&o)
    );

    let o = s.run(&["trust", "--list", "--json"]);
    let list: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(list[0]["status"], "changed since trusted (not applied)");
    let o = s.run(&["trust", "--revoke"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = s.run(&["trust", "--list", "--json"]);
    assert_eq!(
        serde_json::from_slice::<Value>(&o.stdout).unwrap(),
        json!([])
    );
    let o = s.run(&["trust", "--revoke"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn an_untrusted_allow_rule_cannot_lift_the_users_ask() {
    let s = Sandbox::new();
    s.write(
        "home/.config/toolgate/config.toml",
        "[[rules]]\npattern = \"write\"\naction = \"ask\"\n\n[approvals]\nwait = \"0s\"\n",
    );
    s.write(
        "project/toolgate.toml",
        "[[rules]]\npattern = \"write\"\naction = \"allow\"\n",
    );
    let args = json!({"path": "a.txt", "content": "x"}).to_string();
    let o = s.run(&["call", "write", &args]);
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("the rule that allows `write`"),
        "{}",
        stderr(&o)
    );
    assert!(!s.project().join("a.txt").exists());
    // Trusted, the project's rule is the user's word too.
    assert!(s.run(&["trust"]).status.success());
    let o = s.run(&["call", "write", &args]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(s.project().join("a.txt").exists());
}

#[test]
fn an_untrusted_file_still_tightens() {
    let s = Sandbox::new();
    s.write(
        "project/toolgate.toml",
        "policy = \"strict\"\n[access]\ndeny = [\"bash\"]\n[tools]\nmax_timeout = 5\n",
    );
    let o = bash(&s, "true");
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("denied by the access policy entry `bash`"),
        "{}",
        stderr(&o)
    );
    // Nothing was ignored, so nothing is said.
    assert!(!stderr(&o).contains("not trusted"), "{}", stderr(&o));
    let o = s.run(&["tools"]);
    assert!(stdout(&o).starts_with("policy strict"), "{}", stdout(&o));
}

#[test]
fn the_trust_records_are_out_of_the_agents_reach() {
    let s = Sandbox::new();
    // A data directory inside the project, named through a symlink: the
    // agent must not forge trust by the real path either.
    let data = s.project().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let link = s.project().join("data-link");
    std::os::unix::fs::symlink(&data, &link).unwrap();
    let env = [("XDG_DATA_HOME", link.to_str().unwrap())];
    s.write("project/toolgate.toml", "[tools]\nmax_timeout = 900\n");
    let o = s.run_in(&s.project(), &["trust"], &env);
    assert!(o.status.success(), "{}", stderr(&o));
    let records = data.join("toolgate/trusted.json");
    let before = std::fs::read_to_string(&records).unwrap();
    let args = json!({"path": "data/toolgate/trusted.json", "content": "{}"}).to_string();
    let o = s.run_in(&s.project(), &["call", "write", &args], &env);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    // The data dir inside the root is concealed, which refuses writes too.
    assert!(
        stderr(&o).contains("is toolgate's own state"),
        "{}",
        stderr(&o)
    );
    let script = json!({"command": "echo '{}' > data/toolgate/trusted.json"}).to_string();
    let o = s.run_in(&s.project(), &["call", "bash", &script], &env);
    assert_eq!(o.status.code(), Some(3), "{}", stdout(&o));
    assert_eq!(std::fs::read_to_string(&records).unwrap(), before);
}

//! The install gate and the execute gate: denied, blocked until a person
//! approves from another process, and an approved install that still has
//! to pass the execute gate.

use pretty_assertions::assert_eq;

use super::*;

#[test]
fn an_install_is_denied_then_blocked_then_approved_and_its_runs_pass_their_own_gate() {
    let s = Shelf::new();
    s.add("cowsay", COWSAY);
    // deny: refused at once, nothing asked, nothing installed.
    s.policy("deny", "approval");
    let denied = s.json(4, &["catalog", "install", "cowsay", "--json"]);
    assert_eq!(denied["outcome"], "denied");
    assert!(
        denied["detail"]
            .as_str()
            .unwrap()
            .contains("the catalogue's install gate is `deny`"),
        "{denied:#}"
    );
    assert_eq!(
        s.json(0, &["approvals", "list", "--json"]),
        serde_json::json!([])
    );
    // approval: blocked with the request a person is asked.
    s.policy("approval", "approval");
    let blocked = s.json(3, &["catalog", "install", "cowsay", "--json"]);
    assert_eq!(blocked["outcome"], "blocked");
    let request = blocked["request_id"].as_str().unwrap().to_owned();
    assert_eq!(s.state("cowsay"), "shelved");
    assert!(s.install_dirs("cowsay").is_empty());
    let listed = s.json(0, &["approvals", "show", &request, "--json"]);
    assert_eq!(listed["request"]["tool"], "catalog_install", "{listed:#}");
    assert_eq!(
        listed["request"]["arguments"]["version"], "1.6.0",
        "{listed:#}"
    );
    // A person approves from another process: the install goes through.
    s.approve(&request);
    let installed = s.json(0, &["catalog", "install", "cowsay", "--json"]);
    assert_eq!(installed["outcome"], "ran", "{installed:#}");
    assert_eq!(
        installed["approval_id"]
            .as_str()
            .map(|g| g.starts_with("grt_")),
        Some(true)
    );
    assert_eq!(s.state("cowsay"), "installed");
    // Approving the install did not approve running it.
    let run = s.run(&["catalog", "run", "cowsay", "--json", "--", "moo"]);
    assert_eq!(run.status.code(), Some(3), "{}", stderr(&run));
    let run: Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(run["outcome"], "blocked");
    assert_eq!(run["stdout"], Value::Null, "{run:#}");
    let run_request = run["request_id"].as_str().unwrap().to_owned();
    assert_ne!(run_request, request);
    s.approve(&run_request);
    let ran = s.expect(0, &["catalog", "run", "cowsay", "--", "moo"]);
    assert!(ran.contains("< moo >"), "{ran}");
    // The grant covered exactly that argv: another is asked about again.
    assert_eq!(
        s.run(&["catalog", "run", "cowsay", "--", "baa"])
            .status
            .code(),
        Some(3)
    );
    // Every install and run is recorded, with its grant or request.
    let shown = s.json(0, &["catalog", "show", "cowsay", "--json"]);
    let outcomes: Vec<(&str, &str)> = shown["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["kind"].as_str().unwrap(), r["outcome"].as_str().unwrap()))
        .collect();
    assert_eq!(
        outcomes,
        [
            ("install", "denied"),
            ("install", "blocked"),
            ("install", "ran"),
            ("health", "ran"),
            ("run", "blocked"),
            ("run", "ran"),
            ("run", "blocked"),
        ]
    );
}

#[test]
fn a_refusal_refuses_at_once_and_allow_safe_lets_only_safe_runs_through() {
    let s = Shelf::new();
    s.add("sh", SH);
    s.policy("allow_all", "allow_safe");
    s.expect(0, &["catalog", "install", "sh"]);
    // Low risk, no network: allow_safe runs it unasked.
    assert_eq!(
        s.expect(0, &["catalog", "run", "sh", "--", "-c", "echo safe"]),
        "safe\n"
    );
    // The same tool at medium risk is asked about; a person says no.
    s.add("sh", &SH.replace("risk = \"low\"", "risk = \"medium\""));
    let blocked = s.json(
        3,
        &["catalog", "run", "sh", "--json", "--", "-c", "echo risky"],
    );
    let id = blocked["request_id"].as_str().unwrap();
    s.expect(0, &["approvals", "deny", id, "--reason", "not today"]);
    let denied = s.json(
        4,
        &["catalog", "run", "sh", "--json", "--", "-c", "echo risky"],
    );
    assert_eq!(denied["outcome"], "denied");
    assert!(
        denied["reason"].as_str().unwrap().contains("not today"),
        "{denied:#}"
    );
}

#[test]
fn the_question_is_the_same_under_every_locale() {
    // The scope digest is taken over keys in byte order, never a locale's
    // collation: asked under C and under C.UTF-8 with arguments whose
    // order differs between collations, it is one pending request.
    let s = Shelf::new();
    s.add("sh", SH);
    s.policy("allow_all", "approval");
    s.expect(0, &["catalog", "install", "sh"]);
    let args = ["catalog", "run", "sh", "--json", "--", "-c", "echo Été_a_B"];
    let ask = |locale: &str| -> String {
        let o = s.run_env(&args, &[("LC_ALL", locale), ("LANG", locale)]);
        assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        v["request_id"].as_str().unwrap().to_owned()
    };
    let first = ask("C");
    assert_eq!(ask("C.UTF-8"), first);
    assert_eq!(ask("en_US.UTF-8"), first);
    let pending = s.json(0, &["approvals", "list", "--json"]);
    assert_eq!(pending.as_array().unwrap().len(), 1, "{pending:#}");
}

#[test]
fn a_release_younger_than_the_minimum_age_is_refused_unless_the_manifest_vouches_for_it() {
    // 100 000 days: every real release is younger than that.
    let s =
        Shelf::with_config("[catalog]\nmin_release_age = \"100000d\"\ninstall = \"allow_all\"\n");
    s.add("cowsay", COWSAY);
    let denied = s.json(4, &["catalog", "install", "cowsay", "--json"]);
    let detail = denied["detail"].as_str().unwrap();
    assert!(
        detail.contains("cowsay 1.6.0 was published")
            && detail.contains("less than the minimum release age of 100000 days"),
        "{detail}"
    );
    assert_eq!(s.state("cowsay"), "shelved");
    // The manifest states an override for this pin: it installs.
    s.add(
        "cowsay",
        &COWSAY.replace("risk = \"low\"", "risk = \"low\"\nmin_release_age_days = 0"),
    );
    let installed = s.json(0, &["catalog", "install", "cowsay", "--json"]);
    assert_eq!(installed["outcome"], "ran", "{installed:#}");
}

#[test]
fn an_untrusted_project_file_cannot_open_the_gates() {
    let s = Shelf::new();
    s.write(
        "project/toolgate.toml",
        "[catalog]\ninstall = \"allow_all\"\nexecute = \"allow_all\"\nmin_release_age = \"0s\"\n",
    );
    let o = s.run(&["catalog", "policy", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let policy: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (&policy["install"], &policy["execute"]),
        (&Value::from("approval"), &Value::from("allow_safe"))
    );
    said(
        &o,
        "[catalog] install = \"allow_all\" (more open than \"approval\")",
    );
    // Tightening applies.
    s.write("project/toolgate.toml", "[catalog]\nexecute = \"deny\"\n");
    let policy = s.json(0, &["catalog", "policy", "--json"]);
    assert_eq!(policy["execute"], "deny");
}

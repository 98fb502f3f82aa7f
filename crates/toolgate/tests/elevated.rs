//! `elevated` through the real `toolgate` binary: off by default, enabled
//! only by the operator's config, inactive under every cap below
//! destructive, and asking before every call under the default rules.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;
use std::process::Output;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use common::toolgate;

struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    fn new(config: Option<&str>) -> Project {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        std::fs::create_dir_all(dir.path().join("project")).unwrap();
        if let Some(text) = config {
            std::fs::write(dir.path().join("project/toolgate.toml"), text).unwrap();
            common::trust(dir.path(), &dir.path().join("project/toolgate.toml"));
        }
        Project { dir }
    }

    fn outside(&self) -> PathBuf {
        std::fs::canonicalize(self.dir.path())
            .unwrap()
            .join("outside.txt")
    }

    fn run(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut cmd = toolgate(self.dir.path(), &self.dir.path().join("project"));
        cmd.args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    }

    /// The `elevated` row of `toolgate tools --json`, if it is registered.
    fn elevated_row(&self, args: &[&str], env: &[(&str, &str)]) -> Option<Value> {
        let mut all = vec!["tools", "--json"];
        all.extend_from_slice(args);
        let o = self.run(&all, env);
        assert!(o.status.success(), "{}", stderr(&o));
        let rows: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap();
        rows.into_iter().find(|r| r["name"] == "elevated")
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const ENABLED: &str = "[tools]\nelevated = true\n";

#[test]
fn it_is_not_registered_by_default() {
    let p = Project::new(None);
    assert_eq!(p.elevated_row(&[], &[]), None);
    assert_eq!(p.elevated_row(&["--policy", "permissive"], &[]), None);
    let p = Project::new(Some("[tools]\nelevated = false\n"));
    assert_eq!(p.elevated_row(&[], &[]), None);
    let o = p.run(
        &[
            "--policy",
            "permissive",
            "call",
            "elevated",
            r#"{"command": "true"}"#,
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("elevated"), "{}", stderr(&o));
}

#[test]
fn enabled_it_is_inactive_under_the_standard_cap() {
    let p = Project::new(Some(ENABLED));
    assert_eq!(
        p.elevated_row(&[], &[]).unwrap(),
        json!({
            "name": "elevated",
            "effect_class": "destructive",
            "idempotency": "at-most-once",
            "group": null,
            "version": null,
            "deferred": false,
            "active": false,
            "reason": "effect class destructive exceeds the policy cap mutate-irreversible",
        })
    );
    let o = p.run(&["call", "elevated", r#"{"command": "true"}"#], &[]);
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    // The environment variable enables it too.
    let p = Project::new(None);
    let row = p
        .elevated_row(&[], &[("TOOLGATE_ELEVATED", "true")])
        .unwrap();
    assert_eq!(row["active"], json!(false));
}

#[test]
fn permissive_makes_it_active_but_every_call_asks() {
    // Nobody answers: the call ends pending at once instead of waiting.
    let p = Project::new(Some(&format!("{ENABLED}[approvals]\nwait = \"0s\"\n")));
    let row = p.elevated_row(&["--policy", "permissive"], &[]).unwrap();
    assert_eq!(
        (row["active"].clone(), row["reason"].clone()),
        (json!(true), json!(null))
    );
    let target = p.outside();
    let command = json!({"command": format!("touch '{}'", target.display())}).to_string();
    let o = p.run(
        &["--policy", "permissive", "call", "elevated", &command],
        &[],
    );
    assert_eq!(o.status.code(), Some(5));
    assert!(
        stderr(&o).starts_with("toolgate: approval apr_")
            && stderr(&o).contains(" is pending; approve it with `toolgate approvals approve apr_"),
        "{}",
        stderr(&o)
    );
    assert!(!target.exists(), "a call nobody approved ran");
    // What the person is asked says why.
    let o = p.run(&["approvals", "list", "--json"], &[]);
    let listed: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        listed[0]["reason"], "`elevated` runs a command on the host, outside the sandbox",
        "{listed}"
    );
}

#[test]
fn allowed_by_the_operator_it_runs_on_the_host_without_the_hosts_secrets() {
    let p = Project::new(Some(
        "policy = \"permissive\"\n[tools]\nelevated = true\n[[rules]]\npattern = \"elevated\"\naction = \"allow\"\n",
    ));
    let target = p.outside();
    let script = format!("echo hi > '{}'; env", target.display());
    let args = json!({"command": script}).to_string();
    let secret = [("TOOLGATE_TEST_SECRET", "hunter2")];
    // bash, in the sandbox, cannot write beside the project.
    let o = p.run(&["call", "bash", &args, "--json"], &secret);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!target.exists(), "bash wrote outside the workspace");
    // elevated, on the host, can; it does not see toolgate's environment.
    let o = p.run(&["call", "elevated", &args, "--json"], &secret);
    assert!(o.status.success(), "{}", stderr(&o));
    let body: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "hi\n");
    let text = body["content"][0]["text"].as_str().unwrap();
    assert!(!text.contains("hunter2"), "{text}");
    assert!(!text.contains("XDG_CONFIG_HOME"), "{text}");
    assert!(
        text.contains("\nPATH=") || text.starts_with("PATH="),
        "{text}"
    );
    assert_eq!(body["structured"]["backend"], json!("host"));
    assert_eq!(body["structured"]["exit_code"], json!(0));
}

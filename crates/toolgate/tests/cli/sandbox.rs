//! `toolgate doctor`, `toolgate sandbox` and roots.

use pretty_assertions::assert_eq;

use super::*;

#[test]
fn doctor_reports_the_probe_the_backend_and_a_working_smoke_test() {
    let s = Sandbox::new();
    let o = s.run(&["doctor", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["backend"], "bwrap");
    assert_eq!(report["probe"]["bwrap"]["user_namespace"], true);
    assert!(report["probe"]["landlock_abi"].as_u64().unwrap() >= 1);
    assert_eq!(report["smoke_test"]["ok"], true, "{report}");
    let o = s.run_in(
        &s.project(),
        &["doctor"],
        &[("TOOLGATE_SANDBOX_BACKEND", "landlock")],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("backend     landlock"),
        "{}",
        stdout(&o)
    );
    let o = s.run_in(
        &s.project(),
        &["doctor"],
        &[("TOOLGATE_SANDBOX_BACKEND", "none")],
    );
    assert!(
        stdout(&o).contains("none: commands run UNSANDBOXED"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn sandbox_runs_a_command_with_only_the_roots_writable() {
    let s = Sandbox::new();
    let outside = s.write("outside/canary", "canary");
    for backend in ["bwrap", "landlock"] {
        let env = [("TOOLGATE_SANDBOX_BACKEND", backend)];
        let o = s.run_in(
            &s.project(),
            &["sandbox", "--", "sh", "-c", "echo made > made.txt; exit 7"],
            &env,
        );
        assert_eq!(o.status.code(), Some(7), "{backend}: {}", stderr(&o));
        assert_eq!(
            std::fs::read_to_string(s.project().join("made.txt")).unwrap(),
            "made\n"
        );
        let script = format!("echo pwned > {}", outside.display());
        let o = s.run_in(&s.project(), &["sandbox", "--", "sh", "-c", &script], &env);
        assert_ne!(o.status.code(), Some(0), "{backend}: wrote outside");
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "canary");
        let o = s.run_in(
            &s.project(),
            &["sandbox", "--", "grep", "CapEff", "/proc/self/status"],
            &env,
        );
        assert_eq!(stdout(&o), "CapEff:\t0000000000000000\n", "{backend}");
    }
    let o = s.run(&["sandbox", "--timeout", "1", "--", "sleep", "30"]);
    assert_eq!(o.status.code(), Some(143), "{}", stderr(&o));
    assert!(stderr(&o).contains("timed out after 1s"), "{}", stderr(&o));
}

#[test]
fn roots_are_portable_hints() {
    let s = Sandbox::new();
    std::fs::create_dir_all(s.project().join("sub/inner")).unwrap();
    let data = s.write("data/file.txt", "x").parent().unwrap().to_owned();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--root", "/etc"],
            "toolgate: --root: root `/etc` is an absolute path, which is not portable",
        ),
        (
            vec!["--root", "../data"],
            "toolgate: --root: root `../data` escapes the caller's working directory",
        ),
        (
            vec!["--root", "nope"],
            "toolgate: --root: root `nope` resolves to",
        ),
        (
            vec!["--root-alias", "data=relative", "tools"],
            "toolgate: --root-alias: root alias `data=relative` is invalid",
        ),
    ];
    for (args, expected) in cases {
        let mut all = args.clone();
        if !all.contains(&"tools") {
            all.push("tools");
        }
        let o = s.run(&all);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).starts_with(expected), "{args:?}: {}", stderr(&o));
    }
    let alias = format!("data={}", data.display());
    let o = s.run(&[
        "--demo",
        "--root-alias",
        &alias,
        "--root",
        "data",
        "--root",
        "sub",
        "policy",
        "explain",
        "demo_touch",
        &format!(r#"{{"path": "{}/file.txt"}}"#, data.display()),
    ]);
    assert!(
        stdout(&o).contains(&format!("(workspace root {})", data.display())),
        "{}",
        stdout(&o)
    );
    // The working directory is no longer a root once roots are given (the
    // project lives under the temp dir, so that allowance is switched off);
    // relative paths start at the first root, for the policy as for the tools.
    s.write("project/toolgate.toml", "[paths]\ntemp_dir = false\n");
    let explain = |path: &str| {
        let args = format!(r#"{{"path": "{path}"}}"#);
        let o = s.run(&[
            "--demo",
            "--root",
            "sub/inner",
            "policy",
            "explain",
            "demo_touch",
            &args,
        ]);
        stdout(&o)
    };
    let inner = std::fs::canonicalize(s.project().join("sub/inner")).unwrap();
    let inside = explain("top.txt");
    assert!(
        inside.contains(&format!("allowed: {}/top.txt", inner.display())),
        "{inside}"
    );
    let outside = explain("../../top.txt");
    assert!(
        outside.contains("is outside the workspace roots"),
        "{outside}"
    );
}

#[test]
fn sandbox_plan_shows_the_ordered_argv_without_running() {
    let s = Sandbox::new();
    let o = s.run(&["sandbox", "--plan", "--", "sh", "-c", "touch ran"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    let root = std::fs::canonicalize(s.project()).unwrap();
    assert!(text.starts_with("backend bwrap\n"), "{text}");
    // An absent protected name: refused by stage 2 where the kernel lets
    // it guard creations, else masked on a placeholder made for the run.
    let claude = if toolgate_sandbox::stage2::creations_guard_supported() {
        format!("--deny-create {}/.claude", root.display())
    } else {
        format!(
            "mount point created for the run and removed after: {}/.claude",
            root.display()
        )
    };
    for line in [
        "--cap-drop ALL".to_owned(),
        "--unshare-net".to_owned(),
        format!("--bind {} {}", root.display(), root.display()),
        claude,
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing `{line}` in\n{text}"
        );
    }
    assert!(text.contains("-- sh -c touch ran"), "{text}");
    assert!(!s.project().join("ran").exists(), "--plan ran the command");
    assert!(
        !s.project().join(".claude").exists(),
        "--plan created a mount point"
    );
}

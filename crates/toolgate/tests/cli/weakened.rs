//! A sandbox weaker than bubblewrap is never silent: `call` and `sandbox`
//! say so at the start, every command result says so, `doctor` names each
//! lost protection and the way back, and `[sandbox] require_bwrap` refuses
//! to start instead.

use pretty_assertions::assert_eq;

use super::*;

const LANDLOCK: [(&str, &str); 1] = [("TOOLGATE_SANDBOX_BACKEND", "landlock")];

/// A PATH like the tests' own, without bubblewrap: a directory of links to
/// every program on PATH but `bwrap`, inside the project (the landlock
/// backend lets commands read only the system directories and the roots).
/// What a machine without the bubblewrap package looks like to toolgate.
fn path_without_bwrap(s: &Sandbox) -> String {
    let farm = s.project().join("bin-without-bwrap");
    std::fs::create_dir_all(&farm).unwrap();
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.map_while(Result::ok) {
            let name = entry.file_name();
            let link = farm.join(&name);
            if name != "bwrap" && std::fs::symlink_metadata(&link).is_err() {
                std::os::unix::fs::symlink(entry.path(), link).unwrap();
            }
        }
    }
    farm.display().to_string()
}

/// Attack: without bubblewrap a command can plant a git hook inside the
/// root (bubblewrap masks .git/hooks read-only). The fallback to landlock
/// is real, so the user and the agent must be told, at the start and on
/// the result; under bubblewrap nothing is said and the hook cannot land.
#[test]
fn a_landlock_fallback_is_announced_at_start_and_on_every_command_result() {
    let s = Sandbox::new();
    std::fs::create_dir_all(s.project().join(".git/hooks")).unwrap();
    let plant = r#"{"command": "echo 'touch /tmp/pwned' > .git/hooks/pre-commit"}"#;
    let o = s.run_in(&s.project(), &["call", "bash", plant], &LANDLOCK);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(s.project().join(".git/hooks/pre-commit").exists());
    let err = stderr(&o);
    for part in [
        "toolgate: WARNING: the sandbox is weakened: commands run under the landlock backend, \
         not bubblewrap",
        ".git/hooks",
        "toolgate.toml",
        "no pid namespace",
        "To get bubblewrap back: ",
    ] {
        assert!(err.contains(part), "{part}: {err}");
    }
    assert!(
        stdout(&o).contains(
            "[sandbox weakened: ran under the landlock backend, not bubblewrap (no masks of \
             protected names such as .git/hooks and toolgate.toml inside the roots, no pid \
             namespace); `toolgate doctor` says what is lost and how to get bubblewrap back]"
        ),
        "{}",
        stdout(&o)
    );
    // The structured result says it too.
    let o = s.run_in(
        &s.project(),
        &["call", "--json", "bash", r#"{"command": "true"}"#],
        &LANDLOCK,
    );
    let result: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(result.to_string().contains("sandbox weakened"), "{result}");
    // A file tool call starts with the warning as well.
    let o = s.run_in(&s.project(), &["call", "ls", "{}"], &LANDLOCK);
    assert!(
        stderr(&o).contains("the sandbox is weakened"),
        "{}",
        stderr(&o)
    );
    // Under bubblewrap: no warning, and the hook is not written.
    std::fs::remove_file(s.project().join(".git/hooks/pre-commit")).unwrap();
    let o = s.run(&["call", "bash", plant]);
    assert!(!stderr(&o).contains("weakened"), "{}", stderr(&o));
    assert!(!stdout(&o).contains("weakened"), "{}", stdout(&o));
    assert!(!s.project().join(".git/hooks/pre-commit").exists());
}

#[test]
fn without_bubblewrap_auto_says_which_package_brings_it_back() {
    let s = Sandbox::new();
    let path = path_without_bwrap(&s);
    let env = [("PATH", path.as_str())];
    let o = s.run_in(
        &s.project(),
        &["call", "bash", r#"{"command": "echo ran > ran.txt"}"#],
        &env,
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_to_string(s.project().join("ran.txt")).unwrap(),
        "ran\n"
    );
    let err = stderr(&o);
    for part in [
        "the sandbox is weakened: commands run under the landlock backend, not bubblewrap \
         (bubblewrap: bwrap not found in PATH)",
        "To get bubblewrap back: install bubblewrap (`apt-get install bubblewrap`",
    ] {
        assert!(err.contains(part), "{part}: {err}");
    }
    assert!(stdout(&o).contains("[sandbox weakened: "), "{}", stdout(&o));
    // The doctor says the same, row by row.
    let o = s.run_in(&s.project(), &["doctor"], &env);
    let out = stdout(&o);
    for line in [
        "\nbackend     landlock\n",
        "\nweakened    not bubblewrap, which cannot run here: bwrap not found in PATH\n",
        "\nlost        no masks inside the roots: ",
        "\n            no pid namespace: commands see every host process in /proc\n",
        "\nto restore  install bubblewrap (`apt-get install bubblewrap`",
    ] {
        assert!(out.contains(line), "{line:?}:\n{out}");
    }
    // require_bwrap: refused instead, naming bubblewrap and the package;
    // nothing runs.
    s.write(
        "home/.config/toolgate/config.toml",
        "[sandbox]\nrequire_bwrap = true\n",
    );
    for args in [
        &["call", "bash", r#"{"command": "echo ran > refused.txt"}"#][..],
        &["mcp"],
        &["sandbox", "--", "sh", "-c", "echo ran > refused.txt"],
    ] {
        let o = s.run_in(&s.project(), args, &env);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stdout(&o));
        let err = stderr(&o);
        assert!(
            err.contains(
                "refusing to start: [sandbox] require_bwrap = true, but commands would run \
                 under the landlock backend, not bubblewrap (bubblewrap: bwrap not found in PATH)"
            ) && err.contains("apt-get install bubblewrap"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("WARNING"), "{args:?}: {err}");
    }
    assert!(!s.project().join("refused.txt").exists());
}

#[test]
fn require_bwrap_refuses_an_asked_for_weaker_backend_and_bubblewrap_runs() {
    let s = Sandbox::new();
    s.write(
        "home/.config/toolgate/config.toml",
        "[sandbox]\nrequire_bwrap = true\n",
    );
    let touch = r#"{"command": "echo ran > ran.txt"}"#;
    for backend in ["landlock", "none"] {
        for args in [&["call", "bash", touch][..], &["mcp"]] {
            let o = s.run_in(&s.project(), args, &[("TOOLGATE_SANDBOX_BACKEND", backend)]);
            assert_eq!(
                o.status.code(),
                Some(2),
                "{backend} {args:?}: {}",
                stdout(&o)
            );
            assert!(
                stderr(&o).contains(&format!(
                    "require_bwrap = true, but commands would run under the {backend} backend"
                )),
                "{backend} {args:?}: {}",
                stderr(&o)
            );
        }
        assert!(!s.project().join("ran.txt").exists(), "{backend}");
    }
    let o = s.run(&["call", "bash", touch]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(s.project().join("ran.txt").exists());
}

#[test]
fn backend_none_from_any_source_is_announced_at_start() {
    let s = Sandbox::new();
    let bash = ["call", "bash", r#"{"command": "true"}"#];
    let said = |o: &Output| {
        let err = stderr(o);
        assert!(
            err.contains("toolgate: WARNING: commands run WITHOUT a sandbox (backend `none`)"),
            "{err}"
        );
    };
    let o = s.run_in(&s.project(), &bash, &[("TOOLGATE_SANDBOX_BACKEND", "none")]);
    said(&o);
    assert!(
        stdout(&o).contains("[ran WITHOUT a sandbox (backend `none`, for development only)]"),
        "{}",
        stdout(&o)
    );
    // `mcp --no-sandbox` says it before the handshake (stdin is closed here).
    let o = s.run(&["mcp", "--no-sandbox"]);
    said(&o);
    s.write(
        "home/.config/toolgate/config.toml",
        "[sandbox]\nbackend = \"none\"\n",
    );
    let o = s.run(&bash);
    said(&o);
}

#[test]
fn doctor_lists_what_the_landlock_backend_loses_and_bubblewrap_loses_nothing() {
    let s = Sandbox::new();
    let o = s.run_in(&s.project(), &["doctor"], &LANDLOCK);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    for line in [
        "\nweakened    not bubblewrap: `landlock` was asked for\n",
        "\nlost        no masks inside the roots: commands can write and create the protected \
         names (.git/hooks, .git/config, toolgate.toml, .mcp.json",
        "\n            no pid namespace: commands see every host process in /proc\n",
        "\n            no network namespace: network mode `proxy` (the egress allowlist) is \
         refused\n",
        "\nto restore  bubblewrap works on this machine: set `[sandbox] backend = \"auto\"`",
    ] {
        assert!(out.contains(line), "{line:?}:\n{out}");
    }
    let o = s.run_in(&s.project(), &["doctor", "--json"], &LANDLOCK);
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["weakening"]["backend"], "landlock", "{report}");
    assert!(
        report["weakening"]["lost"].as_array().unwrap().len() >= 3,
        "{report}"
    );
    let o = s.run(&["doctor", "--json"]);
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["weakening"], Value::Null, "{report}");
    let o = s.run(&["doctor"]);
    assert!(!stdout(&o).contains("weakened"), "{}", stdout(&o));
}

#[test]
fn a_background_process_under_landlock_says_so_too() {
    let s = Sandbox::new();
    let args = r#"{"command": "true"}"#;
    let o = s.run_in(
        &s.project(),
        &["call", "process_start", args, "--json"],
        &LANDLOCK,
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let body: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(body["structured"]["backend"], "landlock", "{body}");
    let text = body["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("[sandbox weakened: ran under the landlock backend"),
        "{text}"
    );
    // Under bubblewrap nothing is said.
    let o = s.run(&["call", "process_start", args]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stdout(&o).contains("weakened"), "{}", stdout(&o));
}

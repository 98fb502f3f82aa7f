//! The `bash` tool through the real `toolgate` binary: the script runs in
//! the sandbox (the binary is its own stage 2), and its result is structured.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use common::toolgate;

struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    fn new() -> Project {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        std::fs::create_dir_all(dir.path().join("project/sub")).unwrap();
        std::fs::write(dir.path().join("outside.txt"), "outside\n").unwrap();
        Project { dir }
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("project")
    }

    /// `toolgate call bash ARGS --json` with `extra` host variables; the
    /// exit code and the parsed result (or the error text).
    fn bash(&self, args: Value, extra: &[(&str, &str)]) -> (i32, Value, String) {
        let mut cmd = toolgate(self.dir.path(), &self.root());
        cmd.args(["call", "bash", &args.to_string(), "--json"]);
        for (k, v) in extra {
            cmd.env(k, v);
        }
        let o = cmd.output().unwrap();
        let body: Value = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
        // With --json a refusal is a JSON object with an `error` too.
        let err = match body["error"].as_str() {
            Some(error) => error.to_owned(),
            None => String::from_utf8_lossy(&o.stderr).into_owned(),
        };
        (o.status.code().unwrap_or(-1), body, err)
    }
}

fn text(body: &Value) -> &str {
    body["content"][0]["text"].as_str().unwrap_or_default()
}

#[test]
fn exit_codes_and_stderr_are_results_not_errors() {
    let p = Project::new();
    let (code, body, err) = p.bash(json!({"command": "echo out; echo err >&2; exit 3"}), &[]);
    // `toolgate call` exits 3 for "the command exited non-zero"; the call
    // itself is no error.
    assert_eq!(code, 3, "{err}");
    assert_eq!(body["structured"]["exit_code"], json!(3));
    assert_eq!(body["structured"]["signal"], json!(null));
    assert_eq!(body["structured"]["timed_out"], json!(false));
    assert_eq!(body["is_error"], json!(false));
    assert!(
        text(&body).starts_with("out\n[stderr]\nerr\n[exit code 3; "),
        "{}",
        text(&body)
    );
}

#[test]
fn a_signal_death_is_reported() {
    let p = Project::new();
    let (_, body, err) = p.bash(json!({"command": "kill -KILL $$"}), &[]);
    // Shell convention: 128 + 9, whether or not the signal itself is known.
    assert_eq!(body["structured"]["exit_code"], json!(137), "{err}");
}

#[test]
fn the_timeout_kills_the_whole_process_group() {
    let p = Project::new();
    // A background loop ticks into a file; it must stop with the group.
    let script = "(while true; do echo t >> tick; sleep 0.05; done) & sleep 300";
    let (_, body, err) = p.bash(json!({"command": script, "timeout": 1}), &[]);
    assert_eq!(body["structured"]["timed_out"], json!(true), "{err}");
    assert!(text(&body).contains("timed out after 1 s; the process group was killed"));
    let tick = p.root().join("tick");
    let before = std::fs::metadata(&tick).unwrap().len();
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(
        std::fs::metadata(&tick).unwrap().len(),
        before,
        "a child outlived the timeout"
    );
}

#[test]
fn long_output_keeps_head_and_tail_and_saves_the_whole_of_it() {
    let p = Project::new();
    let (_, body, err) = p.bash(json!({"command": "seq 1 100000"}), &[]);
    let facts = &body["structured"];
    assert_eq!(facts["truncated"], json!(true), "{err}");
    let shown = text(&body);
    assert!(shown.starts_with("1\n2\n3\n"));
    assert!(shown.contains("lines omitted"), "{shown}");
    assert!(shown.contains("100000\n"), "the tail is kept");
    let file = facts["output_file"].as_str().unwrap();
    assert!(file.starts_with(".toolgate/output/bash-"), "{file}");
    let saved = std::fs::read_to_string(p.root().join(file)).unwrap();
    let expected: String = (1..=100_000).map(|n| format!("{n}\n")).collect();
    assert!(
        saved == expected,
        "the saved output is not the whole output"
    );
    assert!(shown.contains(file), "the path is given to the model");
}

#[test]
fn stdin_cwd_and_variables() {
    let p = Project::new();
    let (_, body, err) = p.bash(
        json!({"command": "cat; pwd", "stdin": "fed\n", "cwd": "sub"}),
        &[],
    );
    let root = std::fs::canonicalize(p.root()).unwrap();
    assert!(
        text(&body).starts_with(&format!("fed\n{}\n", root.join("sub").display())),
        "{} {err}",
        text(&body)
    );
    let (_, body, _) = p.bash(
        json!({"command": "echo \"$GREETING\"", "env": {"GREETING": "hello"}}),
        &[],
    );
    assert!(text(&body).starts_with("hello\n"), "{}", text(&body));
    let (code, _, err) = p.bash(json!({"command": "true", "env": {"BAD NAME": "x"}}), &[]);
    assert_eq!(code, 1);
    assert!(err.contains("is not valid"), "{err}");
}

#[test]
fn host_secrets_stay_outside() {
    let p = Project::new();
    let (_, body, err) = p.bash(
        json!({"command": "echo \"[$AWS_SECRET_ACCESS_KEY][$GITHUB_TOKEN]\"; env | grep -c SECRET || true"}),
        &[("AWS_SECRET_ACCESS_KEY", "hunter2"), ("GITHUB_TOKEN", "ghp_x")],
    );
    assert!(
        text(&body).starts_with("[][]\n0\n"),
        "{} {err}",
        text(&body)
    );
    assert!(!body.to_string().contains("hunter2"));
}

#[test]
fn cwd_escapes_are_refused_and_writes_stay_inside() {
    let p = Project::new();
    for cwd in ["..", "/", "../project/../..", "/etc"] {
        let (code, _, err) = p.bash(json!({"command": "touch pwned", "cwd": cwd}), &[]);
        // Refused by the path layer (5) or by the workspace (1).
        assert!(
            matches!(code, 1 | 5),
            "cwd {cwd} was accepted: {code} {err}"
        );
        assert!(err.contains("outside"), "{cwd}: {err}");
    }
    let outside = p.dir.path().join("outside.txt");
    let script = format!("echo pwned > {0}; echo pwned > {0}.new", outside.display());
    // The write may "succeed" on the sandbox's private /tmp; the host's
    // file must not change.
    let (_, body, err) = p.bash(json!({ "command": script }), &[]);
    assert!(body["structured"]["exit_code"].is_number(), "{err}");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "outside\n");
    assert!(!Path::new(&format!("{}.new", outside.display())).exists());
    assert!(!p.dir.path().join("pwned").exists());
}

#[test]
fn the_operator_allows_host_variables_and_caps_the_timeout_in_config() {
    let p = Project::new();
    std::fs::write(
        p.root().join("toolgate.toml"),
        "[tools]\npass_env = [\"BUILD_FLAVOR\"]\nmax_timeout = 5\n",
    )
    .unwrap();
    common::trust(p.dir.path(), &p.root().join("toolgate.toml"));
    let host = [("BUILD_FLAVOR", "nightly"), ("OTHER_SECRET", "hunter2")];
    let (_, body, err) = p.bash(
        json!({"command": "echo \"[$BUILD_FLAVOR][$OTHER_SECRET]\"", "pass_env": ["BUILD_FLAVOR"]}),
        &host,
    );
    assert!(
        text(&body).starts_with("[nightly][]\n"),
        "{} {err}",
        text(&body)
    );
    // Listed but not asked for: not passed.
    let (_, body, _) = p.bash(json!({"command": "echo \"[$BUILD_FLAVOR]\""}), &host);
    assert!(text(&body).starts_with("[]\n"), "{}", text(&body));
    let (code, _, err) = p.bash(json!({"command": "true", "timeout": 6}), &host);
    assert_eq!(code, 1);
    assert!(err.contains("over the limit of 5 s"), "{err}");
}

/// A host HTTP server on loopback answering every request with `body`.
fn serve(body: &'static str) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            use std::io::{Read, Write};
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let reply = format!(
                "HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(reply.as_bytes());
        }
    });
    port
}

#[test]
fn network_proxy_mode_from_config_reaches_exactly_the_allowlist() {
    let p = Project::new();
    let port = serve("hello from the host");
    let other = serve("must not be reached");
    let fetch = |port: u16| {
        json!({"command": format!(
            "curl -sS --max-time 10 --noproxy '' -x http://127.0.0.1:3128 http://localhost:{port}/; echo \" curl=$?\""
        )})
    };
    // Default: no network at all.
    let (_, body, _) = p.bash(fetch(port), &[]);
    assert!(
        !text(&body).contains("hello from the host"),
        "{}",
        text(&body)
    );

    std::fs::write(
        p.root().join("toolgate.toml"),
        format!("[network]\nmode = \"proxy\"\nallow = [\"localhost:{port}\"]\n"),
    )
    .unwrap();
    common::trust(p.dir.path(), &p.root().join("toolgate.toml"));
    let (_, body, err) = p.bash(fetch(port), &[]);
    assert!(
        text(&body).starts_with("hello from the host curl=0"),
        "{} {err}",
        text(&body)
    );
    // Another port of the same host: a 403 from the proxy, not a hang.
    let (_, body, _) = p.bash(fetch(other), &[]);
    assert!(
        !text(&body).contains("must not be reached"),
        "{}",
        text(&body)
    );
    assert!(text(&body).contains("refused"), "{}", text(&body));
    // The host's loopback is not reachable around the proxy.
    let direct = json!({"command": format!("curl -sS --max-time 5 --noproxy '*' http://127.0.0.1:{port}/; echo \" curl=$?\"")});
    let (_, body, _) = p.bash(direct, &[]);
    assert!(
        !text(&body).contains("hello from the host"),
        "{}",
        text(&body)
    );

    // A malformed entry is refused when the configuration loads.
    std::fs::write(
        p.root().join("toolgate.toml"),
        "[network]\nmode = \"proxy\"\nallow = [\"*.com\"]\n",
    )
    .unwrap();
    common::trust(p.dir.path(), &p.root().join("toolgate.toml"));
    let (code, _, err) = p.bash(json!({"command": "true"}), &[]);
    assert_eq!(code, 2);
    assert!(err.contains("*.com"), "{err}");
}

#[test]
fn a_sandbox_runtime_settings_file_is_applied_as_it_is() {
    let p = Project::new();
    let root = p.root();
    std::fs::create_dir_all(root.join("private")).unwrap();
    std::fs::write(root.join("private/secret.txt"), "top secret\n").unwrap();
    std::fs::create_dir_all(root.join("docs")).unwrap();
    std::fs::write(root.join("docs/guide.md"), "guide\n").unwrap();
    std::fs::write(
        root.join(".srt.json"),
        r#"{"network": {"allowedDomains": [], "deniedDomains": []},
            "filesystem": {"denyRead": ["private"], "allowWrite": [], "denyWrite": ["docs"], "allowRead": ["private/ok"]}}"#,
    )
    .unwrap();
    std::fs::write(
        root.join("toolgate.toml"),
        "[network]\nmode = \"proxy\"\nsettings_file = \".srt.json\"\n",
    )
    .unwrap();
    common::trust(p.dir.path(), &root.join("toolgate.toml"));
    let script = "cat private/secret.txt; echo \"[read=$?]\"; \
                  echo pwned > docs/guide.md; echo \"[write=$?]\"; \
                  echo fine > notes.txt; echo \"[other=$?]\"";
    let (_, body, err) = p.bash(json!({ "command": script }), &[]);
    let out = text(&body);
    assert!(!out.contains("top secret"), "{out}");
    assert!(
        !out.contains("[read=0]") && !out.contains("[write=0]"),
        "{out}"
    );
    assert!(out.contains("[other=0]"), "{out} {err}");
    assert_eq!(
        std::fs::read_to_string(root.join("docs/guide.md")).unwrap(),
        "guide\n"
    );
    // The in-process tools obey denyRead too, and what is not applied is said.
    let o = toolgate(p.dir.path(), &root)
        .args(["call", "read", r#"{"path": "private/secret.txt"}"#])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(5), "{stderr}");
    assert!(stderr.contains("denied pattern"), "{stderr}");
    assert!(stderr.contains("allowRead is not applied"), "{stderr}");
    assert!(!String::from_utf8_lossy(&o.stdout).contains("top secret"));

    // An empty settings file is an error, never the defaults.
    std::fs::write(root.join(".srt.json"), "").unwrap();
    // (The settings file is part of what was trusted: changed, it is not
    // read at all until trusted again.)
    let (code, _, err) = p.bash(json!({"command": "true"}), &[]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("changed since it was trusted"), "{err}");
    common::trust(p.dir.path(), &root.join("toolgate.toml"));
    let (code, _, err) = p.bash(json!({"command": "true"}), &[]);
    assert_eq!(code, 2);
    assert!(err.contains(".srt.json"), "{err}");
}

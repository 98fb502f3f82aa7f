//! Attacks on the command allowlist of `toolgate mcp --allow-commands`, the
//! shell server the resolver starts: a hostile agent tries to run a program
//! the list does not name through a listed one. Each attack would create a
//! marker file in the project if the refused program ran; it must not exist
//! afterwards.

use std::os::unix::fs::PermissionsExt;

use serde_json::{Value, json};

use crate::raw::RawStdio;
use crate::{Project, text};

/// What the agent's programs do when they run: leave a marker.
const MARKER: &str = "refused-program-ran";

fn server(p: &Project, allowed: &str) -> RawStdio {
    RawStdio::start(p.toolgate(&["mcp", "--allow-commands", allowed]))
}

fn bash(raw: &mut RawStdio, command: &str) -> Value {
    let response = raw.request(
        "tools/call",
        json!({"name": "bash", "arguments": {"command": command}}),
    );
    response["result"].clone()
}

/// An executable `name` in the project that leaves the marker.
fn plant(p: &Project, name: &str) {
    let path = p.write(name, format!("#!/bin/sh\ntouch {MARKER}\n"));
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn assert_refused(p: &Project, result: &Value, command: &str, why: &str) {
    assert_eq!(result["isError"], true, "{command}: {result}");
    let message = text(result);
    assert!(message.contains(why), "{command}: {message}");
    assert!(
        !p.root().join(MARKER).exists(),
        "{command}: the refused program ran"
    );
}

/// `printf … > ls; chmod +x ls; ./ls` with `ls` listed ran the agent's
/// file, because names were matched by their base name.
#[test]
fn a_workspace_file_named_like_a_listed_program_does_not_run() {
    let p = Project::new();
    let mut raw = server(&p, "ls,cat,printf,chmod");
    let written = format!("printf '#!/bin/sh\\ntouch {MARKER}\\n' > ls; chmod +x ls; ./ls");
    let result = bash(&mut raw, &written);
    assert_refused(&p, &result, &written, "`./ls` is not an allowed command");
    assert!(!p.root().join("ls").exists(), "nothing of the script ran");

    plant(&p, "ls");
    plant(&p, "bin/cat");
    for attack in ["./ls", "bin/cat x", &format!("{}/ls", p.root().display())] {
        let result = bash(&mut raw, attack);
        assert_refused(
            &p,
            &result,
            attack,
            "a path runs only when that exact path is listed",
        );
    }
    // The listed name still runs the program on PATH, not ./ls: the
    // sandbox's PATH holds no relative entry.
    let result = bash(&mut raw, "ls");
    assert_eq!(result["isError"], false, "{result}");
    assert!(text(&result).contains("bin"), "{result}");
    assert!(!p.root().join(MARKER).exists(), "plain `ls` ran ./ls");
}

/// The script points PATH (or bash's command table) at the workspace so
/// that the listed name finds the agent's file.
#[test]
fn a_script_cannot_make_a_listed_name_find_a_workspace_file() {
    let p = Project::new();
    plant(&p, "ls");
    let mut raw = server(&p, "ls,cat,printf,chmod");
    for attack in [
        "PATH=.:$PATH ls",
        "export PATH=\"$PWD\"; ls",
        "unset PATH; ls",
        "PATH=; ls",
        "read -r PATH <<< .; ls",
        "BASH_CMDS[ls]=./ls; ls",
        "export LD_PRELOAD=$PWD/x.so; ls",
    ] {
        let result = bash(&mut raw, attack);
        assert_refused(
            &p,
            &result,
            attack,
            "under a command allowlist a script may not set it",
        );
    }
}

/// A listed program told to run another: git's aliases and options, awk's
/// system(), find's -exec hidden in a variable. The command it would run
/// (`touch`) is not listed.
#[test]
fn a_listed_program_cannot_be_told_to_run_an_unlisted_one() {
    let p = Project::new();
    let mut raw = server(&p, "git,awk,find,printf");
    // Absolute, so that each would land wherever the command runs (git
    // outside any repository, from /).
    let marker = p.root().join(MARKER);
    let marker = marker.display();
    let attacks = [
        (
            format!("git -C / -c alias.x='!touch {marker}' x"),
            "`-c alias.x=!touch",
        ),
        (
            format!("git -C /tmp ls-remote --upload-pack='touch {marker}; :' /tmp"),
            "`--upload-pack=touch",
        ),
        (
            format!("awk 'BEGIN {{ system(\"touch {marker}\") }}'"),
            "calls system()",
        ),
        (
            format!("awk 'BEGIN {{ print \"\" | \"touch {marker}\" }}'"),
            "pipes to or from a command",
        ),
        (
            format!("a=-exec; find / -maxdepth 0 $a touch {marker} \\;"),
            "`$a` is only known at run time",
        ),
    ];
    for (attack, why) in &attacks {
        let result = bash(&mut raw, attack);
        assert_refused(&p, &result, attack, why);
        assert!(
            text(&result).contains("a listed program may not be told to run another"),
            "{attack}: {result}"
        );
    }
    // The same programs still do their ordinary work.
    let result = bash(&mut raw, "awk 'BEGIN { print 6 * 7 }'; git --version");
    assert_eq!(result["isError"], false, "{result}");
    assert!(text(&result).contains("42"), "{result}");
    assert!(text(&result).contains("git version"), "{result}");
}

/// `--allow-pattern '('` was reported as an invalid `deny_patterns` entry.
#[test]
fn a_bad_allow_pattern_is_named_as_one() {
    let p = Project::new();
    let output = p
        .toolgate(&["mcp", "--allow-pattern", "("])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--allow-pattern: invalid allow pattern `(`"),
        "{stderr}"
    );
    assert!(!stderr.contains("deny_patterns"), "{stderr}");
}

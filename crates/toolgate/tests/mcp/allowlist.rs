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

/// Each attack is refused as a launch, naming `why`, and ran nothing.
fn assert_launches_refused(p: &Project, raw: &mut RawStdio, attacks: &[(String, &str)]) {
    for (attack, why) in attacks {
        let result = bash(raw, attack);
        assert_refused(p, &result, attack, why);
        assert!(
            text(&result).contains("a listed program may not be told to run another"),
            "{attack}: {result}"
        );
    }
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
    assert_launches_refused(&p, &mut raw, &attacks);
    // The same programs still do their ordinary work.
    let result = bash(&mut raw, "awk 'BEGIN { print 6 * 7 }'; git --version");
    assert_eq!(result["isError"], false, "{result}");
    assert!(text(&result).contains("42"), "{result}");
    assert!(text(&result).contains("git version"), "{result}");
}

/// The default shell list's text tools told to run a program: GNU sed's
/// `e` command and `s///e` flag, a sed script from a file, `--sandbox`
/// after the script it was meant to cover (sed compiles `-e` scripts as it
/// meets them) or turned into a file name by POSIXLY_CORRECT, sort's
/// `--compress-program` and rg's `--pre`. Each runs `./z`, which leaves the
/// marker, or `touch` itself.
#[test]
fn sed_sort_and_rg_cannot_be_told_to_run_an_unlisted_program() {
    let p = Project::new();
    plant(&p, "z");
    p.write("prog.sed", format!("1e touch {MARKER}\n"));
    let mut raw = server(&p, "sed,sort,rg,printf,cat");
    let marker = p.root().join(MARKER);
    let marker = marker.display();
    let attacks = [
        (
            format!("printf 'a\\n' | sed 's|.*|touch {marker}|e'"),
            "has the `e` flag of `s`",
        ),
        (
            format!("printf 'a\\n' | sed '1e touch {marker}'"),
            "has an `e` command (`1e touch",
        ),
        (
            "printf 'a\\n' | sed -f prog.sed".to_string(),
            "`-f prog.sed` makes sed run a script from a file",
        ),
        (
            format!("printf 'a\\n' | sed -e '1e touch {marker}' --sandbox"),
            "has an `e` command",
        ),
        (
            format!("printf 'a\\n' | POSIXLY_CORRECT=1 sed '1e touch {marker}' - --sandbox"),
            "has an `e` command",
        ),
        (
            "printf '%s\\n' {1..3000} | sort -S 1k --compress-program=./z -n".to_string(),
            "`--compress-program=./z` names a program sort runs",
        ),
        (
            "rg --pre ./z x prog.sed".to_string(),
            "`--pre ./z` names a command rg runs on every file",
        ),
    ];
    assert_launches_refused(&p, &mut raw, &attacks);
    // Their ordinary work still runs, `-i` and `--sandbox` included.
    p.write("notes.txt", "one\ntwo\n");
    let result = bash(
        &mut raw,
        "sed -i 's/one/eins/' notes.txt && sed -n '1,2p' notes.txt | sort -r && sed --sandbox -f prog.sed notes.txt; printf 'b\\na\\n' | sort",
    );
    assert_eq!(result["isError"], false, "{result}");
    let output = text(&result);
    assert!(output.contains("two\neins"), "{output}");
    assert!(
        output.contains("e/r/w commands disabled in sandbox mode"),
        "{output}"
    );
    assert!(output.contains("a\nb"), "{output}");
    assert!(
        !p.root().join(MARKER).exists(),
        "an allowed sed ran the marker"
    );
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

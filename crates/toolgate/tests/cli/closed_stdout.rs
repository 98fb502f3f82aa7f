//! `toolgate ... | head`: a reader that stops early ends the command
//! quietly, without a broken-pipe error.

use pretty_assertions::assert_eq;

use super::*;

/// Runs `toolgate ARGS` with stdout a pipe whose reader is already gone, so
/// the first write fails with EPIPE (what `| head` does once it has its
/// lines, without the race).
fn with_closed_stdout(s: &Sandbox, args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut cmd = toolgate(s.dir.path(), &s.project());
    cmd.args(args).stdout(writer);
    cmd.output().unwrap()
}

#[test]
fn a_closed_stdout_ends_the_command_quietly() {
    let s = Sandbox::new();
    let commands: [&[&str]; 7] = [
        &["tools"],
        &["tools", "--json"],
        &["tools", "read"],
        &["sandbox", "--plan", "true"],
        &[
            "--demo",
            "call",
            "demo_echo",
            r#"{"text": "hi", "times": 3}"#,
        ],
        &["call", "bash", r#"{"command": "seq 1 1000"}"#],
        &["prompt"],
    ];
    for args in commands {
        let o = with_closed_stdout(&s, args);
        let said = stderr(&o);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {said}");
        for noise in ["Broken pipe", "os error 32", "panicked"] {
            assert!(!said.contains(noise), "{args:?}: {said}");
        }
    }
}

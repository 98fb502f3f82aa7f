//! The sandbox's unit tests.

use super::environment::system_path_entries;
use super::*;
use pretty_assertions::assert_eq;

#[test]
fn path_entries_a_command_can_write_are_dropped() {
    let table = [
        ("/usr/bin:/bin", "/usr/bin:/bin"),
        ("/usr/bin:", "/usr/bin"),
        (":/usr/bin", "/usr/bin"),
        ("/usr/bin::/bin", "/usr/bin:/bin"),
        (".:/usr/bin:bin:./x", "/usr/bin"),
        ("", ""),
        (".", ""),
    ];
    for (path, expected) in table {
        assert_eq!(system_path_entries(path, |_| false), expected, "{path:?}");
    }
    let writable = |dir: &Path| dir.starts_with("/work/app") || dir.starts_with("/tmp");
    assert_eq!(
        system_path_entries("/work/app/bin:/usr/bin:/tmp/x:/bin", writable),
        "/usr/bin:/bin"
    );
}

#[test]
fn variables_that_change_what_runs_are_refused_set_or_passed() {
    let refused = [
        SandboxCommand::shell("ls").set_env("BASH_ENV", "/dev/stdin"),
        SandboxCommand::shell("ls").set_env("LD_PRELOAD", "./x.so"),
        SandboxCommand::shell("ls").pass_env("LD_LIBRARY_PATH"),
    ];
    for command in refused {
        let error = Sandbox::check_environment(&command).map_err(|e| e.to_string());
        assert!(
            matches!(&error, Err(m) if m.contains("refused environment variables")),
            "{command:?}: {error:?}"
        );
    }
    let both = SandboxCommand::shell("ls")
        .set_env("LD_PRELOAD", "x")
        .set_env("CI", "1")
        .pass_env("PYTHONPATH");
    let message = Sandbox::check_environment(&both)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        message.contains("`LD_PRELOAD`") && message.contains("`PYTHONPATH`"),
        "{message}"
    );
    let fine = SandboxCommand::shell("ls")
        .set_env("CI", "1")
        .pass_env("LANG");
    assert!(Sandbox::check_environment(&fine).is_ok());
}

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

#[test]
fn a_process_that_lives_on_gets_stage_2s_binary_as_the_stand_in() {
    let state = tempfile::tempdir().unwrap();
    let stage2 = PathBuf::from("/opt/toolgate/toolgate-stage2");
    let sandbox = |prefix: &[&str], short_lived: bool| {
        let config = SandboxConfig::new(stage2.clone(), state.path().to_owned())
            .backend(BackendChoice::None)
            .stage2_prefix(prefix.iter().copied());
        Sandbox {
            short_lived,
            ..Sandbox::new(config).unwrap()
        }
    };
    // A server: the copy it would keep would share its memory for the
    // length of every command.
    assert_eq!(sandbox(&[], false).stand_in(), Some(stage2.as_path()));
    // Ends with its command: the copy costs less than the exec.
    assert_eq!(sandbox(&[], true).stand_in(), None);
    // Stage 2 behind a prefix is toolgate's whole binary: slower to exec
    // than the copy.
    assert_eq!(sandbox(&["__stage2"], false).stand_in(), None);
}

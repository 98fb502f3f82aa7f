//! Stage 2 alone (`toolgate-stage2`, beside the toolgate binary) runs inside
//! each sandbox when it is an executable of toolgate's own build; anything
//! else lying there under that name is never run; and neither a command nor
//! a file tool can rewrite either binary when they lie inside a root.

use std::os::unix::fs::MetadataExt;

use pretty_assertions::assert_eq;

use super::*;
use common::toolgate_at;

/// What runs as the command's parent inside the sandbox, as its argv.
const PARENT_ARGV: &str = r#"tr '\0' ' ' < /proc/$PPID/cmdline; echo"#;

/// `binary` (a toolgate of this build, wherever it lies) in the test's home
/// and project.
fn run_binary(s: &Sandbox, binary: &Path, args: &[&str]) -> Output {
    toolgate_at(binary, s.dir.path(), &s.project())
        .args(args)
        .output()
        .unwrap()
}

/// A directory of its own on the build's file system (so that the built
/// binaries can be linked into it, not copied).
fn build_dir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

/// `from` at `to`: a hard link, or a copy across file systems.
fn place(from: &Path, to: &Path) {
    if std::fs::hard_link(from, to).is_err() {
        std::fs::copy(from, to).unwrap();
    }
}

fn built_stage2() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_toolgate")).with_file_name("toolgate-stage2")
}

#[test]
fn the_stage2_binary_of_the_same_build_runs_in_the_sandbox() {
    let s = Sandbox::new();
    let o = s.run(&["sandbox", "--", "sh", "-c", PARENT_ARGV]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    // Stage 2 alone takes its own arguments first, with no subcommand.
    assert!(
        stdout(&o).starts_with("/.toolgate/stage2 --"),
        "{}",
        stdout(&o)
    );
    let plan = stdout(&s.run(&["sandbox", "--plan", "--", "true"]));
    let bind = format!("{} /.toolgate/stage2", built_stage2().display());
    assert!(plan.lines().any(|l| l.ends_with(&bind)), "{plan}");
    assert!(!plan.contains("__stage2"), "{plan}");
}

#[test]
fn a_stage2_binary_not_of_this_build_or_not_executable_is_never_run() {
    let s = Sandbox::new();
    let witness = s.dir.path().join("fake-stage2-ran");
    let dir = build_dir();
    let binary = dir.path().join("toolgate");
    place(Path::new(env!("CARGO_BIN_EXE_toolgate")), &binary);
    let fakes: [(&str, Vec<u8>, u32); 3] = [
        // A script that would leave a witness if it ever ran.
        (
            "script",
            format!("#!/bin/sh\ntouch '{}'\nexec \"$@\"\n", witness.display()).into_bytes(),
            0o755,
        ),
        // A program of no toolgate build at all.
        ("elf", std::fs::read("/bin/true").unwrap(), 0o755),
        // The real one, which nobody may execute: every command would fail.
        (
            "not executable",
            std::fs::read(built_stage2()).unwrap(),
            0o644,
        ),
    ];
    for (what, bytes, mode) in fakes {
        let fake = dir.path().join("toolgate-stage2");
        let _ = std::fs::remove_file(&fake);
        std::fs::write(&fake, bytes).unwrap();
        std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(mode))
            .unwrap();
        let o = run_binary(&s, &binary, &["sandbox", "--", "sh", "-c", PARENT_ARGV]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{what}: {}{}",
            stdout(&o),
            stderr(&o)
        );
        // toolgate's own binary ran as stage 2 instead.
        assert!(
            stdout(&o).starts_with("/.toolgate/stage2 __stage2 --"),
            "{what}: {}",
            stdout(&o)
        );
        let plan = stdout(&run_binary(
            &s,
            &binary,
            &["sandbox", "--plan", "--", "true"],
        ));
        assert!(
            !plan.contains(&fake.display().to_string()),
            "{what}: {plan}"
        );
        assert!(!witness.exists(), "{what}: the fake stage 2 ran");
    }
}

#[test]
fn the_agent_cannot_rewrite_toolgate_or_its_stage2_inside_its_root() {
    let s = Sandbox::new();
    let dir = build_dir();
    let project = dir.path().join("project");
    std::fs::create_dir_all(project.join("bin")).unwrap();
    let (binary, stage2) = (
        project.join("bin/toolgate"),
        project.join("bin/toolgate-stage2"),
    );
    place(Path::new(env!("CARGO_BIN_EXE_toolgate")), &binary);
    place(&built_stage2(), &stage2);
    let before = |p: &Path| {
        let m = std::fs::metadata(p).unwrap();
        (m.len(), m.mtime_nsec(), m.mtime())
    };
    let (binary_before, stage2_before) = (before(&binary), before(&stage2));
    let script = "for f in bin/toolgate bin/toolgate-stage2; do \
                  echo pwned >> $f && echo \"wrote $f\"; \
                  mv $f $f.old && echo \"moved $f\"; done; echo end";
    let o = toolgate_at(&binary, s.dir.path(), &project)
        .args(["sandbox", "--", "sh", "-c", script])
        .output()
        .unwrap();
    assert!(stdout(&o).contains("end"), "{}{}", stdout(&o), stderr(&o));
    assert!(!stdout(&o).contains("wrote"), "{}", stdout(&o));
    assert!(!stdout(&o).contains("moved"), "{}", stdout(&o));
    // Nor can the file tools.
    for path in ["bin/toolgate", "bin/toolgate-stage2"] {
        let write = json!({"path": path, "content": "pwned\n"}).to_string();
        let o = toolgate_at(&binary, s.dir.path(), &project)
            .args(["call", "write", &write])
            .output()
            .unwrap();
        assert_ne!(o.status.code(), Some(0), "{path}: {}", stdout(&o));
        assert!(
            stderr(&o).contains(&format!("`{path}` is protected")),
            "{path}: {}",
            stderr(&o)
        );
    }
    assert_eq!(before(&binary), binary_before);
    assert_eq!(before(&stage2), stage2_before);
}

//! What toolgate leaves behind: nothing of a background process once
//! toolgate ends, and nothing of its own in `git status`.

use pretty_assertions::assert_eq;

use super::*;

fn git(dir: &Path, args: &[&str]) -> String {
    let o = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(o.status.success(), "git {args:?}: {}", stderr(&o));
    stdout(&o)
}

#[test]
fn a_background_process_leaves_no_output_file_once_toolgate_ends() {
    let s = Sandbox::new();
    let tmp = s.dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let o = s.run_in(
        &s.project(),
        &[
            "call",
            "process_start",
            r#"{"command": "echo started; sleep 60"}"#,
        ],
        &[("TMPDIR", tmp.to_str().unwrap())],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let said = stdout(&o);
    assert!(said.contains("Started process"), "{said}");
    // In toolgate's private state directory, never the shared temp dir.
    let logs = s.dir.path().join("home/.local/state/toolgate/processes");
    assert!(said.contains(logs.to_str().unwrap()), "{said}");
    for dir in [&tmp, &logs] {
        let left: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|name| name.to_string_lossy().starts_with("toolgate-proc"))
            .collect();
        assert!(
            left.is_empty(),
            "left behind in {}: {left:?}",
            dir.display()
        );
    }
}

#[test]
fn saved_bash_output_stays_out_of_git_status() {
    let s = Sandbox::new();
    let project = s.project();
    git(&project, &["init", "-q"]);
    let o = s.run(&["call", "bash", r#"{"command": "seq 1 100000"}"#]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("[output cut;"), "{}", stdout(&o));
    assert!(
        std::fs::read_dir(project.join(".toolgate/output"))
            .unwrap()
            .next()
            .is_some()
    );
    assert_eq!(git(&project, &["status", "--porcelain"]), "");
    assert_eq!(
        std::fs::read_to_string(project.join(".toolgate/.gitignore")).unwrap(),
        "*\n"
    );
}

#[test]
fn a_gitignore_planted_in_the_own_directory_is_neither_followed_nor_replaced() {
    let s = Sandbox::new();
    let project = s.project();
    let outside = s.write("outside.txt", "outside\n");
    std::fs::create_dir(project.join(".toolgate")).unwrap();
    std::os::unix::fs::symlink(&outside, project.join(".toolgate/.gitignore")).unwrap();
    let o = s.run(&["call", "bash", r#"{"command": "seq 1 100000"}"#]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("[output cut;"), "{}", stdout(&o));
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "outside\n");
    let link = std::fs::symlink_metadata(project.join(".toolgate/.gitignore")).unwrap();
    assert!(link.is_symlink());
    // The user's own .gitignore there is kept as it is.
    std::fs::remove_file(project.join(".toolgate/.gitignore")).unwrap();
    s.write("project/.toolgate/.gitignore", "output/\n");
    let o = s.run(&["call", "bash", r#"{"command": "seq 1 100000"}"#]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_to_string(project.join(".toolgate/.gitignore")).unwrap(),
        "output/\n"
    );
}

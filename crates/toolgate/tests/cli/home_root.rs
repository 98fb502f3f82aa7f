//! A root that is or contains the home directory is refused at the start of
//! every command that runs tools: an MCP client or a user who starts
//! toolgate in `~` must not hand the agent `~/.gitconfig` (core.pager),
//! `~/.cargo/config.toml` (rustc-wrapper), `~/.local/bin` (a planted `ls`)
//! or toolgate's own user configuration.

use pretty_assertions::assert_eq;

use super::*;

/// What a hostile agent writes into a home-directory root, each of which
/// the host runs later.
const PLANTS: &[(&str, &str)] = &[
    (
        ".gitconfig",
        "[core]\n\tpager = touch /tmp/toolgate-pwned\n",
    ),
    (
        ".cargo/config.toml",
        "[build]\nrustc-wrapper = \"/tmp/toolgate-pwned\"\n",
    ),
    (".local/bin/ls", "#!/bin/sh\ntouch /tmp/toolgate-pwned\n"),
    (
        ".config/toolgate/config.toml",
        "[sandbox]\nbackend = \"none\"\n",
    ),
];

fn write_args(path: &str, content: &str) -> String {
    json!({"path": path, "content": content}).to_string()
}

/// Every file below `dir`, relative, sorted: what a refused call must leave
/// as it was.
fn tree(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(next) = stack.pop() {
        for entry in std::fs::read_dir(&next).unwrap().map(Result::unwrap) {
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                stack.push(path.clone());
            }
            found.push(path.strip_prefix(dir).unwrap().display().to_string());
        }
    }
    found.sort();
    found
}

/// toolgate's own state (the probe cache, mask files) lives under
/// `~/.local/state/toolgate`; anything else in the home is planted.
fn planted(home: &Path) -> Vec<String> {
    tree(home)
        .into_iter()
        .filter(|p| !".local/state/toolgate".starts_with(p.as_str()))
        .filter(|p| !p.starts_with(".local/state/toolgate"))
        // toolgate's data directory: the store of approvals and audit.
        .filter(|p| !".local/share/toolgate".starts_with(p.as_str()))
        .filter(|p| !p.starts_with(".local/share/toolgate"))
        .collect()
}

#[test]
fn a_home_directory_root_plants_no_host_configuration() {
    let s = Sandbox::new();
    let home = s.dir.path().join("home");
    for (path, content) in PLANTS {
        let o = s.run_in(&home, &["call", "write", &write_args(path, content)], &[]);
        assert_eq!(o.status.code(), Some(2), "{path}: {}", stdout(&o));
        let err = stderr(&o);
        assert!(
            err.contains(&format!(
                "the workspace root {} is the home directory",
                std::fs::canonicalize(&home).unwrap().display()
            )) && err.contains("pass --root PROJECT"),
            "{path}: {err}"
        );
    }
    // Commands, edits, the prompt (which reads the root) and the sandbox too.
    s.write("home/.profile", "a\n");
    let runs: [&[&str]; 4] = [
        &["call", "bash", r#"{"command": "echo x > .bashrc"}"#],
        &[
            "call",
            "edit",
            r#"{"path": ".profile", "old_text": "a", "new_text": "b"}"#,
        ],
        &["prompt"],
        &["sandbox", "--", "sh", "-c", "echo x > .zshrc"],
    ];
    for args in runs {
        let o = s.run_in(&home, args, &[]);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stdout(&o));
        assert!(
            stderr(&o).contains("is the home directory"),
            "{args:?}: {}",
            stderr(&o)
        );
    }
    assert_eq!(planted(&home), vec![".profile".to_owned()]);
    assert_eq!(
        std::fs::read_to_string(home.join(".profile")).unwrap(),
        "a\n"
    );
    assert!(!Path::new("/tmp/toolgate-pwned").exists());
}

#[test]
fn a_root_that_contains_the_home_directory_is_refused() {
    let s = Sandbox::new();
    // HOME lies inside the project root: the root holds every dotfile.
    let home = s.project().join("sub");
    let home_text = home.to_str().unwrap();
    for (path, content) in PLANTS {
        let inside = format!("sub/{path}");
        let o = s.run_in(
            &s.project(),
            &["call", "write", &write_args(&inside, content)],
            &[("HOME", home_text)],
        );
        assert_eq!(o.status.code(), Some(2), "{path}: {}", stdout(&o));
        assert!(
            stderr(&o).contains(&format!(
                "contains the home directory {}",
                std::fs::canonicalize(&home).unwrap().display()
            )),
            "{path}: {}",
            stderr(&o)
        );
    }
    assert_eq!(planted(&home), Vec::<String>::new());
    // A HOME spelled through a symlink is the same home.
    let link = s.dir.path().join("home-link");
    std::os::unix::fs::symlink(&home, &link).unwrap();
    let o = s.run_in(
        &s.project(),
        &["call", "write", &write_args("sub/.gitconfig", "[core]\n")],
        &[("HOME", link.to_str().unwrap())],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    assert_eq!(planted(&home), Vec::<String>::new());
}

#[test]
fn a_project_inside_the_home_directory_works_as_the_error_says() {
    let s = Sandbox::new();
    let home = s.dir.path().join("home");
    std::fs::create_dir_all(home.join("code/app")).unwrap();
    // Started in ~, with the project named as the root.
    let o = s.run_in(
        &home,
        &[
            "--root",
            "code/app",
            "call",
            "write",
            &write_args("notes.txt", "kept\n"),
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_to_string(home.join("code/app/notes.txt")).unwrap(),
        "kept\n"
    );
    // Started in the project: it is the root, HOME is above it.
    let o = s.run_in(
        &home.join("code/app"),
        &["call", "bash", r#"{"command": "echo ran > ran.txt"}"#],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_to_string(home.join("code/app/ran.txt")).unwrap(),
        "ran\n"
    );
}

/// The passwd entry of the uid the tests run as.
fn passwd_home() -> PathBuf {
    use std::os::unix::fs::MetadataExt;
    let uid = std::fs::metadata("/proc/self").unwrap().uid().to_string();
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    let home = passwd
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.len() >= 6 && f[2] == uid)
        .map(|f| PathBuf::from(f[5]))
        .expect("the test user has a passwd entry");
    std::fs::canonicalize(home).unwrap()
}

#[test]
fn without_home_in_the_environment_the_passwd_home_is_refused() {
    let s = Sandbox::new();
    let home = passwd_home();
    let name = format!(".toolgate-home-root-test-{}", std::process::id());
    let mut cmd = common::toolgate(s.dir.path(), &home);
    cmd.env_remove("HOME")
        .env("XDG_STATE_HOME", s.dir.path().join("state"))
        .args(["call", "write", &write_args(&name, "planted\n")]);
    let o = cmd.output().unwrap();
    let written = home.join(&name).exists();
    let _ = std::fs::remove_file(home.join(&name));
    assert!(!written, "{} was written", home.join(&name).display());
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("is the home directory"),
        "{}",
        stderr(&o)
    );
}

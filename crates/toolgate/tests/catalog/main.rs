//! The governed catalogue through the real `toolgate` binary: real
//! registries (npm, PyPI), a real Debian package (jq, which scripts/test
//! installs), bubblewrap, and the store's approvals.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../common/mod.rs"]
mod common;
#[path = "../common/stdio_client.rs"]
mod stdio_client;

mod gates;
mod installs;
mod runs;
mod shelf;

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

/// A home, a project and a user configuration whose calls wait 1 s for a
/// person (so a blocked install or run returns at once).
struct Shelf {
    dir: tempfile::TempDir,
}

/// A low-risk image tool: the image's shell.
const SH: &str = r#"
id = "sh"
description = "The image's POSIX shell"
source_kind = "binary-path"
risk = "low"
[[bins]]
name = "sh"
bin = "/bin/sh"
health_check_args = ["-c", "echo healthy"]
"#;

/// An npm CLI.
const COWSAY: &str = r#"
id = "cowsay"
description = "A talking cow (npm)"
source_kind = "npm-package"
package_name = "cowsay"
package_version = "1.6.0"
risk = "low"
[[bins]]
name = "cowsay"
health_check_args = ["healthy"]
"#;

/// A PyPI CLI.
const PYCOWSAY: &str = r#"
id = "pycowsay"
description = "A talking cow (PyPI)"
source_kind = "pypi-package"
package_name = "cowsay"
package_version = "6.1"
risk = "low"
[[bins]]
name = "cowsay"
health_check_args = ["--version"]
"#;

impl Shelf {
    fn new() -> Self {
        Shelf::with_config("")
    }

    fn with_config(extra: &str) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("toolgate catalog ")
            .tempdir()
            .unwrap();
        std::fs::create_dir_all(dir.path().join("project")).unwrap();
        let shelf = Shelf { dir };
        shelf.write(
            "home/.config/toolgate/config.toml",
            &format!("[approvals]\nwait = \"1s\"\n{extra}"),
        );
        shelf
    }

    fn project(&self) -> PathBuf {
        self.dir.path().join("project")
    }

    /// Where the catalogue keeps installed tools.
    fn installs(&self, id: &str) -> PathBuf {
        self.dir
            .path()
            .join("home/.local/share/toolgate/catalog/default")
            .join(id)
    }

    fn write(&self, relative: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    fn command(&self, args: &[&str]) -> std::process::Command {
        let mut cmd = common::toolgate(self.dir.path(), &self.project());
        cmd.args(args);
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut cmd = self.command(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    }

    /// Runs and expects exit `code`; stdout.
    fn expect(&self, code: i32, args: &[&str]) -> String {
        let o = self.run(args);
        assert_eq!(
            o.status.code(),
            Some(code),
            "{args:?}\nstdout: {}\nstderr: {}",
            stdout(&o),
            stderr(&o)
        );
        stdout(&o)
    }

    fn json(&self, code: i32, args: &[&str]) -> Value {
        let text = self.expect(code, args);
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{args:?}: {e}: {text}"))
    }

    /// Writes `manifest` as `manifests/<name>.toml` and adds it.
    fn add(&self, name: &str, manifest: &str) {
        let file = self.write(&format!("manifests/{name}.toml"), manifest);
        self.expect(0, &["catalog", "add", file.to_str().unwrap()]);
    }

    fn policy(&self, install: &str, execute: &str) {
        self.expect(
            0,
            &[
                "catalog",
                "policy",
                "--install",
                install,
                "--execute",
                execute,
            ],
        );
    }

    /// Approves the request `id` from another process, as a person would.
    fn approve(&self, id: &str) {
        self.expect(0, &["approvals", "approve", id]);
    }

    /// The tool's state in `catalog list --json`.
    fn state(&self, id: &str) -> String {
        let list = self.json(0, &["catalog", "list", "--json"]);
        list.as_array()
            .unwrap()
            .iter()
            .find(|e| e["manifest"]["id"] == id)
            .map(|e| e["state"].as_str().unwrap().to_owned())
            .unwrap_or_else(|| panic!("no `{id}` in {list:#}"))
    }

    /// The directories of `id`'s installs.
    fn install_dirs(&self, id: &str) -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(self.installs(id))
            .map(|r| r.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        dirs.sort();
        dirs
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts that the command said `text` on stderr.
#[track_caller]
fn said(o: &Output, text: impl AsRef<str>) {
    let text = text.as_ref();
    assert!(stderr(o).contains(text), "{}\n  wanted: {text}", stderr(o));
}

/// The version of an installed Debian package.
fn dpkg_version(package: &str) -> String {
    let o = std::process::Command::new("dpkg-query")
        .args(["--show", "--showformat=${Version}", package])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "the Debian package {package} is not installed: scripts/test installs it (apt-get install {package})"
    );
    stdout(&o)
}

/// A jq manifest pinned to the image's version, with its bin at `bin`.
fn jq(id: &str, version: &str, bin: &str) -> String {
    format!(
        "id = \"{id}\"\ndescription = \"Command-line JSON processor\"\nsource_kind = \"apt-package\"\n\
         apt_package = \"jq\"\napt_version = \"{version}\"\nrisk = \"low\"\ncapabilities = [\"json\"]\n\
         [[bins]]\nname = \"jq\"\nbin = \"{bin}\"\nhealth_check_args = [\"--version\"]\n"
    )
}

/// Runs SQL against the SQLite store with Python's sqlite3 (no sqlite3
/// program needed).
fn sql(shelf: &Shelf, statement: &str) {
    let db = shelf
        .dir
        .path()
        .join("home/.local/share/toolgate/toolgate.db");
    let o = std::process::Command::new("python3")
        .args([
            "-c",
            "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute(sys.argv[2]); c.commit()",
        ])
        .arg(&db)
        .arg(statement)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
}

fn exists(path: &Path) -> bool {
    path.exists()
}

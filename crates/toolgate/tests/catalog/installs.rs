//! Installs: npm and PyPI into a directory of the tool's own, held to the
//! bytes the first install recorded; apt tools verified, never installed;
//! a killed install leaves nothing in use; concurrent installs install once.

use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;

use super::*;

#[test]
fn an_npm_cli_installs_without_its_scripts_runs_and_reinstalls_from_its_lockfile() {
    let s = Shelf::new();
    s.policy("allow_all", "allow_safe");
    s.add("cowsay", COWSAY);
    let first = s.json(0, &["catalog", "install", "cowsay", "--json"]);
    assert_eq!(first["outcome"], "ran", "{first:#}");
    // What was resolved: every package with its integrity hash.
    let packages = first["resolved"]["packages"].as_object().unwrap();
    let cowsay = &packages["node_modules/cowsay"];
    assert_eq!(cowsay["version"], "1.6.0");
    assert!(
        cowsay["integrity"].as_str().unwrap().starts_with("sha512-"),
        "{cowsay}"
    );
    assert_eq!(first["health"][0]["healthy"], true, "{first:#}");
    let out = s.expect(0, &["catalog", "run", "cowsay", "--", "moo"]);
    assert!(out.contains("< moo >") && out.contains("(oo)"), "{out}");
    // The installer's caches and home are gone; the files are the tool's.
    let dir = PathBuf::from(first["install_dir"].as_str().unwrap());
    for gone in [".home", ".npm-cache", ".tmp"] {
        assert!(!exists(&dir.join(gone)), "{gone} left in {}", dir.display());
    }
    // Removed and added back: installed again with `npm ci` against the
    // recorded lockfile, to the same bytes.
    s.expect(0, &["catalog", "remove", "cowsay"]);
    assert!(!exists(&s.installs("cowsay")));
    s.add("cowsay", COWSAY);
    let o = s.run(&["catalog", "install", "cowsay"]);
    assert!(o.status.success(), "{}", stderr(&o));
    said(&o, "npm ci cowsay@1.6.0 (held to the recorded lockfile)");
    let again = s.json(0, &["catalog", "show", "cowsay", "--json"]);
    assert_eq!(again["tool"]["state"], "installed");
}

#[test]
fn a_pypi_cli_installs_in_its_own_venv_and_other_bytes_than_recorded_are_refused() {
    let s = Shelf::new();
    s.policy("allow_all", "allow_safe");
    s.add("pycowsay", PYCOWSAY);
    let first = s.json(0, &["catalog", "install", "pycowsay", "--json"]);
    assert_eq!(first["outcome"], "ran", "{first:#}");
    let packages = first["resolved"]["packages"].as_array().unwrap();
    assert_eq!(packages[0]["name"], "cowsay");
    assert_eq!(packages[0]["sha256"].as_str().unwrap().len(), 64);
    assert_eq!(first["health"][0]["detail"], "6.1");
    let out = s.expect(0, &["catalog", "run", "pycowsay", "--", "-t", "hello"]);
    assert!(out.contains("| hello |"), "{out}");
    // Someone swaps the registry's bytes: the recorded hash no longer
    // matches what a reinstall fetches, and pip refuses it.
    s.expect(0, &["catalog", "remove", "pycowsay"]);
    sql(
        &s,
        "UPDATE catalog_locks SET record = replace(record, substr(record, instr(record, '\"sha256\":\"') + 10, 64), '0000000000000000000000000000000000000000000000000000000000000000')",
    );
    s.add("pycowsay", PYCOWSAY);
    let refused = s.json(1, &["catalog", "install", "pycowsay", "--json"]);
    assert_eq!(refused["outcome"], "failed", "{refused:#}");
    let detail = refused["detail"].as_str().unwrap();
    assert!(
        detail.contains("held to the recorded hashes") && detail.contains("HASH"),
        "{detail}"
    );
    assert_eq!(s.state("pycowsay"), "failed");
    assert!(
        s.install_dirs("pycowsay").is_empty(),
        "{:?}",
        s.install_dirs("pycowsay")
    );
}

#[test]
fn an_apt_tool_is_verified_in_the_image_never_installed_and_runs_also_through_merged_usr() {
    let version = dpkg_version("jq");
    let s = Shelf::new();
    s.policy("allow_all", "allow_safe");
    // /bin/jq is /usr/bin/jq through the merged-/usr symlink.
    s.add("jq", &jq("jq", &version, "/bin/jq"));
    let installed = s.json(0, &["catalog", "install", "jq", "--json"]);
    assert_eq!(installed["outcome"], "ran", "{installed:#}");
    assert!(
        installed["health"][0]["detail"]
            .as_str()
            .unwrap()
            .starts_with("jq-"),
        "{installed:#}"
    );
    let mut cmd = s.command(&["catalog", "run", "jq", "--stdin", "--", "-c", ".a"]);
    let mut child = cmd
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(br#"{"a": [1, 2]}"#)
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(
        (o.status.code(), stdout(&o).as_str()),
        (Some(0), "[1,2]\n"),
        "{}",
        stderr(&o)
    );
    // Another pin than the image holds: the image must be rebuilt.
    s.add("jq-next", &jq("jq-next", "99.0-1", "/usr/bin/jq"));
    let unavailable = s.json(5, &["catalog", "install", "jq-next", "--json"]);
    let detail = unavailable["detail"].as_str().unwrap();
    assert!(
        detail.contains(&format!(
            "the image holds jq {version}, the manifest pins 99.0-1"
        )) && detail.contains("the image must be rebuilt"),
        "{detail}"
    );
    // A bin the image lacks: the same.
    s.add("nothere", &jq("nothere", &version, "/usr/bin/jq-not-here"));
    let missing = s.json(5, &["catalog", "install", "nothere", "--json"]);
    assert!(
        missing["detail"]
            .as_str()
            .unwrap()
            .contains("/usr/bin/jq-not-here does not exist"),
        "{missing:#}"
    );
    // Nothing was fetched for any of them.
    // (The health check's working directory is an empty one of its own.)
    assert_eq!(s.install_dirs("jq"), Vec::<PathBuf>::new());
}

#[test]
fn concurrent_installs_install_once_and_a_killed_install_leaves_nothing_in_use() {
    let s = Shelf::new();
    s.policy("allow_all", "allow_safe");
    s.add("pycowsay", PYCOWSAY);
    // Killed while pip runs: the tool stays shelved and nothing of the
    // half-done install is used.
    let mut child = s
        .command(&["catalog", "install", "pycowsay"])
        .stderr(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while s.install_dirs("pycowsay").is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        s.install_dirs("pycowsay").len(),
        1,
        "the install never started"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(s.state("pycowsay"), "shelved");
    // A catalogue command removes what the killed install left, once the
    // install's last process (its sandbox dies with it, a moment later)
    // has let go of the tool's lock.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !s.install_dirs("pycowsay").is_empty() && Instant::now() < deadline {
        s.expect(0, &["catalog", "list"]);
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(s.install_dirs("pycowsay"), Vec::<PathBuf>::new());
    assert_eq!(
        s.run(&["catalog", "run", "pycowsay", "--", "x"])
            .status
            .code(),
        Some(5)
    );
    // Three installs at once: one installs, the others find it installed;
    // what the killed one left is gone.
    let children: Vec<_> = (0..3)
        .map(|_| {
            s.command(&["catalog", "install", "pycowsay", "--json"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut details = Vec::new();
    for child in children {
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "{}\n{}", stdout(&o), stderr(&o));
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        details.push(v["detail"].as_str().unwrap().to_owned());
    }
    let fetched = details
        .iter()
        .filter(|d| d.starts_with("installed `pycowsay` into"))
        .count();
    assert_eq!(fetched, 1, "{details:#?}");
    assert_eq!(
        s.install_dirs("pycowsay").len(),
        1,
        "{:?}",
        s.install_dirs("pycowsay")
    );
    let installs = s.json(0, &["catalog", "show", "pycowsay", "--json"])["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == "install" && r["outcome"] == "ran")
        .count();
    assert_eq!(installs, 3);
}

#[test]
fn re_pinning_makes_a_tool_not_installed() {
    let s = Shelf::new();
    s.policy("allow_all", "allow_safe");
    s.add("sh", SH);
    s.expect(0, &["catalog", "install", "sh"]);
    assert_eq!(s.state("sh"), "installed");
    // Another description keeps the install.
    s.add("sh", &SH.replace("The image's POSIX shell", "A shell"));
    assert_eq!(s.state("sh"), "installed");
    // Another bin is another pin.
    let o = s.run(&[
        "catalog",
        "add",
        s.write("manifests/sh2.toml", &SH.replace("/bin/sh", "/bin/dash"))
            .to_str()
            .unwrap(),
    ]);
    assert!(
        stdout(&o).contains("sh: re-pinned: not installed until installed again"),
        "{}",
        stdout(&o)
    );
    assert_eq!(s.state("sh"), "shelved");
    let o = s.run(&["catalog", "run", "sh", "--", "-c", "echo no"]);
    assert_eq!(o.status.code(), Some(5));
    said(&o, "`sh` is not installed (shelved)");
}

#[test]
fn a_crate_installs_with_cargo_install_locked_and_runs_without_the_toolchain() {
    let s = Shelf::new();
    s.policy("allow_all", "allow_safe");
    s.add(
        "fortune",
        "id = \"fortune\"\ndescription = \"Says hello (crates.io)\"\nsource_kind = \"cargo-crate\"\n\
         package_name = \"fortune\"\npackage_version = \"0.2.0\"\nrisk = \"low\"\n\
         [[bins]]\nname = \"fortune\"\n",
    );
    // The host's toolchain, found through rustup as the test's own user
    // finds it (the test's toolgate runs with a home of its own).
    let rustup = std::env::var("RUSTUP_HOME")
        .unwrap_or_else(|_| format!("{}/.rustup", std::env::var("HOME").unwrap()));
    let o = s.run_env(
        &["catalog", "install", "fortune", "--json"],
        &[("RUSTUP_HOME", &rustup)],
    );
    let installed: Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&o)));
    assert_eq!(installed["outcome"], "ran", "{installed:#}");
    let crates = installed["resolved"]["installs"].to_string();
    assert!(crates.contains("fortune 0.2.0 (registry+"), "{installed:#}");
    let dir = PathBuf::from(installed["install_dir"].as_str().unwrap());
    for gone in [".cargo-home", ".target"] {
        assert!(!exists(&dir.join(gone)), "{gone} left in {}", dir.display());
    }
    assert_eq!(
        s.expect(0, &["catalog", "run", "fortune"]),
        "Hello, world!\n"
    );
}

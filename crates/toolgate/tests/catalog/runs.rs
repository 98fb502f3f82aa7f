//! Runs: under bubblewrap, argv only, writable only the working directory,
//! no network unless the manifest lists domains, the manifest's limits
//! applied; and the attacks on a run's bin and arguments.

use pretty_assertions::assert_eq;

use super::*;

/// An image tool running /bin/sh with `extra` manifest lines.
fn shell(id: &str, extra: &str) -> String {
    format!(
        "id = \"{id}\"\ndescription = \"shell\"\nsource_kind = \"binary-path\"\nrisk = \"low\"\n{extra}\n\
         [[bins]]\nname = \"sh\"\nbin = \"/bin/sh\"\nhealth_check_args = [\"-c\", \"true\"]\n"
    )
}

fn installed(s: &Shelf, id: &str, manifest: &str) {
    s.add(id, manifest);
    s.expect(0, &["catalog", "install", id]);
}

#[test]
fn a_run_writes_only_its_working_directory_and_sees_nothing_of_the_home() {
    let s = Shelf::new();
    s.policy("allow_all", "allow_all");
    installed(&s, "sh", SH);
    let secret = s.write("home/secret.txt", "the user's secret");
    let outside = s.dir.path().join("outside.txt");
    let script = format!(
        "echo made > made.txt; (echo x > '{o}') 2>/dev/null; cat '{secret}' 2>/dev/null; \
         cat ../home/secret.txt 2>/dev/null; echo done",
        o = outside.display(),
        secret = secret.display()
    );
    let out = s.expect(0, &["catalog", "run", "sh", "--", "-c", &script]);
    assert_eq!(out, "done\n");
    assert_eq!(
        std::fs::read_to_string(s.project().join("made.txt")).unwrap(),
        "made\n"
    );
    assert!(
        !exists(&outside),
        "a run wrote outside its working directory"
    );
    // toolgate's own files inside the working directory are read-only and
    // the store is out of sight.
    s.write("project/toolgate.toml", "");
    let out = s.expect(
        0,
        &[
            "catalog",
            "run",
            "sh",
            "--",
            "-c",
            "echo '[catalog]' > toolgate.toml 2>/dev/null; echo tried",
        ],
    );
    assert_eq!(out, "tried\n");
    assert_eq!(
        std::fs::read_to_string(s.project().join("toolgate.toml")).unwrap(),
        ""
    );
    // A working directory outside the roots is refused before anything runs.
    let o = s.run(&[
        "catalog",
        "run",
        "sh",
        "--workdir",
        "..",
        "--",
        "-c",
        "true",
    ]);
    assert_eq!(o.status.code(), Some(2));
    said(&o, "lies outside the workspace roots");
}

#[test]
fn a_tool_without_network_cannot_reach_it_and_one_with_an_allowlist_reaches_only_that() {
    let s = Shelf::new();
    s.policy("allow_all", "allow_all");
    let curl = |id: &str, network: &str| {
        format!(
            "id = \"{id}\"\ndescription = \"curl\"\nsource_kind = \"binary-path\"\nrisk = \"low\"\n{network}\n\
             [[bins]]\nname = \"curl\"\nbin = \"/usr/bin/curl\"\nhealth_check_args = [\"--version\"]\n"
        )
    };
    installed(&s, "offline", &curl("offline", ""));
    let o = s.run(&[
        "catalog",
        "run",
        "offline",
        "--json",
        "--",
        "-sS",
        "-o",
        "/dev/null",
        "https://pypi.org/simple/",
    ]);
    let run: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(run["outcome"], "ran");
    assert_ne!(run["exit_code"], 0, "{run:#}");
    assert!(
        run["stderr"]
            .as_str()
            .unwrap()
            .contains("Could not resolve host"),
        "{run:#}"
    );
    installed(
        &s,
        "online",
        &curl("online", "network = { allow = [\"pypi.org\"] }"),
    );
    let reached = s.run(&[
        "catalog",
        "run",
        "online",
        "--",
        "-sS",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "https://pypi.org/simple/",
    ]);
    assert_eq!(reached.status.code(), Some(0), "{}", stderr(&reached));
    assert_eq!(stdout(&reached), "200");
    let refused = s.run(&[
        "catalog",
        "run",
        "online",
        "--",
        "-sS",
        "-o",
        "/dev/null",
        "https://files.pythonhosted.org/",
    ]);
    assert_ne!(refused.status.code(), Some(0));
    said(&refused, "egress refused: files.pythonhosted.org:443");
}

#[test]
fn a_tool_over_its_limits_is_stopped() {
    let s = Shelf::new();
    s.policy("allow_all", "allow_all");
    installed(&s, "few", &shell("few", "limits = { processes = 8 }"));
    let o = s.run(&[
        "catalog",
        "run",
        "few",
        "--json",
        "--",
        "-c",
        "for i in $(seq 40); do sleep 3 & done; wait",
    ]);
    let run: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        run["stderr"]
            .as_str()
            .unwrap()
            .contains("Resource temporarily unavailable")
            || run["stderr"].as_str().unwrap().contains("fork"),
        "{run:#}"
    );
    installed(&s, "small", &shell("small", "limits = { memory_mb = 64 }"));
    let o = s.run(&[
        "catalog",
        "run",
        "small",
        "--json",
        "--",
        "-c",
        "exec python3 -c 'b = bytearray(512 * 1024 * 1024); print(len(b))'",
    ]);
    let run: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_ne!(run["exit_code"], 0, "{run:#}");
    assert!(
        !run["stdout"].as_str().unwrap().contains("536870912"),
        "{run:#}"
    );
    installed(
        &s,
        "brief",
        &shell(
            "brief",
            "limits = { timeout_seconds = 1, output_bytes = 1000 }",
        ),
    );
    let o = s.run(&[
        "catalog",
        "run",
        "brief",
        "--json",
        "--",
        "-c",
        "head -c 5000 /dev/zero | tr '\\0' a; sleep 30",
    ]);
    let run: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (&run["timed_out"], &run["stdout_truncated"]),
        (&Value::from(true), &Value::from(true)),
        "{run:#}"
    );
    assert!(run["stdout"].as_str().unwrap().len() <= 1000);
    assert!(run["duration_ms"].as_u64().unwrap() < 20_000, "{run:#}");
}

#[test]
fn arguments_with_a_nul_byte_too_many_or_too_long_are_refused_before_anything_runs() {
    let s = Shelf::new();
    s.policy("allow_all", "allow_all");
    installed(&s, "sh", SH);
    let many: Vec<String> = (0..129).map(|i| i.to_string()).collect();
    let mut args = vec!["catalog", "run", "sh", "--"];
    args.extend(many.iter().map(String::as_str));
    let o = s.run(&args);
    assert_eq!(o.status.code(), Some(2));
    said(&o, "129 arguments; at most 128 are accepted");
    let long = "x".repeat(4097);
    let o = s.run(&["catalog", "run", "sh", "--", "-c", &long]);
    said(&o, "argument 2 is 4097 bytes; at most 4096");
    // Through the agent tool, a NUL byte in an argument.
    let o = s.run(&[
        "call",
        "catalog__sh",
        r#"{"argv": ["-c", "echo a\u0000b"]}"#,
    ]);
    assert_ne!(o.status.code(), Some(0));
    assert!(
        stdout(&o).contains("argument 2 holds a NUL byte")
            || stderr(&o).contains("argument 2 holds a NUL byte"),
        "{}{}",
        stdout(&o),
        stderr(&o)
    );
    let runs = s.json(0, &["catalog", "show", "sh", "--json"])["runs"].clone();
    assert!(
        runs.as_array().unwrap().iter().all(|r| r["kind"] != "run"),
        "{runs:#}"
    );
}

#[test]
fn a_bin_that_leads_out_of_its_install_is_refused() {
    let s = Shelf::new();
    s.policy("allow_all", "allow_all");
    // In the manifest: refused when it is added.
    let escaping = COWSAY.replace(
        "[[bins]]\nname = \"cowsay\"\n",
        "[[bins]]\nname = \"cowsay\"\nbin = \"../../bin/sh\"\n",
    );
    let file = s.write("manifests/escape.toml", &escaping);
    let o = s.run(&["catalog", "add", file.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    said(
        &o,
        "escape.toml: tool `cowsay`: field `bins[0].bin`: expected a path inside the tool's install directory",
    );
    // In the package: a bin that is a symlink out of the install.
    s.add("cowsay", COWSAY);
    s.expect(0, &["catalog", "install", "cowsay"]);
    let dir = s.install_dirs("cowsay").remove(0);
    let bin = dir.join("node_modules/.bin/cowsay");
    std::fs::remove_file(&bin).unwrap();
    std::os::unix::fs::symlink("/bin/sh", &bin).unwrap();
    let o = s.run(&["catalog", "run", "cowsay", "--", "-c", "echo escaped"]);
    assert_eq!(o.status.code(), Some(5), "{}", stdout(&o));
    assert!(!stdout(&o).contains("escaped"));
    // (/bin/sh is dash on Debian; the link leads wherever it leads.)
    said(&o, "outside the tool's install directory");
}

#[test]
fn agents_reach_the_catalogue_through_the_executor() {
    let s = Shelf::new();
    s.policy("approval", "allow_safe");
    s.add("sh", SH);
    s.add("cowsay", COWSAY);
    // Shelved tools: only catalog_install is offered.
    let tools = s.json(0, &["tools", "--json"]);
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .filter(|n| n.starts_with("catalog"))
        .collect();
    assert_eq!(names, ["catalog_install"]);
    // An agent asks for an install: blocked until a person approves.
    let o = s.run(&["call", "catalog_install", r#"{"id": "sh"}"#, "--json"]);
    let result: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&o), stderr(&o)));
    let text = result.to_string();
    assert!(text.contains("blocked"), "{text}");
    let pending = s.json(0, &["approvals", "list", "--json"]);
    let id = pending[0]["id"].as_str().unwrap().to_owned();
    s.approve(&id);
    let o = s.run(&["call", "catalog_install", r#"{"id": "sh"}"#]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    // Installed: the tool is offered with its class and group.
    let tools = s.json(0, &["tools", "--json"]);
    let sh = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "catalog__sh")
        .unwrap_or_else(|| panic!("{tools:#}"))
        .clone();
    assert_eq!(
        (&sh["effect_class"], &sh["group"]),
        (
            &Value::from("mutate-irreversible"),
            &Value::from("group:catalog")
        ),
        "{sh:#}"
    );
    let o = s.run(&[
        "call",
        "catalog__sh",
        r#"{"argv": ["-c", "echo from the agent"]}"#,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with("from the agent\n[exit 0"),
        "{}",
        stdout(&o)
    );
    // A working directory out of the roots, by `..` or by a symlink, is
    // refused: nothing is written there.
    std::os::unix::fs::symlink(s.dir.path(), s.project().join("up")).unwrap();
    std::fs::create_dir_all(s.project().join("sub")).unwrap();
    for workdir in ["..", "up", "sub/../.."] {
        let args = format!(r#"{{"workdir": "{workdir}", "argv": ["-c", "echo x > escaped"]}}"#);
        let o = s.run(&["call", "catalog__sh", &args]);
        assert_ne!(o.status.code(), Some(0), "{workdir}: {}", stdout(&o));
        assert!(!exists(&s.dir.path().join("escaped")), "{workdir}");
    }
    // Access applies as to any tool: a deny of the group hides it.
    s.write(
        "home/.config/toolgate/config.toml",
        "[approvals]\nwait = \"1s\"\n[access]\ndeny = [\"group:catalog\"]\n",
    );
    let o = s.run(&["call", "catalog__sh", r#"{"argv": ["-c", "echo no"]}"#]);
    assert_ne!(o.status.code(), Some(0));
    // And every agent call is in the audit log.
    let audit = s.json(0, &["audit", "--json"]);
    let calls: Vec<&str> = audit
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["tool"].as_str())
        .collect();
    assert!(
        calls.contains(&"catalog__sh") && calls.contains(&"catalog_install"),
        "{calls:?}"
    );
}

#[test]
fn the_catalogue_runs_nothing_under_a_backend_weaker_than_bubblewrap() {
    let s = Shelf::new();
    s.policy("allow_all", "allow_all");
    installed(&s, "sh", SH);
    s.write(
        "home/.config/toolgate/config.toml",
        "[approvals]\nwait = \"1s\"\n[sandbox]\nbackend = \"landlock\"\n",
    );
    let run = s.json(
        5,
        &["catalog", "run", "sh", "--json", "--", "-c", "echo ran"],
    );
    assert_eq!(run["outcome"], "unavailable");
    assert!(
        run["reason"].as_str().unwrap().contains(
            "the catalogue needs bubblewrap: the configuration chooses the landlock backend"
        ),
        "{run:#}"
    );
    assert_eq!(run["stdout"], Value::Null, "{run:#}");
}

#[test]
fn an_mcp_client_sees_catalogue_tools_with_their_class_and_calls_them() {
    let s = Shelf::new();
    s.policy("allow_all", "allow_safe");
    installed(&s, "sh", SH);
    let mut client = stdio_client::McpServer::start(s.command(&["mcp"]));
    let listed = client.request("tools/list", serde_json::json!({}));
    let tool = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "catalog__sh")
        .unwrap_or_else(|| panic!("{listed:#}"))
        .clone();
    assert_eq!(tool["annotations"]["destructiveHint"], true, "{tool:#}");
    assert_eq!(tool["annotations"]["readOnlyHint"], false, "{tool:#}");
    assert!(
        tool["description"]
            .as_str()
            .unwrap()
            .contains("The image's POSIX shell"),
        "{tool:#}"
    );
    let called = client.request(
        "tools/call",
        serde_json::json!({"name": "catalog__sh", "arguments": {"argv": ["-c", "echo over mcp"]}}),
    );
    let result = &called["result"];
    assert_eq!(result["isError"], false, "{called:#}");
    assert_eq!(result["structuredContent"]["exit_code"], 0, "{called:#}");
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("over mcp\n"),
        "{called:#}"
    );
    assert!(client.close());
}

#[test]
fn the_operators_filesystem_rules_hold_for_catalogue_runs() {
    let s = Shelf::new();
    s.policy("allow_all", "allow_all");
    installed(&s, "sh", SH);
    s.write("project/private/secret.txt", "top secret\n");
    s.write("project/docs/guide.md", "guide\n");
    s.write(
        "project/.srt.json",
        r#"{"network": {"allowedDomains": [], "deniedDomains": []},
            "filesystem": {"denyRead": ["private"], "allowWrite": [], "denyWrite": ["docs"], "allowRead": []}}"#,
    );
    let config = s.write(
        "project/toolgate.toml",
        "[network]\nmode = \"proxy\"\nsettings_file = \".srt.json\"\n",
    );
    common::trust(s.dir.path(), &config);
    let script = "cat private/secret.txt; echo \"[read=$?]\"; \
                  echo pwned > docs/guide.md; echo \"[write=$?]\"; \
                  echo fine > notes.txt; echo \"[other=$?]\"";
    let out = s.expect(0, &["catalog", "run", "sh", "--", "-c", script]);
    assert!(!out.contains("top secret"), "{out}");
    assert!(
        !out.contains("[read=0]") && !out.contains("[write=0]"),
        "{out}"
    );
    assert!(out.contains("[other=0]"), "{out}");
    assert_eq!(
        std::fs::read_to_string(s.project().join("docs/guide.md")).unwrap(),
        "guide\n"
    );
}

#[test]
fn a_run_cannot_rewrite_the_configuration_toolgate_reads_below_its_working_directory() {
    // Run from project/sub with the whole project as the working
    // directory: sub/toolgate.toml is a file toolgate reads (the nearest
    // project file), not at the top of the writable directory, so only the
    // catalogue's own protection keeps it read-only.
    let s = Shelf::new();
    s.policy("allow_all", "allow_all");
    installed(&s, "sh", SH);
    let config = s.write("project/sub/toolgate.toml", "# the project's\n");
    let root = format!("project={}", s.project().display());
    let o = common::toolgate(s.dir.path(), &s.project().join("sub"))
        .args([
            "--root",
            &root,
            "catalog",
            "run",
            "sh",
            "--workdir",
            "..",
            "--",
            "-c",
        ])
        .arg("echo '[catalog]' > sub/toolgate.toml; echo \"[write=$?]\"; echo ok > sub/other.txt")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("[write=") && !stdout(&o).contains("[write=0]"),
        "{}",
        stdout(&o)
    );
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        "# the project's\n"
    );
    assert_eq!(
        std::fs::read_to_string(s.project().join("sub/other.txt")).unwrap(),
        "ok\n"
    );
}

#[test]
fn a_run_cannot_see_the_store_when_toolgates_data_lies_in_its_working_directory() {
    // The data directory (the store of grants and the audit log) inside the
    // project: a catalogue tool that could read or write it could approve
    // its own runs.
    let s = Shelf::new();
    let data = s.project().join(".data");
    let env = [("XDG_DATA_HOME", data.to_str().unwrap())];
    let ok = |args: &[&str]| {
        let o = s.run_env(args, &env);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        stdout(&o)
    };
    ok(&[
        "catalog",
        "policy",
        "--install",
        "allow_all",
        "--execute",
        "allow_all",
    ]);
    let file = s.write("manifests/sh.toml", SH);
    ok(&["catalog", "add", file.to_str().unwrap()]);
    ok(&["catalog", "install", "sh"]);
    assert!(data.join("toolgate/toolgate.db").is_file());
    let out = ok(&[
        "catalog",
        "run",
        "sh",
        "--",
        "-c",
        "ls -A .data/toolgate 2>&1; head -c 16 .data/toolgate/toolgate.db 2>&1 | grep -c SQLite; echo x > .data/toolgate/toolgate.db; echo \"[write=$?]\"",
    ]);
    assert!(!out.contains("toolgate.db\n"), "{out}");
    assert!(out.contains("0\n") && !out.contains("[write=0]"), "{out}");
    assert!(
        std::fs::read(data.join("toolgate/toolgate.db"))
            .unwrap()
            .starts_with(b"SQLite")
    );
}

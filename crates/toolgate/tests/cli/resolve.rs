//! `toolgate resolve`, and the servers it resolves, launched as a host would.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use pretty_assertions::assert_eq;

use super::*;

/// A raw MCP session over stdio with a launched server.
struct Session {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next: u64,
}

impl Session {
    /// Starts `config` (`{command, args, cwd}`) with nothing of the host's
    /// environment but PATH and a home of its own.
    fn start(config: &Value, home: &Path) -> Session {
        let args: Vec<&str> = config["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        let mut child = Command::new(config["command"].as_str().unwrap())
            .args(args)
            .current_dir(config["cwd"].as_str().unwrap())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut session = Session {
            child,
            stdin,
            stdout,
            next: 0,
        };
        let init = session.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "resolve-test", "version": "0"}}),
        );
        assert_eq!(init["result"]["serverInfo"]["name"], "toolgate");
        session.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        session
    }

    fn send(&mut self, message: Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Sends a request and returns its response (notifications skipped).
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let mut line = String::new();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "server closed stdout"
            );
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                return message;
            }
        }
    }

    fn call(&mut self, tool: &str, args: Value) -> (bool, String) {
        let response = self.request("tools/call", json!({"name": tool, "arguments": args}));
        let result = &response["result"];
        let text = result["content"][0]["text"].as_str().unwrap_or_default();
        (result["isError"] == true, text.to_owned())
    }

    fn tool_names(&mut self) -> Vec<String> {
        let listed = self.request("tools/list", json!({}));
        let mut names: Vec<String> = listed["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect();
        names.sort();
        names
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn resolved(s: &Sandbox, description: &str) -> Value {
    let o = s.run(&["resolve", "--json", description]);
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn resolve_prints_a_list_and_a_map_of_the_same_servers() {
    let s = Sandbox::new();
    let out = resolved(
        &s,
        r#"{"fs": {"roots": ["sub"]}, "shell": true, "dispatch": true}"#,
    );
    let servers = out["servers"].as_array().unwrap();
    let names: Vec<&str> = servers
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["fs", "shell", "dispatch"]);
    let project = std::fs::canonicalize(s.project()).unwrap();
    for server in servers {
        let mut entry = server.clone();
        entry.as_object_mut().unwrap().remove("name");
        assert_eq!(out["mcpServers"][server["name"].as_str().unwrap()], entry);
        assert_eq!(server["cwd"], json!(project));
        assert_eq!(server["command"], json!(env!("CARGO_BIN_EXE_toolgate")));
    }
    assert_eq!(
        servers[0]["args"],
        json!([
            "mcp",
            "--tools",
            "read,write,edit,apply_patch,grep,find,ls",
            "--root",
            format!("sub={}", project.join("sub").display())
        ])
    );
    assert_eq!(out["warnings"], json!([]));
}

#[test]
fn resolve_refuses_hints_that_are_not_portable() {
    let s = Sandbox::new();
    for (description, says) in [
        (
            r#"{"fs": {"roots": ["/etc"]}}"#,
            "is an absolute path, which is not portable",
        ),
        (
            r#"{"shell": {"roots": ["../.."]}}"#,
            "escapes the caller's working directory",
        ),
        (r#"{"fs": {"root": ["sub"]}}"#, "unknown field `root`"),
    ] {
        let o = s.run(&["resolve", description]);
        assert_eq!(o.status.code(), Some(2), "{description}");
        assert!(stderr(&o).contains(says), "{description}: {}", stderr(&o));
        assert_eq!(stdout(&o), "");
    }
}

#[test]
fn an_unsandboxed_shell_resolves_with_a_warning_and_the_dispatch_launch_can_be_overridden() {
    let s = Sandbox::new();
    let o = s.run_in(
        &s.project(),
        &[
            "resolve",
            "--json",
            r#"{"shell": {"sandbox": false}, "dispatch": true}"#,
        ],
        &[
            ("TOOLGATE_DISPATCH_COMMAND", "/usr/local/bin/run-toolgate"),
            ("TOOLGATE_DISPATCH_ARGS", "--quiet --"),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("WARNING: shell: sandbox is off"),
        "{}",
        stderr(&o)
    );
    let out: Value = serde_json::from_slice(&o.stdout).unwrap();
    let shell = &out["mcpServers"]["shell"];
    assert!(
        shell["args"]
            .as_array()
            .unwrap()
            .contains(&json!("--no-sandbox"))
    );
    let dispatch = &out["mcpServers"]["dispatch"];
    assert_eq!(dispatch["command"], "/usr/local/bin/run-toolgate");
    assert_eq!(dispatch["args"][0], "--quiet");
    assert_eq!(dispatch["args"][1], "--");
    assert_eq!(dispatch["args"][2], "mcp");
}

#[test]
fn resolved_servers_expose_their_tools_and_stay_in_their_roots() {
    let s = Sandbox::new();
    s.write("project/sub/a.txt", "alpha\nbeta\n");
    s.write("project/top.txt", "top secret\n");
    let out = resolved(
        &s,
        r#"{"fs": {"roots": ["sub"], "read_only": true}, "shell": {"roots": ["sub"]}}"#,
    );
    let home = s.dir.path().join("home");

    let mut fs = Session::start(&out["mcpServers"]["fs"], &home);
    assert_eq!(fs.tool_names(), ["find", "grep", "ls", "read"]);
    // Relative paths start at the server's first root (the project is
    // outside its roots); absolute paths work too.
    let sub = std::fs::canonicalize(s.project().join("sub")).unwrap();
    for path in ["a.txt".to_owned(), sub.join("a.txt").display().to_string()] {
        let (failed, text) = fs.call("read", json!({ "path": path }));
        assert!(!failed && text.contains("alpha"), "{path}: {text}");
    }
    let top = sub.parent().unwrap().join("top.txt").display().to_string();
    for path in ["../top.txt", top.as_str()] {
        let (failed, text) = fs.call("read", json!({ "path": path }));
        assert!(failed && !text.contains("top secret"), "{path}: {text}");
    }
    let (failed, text) = fs.call("write", json!({"path": "sub/b.txt", "content": "x"}));
    assert!(
        failed && text.contains("not among this server's tools"),
        "{text}"
    );
    assert!(!s.project().join("sub/b.txt").exists());

    let mut shell = Session::start(&out["mcpServers"]["shell"], &home);
    assert_eq!(
        shell.tool_names(),
        [
            "bash",
            "process_kill",
            "process_list",
            "process_read",
            "process_start",
            "process_write"
        ]
    );
    // Pipes, lists and redirections of allowed commands work: the allowlist
    // is checked on the parsed script, not on argv.
    let (failed, text) = shell.call(
        "bash",
        json!({"command": "cat a.txt | grep beta > out.txt && wc -l < out.txt"}),
    );
    assert!(!failed && text.starts_with("1\n"), "{text}");
    assert_eq!(
        std::fs::read_to_string(s.project().join("sub/out.txt")).unwrap(),
        "beta\n"
    );
    // Interpreters are not on the default list.
    for script in ["python3 -c 'print(1)'", "ls | sh", "cat a.txt; perl -e 1"] {
        let (failed, text) = shell.call("bash", json!({"command": script}));
        assert!(failed, "{script}: {text}");
        assert!(
            text.starts_with("denied by the commands policy"),
            "{script}: {text}"
        );
    }
    // The shell's only root is sub: the rest of the project is not writable.
    let (_, text) = shell.call(
        "bash",
        json!({"command": "echo x > ../top.txt; echo y > ../new.txt"}),
    );
    assert!(text.contains("exit code"), "{text}");
    assert_eq!(
        std::fs::read_to_string(s.project().join("top.txt")).unwrap(),
        "top secret\n"
    );
    assert!(!s.project().join("new.txt").exists());
}

//! `toolgate mcp` started in the home directory, as MCP clients often start
//! servers: it comes up (a client may still send narrower roots), says on
//! stderr and in its instructions what is wrong, and refuses every call
//! while the only root is the home directory. Driven by a raw JSON-RPC
//! client that can offer roots, so nothing here needs the Python SDK.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command};
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::{Lines, Project, file_uri, text, wait_until};

/// A 2025-11-25 client over stdio that answers roots/list with its roots
/// (when it has any) and keeps every notification it gets.
pub(crate) struct RootsClient {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Lines,
    stderr: Lines,
    roots: Option<Vec<String>>,
    next_id: u64,
    /// The `initialize` result.
    pub initialized: Value,
    /// Every notification toolgate sent so far.
    pub notifications: Vec<Value>,
}

impl RootsClient {
    /// Starts `cmd` (a `toolgate ... mcp` command) and initializes, offering
    /// `roots` (the roots capability only with `Some`).
    pub fn start(cmd: Command, roots: Option<Vec<String>>) -> RootsClient {
        let (child, stdin, stdout, stderr) = crate::spawn_piped(cmd);
        let mut client = RootsClient {
            stdin,
            stdout,
            stderr,
            child,
            roots,
            next_id: 1,
            initialized: Value::Null,
            notifications: Vec::new(),
        };
        let capabilities = match client.roots {
            Some(_) => json!({"roots": {"listChanged": true}}),
            None => json!({}),
        };
        let init = client.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": capabilities,
                   "clientInfo": {"name": "roots-test", "version": "0"}}),
        );
        client.initialized = init["result"].clone();
        client.write(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        client
    }

    fn write(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    /// Sends a request and reads until its response, answering roots/list
    /// on the way.
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.write(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let Some(line) = self.stdout.next(Duration::from_secs(60)) else {
                panic!("toolgate mcp said nothing more; stderr:\n{}", self.stderr());
            };
            let message: Value = serde_json::from_str(&line).unwrap();
            match (message.get("id"), message["method"].as_str()) {
                (Some(asked), Some("roots/list")) => {
                    let roots: Vec<Value> = self
                        .roots
                        .iter()
                        .flatten()
                        .map(|uri| json!({"uri": uri}))
                        .collect();
                    let id = asked.clone();
                    self.write(&json!({"jsonrpc": "2.0", "id": id, "result": {"roots": roots}}));
                }
                (None, Some(_)) => self.notifications.push(message),
                (Some(answered), None) if *answered == id => return message,
                _ => {}
            }
        }
    }

    /// A tools/call result.
    pub fn call(&mut self, name: &str, arguments: Value) -> Value {
        let response = self.request("tools/call", json!({"name": name, "arguments": arguments}));
        assert!(response.get("error").is_none(), "{response}");
        response["result"].clone()
    }

    /// Closes stdin and returns everything toolgate wrote to stderr.
    pub fn stderr(&mut self) -> String {
        drop(self.stdin.take());
        wait_until(&mut self.child, Duration::from_secs(60));
        self.stderr.rest(Duration::from_secs(10)).join("\n")
    }
}

impl Drop for RootsClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `toolgate mcp` in `cwd` with HOME set to `home`.
fn mcp_with_home(p: &Project, cwd: &Path, home: &Path) -> Command {
    let mut cmd = crate::common::toolgate(p.base(), cwd);
    cmd.env("HOME", home).arg("mcp");
    cmd
}

const REFUSED: &str = "is the home directory: file tools and commands there could plant host \
                       configuration (~/.gitconfig, ~/.cargo/config.toml, ~/.local/bin, \
                       ~/.config/toolgate): pass --root PROJECT or let the client send roots";

/// What the attacks write: each is run by the host later.
fn plants() -> Vec<(&'static str, Value)> {
    vec![
        (
            "write",
            json!({"path": ".gitconfig", "content": "[core]\n\tpager = touch /tmp/pwned\n"}),
        ),
        (
            "write",
            json!({"path": ".cargo/config.toml", "content": "[build]\nrustc-wrapper = \"x\"\n"}),
        ),
        (
            "write",
            json!({"path": ".local/bin/ls", "content": "#!/bin/sh\ntouch /tmp/pwned\n"}),
        ),
        (
            "bash",
            json!({"command": "echo 'touch /tmp/pwned' >> .bashrc"}),
        ),
    ]
}

/// The names in `dir`, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Attack: the client starts toolgate in `~` and offers no roots; the
/// model then writes host configuration there. The server starts, says
/// why at the start and in its instructions, and refuses every call.
#[test]
fn a_home_directory_root_refuses_every_call_until_the_client_sends_roots() {
    let p = Project::new();
    let home: PathBuf = p.root().to_owned();
    let before = entries(&home);
    let mut client = RootsClient::start(mcp_with_home(&p, &home, &home), None);
    let expected = format!("the workspace root {} {REFUSED}", home.display());
    let instructions = client.initialized["instructions"]
        .as_str()
        .unwrap_or_default();
    assert!(instructions.contains(&expected), "{instructions}");
    for (tool, args) in plants() {
        let result = client.call(tool, args.clone());
        assert_eq!(result["isError"], true, "{tool} {args}: {result}");
        assert!(text(&result).starts_with(&expected), "{result}");
    }
    // The tools are still listed: the server is up, only calls are refused.
    let listed = client.request("tools/list", json!({}));
    assert!(listed["result"]["tools"].as_array().unwrap().len() > 5);
    let stderr = client.stderr();
    assert!(
        stderr.contains(&format!("toolgate: {expected}")),
        "{stderr}"
    );
    // Nothing planted; only toolgate's own state and data directories (the
    // store of approvals and audit) appeared.
    let planted: Vec<String> = entries(&home)
        .into_iter()
        .filter(|e| e != ".local")
        .collect();
    assert_eq!(planted, before);
    assert_eq!(entries(&home.join(".local")), ["share", "state"]);
    assert_eq!(entries(&home.join(".local/share")), ["toolgate"]);
    assert!(!Path::new("/tmp/pwned").exists());
}

/// A client that sends a project inside the home as its root works there;
/// one that sends the home itself is refused like no roots at all.
#[test]
fn a_client_root_inside_the_home_directory_works_and_the_home_itself_does_not() {
    let p = Project::new();
    let home: PathBuf = p.root().to_owned();
    let project = home.join("code/app");
    std::fs::create_dir_all(&project).unwrap();
    let mut client = RootsClient::start(
        mcp_with_home(&p, &home, &home),
        Some(vec![file_uri(&project)]),
    );
    let result = client.call("write", json!({"path": "notes.txt", "content": "kept\n"}));
    assert_eq!(result["isError"], false, "{result}");
    let result = client.call("bash", json!({"command": "echo ran > ran.txt"}));
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(
        std::fs::read_to_string(project.join("notes.txt")).unwrap(),
        "kept\n"
    );
    assert_eq!(
        std::fs::read_to_string(project.join("ran.txt")).unwrap(),
        "ran\n"
    );
    // The narrowed scope does not reach back up into the home.
    let result = client.call(
        "write",
        json!({"path": home.join(".gitconfig"), "content": "[core]\n"}),
    );
    assert_eq!(result["isError"], true, "{result}");
    assert!(!home.join(".gitconfig").exists());
    drop(client);

    // The home itself, or a root above it, as the client's root: refused.
    for root in [home.clone(), PathBuf::from("/")] {
        let mut client =
            RootsClient::start(mcp_with_home(&p, &home, &home), Some(vec![file_uri(&root)]));
        let result = client.call(
            "write",
            json!({"path": ".gitconfig", "content": "[core]\n"}),
        );
        assert_eq!(result["isError"], true, "{root:?}: {result}");
        assert!(text(&result).contains(REFUSED), "{root:?}: {result}");
        assert!(!home.join(".gitconfig").exists());
    }
}

/// HOME below the root: the root holds the home, so the same refusal.
#[test]
fn a_root_that_contains_the_home_directory_refuses_every_call() {
    let p = Project::new();
    let home = p.root().join("users/me");
    std::fs::create_dir_all(&home).unwrap();
    let mut client = RootsClient::start(mcp_with_home(&p, p.root(), &home), None);
    let result = client.call(
        "write",
        json!({"path": "users/me/.gitconfig", "content": "[core]\n"}),
    );
    assert_eq!(result["isError"], true, "{result}");
    assert!(
        text(&result).starts_with(&format!(
            "the workspace root {} contains the home directory {}",
            p.root().display(),
            home.display()
        )),
        "{result}"
    );
    assert!(!home.join(".gitconfig").exists());
}

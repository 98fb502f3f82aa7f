//! Background processes through the Executor, in the real sandbox (the
//! `toolgate` binary is stage 2): a server, a conversation over stdin,
//! kills that reach the whole tree, per-agent tables and the cap.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate_core::{CallContext, EventSink, Registry, ToolEvent, ToolEventKind};
use toolgate_policy::{CallError, Executor, Policy};
use toolgate_sandbox::egress::EgressRules;
use toolgate_sandbox::proxy::StaticResolver;
use toolgate_sandbox::{LocalWorkspace, NetworkMode, Sandbox, SandboxConfig};
use toolgate_tools::process::ProcessConfig;
use toolgate_tools::{Fs, Limits, RuntimeConfig, register_runtime_tools};

struct Agent {
    executor: Executor,
    ctx: CallContext,
}

impl Agent {
    fn new(root: &Path, state: PathBuf, logs: PathBuf, max_running: usize) -> Agent {
        Agent::with_events(root, state, logs, max_running, Arc::new(|_: &ToolEvent| {}))
    }

    fn with_events(
        root: &Path,
        state: PathBuf,
        logs: PathBuf,
        max_running: usize,
        sink: Arc<dyn EventSink>,
    ) -> Agent {
        Agent::build(root, state, logs, max_running, sink, None)
    }

    /// With `egress`, commands reach the network only through the proxy
    /// and these rules (test names resolved by a static table).
    fn build(
        root: &Path,
        state: PathBuf,
        logs: PathBuf,
        max_running: usize,
        sink: Arc<dyn EventSink>,
        egress: Option<(EgressRules, StaticResolver)>,
    ) -> Agent {
        let mut config = SandboxConfig::new(PathBuf::from(env!("CARGO_BIN_EXE_toolgate")), state)
            .stage2_prefix(["__stage2"]);
        let network = if let Some((rules, resolver)) = egress {
            config = config.egress(rules, Arc::new(resolver), Arc::new(|_| {}));
            NetworkMode::Proxy
        } else {
            NetworkMode::None
        };
        let sandbox = Sandbox::new(config).unwrap();
        let ws = LocalWorkspace::new("agent", vec![root.to_owned()], root.to_owned(), sandbox)
            .unwrap()
            .network(network);
        let fs = Arc::new(Fs::new(Arc::new(ws), Limits::default()));
        let mut processes = ProcessConfig::default();
        processes.max_running = max_running;
        processes.log_dir = logs;
        processes.kill_grace = Duration::from_secs(2);
        let mut registry = Registry::new();
        register_runtime_tools(&mut registry, fs, RuntimeConfig::default(), processes).unwrap();
        let executor = Executor::builder(registry)
            .policy(Policy::standard())
            .subscribe(sink)
            .build();
        Agent {
            executor,
            ctx: CallContext::new("t", "test", root.to_owned()),
        }
    }

    async fn call(&self, tool: &str, args: Value) -> Result<(String, Value), CallError> {
        let result = self.executor.call(tool, args, &self.ctx).await?;
        Ok((
            result.output.joined_text(),
            result.output.structured.unwrap_or(Value::Null),
        ))
    }

    async fn ok(&self, tool: &str, args: Value) -> (String, Value) {
        self.call(tool, args)
            .await
            .unwrap_or_else(|e| panic!("{tool}: {e}"))
    }

    /// Reads with waits until `needle` shows up in the output or 20 s pass.
    async fn read_until(&self, pid: u64, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut seen = String::new();
        let mut offset = 0u64;
        while Instant::now() < deadline {
            let (text, facts) = self
                .ok(
                    "process_read",
                    json!({"pid": pid, "offset": offset, "wait": 2}),
                )
                .await;
            offset = facts["next_offset"].as_u64().unwrap();
            seen.push_str(&text);
            if seen.contains(needle) {
                return seen;
            }
        }
        panic!("`{needle}` never appeared in the output of {pid}: {seen}");
    }
}

struct World {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    state: PathBuf,
    logs: PathBuf,
}

fn world() -> World {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let root = base.join("root");
    let logs = base.join("logs");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&logs).unwrap();
    World {
        root,
        state: base.join("state"),
        logs,
        _tmp: tmp,
    }
}

/// Host pids whose command line contains `marker`.
fn pids_with(marker: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(marker) && pid != std::process::id() {
            out.push(pid);
        }
    }
    out
}

async fn gone(marker: &str) -> bool {
    for _ in 0..100 {
        if pids_with(marker).is_empty() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test]
async fn a_server_runs_in_the_background_logs_requests_and_dies_with_its_tree() {
    let w = world();
    let agent = Agent::new(&w.root, w.state.clone(), w.logs.clone(), 4);
    // The server and a client in the same sandbox (its network is its own).
    let script = "python3 -u -m http.server 47613 --bind 127.0.0.1 & \
                  sleep 1; python3 -c \"import urllib.request; print('client got', urllib.request.urlopen('http://127.0.0.1:47613/').status)\"; \
                  wait";
    let (text, facts) = agent
        .ok("process_start", json!({ "command": script }))
        .await;
    let pid = facts["pid"].as_u64().unwrap();
    let log = PathBuf::from(facts["output_file"].as_str().unwrap());
    // In a directory of the table's own, that only its owner can enter.
    assert_eq!(log.file_name().unwrap(), format!("{pid}.log").as_str());
    let dir = log.parent().unwrap();
    assert_eq!(dir.parent().unwrap(), w.logs);
    let name = dir.file_name().unwrap().to_str().unwrap();
    assert!(
        name.starts_with(&format!("toolgate-proc-{}-", std::process::id())),
        "{name}"
    );
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(dir).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o700);
    assert!(text.contains(&format!("Started process {pid}")), "{text}");
    let seen = agent.read_until(pid, "client got 200").await;
    assert!(seen.contains("\"GET / HTTP/1.1\" 200"), "{seen}");
    let (list, facts) = agent.ok("process_list", json!({})).await;
    assert_eq!(
        facts["processes"][0]["status"]["state"], "running",
        "{list}"
    );
    assert!(!pids_with("47613").is_empty());

    let (text, facts) = agent.ok("process_kill", json!({ "pid": pid })).await;
    assert_eq!(facts["status"]["state"], "exited", "{text}");
    assert!(
        gone("47613").await,
        "the server outlived process_kill: {:?}",
        pids_with("47613")
    );
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
    // The output file stays readable after the end.
    let (text, _) = agent.ok("process_read", json!({ "pid": pid })).await;
    assert!(text.contains("client got 200"), "{text}");
}

#[tokio::test]
async fn a_conversation_over_stdin() {
    let w = world();
    let agent = Agent::new(&w.root, w.state.clone(), w.logs.clone(), 4);
    let script = "while read -r line; do echo \"got: $line\"; done; echo 'input closed'";
    let (_, facts) = agent
        .ok("process_start", json!({ "command": script }))
        .await;
    let pid = facts["pid"].as_u64().unwrap();
    agent
        .ok("process_write", json!({"pid": pid, "text": "hello\n"}))
        .await;
    agent.read_until(pid, "got: hello").await;
    agent
        .ok(
            "process_write",
            json!({"pid": pid, "text": "bye\n", "close": true}),
        )
        .await;
    let seen = agent.read_until(pid, "input closed").await;
    assert!(seen.contains("got: bye"), "{seen}");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, facts) = agent
            .ok("process_read", json!({"pid": pid, "wait": 1}))
            .await;
        if facts["status"]["state"] == "exited" {
            assert_eq!(facts["status"]["exit_code"], 0);
            break;
        }
        assert!(Instant::now() < deadline, "the process never ended");
    }
    let err = agent
        .call("process_write", json!({"pid": pid, "text": "more\n"}))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("is not running"), "{err}");
}

#[tokio::test]
async fn agents_see_only_their_own_processes_and_the_cap_holds() {
    let w = world();
    let a = Agent::new(&w.root, w.state.clone(), w.logs.clone(), 2);
    let b = Agent::new(&w.root, w.state.clone(), w.logs.clone(), 2);
    let marker = "sleep 3131";
    let (_, facts) = a.ok("process_start", json!({ "command": marker })).await;
    let pid = facts["pid"].as_u64().unwrap();
    for (tool, args) in [
        ("process_kill", json!({ "pid": pid })),
        ("process_read", json!({ "pid": pid })),
        ("process_write", json!({"pid": pid, "text": "x"})),
    ] {
        let err = b.call(tool, args).await.unwrap_err();
        assert!(
            err.to_string().contains("not a process this agent started"),
            "{tool}: {err}"
        );
    }
    let (_, facts) = b.ok("process_list", json!({})).await;
    assert_eq!(facts["processes"], json!([]));
    assert!(
        !pids_with("3131").is_empty(),
        "agent b's refusals must not touch a's process"
    );

    a.ok("process_start", json!({"command": "sleep 3132"}))
        .await;
    let err = a
        .call("process_start", json!({"command": "sleep 3133"}))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("the most one agent may have"),
        "{err}"
    );

    assert_eq!(std::fs::read_dir(&w.logs).unwrap().count(), 1);
    // toolgate stops: every process of the agent dies with it, and its
    // output files go too (b never started one and made none).
    drop(a);
    assert!(
        gone("sleep 313").await,
        "processes outlived their agent: {:?}",
        pids_with("sleep 313")
    );
    let left: Vec<_> = std::fs::read_dir(&w.logs).unwrap().collect();
    assert!(
        left.is_empty(),
        "output files outlived their agent: {left:?}"
    );
}

#[tokio::test]
async fn bash_output_lines_arrive_as_progress_events_while_it_runs() {
    let w = world();
    let seen = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let sink = seen.clone();
    let go = w.root.join("go");
    // The listener answers the first line by creating `go`, which the
    // command waits for: the command can only finish if its first line was
    // reported while it was still running.
    let agent = Agent::with_events(
        &w.root,
        w.state.clone(),
        w.logs.clone(),
        4,
        Arc::new(move |e: &ToolEvent| {
            if let ToolEventKind::Progress { message } = &e.kind {
                if message == "first" {
                    std::fs::write(&go, "").unwrap();
                }
                sink.lock().unwrap().push(message.clone());
            }
        }),
    );
    let script = "echo first; while [ ! -e go ]; do sleep 0.05; done; echo second";
    let (text, facts) = agent
        .ok("bash", json!({"command": script, "timeout": 20}))
        .await;
    assert_eq!(facts["timed_out"], json!(false), "{text}");
    assert!(text.starts_with("first\nsecond\n"), "{text}");
    assert_eq!(*seen.lock().unwrap(), ["first", "second"]);
}

#[tokio::test]
async fn every_connection_of_a_command_is_an_egress_event_of_its_call() {
    let w = world();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            use std::io::{Read, Write};
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nhello");
        }
    });
    let rules = EgressRules::new(
        &[format!("allowed.test:{port}")],
        &["denied.test".to_owned()],
    )
    .unwrap();
    let loopback = std::net::IpAddr::from([127, 0, 0, 1]);
    let resolver = StaticResolver::new()
        .with("allowed.test", [loopback])
        .with("denied.test", [loopback]);
    let events = Arc::new(std::sync::Mutex::new(Vec::<ToolEvent>::new()));
    let sink = events.clone();
    let agent = Agent::build(
        &w.root,
        w.state.clone(),
        w.logs.clone(),
        4,
        Arc::new(move |e: &ToolEvent| sink.lock().unwrap().push(e.clone())),
        Some((rules, resolver)),
    );
    let script = format!(
        "curl -sS --max-time 10 http://allowed.test:{port}/; echo; \
         curl -sS --max-time 10 http://denied.test:{port}/ >/dev/null; true"
    );
    let (text, _) = agent.ok("bash", json!({ "command": script })).await;
    assert!(text.starts_with("hello\n"), "{text}");
    let connections: Vec<(String, bool, String, bool)> = events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match &e.kind {
            ToolEventKind::Egress { connection } => Some((
                connection.host.clone(),
                connection.allowed,
                e.tool.clone(),
                connection.bytes_down > 0,
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        connections,
        [
            ("allowed.test".to_owned(), true, "bash".to_owned(), true),
            ("denied.test".to_owned(), false, "bash".to_owned(), false),
        ]
    );
}

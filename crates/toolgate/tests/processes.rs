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
use toolgate_tools::process::{LogBudget, ProcessConfig};
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

    /// With the process table's bounds changed by `bounds`.
    fn bounded(
        root: &Path,
        state: PathBuf,
        logs: PathBuf,
        bounds: impl FnOnce(&mut ProcessConfig),
    ) -> Agent {
        let mut processes = ProcessConfig::default();
        processes.log_dir = logs;
        bounds(&mut processes);
        Agent::assemble(root, state, processes, Arc::new(|_: &ToolEvent| {}), None)
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
        let mut processes = ProcessConfig::default();
        processes.max_running = max_running;
        processes.log_dir = logs;
        processes.kill_grace = Duration::from_secs(2);
        Agent::assemble(root, state, processes, sink, egress)
    }

    fn assemble(
        root: &Path,
        state: PathBuf,
        processes: ProcessConfig,
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

impl Agent {
    /// Polls `process_list` (bounded against hangs) until `pid`'s entry satisfies
    /// `done`; returns the entry.
    async fn list_until(&self, pid: &Value, done: impl Fn(&Value) -> bool) -> Value {
        for _ in 0..400 {
            let (_, facts) = self.ok("process_list", json!({})).await;
            let entry = facts["processes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| &e["pid"] == pid)
                .cloned()
                .unwrap_or(Value::Null);
            if done(&entry) {
                return entry;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("process {pid} never got there");
    }

    async fn start(&self, command: &str) -> (Value, PathBuf) {
        let (_, facts) = self
            .ok("process_start", json!({ "command": command }))
            .await;
        let log = PathBuf::from(facts["output_file"].as_str().unwrap());
        (facts["pid"].clone(), log)
    }
}

fn ended(entry: &Value) -> bool {
    entry["status"]["state"] == "exited"
}

fn removed(entry: &Value) -> bool {
    entry["output"]["removed"].is_string()
}

#[tokio::test]
async fn a_log_read_to_its_end_is_removed_a_while_later_and_the_exit_status_stays() {
    let w = world();
    let agent = Agent::bounded(&w.root, w.state.clone(), w.logs.clone(), |c| {
        c.read_log_retention = Duration::from_millis(300);
    });
    let (pid, log) = agent.start("echo hello").await;
    agent.list_until(&pid, ended).await;
    // Not read yet: kept (the unread retention is an hour).
    assert!(log.exists());
    let (text, facts) = agent
        .ok("process_read", json!({"pid": pid, "offset": 0}))
        .await;
    assert!(text.starts_with("hello\n"), "{text}");
    assert_eq!(facts["more"], json!(false));
    let entry = agent.list_until(&pid, removed).await;
    assert!(!log.exists(), "the log outlived its retention");
    assert_eq!(
        entry["output"]["removed"],
        json!("its output was read to the end and then removed")
    );
    let (text, facts) = agent.ok("process_read", json!({ "pid": pid })).await;
    assert_eq!(
        text,
        format!(
            "[process {pid} exited with code 0; its output was read to the end and then \
             removed: 6 bytes of output were written]\n"
        )
    );
    assert_eq!(facts["status"]["exit_code"], json!(0));
}

#[tokio::test]
async fn an_unread_log_is_removed_at_the_end_of_its_retention() {
    let w = world();
    let agent = Agent::bounded(&w.root, w.state.clone(), w.logs.clone(), |c| {
        c.ended_log_retention = Duration::from_millis(300);
    });
    let (pid, log) = agent.start("echo never read").await;
    let entry = agent.list_until(&pid, removed).await;
    assert!(ended(&entry), "{entry}");
    assert!(!log.exists());
    assert_eq!(
        entry["output"]["removed"],
        json!("its output was removed at the end of its retention (it was never read to the end)")
    );
}

#[tokio::test]
async fn the_table_forgets_the_oldest_ended_processes_and_their_logs() {
    let w = world();
    let agent = Agent::bounded(&w.root, w.state.clone(), w.logs.clone(), |c| {
        c.keep_ended = 2;
    });
    let mut started = Vec::new();
    for n in 0..4 {
        let (pid, log) = agent.start(&format!("echo {n}")).await;
        agent.list_until(&pid, ended).await;
        started.push((pid, log));
    }
    // The next start makes room: the two oldest ended processes are forgotten.
    let (last, _) = agent.start("sleep 30").await;
    let (_, facts) = agent.ok("process_list", json!({})).await;
    let mut pids: Vec<Value> = facts["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["pid"].clone())
        .collect();
    pids.sort_by_key(|p| p.as_u64());
    let mut expected = vec![started[2].0.clone(), started[3].0.clone(), last];
    expected.sort_by_key(|p| p.as_u64());
    assert_eq!(pids, expected);
    for (pid, log) in &started[..2] {
        assert!(!log.exists(), "{}", log.display());
        let err = agent
            .call("process_read", json!({ "pid": pid }))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("forgotten"), "{err}");
    }
    assert!(started[2].1.exists() && started[3].1.exists());
}

#[tokio::test]
async fn all_logs_share_one_cap_running_ones_get_what_is_left_and_ended_ones_make_room() {
    let w = world();
    // Room for one and a half logs of 1000 + 1000 bytes, shared by two agents.
    let budget = LogBudget::new(3000);
    let caps = |c: &mut ProcessConfig| {
        c.log_head_bytes = 1000;
        c.log_tail_bytes = 1000;
        c.log_budget = budget.clone();
    };
    let a = Agent::bounded(&w.root, w.state.clone(), w.logs.clone(), caps);
    let b = Agent::bounded(&w.root, w.state.clone(), w.logs.clone(), caps);
    let (_, facts) = a
        .ok(
            "process_start",
            json!({"command": "printf %0500d 0; touch printed; sleep 30"}),
        )
        .await;
    let first = facts["pid"].clone();
    assert_eq!(
        facts["log_keeps"],
        json!({"head_bytes": 1000, "tail_bytes": 1000})
    );
    let (_, facts) = b.ok("process_start", json!({"command": "sleep 30"})).await;
    assert_eq!(
        facts["log_keeps"],
        json!({"head_bytes": 1000, "tail_bytes": 0})
    );
    // Everything is held by running processes: a start still works, and says that
    // nothing of its output is kept.
    let (text, facts) = b.ok("process_start", json!({"command": "sleep 30"})).await;
    assert_eq!(
        facts["log_keeps"],
        json!({"head_bytes": 0, "tail_bytes": 0})
    );
    assert!(
        text.contains("nothing of its output is kept: the process logs of this toolgate are at their cap of 3000 bytes"),
        "{text}"
    );
    assert_eq!(budget.leased(), 3000);
    // The first process ends: its log shrinks to its 500 bytes and may be removed
    // for a newer one, which then gets all it asks for. (Once it has printed them:
    // on a busy machine its sandbox can still be starting here.)
    for _ in 0..400 {
        if w.root.join("printed").exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(
        w.root.join("printed").exists(),
        "the first process never printed"
    );
    a.ok("process_kill", json!({"pid": first, "signal": "KILL"}))
        .await;
    a.list_until(&first, ended).await;
    assert_eq!(budget.leased(), 500 + 1000);
    let (_, facts) = b.ok("process_start", json!({"command": "sleep 30"})).await;
    assert_eq!(
        facts["log_keeps"],
        json!({"head_bytes": 1000, "tail_bytes": 1000})
    );
    let (text, facts) = a.ok("process_read", json!({ "pid": first })).await;
    assert!(
        text.contains("its output was removed to make room for newer processes' output (all process logs of this toolgate together keep at most 3000 bytes)"),
        "{text}"
    );
    assert_eq!(facts["output"]["written"], json!(500));
}

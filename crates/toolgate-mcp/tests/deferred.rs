//! Deferred external tools over MCP: a client sees `mcp_find_tools` instead
//! of hundreds of schemas, a search activates tools in its own session
//! only, and the client is told that its list changed: rmcp's client and
//! the official Python SDK (`TOOLGATE_TEST_PYTHON`, installed by
//! `scripts/test`) against `serve_http` on loopback, and the size of the
//! list with 10 and with 500 external tools.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use pretty_assertions::assert_eq;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, ListToolsResult,
    ProtocolVersion,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};
use toolgate_core::{
    CallContext, EffectClass, Idempotency, Registry, Tool, ToolError, ToolHandler, ToolOutput,
    ToolSpec, async_trait,
};
use toolgate_mcp::{HttpOptions, McpServer, Scope, ScopeSource, serve_http};
use toolgate_policy::{AccessPolicy, Executor, FIND_TOOLS, FIND_TOOLS_LIMIT, Policy};

/// An external tool as the gateway makes one: `mcp__<server>__<tool>`,
/// passthrough schema, answering with its name.
struct External(ToolSpec);

#[async_trait]
impl ToolHandler for External {
    async fn call(&self, _args: Value, _ctx: &CallContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(format!("{} ran", self.0.name)))
    }
}

impl Tool for External {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
}

/// A tool of about the size real servers list: a paragraph of description
/// and four described arguments.
fn external(server: &str, tool: &str, what: &str, class: EffectClass) -> Arc<dyn Tool> {
    let description = format!(
        "{what}. Use it when the user asks for it by name or the task needs it; it returns \
         the result as JSON with the identifiers the other tools of {server} take, and fails \
         with a message when the arguments name nothing."
    );
    let mut spec = ToolSpec::new(format!("mcp__{server}__{tool}"), description, class)
        .group("group:mcp")
        .passthrough_schema(json!({
            "type": "object",
            "properties": {
                "owner": {"type": "string", "description": "The account that owns the target."},
                "name": {"type": "string", "description": "The target's name."},
                "query": {"type": "string", "description": "What to look for, in plain words."},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100,
                          "description": "How many results to return at most."}
            },
            "required": ["owner", "name"]
        }))
        .mcp(server);
    if class > EffectClass::Read {
        spec = spec.idempotency(Idempotency::AtMostOnce);
    }
    Arc::new(External(spec))
}

/// `count` external tools of three servers, deferred, next to one built-in.
fn registry(count: usize, deferred: bool) -> Registry {
    let mut registry = Registry::new();
    registry
        .register(Arc::new(External(ToolSpec::new(
            "echo",
            "Says it back.",
            EffectClass::Read,
        ))))
        .unwrap();
    let named = [
        ("github", "create_issue", "Creates an issue in a repository"),
        ("github", "list_issues", "Lists the issues of a repository"),
        ("weather", "forecast", "The weather forecast for a city"),
        (
            "github",
            "delete_repository",
            "Deletes a repository with every issue in it",
        ),
    ];
    let servers = ["github", "jira", "drive"];
    let tools = (0..count).map(|i| {
        let (server, tool, what) = named.get(i).copied().unwrap_or_else(|| {
            let server = servers[i % servers.len()];
            (server, "", "Fetches one record of the service")
        });
        let tool = if tool.is_empty() {
            format!("record_{i:03}")
        } else {
            tool.to_owned()
        };
        let class = if tool == "delete_repository" {
            EffectClass::MutateIrreversible
        } else {
            EffectClass::Read
        };
        external(server, &tool, what, class)
    });
    for tool in tools {
        if deferred {
            registry.register_deferred(tool).unwrap();
        } else {
            registry.register(tool).unwrap();
        }
    }
    registry
}

/// Scopes over one registry under a read cap (so `delete_repository` is
/// refused), counting how many executors it built.
struct Scopes {
    registry: Registry,
    root: PathBuf,
    built: AtomicUsize,
    /// Tools activated in every new scope, as a search would.
    activate: Vec<String>,
}

impl Scopes {
    fn new(registry: Registry) -> Arc<Scopes> {
        Scopes::activating(registry, Vec::new())
    }

    fn activating(registry: Registry, activate: Vec<String>) -> Arc<Scopes> {
        Arc::new(Scopes {
            registry,
            root: std::fs::canonicalize(env!("CARGO_TARGET_TMPDIR")).unwrap(),
            built: AtomicUsize::new(0),
            activate,
        })
    }
}

impl ScopeSource for Scopes {
    fn operator_roots(&self) -> Vec<PathBuf> {
        vec![self.root.clone()]
    }

    fn scope(&self, roots: &[PathBuf]) -> Result<Scope, String> {
        self.built.fetch_add(1, Ordering::SeqCst);
        let policy = Policy::default().with_access(AccessPolicy::capped(EffectClass::Read));
        let executor = Executor::builder(self.registry.clone())
            .policy(policy)
            .build();
        executor.activate(self.activate.iter().map(String::as_str));
        Ok(Scope {
            executor,
            cwd: self.root.clone(),
            roots: roots.to_vec(),
        })
    }
}

/// `serve_http` on a free loopback port, until the test's runtime ends.
async fn serve(source: Arc<Scopes>) -> SocketAddr {
    let server = McpServer::new(source).unwrap();
    let (ready, addr) = tokio::sync::oneshot::channel();
    let options = HttpOptions::new("127.0.0.1:0".parse().unwrap(), None);
    tokio::spawn(async move {
        let _ = serve_http(server, options, move |addr| {
            let _ = ready.send(addr);
        })
        .await;
    });
    addr.await.unwrap()
}

/// An rmcp client (2025-11-25) that counts `tools/list_changed`.
#[derive(Clone, Default)]
struct Counting(Arc<AtomicUsize>);

impl ClientHandler for Counting {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("deferred-test", "0"),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

async fn session(addr: SocketAddr) -> (RunningService<RoleClient, Counting>, Arc<AtomicUsize>) {
    let counting = Counting::default();
    let changes = counting.0.clone();
    let transport = StreamableHttpClientTransport::from_uri(format!("http://{addr}/mcp"));
    (counting.serve(transport).await.unwrap(), changes)
}

async fn names(client: &RunningService<RoleClient, Counting>) -> Vec<String> {
    let listed = client.list_tools(None).await.unwrap();
    listed.tools.iter().map(|t| t.name.to_string()).collect()
}

fn call(name: &str, args: Value) -> CallToolRequestParams {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    CallToolRequestParams::new(name.to_owned()).with_arguments(args)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_activates_tools_in_its_own_session_and_says_so() {
    let source = Scopes::new(registry(40, true));
    let addr = serve(source.clone()).await;
    let (a, a_changes) = session(addr).await;
    let (b, b_changes) = session(addr).await;
    let capabilities = a.peer_info().unwrap().capabilities.clone();
    assert_eq!(capabilities.tools.and_then(|t| t.list_changed), Some(true));
    assert_eq!(names(&a).await, vec!["echo", FIND_TOOLS]);

    let found = a
        .call_tool(call(
            FIND_TOOLS,
            json!({"query": "create issue", "limit": 2}),
        ))
        .await
        .unwrap();
    let structured = found.structured_content.unwrap();
    let activated: Vec<&str> = structured["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        activated,
        vec!["mcp__github__create_issue", "mcp__github__list_issues"]
    );
    // Sent before the result, but delivered on the session's own stream.
    tokio::time::timeout(Duration::from_secs(10), async {
        while a_changes.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("no notifications/tools/list_changed within 10 s");
    assert_eq!(
        names(&a).await,
        vec![
            "echo",
            FIND_TOOLS,
            "mcp__github__create_issue",
            "mcp__github__list_issues"
        ]
    );
    let ran = a
        .call_tool(call(
            "mcp__github__create_issue",
            json!({"owner": "o", "name": "n"}),
        ))
        .await
        .unwrap();
    assert_eq!(ran.is_error, Some(false));

    // The other session found nothing, so it has nothing activated.
    assert_eq!(names(&b).await, vec!["echo", FIND_TOOLS]);
    let refused = b
        .call_tool(call("mcp__github__create_issue", json!({})))
        .await
        .unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("it is deferred; activate it with mcp_find_tools first"),
        "{refused}"
    );
    // A search that activates nothing new says nothing.
    a.call_tool(call(
        FIND_TOOLS,
        json!({"query": "create issue", "limit": 2}),
    ))
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(a_changes.load(Ordering::SeqCst), 1);
    assert_eq!(b_changes.load(Ordering::SeqCst), 0);
    // The operator scope, then one of its own for each session.
    assert_eq!(source.built.load(Ordering::SeqCst), 3);
    a.cancel().await.unwrap();
    b.cancel().await.unwrap();
}

/// The bytes of the `tools/list` result a new client gets, with
/// `activated` tools activated.
fn listed_bytes(registry: Registry, activated: usize) -> usize {
    let names = registry
        .deferred()
        .map(|t| t.spec().name.clone())
        .filter(|name| !name.contains("delete"))
        .take(activated)
        .collect();
    let server = McpServer::new(Scopes::activating(registry, names)).unwrap();
    serde_json::to_vec(&ListToolsResult::with_all_items(server.tools()))
        .unwrap()
        .len()
}

#[test]
fn the_list_stays_small_with_500_deferred_tools() {
    let deferred_10 = listed_bytes(registry(10, true), 0);
    let deferred_500 = listed_bytes(registry(500, true), 0);
    let found_10 = listed_bytes(registry(10, true), FIND_TOOLS_LIMIT);
    let found_500 = listed_bytes(registry(500, true), FIND_TOOLS_LIMIT);
    let active_10 = listed_bytes(registry(10, false), 0);
    let active_500 = listed_bytes(registry(500, false), 0);
    println!(
        "tools/list bytes: 10 deferred {deferred_10}, 500 deferred {deferred_500}; after one \
         search activating {FIND_TOOLS_LIMIT}: {found_10} and {found_500}; none deferred: 10 \
         active {active_10}, 500 active {active_500}"
    );
    // The inventory in the description grows with the tool counts' digits,
    // nothing else.
    assert!(
        deferred_500 <= deferred_10 + 16,
        "{deferred_10} {deferred_500}"
    );
    assert!(found_500 <= found_10 + 16, "{found_10} {found_500}");
    assert!(active_500 > 40 * found_500, "{active_500} {found_500}");
}

/// The venv Python with the MCP SDK. Missing means the test cannot run
/// here, which is a failure, never a skip.
fn python() -> PathBuf {
    let Some(python) = std::env::var_os("TOOLGATE_TEST_PYTHON") else {
        panic!(
            "TOOLGATE_TEST_PYTHON is not set: this test drives toolgate with the real Python \
             MCP SDK (mcp==2.3.0). Run scripts/test, which installs it into \
             target/mcp-peers/venv and sets the variable, or set it to that venv's python."
        );
    };
    let python = PathBuf::from(python);
    assert!(
        python.is_file(),
        "TOOLGATE_TEST_PYTHON={} does not exist; run scripts/test to install the Python MCP SDK",
        python.display()
    );
    python
}

/// `clients/deferred.py` against `addr` in `mode`; what the SDK saw.
async fn python_client(addr: SocketAddr, mode: &str) -> Value {
    let config = json!({
        "url": format!("http://{addr}/mcp"),
        "mode": mode,
        "query": "weather forecast",
        "call": ["mcp__weather__forecast", {"owner": "o", "name": "Oslo"}],
    });
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/clients/deferred.py");
    let python = python();
    let output = tokio::task::spawn_blocking(move || {
        let mut child = Command::new(python)
            .arg(script)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(config.to_string().as_bytes()).unwrap();
        drop(stdin);
        child.wait_with_output().unwrap()
    });
    let output = tokio::time::timeout(Duration::from_secs(120), output)
        .await
        .expect("the Python client did not finish within 120 s")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last)
        .unwrap_or_else(|e| panic!("no JSON from the client ({e}): {stdout}\n{stderr}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_hears_that_the_list_changed() {
    for (mode, protocol, change) in [
        ("legacy", "2025-11-25", "notification"),
        ("auto", "2026-07-28", "ToolsListChanged"),
    ] {
        let addr = serve(Scopes::new(registry(40, true))).await;
        let seen = python_client(addr, mode).await;
        assert_eq!(seen.get("crashed"), None, "{mode}: {seen}");
        assert_eq!(seen["protocol_version"], protocol, "{seen}");
        assert_eq!(seen["list_changed_capability"], true, "{mode}: {seen}");
        assert_eq!(
            seen["before"],
            json!(["echo", FIND_TOOLS]),
            "{mode}: {seen}"
        );
        assert_eq!(
            seen["found"]["structured"]["tools"][0]["name"], "mcp__weather__forecast",
            "{mode}: {seen}"
        );
        let changes = seen["changes"].as_array().unwrap();
        assert!(
            changes.contains(&json!(change)),
            "{mode}: no {change} after the activation: {seen}"
        );
        let after = seen["after"].as_array().unwrap();
        assert!(
            after.contains(&json!("mcp__weather__forecast")),
            "{mode}: {seen}"
        );
        assert!(after.len() <= 2 + FIND_TOOLS_LIMIT, "{mode}: {seen}");
        assert_eq!(
            seen["call"],
            json!({"is_error": false, "text": "mcp__weather__forecast ran", "structured": null}),
            "{mode}: {seen}"
        );
    }
}

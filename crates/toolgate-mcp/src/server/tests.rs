//! A stdio connection with deferred tools, driven by rmcp's client over a
//! pipe: the connection is the session, so what it activates lives in the
//! scope it works in, and survives a change of the client's roots.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::AtomicUsize;

use pretty_assertions::assert_eq;
use rmcp::model::{ClientCapabilities, ClientConfig, Root};
use rmcp::service::RunningService;
use rmcp::{ClientHandler, RoleClient};
use toolgate_core::{
    EffectClass, Registry, ToolError, ToolHandler, ToolOutput, ToolSpec, async_trait,
};
use toolgate_policy::FIND_TOOLS;

use super::*;

struct Echo(ToolSpec);

#[async_trait]
impl ToolHandler for Echo {
    async fn call(&self, _args: Value, _ctx: &CallContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(format!("{} ran", self.0.name)))
    }
}

impl toolgate_core::Tool for Echo {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
}

struct Scopes {
    registry: Registry,
    root: PathBuf,
    built: AtomicUsize,
}

impl ScopeSource for Scopes {
    fn operator_roots(&self) -> Vec<PathBuf> {
        vec![self.root.clone()]
    }

    fn scope(&self, roots: &[PathBuf]) -> Result<Scope, String> {
        self.built.fetch_add(1, Ordering::SeqCst);
        Ok(Scope {
            executor: Executor::builder(self.registry.clone()).build(),
            cwd: roots[0].clone(),
            roots: roots.to_vec(),
        })
    }
}

/// Offers `roots` (file URIs), counts `tools/list_changed`.
#[derive(Clone)]
struct Client {
    roots: Arc<Mutex<Vec<String>>>,
    changes: Arc<AtomicUsize>,
}

impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::builder()
                .enable_roots()
                .enable_roots_list_changed()
                .build(),
            Implementation::new("stdio-test", "0"),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        let roots = self.roots.lock().unwrap().clone();
        Ok(ListRootsResult::new(
            roots.into_iter().map(Root::new).collect(),
        ))
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changes.fetch_add(1, Ordering::SeqCst);
    }
}

fn registry() -> Registry {
    let mut registry = Registry::new();
    let echo = ToolSpec::new("echo", "Says it back.", EffectClass::Read);
    registry.register(Arc::new(Echo(echo))).unwrap();
    for (tool, what) in [
        ("forecast", "The weather forecast for a city."),
        ("alerts", "Severe weather alerts for a region."),
    ] {
        let spec = ToolSpec::new(format!("mcp__weather__{tool}"), what, EffectClass::Read)
            .passthrough_schema(json!({"type": "object"}))
            .mcp("weather");
        registry.register_deferred(Arc::new(Echo(spec))).unwrap();
    }
    registry
}

async fn names(client: &RunningService<RoleClient, Client>) -> Vec<String> {
    let listed = client.list_tools(None).await.unwrap();
    listed.tools.iter().map(|t| t.name.to_string()).collect()
}

fn call(name: &str, args: Value) -> CallToolRequestParams {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    CallToolRequestParams::new(name.to_owned()).with_arguments(args)
}

async fn until(what: &str, done: impl Fn() -> bool) {
    tokio::time::timeout(Duration::from_secs(10), async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{what} within 10 s"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_session_keeps_what_it_activated_across_a_change_of_roots() {
    let base = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(base.path()).unwrap();
    for dir in ["a", "b"] {
        std::fs::create_dir(root.join(dir)).unwrap();
    }
    let source = Arc::new(Scopes {
        registry: registry(),
        root: root.clone(),
        built: AtomicUsize::new(0),
    });
    let server = McpServer::new(source.clone()).unwrap();
    let (client_end, server_end) = tokio::io::duplex(64 * 1024);
    let (server_read, server_write) = tokio::io::split(server_end);
    let serving = tokio::spawn(async move {
        let running = server
            .connection(false)
            .serve(StdioTransport::new(server_read, server_write))
            .await
            .unwrap();
        let _ = running.waiting().await;
    });
    let handler = Client {
        roots: Arc::new(Mutex::new(vec![format!(
            "file://{}",
            root.join("a").display()
        )])),
        changes: Arc::new(AtomicUsize::new(0)),
    };
    let client = handler
        .clone()
        .serve(tokio::io::split(client_end))
        .await
        .unwrap();
    assert_eq!(names(&client).await, vec!["echo", FIND_TOOLS]);

    client
        .call_tool(call(FIND_TOOLS, json!({"query": "forecast"})))
        .await
        .unwrap();
    until("a tools/list_changed", || {
        handler.changes.load(Ordering::SeqCst) == 1
    })
    .await;
    assert_eq!(
        names(&client).await,
        vec!["echo", FIND_TOOLS, "mcp__weather__forecast"]
    );

    // New roots, a new scope: the activated tool comes along.
    *handler.roots.lock().unwrap() = vec![format!("file://{}", root.join("b").display())];
    client.notify_roots_list_changed().await.unwrap();
    let built = source.built.load(Ordering::SeqCst);
    // The notification and the next request may be handled in either
    // order: call until a call works in the new roots.
    tokio::time::timeout(Duration::from_secs(10), async {
        while source.built.load(Ordering::SeqCst) == built {
            client.call_tool(call("echo", json!({}))).await.unwrap();
        }
    })
    .await
    .expect("no scope over the new roots within 10 s");
    let ran = client
        .call_tool(call("mcp__weather__forecast", json!({})))
        .await
        .unwrap();
    assert_eq!(ran.is_error, Some(false), "{ran:?}");
    assert_eq!(
        names(&client).await,
        vec!["echo", FIND_TOOLS, "mcp__weather__forecast"]
    );
    client.cancel().await.unwrap();
    serving.await.unwrap();
}

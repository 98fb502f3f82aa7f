//! The MCP server: one [`Connection`] per client connection (stdio) or
//! session (HTTP), all sharing one [`McpServer`].
//!
//! The tool list is the scope's executor's callable tools at the time of
//! asking: `mcp_find_tools` activates deferred tools in the executor of the
//! connection's scope, and the client hears `notifications/tools/list_changed`
//! (pushed after the call on 2025-11-25 and earlier, on its
//! `subscriptions/listen` stream on 2026-07-28).

#![allow(deprecated)] // Roots and logging are deprecated in MCP 2026-07-28 but
// are how every client of 2025-11-25 and earlier offers roots and log levels.

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InputRequest, InputRequests, InputRequiredResult, ListRootsRequest, ListRootsResult,
    ListToolsResult, LoggingLevel, LoggingMessageNotificationParam, PaginatedRequestParams,
    ProgressNotificationParam, ProgressToken, ProtocolVersion, ServerCapabilities, ServerConfig,
    SetLevelRequestParams, SubscriptionFilter, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use toolgate_core::{CallContext, Progress};
use toolgate_policy::{CallError, Executor};

use crate::convert::{call_result, refusal, to_mcp_tool};
use crate::roots::{narrow_roots, shown};
use crate::stdio::StdioTransport;

/// An executor and the place its calls run: the working directory and the
/// roots the path layer and the sandbox are confined to.
pub struct Scope {
    /// The call pipeline over the tools of these roots.
    pub executor: Executor,
    /// Where relative paths resolve.
    pub cwd: PathBuf,
    /// The roots, absolute and canonical.
    pub roots: Vec<PathBuf>,
}

/// Builds the scopes connections run in.
pub trait ScopeSource: Send + Sync + 'static {
    /// The operator's roots (absolute, canonical).
    fn operator_roots(&self) -> Vec<PathBuf>;
    /// A new scope over `roots`: the operator's, or narrower ones inside
    /// them (a client's roots after [`crate::narrow_roots`]). Each scope has
    /// its own background processes, which end when it is dropped.
    fn scope(&self, roots: &[PathBuf]) -> Result<Scope, String>;
    /// Why no call may run in `roots` although they lie inside the
    /// operator's (say, one of them is the home directory): every call of a
    /// connection working there gets this message, until the client offers
    /// roots that are fine. `None`: calls run.
    fn refusal(&self, roots: &[PathBuf]) -> Option<String> {
        let _ = roots;
        None
    }
    /// What every client should be told of this server (a weakened sandbox,
    /// roots that refuse every call): added to the server instructions and
    /// sent as a warning in the MCP log once the client has initialized.
    fn notices(&self) -> Vec<String> {
        Vec::new()
    }
}

/// What all connections share.
struct Shared {
    source: Arc<dyn ScopeSource>,
    /// The scope over the operator's roots that connections without a
    /// session of their own use (stdio, stateless HTTP requests).
    operator: Arc<Scope>,
    /// Narrowed scopes of connections without a session of their own, by
    /// roots, so background processes outlive the request that started them.
    narrowed: Mutex<HashMap<Vec<PathBuf>, Arc<Scope>>>,
    /// The source's notices, fixed at the start.
    notices: Vec<String>,
    calls: AtomicU64,
    /// `mcp-<pid>-`, what every call id starts with: the process id read
    /// once, not with a syscall per call.
    call_prefix: String,
    /// The agent's name the operator gave (`--agent`, `[identity] agent`);
    /// without it, each call is the client's (its `clientInfo` name).
    agent: Option<String>,
}

/// toolgate's tools as an MCP server.
#[derive(Clone)]
pub struct McpServer {
    shared: Arc<Shared>,
}

impl McpServer {
    /// A server over the scopes of `source`; the tool list is the operator
    /// scope's callable tools.
    pub fn new(source: Arc<dyn ScopeSource>) -> Result<Self, String> {
        let operator = Arc::new(source.scope(&source.operator_roots())?);
        let notices = source.notices();
        Ok(McpServer {
            shared: Arc::new(Shared {
                source,
                operator,
                narrowed: Mutex::new(HashMap::new()),
                notices,
                calls: AtomicU64::new(0),
                call_prefix: format!("mcp-{}-", std::process::id()),
                agent: None,
            }),
        })
    }

    /// Names the agent of every call, whatever the client calls itself.
    pub fn with_agent(mut self, agent: impl Into<String>) -> Self {
        if let Some(shared) = Arc::get_mut(&mut self.shared) {
            shared.agent = Some(agent.into());
        }
        self
    }

    /// The tools a new client sees: the operator scope's callable tools.
    pub fn tools(&self) -> Vec<Tool> {
        listed(&self.shared.operator.executor, &BTreeSet::new())
    }

    /// The handler of one new connection (`own_scope: false`: it uses the
    /// shared scopes) or HTTP session (`own_scope: true`: its background
    /// processes are its own and end with it).
    pub(crate) fn connection(&self, own_scope: bool) -> Connection {
        Connection {
            own_scope,
            shared: self.shared.clone(),
            state: Arc::new(Mutex::new(ConnectionState {
                level: LoggingLevel::Info,
                scope: None,
                carried: Vec::new(),
            })),
            moved: Arc::new(watch::Sender::new(0)),
        }
    }
}

/// The MCP tools of the executor's callable tools, less `hidden`.
fn listed(executor: &Executor, hidden: &BTreeSet<String>) -> Vec<Tool> {
    executor
        .visible_tools()
        .filter(|spec| !hidden.contains(&spec.name))
        .map(to_mcp_tool)
        .collect()
}

/// The errors of serving.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The client's initialization failed.
    #[error("the MCP handshake failed: {0}")]
    Handshake(String),
    /// The connection ended with an error.
    #[error("the MCP connection failed: {0}")]
    Connection(String),
}

/// Serves MCP over stdin/stdout until the client closes stdin or the process
/// gets SIGINT/SIGTERM. Nothing but protocol goes to stdout; a line that is
/// no message gets its JSON-RPC error there.
pub async fn serve_stdio(server: McpServer) -> Result<(), ServeError> {
    // Pipes (how clients start servers) go through the IO reactor, not a
    // blocking thread per read and write: about a third of the latency of a
    // small call. Anything else falls back to blocking handles.
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
    let running = server
        .connection(false)
        .serve(StdioTransport::new(stdin, stdout))
        .await
        .map_err(|e| ServeError::Handshake(e.to_string()))?;
    let stop = running.cancellation_token();
    let signals = tokio::spawn(async move {
        crate::http::shutdown_signal().await;
        stop.cancel();
    });
    let outcome = running.waiting().await;
    signals.abort();
    outcome
        .map(|_| ())
        .map_err(|e| ServeError::Connection(e.to_string()))
}

struct ConnectionState {
    /// `logging/setLevel` of clients before 2026-07-28.
    level: LoggingLevel,
    /// The scope once the client's roots are known.
    scope: Option<Resolved>,
    /// The tools the connection had activated in the scope its old roots
    /// gave, to activate in the next one: activation lasts the session.
    carried: Vec<String>,
}

#[derive(Clone)]
enum Resolved {
    Ready(Arc<Scope>),
    /// The client offered roots and none of them lies in the operator's.
    Unusable(String),
}

/// One client connection (stdio) or HTTP session.
#[derive(Clone)]
pub(crate) struct Connection {
    own_scope: bool,
    shared: Arc<Shared>,
    state: Arc<Mutex<ConnectionState>>,
    /// Bumped whenever the connection's scope is settled anew, so that a
    /// `subscriptions/listen` stream follows it.
    moved: Arc<watch::Sender<u64>>,
}

/// A client that never answers `roots/list` must not hang every call.
const ROOTS_TIMEOUT: Duration = Duration::from_secs(10);

impl Connection {
    fn state(&self) -> std::sync::MutexGuard<'_, ConnectionState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sends a log message if the client asked for this level.
    async fn log(&self, context: &RequestContext<RoleServer>, level: LoggingLevel, data: Value) {
        let threshold = if is_modern(context) {
            // 2026-07-28: opt-in per request; rmcp does not filter.
            context.meta.log_level()
        } else {
            Some(self.state().level)
        };
        if threshold.is_some_and(|t| rank(level) >= rank(t)) {
            let message = LoggingMessageNotificationParam::new(level, data).with_logger("toolgate");
            let _ = context.peer.notify_logging_message(message).await;
        }
    }

    /// The scope of this call: the operator's, or the one the client's roots
    /// narrow it to. On 2026-07-28 the roots arrive as an input response, so
    /// the first call may answer "input required".
    async fn scope(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<Result<Resolved, CallToolResponse>, ErrorData> {
        if let Some(resolved) = self.state().scope.clone() {
            return Ok(Ok(resolved));
        }
        let offers_roots = context
            .client_capabilities()
            .is_some_and(|caps| caps.roots.is_some());
        if !offers_roots {
            let roots = self.shared.operator.roots.clone();
            let resolved = self.scope_over(roots, context);
            self.settle(&resolved);
            return Ok(Ok(resolved));
        }
        let listed = if is_modern(context) {
            match request
                .input_responses
                .as_ref()
                .and_then(|r| r.get("roots"))
            {
                Some(answer) => serde_json::from_value::<ListRootsResult>(answer.clone())
                    .map_err(|e| format!("the client's roots answer does not parse: {e}")),
                None => {
                    let mut ask = InputRequests::new();
                    ask.insert(
                        "roots".into(),
                        InputRequest::ListRoots(ListRootsRequest::default()),
                    );
                    return Ok(Err(InputRequiredResult::from_input_requests(ask).into()));
                }
            }
        } else {
            match tokio::time::timeout(ROOTS_TIMEOUT, context.peer.list_roots()).await {
                Ok(Ok(listed)) => Ok(listed),
                Ok(Err(e)) => Err(format!("the client did not list its roots: {e}")),
                Err(_) => Err(format!(
                    "the client did not answer roots/list within {} s",
                    ROOTS_TIMEOUT.as_secs()
                )),
            }
        };
        let resolved = match listed {
            Ok(listed) => {
                let uris: Vec<String> = listed.roots.into_iter().map(|r| r.uri).collect();
                self.narrow(&uris, context).await
            }
            Err(message) => {
                eprintln!("toolgate: {message}; calls are refused until it does");
                // Not cached: the next call asks again.
                return Ok(Ok(Resolved::Unusable(message)));
            }
        };
        self.settle(&resolved);
        Ok(Ok(resolved))
    }

    /// Keeps `resolved` as the connection's scope, with the tools it had
    /// activated under its old roots activated again (kept for later when
    /// the new roots are unusable).
    fn settle(&self, resolved: &Resolved) {
        let carried = {
            let mut state = self.state();
            state.scope = Some(resolved.clone());
            match resolved {
                Resolved::Ready(_) => std::mem::take(&mut state.carried),
                Resolved::Unusable(_) => Vec::new(),
            }
        };
        if let Resolved::Ready(scope) = resolved {
            scope.executor.activate(carried.iter().map(String::as_str));
        }
        self.moved.send_modify(|n| *n += 1);
    }

    /// The scope whose tools the client is shown: its own once known, else
    /// the operator's.
    fn listed_scope(&self) -> Arc<Scope> {
        match &self.state().scope {
            Some(Resolved::Ready(scope)) => scope.clone(),
            _ => self.shared.operator.clone(),
        }
    }

    /// The tools this connection is shown now.
    fn listed(&self, context: &RequestContext<RoleServer>) -> Vec<Tool> {
        let (scope, own_scope_unknown) = {
            let state = self.state();
            match &state.scope {
                Some(Resolved::Ready(scope)) => (scope.clone(), false),
                _ => (self.shared.operator.clone(), true),
            }
        };
        // A session that will get a scope of its own (see `scope_over`)
        // must not be shown what others activated in the operator's
        // (stateless requests do that): its first call would not find them.
        let hidden: BTreeSet<String> = if self.own_scope && own_scope_unknown && !is_modern(context)
        {
            scope.executor.activated().into_iter().collect()
        } else {
            BTreeSet::new()
        };
        listed(&scope.executor, &hidden)
    }

    /// A scope over `roots`: a new one for a session of its own (2025-11-25
    /// and older over HTTP), else the shared one (stdio, whose one connection
    /// is the session; stateless 2026-07-28 requests, which have none).
    fn scope_over(&self, roots: Vec<PathBuf>, context: &RequestContext<RoleServer>) -> Resolved {
        let shared = &self.shared;
        if let Some(message) = shared.source.refusal(&roots) {
            return Resolved::Unusable(message);
        }
        let resolved = |scope: Result<Arc<Scope>, String>| match scope {
            Ok(scope) => Resolved::Ready(scope),
            Err(message) => {
                Resolved::Unusable(format!("cannot work in {}: {message}", shown(&roots)))
            }
        };
        if self.own_scope && !is_modern(context) {
            return resolved(shared.source.scope(&roots).map(Arc::new));
        }
        if roots == shared.operator.roots {
            return Resolved::Ready(shared.operator.clone());
        }
        let mut cache = shared
            .narrowed
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(scope) = cache.get(&roots) {
            return Resolved::Ready(scope.clone());
        }
        let scope = shared.source.scope(&roots).map(Arc::new);
        if let Ok(scope) = &scope {
            cache.insert(roots.clone(), scope.clone());
        }
        resolved(scope)
    }

    async fn narrow(&self, uris: &[String], context: &RequestContext<RoleServer>) -> Resolved {
        let operator = &self.shared.operator;
        if uris.is_empty() {
            return self.scope_over(operator.roots.clone(), context);
        }
        let narrowed = narrow_roots(&operator.roots, uris);
        for refused in &narrowed.refused {
            let message = format!("client root {} refused: {}", refused.uri, refused.reason);
            eprintln!("toolgate: {message}");
            self.log(context, LoggingLevel::Warning, json!(message))
                .await;
        }
        if narrowed.roots.is_empty() {
            return Resolved::Unusable(format!(
                "none of the client's roots lies inside toolgate's roots ({}); \
                 offer a root inside them, or restart toolgate with the right --root",
                shown(&operator.roots)
            ));
        }
        let resolved = self.scope_over(narrowed.roots, context);
        if let Resolved::Ready(scope) = &resolved
            && scope.roots != operator.roots
        {
            let message = format!("working in the client's roots: {}", shown(&scope.roots));
            eprintln!("toolgate: {message}");
            self.log(context, LoggingLevel::Info, json!(message)).await;
        }
        resolved
    }

    /// Who calls: the operator's name for the agent, else the client's.
    fn agent(&self, context: &RequestContext<RoleServer>) -> String {
        if let Some(agent) = &self.shared.agent {
            return agent.clone();
        }
        // From initialize, or on 2026-07-28 from the request's metadata.
        let client = context.meta.client_info().or_else(|| {
            context
                .peer
                .peer_info()
                .map(|info| info.client_info.clone())
        });
        client
            .map(|info| info.name.trim().to_owned())
            .filter(|name| !name.is_empty() && !name.chars().any(char::is_control))
            .map_or_else(|| "mcp".to_owned(), |name| name.chars().take(128).collect())
    }

    /// Runs the call in `scope`, forwarding output lines as progress when the
    /// client asked for it (which includes "waiting for approval <id>" while
    /// the call waits for a person), and dropping the call (which kills its
    /// process group, or withdraws its wait and leaves the request pending)
    /// when the client cancels. A client that offers elicitation is asked
    /// in-line when the call needs a yes (see `elicit`).
    async fn run(
        &self,
        scope: &Scope,
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let n = self.shared.calls.fetch_add(1, Ordering::Relaxed);
        let mut call_id = self.shared.call_prefix.clone();
        // Writing to a String cannot fail.
        let _ = write!(call_id, "{n}");
        let agent = self.agent(context);
        let mut ctx = CallContext::new(call_id, agent.clone(), scope.cwd.clone())
            .with_roots(scope.roots.clone());
        let mut question = None;
        if crate::elicit::offers_forms(context) {
            if is_modern(context) {
                let (asker, receiver) = crate::elicit::input_asker(&request, agent);
                ctx = ctx.with_asker(asker);
                question = Some(receiver);
            } else {
                let asker = crate::elicit::request_asker(context.peer.clone(), agent);
                ctx = ctx.with_asker(asker);
            }
        }
        let lines = context.meta.get_progress_token().map(|token| {
            let (sender, receiver) = mpsc::unbounded_channel::<String>();
            ctx = ctx.clone().with_progress(Progress::new(move |line: &str| {
                let _ = sender.send(line.to_owned());
            }));
            (token, receiver)
        });
        let args = Value::Object(request.arguments.unwrap_or_default());
        let generation = scope.executor.tool_generation();
        let finished = CancellationToken::new();
        let asked = async {
            match question {
                Some(receiver) => receiver.await.ok(),
                None => None,
            }
        };
        let call = async {
            let outcome = tokio::select! {
                outcome = scope.executor.call(&request.name, args, &ctx) => Some(Ok(outcome)),
                () = context.ct.cancelled() => None,
                // 2026-07-28: the person is asked through the client's retry;
                // the call ends here and its request stays pending.
                Some(question) = asked => Some(Err(question)),
            };
            finished.cancel();
            outcome
        };
        let forward = async {
            if let Some((token, receiver)) = lines {
                forward_progress(&context.peer, token, receiver, &finished).await;
            }
        };
        let (outcome, ()) = tokio::join!(call, forward);
        let outcome = match outcome {
            None => return Err(ErrorData::internal_error("the call was cancelled", None)),
            Some(Err(question)) => {
                return match crate::elicit::input_required(&question) {
                    Some(ask) => Ok(ask.into()),
                    None => Err(ErrorData::internal_error(
                        "cannot ask for the approval in-line",
                        None,
                    )),
                };
            }
            Some(Ok(outcome)) => outcome,
        };
        // Before the result, so that a client refreshes its list before the
        // model's next step. On 2026-07-28 the listen stream says it.
        if scope.executor.tool_generation() != generation && !is_modern(context) {
            let _ = context.peer.notify_tool_list_changed().await;
        }
        match outcome {
            Ok(result) => Ok(call_result(result).into()),
            Err(error @ CallError::UnknownTool { .. }) => {
                Err(ErrorData::invalid_params(error.to_string(), None))
            }
            Err(error) => {
                if matches!(error, CallError::Denied { .. }) {
                    eprintln!("toolgate: {}: {error}", request.name);
                    self.log(
                        context,
                        LoggingLevel::Notice,
                        json!({"tool": request.name, "refused": error.to_string()}),
                    )
                    .await;
                }
                Ok(refusal(&error).into())
            }
        }
    }
}

/// Sends output lines as progress notifications: one per batch of lines that
/// arrived together (a command printing 100k lines must not flood the
/// client), the count of lines so far as the progress, and the last line as
/// the message. Stops with the call, so nothing follows the result.
async fn forward_progress(
    peer: &Peer<RoleServer>,
    token: ProgressToken,
    mut lines: mpsc::UnboundedReceiver<String>,
    finished: &CancellationToken,
) {
    let mut count: u64 = 0;
    loop {
        let (first, done) = tokio::select! {
            line = lines.recv() => (line, false),
            () = finished.cancelled() => (None, true),
        };
        // What arrived together goes out as one notification; after the
        // call, the lines still queued go out before the result does.
        // `None` without `done`: every sender is gone.
        let closed = first.is_none() && !done;
        let mut last = first;
        if last.is_some() {
            count += 1;
        }
        while let Ok(more) = lines.try_recv() {
            count += 1;
            last = Some(more);
        }
        if let Some(message) = last {
            let note =
                ProgressNotificationParam::new(token.clone(), count as f64).with_message(message);
            let _ = peer.notify_progress(note).await;
        }
        if done || closed {
            break;
        }
    }
}

fn is_modern(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28)
}

fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

impl ServerHandler for Connection {
    fn get_info(&self) -> ServerConfig {
        let roots = shown(&self.shared.operator.roots);
        let notices: String = self
            .shared
            .notices
            .iter()
            .map(|n| format!(" {n}"))
            .collect();
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_logging()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("toolgate", env!("CARGO_PKG_VERSION")))
        .with_instructions(format!(
            "toolgate runs these tools in a sandbox under a policy. Files: inside {roots}. \
             A refused call names the policy layer and why; change the call rather than retrying it.\
             {notices}"
        ))
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // Said once per connection, so a client's log shows it beside the
        // calls it concerns; the instructions say it too.
        for notice in &self.shared.notices {
            let message =
                LoggingMessageNotificationParam::new(LoggingLevel::Warning, json!(notice))
                    .with_logger("toolgate");
            let _ = context.peer.notify_logging_message(message).await;
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.listed(&context)))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.listed_scope()
            .executor
            .visible_tools()
            .find(|spec| spec.name == name)
            .map(to_mcp_tool)
    }

    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(SubscriptionFilter::builder().tools_list_changed().build())
    }

    /// 2026-07-28: tells the stream whenever the tools it would be listed
    /// change: an activation in the connection's scope, or a new scope.
    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), ErrorData> {
        // A move is marked seen before the scope is read, and the
        // generation waited past is the one last told: nothing between
        // two notifications is missed.
        let mut moved = self.moved.subscribe();
        moved.borrow_and_update();
        let mut scope = self.listed_scope();
        let mut seen = scope.executor.tool_generation();
        loop {
            tokio::select! {
                generation = scope.executor.tools_changed(seen) => seen = generation,
                changed = moved.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                    moved.borrow_and_update();
                    scope = self.listed_scope();
                    seen = scope.executor.tool_generation();
                }
                () = subscription.cancelled() => return Ok(()),
            }
            if subscription
                .sink()
                .notify_tool_list_changed()
                .await
                .is_err()
            {
                return Ok(());
            }
        }
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let scope = match self.scope(&request, &context).await? {
            Ok(Resolved::Ready(scope)) => scope,
            Ok(Resolved::Unusable(message)) => {
                return Ok(CallToolResult::error(vec![ContentBlock::text(message)]).into());
            }
            Err(input_required) => return Ok(input_required),
        };
        self.run(&scope, request, &context).await
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.state().level = request.level;
        Ok(())
    }

    async fn on_roots_list_changed(&self, _context: NotificationContext<RoleServer>) {
        // The next call asks again. A session's own scope of the old roots
        // goes away with its background processes once no call uses it;
        // what it had activated moves to the next one.
        let mut state = self.state();
        if let Some(Resolved::Ready(scope)) = state.scope.take() {
            state.carried = scope.executor.activated();
        }
    }
}

#[cfg(test)]
mod tests;

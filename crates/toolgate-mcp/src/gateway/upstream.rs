//! One external server: its connection, its supervisor and what it said.
//!
//! The first connection is made at start, within the connect timeout; a
//! server that fails it is skipped (its tools are missing, nothing else).
//! Once up, a supervisor task holds the connection; when it ends (the
//! process died, the HTTP session broke) the server is marked down, calls
//! fail at once with a clear error, and the supervisor reconnects with
//! backoff (0.5 s doubling to 30 s).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, ProgressNotificationParam, ProgressToken,
    ProtocolVersion,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientHandler, Peer, RoleClient, ServiceExt};
use toolgate_core::Progress;

use super::config::{ServerConfig, Transport};
use super::http;
use super::process::{self, Confinement, StderrTail};

/// Longest wait between two reconnection attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// First wait after a server went down.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);

/// Where progress notifications of running calls go, by progress token.
#[derive(Default)]
pub(crate) struct ProgressRoutes(Mutex<HashMap<ProgressToken, Progress>>);

impl ProgressRoutes {
    pub(crate) fn insert(&self, token: ProgressToken, progress: Progress) {
        if let Ok(mut routes) = self.0.lock() {
            routes.insert(token, progress);
        }
    }

    pub(crate) fn remove(&self, token: &ProgressToken) {
        if let Ok(mut routes) = self.0.lock() {
            routes.remove(token);
        }
    }

    fn report(&self, params: &ProgressNotificationParam) {
        let progress = self
            .0
            .lock()
            .ok()
            .and_then(|routes| routes.get(&params.progress_token).cloned());
        if let Some(progress) = progress {
            let line = match (&params.message, params.total) {
                (Some(message), _) => message.clone(),
                (None, Some(total)) => format!("{}/{}", params.progress, total),
                (None, None) => params.progress.to_string(),
            };
            progress.report(&line);
        }
    }
}

/// The gateway as an MCP client: it forwards progress to the waiting call
/// and notes that a server's tool list changed.
#[derive(Clone)]
struct GatewayClient {
    routes: Arc<ProgressRoutes>,
    list_changed: Arc<std::sync::atomic::AtomicBool>,
}

impl ClientHandler for GatewayClient {
    /// The newest protocol with the initialize handshake, which every
    /// current server speaks; a newer server negotiates it, an older one
    /// answers with its own version.
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("toolgate", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.routes.report(&params);
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.list_changed
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// What a server is doing now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkState {
    /// Connected.
    Up,
    /// The first connection failed; the server is skipped.
    Failed(String),
    /// It was up and went down; the supervisor reconnects.
    Down(String),
}

struct Link {
    state: LinkState,
    peer: Option<Peer<RoleClient>>,
    /// The stdio server's process id while it runs.
    pid: Option<u32>,
    restarts: u32,
    since: Instant,
}

/// One configured server.
pub struct Upstream {
    pub(crate) config: ServerConfig,
    confinement: Confinement,
    link: Mutex<Link>,
    pub(crate) routes: Arc<ProgressRoutes>,
    pub(crate) stderr: StderrTail,
    list_changed: Arc<std::sync::atomic::AtomicBool>,
    /// The tools it listed when it first connected.
    pub(crate) tools: Vec<rmcp::model::Tool>,
    /// What it said of itself at initialize (name and version).
    pub(crate) server_info: Option<Implementation>,
    supervisor: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Asks the supervisor to end the connection (see [`Upstream::close`]).
    closing: Arc<tokio::sync::Notify>,
}

/// A live connection: the session, and what must stay alive with it.
struct Connection {
    service: RunningService<RoleClient, GatewayClient>,
    /// For a stdio server: the end of its process.
    exited: Option<tokio::sync::oneshot::Receiver<String>>,
    /// Aborts the process's task (and so kills the process) when dropped.
    _process: Option<AbortOnDrop>,
    /// The process id of a stdio server.
    pid: Option<u32>,
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Upstream {
    /// Connects to the server (within its connect timeout) and lists its
    /// tools. A failure leaves the server `Failed` with the reason.
    pub async fn start(config: ServerConfig, confinement: Confinement) -> Arc<Upstream> {
        let routes = Arc::new(ProgressRoutes::default());
        let stderr = StderrTail::default();
        let list_changed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let client = GatewayClient {
            routes: routes.clone(),
            list_changed: list_changed.clone(),
        };
        let timeout = config.connect_timeout();
        let first = tokio::time::timeout(timeout, async {
            let connection = connect(&config, &confinement, &stderr, client.clone()).await?;
            let tools = connection
                .service
                .peer()
                .list_all_tools()
                .await
                .map_err(|e| format!("tools/list failed: {e}"))?;
            Ok::<_, String>((connection, tools))
        })
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "no answer within the connect timeout of {} s (connect_timeout)",
                timeout.as_secs()
            ))
        });
        let (state, peer, tools, server_info, connection) = match first {
            Ok((connection, tools)) => {
                let peer = connection.service.peer().clone();
                let info = peer.peer_info().and_then(|i| i.server_info.clone());
                (LinkState::Up, Some(peer), tools, info, Some(connection))
            }
            Err(error) => (
                LinkState::Failed(with_stderr(error, &stderr)),
                None,
                Vec::new(),
                None,
                None,
            ),
        };
        let pid = connection.as_ref().and_then(|c| c.pid);
        let upstream = Arc::new(Upstream {
            config,
            confinement,
            link: Mutex::new(Link {
                state,
                peer,
                pid,
                restarts: 0,
                since: Instant::now(),
            }),
            routes,
            stderr,
            list_changed,
            tools,
            server_info,
            supervisor: Mutex::new(None),
            closing: Arc::new(tokio::sync::Notify::new()),
        });
        if let Some(connection) = connection {
            let task = tokio::spawn(supervise(
                Arc::downgrade(&upstream),
                client,
                connection,
                upstream.closing.clone(),
            ));
            if let Ok(mut slot) = upstream.supervisor.lock() {
                *slot = Some(task);
            }
        }
        upstream
    }

    /// Ends the connection the way MCP ends a stdio session: the session
    /// stops, so the server's input is closed once everything queued for it
    /// (a cancellation, say) was written, and the process gets
    /// [`EXIT_GRACE`] to end on its own before it is killed. A toolgate that
    /// exits right after a call would otherwise kill the server with that
    /// last message still unwritten.
    pub async fn close(&self) {
        self.closing.notify_one();
        let task = self.supervisor.lock().ok().and_then(|mut slot| slot.take());
        if let Some(task) = task {
            let abort = task.abort_handle();
            if tokio::time::timeout(EXIT_GRACE + Duration::from_secs(1), task)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// Its state now.
    pub fn state(&self) -> LinkState {
        self.link
            .lock()
            .map(|l| l.state.clone())
            .unwrap_or(LinkState::Down("state unavailable".to_owned()))
    }

    /// How many times it was reconnected.
    pub fn restarts(&self) -> u32 {
        self.link.lock().map(|l| l.restarts).unwrap_or_default()
    }

    /// The stdio server's process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.link.lock().ok().and_then(|l| l.pid)
    }

    /// Whether it told us its tool list changed since it connected.
    pub fn list_changed(&self) -> bool {
        self.list_changed.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The session to call through, or why there is none.
    pub(crate) fn peer(&self) -> Result<Peer<RoleClient>, String> {
        let link = self
            .link
            .lock()
            .map_err(|_| "the connection state is unavailable".to_owned())?;
        match (&link.state, &link.peer) {
            (LinkState::Up, Some(peer)) => Ok(peer.clone()),
            (LinkState::Down(why), _) => Err(format!(
                "MCP server `{}` is down ({why}, {} s ago); toolgate is reconnecting: try again shortly",
                self.config.name,
                link.since.elapsed().as_secs()
            )),
            (LinkState::Failed(why), _) => Err(format!(
                "MCP server `{}` is not connected: {why}",
                self.config.name
            )),
            (LinkState::Up, None) => {
                Err(format!("MCP server `{}` has no session", self.config.name))
            }
        }
    }

    fn set(
        &self,
        state: LinkState,
        peer: Option<Peer<RoleClient>>,
        pid: Option<u32>,
        restarted: bool,
    ) {
        if let Ok(mut link) = self.link.lock() {
            link.state = state;
            link.peer = peer;
            link.pid = pid;
            link.since = Instant::now();
            if restarted {
                link.restarts += 1;
            }
        }
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        if let Ok(mut slot) = self.supervisor.lock()
            && let Some(task) = slot.take()
        {
            task.abort();
        }
    }
}

/// Appends the last stderr line, which usually says why a server failed.
fn with_stderr(error: String, stderr: &StderrTail) -> String {
    match stderr.lines().last() {
        Some(line) => format!("{error} (its last stderr line: {line})"),
        None => error,
    }
}

async fn connect(
    config: &ServerConfig,
    confinement: &Confinement,
    stderr: &StderrTail,
    client: GatewayClient,
) -> Result<Connection, String> {
    match &config.transport {
        Transport::Stdio(stdio) => {
            let spawned = process::spawn(stdio, confinement, stderr.clone()).await?;
            let pid = spawned.pid;
            let guard = AbortOnDrop(spawned.task);
            let mut exited = spawned.exited;
            let service = tokio::select! {
                service = client.serve(spawned.transport) => match service {
                    Ok(service) => service,
                    Err(e) => {
                        // A process that could not start, or ended, closes
                        // its stdin a moment before its end is told: the
                        // end says why (the missing program), the closed
                        // pipe does not.
                        return Err(match tokio::time::timeout(EXIT_GRACE, &mut exited).await {
                            Ok(Ok(end)) => before_initialize(end),
                            _ => format!("initialize failed: {e}"),
                        });
                    }
                },
                end = &mut exited => {
                    return Err(before_initialize(end.unwrap_or_else(|_| "ended".to_owned())));
                }
            };
            Ok(Connection {
                service,
                exited: Some(exited),
                _process: Some(guard),
                pid,
            })
        }
        Transport::Http(server) => {
            let transport = http::transport(&config.name, server)?;
            let service = client
                .serve(transport)
                .await
                .map_err(|e| http::explain_initialize_error(server, &e))?;
            Ok(Connection {
                service,
                exited: None,
                _process: None,
                pid: None,
            })
        }
    }
}

/// How long a failed handshake waits to learn how the process ended.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// Why a process ended before its handshake finished.
fn before_initialize(end: String) -> String {
    if end.starts_with("could not") {
        format!("the server {end}")
    } else {
        format!("the server process {end} before it initialized")
    }
}

/// Holds the connection while it lasts, then reconnects with backoff for
/// as long as the gateway holds the server.
async fn supervise(
    upstream: std::sync::Weak<Upstream>,
    client: GatewayClient,
    mut connection: Connection,
    closing: Arc<tokio::sync::Notify>,
) {
    let mut backoff = FIRST_BACKOFF;
    loop {
        let Some(why) = ended(connection, &closing).await else {
            return;
        };
        let Some(server) = upstream.upgrade() else {
            return;
        };
        let why = with_stderr(why, &server.stderr);
        server.set(LinkState::Down(why), None, None, false);
        let (config, confinement, stderr) = (
            server.config.clone(),
            server.confinement.clone(),
            server.stderr.clone(),
        );
        drop(server);
        loop {
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = closing.notified() => return,
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
            let attempt = tokio::time::timeout(
                config.connect_timeout(),
                connect(&config, &confinement, &stderr, client.clone()),
            )
            .await
            .unwrap_or_else(|_| Err("no answer within the connect timeout".to_owned()));
            let Some(server) = upstream.upgrade() else {
                return;
            };
            match attempt {
                Ok(next) => {
                    server.set(
                        LinkState::Up,
                        Some(next.service.peer().clone()),
                        next.pid,
                        true,
                    );
                    connection = next;
                    backoff = FIRST_BACKOFF;
                    break;
                }
                Err(error) => {
                    let error = with_stderr(error, &stderr);
                    server.set(LinkState::Down(error), None, None, false);
                }
            }
        }
    }
}

/// Waits for the connection to end and says how; `None` when it was closed
/// on request (`closing`), after the server had [`EXIT_GRACE`] to end.
async fn ended(connection: Connection, closing: &tokio::sync::Notify) -> Option<String> {
    let Connection {
        service,
        mut exited,
        _process,
        pid: _,
    } = connection;
    let token = service.cancellation_token();
    let session = async move {
        match service.waiting().await {
            Ok(reason) => format!("the session ended ({reason:?})"),
            Err(e) => format!("the session task failed: {e}"),
        }
    };
    tokio::pin!(session);
    tokio::select! {
        end = async {
            match exited.as_mut() {
                Some(exited) => exited.await,
                None => std::future::pending().await,
            }
        } => {
            let end = end.unwrap_or_else(|_| "ended".to_owned());
            return Some(format!("the process {end}"));
        }
        why = &mut session => return Some(why),
        () = closing.notified() => {}
    }
    // The session's end drops its transport: the server's input is closed
    // after what is queued for it, and a well-behaved server exits.
    token.cancel();
    let _ = tokio::time::timeout(EXIT_GRACE, async {
        (&mut session).await;
        if let Some(exited) = exited.as_mut() {
            let _ = exited.await;
        }
    })
    .await;
    // `_process` goes with this frame: whatever is left is killed.
    None
}

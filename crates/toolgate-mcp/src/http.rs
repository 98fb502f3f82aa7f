//! Streamable HTTP: `/mcp` on a loopback address, behind a bearer token and
//! Host/Origin checks.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, HttpBody};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use crate::incoming::{MAX_MESSAGE_BYTES, Refusal, Screened, screen};
use crate::server::McpServer;

/// How `serve_http` listens and whom it lets in.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HttpOptions {
    /// Address to bind.
    pub addr: SocketAddr,
    /// The bearer token every request must carry; `None` turns the check off
    /// (loopback test setups only).
    pub token: Option<String>,
    /// Host names accepted in the `Host` header besides the loopback names.
    pub extra_hosts: Vec<String>,
}

impl HttpOptions {
    /// Listen on `addr`, requiring `token`.
    pub fn new(addr: SocketAddr, token: Option<String>) -> Self {
        HttpOptions {
            addr,
            token,
            extra_hosts: Vec::new(),
        }
    }
}

/// The errors of the HTTP server.
///
/// The io errors are part of the message, not a `source`: `{:#}` would
/// print them twice.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HttpError {
    /// Something else listens on the port.
    #[error(
        "cannot listen on {addr}: the port is already in use (another `toolgate serve`?); \
         pass another --port, or --port 0 to pick a free one"
    )]
    PortInUse {
        /// The address.
        addr: SocketAddr,
    },
    /// The address could not be bound for another reason.
    #[error("cannot listen on {addr}: {error}{hint}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        error: std::io::Error,
        /// What to do about it.
        hint: &'static str,
    },
    /// The server stopped with an error.
    #[error("the HTTP server failed: {0}")]
    Serve(std::io::Error),
}

#[derive(Clone)]
struct Gate {
    token: Option<Arc<str>>,
    hosts: Arc<Vec<String>>,
}

/// Serves MCP over Streamable HTTP at `/mcp` until SIGINT/SIGTERM, then
/// closes every session (ending their calls, which kills their processes).
/// `ready` gets the bound address once the socket listens.
pub async fn serve_http(
    server: McpServer,
    options: HttpOptions,
    ready: impl FnOnce(SocketAddr),
) -> Result<(), HttpError> {
    let stop = CancellationToken::new();
    let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1", "[::1]"]
        .map(str::to_owned)
        .to_vec();
    hosts.extend(options.extra_hosts.iter().cloned());
    let config = StreamableHttpServerConfig::default()
        .with_max_request_body_bytes(MAX_MESSAGE_BYTES)
        .with_sse_keep_alive(Some(Duration::from_secs(15)))
        .with_allowed_hosts(hosts.clone())
        .with_cancellation_token(stop.child_token());
    let sessions = Arc::new(LocalSessionManager::default());
    let service = StreamableHttpService::new(move || Ok(server.connection(true)), sessions, config);
    let gate = Gate {
        token: options.token.map(Arc::from),
        hosts: Arc::new(hosts),
    };
    // The last layer runs first: Host/Origin, then the token, then the
    // body (so nobody without the token makes toolgate read 16 MiB).
    let app = Router::new()
        .nest_service("/mcp", service)
        .layer(middleware::from_fn(refuse_malformed))
        .layer(middleware::from_fn_with_state(gate.clone(), require_token))
        .layer(middleware::from_fn_with_state(gate, check_host_and_origin));
    let listener = tokio::net::TcpListener::bind(options.addr)
        .await
        .map_err(|error| bind_error(options.addr, error))?;
    let bound = listener.local_addr().map_err(HttpError::Serve)?;
    ready(bound);
    let signal_stop = stop.clone();
    let signals = tokio::spawn(async move {
        shutdown_signal().await;
        signal_stop.cancel();
    });
    let app = app.into_make_service_with_connect_info::<SocketAddr>();
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(stop.cancelled_owned())
        .await;
    signals.abort();
    served.map_err(HttpError::Serve)
}

fn bind_error(addr: SocketAddr, error: std::io::Error) -> HttpError {
    use std::io::ErrorKind;
    let hint = match error.kind() {
        ErrorKind::AddrInUse => return HttpError::PortInUse { addr },
        ErrorKind::AddrNotAvailable => {
            "; no interface of this machine has that address: pass --host with one of its \
             addresses (default 127.0.0.1)"
        }
        ErrorKind::PermissionDenied => {
            "; ports below 1024 need privileges: pass --port 1024 or above, or --port 0"
        }
        _ => "",
    };
    HttpError::Bind { addr, error, hint }
}

/// SIGINT or SIGTERM.
pub(crate) async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut interrupt), Ok(mut terminate)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        // Without signal handlers the default action (exit) still applies.
        return std::future::pending().await;
    };
    tokio::select! {
        _ = interrupt.recv() => {}
        _ = terminate.recv() => {}
    }
}

/// Why the token check turned a request away. Says which part was wrong,
/// never what was sent: a wrong token is someone's secret, perhaps the
/// user's other one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TokenProblem {
    /// No `Authorization` header.
    Missing,
    /// `Bearer` with nothing after it.
    Empty,
    /// A header whose scheme is not `Bearer` (or that is not `SCHEME VALUE`).
    WrongScheme,
    /// `Bearer` with a token that is not this server's.
    WrongToken,
}

impl TokenProblem {
    fn of(header: Option<&axum::http::HeaderValue>, expected: &str) -> Option<TokenProblem> {
        let Some(header) = header else {
            return Some(TokenProblem::Missing);
        };
        let Ok(value) = header.to_str() else {
            return Some(TokenProblem::WrongScheme);
        };
        let (scheme, token) = value.split_once(' ').unwrap_or((value, ""));
        // The scheme is case-insensitive (RFC 9110 section 11.1).
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Some(TokenProblem::WrongScheme);
        }
        let token = token.trim();
        if token.is_empty() {
            return Some(TokenProblem::Empty);
        }
        if same_secret(token.as_bytes(), expected.as_bytes()) {
            None
        } else {
            Some(TokenProblem::WrongToken)
        }
    }

    /// For the server's log.
    fn reason(self) -> &'static str {
        match self {
            TokenProblem::Missing => "no Authorization header",
            TokenProblem::Empty => "empty bearer token",
            TokenProblem::WrongScheme => "the Authorization header is not `Bearer <token>`",
            TokenProblem::WrongToken => "wrong bearer token",
        }
    }

    /// For the client: what was wrong and what to send instead.
    fn message(self) -> &'static str {
        match self {
            TokenProblem::Missing | TokenProblem::Empty => {
                "a bearer token is required: send `Authorization: Bearer <token>` (the token is \
                 in the file `toolgate serve` printed at start)\n"
            }
            TokenProblem::WrongScheme => {
                "the Authorization header must use the Bearer scheme: send \
                 `Authorization: Bearer <token>` (the token is in the file `toolgate serve` \
                 printed at start)\n"
            }
            TokenProblem::WrongToken => {
                "the bearer token is wrong: send the token `toolgate serve` printed at start \
                 (TOOLGATE_TOKEN, [serve] token, or the file it named); a restart with another \
                 configuration may have changed it\n"
            }
        }
    }

    fn challenge(self) -> &'static str {
        match self {
            // RFC 6750 section 3.1: a token was sent and is not valid.
            TokenProblem::WrongToken => "Bearer error=\"invalid_token\"",
            _ => "Bearer",
        }
    }
}

async fn require_token(State(gate): State<Gate>, request: Request, next: Next) -> Response {
    if let Some(expected) = &gate.token {
        let header = request.headers().get(header::AUTHORIZATION);
        if let Some(problem) = TokenProblem::of(header, expected) {
            log_rejected(&request, StatusCode::UNAUTHORIZED, problem.reason());
            return (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, problem.challenge())],
                problem.message(),
            )
                .into_response();
        }
    }
    next.run(request).await
}

/// One line on stderr per request the gate turns away, so an operator sees
/// a misconfigured client or someone probing. Method, path (not the query,
/// which may carry a secret), the reason and the peer; never a header value
/// that could be a credential.
fn log_rejected(request: &Request, status: StatusCode, reason: &str) {
    let peer = request
        .extensions()
        .get::<axum::extract::ConnectInfo<SocketAddr>>()
        .map_or_else(|| "an unknown peer".to_owned(), |c| c.0.to_string());
    eprintln!(
        "toolgate: rejected {} {} from {peer}: {reason} ({})",
        request.method(),
        request.uri().path(),
        status.as_u16()
    );
}

/// Compares without an early exit, so the response time does not reveal how
/// much of a guessed token was right.
fn same_secret(given: &[u8], expected: &[u8]) -> bool {
    let mut diff = given.len() ^ expected.len();
    for (i, e) in expected.iter().enumerate() {
        diff |= usize::from(given.get(i).copied().unwrap_or(0) ^ e);
    }
    diff == 0
}

/// A POST whose body is no JSON-RPC message gets `400 Bad Request` with the
/// JSON-RPC error as its body (the MCP transport spec's answer to input the
/// server cannot accept; the Python SDK does the same), a body past
/// [`MAX_MESSAGE_BYTES`] `413` with a parse error. rmcp alone answers `415`
/// with a line of text that no JSON-RPC client reads. A body that is a
/// message goes on to rmcp as it came.
async fn refuse_malformed(request: Request, next: Next) -> Response {
    let json = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"));
    // Anything else is rmcp's to refuse (405, 415), as the spec says.
    if request.method() != Method::POST || !json {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let (status, refusal) = match read_bounded(body).await {
        Ok(bytes) => match screen(&bytes) {
            Screened::Message(_) => {
                return next
                    .run(Request::from_parts(parts, Body::from(bytes)))
                    .await;
            }
            Screened::Blank => (
                StatusCode::BAD_REQUEST,
                Refusal::parse_error("the request body is empty"),
            ),
            Screened::Refused(refusal) => (StatusCode::BAD_REQUEST, refusal),
        },
        Err(BodyProblem::TooLong) => (StatusCode::PAYLOAD_TOO_LARGE, Refusal::too_long()),
        Err(BodyProblem::Unreadable(e)) => {
            let message = format!("the request body could not be read: {e}");
            (StatusCode::BAD_REQUEST, Refusal::parse_error(&message))
        }
    };
    eprintln!(
        "toolgate: refused a message on POST /mcp: {}",
        refusal.reason
    );
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        refusal.reply.to_string(),
    )
        .into_response()
}

enum BodyProblem {
    TooLong,
    Unreadable(axum::Error),
}

/// The body, read no further than the limit whatever Content-Length says.
async fn read_bounded(body: Body) -> Result<Vec<u8>, BodyProblem> {
    let mut body = std::pin::pin!(body);
    let mut bytes = Vec::new();
    while let Some(frame) = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
        let frame = frame.map_err(BodyProblem::Unreadable)?;
        if let Ok(data) = frame.into_data() {
            if data.len() > MAX_MESSAGE_BYTES - bytes.len() {
                return Err(BodyProblem::TooLong);
            }
            bytes.extend_from_slice(&data);
        }
    }
    Ok(bytes)
}

/// DNS rebinding: a web page on evil.example whose name is re-pointed at
/// 127.0.0.1 reaches this server from the user's browser with
/// `Host: evil.example` and `Origin: http://evil.example`. Only loopback
/// names (and hosts the operator added) pass; a browser Origin must be a
/// loopback origin too. Requests without Origin are not from a browser page.
async fn check_host_and_origin(State(gate): State<Gate>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    let refused = if !host_allowed(headers, &gate.hosts) {
        Some(("Host", headers.get(header::HOST)))
    } else if !origin_allowed(headers, &gate.hosts) {
        Some(("Origin", headers.get(header::ORIGIN)))
    } else {
        None
    };
    if let Some((name, value)) = refused {
        // Host names are not secrets; Debug quotes and escapes them, so a
        // crafted value cannot forge a log line.
        let value = value.map_or_else(|| "missing".to_owned(), |v| format!("{v:?}"));
        let reason = format!("{name} {value} is not a host this server serves");
        log_rejected(&request, StatusCode::FORBIDDEN, &reason);
        return (
            StatusCode::FORBIDDEN,
            format!(
                "forbidden: the {name} header names a host this server does not serve (a \
                 reverse proxy's name goes into [serve] allowed_hosts)\n"
            ),
        )
            .into_response();
    }
    next.run(request).await
}

fn strip_port(host: &str) -> &str {
    match host.rsplit_once(':') {
        Some((name, port)) if !name.is_empty() && port.chars().all(|c| c.is_ascii_digit()) => {
            if name.starts_with('[') || !name.contains(':') {
                name
            } else {
                host
            }
        }
        _ => host,
    }
}

fn host_allowed(headers: &HeaderMap, hosts: &[String]) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let name = strip_port(host);
    hosts.iter().any(|h| h.eq_ignore_ascii_case(name))
}

fn origin_allowed(headers: &HeaderMap, hosts: &[String]) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    let Some(rest) = origin.to_str().ok().and_then(|o| {
        o.strip_prefix("http://")
            .or_else(|| o.strip_prefix("https://"))
    }) else {
        return false;
    };
    let name = strip_port(rest);
    hosts.iter().any(|h| h.eq_ignore_ascii_case(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(host: Option<&str>, origin: Option<&str>) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in [(header::HOST, host), (header::ORIGIN, origin)] {
            if let Some(value) = value.and_then(|v| HeaderValue::from_str(v).ok()) {
                map.insert(name, value);
            }
        }
        map
    }

    #[test]
    fn only_loopback_hosts_and_origins_pass() {
        let hosts: Vec<String> = ["localhost", "127.0.0.1", "::1", "[::1]"]
            .map(str::to_owned)
            .to_vec();
        let cases = [
            (Some("127.0.0.1:8765"), None, true),
            (Some("localhost"), Some("http://localhost:3000"), true),
            (Some("[::1]:8765"), Some("http://[::1]:8765"), true),
            (Some("LOCALHOST:1"), None, true),
            (Some("evil.example.com"), None, false),
            (Some("127.0.0.1.evil.example.com"), None, false),
            (
                Some("127.0.0.1:8765"),
                Some("http://evil.example.com"),
                false,
            ),
            (
                Some("127.0.0.1:8765"),
                Some("http://localhost.evil.example.com"),
                false,
            ),
            (Some("127.0.0.1:8765"), Some("null"), false),
            (None, None, false),
        ];
        for (host, origin, allowed) in cases {
            let h = headers(host, origin);
            assert_eq!(
                host_allowed(&h, &hosts) && origin_allowed(&h, &hosts),
                allowed,
                "{host:?} {origin:?}"
            );
        }
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret(b"abc", b"abc"));
        for given in [&b"abd"[..], b"ab", b"abcd", b""] {
            assert!(!same_secret(given, b"abc"), "{given:?}");
        }
    }
}

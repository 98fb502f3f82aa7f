//! Streamable HTTP at the byte level, for what the peers do not check: the
//! session lifecycle (create, use, DELETE, refused afterwards), the
//! Host/Origin checks against DNS rebinding, and the bearer token.
//!
//! One request per connection (`Connection: close`), read to the end.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::{Project, TOKEN};

const PROTOCOL: &str = "2025-06-18";

/// One HTTP response.
#[derive(Debug)]
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC message in the body: the body itself (JSON) or the
    /// `data:` line of an SSE event that carries one (the others are the
    /// priming events, with empty data).
    fn message(&self) -> Value {
        if let Ok(value) = serde_json::from_str(&self.body) {
            return value;
        }
        self.body
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .find_map(|data| serde_json::from_str(data.trim()).ok())
            .unwrap_or_else(|| panic!("no JSON-RPC message in the response: {self:#?}"))
    }
}

/// An endpoint `http://127.0.0.1:PORT/mcp`, split for raw requests.
struct Endpoint {
    authority: String,
    path: String,
}

impl Endpoint {
    fn new(url: &str) -> Endpoint {
        let rest = url.strip_prefix("http://").expect("an http:// URL");
        let (authority, path) = rest.split_once('/').expect("a URL with a path");
        Endpoint {
            authority: authority.to_owned(),
            path: format!("/{path}"),
        }
    }

    /// Sends `method` with `headers` (Host is added unless given) and
    /// `body`, and reads the whole response.
    fn send(&self, method: &str, headers: &[(&str, &str)], body: &str) -> Response {
        let mut stream = TcpStream::connect(&self.authority).unwrap();
        // A guard against a server that never ends the response, so the
        // test fails instead of hanging; not a timing assertion.
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let mut request = format!("{method} {} HTTP/1.1\r\n", self.path);
        if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
            request.push_str(&format!("Host: {}\r\n", self.authority));
        }
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str(&format!(
            "Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ));
        stream.write_all(request.as_bytes()).unwrap();
        let mut raw = Vec::new();
        stream
            .read_to_end(&mut raw)
            .unwrap_or_else(|e| panic!("reading the response to {method}: {e}\n{request}"));
        parse(&raw)
    }
}

fn parse(raw: &[u8]) -> Response {
    let raw = String::from_utf8_lossy(raw);
    let (head, body) = raw
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("not an HTTP response: {raw:?}"));
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {raw:?}"));
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let chunked = headers.iter().any(|(n, v)| {
        n.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked")
    });
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Response {
        status,
        headers,
        body,
    }
}

fn dechunk(mut rest: &str) -> String {
    let mut body = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16)
            .unwrap_or_else(|_| panic!("bad chunk size in {rest:?}"));
        if size == 0 {
            break;
        }
        body.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    body
}

fn request(id: u64, method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

fn initialize() -> String {
    request(
        1,
        "initialize",
        json!({
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "toolgate-peer-tests", "version": "0"},
        }),
    )
}

/// A client of one server: the bearer token it sends and the session it
/// is in, if any.
struct Client {
    endpoint: Endpoint,
    bearer: String,
}

impl Client {
    fn new(url: &str) -> Client {
        Client {
            endpoint: Endpoint::new(url),
            bearer: format!("Bearer {TOKEN}"),
        }
    }

    /// POSTs a JSON-RPC `body` as an MCP client does, in `session`.
    fn post(&self, session: Option<&str>, body: &str) -> Response {
        let mut headers = vec![
            ("Authorization", self.bearer.as_str()),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ];
        if let Some(session) = session {
            headers.push(("Mcp-Session-Id", session));
            headers.push(("MCP-Protocol-Version", PROTOCOL));
        }
        self.endpoint.send("POST", &headers, body)
    }

    fn delete(&self, session: &str) -> Response {
        let headers = [
            ("Authorization", self.bearer.as_str()),
            ("Mcp-Session-Id", session),
            ("MCP-Protocol-Version", PROTOCOL),
        ];
        self.endpoint.send("DELETE", &headers, "")
    }

    /// initialize + notifications/initialized; the session id.
    fn open_session(&self) -> String {
        let r = self.post(None, &initialize());
        assert_eq!(r.status, 200, "initialize: {r:#?}");
        let session = r
            .header("mcp-session-id")
            .unwrap_or_else(|| panic!("initialize returned no Mcp-Session-Id: {r:#?}"))
            .to_owned();
        let init = r.message();
        assert_eq!(init["id"], 1, "{init:#}");
        assert_eq!(init["result"]["protocolVersion"], PROTOCOL, "{init:#}");
        assert_eq!(init["result"]["serverInfo"]["name"], "toolgate", "{init:#}");

        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let r = self.post(Some(&session), &initialized.to_string());
        assert_eq!(r.status, 202, "notifications/initialized: {r:#?}");
        session
    }

    /// tools/call `name` in `session`; the JSON-RPC `result`.
    fn call(&self, session: &str, name: &str, arguments: Value) -> Value {
        let body = request(
            7,
            "tools/call",
            json!({"name": name, "arguments": arguments}),
        );
        let r = self.post(Some(session), &body);
        assert_eq!(r.status, 200, "tools/call {name}: {r:#?}");
        let message = r.message();
        assert_eq!(message["result"]["isError"], false, "{message:#}");
        message["result"].clone()
    }
}

fn tool_names(message: &Value) -> Vec<String> {
    message["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("not a tools/list result: {message:#}"))
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn a_session_works_until_it_is_deleted() {
    let p = Project::new();
    let served = p.serve(Some(TOKEN));
    let client = Client::new(&served.url);
    let session = client.open_session();

    let r = client.post(Some(&session), &request(2, "tools/list", json!({})));
    assert_eq!(r.status, 200, "tools/list in the session: {r:#?}");
    let names = tool_names(&r.message());
    assert!(
        names.iter().any(|n| n == "read") && names.iter().any(|n| n == "bash"),
        "{names:?}"
    );

    let r = client.post(
        Some(&session),
        &request(
            3,
            "tools/call",
            json!({"name": "read", "arguments": {"path": "notes.txt"}}),
        ),
    );
    assert_eq!(r.status, 200, "tools/call in the session: {r:#?}");
    let call = r.message();
    assert_eq!(call["result"]["isError"], false, "{call:#}");
    assert_eq!(call["result"]["structuredContent"]["path"], "notes.txt");

    let r = client.delete(&session);
    assert!(
        (200..300).contains(&r.status),
        "DELETE of the session: {r:#?}"
    );

    // The spec: after the session ends, a request carrying its id gets 404
    // (which tells the client to start a new session).
    let r = client.post(Some(&session), &request(4, "tools/list", json!({})));
    assert_eq!(r.status, 404, "tools/list in the deleted session: {r:#?}");
    drop(served);
}

#[test]
fn requests_outside_a_live_session_are_refused() {
    let p = Project::new();
    let served = p.serve(Some(TOKEN));
    let client = Client::new(&served.url);
    // A live session elsewhere must not make a guessed id valid.
    let _live = client.open_session();

    let list = request(2, "tools/list", json!({}));
    let cases = [
        // The spec: an unknown (or ended) session id gets 404.
        (Some("00000000-0000-0000-0000-000000000000"), 404),
        (Some("not-a-session"), 404),
        // The spec: a server that requires sessions answers a request
        // without one (other than initialize) with 400.
        (None, 400),
    ];
    for (session, status) in cases {
        let r = client.post(session, &list);
        assert_eq!(r.status, status, "session {session:?}: {r:#?}");
        assert!(!r.body.contains("\"tools\""), "session {session:?}: {r:#?}");
    }
    drop(served);
}

#[test]
fn foreign_hosts_and_origins_are_forbidden() {
    let p = Project::new();
    let served = p.serve(Some(TOKEN));
    let endpoint = Endpoint::new(&served.url);
    let port = endpoint.authority.rsplit(':').next().unwrap().to_owned();
    let loopback = endpoint.authority.clone();
    let bearer = format!("Bearer {TOKEN}");
    let evil_host = format!("evil.example.com:{port}");
    let evil_suffix = format!("127.0.0.1.evil.example.com:{port}");
    let localhost_origin = format!("http://localhost:{port}");

    // (Host, Origin, bearer?, expected status). DNS rebinding: a page on
    // evil.example.com whose name now resolves to 127.0.0.1 reaches this
    // server with its own name in Host and Origin; the check must refuse it
    // before the token matters, and also when the token is right.
    let cases: [(&str, Option<&str>, bool, u16); 7] = [
        (&evil_host, None, true, 403),
        (&evil_host, None, false, 403),
        (&evil_suffix, None, true, 403),
        (&loopback, Some("http://evil.example.com"), true, 403),
        (&loopback, Some("null"), true, 403),
        (&loopback, Some(&localhost_origin), true, 200),
        (&loopback, None, true, 200),
    ];
    for (host, origin, with_token, status) in cases {
        let mut headers = vec![
            ("Host", host),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ];
        if let Some(origin) = origin {
            headers.push(("Origin", origin));
        }
        if with_token {
            headers.push(("Authorization", &bearer));
        }
        let r = endpoint.send("POST", &headers, &initialize());
        assert_eq!(
            r.status, status,
            "Host {host}, Origin {origin:?}, token {with_token}: {r:#?}"
        );
        if status == 403 {
            assert_eq!(r.header("mcp-session-id"), None, "{r:#?}");
        }
    }
    drop(served);
}

#[test]
fn a_missing_or_wrong_bearer_token_is_unauthorized() {
    let p = Project::new();
    let served = p.serve(Some(TOKEN));
    let endpoint = Endpoint::new(&served.url);
    let right = format!("Bearer {TOKEN}");
    let prefix = format!("Bearer {}", &TOKEN[..TOKEN.len() - 1]);
    let longer = format!("Bearer {TOKEN}x");
    let basic = format!("Basic {TOKEN}");

    // A token that was sent and is not valid gets RFC 6750's invalid_token.
    let invalid = "Bearer error=\"invalid_token\"";
    let cases: [(Option<&str>, u16, &str); 8] = [
        (None, 401, "Bearer"),
        (Some("Bearer"), 401, "Bearer"),
        (Some("Bearer "), 401, "Bearer"),
        (Some("Bearer wrong"), 401, invalid),
        (Some(&prefix), 401, invalid),
        (Some(&longer), 401, invalid),
        (Some(&basic), 401, "Bearer"),
        (Some(&right), 200, ""),
    ];
    for (authorization, status, challenge) in cases {
        let mut headers = vec![
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ];
        if let Some(authorization) = authorization {
            headers.push(("Authorization", authorization));
        }
        let r = endpoint.send("POST", &headers, &initialize());
        assert_eq!(r.status, status, "Authorization {authorization:?}: {r:#?}");
        if status == 401 {
            assert_eq!(
                r.header("www-authenticate"),
                Some(challenge),
                "Authorization {authorization:?}: {r:#?}"
            );
            assert_eq!(r.header("mcp-session-id"), None, "{r:#?}");
        }
    }
    drop(served);
}

/// Starts `sleep 300` with process_start in `session`; its pid.
fn start_sleeper(client: &Client, session: &str) -> u64 {
    let started = client.call(session, "process_start", json!({"command": "sleep 300"}));
    started["structuredContent"]["pid"]
        .as_u64()
        .unwrap_or_else(|| panic!("process_start returned no pid: {started:#}"))
}

/// Whether `pid` is a live process (a zombie is not).
fn alive(pid: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let state = stat.rsplit_once(") ").map(|(_, rest)| rest.chars().next());
        state != Some(Some('Z'))
    })
}

#[test]
fn a_session_sees_only_its_own_background_processes() {
    // process_list promises "the background processes this agent started";
    // over HTTP each session is an agent, as each stdio connection is. A
    // process shared across sessions could be read, written to or killed by
    // another client of the same server.
    let p = Project::new();
    let served = p.serve(Some(TOKEN));
    let client = Client::new(&served.url);
    let first = client.open_session();
    let second = client.open_session();
    let pid = start_sleeper(&client, &first);

    let mine = client.call(&first, "process_list", json!({}));
    let pids: Vec<&Value> = mine["structuredContent"]["processes"]
        .as_array()
        .map(|all| all.iter().map(|p| &p["pid"]).collect())
        .unwrap_or_default();
    assert_eq!(pids, vec![&json!(pid)], "{mine:#}");

    let theirs = client.call(&second, "process_list", json!({}));
    assert_eq!(
        theirs["structuredContent"]["processes"],
        json!([]),
        "another session lists the process {pid} the first one started: {theirs:#}"
    );
    drop(served);
}

#[test]
fn deleting_a_session_ends_its_background_processes() {
    // An ended session is like a closed stdio connection: what it started
    // stops with it, instead of running until the server exits.
    let p = Project::new();
    let served = p.serve(Some(TOKEN));
    let client = Client::new(&served.url);
    let session = client.open_session();
    let pid = start_sleeper(&client, &session);
    assert!(
        alive(pid),
        "process {pid} is not running after process_start"
    );

    let r = client.delete(&session);
    assert!((200..300).contains(&r.status), "DELETE: {r:#?}");
    // Killing takes a moment after the response; wait for it, with a
    // guard (not a timing assertion) so a process that never ends fails
    // the test instead of hanging it.
    let guard = std::time::Instant::now();
    while alive(pid) && guard.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        !alive(pid),
        "process {pid}, started in session {session}, still runs after DELETE ended the session"
    );
    // Dropping the server kills it (bubblewrap's --die-with-parent).
    drop(served);
}

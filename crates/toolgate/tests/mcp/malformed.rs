//! Messages that are no JSON-RPC, raw on the wire: garbage, truncated JSON,
//! `1e400`, 100k-deep nesting, invalid UTF-8, the wrong shape, a batch, a
//! line of 64 MiB. Each gets the JSON-RPC error for it (a client that gets
//! nothing waits forever), says what was wrong without echoing the input,
//! and the session goes on: the next request is answered.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::ChildStdin;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::http::serve;
use crate::{Lines, Project, spawn_piped, wait_until};

/// A broken message and the whole error response it must get.
struct Case {
    name: &'static str,
    bytes: Vec<u8>,
    reply: Value,
}

fn error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

fn parse_error(message: &str) -> Value {
    error(Value::Null, -32700, &format!("Parse error: {message}"))
}

const BATCH: &str = "Invalid Request: JSON-RPC batches are not supported (MCP removed them in \
                     2025-06-18); send each message on its own";

fn cases() -> Vec<Case> {
    let case = |name, bytes: &[u8], reply| Case {
        name,
        bytes: bytes.to_vec(),
        reply,
    };
    vec![
        case(
            "garbage",
            b"hello, is this MCP?",
            parse_error("expected value at line 1 column 1"),
        ),
        case(
            "truncated JSON",
            br#"{"jsonrpc":"2.0","id":3,"method":"tools/li"#,
            parse_error("EOF while parsing a string at line 1 column 42"),
        ),
        case(
            "a number out of range",
            br#"{"jsonrpc":"2.0","id":1e400,"method":"ping"}"#,
            parse_error("number out of range at line 1 column 27"),
        ),
        case(
            "100k-deep nesting",
            "[".repeat(100_000).as_bytes(),
            parse_error("recursion limit exceeded at line 1 column 128"),
        ),
        case(
            "invalid UTF-8",
            b"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"pi\xC3\x28ng\"}",
            parse_error("the message is not UTF-8 (invalid byte at offset 36)"),
        ),
        case(
            "not an object",
            b"\"ping\"",
            error(
                Value::Null,
                -32600,
                "Invalid Request: a JSON-RPC message is an object, not a string",
            ),
        ),
        case(
            "an id that is no id",
            br#"{"jsonrpc":"2.0","id":{"n":1},"method":"ping"}"#,
            error(
                Value::Null,
                -32600,
                r#"Invalid Request: "id" must be a string or an integer"#,
            ),
        ),
        case(
            "no method",
            br#"{"jsonrpc":"2.0","id":"m1","params":{}}"#,
            error(
                json!("m1"),
                -32600,
                r#"Invalid Request: no "method": a request names the method it calls"#,
            ),
        ),
        case(
            "an empty batch",
            b"[]",
            error(Value::Null, -32600, "Invalid Request: an empty batch"),
        ),
        case(
            "a batch",
            br#"[{"jsonrpc":"2.0","id":21,"method":"ping"},
                {"jsonrpc":"2.0","method":"notifications/initialized"},
                {"jsonrpc":"2.0","id":"b","method":"tools/list"}]"#,
            json!([
                error(json!(21), -32600, BATCH),
                error(json!("b"), -32600, BATCH)
            ]),
        ),
    ]
    .into_iter()
    // A batch on one line, as stdio frames it.
    .map(|mut c| {
        c.bytes.retain(|&b| b != b'\n');
        c
    })
    .collect()
}

/// Params that do not fit the method: Invalid params, with the request's id.
fn assert_invalid_params(reply: &Value, id: &str) {
    assert_eq!(reply["id"], id, "{reply}");
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
    let message = reply["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("Invalid params for tools/call: "),
        "{reply}"
    );
}

const BAD_PARAMS: &str =
    r#"{"jsonrpc":"2.0","id":"p1","method":"tools/call","params":{"name":["read"]}}"#;

/// `toolgate mcp` spoken to byte by byte.
struct Stdio {
    stdin: Option<ChildStdin>,
    stdout: Lines,
    stderr: Lines,
    child: std::process::Child,
}

impl Stdio {
    fn start(p: &Project) -> Stdio {
        let (child, stdin, stdout, stderr) = spawn_piped(p.toolgate(&["mcp"]));
        let mut stdio = Stdio {
            stdin,
            stdout,
            stderr,
            child,
        };
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "malformed-test", "version": "0"}}});
        stdio.line(init.to_string().as_bytes());
        assert_eq!(stdio.reply()["id"], 0);
        stdio.line(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        stdio
    }

    fn write(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    fn line(&mut self, bytes: &[u8]) {
        self.write(bytes);
        self.write(b"\n");
    }

    /// The next line on stdout, as JSON. No answer fails the test (after a
    /// generous wait) instead of hanging it: that is the bug.
    fn reply(&mut self) -> Value {
        let Some(line) = self.stdout.next(Duration::from_secs(60)) else {
            let _ = self.child.kill();
            panic!(
                "toolgate mcp did not answer; stderr:\n{}",
                self.stderr.rest(Duration::from_secs(5)).join("\n")
            );
        };
        assert!(
            line.len() < 1024,
            "a reply of {} bytes: {line:.300}",
            line.len()
        );
        serde_json::from_str(&line).unwrap_or_else(|_| panic!("not JSON on stdout: {line:.300}"))
    }

    /// A ping, and its answer: the session is alive.
    fn assert_alive(&mut self, id: u64, after: &str) {
        self.line(
            json!({"jsonrpc": "2.0", "id": id, "method": "ping"})
                .to_string()
                .as_bytes(),
        );
        assert_eq!(
            self.reply(),
            json!({"jsonrpc": "2.0", "id": id, "result": {}}),
            "after {after}"
        );
    }

    /// Peak resident memory so far, in KiB.
    fn peak_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }
}

impl Drop for Stdio {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn over_stdio_each_malformed_line_gets_its_error_and_the_session_goes_on() {
    let p = Project::new();
    let mut stdio = Stdio::start(&p);
    let mut id = 100;
    for case in cases() {
        stdio.line(&case.bytes);
        assert_eq!(stdio.reply(), case.reply, "{}", case.name);
        id += 1;
        stdio.assert_alive(id, case.name);
    }
    stdio.line(BAD_PARAMS.as_bytes());
    assert_invalid_params(&stdio.reply(), "p1");
    stdio.assert_alive(200, "params that do not fit");

    // A broken notification gets no answer (JSON-RPC answers none), and
    // neither does a response nobody asked for: the ping right after is
    // the next thing on stdout.
    stdio.line(br#"{"jsonrpc":"2.0","method":"notifications/initialized","params":7}"#);
    stdio.line(br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#);
    stdio.assert_alive(201, "a broken notification and a stray response");

    // The client goes away: toolgate ends cleanly, and said on stderr what
    // it refused.
    drop(stdio.stdin.take());
    let status = wait_until(&mut stdio.child, Duration::from_secs(60));
    let stderr = stdio.stderr.rest(Duration::from_secs(10)).join("\n");
    assert!(status.is_some_and(|s| s.success()), "{status:?}\n{stderr}");
    assert!(
        stderr.contains("toolgate: refused a message on stdin: Parse error: number out of range"),
        "{stderr}"
    );
}

/// Attack: a client (or a runaway producer piped into toolgate) sends a
/// line of 64 MiB with no end in sight, to make toolgate buffer it all. It
/// is refused as soon as it crosses the 16 MiB limit, without being kept,
/// and once the line ends the next one is read as usual.
#[test]
fn over_stdio_a_line_past_the_limit_is_refused_without_buffering_it() {
    let p = Project::new();
    let mut stdio = Stdio::start(&p);
    stdio.assert_alive(1, "start");
    let before = stdio.peak_kib();

    let mut stdin = stdio.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let chunk = vec![b'7'; 1024 * 1024];
        for _ in 0..64 {
            stdin.write_all(&chunk).unwrap();
        }
        stdin.flush().unwrap();
        stdin
    });
    // The refusal comes while the line is still being written.
    assert_eq!(
        stdio.reply(),
        parse_error("the message is longer than toolgate's limit of 16 MiB and was not read")
    );
    stdio.stdin = Some(writer.join().unwrap());
    // The end of the long line, then a request.
    stdio.write(b"\n");
    stdio.assert_alive(2, "a line of 64 MiB");

    // toolgate never held the 64 MiB: the line stops at 16 MiB and is
    // dropped there. (rmcp-style unbounded reading would add 64 MiB and
    // more.) A bound on memory, not on time.
    let grown_mib = stdio.peak_kib().saturating_sub(before) / 1024;
    assert!(grown_mib < 48, "peak memory grew by {grown_mib} MiB");

    // A line of exactly 16 MiB is still read (and here refused as JSON).
    stdio.write(&vec![b' '; 16 * 1024 * 1024 - 1]);
    stdio.line(b"x");
    assert_eq!(
        stdio.reply(),
        parse_error("expected value at line 1 column 16777216")
    );
    stdio.assert_alive(3, "a line of 16 MiB");
}

/// One raw HTTP request to `toolgate serve`, read to the end.
struct Http {
    authority: String,
    bearer: String,
}

/// An HTTP response: status, the headers (lowercase names) and the body.
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC message: the body, or the data of an SSE event.
    fn message(&self) -> Value {
        serde_json::from_str(&self.body)
            .ok()
            .or_else(|| {
                self.body
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .find_map(|d| serde_json::from_str(d.trim()).ok())
            })
            .unwrap_or_else(|| panic!("no JSON-RPC message in {} {:.300}", self.status, self.body))
    }
}

impl Http {
    fn new(url: &str, token: &str) -> Http {
        let rest = url.strip_prefix("http://").unwrap();
        Http {
            authority: rest.split('/').next().unwrap().to_owned(),
            bearer: format!("Bearer {token}"),
        }
    }

    /// POSTs `body` to /mcp as an MCP client does, in `session` if any.
    fn post(&self, session: Option<&str>, body: &[u8]) -> Response {
        let mut head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: {}\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             Content-Length: {}\r\nConnection: close\r\n",
            self.authority,
            self.bearer,
            body.len()
        );
        if let Some(session) = session {
            head.push_str(&format!(
                "Mcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-11-25\r\n"
            ));
        }
        head.push_str("\r\n");
        let mut stream = TcpStream::connect(&self.authority).unwrap();
        // Against a server that never answers: the test fails, not hangs.
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let mut sending = stream.try_clone().unwrap();
        let body = body.to_vec();
        // Written on a thread: a server that refuses a big body early
        // answers before it has read it all.
        let writer = std::thread::spawn(move || {
            let _ = sending.write_all(head.as_bytes());
            let _ = sending.write_all(&body);
        });
        let mut raw = Vec::new();
        stream
            .read_to_end(&mut raw)
            .unwrap_or_else(|e| panic!("reading the response: {e}"));
        let _ = writer.join();
        parse(&raw)
    }
}

fn parse(raw: &[u8]) -> Response {
    let raw = String::from_utf8_lossy(raw);
    let (head, body) = raw
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("not an HTTP response: {raw:.300}"));
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let mut body = body.to_owned();
    if headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"))
    {
        body = dechunk(&body);
    }
    Response {
        status,
        headers,
        body,
    }
}

fn dechunk(mut rest: &str) -> String {
    let mut body = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 || after.len() < size {
            break;
        }
        body.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    body
}

const TOKEN: &str = "malformed-token";

/// The MCP transport spec: input the server cannot accept gets an HTTP
/// error status; the body is the JSON-RPC error. rmcp alone answered 415
/// with a line of text.
#[test]
fn over_http_each_malformed_body_gets_400_with_its_error_and_the_session_goes_on() {
    let p = Project::new();
    let served = serve(&p, &[("TOOLGATE_TOKEN", TOKEN)]);
    let http = Http::new(&served.url, TOKEN);
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "malformed-test", "version": "0"}}});
    let opened = http.post(None, init.to_string().as_bytes());
    assert_eq!(opened.status, 200, "{}", opened.body);
    let session = opened.header("mcp-session-id").unwrap().to_owned();
    let initialized = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    assert_eq!(http.post(Some(&session), initialized).status, 202);
    let alive = |id: u64, after: &str| {
        let ping = json!({"jsonrpc": "2.0", "id": id, "method": "ping"}).to_string();
        let r = http.post(Some(&session), ping.as_bytes());
        assert_eq!(r.status, 200, "after {after}: {}", r.body);
        assert_eq!(
            r.message(),
            json!({"jsonrpc": "2.0", "id": id, "result": {}}),
            "after {after}"
        );
    };

    let mut id = 100;
    for case in cases() {
        let r = http.post(Some(&session), &case.bytes);
        assert_eq!(
            (r.status, r.header("content-type")),
            (400, Some("application/json")),
            "{}: {}",
            case.name,
            r.body
        );
        assert_eq!(r.message(), case.reply, "{}", case.name);
        id += 1;
        alive(id, case.name);
    }
    let r = http.post(Some(&session), BAD_PARAMS.as_bytes());
    assert_eq!(r.status, 400, "{}", r.body);
    assert_invalid_params(&r.message(), "p1");
    // A notification that does not parse cannot be accepted either: 400,
    // the error without an id to answer.
    let r = http.post(
        Some(&session),
        br#"{"jsonrpc":"2.0","method":"notifications/initialized","params":7}"#,
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.message()["id"], Value::Null);
    alive(200, "params that do not fit and a broken notification");

    // A body past the limit: 413 and a parse error, not read to its end.
    let r = http.post(Some(&session), &vec![b'['; 17 * 1024 * 1024]);
    assert_eq!(r.status, 413, "{:.300}", r.body);
    assert_eq!(
        r.message(),
        parse_error("the message is longer than toolgate's limit of 16 MiB and was not read")
    );
    alive(201, "a body of 17 MiB");
}

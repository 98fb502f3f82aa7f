//! HTTP/1.x: `CONNECT host:port` tunnels and absolute-form requests
//! (`GET http://host/path`), forwarded in origin form with `Connection: close`.

use std::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

use super::Protocol;
use super::gate::{
    HANDSHAKE_TIMEOUT, RecordGuard, Refusal, Shared, display_host, open_upstream, parse_authority,
    splice,
};

/// Largest request head accepted; bounds memory per client.
const MAX_HEAD: usize = 16 * 1024;

/// Headers that describe one hop and never travel to the upstream. Every
/// `Proxy-*` header is dropped as well: `Proxy-Authorization` carries the
/// client's proxy credentials, which the origin must never see.
/// `Transfer-Encoding` stays: the body is spliced unchanged, framing included.
const HOP_BY_HOP: &[&str] = &["connection", "keep-alive", "te", "trailer", "upgrade"];

/// One parsed request head.
#[derive(Debug, PartialEq, Eq)]
struct Head<'a> {
    method: &'a str,
    target: &'a str,
    minor_version: u8,
    headers: Vec<(&'a str, &'a str)>,
}

/// What the client asked for.
struct Request<'a> {
    head: Head<'a>,
    host: String,
    port: u16,
    /// The origin-form path for a forwarded request; `None` for CONNECT.
    path: Option<String>,
}

/// A request that gets no upstream: the status to answer (if the client is
/// still there to hear it) and the reason to record.
type Rejection = (Option<&'static str>, String);

/// Serves one HTTP client whose first byte has already been read.
pub(crate) async fn serve(mut client: UnixStream, first: u8, shared: &Shared, started: Instant) {
    let mut record = RecordGuard::new(Protocol::HttpForward, started, shared.events.clone());
    let mut buf = vec![first];
    let received = receive_head(&mut client, &mut buf).await.and_then(|end| {
        let request = parse_request(&buf[..end])
            .map_err(|detail| (Some("400 Bad Request"), format!("bad request: {detail}")))?;
        Ok((request, &buf[end..]))
    });
    let (request, pending) = match received {
        Ok(received) => received,
        Err((status, reason)) => {
            if let Some(status) = status {
                respond(
                    &mut client,
                    status,
                    &format!("toolgate egress proxy: {reason}\n"),
                )
                .await;
            }
            record.reason = reason;
            return;
        }
    };
    if request.path.is_none() {
        record.protocol = Protocol::HttpConnect;
    }
    let (host, port) = (request.host.as_str(), request.port);
    let mut upstream = match open_upstream(shared, &mut record, host, port).await {
        Ok(upstream) => upstream,
        Err(refusal) => {
            let status = match refusal {
                Refusal::Denied(_) => "403 Forbidden",
                Refusal::Unresolvable(_) | Refusal::Unreachable { .. } => "502 Bad Gateway",
            };
            let body = format!(
                "toolgate egress proxy refused {}:{port}: {}\n",
                display_host(host),
                refusal.reason()
            );
            return respond(&mut client, status, &body).await;
        }
    };
    match &request.path {
        None => {
            let established = b"HTTP/1.1 200 Connection established\r\n\r\n";
            if client.write_all(established).await.is_ok() {
                splice(&mut client, &mut upstream, pending, &mut record).await;
            }
        }
        Some(path) => {
            // Anything the client sends after this head goes to the same
            // upstream as raw bytes; it cannot reach another host:port.
            let mut forwarded = forward_head(&request.head, host, port, path).into_bytes();
            forwarded.extend_from_slice(pending);
            splice(&mut client, &mut upstream, &forwarded, &mut record).await;
        }
    }
}

/// Reads the request head within [`HANDSHAKE_TIMEOUT`]; returns the offset
/// just past its blank line.
async fn receive_head(client: &mut UnixStream, buf: &mut Vec<u8>) -> Result<usize, Rejection> {
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, read_head(client, buf)).await {
        Ok(Ok(Some(end))) => Ok(end),
        Ok(Ok(None)) => Err((
            Some("431 Request Header Fields Too Large"),
            format!("request head larger than {MAX_HEAD} bytes"),
        )),
        Ok(Err(e)) => Err((
            None,
            format!("client closed before a full request head: {e}"),
        )),
        Err(_) => Err((
            Some("408 Request Timeout"),
            "client sent no complete request head in time".into(),
        )),
    }
}

/// Parses the head and its target: `CONNECT host:port` or an absolute URL.
fn parse_request(bytes: &[u8]) -> Result<Request<'_>, String> {
    let head = parse_head(bytes)?;
    let (host, port, path) = if head.method == "CONNECT" {
        let (host, port) = parse_authority(head.target, None)?;
        (host, port, None)
    } else {
        let (host, port, path) = parse_absolute(head.target)?;
        (host, port, Some(path))
    };
    Ok(Request {
        head,
        host,
        port,
        path,
    })
}

/// Reads until the blank line that ends the head; `Ok(None)` when it grows past
/// [`MAX_HEAD`]. Returns the offset just past the blank line.
async fn read_head(client: &mut UnixStream, buf: &mut Vec<u8>) -> std::io::Result<Option<usize>> {
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            return Ok((at + 4 <= MAX_HEAD).then_some(at + 4));
        }
        if buf.len() >= MAX_HEAD {
            return Ok(None);
        }
        let n = client.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Parses a head ending in CRLF CRLF. Strict on purpose: whitespace before a
/// header's colon, folded lines and stray control bytes are the raw material
/// of request smuggling, so they are refused rather than repaired.
fn parse_head(bytes: &[u8]) -> Result<Head<'_>, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "request head is not UTF-8".to_string())?;
    let text = text.strip_suffix("\r\n\r\n").unwrap_or(text);
    let mut lines = text.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    if request_line.bytes().any(|b| b.is_ascii_control()) {
        return Err("control character in the request line".into());
    }
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(format!("malformed request line {request_line:?}"));
    };
    if !is_token(method) || target.is_empty() {
        return Err(format!("malformed request line {request_line:?}"));
    }
    let minor_version = match version {
        "HTTP/1.1" => 1,
        "HTTP/1.0" => 0,
        other => return Err(format!("unsupported version {other:?}; use HTTP/1.1")),
    };
    let mut headers = Vec::new();
    for line in lines {
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| format!("malformed header line {line:?}"))?;
        if !is_token(name) {
            return Err(format!("malformed header name {name:?}"));
        }
        let value = value.trim_matches([' ', '\t']);
        if value.bytes().any(|b| b.is_ascii_control() && b != b'\t') {
            return Err(format!("control character in header {name}"));
        }
        headers.push((name, value));
    }
    Ok(Head {
        method,
        target,
        minor_version,
        headers,
    })
}

/// Splits `http://authority/path?query#fragment` into host, port and origin-form path.
fn parse_absolute(target: &str) -> Result<(String, u16, String), String> {
    let scheme_end = target.find("://").map(|i| i + 3).unwrap_or(0);
    let scheme = &target[..scheme_end];
    if !scheme.eq_ignore_ascii_case("http://") {
        return Err(if scheme.eq_ignore_ascii_case("https://") {
            "https:// URLs must be tunnelled with CONNECT".into()
        } else {
            format!("{target:?} is not an absolute http:// URL; this is a proxy")
        });
    }
    let rest = &target[scheme_end..];
    let split = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(split);
    if authority.contains('@') {
        return Err(
            "credentials in the URL are not forwarded; send an Authorization header".into(),
        );
    }
    let (host, port) = parse_authority(authority, Some(80))?;
    let path = path.split('#').next().unwrap_or_default();
    let path = match path.chars().next() {
        Some('/') => path.to_string(),
        _ => format!("/{path}"),
    };
    Ok((host, port, path))
}

/// The head sent upstream: origin-form target, `Host` from the checked URL
/// (a client-supplied `Host` could name a different virtual host than the
/// one the policy allowed), no hop-by-hop or proxy headers.
fn forward_head(head: &Head<'_>, host: &str, port: u16, path: &str) -> String {
    let listed: Vec<String> = head
        .headers
        .iter()
        .filter(|(name, _)| name.eq_ignore_ascii_case("connection"))
        .flat_map(|(_, value)| value.split(','))
        .map(|token| token.trim().to_ascii_lowercase())
        .collect();
    let host_header = match port {
        80 => display_host(host),
        _ => format!("{}:{port}", display_host(host)),
    };
    let mut out = format!(
        "{} {path} HTTP/1.{}\r\nHost: {host_header}\r\n",
        head.method, head.minor_version
    );
    for (name, value) in &head.headers {
        let lower = name.to_ascii_lowercase();
        let dropped = lower == "host"
            || lower.starts_with("proxy-")
            || HOP_BY_HOP.contains(&lower.as_str())
            || listed.contains(&lower);
        if !dropped {
            out.push_str(&format!("{name}: {value}\r\n"));
        }
    }
    out.push_str("Connection: close\r\n\r\n");
    out
}

/// Answers with a short text body and closes.
async fn respond(client: &mut UnixStream, status: &str, body: &str) {
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    // The client may already be gone; there is no one left to tell.
    let _ = client.write_all(response.as_bytes()).await;
    let _ = client.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use proptest::prelude::*;

    #[test]
    fn heads_parse() {
        let head = parse_head(b"GET http://a.test/x HTTP/1.1\r\nHost: a.test\r\nX-A:  b \r\n\r\n");
        assert_eq!(
            head,
            Ok(Head {
                method: "GET",
                target: "http://a.test/x",
                minor_version: 1,
                headers: vec![("Host", "a.test"), ("X-A", "b")],
            })
        );
    }

    #[test]
    fn smuggling_shapes_are_refused() {
        let bad: &[&[u8]] = &[
            b"GET  http://a/ HTTP/1.1\r\n\r\n",
            b"GET http://a/ HTTP/2\r\n\r\n",
            b"GET http://a/ HTTP/1.1\r\nHost : a\r\n\r\n",
            b"GET http://a/ HTTP/1.1\r\nX: a\r\n b\r\n\r\n",
            b"GET http://a/ HTTP/1.1\r\nX: a\nY: b\r\n\r\n",
            b"GET http://a/\x01 HTTP/1.1\r\n\r\n",
            b"GET http://a/ HTTP/1.1\r\nnocolon\r\n\r\n",
            b"\xff http://a/ HTTP/1.1\r\n\r\n",
        ];
        for raw in bad {
            assert!(
                parse_head(raw).is_err(),
                "{:?}",
                String::from_utf8_lossy(raw)
            );
        }
    }

    #[test]
    fn absolute_targets_split() {
        type Case<'a> = (&'a str, Result<(&'a str, u16, &'a str), ()>);
        let cases: &[Case] = &[
            ("http://a.test/x?y=1#frag", Ok(("a.test", 80, "/x?y=1"))),
            ("HTTP://A.test:8080", Ok(("a.test", 8080, "/"))),
            ("http://a.test?q", Ok(("a.test", 80, "/?q"))),
            ("http://[::1]:81/p", Ok(("::1", 81, "/p"))),
            ("https://a.test/", Err(())),
            ("/relative", Err(())),
            ("http://user:pw@a.test/", Err(())),
            ("http://:80/", Err(())),
        ];
        for (raw, want) in cases {
            let got = parse_absolute(raw).map_err(|_| ());
            let got = got
                .as_ref()
                .map(|(h, p, path)| (h.as_str(), *p, path.as_str()))
                .map_err(|_| ());
            assert_eq!(got, *want, "{raw:?}");
        }
    }

    #[test]
    fn forwarded_head_drops_hop_by_hop_and_proxy_headers() {
        let raw = b"POST http://a.test:8080/up HTTP/1.1\r\nHost: evil.test\r\nProxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\nConnection: keep-alive, X-Secret\r\nX-Secret: 1\r\nKeep-Alive: 5\r\nContent-Length: 3\r\nAccept: */*\r\n\r\n";
        let head = parse_head(raw);
        let Ok(head) = head else { panic!("{head:?}") };
        assert_eq!(
            forward_head(&head, "a.test", 8080, "/up"),
            "POST /up HTTP/1.1\r\nHost: a.test:8080\r\nContent-Length: 3\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
    }

    proptest! {
        #[test]
        fn head_parsing_never_panics(raw in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = parse_head(&raw);
        }

        #[test]
        fn absolute_parsing_never_panics(raw in "\\PC{0,80}") {
            let _ = parse_absolute(&raw);
        }
    }
}

//! The egress proxy driven from outside: a client on its unix socket speaking
//! HTTP CONNECT, absolute-form HTTP and SOCKS5 by hand, real loopback servers
//! behind it, and a static resolver so that `allowed.test` and friends reach
//! them. Every step runs under a timeout: a refusal must never be a hang.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use pretty_assertions::assert_eq;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, UnixStream};
use toolgate_sandbox::proxy::{
    ConnectionRecord, EgressPolicy, EgressProxy, Protocol, Resolver, StaticResolver, Verdict,
};

const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
const BULK_BYTES: u64 = 50 * 1024 * 1024;

/// Fails the test instead of hanging it.
async fn within<F: Future>(what: &str, f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(20), f)
        .await
        .unwrap_or_else(|_| panic!("{what} hung"))
}

/// A tiny allowlist: exact `host:port` pairs, a deny list checked first, and
/// names whose resolved addresses are refused.
struct Allowlist {
    allowed: Vec<(String, u16)>,
    denied: Vec<String>,
    refuse_resolved: Vec<String>,
}

impl EgressPolicy for Allowlist {
    fn decide(&self, host: &str, port: u16) -> Verdict {
        if self.denied.iter().any(|d| d == host) {
            Verdict::deny(format!("{host} is on the deny list"))
        } else if self.allowed.iter().any(|(h, p)| h == host && *p == port) {
            Verdict::allow(format!("{host}:{port} is on the allow list"))
        } else if self.allowed.iter().any(|(h, _)| h == host) {
            Verdict::deny(format!("port {port} is not allowed for {host}"))
        } else {
            Verdict::deny(format!("{host} is not on the allow list"))
        }
    }

    fn check_resolved(&self, host: &str, addrs: &[IpAddr]) -> Result<(), String> {
        match self.refuse_resolved.iter().any(|h| h == host) {
            true => Err(format!("{host} resolves to private address {}", addrs[0])),
            false => Ok(()),
        }
    }
}

/// A static resolver that remembers every name it was asked about.
struct WatchedResolver {
    inner: StaticResolver,
    asked: Mutex<Vec<String>>,
}

#[async_trait]
impl Resolver for WatchedResolver {
    async fn resolve(&self, host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
        self.asked.lock().unwrap().push(host.to_string());
        self.inner.resolve(host, port).await
    }
}

/// The bytes of the bulk stream at each offset: a splitmix64 sequence, so
/// any loss, duplication or reordering shows up at its offset.
fn bulk_word(index: u64) -> [u8; 8] {
    let mut z = index.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)).to_le_bytes()
}

struct Servers {
    echo: u16,
    echo6: u16,
    http: u16,
    bulk: u16,
    closed: u16,
    http_requests: Arc<Mutex<Vec<String>>>,
}

async fn echo_server(ip: IpAddr) -> u16 {
    let listener = TcpListener::bind((ip, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut r, mut w) = stream.into_split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
                let _ = w.shutdown().await;
            });
        }
    });
    port
}

async fn start_servers() -> Servers {
    let echo = echo_server(LOOPBACK).await;
    let echo6 = echo_server(IpAddr::V6(Ipv6Addr::LOCALHOST)).await;

    let http_requests = Arc::new(Mutex::new(Vec::new()));
    let listener = TcpListener::bind((LOOPBACK, 0)).await.unwrap();
    let http = listener.local_addr().unwrap().port();
    let seen = Arc::clone(&http_requests);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let seen = Arc::clone(&seen);
            tokio::spawn(async move {
                let head = read_head(&mut stream).await;
                let path = head.split(' ').nth(1).unwrap_or_default().to_string();
                seen.lock().unwrap().push(head);
                let body = format!("hello from {path}");
                let response = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
            });
        }
    });

    let listener = TcpListener::bind((LOOPBACK, 0)).await.unwrap();
    let bulk = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut block = Vec::with_capacity(64 * 1024);
                for start in (0..BULK_BYTES / 8).step_by(8 * 1024) {
                    block.clear();
                    for word in start..start + 8 * 1024 {
                        block.extend_from_slice(&bulk_word(word));
                    }
                    if stream.write_all(&block).await.is_err() {
                        return;
                    }
                }
                let _ = stream.shutdown().await;
            });
        }
    });

    // A port with nothing listening: bind, note it, close.
    let closed = TcpListener::bind((LOOPBACK, 0))
        .await
        .unwrap()
        .local_addr()
        .unwrap()
        .port();

    Servers {
        echo,
        echo6,
        http,
        bulk,
        closed,
        http_requests,
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    socket: PathBuf,
    proxy: Option<EgressProxy>,
    servers: Servers,
    records: Arc<Mutex<Vec<ConnectionRecord>>>,
    resolver: Arc<WatchedResolver>,
}

impl Fixture {
    async fn start() -> Fixture {
        let servers = start_servers().await;
        let mut allowed: Vec<(String, u16)> =
            [servers.echo, servers.http, servers.bulk, servers.closed]
                .into_iter()
                .map(|port| ("allowed.test".to_string(), port))
                .collect();
        allowed.push(("127.0.0.1".into(), servers.echo));
        allowed.push(("::1".into(), servers.echo6));
        allowed.push(("internal.test".into(), servers.echo));
        allowed.push(("nowhere.test".into(), servers.echo));
        let policy = Allowlist {
            allowed,
            denied: vec!["denied.test".into()],
            refuse_resolved: vec!["internal.test".into()],
        };
        let inner = [
            "allowed.test",
            "denied.test",
            "unlisted.test",
            "internal.test",
        ]
        .into_iter()
        .fold(StaticResolver::new(), |r, name| r.with(name, [LOOPBACK]));
        let resolver = Arc::new(WatchedResolver {
            inner,
            asked: Mutex::new(Vec::new()),
        });
        let records = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&records);
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("egress.sock");
        let proxy = EgressProxy::bind(
            &socket,
            Arc::new(policy),
            Arc::clone(&resolver) as Arc<dyn Resolver>,
            Arc::new(move |record| sink.lock().unwrap().push(record)),
        )
        .unwrap();
        Fixture {
            _dir: dir,
            socket,
            proxy: Some(proxy),
            servers,
            records,
            resolver,
        }
    }

    async fn client(&self) -> UnixStream {
        UnixStream::connect(&self.socket).await.unwrap()
    }

    /// Waits until `n` records have arrived and takes them, in arrival order.
    async fn records(&self, n: usize) -> Vec<ConnectionRecord> {
        within("waiting for records", async {
            loop {
                {
                    let mut records = self.records.lock().unwrap();
                    if records.len() >= n {
                        return std::mem::take(&mut *records);
                    }
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
    }
}

async fn read_head<S: AsyncReadExt + Unpin>(stream: &mut S) -> String {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read_u8().await {
            Ok(b) => head.push(b),
            Err(_) => break,
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

async fn read_rest(stream: &mut UnixStream) -> String {
    let mut rest = Vec::new();
    let _ = stream.read_to_end(&mut rest).await;
    String::from_utf8_lossy(&rest).into_owned()
}

/// Sends `CONNECT authority` and returns the response head and the stream.
async fn http_connect(fixture: &Fixture, authority: &str) -> (String, UnixStream) {
    let mut stream = fixture.client().await;
    let request = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let head = read_head(&mut stream).await;
    (head, stream)
}

/// Sends one raw request and returns everything the proxy answered.
async fn http_exchange(fixture: &Fixture, request: &[u8]) -> String {
    let mut stream = fixture.client().await;
    stream.write_all(request).await.unwrap();
    read_rest(&mut stream).await
}

/// SOCKS5 address as it goes on the wire: type byte, then the address.
fn socks_domain(name: &str) -> Vec<u8> {
    let mut out = vec![0x03, name.len() as u8];
    out.extend_from_slice(name.as_bytes());
    out
}

fn socks_ip(ip: IpAddr) -> Vec<u8> {
    match ip {
        IpAddr::V4(v4) => [&[0x01][..], &v4.octets()].concat(),
        IpAddr::V6(v6) => [&[0x04][..], &v6.octets()].concat(),
    }
}

/// Runs a SOCKS5 no-auth handshake and request; returns the reply code.
async fn socks_request(
    fixture: &Fixture,
    command: u8,
    address: &[u8],
    port: u16,
) -> (u8, UnixStream) {
    let mut stream = fixture.client().await;
    stream.write_all(&[0x05, 0x01, 0x00]).await.unwrap();
    let mut choice = [0u8; 2];
    stream.read_exact(&mut choice).await.unwrap();
    assert_eq!(choice, [0x05, 0x00]);
    let mut request = vec![0x05, command, 0x00];
    request.extend_from_slice(address);
    request.extend_from_slice(&port.to_be_bytes());
    stream.write_all(&request).await.unwrap();
    let mut reply = [0u8; 10];
    stream.read_exact(&mut reply).await.unwrap();
    assert_eq!((reply[0], reply[2]), (0x05, 0x00), "reply header {reply:?}");
    (reply[1], stream)
}

async fn echo_roundtrip(stream: &mut UnixStream, message: &[u8]) {
    stream.write_all(message).await.unwrap();
    let mut back = vec![0u8; message.len()];
    stream.read_exact(&mut back).await.unwrap();
    assert_eq!(back, message);
    stream.shutdown().await.unwrap();
    assert_eq!(read_rest(stream).await, "");
}

/// A record without its duration, for whole-value comparison.
fn summary(r: &ConnectionRecord) -> (String, u16, Protocol, bool, u64, u64) {
    (
        r.host.clone(),
        r.port,
        r.protocol,
        r.allowed,
        r.bytes_up,
        r.bytes_down,
    )
}

#[tokio::test]
async fn connect_tunnel_reaches_an_allowed_host_and_is_recorded() {
    let fixture = Fixture::start().await;
    let echo = fixture.servers.echo;
    within("CONNECT", async {
        let (head, mut stream) = http_connect(&fixture, &format!("allowed.test:{echo}")).await;
        assert_eq!(head, "HTTP/1.1 200 Connection established\r\n\r\n");
        echo_roundtrip(&mut stream, b"ping through connect").await;
    })
    .await;
    let records = fixture.records(1).await;
    assert_eq!(
        records.iter().map(summary).collect::<Vec<_>>(),
        vec![(
            "allowed.test".into(),
            echo,
            Protocol::HttpConnect,
            true,
            20,
            20
        )]
    );
    assert_eq!(
        records[0].reason,
        format!("allowed.test:{echo} is on the allow list")
    );
}

#[tokio::test]
async fn absolute_form_get_is_forwarded_in_origin_form_without_proxy_credentials() {
    let fixture = Fixture::start().await;
    let port = fixture.servers.http;
    let request = format!(
        "GET http://allowed.test:{port}/path?q=1 HTTP/1.1\r\nHost: evil.test\r\nProxy-Authorization: Basic dXNlcjpodW50ZXIy\r\nProxy-Connection: keep-alive\r\nConnection: keep-alive\r\nUser-Agent: test\r\n\r\n"
    );
    let response = within("GET", http_exchange(&fixture, request.as_bytes())).await;
    assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
    assert!(
        response.ends_with("\r\n\r\nhello from /path?q=1"),
        "{response}"
    );
    let forwarded = fixture.servers.http_requests.lock().unwrap().clone();
    assert_eq!(
        forwarded,
        vec![format!(
            "GET /path?q=1 HTTP/1.1\r\nHost: allowed.test:{port}\r\nUser-Agent: test\r\nConnection: close\r\n\r\n"
        )]
    );
    let records = fixture.records(1).await;
    let up = forwarded[0].len() as u64;
    let down = response.len() as u64;
    assert_eq!(
        records.iter().map(summary).collect::<Vec<_>>(),
        vec![(
            "allowed.test".into(),
            port,
            Protocol::HttpForward,
            true,
            up,
            down
        )]
    );
}

#[tokio::test]
async fn socks5_connects_by_domain_ipv4_and_ipv6() {
    let fixture = Fixture::start().await;
    let (echo, echo6) = (fixture.servers.echo, fixture.servers.echo6);
    let cases = [
        (socks_domain("allowed.test"), echo, "allowed.test"),
        (socks_ip(LOOPBACK), echo, "127.0.0.1"),
        (socks_ip(IpAddr::V6(Ipv6Addr::LOCALHOST)), echo6, "::1"),
    ];
    for (address, port, host) in &cases {
        within(host, async {
            let (code, mut stream) = socks_request(&fixture, 0x01, address, *port).await;
            assert_eq!(code, 0x00, "{host}");
            echo_roundtrip(&mut stream, b"socks!").await;
        })
        .await;
    }
    let records = fixture.records(cases.len()).await;
    let expected: Vec<_> = cases
        .iter()
        .map(|(_, port, host)| (host.to_string(), *port, Protocol::Socks5, true, 6, 6))
        .collect();
    assert_eq!(records.iter().map(summary).collect::<Vec<_>>(), expected);
}

#[tokio::test]
async fn refusals_answer_at_once_on_every_protocol() {
    let fixture = Fixture::start().await;
    let (echo, http) = (fixture.servers.echo, fixture.servers.http);
    // (host asked, port, host recorded, reason the client must see)
    let cases = [
        (
            "denied.test",
            echo,
            "denied.test",
            "denied.test is on the deny list".to_string(),
        ),
        (
            "Denied.Test.",
            echo,
            "denied.test",
            "denied.test is on the deny list".to_string(),
        ),
        (
            "unlisted.test",
            echo,
            "unlisted.test",
            "unlisted.test is not on the allow list".to_string(),
        ),
        (
            "allowed.test",
            1,
            "allowed.test",
            "port 1 is not allowed for allowed.test".to_string(),
        ),
        (
            "internal.test",
            echo,
            "internal.test",
            "internal.test resolves to private address 127.0.0.1".to_string(),
        ),
        (
            "10.1.2.3",
            http,
            "10.1.2.3",
            "10.1.2.3 is not on the allow list".to_string(),
        ),
    ];
    let mut expected = Vec::new();
    for (asked, port, host, reason) in &cases {
        let port = *port;
        let body = format!("toolgate egress proxy refused {host}:{port}: {reason}\n");
        let (head, mut stream) =
            within(asked, http_connect(&fixture, &format!("{asked}:{port}"))).await;
        assert!(
            head.starts_with("HTTP/1.1 403 Forbidden\r\n"),
            "CONNECT {asked}: {head}"
        );
        assert_eq!(within(asked, read_rest(&mut stream)).await, body);

        let get = format!("GET http://{asked}:{port}/ HTTP/1.1\r\n\r\n");
        let response = within(asked, http_exchange(&fixture, get.as_bytes())).await;
        assert!(
            response.starts_with("HTTP/1.1 403 Forbidden\r\n"),
            "GET {asked}: {response}"
        );
        assert!(response.ends_with(&body), "GET {asked}: {response}");

        let (code, mut stream) = within(
            asked,
            socks_request(&fixture, 0x01, &socks_domain(asked), port),
        )
        .await;
        assert_eq!(code, 0x02, "SOCKS5 {asked}");
        assert_eq!(within(asked, read_rest(&mut stream)).await, "");

        for protocol in [
            Protocol::HttpConnect,
            Protocol::HttpForward,
            Protocol::Socks5,
        ] {
            expected.push((
                (host.to_string(), port, protocol, false, 0, 0),
                reason.clone(),
            ));
        }
    }
    let records = fixture.records(expected.len()).await;
    let got: Vec<_> = records
        .iter()
        .map(|r| (summary(r), r.reason.clone()))
        .collect();
    assert_eq!(got, expected);
    // Names the policy refused were never looked up: no DNS side channel.
    let asked = fixture.resolver.asked.lock().unwrap().clone();
    assert_eq!(asked, vec!["internal.test"; 3]);
}

#[tokio::test]
async fn unreachable_and_unresolvable_upstreams_fail_fast() {
    let fixture = Fixture::start().await;
    let closed = fixture.servers.closed;
    let echo = fixture.servers.echo;

    let (head, _) = within(
        "CONNECT",
        http_connect(&fixture, &format!("allowed.test:{closed}")),
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 502 Bad Gateway\r\n"), "{head}");
    let get = format!("GET http://nowhere.test:{echo}/ HTTP/1.1\r\n\r\n");
    let response = within("GET", http_exchange(&fixture, get.as_bytes())).await;
    assert!(
        response.starts_with("HTTP/1.1 502 Bad Gateway\r\n"),
        "{response}"
    );
    assert!(
        response.contains("cannot resolve nowhere.test"),
        "{response}"
    );

    let (code, _) = within(
        "SOCKS",
        socks_request(&fixture, 0x01, &socks_domain("allowed.test"), closed),
    )
    .await;
    assert_eq!(code, 0x05, "connection refused");
    let (code, _) = within(
        "SOCKS",
        socks_request(&fixture, 0x01, &socks_domain("nowhere.test"), echo),
    )
    .await;
    assert_eq!(code, 0x04, "host unreachable");

    let records = fixture.records(4).await;
    assert!(
        records.iter().all(|r| r.bytes_up == 0 && r.bytes_down == 0),
        "{records:#?}"
    );
    assert!(
        records[0]
            .reason
            .starts_with(&format!("cannot connect to allowed.test:{closed}")),
        "{records:#?}"
    );
}

#[tokio::test]
async fn malformed_http_requests_get_4xx() {
    let fixture = Fixture::start().await;
    let echo = fixture.servers.echo;
    let oversized = format!(
        "GET http://allowed.test/ HTTP/1.1\r\nX: {}\r\n\r\n",
        "a".repeat(20_000)
    );
    let cases: Vec<(String, &str)> = vec![
        ("HELLO\r\n\r\n".into(), "400 Bad Request"),
        (
            "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n".into(),
            "400 Bad Request",
        ),
        (
            "GET https://allowed.test/ HTTP/1.1\r\n\r\n".into(),
            "400 Bad Request",
        ),
        (
            "GET http://u:p@allowed.test/ HTTP/1.1\r\n\r\n".into(),
            "400 Bad Request",
        ),
        (
            "CONNECT allowed.test HTTP/1.1\r\n\r\n".into(),
            "400 Bad Request",
        ),
        (
            format!("CONNECT ::1:{echo} HTTP/1.1\r\n\r\n"),
            "400 Bad Request",
        ),
        (
            format!("CONNECT 127.1:{echo} HTTP/1.1\r\n\r\n"),
            "400 Bad Request",
        ),
        (
            format!("CONNECT 2130706433:{echo} HTTP/1.1\r\n\r\n"),
            "400 Bad Request",
        ),
        (
            format!("CONNECT allowed.test:{echo} HTTP/1.1\r\nBad Header: x\r\n\r\n"),
            "400 Bad Request",
        ),
        (oversized, "431 Request Header Fields Too Large"),
    ];
    for (request, status) in &cases {
        let response = within(request, http_exchange(&fixture, request.as_bytes())).await;
        assert!(
            response.starts_with(&format!("HTTP/1.1 {status}\r\n")),
            "{request:.60?} -> {response}"
        );
    }
    let records = fixture.records(cases.len()).await;
    assert!(records.iter().all(|r| !r.allowed), "{records:#?}");
}

#[tokio::test]
async fn socks5_refuses_other_commands_address_types_and_methods() {
    let fixture = Fixture::start().await;
    let echo = fixture.servers.echo;
    let cases: [(u8, Vec<u8>, u8); 4] = [
        (0x02, socks_domain("allowed.test"), 0x07), // BIND
        (0x03, socks_domain("allowed.test"), 0x07), // UDP ASSOCIATE
        (0x01, vec![0x09, 1, 2, 3, 4], 0x08),       // unknown address type
        (0x01, socks_domain("127.1"), 0x02), // numeric name getaddrinfo would read as loopback
    ];
    for (command, address, want) in &cases {
        let (code, _) = within("SOCKS", socks_request(&fixture, *command, address, echo)).await;
        assert_eq!(code, *want, "command {command} address {address:?}");
    }
    // Only username/password offered: no acceptable method.
    let mut stream = fixture.client().await;
    stream.write_all(&[0x05, 0x01, 0x02]).await.unwrap();
    let mut answer = Vec::new();
    within("SOCKS auth", stream.read_to_end(&mut answer))
        .await
        .unwrap();
    assert_eq!(answer, [0x05, 0xFF]);
    let records = fixture.records(cases.len() + 1).await;
    assert!(
        records
            .iter()
            .all(|r| !r.allowed && r.protocol == Protocol::Socks5),
        "{records:#?}"
    );
}

#[tokio::test]
async fn fifty_megabytes_through_connect_arrive_intact() {
    let fixture = Fixture::start().await;
    let bulk = fixture.servers.bulk;
    let received = within("bulk transfer", async {
        let (head, mut stream) = http_connect(&fixture, &format!("allowed.test:{bulk}")).await;
        assert_eq!(head, "HTTP/1.1 200 Connection established\r\n\r\n");
        let mut buf = vec![0u8; 256 * 1024];
        let mut offset = 0u64;
        let mut expected = Vec::with_capacity(buf.len() + 8);
        loop {
            let n = stream.read(&mut buf).await.unwrap();
            if n == 0 {
                break offset;
            }
            // Compare against the generator at this offset, word-aligned.
            let first_word = offset / 8;
            let skip = (offset % 8) as usize;
            expected.clear();
            for word in first_word..=(offset + n as u64).div_ceil(8) {
                expected.extend_from_slice(&bulk_word(word));
            }
            assert!(
                buf[..n] == expected[skip..skip + n],
                "mismatch near byte {offset}"
            );
            offset += n as u64;
        }
    })
    .await;
    assert_eq!(received, BULK_BYTES);
    let records = fixture.records(1).await;
    assert_eq!(
        records.iter().map(summary).collect::<Vec<_>>(),
        vec![(
            "allowed.test".into(),
            bulk,
            Protocol::HttpConnect,
            true,
            0,
            BULK_BYTES
        )]
    );
}

#[tokio::test]
async fn shutdown_removes_the_socket_and_ends_open_tunnels() {
    let mut fixture = Fixture::start().await;
    let echo = fixture.servers.echo;
    let (head, mut tunnel) = within(
        "CONNECT",
        http_connect(&fixture, &format!("allowed.test:{echo}")),
    )
    .await;
    assert_eq!(head, "HTTP/1.1 200 Connection established\r\n\r\n");
    tunnel.write_all(b"abc").await.unwrap();
    let mut back = [0u8; 3];
    within("echo", tunnel.read_exact(&mut back)).await.unwrap();

    within("shutdown", fixture.proxy.take().unwrap().shutdown()).await;
    assert!(!fixture.socket.exists(), "socket file left behind");
    assert!(UnixStream::connect(&fixture.socket).await.is_err());
    assert_eq!(within("tunnel close", read_rest(&mut tunnel)).await, "");
    let records = fixture.records(1).await;
    assert_eq!(
        records.iter().map(summary).collect::<Vec<_>>(),
        vec![(
            "allowed.test".into(),
            echo,
            Protocol::HttpConnect,
            true,
            3,
            3
        )]
    );
}

#[tokio::test]
async fn bind_makes_a_private_socket_and_never_reuses_a_path() {
    let fixture = Fixture::start().await;
    let mode = std::fs::metadata(&fixture.socket)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    // Only the socket: the staging directory is gone.
    let entries: Vec<_> = std::fs::read_dir(fixture.socket.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(entries, vec![std::ffi::OsString::from("egress.sock")]);

    let bind = |path: &Path| {
        EgressProxy::bind(
            path,
            Arc::new(Allowlist {
                allowed: vec![],
                denied: vec![],
                refuse_resolved: vec![],
            }),
            Arc::new(StaticResolver::new()),
            Arc::new(|_| {}),
        )
    };
    let err = bind(&fixture.socket).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists);
    assert!(err.to_string().contains("already exists"), "{err}");
    let file = fixture.socket.with_file_name("plain-file");
    std::fs::write(&file, "x").unwrap();
    assert_eq!(
        bind(&file).unwrap_err().kind(),
        std::io::ErrorKind::AlreadyExists
    );
    // The existing proxy still serves.
    let (head, _) = within(
        "CONNECT",
        http_connect(&fixture, &format!("allowed.test:{}", fixture.servers.echo)),
    )
    .await;
    assert_eq!(head, "HTTP/1.1 200 Connection established\r\n\r\n");
}

#[tokio::test]
async fn the_proxy_enforces_egress_rules_parsed_from_configuration() {
    // The real rules, not a test policy: deny first, wildcards for
    // subdomains only, and a name that resolves to loopback passes only
    // when it is listed by its exact name.
    use toolgate_sandbox::egress::EgressRules;
    let rules = EgressRules::new(&["allowed.test", "*.apex.test"], &["bad.apex.test"]).unwrap();
    let loopback = IpAddr::from([127, 0, 0, 1]);
    let port = echo_server(loopback).await;
    let mut resolver = StaticResolver::new();
    for name in [
        "allowed.test",
        "sub.apex.test",
        "bad.apex.test",
        "apex.test",
    ] {
        resolver = resolver.with(name, [loopback]);
    }
    let dir = tempfile::tempdir().unwrap();
    let proxy = EgressProxy::bind(
        dir.path().join("egress.sock"),
        Arc::new(rules),
        Arc::new(resolver),
        Arc::new(|_| {}),
    )
    .unwrap();
    let head = |host: &'static str| {
        let path = proxy.path().to_owned();
        async move {
            let mut stream = UnixStream::connect(&path).await.unwrap();
            let request = format!("CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}\r\n\r\n");
            stream.write_all(request.as_bytes()).await.unwrap();
            let head = read_head(&mut stream).await;
            head.lines().next().unwrap_or_default().to_owned()
        }
    };
    assert!(
        within("allowed", head("allowed.test"))
            .await
            .contains(" 200 ")
    );
    let refused = [
        ("bad.apex.test", "deny is checked first"),
        ("apex.test", "a wildcard never covers its apex"),
        (
            "sub.apex.test",
            "listed through a wildcard, resolving to loopback",
        ),
    ];
    for (host, why) in refused {
        let status = within(host, head(host)).await;
        assert!(status.contains(" 403 "), "{host} ({why}): {status}");
    }
}

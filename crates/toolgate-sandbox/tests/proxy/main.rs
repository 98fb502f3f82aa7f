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

mod lifecycle;
mod reach;
mod refuse;

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

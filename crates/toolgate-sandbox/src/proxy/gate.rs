//! What both protocols share: host normalisation, the policy gate in front of
//! every upstream connection, byte counting and the per-connection record.

use std::io;
use std::net::{IpAddr, Ipv6Addr};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpStream, UnixStream};

use super::{ConnectionRecord, EgressPolicy, EventSink, Protocol, Resolver};

/// How long a client may take to send its request head or SOCKS handshake.
/// Stops idle clients from holding tasks forever (slowloris).
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long resolution may take.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one TCP connect attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// What every connection task needs.
pub(crate) struct Shared {
    pub(crate) policy: Arc<dyn EgressPolicy>,
    pub(crate) resolver: Arc<dyn Resolver>,
    pub(crate) events: EventSink,
}

/// Why no upstream connection was made.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// The policy said no, by name or by resolved address.
    Denied(String),
    /// The name did not resolve.
    Unresolvable(String),
    /// No address accepted the connection.
    Unreachable { reason: String, kind: io::ErrorKind },
}

impl Refusal {
    pub(crate) fn reason(&self) -> &str {
        match self {
            Refusal::Denied(r) | Refusal::Unresolvable(r) => r,
            Refusal::Unreachable { reason, .. } => reason,
        }
    }
}

/// Lowercases and checks a host name or IP literal; returns the canonical form.
pub(crate) fn normalise_host(raw: &str) -> Result<String, String> {
    if let Ok(ip) = raw.parse::<IpAddr>() {
        // "::ffff:127.0.0.1" is 127.0.0.1 on the wire; the policy sees the IPv4
        // form so an IPv4 rule (or a loopback check) cannot be sidestepped.
        return Ok(ip.to_canonical().to_string());
    }
    // "denied.test." is the same DNS name as "denied.test"; a matcher that
    // compares strings would let the dotted form through.
    let host = raw.strip_suffix('.').unwrap_or(raw).to_ascii_lowercase();
    if host.is_empty() || host.len() > 253 {
        return Err(format!("{raw:?} is not a valid host name"));
    }
    for label in host.split('.') {
        let valid = !label.is_empty()
            && label.len() <= 63
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !valid {
            return Err(format!("{raw:?} is not a valid host name"));
        }
    }
    // getaddrinfo reads "127.1", "2130706433" and "0x7f.1" as IPv4 addresses,
    // so a policy that saw them as names could be walked around to loopback.
    // A real domain never ends in a numeric label (WHATWG URL "ends in a number").
    let last = host.rsplit('.').next().unwrap_or(&host);
    let hex = last
        .strip_prefix("0x")
        .is_some_and(|h| h.bytes().all(|b| b.is_ascii_hexdigit()));
    if last.bytes().all(|b| b.is_ascii_digit()) || hex {
        return Err(format!(
            "{raw:?} looks like a numeric IP address; write it as a dotted quad or [IPv6]"
        ));
    }
    Ok(host)
}

/// Parses `host:port`, `[v6]:port` or (with a default port) a bare host.
pub(crate) fn parse_authority(s: &str, default_port: Option<u16>) -> Result<(String, u16), String> {
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let (v6, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("{s:?}: missing ']'"))?;
        let ip: Ipv6Addr = v6
            .parse()
            .map_err(|_| format!("{s:?}: {v6:?} is not an IPv6 address"))?;
        let port = match after {
            "" => None,
            p => Some(
                p.strip_prefix(':')
                    .ok_or_else(|| format!("{s:?}: expected ':port' after ']'"))?,
            ),
        };
        (IpAddr::V6(ip).to_canonical().to_string(), port)
    } else {
        let (host, port) = match s.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        };
        if host.contains(':') {
            return Err(format!(
                "{s:?}: write IPv6 addresses in brackets, [addr]:port"
            ));
        }
        (normalise_host(host)?, port)
    };
    let port = match (port, default_port) {
        (Some(p), _) => parse_port(p).ok_or_else(|| format!("{s:?}: {p:?} is not a port"))?,
        (None, Some(d)) => d,
        (None, None) => return Err(format!("{s:?}: a port is required (host:port)")),
    };
    Ok((host, port))
}

fn parse_port(p: &str) -> Option<u16> {
    // u16::from_str accepts "+80"; only plain digits are a port.
    if p.is_empty() || p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    p.parse().ok().filter(|&n| n != 0)
}

/// `host` for a Host header or a message: IPv6 in brackets.
pub(crate) fn display_host(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

/// Runs the gate and connects. The name is decided on before it is resolved,
/// so an unlisted name never reaches DNS (no exfiltration through lookups),
/// and the connect goes to exactly the addresses `check_resolved` saw, never
/// to a second lookup (DNS rebinding).
pub(crate) async fn open_upstream(
    shared: &Shared,
    record: &mut RecordGuard,
    host: &str,
    port: u16,
) -> Result<Counted<TcpStream>, Refusal> {
    record.host = host.to_string();
    record.port = port;
    let verdict = shared.policy.decide(host, port);
    record.reason = verdict.reason.clone();
    if !verdict.allowed {
        return Err(Refusal::Denied(verdict.reason));
    }
    let ips: Vec<IpAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![ip],
        Err(_) => {
            let resolved =
                tokio::time::timeout(RESOLVE_TIMEOUT, shared.resolver.resolve(host, port))
                    .await
                    .unwrap_or_else(|_| Err(io::Error::new(io::ErrorKind::TimedOut, "timed out")));
            let mut ips: Vec<IpAddr> = match resolved {
                Ok(addrs) => addrs.iter().map(|a| a.ip().to_canonical()).collect(),
                Err(e) => {
                    return Err(
                        record.fail(Refusal::Unresolvable(format!("cannot resolve {host}: {e}")))
                    );
                }
            };
            ips.dedup();
            if ips.is_empty() {
                return Err(record.fail(Refusal::Unresolvable(format!(
                    "{host} resolved to no addresses"
                ))));
            }
            ips
        }
    };
    if let Err(reason) = shared.policy.check_resolved(host, &ips) {
        return Err(record.fail(Refusal::Denied(reason)));
    }
    record.allowed = true;
    let mut last = io::Error::new(io::ErrorKind::NotFound, "no addresses");
    for ip in ips {
        // The resolver's port is ignored: only the port the policy decided on is dialled.
        let attempt = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect((ip, port))).await;
        match attempt {
            Ok(Ok(stream)) => {
                let _ = stream.set_nodelay(true);
                return Ok(Counted {
                    inner: stream,
                    up: Arc::clone(&record.up),
                    down: Arc::clone(&record.down),
                });
            }
            Ok(Err(e)) => last = e,
            Err(_) => last = io::Error::new(io::ErrorKind::TimedOut, "connect timed out"),
        }
    }
    Err(record.fail(Refusal::Unreachable {
        reason: format!("cannot connect to {}:{port}: {last}", display_host(host)),
        kind: last.kind(),
    }))
}

/// Copies both ways until both sides close; `pending` (bytes the client sent
/// after its request head) goes upstream first.
pub(crate) async fn splice(
    client: &mut UnixStream,
    upstream: &mut Counted<TcpStream>,
    pending: &[u8],
    record: &mut RecordGuard,
) {
    let result = async {
        if !pending.is_empty() {
            upstream.write_all(pending).await?;
        }
        let tcp = &upstream.inner;
        let client: &UnixStream = client;
        tokio::try_join!(
            super::relay::one_way(client, tcp, &upstream.up),
            super::relay::one_way(tcp, client, &upstream.down),
        )
        .map(drop)
    }
    .await;
    if let Err(e) = result {
        record.reason = format!("{}; ended with error: {e}", record.reason);
    }
}

/// The record of one connection, emitted exactly once when dropped, so that
/// every exit path (errors, cancellation at shutdown) is audited.
pub(crate) struct RecordGuard {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) protocol: Protocol,
    pub(crate) allowed: bool,
    pub(crate) reason: String,
    up: Arc<AtomicU64>,
    down: Arc<AtomicU64>,
    started: Instant,
    events: EventSink,
}

impl RecordGuard {
    pub(crate) fn new(protocol: Protocol, started: Instant, events: EventSink) -> Self {
        Self {
            host: String::new(),
            port: 0,
            protocol,
            allowed: false,
            reason: String::new(),
            up: Arc::default(),
            down: Arc::default(),
            started,
            events,
        }
    }

    /// Records why the connection is refused and hands the refusal back.
    pub(crate) fn fail(&mut self, refusal: Refusal) -> Refusal {
        self.reason = refusal.reason().to_string();
        refusal
    }
}

impl Drop for RecordGuard {
    fn drop(&mut self) {
        (self.events)(ConnectionRecord {
            host: std::mem::take(&mut self.host),
            port: self.port,
            protocol: self.protocol,
            allowed: self.allowed,
            reason: std::mem::take(&mut self.reason),
            bytes_up: self.up.load(Ordering::Relaxed),
            bytes_down: self.down.load(Ordering::Relaxed),
            duration: self.started.elapsed(),
        });
    }
}

/// The upstream stream, counting what is written to it and read from it.
pub(crate) struct Counted<S> {
    inner: S,
    up: Arc<AtomicU64>,
    down: Arc<AtomicU64>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Counted<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let poll = Pin::new(&mut this.inner).poll_read(cx, buf);
        let read = buf.filled().len().saturating_sub(before);
        this.down.fetch_add(read as u64, Ordering::Relaxed);
        poll
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counted<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = &poll {
            this.up.fetch_add(*n as u64, Ordering::Relaxed);
        }
        poll
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use proptest::prelude::*;

    #[test]
    fn hosts_normalise_or_fail() {
        let cases: &[(&str, Result<&str, ()>)] = &[
            ("Allowed.Test", Ok("allowed.test")),
            ("denied.test.", Ok("denied.test")),
            ("127.0.0.1", Ok("127.0.0.1")),
            ("::1", Ok("::1")),
            ("0:0:0:0:0:0:0:1", Ok("::1")),
            ("::ffff:127.0.0.1", Ok("127.0.0.1")),
            ("a_b.example", Ok("a_b.example")),
            ("127.1", Err(())),
            ("2130706433", Err(())),
            ("0x7f.1", Err(())),
            ("evil.0x7f", Err(())),
            ("", Err(())),
            (".", Err(())),
            ("a..b", Err(())),
            ("a b", Err(())),
            ("exa\u{e9}mple.com", Err(())),
            ("a/b", Err(())),
        ];
        for (raw, want) in cases {
            let got = normalise_host(raw).map_err(|_| ());
            assert_eq!(got.as_deref(), want.as_deref(), "{raw:?}");
        }
    }

    #[test]
    fn authorities_parse_or_fail() {
        type Case<'a> = (&'a str, Option<u16>, Result<(&'a str, u16), ()>);
        let cases: &[Case] = &[
            ("allowed.test:443", None, Ok(("allowed.test", 443))),
            ("allowed.test", Some(80), Ok(("allowed.test", 80))),
            ("allowed.test", None, Err(())),
            ("[::1]:8080", None, Ok(("::1", 8080))),
            ("[::ffff:7f00:1]:80", None, Ok(("127.0.0.1", 80))),
            ("[::1]", Some(80), Ok(("::1", 80))),
            ("::1:80", None, Err(())),
            ("[::1]x", None, Err(())),
            ("[nope]:1", None, Err(())),
            ("host:0", None, Err(())),
            ("host:+80", None, Err(())),
            ("host:65536", None, Err(())),
            ("host:", None, Err(())),
        ];
        for (raw, default, want) in cases {
            let got = parse_authority(raw, *default).map_err(|_| ());
            let got = got.as_ref().map(|(h, p)| (h.as_str(), *p)).map_err(|_| ());
            assert_eq!(got, *want, "{raw:?}");
        }
    }

    proptest! {
        #[test]
        fn normalised_hosts_are_fixed_points(raw in "[a-zA-Z0-9._:-]{0,40}") {
            if let Ok(host) = normalise_host(&raw) {
                prop_assert_eq!(normalise_host(&host), Ok(host.clone()));
            }
        }

        #[test]
        fn authority_parsing_never_panics(raw in "\\PC{0,60}") {
            let _ = parse_authority(&raw, Some(80));
        }
    }
}

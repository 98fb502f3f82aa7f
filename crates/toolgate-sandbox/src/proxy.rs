//! toolgate's egress proxy: the only way out of a sandbox in `proxy` network
//! mode.
//!
//! One unix socket serves both protocols; the first byte tells them apart
//! (0x05 opens a SOCKS5 greeting, anything else is HTTP). Inside the sandbox
//! the stage-2 helper forwards 127.0.0.1:3128 and 127.0.0.1:1080 to it.
//!
//! Every request goes through the same gate, in this order:
//! [`EgressPolicy::decide`] on the name the client asked for, then the
//! [`Resolver`], then [`EgressPolicy::check_resolved`] on the addresses, then
//! a TCP connect to exactly those addresses. Each connection yields one
//! [`ConnectionRecord`] when it ends.
//!
//! This module is the mechanism, not the policy: which hosts are allowed is
//! the [`EgressPolicy`] implementation's business.

mod gate;
mod http;
mod listener;
mod relay;
mod socks;

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

pub use listener::EgressProxy;

/// What a policy says about one `host:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Whether the connection may proceed to resolution.
    pub allowed: bool,
    /// Why, in words a user can act on; shown to the sandboxed command on refusal.
    pub reason: String,
}

impl Verdict {
    /// An allowing verdict.
    pub fn allow(reason: impl Into<String>) -> Self {
        Self {
            allowed: true,
            reason: reason.into(),
        }
    }

    /// A refusing verdict.
    pub fn deny(reason: impl Into<String>) -> Self {
        Self {
            allowed: false,
            reason: reason.into(),
        }
    }
}

/// The rules the proxy enforces.
pub trait EgressPolicy: Send + Sync {
    /// Decides on the name (or IP literal) the client asked for, before any
    /// DNS lookup. IP literals come in canonical form (IPv6 without brackets,
    /// IPv4-mapped IPv6 as IPv4); names lowercased, without a trailing dot,
    /// never ending in a numeric label.
    fn decide(&self, host: &str, port: u16) -> Verdict;

    /// Checks what an allowed name resolved to (or the literal address,
    /// canonical as above); `Err(reason)` refuses the connection. The proxy
    /// connects only to these addresses.
    fn check_resolved(&self, host: &str, addrs: &[IpAddr]) -> Result<(), String>;
}

/// Turns an allowed name into addresses. Only the IPs are used: the proxy
/// always connects to the port the policy decided on.
#[async_trait]
pub trait Resolver: Send + Sync {
    /// Resolves `host`; an empty list counts as a failure.
    async fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>>;
}

/// The host's resolver (`getaddrinfo` via tokio).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

#[async_trait]
impl Resolver for SystemResolver {
    async fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        Ok(tokio::net::lookup_host((host, port)).await?.collect())
    }
}

/// A fixed table of names, for tests and for hosts pinned by configuration.
#[derive(Debug, Clone, Default)]
pub struct StaticResolver {
    names: HashMap<String, Vec<IpAddr>>,
}

impl StaticResolver {
    /// An empty table: every name fails to resolve.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) `name`; matching is case-insensitive.
    pub fn with(mut self, name: &str, addrs: impl IntoIterator<Item = IpAddr>) -> Self {
        self.names
            .insert(name.to_ascii_lowercase(), addrs.into_iter().collect());
        self
    }
}

#[async_trait]
impl Resolver for StaticResolver {
    async fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        match self.names.get(&host.to_ascii_lowercase()) {
            Some(addrs) => Ok(addrs.iter().map(|ip| SocketAddr::new(*ip, port)).collect()),
            None => Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{host} is not in the static resolver's table"),
            )),
        }
    }
}

/// How a connection reached the proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Protocol {
    /// `CONNECT host:port` (TLS and anything else tunnelled).
    HttpConnect,
    /// Plain HTTP in absolute form, forwarded by the proxy.
    HttpForward,
    /// SOCKS5 CONNECT.
    Socks5,
}

impl Protocol {
    /// The stable name used in audit records.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::HttpConnect => "http-connect",
            Protocol::HttpForward => "http-forward",
            Protocol::Socks5 => "socks5",
        }
    }
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One connection through the proxy, reported once when it ends: refused ones
/// at once, allowed ones when the splice closes (or the proxy shuts down).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectionRecord {
    /// The host asked for, normalised; empty when the request could not be parsed.
    pub host: String,
    /// The port asked for; 0 when unknown.
    pub port: u16,
    /// The protocol spoken.
    pub protocol: Protocol,
    /// Whether the policy allowed it (both `decide` and `check_resolved`).
    pub allowed: bool,
    /// The policy's reason, or what went wrong.
    pub reason: String,
    /// Bytes delivered from the client to the upstream (request heads included).
    pub bytes_up: u64,
    /// Bytes received from the upstream.
    pub bytes_down: u64,
    /// From accept to close.
    pub duration: Duration,
}

/// Receives every [`ConnectionRecord`]. Called on the proxy's tasks: keep it quick.
pub type EventSink = Arc<dyn Fn(ConnectionRecord) + Send + Sync>;

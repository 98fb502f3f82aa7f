//! SOCKS5 (RFC 1928): the no-authentication method and the CONNECT command
//! only. BIND and UDP ASSOCIATE would open inbound or datagram paths the
//! policy cannot see, so they are refused.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

use super::Protocol;
use super::gate::{
    HANDSHAKE_TIMEOUT, RecordGuard, Refusal, Shared, normalise_host, open_upstream, splice,
};

const VERSION: u8 = 0x05;
const NO_AUTH: u8 = 0x00;
const NO_ACCEPTABLE_METHOD: u8 = 0xFF;
const CMD_CONNECT: u8 = 0x01;

/// Reply codes (RFC 1928 §6).
const SUCCEEDED: u8 = 0x00;
const GENERAL_FAILURE: u8 = 0x01;
const NOT_ALLOWED: u8 = 0x02;
const NETWORK_UNREACHABLE: u8 = 0x03;
const HOST_UNREACHABLE: u8 = 0x04;
const CONNECTION_REFUSED: u8 = 0x05;
const COMMAND_NOT_SUPPORTED: u8 = 0x07;
const ADDRESS_TYPE_NOT_SUPPORTED: u8 = 0x08;

/// Where the handshake stopped short of a connect.
enum Stop {
    /// Send this reply code, record this reason.
    Reply(u8, String),
    /// Nothing more to say (method refused, client gone).
    Close(String),
}

/// Serves one SOCKS5 client whose version byte has already been read.
pub(crate) async fn serve(mut client: UnixStream, shared: &Shared, started: Instant) {
    let mut record = RecordGuard::new(Protocol::Socks5, started, shared.events.clone());
    let handshake =
        tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake(&mut client, &mut record)).await;
    let stop = match handshake {
        Ok(Ok((host, port))) => match open_upstream(shared, &mut record, &host, port).await {
            Ok(mut upstream) => {
                if reply(&mut client, SUCCEEDED).await.is_ok() {
                    splice(&mut client, &mut upstream, &[], &mut record).await;
                }
                return;
            }
            Err(refusal) => {
                let code = match &refusal {
                    Refusal::Denied(_) => NOT_ALLOWED,
                    Refusal::Unresolvable(_) => HOST_UNREACHABLE,
                    Refusal::Unreachable { kind, .. } => match kind {
                        io::ErrorKind::ConnectionRefused => CONNECTION_REFUSED,
                        io::ErrorKind::NetworkUnreachable => NETWORK_UNREACHABLE,
                        _ => HOST_UNREACHABLE,
                    },
                };
                Stop::Reply(code, refusal.reason().to_string())
            }
        },
        Ok(Err(stop)) => stop,
        Err(_) => Stop::Reply(GENERAL_FAILURE, "no complete SOCKS5 request in time".into()),
    };
    match stop {
        Stop::Reply(code, reason) => {
            record.reason = reason;
            // The client may already be gone; there is no one left to tell.
            let _ = reply(&mut client, code).await;
        }
        Stop::Close(reason) => record.reason = reason,
    }
}

/// Reads the greeting and the request; returns the normalised target.
async fn handshake(
    client: &mut UnixStream,
    record: &mut RecordGuard,
) -> Result<(String, u16), Stop> {
    let gone =
        |e: io::Error| Stop::Close(format!("client closed during the SOCKS5 handshake: {e}"));
    let count = client.read_u8().await.map_err(gone)?;
    let mut methods = vec![0u8; usize::from(count)];
    client.read_exact(&mut methods).await.map_err(gone)?;
    if !methods.contains(&NO_AUTH) {
        let _ = client.write_all(&[VERSION, NO_ACCEPTABLE_METHOD]).await;
        return Err(Stop::Close(
            "client offered no acceptable method (only no-auth is supported)".into(),
        ));
    }
    client.write_all(&[VERSION, NO_AUTH]).await.map_err(gone)?;

    let mut request = [0u8; 4];
    client.read_exact(&mut request).await.map_err(gone)?;
    let [version, command, _reserved, address_type] = request;
    if version != VERSION {
        return Err(Stop::Reply(
            GENERAL_FAILURE,
            format!("SOCKS version {version} in request"),
        ));
    }
    let raw_host = match address_type {
        0x01 => {
            let mut octets = [0u8; 4];
            client.read_exact(&mut octets).await.map_err(gone)?;
            Ipv4Addr::from(octets).to_string()
        }
        0x03 => {
            let len = client.read_u8().await.map_err(gone)?;
            let mut name = vec![0u8; usize::from(len)];
            client.read_exact(&mut name).await.map_err(gone)?;
            String::from_utf8(name)
                .map_err(|_| Stop::Reply(NOT_ALLOWED, "host name is not UTF-8".into()))?
        }
        0x04 => {
            let mut octets = [0u8; 16];
            client.read_exact(&mut octets).await.map_err(gone)?;
            Ipv6Addr::from(octets).to_string()
        }
        other => {
            return Err(Stop::Reply(
                ADDRESS_TYPE_NOT_SUPPORTED,
                format!("address type {other:#04x} is not supported"),
            ));
        }
    };
    let port = client.read_u16().await.map_err(gone)?;
    record.host = raw_host.clone();
    record.port = port;
    if command != CMD_CONNECT {
        return Err(Stop::Reply(
            COMMAND_NOT_SUPPORTED,
            format!("SOCKS5 command {command:#04x} is not supported; only CONNECT is"),
        ));
    }
    let host = normalise_host(&raw_host).map_err(|e| Stop::Reply(NOT_ALLOWED, e))?;
    if port == 0 {
        return Err(Stop::Reply(
            NOT_ALLOWED,
            "port 0 is not a destination".into(),
        ));
    }
    Ok((host, port))
}

/// Sends a reply. The bound address is always 0.0.0.0:0: the proxy's own
/// outbound address is none of the sandbox's business.
async fn reply(client: &mut UnixStream, code: u8) -> io::Result<()> {
    client
        .write_all(&[VERSION, code, 0x00, 0x01, 0, 0, 0, 0, 0, 0])
        .await?;
    if code != SUCCEEDED {
        client.shutdown().await?;
    }
    Ok(())
}

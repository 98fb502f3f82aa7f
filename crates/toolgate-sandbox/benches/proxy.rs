//! The egress proxy's cost, side by side with the direct path in one run:
//! a 100 MB download from a loopback TCP server read directly and through
//! the proxy's CONNECT tunnel (throughput), and a connect plus one-byte echo
//! both ways (added latency per connection). The proxy runs on its own
//! thread and runtime, as it would beside the sandbox; client and server are
//! plain blocking sockets.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use toolgate_sandbox::proxy::{EgressPolicy, EgressProxy, StaticResolver, Verdict};

const DOWNLOAD: usize = 100 * 1024 * 1024;
const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

struct AllowAll;

impl EgressPolicy for AllowAll {
    fn decide(&self, host: &str, port: u16) -> Verdict {
        Verdict::allow(format!("{host}:{port} allowed for the benchmark"))
    }

    fn check_resolved(&self, _host: &str, _addrs: &[IpAddr]) -> Result<(), String> {
        Ok(())
    }
}

/// Serves each connection with `serve` on its own thread; returns the port.
fn server(serve: fn(TcpStream)) -> u16 {
    let listener = TcpListener::bind((LOOPBACK, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let stream = stream.unwrap();
            std::thread::spawn(move || serve(stream));
        }
    });
    port
}

fn send_download(mut stream: TcpStream) {
    let block = vec![0x5Au8; 256 * 1024];
    let mut left = DOWNLOAD;
    while left > 0 {
        let n = left.min(block.len());
        if stream.write_all(&block[..n]).is_err() {
            return;
        }
        left -= n;
    }
}

fn echo(mut stream: TcpStream) {
    stream.set_nodelay(true).unwrap();
    let mut byte = [0u8; 1];
    while stream.read_exact(&mut byte).is_ok() {
        if stream.write_all(&byte).is_err() {
            return;
        }
    }
}

/// Starts the proxy on a thread of its own and returns its socket path.
fn start_proxy(dir: &Path) -> PathBuf {
    let socket = dir.join("egress.sock");
    let path = socket.clone();
    let (ready, wait) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let resolver = StaticResolver::new().with("bulk.test", [LOOPBACK]);
            let _proxy = EgressProxy::bind(
                &path,
                Arc::new(AllowAll),
                Arc::new(resolver),
                Arc::new(|_| {}),
            )
            .unwrap();
            ready.send(()).unwrap();
            std::future::pending::<()>().await;
        });
    });
    wait.recv().unwrap();
    socket
}

fn tunnel(socket: &Path, port: u16) -> UnixStream {
    let mut stream = UnixStream::connect(socket).unwrap();
    write!(stream, "CONNECT bulk.test:{port} HTTP/1.1\r\n\r\n").unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    assert!(
        head.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    stream
}

fn drain(mut stream: impl Read) {
    let mut buf = vec![0u8; 256 * 1024];
    let mut total = 0;
    loop {
        match stream.read(&mut buf).unwrap() {
            0 => break,
            n => total += n,
        }
    }
    assert_eq!(total, DOWNLOAD);
}

fn roundtrip(mut stream: impl Read + Write) {
    let mut byte = [0u8; 1];
    stream.write_all(b"x").unwrap();
    stream.read_exact(&mut byte).unwrap();
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let socket = start_proxy(dir.path());
    let download = server(send_download);
    let echo_port = server(echo);

    let mut group = c.benchmark_group("download_100MB");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    group.throughput(Throughput::Bytes(DOWNLOAD as u64));
    group.bench_function("direct", |b| {
        b.iter(|| drain(TcpStream::connect((LOOPBACK, download)).unwrap()))
    });
    group.bench_function("proxy_connect", |b| {
        b.iter(|| drain(tunnel(&socket, download)))
    });
    group.finish();

    // Short: every iteration opens a connection, and TIME_WAIT ports add up.
    let mut group = c.benchmark_group("connect_and_echo_1B");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(1));
    group.bench_function("direct", |b| {
        b.iter(|| {
            let stream = TcpStream::connect((LOOPBACK, echo_port)).unwrap();
            stream.set_nodelay(true).unwrap();
            roundtrip(stream)
        })
    });
    group.bench_function("proxy_connect", |b| {
        b.iter(|| roundtrip(tunnel(&socket, echo_port)))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

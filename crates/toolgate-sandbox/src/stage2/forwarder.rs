//! The egress forwarder: in network mode `proxy`, the command's only road
//! out of the sandbox's empty network namespace.
//!
//! Stage 2 binds 127.0.0.1:3128 (HTTP proxy) and 127.0.0.1:1080 (SOCKS5)
//! inside the namespace and forks this process, which relays every
//! connection on either port byte for byte to the egress proxy's unix
//! socket; the proxy tells the protocols apart by the first byte. The
//! command itself is left unable to create unix sockets (seccomp), so these
//! two ports are its only way to the proxy, and the proxy's allowlist its
//! only way out.

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Shutdown, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::process::{Pid, Signal};

use super::{Stage2Args, Stage2Error, seccomp_filters};

/// Where the command finds the HTTP proxy (`HTTP_PROXY`, `HTTPS_PROXY`).
pub const HTTP_PROXY_PORT: u16 = 3128;
/// Where the command finds the SOCKS5 proxy (`ALL_PROXY`, ssh via `nc -X 5`).
pub const SOCKS_PROXY_PORT: u16 = 1080;

/// Small stacks: a thread only copies through a heap buffer, and the
/// command's address-space limit applies to this process too.
const THREAD_STACK: usize = 128 * 1024;
const COPY_BUFFER: usize = 64 * 1024;

/// Binds both ports, forks the forwarder and returns in the parent, which
/// keeps no copy of the listeners.
pub(super) fn start(socket: &Path, args: &Stage2Args) -> Result<(), Stage2Error> {
    // Bound here, before the fork, so that connections the command makes
    // right after the exec wait in the backlog instead of being refused;
    // and so that the command can never bind these ports itself to pose as
    // the proxy. std opens them close-on-exec: the command inherits neither.
    let listeners = [HTTP_PROXY_PORT, SOCKS_PROXY_PORT]
        .map(|port| {
            TcpListener::bind((Ipv4Addr::LOCALHOST, port)).map_err(|e| {
                Stage2Error::Setup(format!(
                    "cannot listen on 127.0.0.1:{port} for the egress proxy (is loopback up in the sandbox's network namespace?): {e}"
                ))
            })
        })
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    // The forwarder keeps unix sockets, which the command's filter refuses;
    // everything else the command may not do, it may not do either.
    let filter = seccomp_filters(&Stage2Args {
        allow_unix_sockets: true,
        ..args.clone()
    })?;
    let parent = rustix::process::getpid();
    // SAFETY: stage 2 is single-threaded up to here (it runs first thing in
    // `main`, before any thread or runtime exists), so the child gets a
    // consistent copy of the process and may allocate and spawn threads.
    match unsafe { libc::fork() } {
        -1 => Err(Stage2Error::Setup(format!(
            "cannot fork the egress forwarder: {}",
            io::Error::last_os_error()
        ))),
        0 => {
            let code = match forward(socket.to_owned(), listeners, &filter, parent) {
                Ok(()) => 0,
                Err(_) => 1,
            };
            // SAFETY: ends the forked child without running the parent's
            // exit handlers or flushing its stdio buffers a second time.
            unsafe { libc::_exit(code) }
        }
        _child => Ok(()),
    }
}

/// The forked child: ties its life to the command's, steps off the
/// command's stdio, filters itself, then serves until killed.
fn forward(
    socket: PathBuf,
    listeners: Vec<TcpListener>,
    filter: &[seccompiler::BpfProgram],
    parent: Pid,
) -> io::Result<()> {
    // Outliving the command would keep a door open in a namespace nobody
    // watches any more.
    rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
    if rustix::process::getppid() != Some(parent) {
        // The command ended before the death signal was armed.
        return Ok(());
    }
    // Holding the command's stdout and stderr would keep the run's output
    // open after the command ended; its stdin is not ours to read.
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")?;
    for fd in [0, 1, 2] {
        // SAFETY: dup2 onto the standard descriptors, which this process
        // owns; the Rust std handles keep pointing at valid descriptors.
        if unsafe { libc::dup2(std::os::fd::AsRawFd::as_raw_fd(&null), fd) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    drop(null);
    // A peer that hangs up mid-write must end one relay, not the forwarder.
    // SAFETY: sets a signal disposition; no handler code is involved.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    for program in filter {
        seccompiler::apply_filter(program).map_err(io::Error::other)?;
    }
    let socket = Arc::new(socket);
    let mut acceptors = Vec::new();
    for listener in listeners {
        let socket = Arc::clone(&socket);
        acceptors.push(spawn(move || accept_loop(&listener, &socket))?);
    }
    for acceptor in acceptors {
        let _ = acceptor.join();
    }
    Ok(())
}

fn spawn<F: FnOnce() + Send + 'static>(f: F) -> io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .stack_size(THREAD_STACK)
        .spawn(f)
}

fn accept_loop(listener: &TcpListener, socket: &Arc<PathBuf>) {
    for client in listener.incoming() {
        let Ok(client) = client else {
            // Out of descriptors or threads: give the backlog a moment.
            std::thread::sleep(std::time::Duration::from_millis(20));
            continue;
        };
        let socket = Arc::clone(socket);
        // A thread that cannot start drops the client: it sees a reset.
        let _ = spawn(move || relay(client, &socket));
    }
}

/// Copies both ways until each side is done, passing half-closes on.
fn relay(client: TcpStream, socket: &Path) {
    let Ok(upstream) = UnixStream::connect(socket) else {
        return;
    };
    let (Ok(client_reader), Ok(upstream_writer)) = (client.try_clone(), upstream.try_clone())
    else {
        return;
    };
    let up = spawn(move || {
        let _ = pump(&client_reader, &upstream_writer);
        let _ = upstream_writer.shutdown(Shutdown::Write);
    });
    let Ok(up) = up else {
        return;
    };
    let _ = pump(&upstream, &client);
    let _ = client.shutdown(Shutdown::Write);
    let _ = up.join();
}

fn pump(mut from: impl Read, mut to: impl Write) -> io::Result<u64> {
    let mut buffer = vec![0u8; COPY_BUFFER];
    let mut total = 0u64;
    loop {
        let n = match from.read(&mut buffer) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        to.write_all(&buffer[..n])?;
        total += n as u64;
    }
}

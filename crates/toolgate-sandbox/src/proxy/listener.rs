//! The unix socket, its accept loop and the per-connection protocol sniff.

use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::oneshot;
use tokio::task::{JoinHandle, JoinSet};

use super::gate::{HANDSHAKE_TIMEOUT, Shared};
use super::{EgressPolicy, EventSink, Resolver, http, socks};

/// The first byte of a SOCKS5 greeting; no HTTP method starts with it.
const SOCKS5_VERSION: u8 = 0x05;

/// A running proxy. Stops accepting, ends every open connection and removes
/// its socket when dropped or on [`EgressProxy::shutdown`].
#[derive(Debug)]
pub struct EgressProxy {
    path: PathBuf,
    /// The socket's (device, inode), so cleanup never removes a file that
    /// someone else put at the path later.
    identity: (u64, u64),
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl EgressProxy {
    /// Listens on a new unix socket at `path` (mode 0600) and serves HTTP
    /// proxy requests and SOCKS5 on it. Must be called inside a tokio runtime.
    ///
    /// Fails if anything exists at `path`: taking over an existing socket or
    /// file could hand another process's clients to us, or ours to it.
    pub fn bind(
        path: impl AsRef<Path>,
        policy: Arc<dyn EgressPolicy>,
        resolver: Arc<dyn Resolver>,
        events: EventSink,
    ) -> io::Result<EgressProxy> {
        let path = path.as_ref().to_path_buf();
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            io::Error::other("EgressProxy::bind must be called inside a tokio runtime")
        })?;
        let std_listener = bind_private(&path)?;
        let identity = std::fs::symlink_metadata(&path).map(|m| (m.dev(), m.ino()))?;
        std_listener.set_nonblocking(true)?;
        let listener = {
            let _entered = runtime.enter();
            UnixListener::from_std(std_listener)?
        };
        let shared = Arc::new(Shared {
            policy,
            resolver,
            events,
        });
        let (stop, stopped) = oneshot::channel();
        let task = runtime.spawn(accept_loop(listener, shared, stopped));
        Ok(EgressProxy {
            path,
            identity,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stops accepting, ends open connections (each still emits its record)
    /// and removes the socket; returns once all of that is done.
    pub async fn shutdown(mut self) {
        self.remove_socket();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    fn remove_socket(&self) {
        let ours = std::fs::symlink_metadata(&self.path)
            .is_ok_and(|m| (m.dev(), m.ino()) == self.identity);
        if ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl Drop for EgressProxy {
    fn drop(&mut self) {
        self.remove_socket();
        // Dropping the sender stops the accept loop, which ends the connections.
        self.stop.take();
    }
}

/// Binds in a fresh 0700 directory, sets the socket to 0600, then links it to
/// `path`. Binding at `path` directly would leave the socket connectable with
/// umask permissions until the chmod; link(2) also fails atomically if `path`
/// appeared meanwhile, so nothing is ever replaced.
fn bind_private(path: &Path) -> io::Result<std::os::unix::net::UnixListener> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    if std::fs::symlink_metadata(path).is_ok() {
        return Err(exists(path));
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let staging = parent.join(format!(
        ".tgproxy-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::DirBuilder::new().mode(0o700).create(&staging)?;
    let staged = staging.join("s");
    let result = (|| {
        let listener = std::os::unix::net::UnixListener::bind(&staged)?;
        std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o600))?;
        std::fs::hard_link(&staged, path).map_err(|e| match e.kind() {
            io::ErrorKind::AlreadyExists => exists(path),
            _ => e,
        })?;
        Ok(listener)
    })();
    let _ = std::fs::remove_file(&staged);
    let _ = std::fs::remove_dir(&staging);
    result
}

fn exists(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!(
            "{} already exists; the egress proxy only listens on a new path (remove it or pick another)",
            path.display()
        ),
    )
}

async fn accept_loop(listener: UnixListener, shared: Arc<Shared>, mut stop: oneshot::Receiver<()>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    connections.spawn(serve_connection(stream, Arc::clone(&shared)));
                }
                // Out of descriptors and the like: back off instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    // Aborting drops each connection's future, and with it its record guard,
    // so every connection open at shutdown is still reported.
    connections.shutdown().await;
}

/// Tells SOCKS5 from HTTP by the first byte and hands the connection over.
async fn serve_connection(mut client: UnixStream, shared: Arc<Shared>) {
    let started = Instant::now();
    let mut first = [0u8; 1];
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, client.read(&mut first)).await {
        Ok(Ok(1)) if first[0] == SOCKS5_VERSION => socks::serve(client, &shared, started).await,
        Ok(Ok(1)) => http::serve(client, first[0], &shared, started).await,
        // Closed or silent before saying anything: nothing was asked, nothing to record.
        _ => {}
    }
}

//! Moving a tunnel's bytes without copying them through this process: each
//! direction splices from its source socket into a pipe and from the pipe
//! into the other socket (`splice(2)`), so the data stays in the kernel.
//! On two cores, with the client, the server and the proxy all busy, the
//! copy through user space was what cost the proxy its throughput.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::pipe::{PipeFlags, SpliceFlags};
use tokio::io::Interest;
use tokio::net::{TcpStream, UnixStream};

/// Most bytes moved by one splice call, and the pipe's capacity asked for.
const CHUNK: usize = 1 << 20;

/// A socket whose readiness tokio tracks.
pub(crate) trait Socket: AsFd {
    async fn ready_for(&self, interest: Interest) -> io::Result<()>;
    fn attempt<R>(&self, interest: Interest, f: impl FnOnce() -> io::Result<R>) -> io::Result<R>;
    fn close_write(&self);
}

macro_rules! socket {
    ($t:ty) => {
        impl Socket for $t {
            async fn ready_for(&self, interest: Interest) -> io::Result<()> {
                self.ready(interest).await.map(drop)
            }
            fn attempt<R>(
                &self,
                interest: Interest,
                f: impl FnOnce() -> io::Result<R>,
            ) -> io::Result<R> {
                self.try_io(interest, f)
            }
            fn close_write(&self) {
                // The other side learns the end of this direction; the
                // other direction goes on (a half-closed TCP connection).
                let _ = rustix::net::shutdown(self, rustix::net::Shutdown::Write);
            }
        }
    };
}
socket!(TcpStream);
socket!(UnixStream);

/// Moves everything `from` sends to `to`, counting it, then closes `to`'s
/// write side.
pub(crate) async fn one_way(
    from: &impl Socket,
    to: &impl Socket,
    counter: &AtomicU64,
) -> io::Result<()> {
    let (pipe_out, pipe_in): (OwnedFd, OwnedFd) =
        rustix::pipe::pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
    // A bigger pipe moves more per call; the kernel's limit may refuse it.
    let _ = rustix::pipe::fcntl_setpipe_size(&pipe_in, CHUNK);
    let flags = SpliceFlags::MOVE | SpliceFlags::NONBLOCK;
    loop {
        from.ready_for(Interest::READABLE).await?;
        let moved = from.attempt(Interest::READABLE, || {
            rustix::pipe::splice(from, None, &pipe_in, None, CHUNK, flags).map_err(io::Error::from)
        });
        let mut left = match moved {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        };
        counter.fetch_add(left as u64, Ordering::Relaxed);
        while left > 0 {
            to.ready_for(Interest::WRITABLE).await?;
            let written = to.attempt(Interest::WRITABLE, || {
                rustix::pipe::splice(&pipe_out, None, to, None, left, flags)
                    .map_err(io::Error::from)
            });
            match written {
                Ok(n) => left -= n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
    }
    to.close_write();
    Ok(())
}

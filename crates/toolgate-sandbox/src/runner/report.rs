//! The command's end as stage 2's keeper reports it (`stage2::Report`), so
//! that a server's run can answer before bubblewrap and its namespaces are
//! torn down (see [`super::Started::reported_on`]).

use std::io;
use std::process::ExitStatus;

/// The command's end as stage 2's keeper reports it: the keeper sends its
/// own socket over `pool` and writes the report there once every process of
/// the command has ended; the report counts once that socket's end of file
/// says the keeper has ended too. The exit status is as if the sandbox's
/// process had exited so. `None` when there is no report (the keeper died
/// first, or was never asked): the run then waits for the process itself.
pub(super) async fn read(pool: Option<tokio::net::UnixStream>) -> Option<ExitStatus> {
    use std::os::unix::process::ExitStatusExt;
    use tokio::io::AsyncReadExt;
    let keeper = receive_socket(&pool?).await?;
    keeper.set_nonblocking(true).ok()?;
    let mut keeper = tokio::net::UnixStream::from_std(keeper).ok()?;
    let mut bytes = Vec::new();
    let mut buf = [0u8; 16];
    loop {
        match keeper.read(&mut buf).await {
            Ok(0) => break,
            Ok(n) if bytes.len() + n <= 16 => bytes.extend_from_slice(&buf[..n]),
            Ok(_) | Err(_) => return None,
        }
    }
    Some(match crate::stage2::Report::decode(&bytes)? {
        crate::stage2::Report::Exited(code) => ExitStatus::from_raw(code << 8),
        crate::stage2::Report::Killed(signal) => ExitStatus::from_raw(signal),
    })
}

/// The socket stage 2's keeper sends over `pool` (one byte, `P`, with it).
async fn receive_socket(pool: &tokio::net::UnixStream) -> Option<std::os::unix::net::UnixStream> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
    loop {
        pool.readable().await.ok()?;
        let mut byte = [0u8; 1];
        let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let received = pool.try_io(tokio::io::Interest::READABLE, || {
            rustix::net::recvmsg(
                pool,
                &mut [io::IoSliceMut::new(&mut byte)],
                &mut control,
                RecvFlags::CMSG_CLOEXEC,
            )
            .map_err(io::Error::from)
        });
        match received {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Ok(msg) if msg.bytes == 1 && byte == *b"P" => {
                let fd = control.drain().find_map(|message| match message {
                    RecvAncillaryMessage::ScmRights(mut fds) => fds.next(),
                    _ => None,
                })?;
                return Some(std::os::unix::net::UnixStream::from(fd));
            }
            _ => return None,
        }
    }
}

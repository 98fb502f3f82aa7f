//! Stage 2 started ahead of its command, for a server's pool of sandboxes.
//!
//! With `--pooled` instead of `-- COMMAND`, stage 2 does everything it does
//! for a command (the masks, no_new_privs, every capability dropped,
//! Landlock, the seccomp filters), then says `R` (ready) on its
//! `--env-fd`, a socket, and waits. toolgate hands it one command by
//! writing the command, its environment and what the host looks like now
//! (the identity of each root and of the working directory), and closing
//! its side for writing. Stage 2 then checks that nothing it set up went
//! stale meanwhile:
//! - every mask still lies over its target: a host program that deletes an
//!   entry or renames another over it (`git config` does) detaches the
//!   mounts on it in every namespace, which the mount's id and the entry's
//!   inode show;
//! - a read-deny target that was gone when the masks were mounted is still
//!   gone;
//! - each root and the working directory are still the host's (a directory
//!   renamed away and made again is another one).
//!
//! It answers `G` and runs the command, or `S` with the reason and ends
//! without running anything; toolgate then starts a fresh sandbox. toolgate
//! has already compared the plan it would make now with the one this
//! sandbox was made from, so a protected name that appeared or vanished
//! meanwhile never reaches a pooled sandbox. A pooled stage 2 runs one
//! command. The keeper keeps the socket (close-on-exec, so the command
//! never holds it) and reports there how the command ended once nothing of
//! it is left (`keeper::Report`): toolgate answers then, without waiting
//! for the keeper, bubblewrap and the namespaces to be torn down one after
//! the other.

use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::{Stage2Error, StageMask};

/// What toolgate hands a pooled sandbox.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Handout {
    /// argv.
    pub command: Vec<OsString>,
    /// The complete environment.
    pub env: Vec<(OsString, OsString)>,
    /// No stdin: stage 2 puts /dev/null there (a pooled sandbox is started
    /// with a pipe, which programs such as ripgrep would read from).
    pub null_stdin: bool,
    /// Each root as the host has it now: path, device, inode.
    pub roots: Vec<(PathBuf, u64, u64)>,
    /// The working directory's device and inode on the host now.
    pub cwd: (u64, u64),
}

impl Handout {
    /// The bytes toolgate writes: NUL-separated records, each tagged by its
    /// first byte (`a` an argument, `e` a `KEY=VALUE`, `n` no stdin, `r` a
    /// root as `DEV:INO:PATH`, `c` the cwd as `DEV:INO`).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut record = |tag: u8, body: &[u8]| {
            out.push(tag);
            out.extend_from_slice(body);
            out.push(0);
        };
        for arg in &self.command {
            record(b'a', arg.as_bytes());
        }
        for (key, value) in &self.env {
            let mut body = key.as_bytes().to_vec();
            body.push(b'=');
            body.extend_from_slice(value.as_bytes());
            record(b'e', &body);
        }
        if self.null_stdin {
            record(b'n', b"");
        }
        for (path, dev, ino) in &self.roots {
            let mut body = format!("{dev}:{ino}:").into_bytes();
            body.extend_from_slice(path.as_os_str().as_bytes());
            record(b'r', &body);
        }
        record(b'c', format!("{}:{}", self.cwd.0, self.cwd.1).as_bytes());
        out
    }

    fn decode(bytes: &[u8]) -> Result<Handout, String> {
        let mut handout = Handout::default();
        let number = |s: &[u8]| -> Result<u64, String> {
            std::str::from_utf8(s)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| "a malformed identity".to_owned())
        };
        for record in bytes.split(|b| *b == 0).filter(|r| !r.is_empty()) {
            let (tag, body) = (record[0], &record[1..]);
            match tag {
                b'a' => handout.command.push(OsStr::from_bytes(body).to_owned()),
                b'e' => {
                    let eq = body
                        .iter()
                        .position(|b| *b == b'=')
                        .ok_or("a malformed environment record")?;
                    handout.env.push((
                        OsStr::from_bytes(&body[..eq]).to_owned(),
                        OsStr::from_bytes(&body[eq + 1..]).to_owned(),
                    ));
                }
                b'n' => handout.null_stdin = true,
                b'r' => {
                    let mut parts = body.splitn(3, |b| *b == b':');
                    let (Some(dev), Some(ino), Some(path)) =
                        (parts.next(), parts.next(), parts.next())
                    else {
                        return Err("a malformed root".into());
                    };
                    handout.roots.push((
                        PathBuf::from(OsStr::from_bytes(path)),
                        number(dev)?,
                        number(ino)?,
                    ));
                }
                b'c' => {
                    let mut parts = body.splitn(2, |b| *b == b':');
                    let (Some(dev), Some(ino)) = (parts.next(), parts.next()) else {
                        return Err("a malformed working directory".into());
                    };
                    handout.cwd = (number(dev)?, number(ino)?);
                }
                _ => return Err(format!("an unknown record `{}`", tag as char)),
            }
        }
        if handout.command.is_empty() {
            return Err("no command".into());
        }
        Ok(handout)
    }
}

/// Each mask target as mounted: the mount's id, device and inode, or `None`
/// for a read-deny mask skipped because its target was gone.
#[derive(Debug, Default)]
pub(super) struct Mounted(Vec<(PathBuf, Option<[u64; 3]>)>);

impl Mounted {
    /// Takes note of every mask target, right after the masks.
    pub(super) fn record(masks: &[StageMask]) -> Mounted {
        Mounted(
            masks
                .iter()
                .map(|m| (m.target.clone(), identity(&m.target)))
                .collect(),
        )
    }

    /// The first mask that no longer lies over its target, said as a reason.
    fn stale(&self) -> Option<String> {
        self.0.iter().find_map(|(target, then)| {
            let now = identity(target);
            (now != *then).then(|| match then {
                Some(_) => format!("the mask over {} was detached", target.display()),
                None => format!("{} appeared after its mask was skipped", target.display()),
            })
        })
    }
}

/// The mount id, device and inode of `path` (not following a final
/// symlink); `None` when it does not exist (or cannot be looked at, which
/// then differs from what was recorded, or matches a skipped mask only if
/// it is gone).
fn identity(path: &Path) -> Option<[u64; 3]> {
    use rustix::fs::{AtFlags, CWD, StatxFlags, statx};
    let stat = statx(
        CWD,
        path,
        AtFlags::SYMLINK_NOFOLLOW,
        StatxFlags::INO | StatxFlags::MNT_ID,
    )
    .ok()?;
    let dev = (u64::from(stat.stx_dev_major) << 32) | u64::from(stat.stx_dev_minor);
    Some([stat.stx_mnt_id, dev, stat.stx_ino])
}

/// Says ready on `fd`, waits for the hand-out, checks that the sandbox is
/// still what toolgate would make now, and answers. Returns the command and
/// its environment, with stdin and the working directory in place, and the
/// socket, for the keeper's report.
pub(super) fn wait(fd: i32, mounted: &Mounted) -> Result<(Handout, OwnedFd), Stage2Error> {
    // SAFETY: the descriptor number comes from our own parent, which opened
    // it for us and passed it in `--env-fd`; nothing else in this process
    // uses it. Close-on-exec: the command never holds it.
    let socket = unsafe { OwnedFd::from_raw_fd(fd) };
    rustix::io::fcntl_setfd(&socket, rustix::io::FdFlags::CLOEXEC)
        .map_err(|e| Stage2Error::Setup(format!("the pool's socket: {e}")))?;
    let mut socket = std::fs::File::from(socket);
    let io = |e: std::io::Error| Stage2Error::Setup(format!("the pool's socket: {e}"));
    socket.write_all(b"R").map_err(io)?;
    let mut bytes = Vec::new();
    // toolgate shuts its side for writing after the hand-out.
    socket.read_to_end(&mut bytes).map_err(io)?;
    if bytes.is_empty() {
        // Discarded without a command (the server ends, the pool is
        // emptied): nothing to run and nothing to say.
        std::process::exit(0);
    }
    let checked =
        Handout::decode(&bytes).and_then(|h| match mounted.stale().or_else(|| moved(&h)) {
            Some(reason) => Err(reason),
            None => Ok(h),
        });
    match checked {
        Ok(handout) => {
            if handout.null_stdin {
                null_stdin().map_err(|e| Stage2Error::Setup(format!("stdin: {e}")))?;
            }
            socket.write_all(b"G").map_err(io)?;
            Ok((handout, socket.into()))
        }
        Err(reason) => {
            let _ = socket.write_all(format!("S{reason}").as_bytes());
            Err(Stage2Error::Setup(format!(
                "stale pooled sandbox: {reason}"
            )))
        }
    }
}

/// A root or the working directory that is no longer the host's.
fn moved(handout: &Handout) -> Option<String> {
    let same =
        |stat: rustix::fs::Stat, (dev, ino): (u64, u64)| stat.st_dev == dev && stat.st_ino == ino;
    for (root, dev, ino) in &handout.roots {
        if !rustix::fs::stat(root).is_ok_and(|s| same(s, (*dev, *ino))) {
            return Some(format!("the root {} changed", root.display()));
        }
    }
    if !rustix::fs::stat(".").is_ok_and(|s| same(s, handout.cwd)) {
        return Some("the working directory changed".into());
    }
    None
}

fn null_stdin() -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let null = std::fs::File::open("/dev/null")?;
    // SAFETY: dup2 onto descriptor 0 of this process, which nothing here
    // holds a handle to; `null` stays open for the call.
    if unsafe { libc::dup2(null.as_raw_fd(), 0) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn a_handout_round_trips() {
        let handout = Handout {
            command: vec!["bash".into(), "-c".into(), "echo a=b:c".into()],
            env: vec![
                ("PATH".into(), "/usr/bin".into()),
                ("E".into(), "x=y".into()),
            ],
            null_stdin: true,
            roots: vec![("/w/a:b".into(), 2049, 77)],
            cwd: (2049, 78),
        };
        assert_eq!(Handout::decode(&handout.encode()), Ok(handout));
        assert_eq!(Handout::decode(b"c1:2\0"), Err("no command".to_owned()));
        assert_eq!(
            Handout::decode(b"atrue\0x\0"),
            Err("an unknown record `x`".to_owned())
        );
    }
}

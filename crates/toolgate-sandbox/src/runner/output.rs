//! Reading one output stream of the child: a bounded capture plus a line splitter.
//!
//! The pipe is always read to the end, also past the cap: a child writing into a full
//! pipe would block forever, and a run that never ends is a denial of service.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt};

use super::{RawOutput, Stream};

/// Bytes asked for per read.
const READ_CHUNK: usize = 64 * 1024;

/// Longest line handed to the line callback; the rest of a longer line is dropped, so a
/// command printing gigabytes without a newline cannot exhaust memory.
const MAX_LINE_BYTES: usize = 64 * 1024;

/// One output pipe of the child and what has been kept of it.
pub(super) struct OutputStream<R> {
    pipe: Option<R>,
    buf: Box<[u8]>,
    capture: Capture,
    /// Gets every chunk as read, instead of the line callback.
    tap: Option<(RawOutput, Stream)>,
}

impl<R: AsyncRead + Unpin> OutputStream<R> {
    pub(super) fn new(pipe: Option<R>, max_bytes: usize) -> Self {
        Self {
            pipe,
            buf: vec![0; READ_CHUNK].into_boxed_slice(),
            capture: Capture::new(max_bytes),
            tap: None,
        }
    }

    /// Hands every chunk to `tap` as `stream` instead of splitting lines: a consumer
    /// that records the raw bytes, at the speed of the pipe (no per-line work).
    pub(super) fn tap(mut self, tap: Option<RawOutput>, stream: Stream) -> Self {
        self.tap = tap.map(|tap| (tap, stream));
        self
    }

    /// EOF was reached (or there never was a pipe).
    pub(super) fn is_closed(&self) -> bool {
        self.pipe.is_none()
    }

    /// Reads the next chunk; never completes once the stream is closed, so it can sit in
    /// a `select!` as it is.
    pub(super) async fn read_chunk(&mut self) -> io::Result<usize> {
        match &mut self.pipe {
            Some(pipe) => pipe.read(&mut self.buf).await,
            None => std::future::pending().await,
        }
    }

    /// Takes in the result of [`OutputStream::read_chunk`].
    pub(super) fn consume(
        &mut self,
        read: io::Result<usize>,
        on_line: &mut impl FnMut(&str),
    ) -> io::Result<()> {
        match read {
            Ok(0) => {
                self.pipe = None;
                if self.tap.is_none() {
                    self.capture.finish(on_line);
                }
                Ok(())
            }
            Ok(n) => {
                let chunk = self.buf.get(..n).unwrap_or_default();
                match &self.tap {
                    Some((tap, stream)) => {
                        tap(*stream, chunk);
                        self.capture.keep(chunk);
                    }
                    None => self.capture.push(chunk, on_line),
                }
                Ok(())
            }
            Err(err) if err.kind() == io::ErrorKind::Interrupted => Ok(()),
            Err(err) => Err(err),
        }
    }

    /// Reads what the pipe holds now, without waiting, and closes it: for when
    /// every writer has ended, although another holder of the pipe keeps it
    /// from reaching end of file yet.
    pub(super) fn drain_now(&mut self, on_line: &mut impl FnMut(&str)) -> io::Result<()>
    where
        R: std::os::fd::AsFd,
    {
        let Some(pipe) = &self.pipe else {
            return Ok(());
        };
        let fd = pipe.as_fd().try_clone_to_owned()?;
        rustix::io::ioctl_fionbio(&fd, true)?;
        loop {
            match rustix::io::read(&fd, &mut self.buf[..]) {
                Ok(0) | Err(rustix::io::Errno::AGAIN) => return self.consume(Ok(0), on_line),
                Ok(n) => self.consume(Ok(n), on_line)?,
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// The kept text and whether anything was cut.
    pub(super) fn into_text(self) -> (String, bool) {
        self.capture.into_text()
    }
}

/// The kept head of a stream, and the line being assembled for the callback.
#[derive(Debug)]
struct Capture {
    kept: Vec<u8>,
    max_bytes: usize,
    truncated: bool,
    line: Vec<u8>,
}

impl Capture {
    fn new(max_bytes: usize) -> Self {
        Self {
            kept: Vec::new(),
            max_bytes,
            truncated: false,
            line: Vec::new(),
        }
    }

    /// Keeps what fits of `chunk` under the cap.
    fn keep(&mut self, chunk: &[u8]) {
        let room = self.max_bytes.saturating_sub(self.kept.len());
        let (keep, discard) = chunk.split_at(chunk.len().min(room));
        self.kept.extend_from_slice(keep);
        self.truncated |= !discard.is_empty();
    }

    fn push(&mut self, chunk: &[u8], on_line: &mut impl FnMut(&str)) {
        self.keep(chunk);
        let mut pieces = chunk.split(|&byte| byte == b'\n').peekable();
        while let Some(piece) = pieces.next() {
            let room = MAX_LINE_BYTES.saturating_sub(self.line.len());
            self.line
                .extend_from_slice(piece.get(..room).unwrap_or(piece));
            if pieces.peek().is_some() {
                self.emit_line(on_line);
            }
        }
    }

    /// At EOF: a last line without a trailing newline is still a line.
    fn finish(&mut self, on_line: &mut impl FnMut(&str)) {
        if !self.line.is_empty() {
            self.emit_line(on_line);
        }
    }

    fn emit_line(&mut self, on_line: &mut impl FnMut(&str)) {
        on_line(&String::from_utf8_lossy(&self.line));
        self.line.clear();
    }

    fn into_text(self) -> (String, bool) {
        let mut kept = self.kept;
        if self.truncated {
            // The cap may fall inside a multi-byte character: keep it whole or not at all.
            kept.truncate(kept.len() - incomplete_tail_len(&kept));
        }
        let text = String::from_utf8(kept)
            .unwrap_or_else(|err| String::from_utf8_lossy(err.as_bytes()).into_owned());
        (text, self.truncated)
    }
}

/// Length of a UTF-8 sequence cut short at the end of `bytes` (0 when the end is whole,
/// or not UTF-8 at all, which lossy decoding handles).
fn incomplete_tail_len(bytes: &[u8]) -> usize {
    for (back, &byte) in bytes.iter().rev().take(4).enumerate() {
        if byte & 0xC0 == 0x80 {
            continue; // a continuation byte: the sequence starts further back
        }
        let seen = back + 1;
        let needed = match byte {
            0xF0..=0xFF => 4,
            0xE0..=0xEF => 3,
            0xC0..=0xDF => 2,
            _ => 1,
        };
        return if needed > seen { seen } else { 0 };
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn capture(max_bytes: usize, chunks: &[&[u8]]) -> (String, bool, Vec<String>) {
        let mut lines = Vec::new();
        let mut capture = Capture::new(max_bytes);
        let mut on_line = |line: &str| lines.push(line.to_owned());
        for chunk in chunks {
            capture.push(chunk, &mut on_line);
        }
        capture.finish(&mut on_line);
        let (text, truncated) = capture.into_text();
        (text, truncated, lines)
    }

    #[test]
    fn incomplete_tail_is_found_for_every_sequence_length() {
        let euro = "€".as_bytes(); // 3 bytes
        let crab = "🦀".as_bytes(); // 4 bytes
        let cases: [(&[u8], usize); 10] = [
            (b"", 0),
            (b"abc", 0),
            ("é".as_bytes(), 0),
            (&"é".as_bytes()[..1], 1),
            (euro, 0),
            (&euro[..2], 2),
            (&euro[..1], 1),
            (crab, 0),
            (&crab[..3], 3),
            (b"\x80\x80\x80\x80", 0),
        ];
        for (bytes, expected) in cases {
            assert_eq!(incomplete_tail_len(bytes), expected, "{bytes:?}");
        }
    }

    #[test]
    fn capture_keeps_the_head_and_cuts_on_a_character_boundary() {
        let cases: [(usize, &[&[u8]], &str, bool); 6] = [
            (10, &[b"hello"], "hello", false),
            (5, &[b"hello"], "hello", false),
            (4, &[b"hel", b"lo"], "hell", true),
            (0, &[b"x"], "", true),
            (4, &["a€b".as_bytes()], "a€", true),
            (3, &["a€b".as_bytes()], "a", true),
        ];
        for (max, chunks, text, truncated) in cases {
            let (got_text, got_truncated, _) = capture(max, chunks);
            assert_eq!(
                (got_text.as_str(), got_truncated),
                (text, truncated),
                "cap {max}"
            );
        }
    }

    #[test]
    fn untruncated_invalid_utf8_is_decoded_lossily() {
        let (text, truncated, _) = capture(100, &[b"ok\xff"]);
        assert_eq!((text.as_str(), truncated), ("ok\u{FFFD}", false));
    }

    #[test]
    fn lines_are_split_across_chunks_and_past_the_cap() {
        let (_, truncated, lines) = capture(2, &[b"one\ntw", b"o\n\nthr", b"ee"]);
        assert!(truncated);
        assert_eq!(lines, ["one", "two", "", "three"]);
    }

    #[test]
    fn long_lines_are_cut_for_the_callback() {
        let long = vec![b'x'; MAX_LINE_BYTES + 10];
        let (_, _, lines) = capture(0, &[&long, b"\nnext\n"]);
        assert_eq!(
            lines.iter().map(String::len).collect::<Vec<_>>(),
            [MAX_LINE_BYTES, 4]
        );
    }
}

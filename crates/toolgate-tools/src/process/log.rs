//! The output file of one background process: bounded, and exact about what it keeps.
//!
//! A process may print without end (a watcher, `yes`, a server under load), and an
//! unbounded file fills the disk at the speed of a pipe. This file keeps the first
//! `head` bytes of the output (the start-up, where errors usually are) and a rolling
//! window of the latest `tail` bytes; what falls between is counted and dropped.
//! Writing never waits for a reader and never grows the file past `head + tail`: the
//! runner drains the pipe at its own speed, and what does not fit is dropped, not
//! queued, so neither the command nor toolgate's memory is ever held up by the log.
//!
//! Offsets are positions in the output as the process wrote it, whatever the layout:
//! bytes [0, head) of the file are the head, [head, head + tail) a ring holding the
//! tail. Until something is dropped that reads in order; once the process has ended,
//! a file with a gap is rewritten in order, with one marker line at the gap.

use std::fs::File;
use std::io::Write as _;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use super::budget::LogBudget;

/// What a log holds of the output: `[0, head_end)` and `[tail_start, end)`, out of
/// `written` bytes; `end` is below `written` only when the file could not be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Kept {
    pub head_end: u64,
    pub tail_start: u64,
    pub end: u64,
    pub written: u64,
}

impl Kept {
    /// Bytes written but not kept.
    pub fn dropped(&self) -> u64 {
        self.written - self.kept()
    }

    pub fn kept(&self) -> u64 {
        self.head_end + (self.end - self.tail_start)
    }

    /// One sentence: what the log holds, for results.
    pub fn describe(&self) -> String {
        if self.dropped() == 0 {
            return format!("all {} bytes of its output", self.written);
        }
        if self.end == self.head_end {
            return format!(
                "the first {} bytes of its output ({} written; the {} after them were dropped)",
                self.head_end,
                self.written,
                self.dropped()
            );
        }
        format!(
            "bytes 0-{} and {}-{} of its output ({} written; the {} in between were dropped)",
            self.head_end,
            self.tail_start,
            self.end,
            self.written,
            self.tail_start - self.head_end
        )
    }

    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "written": self.written,
            "kept": [[0, self.head_end], [self.tail_start, self.end]],
            "dropped": self.dropped(),
        })
    }
}

/// Why a log no longer exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Removed {
    /// Read to its end after the process ended, then kept a while longer.
    Read,
    /// Not read to its end within the retention after the process ended.
    Expired,
    /// Removed for newer logs: the server's logs share one cap.
    Evicted { total: u64 },
    /// The process dropped out of the table (too many ended processes).
    Forgotten,
}

impl Removed {
    pub fn describe(&self) -> String {
        match self {
            Removed::Read => "its output was read to the end and then removed".to_owned(),
            Removed::Expired => {
                "its output was removed at the end of its retention (it was never read to \
                 the end)"
                    .to_owned()
            }
            Removed::Evicted { total } => format!(
                "its output was removed to make room for newer processes' output (all \
                 process logs of this toolgate together keep at most {total} bytes)"
            ),
            Removed::Forgotten => "its output was removed with its table entry".to_owned(),
        }
    }
}

/// One read of a log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Read {
    pub bytes: Vec<u8>,
    /// Offset of the first byte read.
    pub from: u64,
    /// Bytes `[asked, from)` were dropped before they could be read.
    pub skipped: Option<(u64, u64)>,
    pub kept: Kept,
}

/// The file of one process.
pub(crate) struct ProcessLog {
    state: Mutex<State>,
    budget: LogBudget,
}

struct State {
    path: PathBuf,
    file: Option<File>,
    head_cap: u64,
    tail_cap: u64,
    written: u64,
    /// Where recording stopped because a write failed (disk full): the offset, the
    /// bytes of the ring the failed write may have overwritten, and why.
    broken: Option<(u64, u64, String)>,
    /// After the rewrite in order: the length of the marker line at the gap.
    marker: Option<u64>,
    /// Bytes of the budget this log holds.
    lease: u64,
    removed: Option<Removed>,
    /// When a read reached the end after the process had ended.
    read_to_end: Option<Instant>,
    /// The last byte of the output, so that toolgate's lines appended after the
    /// end start on a line of their own.
    last: Option<u8>,
}

impl State {
    fn kept(&self) -> Kept {
        let (end, clobbered) = self
            .broken
            .as_ref()
            .map_or((self.written, 0), |(at, clobbered, _)| (*at, *clobbered));
        let head_end = end.min(self.head_cap);
        let tail_start = if end > self.head_cap {
            // A failed ring write may have overwritten the oldest `clobbered` bytes.
            self.head_cap
                .max((end + clobbered).saturating_sub(self.tail_cap))
                .min(end)
        } else {
            end
        };
        Kept {
            head_end,
            tail_start,
            end,
            written: self.written,
        }
    }

    /// Where output offset `at` (a kept byte) lies in the file, and how many bytes
    /// follow it there contiguously.
    fn place(&self, at: u64, kept: &Kept) -> (u64, u64) {
        if at < kept.head_end {
            return (at, kept.head_end - at);
        }
        if let Some(marker) = self.marker {
            return (
                kept.head_end + marker + (at - kept.tail_start),
                kept.end - at,
            );
        }
        let (slot, room) = self.ring_slot(at);
        (slot, room.min(kept.end - at))
    }

    /// Where output offset `at` (past the head) goes in the ring, `head + (at - head)
    /// mod tail`, and the room from there to the ring's end. Needs a ring (tail > 0).
    fn ring_slot(&self, at: u64) -> (u64, u64) {
        let slot = (at - self.head_cap) % self.tail_cap;
        (self.head_cap + slot, self.tail_cap - slot)
    }

    /// Writes `chunk` as the next output bytes; on a failed write, recording stops
    /// there (`broken`) and the rest is only counted.
    fn record(&mut self, file: &File, mut chunk: &[u8]) {
        // Bytes of the ring the write in progress may overwrite.
        let mut clobbers = 0;
        let result = (|| -> std::io::Result<()> {
            if self.written < self.head_cap {
                let room = usize::try_from(self.head_cap - self.written).unwrap_or(usize::MAX);
                let (head, rest) = chunk.split_at(chunk.len().min(room));
                file.write_all_at(head, self.written)?;
                self.written += head.len() as u64;
                chunk = rest;
            }
            if self.tail_cap == 0 {
                return Ok(());
            }
            let ring = usize::try_from(self.tail_cap).unwrap_or(usize::MAX);
            if chunk.len() > ring {
                // Only the last `ring` bytes can be kept: the rest is never written.
                self.written += (chunk.len() - ring) as u64;
                chunk = &chunk[chunk.len() - ring..];
            }
            while !chunk.is_empty() {
                let (at, room) = self.ring_slot(self.written);
                let n = chunk.len().min(usize::try_from(room).unwrap_or(usize::MAX));
                clobbers = n as u64;
                file.write_all_at(&chunk[..n], at)?;
                self.written += n as u64;
                chunk = &chunk[n..];
            }
            Ok(())
        })();
        match result {
            Ok(()) => self.written += chunk.len() as u64,
            Err(e) => {
                self.broken = Some((self.written, clobbers, e.to_string()));
                self.written += chunk.len() as u64;
            }
        }
    }
}

impl ProcessLog {
    /// A new log at `path` keeping at most `head` + `tail` bytes, with its lease of
    /// the server-wide budget already taken (`lease` bytes).
    pub fn new(path: PathBuf, file: File, head: u64, tail: u64, budget: LogBudget) -> Self {
        ProcessLog {
            state: Mutex::new(State {
                path,
                file: Some(file),
                head_cap: head,
                tail_cap: tail,
                written: 0,
                broken: None,
                marker: None,
                lease: head + tail,
                removed: None,
                read_to_end: None,
                last: None,
            }),
            budget,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock leaves consistent counters (each update is
        // one assignment after the write), so the state is still usable.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records `chunk`, the next bytes of the output: what fits in the head, the rest
    /// into the ring (of a chunk longer than the ring, only its last bytes).
    pub fn write(&self, chunk: &[u8]) {
        let mut s = self.state();
        if let Some(last) = chunk.last() {
            s.last = Some(*last);
        }
        match s.file.take() {
            Some(file) if s.broken.is_none() => {
                s.record(&file, chunk);
                s.file = Some(file);
            }
            file => {
                s.file = file;
                s.written += chunk.len() as u64;
            }
        }
    }

    /// Appends `lines` (toolgate's, after the process ended) as the last bytes of the
    /// output, on a line of their own; returns the output range `[start, end)` they
    /// take, from the newline added before them if one was.
    pub fn append_lines(&self, lines: &str) -> (u64, u64) {
        let start = self.written();
        if lines.is_empty() {
            return (start, start);
        }
        if self.state().last.is_some_and(|b| b != b'\n') {
            self.write(b"\n");
        }
        self.write(lines.as_bytes());
        (start, self.written())
    }

    /// What the log holds now.
    pub fn kept(&self) -> Kept {
        self.state().kept()
    }

    /// `(head, tail)`: the bytes of the start and of the latest output it keeps.
    pub fn caps(&self) -> (u64, u64) {
        let s = self.state();
        (s.head_cap, s.tail_cap)
    }

    /// Bytes of output so far (kept or not).
    pub fn written(&self) -> u64 {
        self.state().written
    }

    pub fn path(&self) -> PathBuf {
        self.state().path.clone()
    }

    pub fn removed(&self) -> Option<Removed> {
        self.state().removed.clone()
    }

    /// Why recording stopped early, if it did.
    pub fn broken(&self) -> Option<String> {
        self.state().broken.as_ref().map(|(_, _, why)| why.clone())
    }

    pub fn read_to_end_at(&self) -> Option<Instant> {
        self.state().read_to_end
    }

    /// The facts of what the log holds, for results.
    pub fn facts(&self) -> serde_json::Value {
        let s = self.state();
        let mut facts = s.kept().json();
        facts["removed"] = serde_json::json!(s.removed.as_ref().map(Removed::describe));
        facts
    }

    /// Moves the file to `path` (in the same directory).
    pub fn rename(&self, path: PathBuf) -> std::io::Result<()> {
        let mut s = self.state();
        std::fs::rename(&s.path, &path)?;
        s.path = path;
        Ok(())
    }

    /// Up to `budget` bytes from output offset `offset`, or the tail of the kept
    /// output when `offset` is `None`. A read never spans the gap: one in the head
    /// stops at its end, and one starting in a dropped range starts after it.
    pub fn read(&self, offset: Option<u64>, budget: u64) -> std::io::Result<Read> {
        let s = self.state();
        let kept = s.kept();
        let asked = match offset {
            Some(offset) => offset.min(kept.end),
            None => kept.end.saturating_sub(budget).max(if kept.dropped() > 0 {
                kept.tail_start
            } else {
                0
            }),
        };
        let (from, skipped) = if asked >= kept.head_end && asked < kept.tail_start {
            (kept.tail_start, Some((asked, kept.tail_start)))
        } else {
            (asked, None)
        };
        let mut bytes = Vec::new();
        if let Some(file) = &s.file {
            // Through the ring's wrap, but never across the gap after the head.
            let stop = if from < kept.head_end {
                kept.head_end
            } else {
                kept.end
            };
            let mut at = from;
            while at < stop && (bytes.len() as u64) < budget {
                let (place, run) = s.place(at, &kept);
                let n = run.min(stop - at).min(budget - bytes.len() as u64);
                let start = bytes.len();
                bytes.resize(start + usize::try_from(n).unwrap_or(usize::MAX), 0);
                file.read_exact_at(&mut bytes[start..], place)?;
                at += n;
            }
        }
        Ok(Read {
            bytes,
            from,
            skipped,
            kept,
        })
    }

    /// After the process ended: a read reached the end of the output.
    pub fn mark_read_to_end(&self) {
        self.state().read_to_end.get_or_insert_with(Instant::now);
    }

    /// The process has ended, nothing more is written: a file with a gap is
    /// rewritten in order with a marker line there, and the lease shrinks to the
    /// file's size. Blocking file work (at most head + tail bytes are copied).
    pub fn finish(&self) {
        let mut s = self.state();
        let kept = s.kept();
        let gap = s.file.is_some() && kept.dropped() > 0 && s.broken.is_none();
        if gap
            && s.marker.is_none()
            && let Ok((file, marker)) = rewrite_in_order(&s, &kept)
        {
            s.file = Some(file);
            s.marker = Some(marker);
        }
        // The lease becomes the file's size: less than the caps, or the kept bytes
        // plus the marker line (a few hundred bytes over the caps, at most).
        let size = kept.kept() + s.marker.unwrap_or(0);
        if s.lease > size {
            self.budget.release(s.lease - size);
        } else {
            self.budget.grow(size - s.lease);
        }
        s.lease = size;
    }

    /// Deletes the file and gives its lease back; reads then say `why`.
    pub fn remove(&self, why: Removed) {
        let mut s = self.state();
        if s.removed.is_some() {
            return;
        }
        s.file = None;
        let _ = std::fs::remove_file(&s.path);
        s.removed = Some(why);
        let lease = std::mem::take(&mut s.lease);
        drop(s);
        self.budget.release(lease);
    }
}

impl Drop for ProcessLog {
    fn drop(&mut self) {
        self.remove(Removed::Forgotten);
    }
}

/// The marker line at the gap of a file rewritten in order.
fn marker_line(kept: &Kept, head: u64, tail: u64) -> String {
    format!(
        "\n[toolgate: {} bytes of output dropped here (bytes {}-{} of {}): the log keeps \
         the first {head} and the last {tail} bytes]\n",
        kept.tail_start - kept.head_end,
        kept.head_end,
        kept.tail_start,
        kept.written
    )
}

/// Writes head, marker and tail in order to a new file beside the log, and renames it
/// over the log. Returns the new file and the marker's length.
fn rewrite_in_order(s: &State, kept: &Kept) -> std::io::Result<(File, u64)> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let Some(file) = &s.file else {
        return Err(std::io::ErrorKind::NotFound.into());
    };
    let next = sibling(&s.path, "in-order");
    // create_new: a name planted in advance (a symlink) is never opened.
    let mut out = std::fs::OpenOptions::new()
        .create_new(true)
        .read(true)
        .write(true)
        .mode(0o600)
        .open(&next)?;
    let copy = |out: &mut File, mut from: u64, to: u64| -> std::io::Result<()> {
        let mut buf = vec![0u8; 64 * 1024];
        while from < to {
            let (at, run) = s.place(from, kept);
            let n = usize::try_from(run.min(buf.len() as u64)).unwrap_or(buf.len());
            file.read_exact_at(&mut buf[..n], at)?;
            out.write_all(&buf[..n])?;
            from += n as u64;
        }
        Ok(())
    };
    let marker = marker_line(kept, s.head_cap, s.tail_cap);
    let result = copy(&mut out, 0, kept.head_end)
        .and_then(|()| out.write_all(marker.as_bytes()))
        .and_then(|()| copy(&mut out, kept.tail_start, kept.end))
        .and_then(|()| std::fs::rename(&next, &s.path));
    if let Err(e) = result {
        let _ = std::fs::remove_file(&next);
        return Err(e);
    }
    Ok((out, marker.len() as u64))
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".");
    name.push(suffix);
    path.with_file_name(name)
}

#[cfg(test)]
mod tests;

//! What `bash` (and `elevated`) keep of a command's output for the file a cut
//! result points to: all of it when it fits, else whole lines of its start and of
//! its end, with a marker line between, and a result that says which lines.
//!
//! A command can print far more than is worth keeping (512 MiB of a test loop); the
//! first 64 MiB used to be held in memory while the result claimed the file was the
//! whole output. Now at most head + tail bytes are held, whatever the command prints,
//! and the file and the result say exactly what is in it.

use std::collections::VecDeque;
use std::fmt::Write as _;

use serde_json::{Value, json};
use toolgate_sandbox::runner::Stream;

/// Bytes of whole lines of the start of a command's combined output kept for its
/// output file.
const SAVED_HEAD_BYTES: usize = 8 << 20;

/// Bytes of whole lines of the latest output kept for the output file besides.
/// With the head, the most a running command holds in toolgate's memory.
const SAVED_TAIL_BYTES: usize = 8 << 20;

/// The combined output in arrival order, for the output file: whole lines of its
/// start up to `head` bytes and of its end up to `tail` bytes, in memory; the lines
/// between are counted and dropped, never held.
pub(crate) struct FullOutput {
    head: String,
    head_cap: usize,
    /// The head took its last line: every later line goes to the tail.
    head_closed: bool,
    head_lines: u64,
    tail: VecDeque<u8>,
    /// Byte length of each line in `tail`, oldest first.
    tail_lines: VecDeque<usize>,
    tail_cap: usize,
    lines: u64,
    pub(super) stdout_bytes: u64,
    pub(super) stderr_bytes: u64,
    dropped_lines: u64,
    dropped_bytes: u64,
}

impl Default for FullOutput {
    fn default() -> Self {
        FullOutput::with_caps(SAVED_HEAD_BYTES, SAVED_TAIL_BYTES)
    }
}

impl FullOutput {
    fn with_caps(head: usize, tail: usize) -> FullOutput {
        FullOutput {
            head: String::new(),
            head_cap: head,
            head_closed: false,
            head_lines: 0,
            tail: VecDeque::new(),
            tail_lines: VecDeque::new(),
            tail_cap: tail,
            lines: 0,
            stdout_bytes: 0,
            stderr_bytes: 0,
            dropped_lines: 0,
            dropped_bytes: 0,
        }
    }

    pub(crate) fn push(&mut self, stream: Stream, line: &str) {
        let bytes = line.len() + 1;
        match stream {
            Stream::Stdout => self.stdout_bytes += bytes as u64,
            Stream::Stderr => self.stderr_bytes += bytes as u64,
        }
        self.lines += 1;
        if !self.head_closed && self.head.len() + bytes <= self.head_cap {
            self.head.push_str(line);
            self.head.push('\n');
            self.head_lines += 1;
            return;
        }
        self.head_closed = true;
        self.tail.extend(line.as_bytes());
        self.tail.push_back(b'\n');
        self.tail_lines.push_back(bytes);
        while self.tail.len() > self.tail_cap {
            let Some(oldest) = self.tail_lines.pop_front() else {
                break;
            };
            self.tail.drain(..oldest);
            self.dropped_lines += 1;
            self.dropped_bytes += oldest as u64;
        }
    }

    /// What the file will hold.
    pub(super) fn keeps(&self) -> Keeps {
        Keeps {
            lines: self.lines,
            bytes: self.stdout_bytes + self.stderr_bytes,
            head_lines: self.head_lines,
            dropped_lines: self.dropped_lines,
            dropped_bytes: self.dropped_bytes,
            caps: (self.head_cap, self.tail_cap),
        }
    }

    /// The file's bytes: the head, a marker line where lines were dropped, the tail.
    pub(super) fn into_file(self) -> Vec<u8> {
        let keeps = self.keeps();
        let mut bytes = self.head.into_bytes();
        if keeps.dropped_lines > 0 {
            let (first, last) = keeps.dropped_range();
            let _ = writeln!(
                ByteSink(&mut bytes),
                "[toolgate: lines {first}-{last} ({} bytes) of the output are not in this \
                 file: it keeps whole lines of the first {} and the last {} bytes]",
                keeps.dropped_bytes,
                keeps.caps.0,
                keeps.caps.1
            );
        }
        let mut tail = self.tail;
        bytes.extend_from_slice(tail.make_contiguous());
        bytes
    }
}

/// `fmt::Write` into a byte buffer.
struct ByteSink<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for ByteSink<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// What an output file holds of the output.
pub(super) struct Keeps {
    lines: u64,
    bytes: u64,
    head_lines: u64,
    dropped_lines: u64,
    dropped_bytes: u64,
    caps: (usize, usize),
}

impl Keeps {
    /// Line numbers (1-based, inclusive) of the lines not kept.
    fn dropped_range(&self) -> (u64, u64) {
        (self.head_lines + 1, self.head_lines + self.dropped_lines)
    }

    /// Ranges of line numbers kept, 1-based and inclusive.
    fn kept_lines(&self) -> Vec<[u64; 2]> {
        let ranges = if self.dropped_lines == 0 {
            vec![[1, self.lines]]
        } else {
            let (first, last) = self.dropped_range();
            vec![[1, first - 1], [last + 1, self.lines]]
        };
        ranges.into_iter().filter(|[a, b]| a <= b).collect()
    }

    /// The note of a cut result: where the output is, and how much of it.
    pub(super) fn describe(&self, path: &str) -> String {
        if self.dropped_lines == 0 {
            return format!(
                "the whole of it ({} lines) is in {path}: read or grep it",
                self.lines
            );
        }
        let kept: Vec<String> = self
            .kept_lines()
            .iter()
            .map(|[a, b]| format!("{a}-{b}"))
            .collect();
        let (first, last) = self.dropped_range();
        format!(
            "{path} keeps lines {} of {} ({} of {} bytes: whole lines of the first {} and the \
             last {} bytes); lines {first}-{last} ({} bytes) are not kept anywhere: read or grep \
             the file for the rest",
            kept.join(" and "),
            self.lines,
            self.bytes - self.dropped_bytes,
            self.bytes,
            self.caps.0,
            self.caps.1,
            self.dropped_bytes
        )
    }

    /// The `output_file_keeps` fact.
    pub(super) fn json(&self) -> Value {
        json!({
            "complete": self.dropped_lines == 0,
            "lines": self.lines,
            "bytes": self.bytes,
            "kept_lines": self.kept_lines(),
            "kept_bytes": self.bytes - self.dropped_bytes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn saved(head: usize, tail: usize, lines: &[&str]) -> (String, Value) {
        let mut full = FullOutput::with_caps(head, tail);
        for (i, line) in lines.iter().enumerate() {
            let stream = if i % 2 == 0 {
                Stream::Stdout
            } else {
                Stream::Stderr
            };
            full.push(stream, line);
        }
        let facts = full.keeps().json();
        (String::from_utf8(full.into_file()).unwrap(), facts)
    }

    #[test]
    fn what_fits_is_kept_whole_and_said_to_be_complete() {
        let (file, facts) = saved(100, 100, &["one", "two", "three"]);
        assert_eq!(file, "one\ntwo\nthree\n");
        assert_eq!(
            facts,
            json!({"complete": true, "lines": 3, "bytes": 14, "kept_lines": [[1, 3]],
                   "kept_bytes": 14})
        );
        // Past the head, into the tail, nothing dropped yet: still complete.
        let (file, facts) = saved(4, 100, &["one", "two", "three"]);
        assert_eq!(file, "one\ntwo\nthree\n");
        assert_eq!(facts["complete"], json!(true));
    }

    #[test]
    fn the_middle_is_dropped_in_whole_lines_and_the_file_says_which() {
        let lines: Vec<String> = (1..=10).map(|n| format!("line{n:02}")).collect();
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        // 7 bytes a line: a head of 2 lines, a tail of 3.
        let (file, facts) = saved(14, 21, &lines);
        assert_eq!(
            file,
            "line01\nline02\n[toolgate: lines 3-7 (35 bytes) of the output are not in this \
             file: it keeps whole lines of the first 14 and the last 21 bytes]\nline08\n\
             line09\nline10\n"
        );
        assert_eq!(
            facts,
            json!({"complete": false, "lines": 10, "bytes": 70,
                   "kept_lines": [[1, 2], [8, 10]], "kept_bytes": 35})
        );
        let mut full = FullOutput::with_caps(14, 21);
        for line in &lines {
            full.push(Stream::Stdout, line);
        }
        assert_eq!(
            full.keeps().describe("out.log"),
            "out.log keeps lines 1-2 and 8-10 of 10 (35 of 70 bytes: whole lines of the first \
             14 and the last 21 bytes); lines 3-7 (35 bytes) are not kept anywhere: read or \
             grep the file for the rest"
        );
    }

    #[test]
    fn memory_stays_at_the_caps_whatever_is_printed() {
        let mut full = FullOutput::with_caps(1000, 1000);
        let line = "y".repeat(99);
        for _ in 0..100_000 {
            full.push(Stream::Stdout, &line);
        }
        assert!(full.head.len() <= 1000 && full.tail.len() <= 1000);
        assert!(full.tail.capacity() < 4096, "{}", full.tail.capacity());
        let keeps = full.keeps();
        assert_eq!((keeps.lines, keeps.bytes), (100_000, 10_000_000));
        assert_eq!(keeps.dropped_bytes, 10_000_000 - 2000);
    }
}

//! The log against a model of the output: whatever is written, in whatever chunks, it
//! keeps exactly the head and the latest bytes, and reads give back those bytes.

use super::*;
use pretty_assertions::assert_eq;
use proptest::prelude::*;

fn log(head: u64, tail: u64) -> (tempfile::TempDir, ProcessLog, LogBudget) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("1.log");
    let file = std::fs::OpenOptions::new()
        .create_new(true)
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let budget = LogBudget::new(1 << 30);
    assert_eq!(budget.lease(head + tail), head + tail);
    let log = ProcessLog::new(path, file, head, tail, budget.clone());
    (dir, log, budget)
}

/// Output byte `i` of the test stream: distinct enough that a byte in the wrong
/// place shows.
fn byte(i: u64) -> u8 {
    (i % 251) as u8
}

fn stream(from: u64, to: u64) -> Vec<u8> {
    (from..to).map(byte).collect()
}

/// Every kept byte, read back through `read` from offset 0 on.
fn read_all(log: &ProcessLog) -> Vec<(u64, Vec<u8>)> {
    let mut pieces = Vec::new();
    let mut offset = 0;
    loop {
        let read = log.read(Some(offset), 1000).unwrap();
        if read.bytes.is_empty() {
            return pieces;
        }
        offset = read.from + read.bytes.len() as u64;
        match pieces.last_mut() {
            Some((start, bytes)) if *start + bytes.len() as u64 == read.from => {
                bytes.extend(read.bytes);
            }
            _ => pieces.push((read.from, read.bytes)),
        }
    }
}

fn expected(head: u64, tail: u64, written: u64) -> Vec<(u64, Vec<u8>)> {
    let head_end = written.min(head);
    let tail_start = if written > head {
        head.max(written.saturating_sub(tail))
    } else {
        written
    };
    let mut pieces = Vec::new();
    if tail_start == head_end {
        if written > 0 {
            pieces.push((0, stream(0, written)));
        }
        return pieces;
    }
    if head_end > 0 {
        pieces.push((0, stream(0, head_end)));
    }
    if written > tail_start {
        pieces.push((tail_start, stream(tail_start, written)));
    }
    pieces
}

proptest! {
    #[test]
    fn it_keeps_exactly_the_head_and_the_latest_bytes(
        head in 0u64..300,
        tail in 0u64..300,
        chunks in proptest::collection::vec(0usize..700, 0..20),
    ) {
        let (_dir, log, _budget) = log(head, tail);
        let mut written = 0u64;
        for len in chunks {
            log.write(&stream(written, written + len as u64));
            written += len as u64;
        }
        let kept = log.kept();
        prop_assert_eq!(kept.written, written);
        prop_assert_eq!(read_all(&log), expected(head, tail, written));
        // In order on disk after the end, with the same bytes at the same offsets.
        log.finish();
        prop_assert_eq!(read_all(&log), expected(head, tail, written));
        let on_disk = std::fs::read(log.path()).unwrap();
        prop_assert!(on_disk.len() as u64 <= head + tail + 200, "{} bytes on disk", on_disk.len());
    }
}

#[test]
fn a_flood_is_dropped_in_the_middle_and_the_file_says_so_once_ended() {
    let (_dir, log, budget) = log(10, 20);
    log.write(b"started ok\n");
    for _ in 0..1000 {
        log.write(&[b'y'; 1000]);
    }
    log.write(b"\nlast line\n");
    let kept = log.kept();
    assert_eq!(
        (kept.head_end, kept.tail_start, kept.end, kept.written),
        (10, 1_000_002, 1_000_022, 1_000_022)
    );
    assert_eq!(kept.dropped(), 999_992);
    assert_eq!(
        kept.describe(),
        "bytes 0-10 and 1000002-1000022 of its output (1000022 written; the 999992 in \
         between were dropped)"
    );
    // A reader following from inside the dropped range is told and moved on.
    let read = log.read(Some(500), 100).unwrap();
    assert_eq!(read.skipped, Some((500, 1_000_002)));
    assert_eq!(read.bytes, b"yyyyyyyyy\nlast line\n".to_vec());
    log.finish();
    let text = std::fs::read_to_string(log.path()).unwrap();
    assert_eq!(
        text,
        "started ok\n[toolgate: 999992 bytes of output dropped here (bytes 10-1000002 of \
         1000022): the log keeps the first 10 and the last 20 bytes]\nyyyyyyyyy\nlast line\n"
    );
    // The lease shrinks to the file, and is given back with it.
    assert_eq!(budget.leased(), text.len() as u64);
    log.remove(Removed::Read);
    assert_eq!(budget.leased(), 0);
    assert!(!log.path().exists());
    assert_eq!(log.read(Some(0), 100).unwrap().bytes, Vec::<u8>::new());
}

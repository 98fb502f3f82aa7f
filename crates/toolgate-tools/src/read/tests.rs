#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use pretty_assertions::assert_eq;
use toolgate_sandbox::Jail;

use super::*;
use crate::fs::Limits;

struct Setup {
    _dir: tempfile::TempDir,
    place: Located,
}

/// A file of `lines` numbered lines, a BOM first and every seventh line
/// ending in CRLF, well past the size where facts are kept.
fn setup(lines: u64) -> (Setup, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let mut data = text::BOM.as_bytes().to_vec();
    for n in 1..=lines {
        let ending = if n % 7 == 0 { "\r\n" } else { "\n" };
        data.extend_from_slice(format!("line number {n}{ending}").as_bytes());
    }
    assert!(data.len() as u64 > CACHE_MIN_BYTES);
    std::fs::write(dir.path().join("big.log"), &data).unwrap();
    let place = Located {
        jail: Arc::new(Jail::open(dir.path()).unwrap()),
        rel: PathBuf::from("big.log"),
        shown: "big.log".to_owned(),
    };
    (Setup { _dir: dir, place }, data)
}

fn page(s: &Setup, offset: u64, limit: u64, cache: &FactsCache) -> ToolOutput {
    let args = ReadArgs {
        path: "big.log".to_owned(),
        offset: Some(offset),
        limit: Some(limit),
    };
    read(&s.place, &args, &Limits::default(), cache).unwrap()
}

#[test]
fn pages_of_a_settled_file_come_from_its_kept_facts_and_match_a_full_scan() {
    let (s, data) = setup(120_000);
    // The file's times must lie clearly before the scan for its facts to be kept.
    std::thread::sleep(Duration::from_millis(1100));
    let cache = FactsCache::default();
    let first = page(&s, 100_000, 50, &cache);
    assert_eq!(cache.len(), 1, "the facts of a settled large file are kept");
    let facts = first.structured.clone().unwrap();
    assert_eq!(facts["total_lines"], 120_000);
    assert_eq!(facts["sha256"], text::sha256_hex(&data));
    assert_eq!(facts["bom"], true);
    assert_eq!(facts["line_endings"], "mixed");
    assert_eq!(page(&s, 100_000, 50, &cache), first);
    // Every page taken from the kept facts (a seek to the nearest noted line
    // start) equals the page a full scan gives, around the marks too.
    let m = MARK_EVERY;
    for (offset, limit) in [
        (1, 3),
        (m - 1, 3),
        (m, 1),
        (m + 1, 2),
        (2 * m + 1, 1),
        (3 * m - 5, 10),
        (119_998, 50),
        (120_000, 1),
    ] {
        let kept = page(&s, offset, limit, &cache);
        let scanned = page(&s, offset, limit, &FactsCache::default());
        assert_eq!(kept, scanned, "offset {offset}");
    }
    let past = ReadArgs {
        path: "big.log".to_owned(),
        offset: Some(120_001),
        limit: None,
    };
    let err = read(&s.place, &past, &Limits::default(), &cache).unwrap_err();
    assert!(err.to_string().contains("has 120000 lines"), "{err}");
}

#[test]
fn a_file_changed_moments_ago_is_scanned_whole_every_time() {
    let (s, mut data) = setup(100_000);
    let cache = FactsCache::default();
    page(&s, 10, 1, &cache);
    assert_eq!(
        cache.len(),
        0,
        "times this fresh could miss the next change"
    );
    // A change of the same size right after a scan shows in the next read.
    let at = data.len() - 3;
    data[at] = b'X';
    std::fs::write(s.place.jail.root().join("big.log"), &data).unwrap();
    let out = page(&s, 100_000, 1, &cache);
    assert_eq!(out.structured.unwrap()["sha256"], text::sha256_hex(&data));
}

#[test]
fn a_kept_file_that_changes_is_scanned_again() {
    let (s, mut data) = setup(100_000);
    std::thread::sleep(Duration::from_millis(1100));
    let cache = FactsCache::default();
    page(&s, 1, 1, &cache);
    assert_eq!(cache.len(), 1);
    data.extend_from_slice(b"one more\n");
    std::fs::write(s.place.jail.root().join("big.log"), &data).unwrap();
    let out = page(&s, 100_001, 1, &cache);
    let facts = out.structured.unwrap();
    assert_eq!(facts["total_lines"], 100_001);
    assert_eq!(facts["sha256"], text::sha256_hex(&data));
}

#[test]
fn line_numbers_are_written_in_decimal() {
    for n in [0, 7, 10, 99, 100, 123_456, 1_000_000, u64::MAX] {
        let mut buffer = [0; 20];
        assert_eq!(crate::fs::decimal(n, &mut buffer), n.to_string());
    }
}

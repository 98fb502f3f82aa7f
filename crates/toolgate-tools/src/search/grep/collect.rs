//! Per-file hits, the shared collector with its bounded memory, and the
//! paging of the sorted results.

use std::collections::BTreeMap;

use super::{GrepFileResult, GrepLine, GrepOptions, GrepReport, LineKind};

/// One stored line: its place in [`FileHits::text`].
#[derive(Debug, Clone, Copy)]
pub(super) struct Rec {
    pub line: u64,
    pub kind: LineKind,
    pub start: usize,
    pub end: usize,
}

/// One file's hits: texts share one buffer, so a line costs no allocation.
#[derive(Debug, Default)]
pub(super) struct FileHits {
    pub path: String,
    /// Matching lines in the file (exact).
    pub count: u64,
    /// Matching lines whose text is stored (at most the collector's need).
    pub stored: u64,
    pub text: String,
    pub recs: Vec<Rec>,
}

impl FileHits {
    pub fn clear(&mut self) {
        self.path.clear();
        self.count = 0;
        self.stored = 0;
        self.text.clear();
        self.recs.clear();
    }
}

/// Appends `bytes` (a line, its terminator dropped) lossily as UTF-8, cut
/// after `max_chars` chars with a `… [N more chars]` marker.
pub(super) fn push_line(out: &mut String, bytes: &[u8], max_chars: usize) {
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    if bytes.len() <= max_chars {
        out.push_str(&String::from_utf8_lossy(bytes));
        return;
    }
    // Chars are counted as UTF-8 lead bytes (invalid bytes count as one).
    let is_lead = |b: &u8| (*b & 0xC0) != 0x80;
    let mut seen = 0usize;
    let mut cut = bytes.len();
    for (i, b) in bytes.iter().enumerate() {
        if is_lead(b) {
            if seen == max_chars {
                cut = i;
                break;
            }
            seen += 1;
        }
    }
    if cut == bytes.len() {
        out.push_str(&String::from_utf8_lossy(bytes));
        return;
    }
    let rest = bytes[cut..].iter().filter(|b| is_lead(b)).count();
    out.push_str(&String::from_utf8_lossy(&bytes[..cut]));
    out.push_str(&format!("… [{rest} more chars]"));
}

/// Results of all threads, sorted by path. Files wholly past the page are
/// dropped as soon as enough earlier files are known, so memory stays near
/// `offset + limit` lines whatever the number of matches.
#[derive(Debug)]
pub(super) struct Collector {
    content: bool,
    need: u64,
    files: BTreeMap<String, FileHits>,
    /// Units (matching lines in content mode, else files) in `files`.
    held: u64,
    pub total_matches: u64,
    pub total_files: u64,
    pub searched: u64,
    pub binary: u64,
    pub unreadable: u64,
}

impl Collector {
    pub fn new(content: bool, need: usize) -> Collector {
        Collector {
            content,
            need: need as u64,
            files: BTreeMap::new(),
            held: 0,
            total_matches: 0,
            total_files: 0,
            searched: 0,
            binary: 0,
            unreadable: 0,
        }
    }

    fn units(&self, hits: &FileHits) -> u64 {
        if self.content { hits.count } else { 1 }
    }

    pub fn add(&mut self, hits: FileHits) {
        self.total_matches += hits.count;
        self.total_files += 1;
        self.held += self.units(&hits);
        self.files.insert(hits.path.clone(), hits);
        while self.files.len() > 1 {
            let Some(last) = self.files.last_key_value().map(|(_, h)| self.units(h)) else {
                break;
            };
            if self.held - last < self.need {
                break;
            }
            self.held -= last;
            self.files.pop_last();
        }
    }

    pub fn report(self, opts: &GrepOptions, context: bool) -> GrepReport {
        let total_units = if self.content {
            self.total_matches
        } else {
            self.total_files
        };
        let start = opts.offset as u64;
        let end = start.saturating_add(opts.limit as u64);
        let mut results = Vec::new();
        let mut seen = 0u64;
        for hits in self.files.into_values() {
            let units = if self.content { hits.count } else { 1 };
            let (lo, hi) = (start.max(seen), end.min(seen + units));
            if lo < hi {
                let matches = if self.content {
                    page_lines(
                        &hits,
                        lo - seen,
                        hi - seen,
                        opts.before as u64,
                        opts.after as u64,
                    )
                } else {
                    Vec::new()
                };
                results.push(GrepFileResult {
                    path: hits.path,
                    count: hits.count,
                    matches,
                });
            }
            seen += units;
            if seen >= end {
                break;
            }
        }
        let next = (end < total_units).then_some(opts.offset.saturating_add(opts.limit));
        GrepReport {
            mode: opts.mode,
            results,
            files_with_matches: self.total_files,
            total_matches: self.total_matches,
            files_searched: self.searched,
            binary_files_skipped: self.binary,
            unreadable_files_skipped: self.unreadable,
            truncated: next.is_some(),
            next_offset: next,
            stopped: None,
            stopped_note: None,
            context,
            offset: opts.offset,
        }
    }
}

/// The stored lines of matches `lo..hi` of a file, with the context lines
/// within `before`/`after` lines of those matches.
fn page_lines(hits: &FileHits, lo: u64, hi: u64, before: u64, after: u64) -> Vec<GrepLine> {
    // For each record: the (index, line) of the nearest match before it.
    let mut prev = Vec::with_capacity(hits.recs.len());
    let mut matches = 0u64;
    let mut last: Option<(u64, u64)> = None;
    for rec in &hits.recs {
        if rec.kind == LineKind::Match {
            last = Some((matches, rec.line));
            matches += 1;
        }
        prev.push(last);
    }
    let in_page = |index: u64| (lo..hi).contains(&index);
    let mut next: Option<(u64, u64)> = None;
    let mut keep = vec![false; hits.recs.len()];
    for (i, rec) in hits.recs.iter().enumerate().rev() {
        if rec.kind == LineKind::Match {
            keep[i] = prev[i].is_some_and(|(index, _)| in_page(index));
            next = prev[i];
            continue;
        }
        let near_prev = prev[i].is_some_and(|(index, l)| in_page(index) && rec.line <= l + after);
        let near_next = next.is_some_and(|(index, l)| in_page(index) && rec.line + before >= l);
        keep[i] = near_prev || near_next;
    }
    hits.recs
        .iter()
        .zip(keep)
        .filter(|(_, k)| *k)
        .map(|(rec, _)| GrepLine {
            line: rec.line,
            text: hits.text[rec.start..rec.end].to_owned(),
            kind: rec.kind,
        })
        .collect()
}

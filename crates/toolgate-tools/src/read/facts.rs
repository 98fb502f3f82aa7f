//! What a whole-file scan of `read` learned (line count, sha256, line
//! endings, where lines start), kept for large files so that paging through
//! one reads a page, not the whole file again for every page.

use std::collections::VecDeque;
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Smaller files are scanned whole on every call: that costs less than a
/// millisecond.
pub(super) const CACHE_MIN_BYTES: u64 = 1024 * 1024;
/// How many files' facts are kept.
const CACHE_ENTRIES: usize = 32;
/// Every this many lines the scan notes where the next line starts.
pub(super) const MARK_EVERY: u64 = 4096;
/// A file whose last change is more recent than this before the scan began
/// is not cached: file times are coarse (a few milliseconds), so a change
/// right after the scan could leave them as they were.
const SETTLED: Duration = Duration::from_secs(1);

/// Facts about a whole file.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Facts {
    pub total: u64,
    pub sha256: String,
    pub bom: bool,
    pub crlf: u64,
    pub lf: u64,
    /// `marks[k]`: byte offset where line `k * MARK_EVERY + 1` starts.
    pub marks: Vec<u64>,
}

impl Facts {
    /// The noted line start at or before `line`: (its line number, its offset).
    pub fn mark_before(&self, line: u64) -> (u64, u64) {
        let wanted = usize::try_from(line.saturating_sub(1) / MARK_EVERY).unwrap_or(usize::MAX);
        let index = wanted.min(self.marks.len().saturating_sub(1));
        let at = self.marks.get(index).copied().unwrap_or(0);
        (index as u64 * MARK_EVERY + 1, at)
    }
}

/// Which version of which file: any change to the contents changes the
/// size, the modification time or the change time (which no one can set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct FileKey {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl FileKey {
    pub fn of(meta: &Metadata) -> FileKey {
        FileKey {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }

    /// Whether the file last changed well before `scan_began`, so that a
    /// later change is sure to show in its times.
    pub fn settled(&self, scan_began: SystemTime) -> bool {
        let Some(limit) = scan_began
            .checked_sub(SETTLED)
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        else {
            return false;
        };
        let (secs, nanos) = self.ctime;
        match (u64::try_from(secs), u32::try_from(nanos)) {
            (Ok(secs), Ok(nanos)) => Duration::new(secs, nanos) < limit,
            _ => false,
        }
    }
}

/// The facts of the most recently read large files.
#[derive(Debug, Default)]
pub(super) struct FactsCache {
    entries: Mutex<VecDeque<(FileKey, Arc<Facts>)>>,
}

impl FactsCache {
    pub fn get(&self, key: &FileKey) -> Option<Arc<Facts>> {
        let mut entries = self.lock();
        let index = entries.iter().position(|(k, _)| k == key)?;
        let entry = entries.remove(index)?;
        let facts = entry.1.clone();
        entries.push_back(entry);
        Some(facts)
    }

    pub fn put(&self, key: FileKey, facts: Facts) {
        let mut entries = self.lock();
        // An older version of the same file is of no use any more.
        entries.retain(|(k, _)| (k.dev, k.ino) != (key.dev, key.ino));
        if entries.len() >= CACHE_ENTRIES {
            entries.pop_front();
        }
        entries.push_back((key, Arc::new(facts)));
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<(FileKey, Arc<Facts>)>> {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

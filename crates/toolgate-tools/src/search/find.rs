//! The `find` engine: lists entries whose path matches a glob, with the same
//! gitignore-aware walk as `grep`. Symlinks are reported, never followed.

use std::cmp::Ordering;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use ignore::WalkState;
use serde::{Deserialize, Serialize};
use toolgate_sandbox::{EntryKind, FileStat, Jail};

use crate::facts_schema;
use crate::search::stop::{Stop, Stopped};
use crate::search::walk::{self, PathGlobs, SearchError, Target, WalkOptions};

/// What kind of entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EntryType {
    File,
    Dir,
    Symlink,
}

/// The order of the results.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SortBy {
    #[default]
    Path,
    /// Newest first (then by path).
    Modified,
}

/// The options of [`find`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct FindOptions {
    /// A glob: without `/` it matches the entry's name at any depth ("*.rs");
    /// with `/` the path relative to the jail root or to the start
    /// ("src/**/*.rs"). `*` never crosses `/`. Empty: every entry.
    pub pattern: String,
    pub kind: Option<EntryType>,
    /// Size bounds in bytes; when set, only regular files are listed.
    pub min_size: Option<u64>,
    pub max_size: Option<u64>,
    pub hidden: bool,
    pub no_ignore: bool,
    pub sort: SortBy,
    pub offset: usize,
    pub limit: usize,
    /// Depth below the start (1: its direct entries).
    pub max_depth: Option<usize>,
}

impl Default for FindOptions {
    fn default() -> FindOptions {
        FindOptions {
            pattern: String::new(),
            kind: None,
            min_size: None,
            max_size: None,
            hidden: false,
            no_ignore: false,
            sort: SortBy::Path,
            offset: 0,
            limit: 100,
            max_depth: None,
        }
    }
}

/// One listed entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FindEntry {
    /// Relative to the jail root, `/`-separated.
    pub path: String,
    #[serde(rename = "type")]
    pub kind: EntryType,
    /// Bytes (for a symlink: the link itself).
    pub size: u64,
    /// Seconds since the Unix epoch.
    pub modified: Option<u64>,
}

/// What [`find`] found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FindReport {
    pub entries: Vec<FindEntry>,
    /// All matching entries, not just this page.
    pub total: u64,
    pub truncated: bool,
    pub next_offset: Option<usize>,
    /// Set when the walk ended before it had looked everywhere (its time
    /// limit, or a cancelled call): `total` counts what it saw.
    pub stopped: Option<Stopped>,
    #[serde(skip)]
    stopped_note: Option<String>,
    #[serde(skip)]
    offset: usize,
}

/// Lists the entries under `start` (relative to the jail root) that match.
pub fn find(jail: &Jail, start: &Path, opts: &FindOptions) -> Result<FindReport, SearchError> {
    find_until(jail, start, opts, &Stop::default())
}

/// [`find`], ending early (with what it found, marked partial) when `stop`
/// is reached.
pub fn find_until(
    jail: &Jail,
    start: &Path,
    opts: &FindOptions,
    stop: &Stop,
) -> Result<FindReport, SearchError> {
    let pattern = PathGlobs::new("the pattern", std::slice::from_ref(&opts.pattern))?;
    let walk_opts = WalkOptions {
        hidden: opts.hidden,
        no_ignore: opts.no_ignore,
        max_depth: opts.max_depth,
        ..WalkOptions::default()
    };
    let root = jail.root();
    let need = opts.offset.saturating_add(opts.limit);
    let best = Mutex::new(Best {
        entries: Vec::new(),
        total: 0,
        need,
        sort: opts.sort,
    });
    match walk::prepare(jail, start, &walk_opts)? {
        Target::File(rel) => {
            let stat = jail.stat(&rel)?;
            let abs = root.join(&rel);
            let mut entry = FindEntry {
                path: walk::display_rel(&rel),
                kind: EntryType::File,
                size: 0,
                modified: None,
            };
            entry.take_facts(&stat);
            if pattern.is_match(&abs, root, &abs) && wanted(opts, &entry) {
                lock(&best).push(entry);
            }
        }
        Target::Dir(builder) => {
            let start_abs = root.join(jail.relative(start)?);
            walk::run_parallel(&builder, || {
                let (best, pattern, start_abs) = (&best, &pattern, &start_abs);
                Box::new(move |entry| {
                    if stop.reached().is_some() {
                        return WalkState::Quit;
                    }
                    let Ok(entry) = entry else {
                        return WalkState::Continue;
                    };
                    if entry.depth() == 0 || !pattern.is_match(entry.path(), root, start_abs) {
                        return WalkState::Continue;
                    }
                    let Some(found) = describe(root, &entry) else {
                        return WalkState::Continue;
                    };
                    if wanted(opts, &found) {
                        lock(best).push(found);
                    }
                    WalkState::Continue
                })
            });
        }
    }
    let best = best
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut report = best.report(opts.offset);
    confirm(jail, opts, &mut report);
    report.stopped = stop.reached();
    report.stopped_note = report.stopped.map(|why| stop.describe(why));
    Ok(report)
}

/// The walker reads directories by path, so a directory swapped for a
/// symlink to the outside in the middle of a walk would show outside names.
/// Every reported entry is looked up again through the jail: one that is not
/// there, or lies outside, is left out, and the facts shown are the jail's.
fn confirm(jail: &Jail, opts: &FindOptions, report: &mut FindReport) {
    report.entries.retain_mut(|entry| {
        let Ok(stat) = jail.lstat(Path::new(&entry.path)) else {
            return false;
        };
        if stat.kind == EntryKind::Other {
            return false; // the walk reports no sockets or FIFOs either
        }
        entry.take_facts(&stat);
        wanted(opts, entry)
    });
}

impl FindEntry {
    fn take_facts(&mut self, stat: &FileStat) {
        self.kind = match stat.kind {
            EntryKind::Dir => EntryType::Dir,
            EntryKind::Symlink => EntryType::Symlink,
            EntryKind::File | EntryKind::Other => EntryType::File,
        };
        self.size = stat.size;
        self.modified = stat.modified.and_then(unix_seconds);
    }
}

fn lock(best: &Mutex<Best>) -> std::sync::MutexGuard<'_, Best> {
    best.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn describe(root: &Path, entry: &ignore::DirEntry) -> Option<FindEntry> {
    let file_type = entry.file_type()?;
    let kind = if file_type.is_symlink() {
        EntryType::Symlink
    } else if file_type.is_dir() {
        EntryType::Dir
    } else if file_type.is_file() {
        EntryType::File
    } else {
        return None;
    };
    // The walker does not follow symlinks, so this is lstat.
    let meta = entry.metadata().ok();
    Some(FindEntry {
        path: walk::rel_string(root, entry.path())?,
        kind,
        size: meta.as_ref().map_or(0, std::fs::Metadata::len),
        modified: meta.and_then(|m| m.modified().ok()).and_then(unix_seconds),
    })
}

fn wanted(opts: &FindOptions, entry: &FindEntry) -> bool {
    if opts.kind.is_some_and(|k| k != entry.kind) {
        return false;
    }
    if opts.min_size.is_some() || opts.max_size.is_some() {
        return entry.kind == EntryType::File
            && opts.min_size.is_none_or(|min| entry.size >= min)
            && opts.max_size.is_none_or(|max| entry.size <= max);
    }
    true
}

fn unix_seconds(time: SystemTime) -> Option<u64> {
    time.duration_since(UNIX_EPOCH).ok().map(|d| d.as_secs())
}

/// The first `need` entries in sort order, kept in bounded memory.
struct Best {
    entries: Vec<FindEntry>,
    total: u64,
    need: usize,
    sort: SortBy,
}

impl Best {
    fn push(&mut self, entry: FindEntry) {
        self.total += 1;
        self.entries.push(entry);
        if self.entries.len() >= self.need.saturating_mul(2).saturating_add(1024) {
            self.trim();
        }
    }

    fn trim(&mut self) {
        let sort = self.sort;
        self.entries.sort_unstable_by(|a, b| compare(sort, a, b));
        self.entries.truncate(self.need);
    }

    fn report(mut self, offset: usize) -> FindReport {
        self.trim();
        let entries: Vec<FindEntry> = self.entries.drain(..).skip(offset).collect();
        let end = offset.saturating_add(entries.len());
        let next = ((self.need as u64) < self.total).then_some(self.need);
        FindReport {
            entries,
            total: self.total,
            truncated: next.is_some(),
            next_offset: next.map(|n| n.max(end)),
            stopped: None,
            stopped_note: None,
            offset,
        }
    }
}

fn compare(sort: SortBy, a: &FindEntry, b: &FindEntry) -> Ordering {
    match sort {
        SortBy::Path => a.path.cmp(&b.path),
        SortBy::Modified => b
            .modified
            .cmp(&a.modified)
            .then_with(|| a.path.cmp(&b.path)),
    }
}

impl FindReport {
    /// The JSON Schema of a report as it serializes (the facts of `find`).
    pub(crate) fn facts_schema() -> serde_json::Value {
        use serde_json::json;
        let entry = facts_schema::object(
            json!({
                "path": {"type": "string", "description": "The entry, relative to the workspace."},
                "type": {"enum": ["file", "dir", "symlink"]},
                "size": {
                    "type": "integer",
                    "description": "Bytes (for a symlink: of the link itself).",
                },
                "modified": {
                    "type": ["integer", "null"],
                    "description": "Last modification, in seconds since the Unix epoch; null \
                                    when unknown.",
                },
            }),
            &["path", "type", "size", "modified"],
        );
        facts_schema::object(
            json!({
                "entries": {"type": "array", "items": entry, "description": "This page's entries."},
                "total": {
                    "type": "integer",
                    "description": "Entries that match (all of them, not only this page).",
                },
                "truncated": {
                    "type": "boolean",
                    "description": "More entries match than this page holds; call again with \
                                    offset=next_offset.",
                },
                "next_offset": {
                    "type": ["integer", "null"],
                    "description": "The offset of the next page; null on the last page.",
                },
                "stopped": {
                    "enum": ["time_limit", "cancelled", null],
                    "description": "Why the walk ended before it had looked everywhere (the \
                                    entries and total are partial); null when it finished.",
                },
            }),
            &["entries", "total", "truncated", "next_offset", "stopped"],
        )
    }

    /// One path per line (directories with a trailing `/`), then a
    /// continuation line when truncated, or `No entries found.`.
    /// A walk that stopped early says so on a last line.
    #[must_use]
    pub fn render(&self) -> String {
        let mut out = self.render_entries();
        if let Some(note) = &self.stopped_note {
            let _ = write!(out, "\n[{note}]");
        }
        out
    }

    fn render_entries(&self) -> String {
        let mut out = String::new();
        if self.total == 0 {
            return "No entries found.".to_owned();
        }
        for entry in &self.entries {
            out.push_str(&entry.path);
            if entry.kind == EntryType::Dir {
                out.push('/');
            }
            out.push('\n');
        }
        if self.entries.is_empty() {
            let _ = write!(
                out,
                "[no results at offset={}; {} entries in all]",
                self.offset, self.total
            );
        } else if let Some(next) = self.next_offset {
            let _ = write!(
                out,
                "[results {}-{} of {} entries; continue with offset={next}]",
                self.offset + 1,
                self.offset + self.entries.len(),
                self.total
            );
        } else {
            out.pop();
        }
        out
    }
}

#[cfg(test)]
mod tests;

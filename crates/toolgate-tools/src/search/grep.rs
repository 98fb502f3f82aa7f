//! The `grep` engine: a gitignore-aware, multi-threaded regex search over the
//! jail, with every file opened through [`Jail::open_file`].

mod collect;
mod render;

use std::io;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{
    BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkContextKind, SinkMatch,
};
use ignore::WalkState;
use serde::{Deserialize, Serialize};
use toolgate_core::Progress;
use toolgate_sandbox::Jail;

use self::collect::{Collector, FileHits, Rec};
use crate::facts_schema;
use crate::search::limits;
use crate::search::stop::{Stop, Stopped};
use crate::search::walk::{self, SearchError, Target, WalkOptions};

/// Largest heap buffer one search may use (a very long line, or a whole file
/// in multiline mode); a file that needs more is skipped as unreadable.
const HEAP_LIMIT: usize = 256 << 20;

/// How letter case is matched.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum CaseMode {
    #[default]
    Sensitive,
    Insensitive,
    /// Insensitive unless the pattern has an uppercase letter (rg's smart case).
    Smart,
}

/// What the report lists.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum GrepMode {
    /// Matching lines (with context).
    #[default]
    Content,
    /// Paths of files with at least one match.
    FilesWithMatches,
    /// Matching-line count per file.
    Count,
}

/// The options of [`grep`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct GrepOptions {
    pub pattern: String,
    /// Take the pattern literally.
    pub fixed_strings: bool,
    pub case: CaseMode,
    /// Only files matching one of these globs ("*.rs", "src/**").
    pub include: Vec<String>,
    /// Skip files and directories matching one of these globs.
    pub exclude: Vec<String>,
    /// Only files of these types (`ignore`'s defaults: "rust", "py", ...).
    pub types: Vec<String>,
    pub hidden: bool,
    pub no_ignore: bool,
    /// Context lines before and after each match (content mode).
    pub before: usize,
    pub after: usize,
    pub mode: GrepMode,
    /// Matching lines (content) or files (other modes) to skip.
    pub offset: usize,
    /// Matching lines (content) or files (other modes) to return.
    pub limit: usize,
    /// Longer lines are cut on a char boundary with `… [N more chars]`.
    pub max_line_chars: usize,
    /// Let matches span lines (`\n` may be matched).
    pub multiline: bool,
    /// Match whole words only.
    pub word: bool,
}

impl Default for GrepOptions {
    fn default() -> GrepOptions {
        GrepOptions {
            pattern: String::new(),
            fixed_strings: false,
            case: CaseMode::Sensitive,
            include: Vec::new(),
            exclude: Vec::new(),
            types: Vec::new(),
            hidden: false,
            no_ignore: false,
            before: 0,
            after: 0,
            mode: GrepMode::Content,
            offset: 0,
            limit: 100,
            max_line_chars: 500,
            multiline: false,
            word: false,
        }
    }
}

/// Whether a reported line matched or is context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LineKind {
    Match,
    Context,
}

/// One reported line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GrepLine {
    pub line: u64,
    pub text: String,
    pub kind: LineKind,
}

/// One file of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GrepFileResult {
    /// Relative to the jail root, `/`-separated.
    pub path: String,
    /// Matching lines in the whole file.
    pub count: u64,
    /// The page's lines of this file (content mode only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub matches: Vec<GrepLine>,
}

/// What [`grep`] found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GrepReport {
    pub mode: GrepMode,
    pub results: Vec<GrepFileResult>,
    /// Files with at least one match (all of them, not just this page).
    pub files_with_matches: u64,
    /// Matching lines in all files.
    pub total_matches: u64,
    pub files_searched: u64,
    pub binary_files_skipped: u64,
    /// Files that could not be opened or read, or that the jail refused.
    pub unreadable_files_skipped: u64,
    pub truncated: bool,
    pub next_offset: Option<usize>,
    /// Set when the search ended before it had looked everywhere (its time
    /// limit, or a cancelled call): the counts are of what it searched.
    pub stopped: Option<Stopped>,
    /// What the summary line says about `stopped`.
    #[serde(skip)]
    pub(crate) stopped_note: Option<String>,
    /// Context lines were asked for (group separators in `render`).
    #[serde(skip)]
    pub(crate) context: bool,
    #[serde(skip)]
    pub(crate) offset: usize,
}

impl GrepReport {
    /// The facts for a client, without the page's texts (those are in
    /// [`GrepReport::render`]): per file its path, its count and the line
    /// numbers of the page's matches.
    pub fn facts(&self) -> serde_json::Value {
        let results: Vec<serde_json::Value> = self
            .results
            .iter()
            .map(|file| {
                let lines: Vec<u64> = file
                    .matches
                    .iter()
                    .filter(|l| l.kind == LineKind::Match)
                    .map(|l| l.line)
                    .collect();
                let mut entry = serde_json::json!({"path": file.path, "count": file.count});
                if !lines.is_empty() {
                    entry["lines"] = serde_json::json!(lines);
                }
                entry
            })
            .collect();
        serde_json::json!({
            "mode": self.mode,
            "results": results,
            "files_with_matches": self.files_with_matches,
            "total_matches": self.total_matches,
            "files_searched": self.files_searched,
            "binary_files_skipped": self.binary_files_skipped,
            "unreadable_files_skipped": self.unreadable_files_skipped,
            "truncated": self.truncated,
            "next_offset": self.next_offset,
            "stopped": self.stopped,
        })
    }

    /// The JSON Schema of [`GrepReport::facts`].
    pub(crate) fn facts_schema() -> serde_json::Value {
        use serde_json::json;
        let file = facts_schema::object(
            json!({
                "path": {"type": "string", "description": "The file, relative to the workspace."},
                "count": {"type": "integer", "description": "Matching lines in the whole file."},
                "lines": {
                    "type": "array",
                    "items": {"type": "integer"},
                    "description": "content mode: the line numbers of this page's matches in \
                                    the file (absent in the other modes).",
                },
            }),
            &["path", "count"],
        );
        facts_schema::object(
            json!({
                "mode": {"enum": ["content", "files_with_matches", "count"]},
                "results": {
                    "type": "array",
                    "items": file,
                    "description": "This page's files, sorted by path.",
                },
                "files_with_matches": {
                    "type": "integer",
                    "description": "Files with at least one match (all of them, not only this \
                                    page).",
                },
                "total_matches": {
                    "type": "integer",
                    "description": "Matching lines in all files.",
                },
                "files_searched": {"type": "integer"},
                "binary_files_skipped": {"type": "integer"},
                "unreadable_files_skipped": {
                    "type": "integer",
                    "description": "Files that could not be opened or read, or were refused.",
                },
                "truncated": {
                    "type": "boolean",
                    "description": "There are more results than this page; call again with \
                                    offset=next_offset.",
                },
                "next_offset": {
                    "type": ["integer", "null"],
                    "description": "The offset of the next page (counting matching lines in \
                                    content mode, files otherwise); null on the last page.",
                },
                "stopped": {
                    "enum": ["time_limit", "cancelled", null],
                    "description": "Why the search ended before it had searched everything \
                                    (the results and counts are partial); null when it \
                                    finished.",
                },
            }),
            &[
                "mode",
                "results",
                "files_with_matches",
                "total_matches",
                "files_searched",
                "binary_files_skipped",
                "unreadable_files_skipped",
                "truncated",
                "next_offset",
                "stopped",
            ],
        )
    }
}

/// Searches `start` (relative to the jail root; a directory is walked, a file
/// is searched alone) for `opts.pattern`.
pub fn grep(jail: &Jail, start: &Path, opts: &GrepOptions) -> Result<GrepReport, SearchError> {
    grep_with_progress(jail, start, opts, &Progress::default(), &Stop::default())
}

/// How often a long search says how far it got, in files searched.
const PROGRESS_EVERY_FILES: u64 = 1000;

/// [`grep`], reporting `searched N files` to `progress` every
/// [`PROGRESS_EVERY_FILES`] files, so a client sees a long search move, and
/// ending early (with what it found, marked partial) when `stop` is reached.
pub fn grep_with_progress(
    jail: &Jail,
    start: &Path,
    opts: &GrepOptions,
    progress: &Progress,
    stop: &Stop,
) -> Result<GrepReport, SearchError> {
    let matcher = build_matcher(opts)?;
    let walk_opts = WalkOptions {
        hidden: opts.hidden,
        no_ignore: opts.no_ignore,
        include: opts.include.clone(),
        exclude: opts.exclude.clone(),
        types: opts.types.clone(),
        max_depth: None,
    };
    let target = walk::prepare(jail, start, &walk_opts)?;
    let content = opts.mode == GrepMode::Content;
    let (before, after) = if content {
        (opts.before, opts.after)
    } else {
        (0, 0)
    };
    let mut searcher_builder = SearcherBuilder::new();
    searcher_builder
        .line_number(true)
        .binary_detection(BinaryDetection::quit(b'\0'))
        .before_context(before)
        .after_context(after)
        .multi_line(opts.multiline)
        .heap_limit(Some(HEAP_LIMIT));
    let need = opts.offset.saturating_add(opts.limit);
    let collector = Mutex::new(Collector::new(content, need));
    let keep = if content { need as u64 } else { 0 };
    let job = Job::new(
        jail,
        &matcher,
        &collector,
        keep,
        opts.max_line_chars,
        progress,
        stop,
    );
    match target {
        Target::File(rel) => {
            let mut worker = job.worker(&searcher_builder);
            let mut hits = FileHits::default();
            job.search(&mut worker, &rel, walk::display_rel(&rel), &mut hits);
        }
        Target::Dir(builder) => {
            let root = jail.root();
            walk::run_parallel(&builder, || {
                let mut worker = job.worker(&searcher_builder);
                let mut hits = FileHits::default();
                let job = &job;
                Box::new(move |entry| {
                    if job.stop.reached().is_some() {
                        return WalkState::Quit;
                    }
                    let Ok(entry) = entry else {
                        job.unreadable.fetch_add(1, Relaxed);
                        return WalkState::Continue;
                    };
                    if !entry.file_type().is_some_and(|t| t.is_file()) {
                        return WalkState::Continue;
                    }
                    let abs = entry.path();
                    let (Ok(rel), Some(shown)) =
                        (abs.strip_prefix(root), walk::rel_string(root, abs))
                    else {
                        return WalkState::Continue;
                    };
                    job.search(&mut worker, rel, shown, &mut hits);
                    WalkState::Continue
                })
            });
        }
    }
    job.finish();
    let collector = collector
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut report = collector.report(opts, before > 0 || after > 0);
    report.stopped = stop.reached();
    report.stopped_note = report.stopped.map(|why| stop.describe(why));
    Ok(report)
}

fn build_matcher(opts: &GrepOptions) -> Result<RegexMatcher, SearchError> {
    limits::check_length(
        "pattern",
        &opts.pattern,
        limits::MAX_PATTERN_CHARS,
        "search for a shorter, distinctive part of it (with fixed_strings: true for literal \
         text), or run several searches",
    )?;
    let mut builder = RegexMatcherBuilder::new();
    builder
        // Ripgrep's own defaults (100 MiB, 1000 MiB per thread) let one
        // pattern take gigabytes; see `limits`.
        .size_limit(limits::REGEX_SIZE_LIMIT)
        .dfa_size_limit(limits::REGEX_DFA_CACHE_LIMIT)
        .fixed_strings(opts.fixed_strings)
        .word(opts.word)
        .multi_line(true)
        .case_insensitive(opts.case == CaseMode::Insensitive)
        .case_smart(opts.case == CaseMode::Smart);
    if opts.multiline {
        builder.dot_matches_new_line(false);
    } else {
        builder.line_terminator(Some(b'\n'));
    }
    builder.build(&opts.pattern).map_err(|e| {
        let message = e.to_string();
        // grep-regex says so only in its text ("compiled regex exceeds size
        // limit of N"); a test pins it.
        if message.contains("exceeds size limit") {
            return SearchError::RegexTooBig {
                pattern: limits::shown(&opts.pattern),
            };
        }
        let special = opts.pattern.chars().any(|c| "()[]{}*+?|\\^$.".contains(c));
        let hint = if message.contains("\\n") || message.contains("line terminator") {
            "; to match across lines set multiline: true".to_owned()
        } else if !opts.fixed_strings && special {
            "; to search for this text literally, set fixed_strings: true".to_owned()
        } else {
            String::new()
        };
        SearchError::InvalidRegex {
            pattern: limits::shown(&opts.pattern),
            message,
            hint,
        }
    })
}

/// What every search thread shares.
struct Job<'a> {
    jail: &'a Jail,
    matcher: &'a RegexMatcher,
    collector: &'a Mutex<Collector>,
    /// Matching lines whose text is stored per file (0: store none).
    keep: u64,
    max_chars: usize,
    progress: &'a Progress,
    stop: &'a Stop,
    searched: AtomicU64,
    binary: AtomicU64,
    unreadable: AtomicU64,
}

impl Job<'_> {
    fn new<'a>(
        jail: &'a Jail,
        matcher: &'a RegexMatcher,
        collector: &'a Mutex<Collector>,
        keep: u64,
        max_chars: usize,
        progress: &'a Progress,
        stop: &'a Stop,
    ) -> Job<'a> {
        Job {
            jail,
            matcher,
            collector,
            keep,
            max_chars,
            progress,
            stop,
            searched: AtomicU64::new(0),
            binary: AtomicU64::new(0),
            unreadable: AtomicU64::new(0),
        }
    }

    /// Moves the file counters into the collector.
    fn finish(&self) {
        let mut collector = self.lock();
        collector.searched = self.searched.load(Relaxed);
        collector.binary = self.binary.load(Relaxed);
        collector.unreadable = self.unreadable.load(Relaxed);
    }

    fn worker(&self, builder: &SearcherBuilder) -> Worker {
        Worker {
            searcher: builder.build(),
            matcher: self.matcher.clone(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Collector> {
        self.collector
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Searches one file (opened through the jail) and hands its hits over.
    /// `worker` carries the thread's own searcher and matcher (a cloned
    /// matcher has its own cache pool: sharing one makes threads contend).
    fn search(&self, worker: &mut Worker, rel: &Path, shown: String, hits: &mut FileHits) {
        hits.clear();
        let Ok((file, _)) = self.jail.open_file(rel) else {
            self.unreadable.fetch_add(1, Relaxed);
            return;
        };
        let mut sink = FileSink {
            hits,
            keep: self.keep,
            max_chars: self.max_chars,
            binary: false,
        };
        let result =
            worker
                .searcher
                .search_reader(&worker.matcher, self.stop.reader(&file), &mut sink);
        if self.stop.reached().is_some() {
            // Cut short: neither searched nor unreadable.
            return;
        }
        let binary = sink.binary;
        let searched = self.searched.fetch_add(1, Relaxed) + 1;
        if searched.is_multiple_of(PROGRESS_EVERY_FILES) {
            self.progress.report(&format!("searched {searched} files"));
        }
        if result.is_err() {
            self.unreadable.fetch_add(1, Relaxed);
        } else if binary {
            self.binary.fetch_add(1, Relaxed);
        } else if hits.count > 0 {
            hits.path = shown;
            self.lock().add(std::mem::take(hits));
        }
    }
}

/// One search thread's own state.
struct Worker {
    searcher: Searcher,
    matcher: RegexMatcher,
}

/// Collects one file's matching lines (and context) into a [`FileHits`].
struct FileSink<'a> {
    hits: &'a mut FileHits,
    keep: u64,
    max_chars: usize,
    binary: bool,
}

impl FileSink<'_> {
    fn push(&mut self, line: u64, kind: LineKind, bytes: &[u8]) {
        let start = self.hits.text.len();
        collect::push_line(&mut self.hits.text, bytes, self.max_chars);
        self.hits.recs.push(Rec {
            line,
            kind,
            start,
            end: self.hits.text.len(),
        });
    }
}

impl Sink for FileSink<'_> {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, m: &SinkMatch<'_>) -> Result<bool, io::Error> {
        for (line, bytes) in (m.line_number().unwrap_or(0)..).zip(m.lines()) {
            if self.hits.stored < self.keep {
                self.push(line, LineKind::Match, bytes);
                self.hits.stored += 1;
            }
            self.hits.count += 1;
        }
        Ok(true)
    }

    fn context(&mut self, _: &Searcher, c: &SinkContext<'_>) -> Result<bool, io::Error> {
        let after = matches!(c.kind(), SinkContextKind::After);
        // Before-context belongs to the next match, stored only while there is
        // room; after-context to the last match, stored if that one was.
        let wanted = if after {
            self.hits.stored == self.hits.count && self.hits.stored > 0
        } else {
            self.hits.stored < self.keep
        };
        if wanted {
            self.push(c.line_number().unwrap_or(0), LineKind::Context, c.bytes());
        }
        Ok(true)
    }

    fn binary_data(&mut self, _: &Searcher, _: u64) -> Result<bool, io::Error> {
        self.binary = true;
        Ok(false)
    }
}

#[cfg(test)]
mod tests;

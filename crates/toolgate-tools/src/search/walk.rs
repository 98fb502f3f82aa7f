//! Shared walker setup for the `grep` and `find` engines.
//!
//! Both engines walk the workspace with the `ignore` crate: ignore files
//! (`.gitignore`, `.ignore`, `.git/info/exclude`) are honoured even outside a
//! git repository, hidden entries are skipped unless asked for, `.git` is
//! always skipped and symlinks are never followed. Ignore files of the
//! directories between the jail root and the start directory are read through
//! the jail (never above the root). Paths are reported relative to the jail
//! root with `/` separators.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::types::TypesBuilder;
use ignore::{DirEntry, Match, WalkBuilder};
use toolgate_sandbox::{EntryKind, Jail, JailError};

use super::limits;

/// Largest ignore file read from the directories above the start.
const IGNORE_FILE_LIMIT: u64 = 1 << 20;

/// Why a search could not start.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// The regular expression does not compile.
    #[error("invalid regex {pattern}: {message}{hint}")]
    InvalidRegex {
        /// Quoted, and cut for showing.
        pattern: String,
        message: String,
        /// Empty, or a sentence (with a leading separator) saying what to try.
        hint: String,
    },
    /// The regular expression parses but compiles to more than
    /// [`limits::REGEX_SIZE_LIMIT`] (`pattern` is already cut for showing).
    #[error(
        "the regex {pattern} compiles to more than the limit of {} MiB; simplify it: \
         counted repetitions multiply (`\\w{{1000}}{{1000}}` is a million `\\w`), and \
         Unicode classes such as `\\w` are large (`(?-u:\\w)` is the ASCII-only one); \
         for literal text set fixed_strings: true",
        limits::REGEX_SIZE_LIMIT >> 20
    )]
    RegexTooBig { pattern: String },
    /// A pattern or glob longer than [`limits`] accepts, refused before it
    /// is parsed.
    #[error("the {what} is {chars} characters long, over the limit of {limit}; {advice}")]
    TooLong {
        what: &'static str,
        chars: usize,
        limit: usize,
        advice: &'static str,
    },
    /// More globs or types than [`limits`] accepts.
    #[error("{what} has {count} entries, over the limit of {limit}; {advice}")]
    TooMany {
        what: &'static str,
        count: usize,
        limit: usize,
        advice: &'static str,
    },
    /// A glob (find pattern, include or exclude) does not parse, or the
    /// globs together compile to more than globset's limit (`glob` is
    /// already cut for showing).
    #[error("invalid glob {glob}: {message}")]
    InvalidGlob { glob: String, message: String },
    /// A file type name that `ignore`'s default type table does not know.
    #[error("unknown file type {name}; valid types include: {examples} (and more)")]
    UnknownType { name: String, examples: String },
    /// The start path is refused or missing.
    #[error(transparent)]
    Jail(#[from] JailError),
}

/// Walk options shared by both engines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WalkOptions {
    /// Also visit hidden (dot) files and directories (`.git` stays skipped).
    pub hidden: bool,
    /// Do not read `.gitignore` / `.ignore` / `.git/info/exclude`.
    pub no_ignore: bool,
    /// Only files matching one of these globs (empty: all files).
    pub include: Vec<String>,
    /// Skip files and directories matching one of these globs.
    pub exclude: Vec<String>,
    /// Only files of these `ignore` default types ("rust", "py", ...).
    pub types: Vec<String>,
    /// Maximum depth below the start (0: the start only).
    pub max_depth: Option<usize>,
}

/// Globs matched like `find`/`rg -g`: a glob without `/` matches the entry's
/// name at any depth; one with `/` matches the path relative to the jail root
/// or relative to the start directory. `*` never crosses a `/`.
#[derive(Debug, Clone)]
pub struct PathGlobs {
    names: GlobSet,
    paths: GlobSet,
    len: usize,
}

impl PathGlobs {
    /// `what` names the list in errors: "include", "exclude", "the pattern".
    pub fn new(what: &'static str, globs: &[String]) -> Result<PathGlobs, SearchError> {
        limits::check_count(
            what,
            globs.len(),
            limits::MAX_GLOBS,
            "merge them into fewer globs (`*.{rs,toml}`, `{src,tests}/**`) or search a narrower path",
        )?;
        for raw in globs {
            limits::check_length(
                "glob",
                raw,
                limits::MAX_GLOB_CHARS,
                "a glob names a path; use `*` and `**` instead of spelling every name out",
            )?;
        }
        let mut names = GlobSetBuilder::new();
        let mut paths = GlobSetBuilder::new();
        for raw in globs {
            let mut text = raw.trim();
            while let Some(rest) = text.strip_prefix("./") {
                text = rest;
            }
            let text = text.trim_start_matches('/').trim_end_matches('/');
            let text = if text.is_empty() { "**" } else { text };
            let glob = GlobBuilder::new(text)
                .literal_separator(true)
                .backslash_escape(true)
                .build()
                .map_err(|e| SearchError::InvalidGlob {
                    glob: limits::shown(raw),
                    message: e.kind().to_string(),
                })?;
            if text.contains('/') {
                paths.add(glob);
            } else {
                names.add(glob);
            }
        }
        let build = |set: GlobSetBuilder| {
            set.build().map_err(|e| SearchError::InvalidGlob {
                glob: limits::shown(&globs.join(", ")),
                message: e.to_string(),
            })
        };
        Ok(PathGlobs {
            names: build(names)?,
            paths: build(paths)?,
            len: globs.len(),
        })
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `abs` is an absolute path under `root` and `start` (both absolute).
    #[must_use]
    pub fn is_match(&self, abs: &Path, root: &Path, start: &Path) -> bool {
        if let Some(name) = abs.file_name()
            && self.names.is_match(Path::new(name))
        {
            return true;
        }
        if self.paths.is_empty() {
            return false;
        }
        let under = |base: &Path| {
            abs.strip_prefix(base)
                .is_ok_and(|rel| !rel.as_os_str().is_empty() && self.paths.is_match(rel))
        };
        under(root) || under(start)
    }
}

/// What the start path turned out to be.
pub(crate) enum Target {
    /// A single file (path relative to the jail root): searched alone.
    File(PathBuf),
    /// A directory: walk it with this builder.
    Dir(Box<WalkBuilder>),
}

/// Checks `start` through the jail and prepares the walk.
pub(crate) fn prepare(
    jail: &Jail,
    start: &Path,
    opts: &WalkOptions,
) -> Result<Target, SearchError> {
    let rel = jail.relative(start)?;
    let stat = jail.stat(&rel)?;
    if stat.kind != EntryKind::Dir {
        return Ok(Target::File(rel));
    }
    let root = jail.root().to_path_buf();
    let start_abs = root.join(&rel);
    // toolgate's own state, when it lies inside the root, is walked neither
    // as the start (also not through a symlink to it) nor on the way.
    let real = std::fs::canonicalize(&start_abs).unwrap_or_else(|_| start_abs.clone());
    let real_rel = real.strip_prefix(&root).unwrap_or(&rel);
    if jail.is_concealed(&rel) || jail.is_concealed(real_rel) {
        return Err(JailError::Concealed { path: rel }.into());
    }
    let concealed = jail.concealed().iter().map(|c| root.join(c)).collect();
    let types = build_types(&opts.types)?;
    let include = PathGlobs::new("include", &opts.include)?;
    let exclude = PathGlobs::new("exclude", &opts.exclude)?;
    let ancestors = if opts.no_ignore {
        Vec::new()
    } else {
        ancestor_ignores(jail, &rel)
    };
    let filter = Arc::new(EntryFilter {
        root,
        concealed,
        start: start_abs.clone(),
        include,
        exclude,
        ancestors,
    });
    let mut builder = WalkBuilder::new(&start_abs);
    let ignores = !opts.no_ignore;
    builder
        .follow_links(false)
        .hidden(!opts.hidden)
        .parents(false)
        .git_global(false)
        .git_ignore(ignores)
        .git_exclude(ignores)
        .ignore(ignores)
        .require_git(false)
        .max_depth(opts.max_depth)
        .threads(threads())
        .types(types)
        .filter_entry(move |entry| filter.keep(entry));
    Ok(Target::Dir(Box::new(builder)))
}

/// Walks `builder`'s tree on threads of its own, each visiting entries
/// through a visitor from `visitors`, then gives what the walk freed back
/// to the system.
///
/// The walk's threads allocate from a malloc arena of their own (`toolgate
/// mcp` allows one per core), and glibc keeps every page an arena touched:
/// eleven `find`s over the bench's tree of 4,000 files left about 1 MB of
/// freed directory readers, ignore matchers and entries resident in a
/// server, for as long as it ran. `malloc_trim` hands every whole free page
/// of every arena back, for under 1% of a walk's processor time.
pub(crate) fn run_parallel<'s>(
    builder: &ignore::WalkBuilder,
    visitors: impl FnMut() -> Visitor<'s>,
) {
    builder.build_parallel().run(visitors);
    release_freed_memory();
}

/// What a walk's thread calls for each entry it comes to.
pub(crate) type Visitor<'s> =
    Box<dyn FnMut(Result<ignore::DirEntry, ignore::Error>) -> ignore::WalkState + Send + 's>;

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn release_freed_memory() {
    // SAFETY: malloc_trim takes each arena's lock and only returns free
    // pages; it is safe to call from any thread at any time.
    unsafe { libc::malloc_trim(0) };
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn release_freed_memory() {}

/// Threads for a parallel walk: the machine's available parallelism.
pub(crate) fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
}

/// `abs` relative to `root`, with `/` separators (lossy for non-UTF-8).
pub(crate) fn rel_string(root: &Path, abs: &Path) -> Option<String> {
    let rel = abs.strip_prefix(root).ok()?;
    let text = rel.to_string_lossy();
    Some(if std::path::MAIN_SEPARATOR == '/' {
        text.into_owned()
    } else {
        text.replace(std::path::MAIN_SEPARATOR, "/")
    })
}

/// A relative path (as the jail takes it) with `/` separators.
pub(crate) fn display_rel(rel: &Path) -> String {
    rel.to_string_lossy()
        .replace(std::path::MAIN_SEPARATOR, "/")
}

fn build_types(names: &[String]) -> Result<ignore::types::Types, SearchError> {
    limits::check_count(
        "types",
        names.len(),
        limits::MAX_TYPES,
        "name fewer types, or use include globs",
    )?;
    let mut builder = TypesBuilder::new();
    builder.add_defaults();
    if names.is_empty() {
        return Ok(ignore::types::Types::empty());
    }
    let defs = builder.definitions();
    for name in names {
        if !defs.iter().any(|d| d.name() == name) {
            let examples = [
                "rust", "py", "js", "ts", "go", "c", "cpp", "java", "md", "json", "toml", "yaml",
                "sh",
            ]
            .into_iter()
            .filter(|n| defs.iter().any(|d| d.name() == *n))
            .collect::<Vec<_>>()
            .join(", ");
            return Err(SearchError::UnknownType {
                name: limits::shown(name),
                examples,
            });
        }
        builder.select(name);
    }
    builder.build().map_err(|e| SearchError::UnknownType {
        name: limits::shown(&names.join(", ")),
        examples: e.to_string(),
    })
}

/// Ignore files of the directories from the jail root down to the start's
/// parent, deepest first; in each directory `.ignore` before `.gitignore`
/// before `.git/info/exclude` (the walker reads the start's own).
fn ancestor_ignores(jail: &Jail, rel: &Path) -> Vec<Gitignore> {
    let mut dirs = vec![PathBuf::new()];
    let mut current = PathBuf::new();
    let components: Vec<Component<'_>> = rel.components().collect();
    for component in components.iter().take(components.len().saturating_sub(1)) {
        match component {
            Component::Normal(name) => {
                current.push(name);
                dirs.push(current.clone());
            }
            // `..` in the start: its physical ancestors are unclear; use none.
            _ => return Vec::new(),
        }
    }
    if components.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for dir in dirs.iter().rev() {
        for name in [".ignore", ".gitignore", ".git/info/exclude"] {
            if let Some(gi) = read_ignore(jail, dir, name) {
                out.push(gi);
            }
        }
    }
    out
}

fn read_ignore(jail: &Jail, dir: &Path, name: &str) -> Option<Gitignore> {
    let data = jail.read(&dir.join(name), IGNORE_FILE_LIMIT).ok()?;
    let mut builder = GitignoreBuilder::new(jail.root().join(dir));
    for line in String::from_utf8_lossy(&data).lines() {
        // A bad line is skipped, like git does.
        let _ = builder.add_line(None, line);
    }
    builder.build().ok().filter(|gi| !gi.is_empty())
}

/// The walker's `filter_entry`: `.git`, exclude/include globs and the ignore
/// rules of the directories above the start.
struct EntryFilter {
    root: PathBuf,
    /// Absolute; never entered or listed (see [`Jail::conceal`]).
    concealed: Vec<PathBuf>,
    start: PathBuf,
    include: PathGlobs,
    exclude: PathGlobs,
    ancestors: Vec<Gitignore>,
}

impl EntryFilter {
    fn keep(&self, entry: &DirEntry) -> bool {
        if entry.depth() == 0 {
            return true;
        }
        if entry.file_name() == ".git" {
            return false;
        }
        let path = entry.path();
        if self.concealed.iter().any(|c| path.starts_with(c)) {
            return false;
        }
        let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
        for gi in &self.ancestors {
            match gi.matched(path, is_dir) {
                Match::Ignore(_) => return false,
                Match::Whitelist(_) => break,
                Match::None => {}
            }
        }
        if !self.exclude.is_empty() && self.exclude.is_match(path, &self.root, &self.start) {
            return false;
        }
        if is_dir || self.include.is_empty() {
            return true;
        }
        self.include.is_match(path, &self.root, &self.start)
    }
}

/// Fixtures shared by the engines' tests, and the walker's own tests.
#[cfg(test)]
pub(crate) mod tests;

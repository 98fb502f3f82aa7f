//! The patch engine of the `apply_patch` tool.
//!
//! Two input formats are accepted and detected automatically by [`parse`]:
//!
//! * the *envelope* format used by coding agents (`*** Begin Patch` …
//!   `*** End Patch`, with `*** Add File:`, `*** Delete File:` and
//!   `*** Update File:` sections), see [`envelope`];
//! * standard unified diffs as written by `diff -u` and `git diff`, see
//!   [`unified`].
//!
//! Both are parsed into the same [`Patch`] of [`FileOp`]s. Updates carry
//! [`Hunk`]s, which [`apply_hunks`] applies to the text of one file, finding
//! the hunk's old lines with lenient matching ([`MatchPass`], see [`seek`]).
//! Touching the file system is left to the caller: ops run in order against a
//! virtual tree and any failure must leave the real tree unchanged.
#![deny(clippy::unwrap_used, clippy::expect_used)]

pub mod apply;
pub(crate) mod commit;
pub mod envelope;
pub mod mode;
pub mod seek;
pub mod unified;

#[cfg(test)]
mod tests;

pub use apply::{Applied, apply_hunks};
pub use mode::FileMode;
pub use seek::MatchPass;

/// Which syntax a patch was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchFormat {
    /// `*** Begin Patch` … `*** End Patch`.
    Envelope,
    /// `--- a/x` / `+++ b/x` / `@@ -l,s +l,s @@`.
    Unified,
}

/// A parsed patch: file operations to run in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patch {
    pub format: PatchFormat,
    pub ops: Vec<FileOp>,
}

/// One operation on one file. Paths are relative, normalised (`./a` is `a`)
/// and never leave the workspace root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileOp {
    /// content: the new file's text, "\n" line endings, ends with "\n"
    /// (unless a unified diff says "\ No newline at end of file"; an empty
    /// file is "").
    /// mode: a git diff's `new file mode` (None: the jail's default).
    Add {
        path: String,
        content: String,
        mode: Option<FileMode>,
    },
    Delete {
        path: String,
    },
    /// `hunks` may be empty only when `move_to` or `mode` is set (a pure
    /// rename, a mode change). mode: a git diff's `new mode` (None: kept).
    Update {
        path: String,
        move_to: Option<String>,
        hunks: Vec<Hunk>,
        mode: Option<FileMode>,
    },
}

impl FileOp {
    /// The path the op reads or creates first.
    pub fn path(&self) -> &str {
        match self {
            FileOp::Add { path, .. } | FileOp::Delete { path } | FileOp::Update { path, .. } => {
                path
            }
        }
    }
}

/// One line of a hunk, without its prefix character and line ending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HunkLine {
    /// ` text`: must be present, is kept as it is in the file.
    Context(String),
    /// `-text`: must be present, is removed.
    Remove(String),
    /// `+text`: is inserted.
    Add(String),
}

impl HunkLine {
    pub fn text(&self) -> &str {
        match self {
            HunkLine::Context(t) | HunkLine::Remove(t) | HunkLine::Add(t) => t,
        }
    }
}

/// A change to a contiguous range of lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hunk {
    /// `@@ text` lines (envelope): each is found in turn from the cursor
    /// before the old lines are searched for after the last one.
    pub anchors: Vec<String>,
    /// The body in order; old lines are Context+Remove, new lines
    /// Context+Add.
    pub lines: Vec<HunkLine>,
    /// The old lines must be at the end of the file (`*** End of File`, or
    /// a unified `\ No newline at end of file` marker).
    pub end_of_file: bool,
    /// 1-based line in the old file where the old lines start (unified
    /// `@@ -l,s` header); for an empty old side, the line after which to
    /// insert (0 = at the top).
    pub line_hint: Option<usize>,
    /// The last old line had `\ No newline at end of file`.
    pub old_no_newline: bool,
    /// The last new line had `\ No newline at end of file`.
    pub new_no_newline: bool,
}

impl Hunk {
    /// The lines the hunk expects to find (context and removed lines).
    pub fn old_lines(&self) -> Vec<&str> {
        self.lines
            .iter()
            .filter(|l| !matches!(l, HunkLine::Add(_)))
            .map(HunkLine::text)
            .collect()
    }

    /// The lines the hunk leaves (context and added lines).
    pub fn new_lines(&self) -> Vec<&str> {
        self.lines
            .iter()
            .filter(|l| !matches!(l, HunkLine::Remove(_)))
            .map(HunkLine::text)
            .collect()
    }

    /// True when the hunk changes nothing (only context lines).
    pub fn is_context_only(&self) -> bool {
        self.lines.iter().all(|l| matches!(l, HunkLine::Context(_)))
    }
}

/// Everything that can go wrong while parsing or applying a patch. Every
/// message says what was wrong and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    #[error("apply_patch: line {line}: {message}")]
    Parse { line: usize, message: String },
    #[error(
        "apply_patch: unrecognised patch format; two formats are accepted.\n\
         1. the envelope format:\n  *** Begin Patch\n  *** Update File: path/to/file\n  @@\n  -old line\n  +new line\n  *** End Patch\n\
         2. a unified diff (diff -u / git diff):\n  --- a/path/to/file\n  +++ b/path/to/file\n  @@ -1,1 +1,1 @@\n  -old line\n  +new line"
    )]
    UnknownFormat,
    #[error(
        "apply_patch: the patch contains no file operations; add at least one `*** Add File:`, `*** Delete File:` or `*** Update File:` section (or one file diff)"
    )]
    Empty,
    #[error(
        "apply_patch: `*** Update File: {path}` has no hunks; add `@@` hunks with ' ', '-' and '+' lines (a move without changes needs `*** Move to:`)"
    )]
    NoHunks { path: String },
    #[error(
        "apply_patch: invalid path {path:?}: {reason}; use a path relative to the workspace root, like `src/main.rs`"
    )]
    InvalidPath { path: String, reason: String },
    #[error(
        "{path}: hunk {hunk} did not match: expected these lines (after line {after}):\n{expected}\nre-read the file and copy the context and '-' lines exactly"
    )]
    NoMatch {
        path: String,
        hunk: usize,
        after: usize,
        expected: String,
    },
    #[error(
        "{path}: hunk {hunk} overlaps or comes before hunk {previous} (it would apply at line {line}, but hunk {previous} ended at line {end}); order hunks by position and do not let them overlap"
    )]
    Overlap {
        path: String,
        hunk: usize,
        previous: usize,
        line: usize,
        end: usize,
    },
    #[error("{path}: cannot add the file: it already exists; use `*** Update File:` to change it")]
    AlreadyExists { path: String },
    #[error("{path}: cannot {action} the file: it does not exist; check the path")]
    NotFound { path: String, action: String },
    #[error(
        "{path}: cannot move to {to}: the destination already exists; delete it first or choose another name"
    )]
    MoveDestinationExists { path: String, to: String },
    #[error("{path}: cannot create the file: {parent} is not a directory")]
    NotADirectory { path: String, parent: String },
    #[error("{path}: the file is not valid UTF-8 text; apply_patch only edits text files")]
    NotText { path: String },
}

/// Parses a patch in either accepted format (detected from its text).
pub fn parse(text: &str) -> Result<Patch, PatchError> {
    let lines = split_patch_lines(text);
    let (start, end) = unwrap_lines(&lines);
    let body = &lines[start..end];
    let first = body.iter().position(|l| !l.trim().is_empty());
    let Some(first) = first else {
        return Err(PatchError::Empty);
    };
    let ops = if body[first].trim() == envelope::BEGIN {
        envelope::parse_lines(body, start)?
    } else if unified::looks_unified(body) {
        unified::parse_lines(body, start)?
    } else {
        return Err(PatchError::UnknownFormat);
    };
    if ops.is_empty() {
        return Err(PatchError::Empty);
    }
    let format = if body[first].trim() == envelope::BEGIN {
        PatchFormat::Envelope
    } else {
        PatchFormat::Unified
    };
    Ok(Patch { format, ops })
}

/// Splits a patch into lines without endings ("\r\n" and "\n"); a leading
/// BOM is dropped.
fn split_patch_lines(text: &str) -> Vec<&str> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines: Vec<&str> = text
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    if text.ends_with('\n') || text.is_empty() {
        lines.pop();
    }
    lines
}

/// Finds the part of the patch inside an optional heredoc wrapper
/// (`apply_patch <<'EOF'` … `EOF`) or Markdown code fence. Returns the
/// half-open range of lines to parse.
fn unwrap_lines(lines: &[&str]) -> (usize, usize) {
    let nonblank = |l: &&str| !l.trim().is_empty();
    let (Some(first), Some(last)) = (
        lines.iter().position(nonblank),
        lines.iter().rposition(nonblank),
    ) else {
        return (0, lines.len());
    };
    let head = lines[first].trim();
    if head.starts_with("```") {
        if last > first && lines[last].trim() == "```" {
            return (first + 1, last);
        }
        return (first + 1, lines.len());
    }
    if let Some(word) = heredoc_word(head) {
        if last > first && lines[last].trim() == word {
            return (first + 1, last);
        }
        return (first + 1, lines.len());
    }
    (0, lines.len())
}

/// `apply_patch <<'EOF'`, `<<EOF`, `<<-"EOF"` → `EOF`.
fn heredoc_word(line: &str) -> Option<&str> {
    let (_, rest) = line.split_once("<<")?;
    let rest = rest.strip_prefix('-').unwrap_or(rest).trim();
    let word = rest
        .strip_prefix('\'')
        .and_then(|r| r.strip_suffix('\''))
        .or_else(|| rest.strip_prefix('"').and_then(|r| r.strip_suffix('"')))
        .unwrap_or(rest);
    let ok = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    ok.then_some(word)
}

/// Checks a path from a patch and normalises it (`./a//b` → `a/b`).
pub fn normalize_path(raw: &str) -> Result<String, PatchError> {
    let bad = |reason: &str| PatchError::InvalidPath {
        path: raw.to_string(),
        reason: reason.to_string(),
    };
    if raw.contains('\0') {
        return Err(bad("it contains a NUL byte"));
    }
    if raw.trim().is_empty() {
        return Err(bad("the path is empty"));
    }
    let bytes = raw.as_bytes();
    let drive = bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':';
    if raw == "~" || raw.starts_with("~/") || raw.starts_with('~') {
        return Err(bad("home-directory paths (`~`) are not allowed"));
    }
    if raw.starts_with('/') || raw.starts_with('\\') || drive {
        return Err(bad("absolute paths are not allowed"));
    }
    if raw.split(['/', '\\']).any(|c| c == "..") {
        return Err(bad("`..` components are not allowed"));
    }
    let parts: Vec<&str> = raw
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    if parts.is_empty() {
        return Err(bad("the path names no file"));
    }
    Ok(parts.join("/"))
}

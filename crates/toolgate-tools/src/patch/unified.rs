//! Parser of standard unified diffs (`diff -u`, `git diff`, `git
//! format-patch`): several files, `/dev/null` for added and deleted files,
//! git extended headers (new/deleted file mode, old/new mode, renames),
//! `\ No newline at end of file` markers. Text outside the file sections (commit messages,
//! `index` lines, signatures) is ignored. Hunk line counts are trusted, but
//! a hunk cut short by the next hunk or file, or longer than its header
//! says, is accepted as written.

use super::{FileMode, FileOp, Hunk, HunkLine, PatchError, normalize_path};

/// A parsed `@@ -l,s +l,s @@ section` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RangeHeader<'a> {
    pub old_start: usize,
    pub old_count: usize,
    pub new_start: usize,
    pub new_count: usize,
    pub section: &'a str,
}

/// Parses `@@ -l[,s] +l[,s] @@[ section]`.
pub fn parse_range(line: &str) -> Option<RangeHeader<'_>> {
    let rest = line.strip_prefix("@@ -")?;
    let (old, rest) = rest.split_once(" +")?;
    let (new, section) = rest.split_once(" @@")?;
    let nums = |s: &str| -> Option<(usize, usize)> {
        match s.split_once(',') {
            Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
            None => Some((s.parse().ok()?, 1)),
        }
    };
    let (old_start, old_count) = nums(old)?;
    let (new_start, new_count) = nums(new)?;
    Some(RangeHeader {
        old_start,
        old_count,
        new_start,
        new_count,
        section: section.trim(),
    })
}

/// `@@ -l,s +l,s @@ section` → (l, section), for the envelope parser.
pub fn parse_range_header(line: &str) -> Option<(usize, &str)> {
    parse_range(line).map(|r| (r.old_start, r.section))
}

/// True when the text has `diff --git` or `--- `/`+++ ` file headers.
pub fn looks_unified(lines: &[&str]) -> bool {
    lines
        .iter()
        .enumerate()
        .any(|(i, l)| l.starts_with("diff --git ") || is_file_header(lines, i))
}

fn is_file_header(lines: &[&str], i: usize) -> bool {
    lines[i].starts_with("--- ") && lines.get(i + 1).is_some_and(|n| n.starts_with("+++ "))
}

#[derive(Default)]
struct Section {
    line: usize,
    git: Option<(String, String)>,
    rename_from: Option<String>,
    rename_to: Option<String>,
    new_file: bool,
    deleted: bool,
    /// `new mode` or `new file mode`: what the file's mode becomes.
    mode: Option<FileMode>,
    headers: Option<(String, String)>,
    hunks: Vec<Hunk>,
}

/// Parses the lines of a unified diff. `offset` is the index of `lines[0]`
/// in the whole patch (for 1-based line numbers in errors).
pub fn parse_lines(lines: &[&str], offset: usize) -> Result<Vec<FileOp>, PatchError> {
    let err = |i: usize, message: String| PatchError::Parse {
        line: offset + i + 1,
        message,
    };
    let mut ops = Vec::new();
    let mut section: Option<Section> = None;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if let Some(rest) = line.strip_prefix("diff --git ") {
            finish(section.take(), &mut ops, offset)?;
            section = Some(Section {
                line: i,
                git: Some(split_git_paths(rest)),
                ..Section::default()
            });
        } else if is_file_header(lines, i) {
            let old = header_path(&line[4..]);
            let new = header_path(&lines[i + 1][4..]);
            match section.as_mut() {
                Some(s) if s.headers.is_none() && s.hunks.is_empty() => {
                    s.headers = Some((old, new))
                }
                _ => {
                    finish(section.take(), &mut ops, offset)?;
                    section = Some(Section {
                        line: i,
                        headers: Some((old, new)),
                        ..Section::default()
                    });
                }
            }
            i += 2;
            continue;
        } else if let Some(range) = parse_range(line) {
            let Some(s) = section.as_mut().filter(|s| s.headers.is_some()) else {
                return Err(err(
                    i,
                    "a hunk `@@ ... @@` comes before its `--- a/path` / `+++ b/path` file headers; add them".to_string(),
                ));
            };
            let (hunk, next) = parse_body(lines, i + 1, &range, offset)?;
            s.hunks.push(hunk);
            i = next;
            continue;
        } else if line.starts_with("@@") {
            return Err(err(
                i,
                format!(
                    "malformed hunk header {line:?}; expected `@@ -start,count +start,count @@`"
                ),
            ));
        } else if let Some(s) = section.as_mut() {
            if let Some(p) = line.strip_prefix("rename from ") {
                s.rename_from = Some(unquote(p.trim_end()));
            } else if let Some(p) = line.strip_prefix("rename to ") {
                s.rename_to = Some(unquote(p.trim_end()));
            } else if let Some(mode) = line.strip_prefix("new file mode") {
                s.new_file = true;
                s.mode = Some(FileMode::from_git(mode).map_err(|e| err(i, e))?);
            } else if let Some(mode) = line.strip_prefix("deleted file mode") {
                s.deleted = true;
                FileMode::from_git(mode).map_err(|e| err(i, e))?;
            } else if let Some((old, mode)) = git_mode_line(s, line) {
                // The old mode is checked, not compared: what changes is
                // the file as it is now.
                let mode = FileMode::from_git(mode).map_err(|e| err(i, e))?;
                if !old {
                    s.mode = Some(mode);
                }
            } else if line.starts_with("copy from ") || line.starts_with("copy to ") {
                return Err(err(
                    i,
                    "git copies are not supported; add the new file with its full content instead"
                        .to_string(),
                ));
            } else if line.starts_with("Binary files ") || line.starts_with("GIT binary patch") {
                return Err(err(
                    i,
                    "binary patches are not supported; apply_patch edits text files only"
                        .to_string(),
                ));
            }
        }
        i += 1;
    }
    finish(section, &mut ops, offset)?;
    Ok(ops)
}

/// `old mode M` / `new mode M` among a git section's extended headers
/// (before its `---`/`+++` lines, so a commit message or a trailer that
/// happens to start so is not read as one): (whether it is the old one, M).
fn git_mode_line<'l>(s: &Section, line: &'l str) -> Option<(bool, &'l str)> {
    if s.git.is_none() || s.headers.is_some() || !s.hunks.is_empty() {
        return None;
    }
    if let Some(mode) = line.strip_prefix("old mode") {
        return Some((true, mode));
    }
    line.strip_prefix("new mode").map(|mode| (false, mode))
}

/// Parses a hunk body starting at `start`; returns the hunk and the index
/// of the first line after it.
fn parse_body(
    lines: &[&str],
    start: usize,
    range: &RangeHeader<'_>,
    offset: usize,
) -> Result<(Hunk, usize), PatchError> {
    let mut hunk = Hunk {
        line_hint: Some(range.old_start),
        ..Hunk::default()
    };
    let (mut old_seen, mut new_seen) = (0usize, 0usize);
    let mut j = start;
    while j < lines.len() {
        let l = lines[j];
        let satisfied = old_seen >= range.old_count && new_seen >= range.new_count;
        if l.starts_with('\\') {
            match hunk.lines.last() {
                Some(HunkLine::Context(_)) => {
                    hunk.old_no_newline = true;
                    hunk.new_no_newline = true;
                }
                Some(HunkLine::Remove(_)) => hunk.old_no_newline = true,
                Some(HunkLine::Add(_)) => hunk.new_no_newline = true,
                None => {}
            }
            j += 1;
            continue;
        }
        let boundary = l.starts_with("@@")
            || l.starts_with("diff ")
            || is_file_header(lines, j)
            || (satisfied && (l.is_empty() || l == "-- "));
        if boundary {
            break;
        }
        let line = if l.is_empty() {
            HunkLine::Context(String::new())
        } else if let Some(t) = l.strip_prefix(' ') {
            HunkLine::Context(t.to_string())
        } else if let Some(t) = l.strip_prefix('-') {
            HunkLine::Remove(t.to_string())
        } else if let Some(t) = l.strip_prefix('+') {
            HunkLine::Add(t.to_string())
        } else if satisfied {
            break;
        } else {
            return Err(PatchError::Parse {
                line: offset + j + 1,
                message: format!(
                    "expected a hunk line starting with ' ', '-' or '+', got {l:?}; prefix unchanged lines with a space"
                ),
            });
        };
        match line {
            HunkLine::Context(_) => {
                old_seen += 1;
                new_seen += 1;
            }
            HunkLine::Remove(_) => old_seen += 1,
            HunkLine::Add(_) => new_seen += 1,
        }
        hunk.lines.push(line);
        j += 1;
    }
    // A missing final newline means the hunk ends at the end of the file.
    hunk.end_of_file = hunk.old_no_newline || hunk.new_no_newline;
    Ok((hunk, j))
}

fn finish(
    section: Option<Section>,
    ops: &mut Vec<FileOp>,
    offset: usize,
) -> Result<(), PatchError> {
    let Some(s) = section else { return Ok(()) };
    let err = |message: String| PatchError::Parse {
        line: offset + s.line + 1,
        message,
    };
    let (old, new) = match (&s.headers, &s.git) {
        (Some((o, n)), _) => strip_prefixes(o, n),
        (None, Some((o, n))) => {
            let (o, n) = strip_prefixes(o, n);
            let o = s.rename_from.clone().or(o);
            let n = s.rename_to.clone().or(n);
            if s.new_file {
                (None, n)
            } else if s.deleted {
                (o, None)
            } else {
                (o, n)
            }
        }
        (None, None) => return Ok(()),
    };
    match (old, new) {
        (None, None) => Err(err(
            "both file headers are /dev/null; name the file".to_string()
        )),
        (None, Some(path)) => {
            let mut content = String::new();
            for hunk in &s.hunks {
                if hunk.lines.iter().any(|l| !matches!(l, HunkLine::Add(_))) {
                    return Err(err(format!(
                        "the diff creates {path} (from /dev/null) but its hunk has context or '-' lines"
                    )));
                }
                for l in &hunk.lines {
                    content.push_str(l.text());
                    content.push('\n');
                }
            }
            if s.hunks.last().is_some_and(|h| h.new_no_newline) {
                content.pop();
            }
            ops.push(FileOp::Add {
                path: normalize_path(&path)?,
                content,
                mode: s.mode,
            });
            Ok(())
        }
        (Some(path), None) => {
            ops.push(FileOp::Delete {
                path: normalize_path(&path)?,
            });
            Ok(())
        }
        (Some(old), Some(new)) => {
            let renamed = s.rename_from.is_some() || s.rename_to.is_some();
            let (path, move_to) = match (renamed, s.rename_from.clone(), s.rename_to.clone()) {
                (true, from, to) => {
                    let from = normalize_path(&from.unwrap_or(old))?;
                    let to = normalize_path(&to.unwrap_or(new))?;
                    let move_to = (to != from).then_some(to);
                    (from, move_to)
                }
                // Without rename headers the new name is the file to change.
                (false, _, _) => (normalize_path(&new)?, None),
            };
            if s.hunks.is_empty() && move_to.is_none() && s.mode.is_none() {
                return Ok(()); // a section that changes nothing (`index` only)
            }
            ops.push(FileOp::Update {
                path,
                move_to,
                hunks: s.hunks,
                mode: s.mode,
            });
            Ok(())
        }
    }
}

/// Drops `a/` and `b/` when both names carry them (or are /dev/null);
/// /dev/null becomes None.
fn strip_prefixes(old: &str, new: &str) -> (Option<String>, Option<String>) {
    let null = |p: &str| p == "/dev/null";
    let prefixed = (null(old) || old.starts_with("a/")) && (null(new) || new.starts_with("b/"));
    let fix = |p: &str, pre: &str| {
        if null(p) {
            None
        } else if prefixed {
            Some(p.strip_prefix(pre).unwrap_or(p).to_string())
        } else {
            Some(p.to_string())
        }
    };
    (fix(old, "a/"), fix(new, "b/"))
}

/// The path of a `--- ` or `+++ ` line: the timestamp after a tab is dropped.
fn header_path(rest: &str) -> String {
    let p = rest.split('\t').next().unwrap_or(rest).trim_end();
    unquote(p)
}

/// `a/x b/y` from a `diff --git` line.
fn split_git_paths(rest: &str) -> (String, String) {
    let rest = rest.trim_end();
    if let Some(quoted) = rest.strip_prefix('"')
        && let Some(end) = quoted.find("\" ")
    {
        let (a, b) = rest.split_at(end + 2);
        return (unquote(a), unquote(b.trim_start()));
    }
    if let Some(idx) = rest.find(" b/") {
        return (rest[..idx].to_string(), unquote(&rest[idx + 1..]));
    }
    match rest.split_once(' ') {
        Some((a, b)) => (a.to_string(), b.to_string()),
        None => (rest.to_string(), rest.to_string()),
    }
}

/// Undoes git's C-style quoting of paths (`"t\303\251st"`).
fn unquote(p: &str) -> String {
    let Some(inner) = p.strip_prefix('"').and_then(|p| p.strip_suffix('"')) else {
        return p.to_string();
    };
    let mut bytes = Vec::with_capacity(inner.len());
    let mut chars = inner.bytes().peekable();
    while let Some(b) = chars.next() {
        if b != b'\\' {
            bytes.push(b);
            continue;
        }
        match chars.next() {
            Some(b'n') => bytes.push(b'\n'),
            Some(b't') => bytes.push(b'\t'),
            Some(d @ b'0'..=b'7') => {
                let mut v = u32::from(d - b'0');
                for _ in 0..2 {
                    if let Some(&n @ b'0'..=b'7') = chars.peek() {
                        v = v * 8 + u32::from(n - b'0');
                        chars.next();
                    }
                }
                bytes.push(u8::try_from(v & 0xff).unwrap_or(b'?'));
            }
            Some(other) => bytes.push(other),
            None => bytes.push(b'\\'),
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests;

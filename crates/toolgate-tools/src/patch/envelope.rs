//! Parser of the envelope format used by coding agents:
//!
//! ```text
//! *** Begin Patch
//! *** Add File: path/new.txt
//! +line one
//! *** Delete File: path/old.txt
//! *** Update File: src/app.py
//! *** Move to: src/main.py
//! @@ def greet():
//! -    print("hi")
//! +    print("hello")
//! *** End of File
//! *** End Patch
//! ```
//!
//! Lenient where it is unambiguous (whitespace around the envelope, a
//! missing `*** End Patch` at the very end, blank lines between sections, an
//! empty line inside a hunk read as an empty context line, unified-style
//! `@@ -l,s +l,s @@` hunk headers), strict elsewhere.

use super::{FileOp, Hunk, HunkLine, PatchError, normalize_path, unified};

pub const BEGIN: &str = "*** Begin Patch";
pub const END: &str = "*** End Patch";
const ADD: &str = "*** Add File:";
const DELETE: &str = "*** Delete File:";
const UPDATE: &str = "*** Update File:";
const MOVE: &str = "*** Move to:";
const EOF_MARK: &str = "*** End of File";

/// Parses the lines of an envelope patch. `offset` is the index of
/// `lines[0]` in the whole patch (for 1-based line numbers in errors).
pub fn parse_lines(lines: &[&str], offset: usize) -> Result<Vec<FileOp>, PatchError> {
    let err = |i: usize, message: String| PatchError::Parse {
        line: offset + i + 1,
        message,
    };
    let mut i = lines
        .iter()
        .position(|l| l.trim() == BEGIN)
        .ok_or_else(|| err(0, format!("the patch must start with `{BEGIN}`")))?
        + 1;
    // The end: `*** End Patch`, or the end of the text when it is missing.
    let end = match lines[i..].iter().position(|l| l.trim() == END) {
        Some(e) => {
            let e = i + e;
            if let Some(extra) = lines[e + 1..].iter().position(|l| !l.trim().is_empty()) {
                let at = e + 1 + extra;
                return Err(err(
                    at,
                    format!(
                        "unexpected text after `{END}`: {:?}; put everything inside the envelope",
                        lines[at]
                    ),
                ));
            }
            e
        }
        None => lines.len(),
    };
    let mut ops = Vec::new();
    while i < end {
        // File headers are trimmed both sides, like `*** Begin/End Patch`:
        // models (and Codex's own scenarios) indent them at times.
        let line = lines[i].trim();
        if line.is_empty() {
            i += 1;
            continue;
        }
        // An Add body has only `+` lines and a Delete none, so an indented
        // header there is unambiguous; in an Update body a line that starts
        // with a space is context, so only a header at the start of a line
        // ends it.
        let indented_ends = !line.starts_with(UPDATE);
        let section_end = next_header(lines, i + 1, end, indented_ends);
        if let Some(raw) = line.strip_prefix(ADD) {
            let path = normalize_path(raw.trim())?;
            let body = trim_blank_tail(&lines[i + 1..section_end]);
            let mut content = String::new();
            for (k, l) in body.iter().enumerate() {
                if let Some(text) = l.strip_prefix('+') {
                    content.push_str(text);
                } else if !l.trim().is_empty() {
                    return Err(err(
                        i + 1 + k,
                        format!(
                            "expected a line starting with '+' in `{ADD} {path}`, got {l:?}; every line of a new file starts with '+'"
                        ),
                    ));
                }
                content.push('\n');
            }
            ops.push(FileOp::Add {
                path,
                content,
                mode: None,
            });
        } else if let Some(raw) = line.strip_prefix(DELETE) {
            let path = normalize_path(raw.trim())?;
            if let Some(k) = lines[i + 1..section_end]
                .iter()
                .position(|l| !l.trim().is_empty())
            {
                let at = i + 1 + k;
                return Err(err(
                    at,
                    format!(
                        "unexpected line {:?} after `{DELETE} {path}`; a deleted file has no body",
                        lines[at]
                    ),
                ));
            }
            ops.push(FileOp::Delete { path });
        } else if let Some(raw) = line.strip_prefix(UPDATE) {
            let path = normalize_path(raw.trim())?;
            let mut j = i + 1;
            let mut move_to = None;
            while j < section_end && lines[j].trim().is_empty() {
                j += 1;
            }
            if j < section_end
                && let Some(dest) = lines[j].trim().strip_prefix(MOVE)
            {
                move_to = Some(normalize_path(dest.trim())?);
                j += 1;
            }
            let body = trim_blank_tail(&lines[j..section_end]);
            let hunks = parse_hunks(body, offset + j)?;
            if hunks.is_empty() && move_to.is_none() {
                return Err(PatchError::NoHunks { path });
            }
            ops.push(FileOp::Update {
                path,
                move_to,
                hunks,
                mode: None,
            });
        } else {
            return Err(err(
                i,
                format!(
                    "expected `{ADD} path`, `{DELETE} path`, `{UPDATE} path` or `{END}`, got {:?}",
                    lines[i]
                ),
            ));
        }
        i = section_end;
    }
    Ok(ops)
}

/// Index of the next `*** Add/Delete/Update File:` header at or after
/// `from` (or `end`); an indented one counts when `indented` is true.
fn next_header(lines: &[&str], from: usize, end: usize, indented: bool) -> usize {
    (from..end)
        .find(|&k| {
            let l = if indented {
                lines[k].trim_start()
            } else {
                lines[k]
            };
            l.starts_with(ADD) || l.starts_with(DELETE) || l.starts_with(UPDATE)
        })
        .unwrap_or(end)
}

fn trim_blank_tail<'a, 'b>(lines: &'a [&'b str]) -> &'a [&'b str] {
    let keep = lines
        .iter()
        .rposition(|l| !l.trim().is_empty())
        .map_or(0, |p| p + 1);
    &lines[..keep]
}

/// Parses the hunks of one `*** Update File:` section. `offset` is the
/// 0-based patch line of `lines[0]`.
fn parse_hunks(lines: &[&str], offset: usize) -> Result<Vec<Hunk>, PatchError> {
    let err = |i: usize, message: String| PatchError::Parse {
        line: offset + i + 1,
        message,
    };
    let mut hunks: Vec<Hunk> = Vec::new();
    let mut current = Hunk::default();
    // true while the current hunk has only `@@` lines so far
    let mut open_header = false;
    let mut header_line = 0usize;
    for (i, &raw) in lines.iter().enumerate() {
        let trimmed = raw.trim_end();
        if trimmed == "@@" || trimmed.starts_with("@@ ") {
            if !current.lines.is_empty() {
                hunks.push(std::mem::take(&mut current));
            }
            if !open_header {
                header_line = i;
            }
            open_header = true;
            let rest = trimmed[2..].trim();
            if let Some((hint, section)) = unified::parse_range_header(trimmed) {
                current.line_hint = Some(hint);
                if !section.is_empty() {
                    current.anchors.push(section.to_string());
                }
            } else if !rest.is_empty() {
                current.anchors.push(rest.to_string());
            }
            continue;
        }
        if trimmed == EOF_MARK {
            if current.lines.is_empty() {
                return Err(err(
                    i,
                    format!("`{EOF_MARK}` must follow the lines of a hunk"),
                ));
            }
            current.end_of_file = true;
            hunks.push(std::mem::take(&mut current));
            open_header = false;
            continue;
        }
        let line = if raw.is_empty() {
            HunkLine::Context(String::new())
        } else if let Some(t) = raw.strip_prefix(' ') {
            HunkLine::Context(t.to_string())
        } else if let Some(t) = raw.strip_prefix('-') {
            HunkLine::Remove(t.to_string())
        } else if let Some(t) = raw.strip_prefix('+') {
            HunkLine::Add(t.to_string())
        } else if raw.starts_with("***") {
            return Err(err(
                i,
                format!(
                    "unexpected {raw:?} inside a hunk; headers are `{MOVE} path` (right after `{UPDATE}`), `{EOF_MARK}`, and file headers"
                ),
            ));
        } else {
            return Err(err(
                i,
                format!(
                    "expected a hunk line starting with ' ', '-' or '+', got {raw:?}; prefix unchanged lines with a space"
                ),
            ));
        };
        open_header = false;
        current.lines.push(line);
    }
    if open_header && current.lines.is_empty() {
        return Err(err(
            header_line,
            format!(
                "the hunk starting with {:?} has no lines; add ' ', '-' and '+' lines after it",
                lines[header_line]
            ),
        ));
    }
    if !current.lines.is_empty() {
        hunks.push(current);
    }
    Ok(hunks)
}

#[cfg(test)]
mod tests;

//! Applying hunks to the text of one file.
//!
//! The file's BOM, line endings (per line; new lines get the ending of the
//! file's first line) and final newline are kept; context lines keep their
//! exact text from the file even when they matched leniently.

use super::seek::{MatchPass, SeekOptions, seek};
use super::{Hunk, HunkLine, PatchError};

/// The result of [`apply_hunks`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The new whole text of the file.
    pub text: String,
    /// One per hunk: how leniently it matched (the least strict of its `@@`
    /// anchors and its old lines).
    pub passes: Vec<MatchPass>,
}

/// How many lines of a failed hunk to quote in the error.
const QUOTED_LINES: usize = 8;

#[derive(Debug, Clone)]
struct Line {
    text: String,
    crlf: bool,
}

struct Doc {
    bom: bool,
    lines: Vec<Line>,
    trailing_newline: bool,
    crlf: bool,
}

impl Doc {
    fn parse(original: &str) -> Doc {
        let (bom, text) = match original.strip_prefix('\u{feff}') {
            Some(rest) => (true, rest),
            None => (false, original),
        };
        let mut lines: Vec<Line> = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
            let (line, next) = match rest.find('\n') {
                Some(i) => (&rest[..i], &rest[i + 1..]),
                None => (rest, ""),
            };
            let had_newline = line.len() < rest.len();
            let (body, crlf) = match line.strip_suffix('\r') {
                Some(b) if had_newline => (b, true),
                _ => (line, false),
            };
            lines.push(Line {
                text: body.to_string(),
                crlf,
            });
            rest = next;
        }
        let crlf = lines.first().is_some_and(|l| l.crlf);
        if let Some(last) = lines.last_mut()
            && !text.ends_with('\n')
        {
            last.crlf = crlf;
        }
        Doc {
            bom,
            lines,
            trailing_newline: text.is_empty() || text.ends_with('\n'),
            crlf,
        }
    }

    fn render(&self) -> String {
        let mut out = String::new();
        if self.bom {
            out.push('\u{feff}');
        }
        let n = self.lines.len();
        for (i, line) in self.lines.iter().enumerate() {
            out.push_str(&line.text);
            if i + 1 < n || self.trailing_newline {
                out.push_str(if line.crlf { "\r\n" } else { "\n" });
            }
        }
        out
    }
}

struct Replacement {
    start: usize,
    old_len: usize,
    new: Vec<Line>,
}

/// Applies `hunks` in order to `original` (the whole current text of
/// `path`, which is only used in messages) and returns the new whole text.
pub fn apply_hunks(path: &str, original: &str, hunks: &[Hunk]) -> Result<Applied, PatchError> {
    let mut doc = Doc::parse(original);
    let keys: Vec<&str> = doc.lines.iter().map(|l| l.text.as_str()).collect();
    let n = keys.len();
    let mut cursor = 0usize;
    let mut replacements: Vec<Replacement> = Vec::new();
    let mut passes = Vec::with_capacity(hunks.len());
    let mut trailing_newline = doc.trailing_newline;

    for (index, hunk) in hunks.iter().enumerate() {
        let number = index + 1;
        let no_match = |after: usize| PatchError::NoMatch {
            path: path.to_string(),
            hunk: number,
            after,
            expected: quote_hunk(hunk),
        };
        let mut from = cursor;
        let mut worst = MatchPass::Exact;
        for anchor in &hunk.anchors {
            let opts = SeekOptions {
                start: from,
                ..Default::default()
            };
            let (at, pass) = seek(&keys, &[anchor.as_str()], opts).ok_or_else(|| no_match(from))?;
            worst = worst.max(pass);
            from = at + 1;
        }
        let old = hunk.old_lines();
        let start = if old.is_empty() {
            match hunk.line_hint {
                Some(h) => {
                    let at = h.min(n);
                    if at < cursor {
                        return Err(PatchError::Overlap {
                            path: path.to_string(),
                            hunk: number,
                            previous: index,
                            line: at + 1,
                            end: cursor,
                        });
                    }
                    at
                }
                None if !hunk.anchors.is_empty() && !hunk.end_of_file => from,
                None => n.max(from),
            }
        } else {
            let opts = SeekOptions {
                start: from,
                end_of_file: hunk.end_of_file,
                hint: hunk.line_hint.map(|h| h.saturating_sub(1)),
            };
            // Agents often repeat the `@@` line as the first context line:
            // then search from the anchor line itself.
            let retry = SeekOptions {
                start: from.saturating_sub(1),
                ..opts
            };
            let found = seek(&keys, &old, opts).or_else(|| {
                (!hunk.anchors.is_empty())
                    .then(|| seek(&keys, &old, retry))
                    .flatten()
            });
            let Some((at, pass)) = found else {
                return Err(match earlier_match(&keys, &old, opts, cursor, index) {
                    Some(at) => PatchError::Overlap {
                        path: path.to_string(),
                        hunk: number,
                        previous: index,
                        line: at + 1,
                        end: cursor,
                    },
                    None => no_match(from),
                });
            };
            worst = worst.max(pass);
            at
        };
        let mut new = Vec::new();
        let mut at = start;
        for line in &hunk.lines {
            match line {
                HunkLine::Context(_) => {
                    new.push(doc.lines[at].clone());
                    at += 1;
                }
                HunkLine::Remove(_) => at += 1,
                HunkLine::Add(text) => new.push(Line {
                    text: text.clone(),
                    crlf: doc.crlf,
                }),
            }
        }
        if at == n {
            if hunk.new_no_newline {
                trailing_newline = false;
            } else if hunk.old_no_newline {
                trailing_newline = true;
            }
        }
        replacements.push(Replacement {
            start,
            old_len: old.len(),
            new,
        });
        passes.push(worst);
        cursor = at;
    }

    for r in replacements.into_iter().rev() {
        doc.lines.splice(r.start..r.start + r.old_len, r.new);
    }
    doc.trailing_newline = trailing_newline;
    if doc.lines.is_empty() {
        doc.trailing_newline = true;
    }
    Ok(Applied {
        text: doc.render(),
        passes,
    })
}

/// When a hunk does not match after the previous one but does match before
/// it, the hunks are out of order or overlap: returns where it matches.
fn earlier_match(
    keys: &[&str],
    old: &[&str],
    opts: SeekOptions,
    cursor: usize,
    index: usize,
) -> Option<usize> {
    if index == 0 {
        return None;
    }
    let (at, _) = seek(keys, old, SeekOptions { start: 0, ..opts })?;
    (at < cursor).then_some(at)
}

/// The first lines a hunk expects, for an error message.
fn quote_hunk(hunk: &Hunk) -> String {
    let mut quoted: Vec<String> = hunk.anchors.iter().map(|a| format!("  @@ {a}")).collect();
    let old: Vec<&HunkLine> = hunk
        .lines
        .iter()
        .filter(|l| !matches!(l, HunkLine::Add(_)))
        .collect();
    for line in old.iter().take(QUOTED_LINES) {
        let prefix = if matches!(line, HunkLine::Remove(_)) {
            '-'
        } else {
            ' '
        };
        quoted.push(format!("  {prefix}{}", line.text()));
    }
    if old.len() > QUOTED_LINES {
        quoted.push(format!("  ... ({} more lines)", old.len() - QUOTED_LINES));
    }
    if hunk.end_of_file {
        quoted.push("  *** End of File".to_string());
    }
    quoted.join("\n")
}

#[cfg(test)]
mod tests;

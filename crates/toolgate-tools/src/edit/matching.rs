//! Finding `old_text` in a file: exactly, then line by line ignoring
//! trailing whitespace, then ignoring indentation. The first pass that finds
//! anything decides; a pass never mixes its matches with another's.

use std::ops::Range;

use serde::Serialize;

/// How `old_text` was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pass {
    /// Byte for byte.
    Exact,
    /// Whole lines, ignoring whitespace at line ends.
    TrailingWhitespace,
    /// Whole lines, ignoring whitespace at both ends; `new_text` is
    /// re-indented by the difference.
    Indentation,
}

impl Pass {
    /// How a result describes the pass.
    pub fn describe(self) -> &'static str {
        match self {
            Pass::Exact => "exact match",
            Pass::TrailingWhitespace => "matched after ignoring trailing whitespace",
            Pass::Indentation => {
                "matched after ignoring indentation; new_text was re-indented to match the file"
            }
        }
    }
}

/// Where `old_text` was found and what replaces each occurrence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub pass: Pass,
    /// Byte ranges in the text, in order, not overlapping.
    pub ranges: Vec<Range<usize>>,
    /// The replacement for each range (differs from `new_text` only after
    /// re-indentation).
    pub replacements: Vec<String>,
}

/// One line of the text: where it starts and where its content ends
/// (before `\r\n` or `\n`), and where the next line starts.
#[derive(Debug, Clone, Copy)]
struct Line {
    start: usize,
    content_end: usize,
    end: usize,
}

fn lines_of(text: &str) -> Vec<Line> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut start = 0;
    while start < bytes.len() {
        let (content_end, end) = match memchr_newline(&bytes[start..]) {
            Some(i) => {
                let nl = start + i;
                let content_end = if nl > start && bytes[nl - 1] == b'\r' {
                    nl - 1
                } else {
                    nl
                };
                (content_end, nl + 1)
            }
            None => (bytes.len(), bytes.len()),
        };
        out.push(Line {
            start,
            content_end,
            end,
        });
        start = end;
    }
    out
}

fn memchr_newline(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|b| *b == b'\n')
}

/// 1-based line number of byte `at`.
pub fn line_number(text: &str, at: usize) -> usize {
    text.as_bytes()[..at]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// Finds `old` in `text` with the first pass that finds it at all.
pub fn find(text: &str, old: &str, new: &str) -> Option<Found> {
    let exact: Vec<Range<usize>> = text
        .match_indices(old)
        .map(|(at, m)| at..at + m.len())
        .collect();
    if !exact.is_empty() {
        let replacements = vec![new.to_owned(); exact.len()];
        return Some(Found {
            pass: Pass::Exact,
            ranges: exact,
            replacements,
        });
    }
    let lines = lines_of(text);
    let old_lines: Vec<&str> = old
        .strip_suffix('\n')
        .unwrap_or(old)
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    // With a final newline, old_text covers whole lines including the break.
    let whole_lines = old.ends_with('\n');
    for pass in [Pass::TrailingWhitespace, Pass::Indentation] {
        let norm = |s: &str| -> String {
            match pass {
                Pass::TrailingWhitespace => s.trim_end().to_owned(),
                _ => s.trim().to_owned(),
            }
        };
        let wanted: Vec<String> = old_lines.iter().map(|l| norm(l)).collect();
        let mut ranges = Vec::new();
        let mut replacements = Vec::new();
        let mut i = 0;
        while i + wanted.len() <= lines.len() {
            let window = &lines[i..i + wanted.len()];
            let hit = window
                .iter()
                .zip(&wanted)
                .all(|(line, want)| norm(&text[line.start..line.content_end]) == *want);
            if !hit {
                i += 1;
                continue;
            }
            let (first, last) = (window[0], window[window.len() - 1]);
            let end = if whole_lines {
                last.end
            } else {
                last.content_end
            };
            ranges.push(first.start..end);
            replacements.push(if pass == Pass::Indentation {
                reindent(new, &old_lines, window, text)
            } else {
                new.to_owned()
            });
            i += wanted.len();
        }
        if !ranges.is_empty() {
            return Some(Found {
                pass,
                ranges,
                replacements,
            });
        }
    }
    None
}

fn indent_of(line: &str) -> &str {
    &line[..line.len() - line.trim_start().len()]
}

/// Shifts `new` by the indentation difference between the first non-blank
/// line of `old` and the file line it matched.
fn reindent(new: &str, old_lines: &[&str], window: &[Line], text: &str) -> String {
    let Some(j) = old_lines.iter().position(|l| !l.trim().is_empty()) else {
        return new.to_owned();
    };
    let from = indent_of(old_lines[j]);
    let to = indent_of(&text[window[j].start..window[j].content_end]);
    if from == to {
        return new.to_owned();
    }
    let shifted: Vec<String> = new
        .split('\n')
        .map(|line| {
            if line.trim().is_empty() {
                line.to_owned()
            } else if let Some(rest) = line.strip_prefix(from) {
                format!("{to}{rest}")
            } else if let Some(extra) = to.strip_prefix(from) {
                // The model dedented below its own base: keep the relative shape.
                format!("{extra}{line}")
            } else {
                line.to_owned()
            }
        })
        .collect();
    shifted.join("\n")
}

/// The region of `text` most like `old`, as `(first line, last line)`
/// (1-based), for the error when nothing matched. `None` when nothing is
/// even close.
pub fn closest(text: &str, old: &str) -> Option<(usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let wanted: Vec<&str> = old.lines().map(str::trim).collect();
    if lines.is_empty() || wanted.is_empty() {
        return None;
    }
    let m = wanted.len().min(lines.len());
    // Whole-window scoring costs n*m comparisons; bound it for huge files.
    let mut best: Option<(usize, usize)> = None;
    if lines.len().saturating_mul(m) <= 4_000_000 {
        for i in 0..=lines.len() - m {
            let score = (0..m)
                .filter(|&j| !wanted[j].is_empty() && lines[i + j].trim() == wanted[j])
                .count();
            if score > 0 && best.is_none_or(|(_, s)| score > s) {
                best = Some((i, score));
            }
        }
    }
    if best.is_none() {
        // No line equal: the line most like old_text's first non-blank line.
        let first = wanted.iter().find(|l| !l.is_empty())?;
        let mut top = (0usize, 0.0f32);
        for (i, line) in lines.iter().enumerate().take(20_000) {
            let ratio = similar::TextDiff::from_chars(line.trim(), *first).ratio();
            if ratio > top.1 {
                top = (i, ratio);
            }
        }
        if top.1 < 0.5 {
            return None;
        }
        best = Some((top.0, 0));
    }
    let (i, _) = best?;
    let end = (i + m).min(lines.len());
    Some((i + 1, end))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn apply(text: &str, found: &Found) -> String {
        let mut out = text.to_owned();
        for (range, new) in found.ranges.iter().zip(&found.replacements).rev() {
            out.replace_range(range.clone(), new);
        }
        out
    }

    #[test]
    fn exact_matches_win() {
        let found = find("a b a", "a", "x").unwrap();
        assert_eq!(found.pass, Pass::Exact);
        assert_eq!(found.ranges, vec![0..1, 4..5]);
    }

    #[test]
    fn trailing_whitespace_is_ignored_second() {
        let text = "fn main() {   \n    go();\t\n}\n";
        let found = find(text, "fn main() {\n    go();", "fn main() {\n    run();").unwrap();
        assert_eq!(found.pass, Pass::TrailingWhitespace);
        assert_eq!(apply(text, &found), "fn main() {\n    run();\n}\n");
    }

    #[test]
    fn indentation_is_ignored_last_and_new_text_reindented() {
        let text = "impl A {\n        fn f() {\n            old();\n        }\n}\n";
        let old = "fn f() {\n    old();\n}";
        let new = "fn f() {\n    new();\n    more();\n}";
        let found = find(text, old, new).unwrap();
        assert_eq!(found.pass, Pass::Indentation);
        assert_eq!(
            apply(text, &found),
            "impl A {\n        fn f() {\n            new();\n            more();\n        }\n}\n"
        );
    }

    #[test]
    fn crlf_lines_keep_their_carriage_returns() {
        let text = "a  \r\nb\r\nc\r\n";
        let found = find(text, "a\nb", "x\ny").unwrap();
        assert_eq!(found.pass, Pass::TrailingWhitespace);
        assert_eq!(apply(text, &found), "x\ny\r\nc\r\n");
    }

    #[test]
    fn the_closest_region_is_the_one_sharing_most_lines() {
        let text = "one\ntwo\nthree\nfour\nfive\n";
        assert_eq!(closest(text, "three\nFOUR!\nfive"), Some((3, 5)));
        assert_eq!(closest(text, "thre"), Some((3, 3)));
        assert_eq!(closest(text, "zzzzzzzz"), None);
    }

    #[test]
    fn line_numbers_count_from_one() {
        assert_eq!(line_number("a\nb\nc", 4), 3);
        assert_eq!(line_number("abc", 0), 1);
    }
}

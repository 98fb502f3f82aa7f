//! Lenient search for a sequence of lines.
//!
//! Passes are tried in order, each over the whole search range before the
//! next: exact, trailing whitespace ignored, surrounding whitespace ignored,
//! and Unicode punctuation folded to ASCII (plus trimming).

use std::borrow::Cow;

/// How a sequence of lines was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MatchPass {
    Exact,
    TrailingWhitespace,
    Trimmed,
    UnicodeFolded,
}

impl MatchPass {
    /// All passes, strictest first.
    pub const ALL: [MatchPass; 4] = [
        MatchPass::Exact,
        MatchPass::TrailingWhitespace,
        MatchPass::Trimmed,
        MatchPass::UnicodeFolded,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            MatchPass::Exact => "exact",
            MatchPass::TrailingWhitespace => "trailing-whitespace",
            MatchPass::Trimmed => "trimmed",
            MatchPass::UnicodeFolded => "unicode-folded",
        }
    }

    /// The line as this pass compares it.
    pub fn normalize(self, line: &str) -> Cow<'_, str> {
        match self {
            MatchPass::Exact => Cow::Borrowed(line),
            MatchPass::TrailingWhitespace => Cow::Borrowed(line.trim_end()),
            MatchPass::Trimmed => Cow::Borrowed(line.trim()),
            MatchPass::UnicodeFolded => {
                let t = line.trim();
                if t.is_ascii() {
                    Cow::Borrowed(t)
                } else {
                    Cow::Owned(fold_unicode(t).trim().to_string())
                }
            }
        }
    }
}

impl std::fmt::Display for MatchPass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Folds Unicode punctuation and spaces to their ASCII look-alikes.
pub fn fold_unicode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\u{2010}'..='\u{2015}' | '\u{2212}' => out.push('-'),
            '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' => out.push('\''),
            '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' => out.push('"'),
            '\u{2026}' => out.push_str("..."),
            '\u{00A0}' | '\u{2000}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => {
                out.push(' ')
            }
            _ => out.push(c),
        }
    }
    out
}

/// Where to look for a sequence of lines.
#[derive(Debug, Clone, Copy, Default)]
pub struct SeekOptions {
    /// First index a match may start at.
    pub start: usize,
    /// Try a match ending at the end of the file first.
    pub end_of_file: bool,
    /// Prefer the match nearest to this index (otherwise the first one).
    pub hint: Option<usize>,
}

/// Finds `pattern` in `lines` at or after `opts.start`. Returns the index of
/// the first matched line and the pass that matched. An empty pattern never
/// matches (callers place pure insertions themselves).
pub fn seek<A: AsRef<str>, B: AsRef<str>>(
    lines: &[A],
    pattern: &[B],
    opts: SeekOptions,
) -> Option<(usize, MatchPass)> {
    let m = pattern.len();
    if m == 0 || m > lines.len() || opts.start > lines.len() - m {
        return None;
    }
    let last = lines.len() - m;
    if opts.end_of_file {
        for pass in MatchPass::ALL {
            if matches_at(lines, pattern, last, pass) {
                return Some((last, pass));
            }
        }
    }
    for pass in MatchPass::ALL {
        let pat: Vec<Cow<'_, str>> = pattern.iter().map(|p| pass.normalize(p.as_ref())).collect();
        let norm: Vec<Cow<'_, str>> = lines[opts.start..]
            .iter()
            .map(|l| pass.normalize(l.as_ref()))
            .collect();
        let mut best: Option<usize> = None;
        for i in opts.start..=last {
            let window = &norm[i - opts.start..i - opts.start + m];
            if window.iter().zip(&pat).all(|(a, b)| a == b) {
                match opts.hint {
                    None => return Some((i, pass)),
                    Some(h) => {
                        let better = best.is_none_or(|b| i.abs_diff(h) < b.abs_diff(h));
                        if better {
                            best = Some(i);
                        }
                        if i >= h {
                            break; // later matches are only farther away
                        }
                    }
                }
            }
        }
        if let Some(i) = best {
            return Some((i, pass));
        }
    }
    None
}

fn matches_at<A: AsRef<str>, B: AsRef<str>>(
    lines: &[A],
    pattern: &[B],
    at: usize,
    pass: MatchPass,
) -> bool {
    lines[at..at + pattern.len()]
        .iter()
        .zip(pattern)
        .all(|(l, p)| pass.normalize(l.as_ref()) == pass.normalize(p.as_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(start: usize) -> SeekOptions {
        SeekOptions {
            start,
            ..Default::default()
        }
    }

    #[test]
    fn exact_match_first_after_start() {
        let lines = ["a", "b", "a", "b"];
        assert_eq!(
            seek(&lines, &["a", "b"], opts(0)),
            Some((0, MatchPass::Exact))
        );
        assert_eq!(
            seek(&lines, &["a", "b"], opts(1)),
            Some((2, MatchPass::Exact))
        );
        assert_eq!(seek(&lines, &["a", "b"], opts(3)), None);
    }

    #[test]
    fn trailing_whitespace_pass() {
        let lines = ["x", "foo  \t", "bar "];
        assert_eq!(
            seek(&lines, &["foo", "bar"], opts(0)),
            Some((1, MatchPass::TrailingWhitespace))
        );
    }

    #[test]
    fn trimmed_pass() {
        let lines = ["x", "    foo", "\tbar"];
        assert_eq!(
            seek(&lines, &["foo", "  bar"], opts(0)),
            Some((1, MatchPass::Trimmed))
        );
    }

    #[test]
    fn unicode_pass() {
        let lines = ["say \u{201C}hi\u{201D} \u{2014} it\u{2019}s\u{00A0}ok\u{2026}"];
        assert_eq!(
            seek(&lines, &["say \"hi\" - it's ok..."], opts(0)),
            Some((0, MatchPass::UnicodeFolded))
        );
        // and the other way round
        let lines = ["a - b"];
        assert_eq!(
            seek(&lines, &["a \u{2013} b"], opts(0)),
            Some((0, MatchPass::UnicodeFolded))
        );
    }

    #[test]
    fn stricter_pass_wins_over_whole_range() {
        // a trimmed match comes first, but an exact one exists later
        let lines = [" foo", "x", "foo"];
        assert_eq!(seek(&lines, &["foo"], opts(0)), Some((2, MatchPass::Exact)));
    }

    #[test]
    fn end_of_file_tried_first() {
        let lines = ["a", "b", "a"];
        let o = SeekOptions {
            end_of_file: true,
            ..opts(0)
        };
        assert_eq!(seek(&lines, &["a"], o), Some((2, MatchPass::Exact)));
        // falls back to the normal search when the end does not match
        assert_eq!(seek(&lines, &["b"], o), Some((1, MatchPass::Exact)));
    }

    #[test]
    fn hint_prefers_nearest() {
        let lines = ["a", "x", "a", "x", "a"];
        let o = |h| SeekOptions {
            hint: Some(h),
            ..opts(0)
        };
        assert_eq!(seek(&lines, &["a"], o(3)), Some((2, MatchPass::Exact)));
        assert_eq!(seek(&lines, &["a"], o(4)), Some((4, MatchPass::Exact)));
        assert_eq!(seek(&lines, &["a"], o(0)), Some((0, MatchPass::Exact)));
        assert_eq!(seek(&lines, &["a"], o(100)), Some((4, MatchPass::Exact)));
    }

    #[test]
    fn empty_pattern_and_too_long() {
        let lines = ["a"];
        let empty: [&str; 0] = [];
        assert_eq!(seek(&lines, &empty, opts(0)), None);
        assert_eq!(seek(&lines, &["a", "b"], opts(0)), None);
    }

    #[test]
    fn pass_names() {
        let names: Vec<&str> = MatchPass::ALL.iter().map(|p| p.as_str()).collect();
        assert_eq!(
            names,
            ["exact", "trailing-whitespace", "trimmed", "unicode-folded"]
        );
    }
}

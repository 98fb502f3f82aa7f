//! ResourcePolicy: how much of a result reaches the model.
//!
//! A result past the caps keeps its head and its tail (where errors and
//! summaries usually are) with an explicit marker in between, so the model
//! knows something was left out and how much.

use serde::{Deserialize, Serialize};
use toolgate_core::text::{ceil_char_boundary, floor_char_boundary};

/// Output and file-size caps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ResourcePolicy {
    /// Bytes of text per result.
    pub max_output_bytes: usize,
    /// Lines of text per result (at least 3: head, marker, tail).
    pub max_output_lines: usize,
    /// Bytes per file read or written by a tool.
    pub max_file_bytes: u64,
}

impl Default for ResourcePolicy {
    fn default() -> Self {
        ResourcePolicy {
            max_output_bytes: 50_000,
            max_output_lines: 2_000,
            max_file_bytes: 10 * 1024 * 1024,
        }
    }
}

/// A text after the caps were applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bounded {
    /// The text to hand on (unchanged when nothing was cut).
    pub text: String,
    /// Whole lines left out.
    pub omitted_lines: usize,
    /// Bytes left out (including those of omitted lines).
    pub omitted_bytes: usize,
}

impl Bounded {
    /// Whether anything was left out.
    pub fn truncated(&self) -> bool {
        self.omitted_bytes > 0
    }
}

impl ResourcePolicy {
    /// Applies the line and byte caps to `text`, keeping head and tail.
    pub fn bound(&self, text: &str) -> Bounded {
        // A head line, the marker and a tail line need three lines at least.
        let max_lines = self.max_output_lines.max(3);
        let line_count = text.split_inclusive('\n').count();
        if text.len() <= self.max_output_bytes && line_count <= max_lines {
            return Bounded {
                text: text.to_owned(),
                omitted_lines: 0,
                omitted_bytes: 0,
            };
        }
        let head_budget = (self.max_output_bytes / 2, max_lines / 2);
        let tail_budget = (
            self.max_output_bytes - head_budget.0,
            max_lines.saturating_sub(head_budget.1 + 1),
        );
        let head_end = take_lines(text.split_inclusive('\n'), head_budget);
        let tail_len = take_lines(text[head_end..].split_inclusive('\n').rev(), tail_budget);
        let tail_start = text.len() - tail_len;
        let middle = &text[head_end..tail_start];
        let omitted_lines = middle.split_inclusive('\n').count();
        if head_end == 0 && tail_len == 0 || omitted_lines == 0 {
            return self.bound_bytes(text);
        }
        let mut out = String::with_capacity(head_end + tail_len + 40);
        // The head is whole lines, so it ends with a newline (or is empty).
        out.push_str(&text[..head_end]);
        out.push_str(&format!("[... {omitted_lines} lines omitted ...]\n"));
        out.push_str(&text[tail_start..]);
        Bounded {
            text: out,
            omitted_lines,
            omitted_bytes: middle.len(),
        }
    }

    /// Cuts inside lines: for text with few, very long lines.
    fn bound_bytes(&self, text: &str) -> Bounded {
        let head_end = floor_char_boundary(text, self.max_output_bytes / 2);
        let tail_bytes = self.max_output_bytes - self.max_output_bytes / 2;
        let tail_start =
            ceil_char_boundary(text, text.len().saturating_sub(tail_bytes)).max(head_end);
        let omitted = tail_start - head_end;
        let omitted_lines = text[head_end..tail_start].matches('\n').count();
        Bounded {
            text: format!(
                "{}[... {omitted} bytes omitted ...]{}",
                &text[..head_end],
                &text[tail_start..]
            ),
            omitted_lines,
            omitted_bytes: omitted,
        }
    }
}

/// Bytes covered by whole lines taken from `lines` within `(bytes, lines)`.
fn take_lines<'a>(lines: impl Iterator<Item = &'a str>, budget: (usize, usize)) -> usize {
    let (mut bytes, mut count) = (0, 0);
    for line in lines {
        if count == budget.1 || bytes + line.len() > budget.0 {
            break;
        }
        bytes += line.len();
        count += 1;
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use proptest::prelude::*;

    fn small() -> ResourcePolicy {
        ResourcePolicy {
            max_output_bytes: 100,
            max_output_lines: 5,
            max_file_bytes: 10,
        }
    }

    #[test]
    fn short_text_is_unchanged() {
        let b = small().bound("one\ntwo\n");
        assert_eq!(b.text, "one\ntwo\n");
        assert!(!b.truncated());
    }

    #[test]
    fn many_lines_keep_head_and_tail_with_a_marker() {
        let text: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        let b = small().bound(&text);
        assert_eq!(
            b.text,
            "line 1\nline 2\n[... 16 lines omitted ...]\nline 19\nline 20\n"
        );
        assert_eq!(b.omitted_lines, 16);
    }

    #[test]
    fn one_long_line_is_cut_by_bytes_on_char_boundaries() {
        let text = "é".repeat(200);
        let b = small().bound(&text);
        assert!(b.text.starts_with(&"é".repeat(25)));
        assert!(b.text.contains("[... 300 bytes omitted ...]"), "{}", b.text);
        assert!(b.text.ends_with(&"é".repeat(25)));
    }

    #[test]
    fn defaults_are_50kb_2000_lines_10mb() {
        let d = ResourcePolicy::default();
        assert_eq!(
            (d.max_output_bytes, d.max_output_lines, d.max_file_bytes),
            (50_000, 2_000, 10_485_760)
        );
    }

    proptest! {
        #[test]
        fn bounded_text_is_head_marker_tail_within_the_caps(
            text in "(\\PC{0,30}\n){0,40}\\PC{0,300}",
            bytes in 0usize..200,
            lines in 0usize..12,
        ) {
            let policy = ResourcePolicy { max_output_bytes: bytes, max_output_lines: lines, max_file_bytes: 0 };
            let b = policy.bound(&text);
            if !b.truncated() {
                prop_assert_eq!(&b.text, &text);
                return Ok(());
            }
            let marker_start = b.text.find("[... ").unwrap_or(usize::MAX);
            prop_assert!(marker_start != usize::MAX, "no marker in {:?}", b.text);
            let close = " omitted ...]";
            let marker_len = b.text[marker_start..].find(close).unwrap_or(0) + close.len();
            let marker = &b.text[marker_start..marker_start + marker_len];
            let by_lines = marker.ends_with("lines omitted ...]");
            let tail_start = marker_start + marker_len + usize::from(by_lines);
            let head = &b.text[..marker_start];
            let tail = &b.text[tail_start..];
            prop_assert!(text.starts_with(head));
            prop_assert!(text.ends_with(tail));
            prop_assert!(head.len() + tail.len() <= bytes);
            prop_assert_eq!(b.omitted_bytes, text.len() - head.len() - tail.len());
            if by_lines {
                prop_assert_eq!(marker, format!("[... {} lines omitted ...]", b.omitted_lines));
                prop_assert!(b.text.split_inclusive('\n').count() <= lines.max(3));
            }
        }
    }
}

//! The text the model reads.

use std::fmt::Write as _;

use super::{GrepMode, GrepReport, LineKind};

impl GrepReport {
    /// `path:12:text` for matches and `path-13-text` for context (with `--`
    /// between groups when context was asked for) in content mode; one path
    /// per line for files; `path:N` for counts; then a continuation line when
    /// truncated, or `No matches.` when nothing matched.
    #[must_use]
    pub fn render(&self) -> String {
        let mut out = String::new();
        let total = match self.mode {
            GrepMode::Content => self.total_matches,
            GrepMode::FilesWithMatches | GrepMode::Count => self.files_with_matches,
        };
        if total == 0 {
            out.push_str("No matches.");
            self.push_skipped(&mut out);
            return out;
        }
        let mut shown = 0usize;
        let mut printed = false;
        let mut last_line: Option<u64> = None;
        for file in &self.results {
            match self.mode {
                GrepMode::Content => {
                    for line in &file.matches {
                        let adjacent = last_line.is_some_and(|l| l + 1 == line.line);
                        if self.context && printed && !adjacent {
                            out.push_str("--\n");
                        }
                        let sep = match line.kind {
                            LineKind::Match => {
                                shown += 1;
                                ':'
                            }
                            LineKind::Context => '-',
                        };
                        let _ = writeln!(out, "{}{sep}{}{sep}{}", file.path, line.line, line.text);
                        last_line = Some(line.line);
                        printed = true;
                    }
                    last_line = None;
                }
                GrepMode::FilesWithMatches => {
                    shown += 1;
                    let _ = writeln!(out, "{}", file.path);
                }
                GrepMode::Count => {
                    shown += 1;
                    let _ = writeln!(out, "{}:{}", file.path, file.count);
                }
            }
        }
        let unit = self.mode.unit();
        if shown == 0 {
            let _ = write!(
                out,
                "[no results at offset={}; {total} {unit} in all]",
                self.offset
            );
        } else if let Some(next) = self.next_offset {
            let _ = write!(
                out,
                "[results {}-{} of {total} {unit}; continue with offset={next}]",
                self.offset + 1,
                self.offset + shown
            );
        } else if out.ends_with('\n') {
            out.pop();
        }
        self.push_skipped(&mut out);
        out
    }

    fn push_skipped(&self, out: &mut String) {
        if self.unreadable_files_skipped > 0 {
            let _ = write!(
                out,
                "\n[{} unreadable or refused files skipped]",
                self.unreadable_files_skipped
            );
        }
    }
}

//! The text the model reads.

use std::fmt::Write as _;

use super::{GrepMode, GrepReport, LineKind};

impl GrepReport {
    /// `path:12:text` for matches and `path-13-text` for context (with `--`
    /// between groups when context was asked for) in content mode; one path
    /// per line for files; `path:N` for counts; then always one summary line,
    /// `[3 matches in 2 files; 120 files searched]` (with the page and how to
    /// continue when truncated), or `No matches. [120 files searched]`.
    /// A search that stopped early says so on a last line.
    #[must_use]
    pub fn render(&self) -> String {
        let mut out = self.render_results();
        if let Some(note) = &self.stopped_note {
            let _ = write!(out, "\n[{note}]");
        }
        out
    }

    fn render_results(&self) -> String {
        let mut out = String::new();
        let total = match self.mode {
            GrepMode::Content => self.total_matches,
            GrepMode::FilesWithMatches | GrepMode::Count => self.files_with_matches,
        };
        if total == 0 {
            let _ = write!(out, "No matches. [{}]", self.searched());
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
        let found = self.found();
        let searched = self.searched();
        if shown == 0 {
            let _ = write!(
                out,
                "[no results at offset={}; {found} in all; {searched}]",
                self.offset
            );
        } else if let Some(next) = self.next_offset {
            let _ = write!(
                out,
                "[results {}-{} of {found}; {searched}; continue with offset={next}]",
                self.offset + 1,
                self.offset + shown
            );
        } else {
            let _ = write!(out, "[{found}; {searched}]");
        }
        out
    }

    /// What matched, in the unit of the mode first (what pages count):
    /// `5 matches in 2 files`, `2 files with matches`, `2 files with 5
    /// matches`.
    fn found(&self) -> String {
        let matches = counted(self.total_matches, "match", "matches");
        match self.mode {
            GrepMode::Content => {
                let files = counted(self.files_with_matches, "file", "files");
                format!("{matches} in {files}")
            }
            GrepMode::FilesWithMatches => counted(
                self.files_with_matches,
                "file with matches",
                "files with matches",
            ),
            GrepMode::Count => {
                let files = counted(self.files_with_matches, "file", "files");
                format!("{files} with {matches}")
            }
        }
    }

    /// `120 files searched`, and the files that were skipped, if any.
    fn searched(&self) -> String {
        let mut text = format!("{} searched", counted(self.files_searched, "file", "files"));
        for (n, one, many) in [
            (self.binary_files_skipped, "binary file", "binary files"),
            (
                self.unreadable_files_skipped,
                "unreadable or refused file",
                "unreadable or refused files",
            ),
        ] {
            if n > 0 {
                let _ = write!(text, ", {} skipped", counted(n, one, many));
            }
        }
        text
    }
}

/// `1 match`, `2 matches`.
fn counted(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

//! What the sandbox fixed up after a background process ended (a `.git/commondir`
//! it removed, a repository the command made whose hooks and dangerous config keys
//! it took out), kept with the process for `process_read`, `process_list` and
//! `process_kill`, and appended to the end of its log.
//!
//! A `bash` call shows these on its result; a background process has no result
//! of its own when it ends, so without this they were lost and the agent (or the
//! user after it) would run host git in a repository it believes untouched.
//!
//! Bounded, because the command chooses how many repositories it makes and how
//! long their paths are: at most [`MAX_WARNINGS`] of at most [`MAX_WARNING_BYTES`]
//! each are kept per process, and the rest are counted.

use serde_json::{Value, json};

use crate::facts_schema;

/// Warnings kept per process; the rest are counted in [`EndWarnings::dropped`].
pub(crate) const MAX_WARNINGS: usize = 64;
/// Bytes of one warning kept; a longer one is cut and says how much was cut.
pub(crate) const MAX_WARNING_BYTES: usize = 1024;

/// What begins each warning line toolgate appends to a process's log.
pub(crate) const LINE_PREFIX: &str = "[toolgate] warning: ";

/// The warnings of one ended process, bounded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct EndWarnings {
    /// Each one line: control characters are escaped, because a path the
    /// command chose (a directory named `x\n[toolgate] warning: …`) would
    /// otherwise forge or split lines of the log and the results.
    pub kept: Vec<String>,
    /// Warnings beyond [`MAX_WARNINGS`], not kept.
    pub dropped: usize,
}

impl EndWarnings {
    /// The first [`MAX_WARNINGS`] of `warnings`, each one line of at most
    /// [`MAX_WARNING_BYTES`] (plus the note that says it was cut).
    pub fn bounded(warnings: Vec<String>) -> EndWarnings {
        let dropped = warnings.len().saturating_sub(MAX_WARNINGS);
        let kept = warnings
            .into_iter()
            .take(MAX_WARNINGS)
            .map(|w| one_line(&w))
            .collect();
        EndWarnings { kept, dropped }
    }

    pub fn is_empty(&self) -> bool {
        self.kept.is_empty() && self.dropped == 0
    }

    /// The lines for the log and the results' text, each ending in `\n`: one
    /// per kept warning, and one saying how many were dropped.
    pub fn lines(&self) -> String {
        let mut out = String::new();
        for warning in &self.kept {
            out.push_str(LINE_PREFIX);
            out.push_str(warning);
            out.push('\n');
        }
        if self.dropped > 0 {
            out.push_str(&format!(
                "{LINE_PREFIX}{} more warnings were dropped (only the first {MAX_WARNINGS} \
                 are kept)\n",
                self.dropped
            ));
        }
        out
    }

    /// The `warnings` and `warnings_dropped` facts.
    pub fn facts(&self, facts: &mut Value) {
        facts["warnings"] = json!(self.kept);
        facts["warnings_dropped"] = json!(self.dropped);
    }

    /// The schemas of [`EndWarnings::facts`]: `(warnings, warnings_dropped)`.
    pub fn schemas() -> (Value, Value) {
        (
            json!({
                "type": "array",
                "items": {"type": "string"},
                "description": "What toolgate fixed up after the process ended (a \
                                .git/commondir it removed, hooks and config keys that \
                                make host git run a program, taken out of a repository \
                                the command created): empty while it runs and when \
                                nothing needed fixing. Each is also the last lines of \
                                its output, after `[toolgate] warning: ` (the process \
                                itself can print such lines; this list is toolgate's).",
            }),
            json!({
                "type": "integer",
                "description": format!(
                    "Warnings beyond the first {MAX_WARNINGS}, not kept (each kept one \
                     is at most {MAX_WARNING_BYTES} bytes)."
                ),
            }),
        )
    }
}

/// `warning` on one line (control characters escaped) and cut to
/// [`MAX_WARNING_BYTES`] at a character boundary. Attack: a warning names
/// paths the command chose; a directory name holding a newline would
/// otherwise split the warning or fake a line of toolgate's own.
pub(crate) fn one_line(warning: &str) -> String {
    let mut out = String::with_capacity(warning.len().min(MAX_WARNING_BYTES));
    let mut cut = 0usize;
    for c in warning.chars() {
        let piece: String = if c.is_control() {
            c.escape_default().collect()
        } else {
            c.to_string()
        };
        if cut > 0 || out.len() + piece.len() > MAX_WARNING_BYTES {
            cut += c.len_utf8();
            continue;
        }
        out.push_str(&piece);
    }
    if cut > 0 {
        out.push_str(&format!(" [... {cut} more bytes cut]"));
    }
    out
}

/// The schema of an object of facts that carries [`EndWarnings::facts`].
pub(crate) fn with_schemas(mut properties: Value, required: &[&str]) -> Value {
    let (warnings, dropped) = EndWarnings::schemas();
    properties["warnings"] = warnings;
    properties["warnings_dropped"] = dropped;
    let mut required = required.to_vec();
    required.extend(["warnings", "warnings_dropped"]);
    facts_schema::object(properties, &required)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn warnings_are_bounded_in_number_and_length_and_kept_on_one_line() {
        let long = "é".repeat(MAX_WARNING_BYTES);
        let cases: Vec<(Vec<String>, EndWarnings)> = vec![
            (Vec::new(), EndWarnings::default()),
            (
                vec!["removed `core.fsmonitor` from /r/sub/.git/config".to_owned()],
                EndWarnings {
                    kept: vec!["removed `core.fsmonitor` from /r/sub/.git/config".to_owned()],
                    dropped: 0,
                },
            ),
            (
                vec!["a dir x\n[toolgate] warning: forged\u{1b}[2J".to_owned()],
                EndWarnings {
                    kept: vec!["a dir x\\n[toolgate] warning: forged\\u{1b}[2J".to_owned()],
                    dropped: 0,
                },
            ),
            (
                vec![long.clone()],
                EndWarnings {
                    kept: vec![format!(
                        "{} [... {} more bytes cut]",
                        "é".repeat(MAX_WARNING_BYTES / 2),
                        MAX_WARNING_BYTES
                    )],
                    dropped: 0,
                },
            ),
            (
                (0..MAX_WARNINGS + 3).map(|i| format!("w{i}")).collect(),
                EndWarnings {
                    kept: (0..MAX_WARNINGS).map(|i| format!("w{i}")).collect(),
                    dropped: 3,
                },
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(EndWarnings::bounded(input), expected);
        }
    }

    #[test]
    fn lines_say_how_many_were_dropped() {
        let w = EndWarnings::bounded((0..MAX_WARNINGS + 2).map(|i| format!("w{i}")).collect());
        let lines = w.lines();
        assert_eq!(lines.lines().count(), MAX_WARNINGS + 1);
        assert!(lines.starts_with("[toolgate] warning: w0\n"), "{lines}");
        assert!(
            lines.ends_with(
                "[toolgate] warning: 2 more warnings were dropped (only the first 64 are kept)\n"
            ),
            "{lines}"
        );
        assert_eq!(EndWarnings::default().lines(), "");
    }
}

//! Programs that pipe their data through a command an option names:
//! `sort --compress-program=PROG` (for its temporary files), `rg --pre CMD`
//! (on every file searched) and ripgrep's `--hostname-bin CMD`.

use super::getopt::{Arg, Order, Syntax};
use crate::command::words::Word;

const SORT: Syntax = Syntax {
    short_with_value: "kotST",
    short_optional_value: "",
    short_flags: "bcCdfghimMnrRsuVz",
    long_with_value: &[
        "batch-size",
        "buffer-size",
        "compress-program",
        "field-separator",
        "files0-from",
        "key",
        "output",
        "parallel",
        "random-source",
        "sort",
        "temporary-directory",
    ],
    long_optional_value: &["check"],
    long_flags: &[
        "debug",
        "dictionary-order",
        "general-numeric-sort",
        "help",
        "human-numeric-sort",
        "ignore-case",
        "ignore-leading-blanks",
        "ignore-nonprinting",
        "merge",
        "month-sort",
        "numeric-sort",
        "random-sort",
        "reverse",
        "stable",
        "unique",
        "version",
        "version-sort",
        "zero-terminated",
    ],
    order: Order::Permute,
};

/// ripgrep 14's options that take a value, and common ones that take none.
const RG: Syntax = Syntax {
    short_with_value: "ABCEMTdefgjmrt",
    short_optional_value: "",
    short_flags: "abcFhHiIlLnNopPqsSuUvVwxz0.",
    long_with_value: &[
        "after-context",
        "before-context",
        "color",
        "colors",
        "context",
        "context-separator",
        "dfa-size-limit",
        "encoding",
        "engine",
        "field-context-separator",
        "field-match-separator",
        "file",
        "generate",
        "glob",
        "hostname-bin",
        "hyperlink-format",
        "iglob",
        "ignore-file",
        "max-columns",
        "max-count",
        "max-depth",
        "max-filesize",
        "path-separator",
        "pre",
        "pre-glob",
        "regex-size-limit",
        "regexp",
        "replace",
        "sort",
        "sortr",
        "threads",
        "type",
        "type-add",
        "type-clear",
        "type-not",
    ],
    long_optional_value: &[],
    long_flags: &[
        "count",
        "count-matches",
        "files",
        "files-with-matches",
        "files-without-match",
        "fixed-strings",
        "follow",
        "hidden",
        "ignore-case",
        "invert-match",
        "json",
        "line-number",
        "no-config",
        "no-filename",
        "no-heading",
        "no-ignore",
        "only-matching",
        "passthru",
        "pcre2",
        "pretty",
        "quiet",
        "search-zip",
        "smart-case",
        "stats",
        "type-list",
        "vimgrep",
        "with-filename",
        "word-regexp",
    ],
    order: Order::Permute,
};

/// Whether `--written` names the long option `name`: exactly, as its
/// abbreviation, or as an abbreviation of several (an error for getopt,
/// refused here all the same).
pub(super) fn names(written: &str, resolved: Option<&str>, name: &str) -> bool {
    match resolved {
        Some(resolved) => resolved == name,
        None => !written.is_empty() && name.starts_with(written),
    }
}

pub(super) fn sort(args: &[Word]) -> Option<String> {
    for arg in SORT.scan(args) {
        match &arg {
            Arg::Long {
                written, resolved, ..
            } if names(written, *resolved, "compress-program") => {
                return Some(format!(
                    "`{}` names a program sort runs to compress its temporary files",
                    arg.shown()
                ));
            }
            Arg::Unknown(word) => {
                return Some(super::unknown_option(
                    "sort",
                    word,
                    "--compress-program=CMD",
                ));
            }
            _ => {}
        }
    }
    None
}

pub(super) fn rg(args: &[Word]) -> Option<String> {
    for arg in RG.scan(args) {
        match &arg {
            Arg::Long {
                written,
                resolved,
                value,
                ..
            } => {
                let runs = if names(written, *resolved, "pre") {
                    "names a command rg runs on every file it searches"
                } else if names(written, *resolved, "hostname-bin") {
                    "names a program rg runs to find the host name for hyperlinks"
                } else {
                    continue;
                };
                // `--pre=` (empty) turns the preprocessor off.
                if value.as_ref().and_then(|v| v.text()) == Some("") {
                    continue;
                }
                return Some(format!("`{}` {runs}", arg.shown()));
            }
            Arg::Unknown(word) => {
                return Some(super::unknown_option("rg", word, "--pre=CMD"));
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use crate::command::CommandPolicy;
    use crate::command::launchers::test_support::{
        allowing, expect_allowed, expect_launches_refused,
    };

    fn policy() -> Result<CommandPolicy, String> {
        allowing(&["sort", "rg", "cat"])
    }

    #[test]
    fn sort_and_rg_may_not_be_told_to_run_a_command() -> Result<(), String> {
        let policy = policy()?;
        let refused = [
            (
                "sort --compress-program=python3 f",
                "`--compress-program=python3` names a program sort runs",
            ),
            (
                "sort --compress-program python3 f",
                "`--compress-program python3`",
            ),
            ("sort -S 1k --compress-prog=x f", "`--compress-prog=x`"),
            ("sort --co=x f", "`--co=x`"),
            ("sort f --compress-program=x", "`--compress-program=x`"),
            (
                "sort -o out --compress-program=x f",
                "`--compress-program=x`",
            ),
            // `--` after `-o` is the output file's name, not the end.
            (
                "sort -o -- --compress-program=x f",
                "`--compress-program=x`",
            ),
            ("sort \"$f\"", "`\"$f\"` is only known at run time"),
            ("sort -u $files", "`$files` is only known at run time"),
            ("cat f | sort *", "`*` is only known at run time"),
            (
                "rg --pre python3 x",
                "`--pre python3` names a command rg runs on every file",
            ),
            ("rg --pre=./x.sh x", "`--pre=./x.sh`"),
            ("rg -i --pre-glob '*.pdf' --pre x y", "`--pre x`"),
            ("rg x . --pre x", "`--pre x`"),
            (
                "rg --hostname-bin=x --hyperlink-format=default x",
                "`--hostname-bin=x` names a program",
            ),
            ("rg x \"$dir\"", "`\"$dir\"` is only known at run time"),
            ("rg -e -- --pre z", "`--pre z`"),
        ];
        expect_launches_refused(&policy, &refused)
    }

    #[test]
    fn everyday_sort_and_rg_still_run() -> Result<(), String> {
        let policy = policy()?;
        let allowed = [
            "sort f",
            "sort -u -n -k 2,2 -t : f",
            "sort -rn --key=3 -o out.txt f",
            "sort -S 50% -T /tmp --parallel=2 f",
            "sort --check=quiet f",
            "cat f | sort",
            "sort -- \"$f\"",
            "sort -u -- $files",
            "sort src/*.txt",
            "rg -n 'fn main' src",
            "rg --pre-glob '*.pdf' x",
            "rg --pre= x",
            "rg -e --pre x",
            "rg -z x logs",
            "rg --type rust -g '!target' x",
            "rg -C 3 x -- \"$dir\"",
            "rg --json --sort path x",
        ];
        expect_allowed(&policy, &allowed);
        Ok(())
    }
}

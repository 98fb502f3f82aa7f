//! How much a search may ask the regex and glob engines to build.
//!
//! Attack: a call with a multi-megabyte pattern made the regex parser and
//! compiler allocate hundreds of megabytes before they gave up (a 4 MB
//! pattern took the server to 793 MiB, 8 MB to 1.6 GB), and a short pattern
//! whose counted repetitions multiply (`\w{1000}{1000}`) asks for a program
//! of billions of states. So the text of every pattern and glob is bounded
//! before anything parses it, and what a regex compiles to is bounded inside
//! the engine; either way the call is refused with what to change, never
//! answered by running out of memory.

use super::walk::SearchError;

/// Longest `grep` pattern, in characters. Real patterns are far shorter; a
/// long literal is better found by a distinctive part of it.
pub const MAX_PATTERN_CHARS: usize = 4096;

/// Longest glob (`find`'s pattern, one `include` or `exclude` entry), in
/// characters: the longest path Linux accepts.
pub const MAX_GLOB_CHARS: usize = 4096;

/// Most `include` (or `exclude`) globs in one call.
pub const MAX_GLOBS: usize = 64;

/// Most file types in one call (`ignore` knows about 300).
pub const MAX_TYPES: usize = 64;

/// Largest compiled regex program (the NFA, and each of the engines built
/// from it). Ripgrep's default is 100 MiB; a pattern that needs more than
/// this is a mistake, and ten times fewer states keep the matcher's
/// per-thread scratch space small too.
pub const REGEX_SIZE_LIMIT: usize = 10 << 20;

/// Largest lazy-DFA cache of each search thread (ripgrep: 1000 MiB). A
/// pattern whose DFA outgrows it is still answered, by the slower engines.
pub const REGEX_DFA_CACHE_LIMIT: usize = 4 << 20;

/// How many characters of a refused pattern an error message repeats.
const SHOWN_CHARS: usize = 80;

/// Refuses `text` (what the caller called `what`: "pattern", "glob") when it
/// is longer than `limit` characters; `advice` says what to do instead.
pub(crate) fn check_length(
    what: &'static str,
    text: &str,
    limit: usize,
    advice: &'static str,
) -> Result<(), SearchError> {
    // Bytes bound characters from above: most texts need no count.
    if text.len() <= limit {
        return Ok(());
    }
    let chars = text.chars().count();
    if chars <= limit {
        return Ok(());
    }
    Err(SearchError::TooLong {
        what,
        chars,
        limit,
        advice,
    })
}

/// Refuses a list (`include`, `types` ...) of more than `limit` entries.
pub(crate) fn check_count(
    what: &'static str,
    count: usize,
    limit: usize,
    advice: &'static str,
) -> Result<(), SearchError> {
    if count <= limit {
        return Ok(());
    }
    Err(SearchError::TooMany {
        what,
        count,
        limit,
        advice,
    })
}

/// `text` for an error message: quoted, and cut after [`SHOWN_CHARS`]
/// characters with how long it was (an error must not echo megabytes).
pub(crate) fn shown(text: &str) -> String {
    let mut chars = text.char_indices();
    match chars.nth(SHOWN_CHARS) {
        None => format!("{text:?}"),
        Some((cut, _)) => {
            let total = text.chars().count();
            format!("{:?}… ({total} characters)", &text[..cut])
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::search::find::{FindOptions, find};
    use crate::search::grep::{GrepOptions, grep};
    use crate::search::walk::tests::Tree;
    use pretty_assertions::assert_eq;

    fn grep_err(opts: GrepOptions) -> String {
        let tree = Tree::new(&[("a.txt", b"needle\n")]);
        grep(&tree.jail, Path::new(""), &opts)
            .unwrap_err()
            .to_string()
    }

    fn pattern(pattern: String) -> GrepOptions {
        GrepOptions {
            pattern,
            ..GrepOptions::default()
        }
    }

    #[test]
    fn a_pattern_over_the_limit_is_refused_before_it_is_parsed() {
        // At the limit it runs (a literal of 4096 characters finds nothing).
        let tree = Tree::new(&[("a.txt", b"needle\n")]);
        let at_limit = pattern("n".repeat(MAX_PATTERN_CHARS));
        assert_eq!(
            grep(&tree.jail, Path::new(""), &at_limit)
                .unwrap()
                .total_matches,
            0
        );
        // One more, and even an invalid regex is refused for its length.
        let message = grep_err(pattern(format!("({}", "a".repeat(MAX_PATTERN_CHARS))));
        assert_eq!(
            message,
            "the pattern is 4097 characters long, over the limit of 4096; search for a \
             shorter, distinctive part of it (with fixed_strings: true for literal text), or \
             run several searches"
        );
    }

    #[test]
    fn a_short_pattern_that_compiles_huge_is_refused_with_what_to_change() {
        for regex in [
            r"\w{1000}{1000}",
            r"(?:a{1,1000}){1,1000}",
            r"(foo|bar|baz){500}{500}",
        ] {
            let message = grep_err(pattern(regex.to_owned()));
            assert_eq!(
                message,
                format!(
                    "the regex {regex:?} compiles to more than the limit of 10 MiB; simplify \
                     it: counted repetitions multiply (`\\w{{1000}}{{1000}}` is a million \
                     `\\w`), and Unicode classes such as `\\w` are large (`(?-u:\\w)` is \
                     the ASCII-only one); for literal text set fixed_strings: true"
                )
            );
        }
    }

    #[test]
    fn errors_show_a_long_pattern_cut() {
        let long = format!("({}", "a".repeat(200));
        let message = grep_err(pattern(long));
        assert!(
            message.starts_with(&format!(
                "invalid regex \"({}\"… (201 characters): ",
                "a".repeat(79)
            )),
            "{message}"
        );
        assert!(message.len() < 1000, "{message}");
    }

    #[test]
    fn globs_and_types_are_bounded_in_length_and_number() {
        let many = vec!["*.rs".to_owned(); MAX_GLOBS + 1];
        let message = grep_err(GrepOptions {
            include: many.clone(),
            ..pattern("needle".into())
        });
        assert_eq!(
            message,
            "include has 65 entries, over the limit of 64; merge them into fewer globs \
             (`*.{rs,toml}`, `{src,tests}/**`) or search a narrower path"
        );
        let message = grep_err(GrepOptions {
            exclude: many,
            ..pattern("needle".into())
        });
        assert!(message.starts_with("exclude has 65 entries"), "{message}");
        let message = grep_err(GrepOptions {
            include: vec!["a".repeat(MAX_GLOB_CHARS + 1)],
            ..pattern("needle".into())
        });
        assert_eq!(
            message,
            "the glob is 4097 characters long, over the limit of 4096; a glob names a path; \
             use `*` and `**` instead of spelling every name out"
        );
        let message = grep_err(GrepOptions {
            types: vec!["rust".to_owned(); MAX_TYPES + 1],
            ..pattern("needle".into())
        });
        assert_eq!(
            message,
            "types has 65 entries, over the limit of 64; name fewer types, or use include globs"
        );
        let message = grep_err(GrepOptions {
            types: vec!["x".repeat(1000)],
            ..pattern("needle".into())
        });
        assert!(message.contains("… (1000 characters)"), "{message}");
        assert!(message.len() < 1000, "{message}");

        let tree = Tree::new(&[("a.txt", b"needle\n")]);
        let long = FindOptions {
            pattern: "*".repeat(MAX_GLOB_CHARS + 1),
            ..FindOptions::default()
        };
        let message = find(&tree.jail, Path::new(""), &long)
            .unwrap_err()
            .to_string();
        assert!(
            message.starts_with("the glob is 4097 characters long"),
            "{message}"
        );
    }

    #[test]
    fn lengths_are_counted_in_characters_and_refused_past_the_limit() {
        assert!(check_length("pattern", &"é".repeat(10), 10, "").is_ok());
        let err = check_length("pattern", &"é".repeat(11), 10, "shorten it").unwrap_err();
        assert_eq!(
            err.to_string(),
            "the pattern is 11 characters long, over the limit of 10; shorten it"
        );
        assert!(check_count("include", 3, 3, "").is_ok());
        assert_eq!(
            check_count("include", 4, 3, "merge them")
                .unwrap_err()
                .to_string(),
            "include has 4 entries, over the limit of 3; merge them"
        );
    }

    #[test]
    fn long_texts_are_cut_in_messages() {
        assert_eq!(shown("a(b"), "\"a(b\"");
        let long = "x".repeat(SHOWN_CHARS) + "yz";
        assert_eq!(
            shown(&long),
            format!("\"{}\"… (82 characters)", "x".repeat(SHOWN_CHARS))
        );
        assert_eq!(
            shown(&"é".repeat(SHOWN_CHARS)),
            format!("{:?}", "é".repeat(80))
        );
    }
}

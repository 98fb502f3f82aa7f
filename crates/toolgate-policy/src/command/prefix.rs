//! The words every command of a script starts with, for approvals by
//! command prefix: a person who approved `cargo test` for a shell tool has
//! approved every script whose every command starts with the words `cargo
//! test` (`cargo test -p x`), decided on the parsed script, never on its
//! raw text (`cargo test; rm -rf ~` runs `rm` too, `cargo testx` is
//! another word).

use super::parse::analyse;

/// The longest prefix a grant by command prefix may have; a longer prefix
/// is never a covering key (it bounds the keys one call carries).
pub const MAX_PREFIX_WORDS: usize = 16;

/// The words (program as written, then arguments) every command of every
/// script starts with, at most [`MAX_PREFIX_WORDS`] of them; `None` when
/// a prefix cannot stand for what the scripts do. Also the first command's
/// words, for suggesting a prefix.
pub(crate) fn common_prefix(scripts: &[&str]) -> Option<(Vec<String>, Vec<String>)> {
    let mut common: Option<Vec<String>> = None;
    let mut first: Option<Vec<String>> = None;
    for script in scripts {
        let analysis = analyse(script);
        // Each of these makes the words of the commands an incomplete
        // account of what runs, so no grant by prefix may cover the script:
        // - a part that cannot be analysed, or a name known only at run time;
        // - an assignment (`LD_PRELOAD=/tmp/x.so cargo test`, `PATH=. cargo
        //   test` run something other than what `cargo test` names);
        // - a function (`cargo() { rm -rf ~; }; cargo test`);
        // - a command told to run another program its words do not name
        //   (`git -c alias.t='!rm -rf ~' t`);
        // - a redirect that writes a file (`cargo test > Cargo.toml`).
        let opaque = !analysis.problems.is_empty()
            || analysis.commands.iter().any(|c| c.dynamic_name)
            || !analysis.assignments.is_empty()
            || !analysis.functions.is_empty()
            || !analysis.launches.is_empty()
            || analysis.output_redirects.iter().any(|t| t != "/dev/null")
            || analysis.commands.is_empty();
        if opaque {
            return None;
        }
        for command in &analysis.commands {
            let words: Vec<String> = std::iter::once(command.program.clone())
                .chain(command.args.iter().cloned())
                .take(MAX_PREFIX_WORDS)
                .collect();
            first.get_or_insert_with(|| words.clone());
            common = Some(match common {
                None => words,
                Some(mut common) => {
                    let same = common
                        .iter()
                        .zip(&words)
                        .take_while(|(a, b)| a == b)
                        .count();
                    common.truncate(same);
                    common
                }
            });
        }
    }
    let common = common.filter(|c| !c.is_empty())?;
    Some((common, first.unwrap_or_default()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn words(s: &str) -> Vec<String> {
        s.split(' ').map(str::to_owned).collect()
    }

    /// What every command of the script starts with (`None`: no prefix
    /// may cover it).
    #[test]
    fn the_common_prefix_is_taken_from_the_parsed_commands() {
        let cases: &[(&str, Option<&str>)] = &[
            ("cargo test", Some("cargo test")),
            ("cargo test -p x", Some("cargo test -p x")),
            ("  cargo   'test'  -p \"x\"", Some("cargo test -p x")),
            ("cargo test && cargo build", Some("cargo")),
            ("cargo test -p a; cargo test -p b", Some("cargo test -p")),
            ("(cargo test) || cargo test --release", Some("cargo test")),
            ("cargo test 2>&1 >/dev/null", Some("cargo test")),
            // Another command anywhere: nothing they share.
            ("cargo test; rm -rf /", None),
            ("cargo test | tee log", None),
            ("cargo test $(rm -rf ~)", None),
            ("cargo test `rm -rf ~`", None),
            ("sudo cargo test", None),
            ("bash -c 'cargo test'", None),
            ("cargo test & rm x", None),
            // One word with a space in it is not two words.
            ("'cargo test'", Some("cargo test")),
            // What the words do not show.
            ("LD_PRELOAD=/tmp/x.so cargo test", None),
            ("PATH=. cargo test", None),
            ("cargo() { rm -rf ~; }; cargo test", None),
            ("git -c alias.t='!rm -rf ~' t", None),
            ("cargo test > Cargo.toml", None),
            ("cargo test >> $LOG", None),
            ("cargo test &> out", None),
            ("$CARGO test", None),
            ("cargo test 'unterminated", None),
            ("", None),
            ("# just a comment", None),
        ];
        for (script, expected) in cases {
            let got = common_prefix(&[script]).map(|(common, _)| common.join(" "));
            assert_eq!(got.as_deref(), *expected, "{script}");
        }
        // `'cargo test'` is one word.
        assert_eq!(
            common_prefix(&["'cargo test' x"]).map(|(c, _)| c),
            Some(vec!["cargo test".to_owned(), "x".to_owned()])
        );
    }

    #[test]
    fn every_script_of_a_call_counts_and_the_first_command_is_kept() {
        assert_eq!(
            common_prefix(&["cargo test -p a && cargo build", "cargo fmt"]),
            Some((words("cargo"), words("cargo test -p a")))
        );
        assert_eq!(common_prefix(&["cargo test", "rm x"]), None);
        assert_eq!(common_prefix(&["cargo test", "x=1"]), None);
    }

    #[test]
    fn prefixes_are_at_most_sixteen_words() {
        let long = format!("echo {}", vec!["w"; 40].join(" "));
        let (common, first) = common_prefix(&[&long]).unwrap_or_default();
        assert_eq!(common.len(), MAX_PREFIX_WORDS);
        assert_eq!(first.len(), MAX_PREFIX_WORDS);
    }
}

//! A command line read the way getopt reads it, enough to find the options
//! that make a program run a command: `-oProxyCommand=x` is `-o` with a
//! value, `-vvo x` is `-v -v -o x`, `--compress-prog=x` is
//! `--compress-program=x`, and a word after `--` is an operand.
//!
//! Where the reading is uncertain it errs towards seeing more options, never
//! fewer: a value we are not sure an option takes is read as a word of its
//! own too, and a word only known at run time where an option may stand is
//! reported as [`Arg::Unknown`], because a file or a variable can be named
//! `--compress-program=sh`.

use crate::command::words::Word;

/// How a program's options are spelled.
pub(super) struct Syntax {
    /// Short options that take a value: the rest of the word, or the next word.
    pub short_with_value: &'static str,
    /// Short options whose value can only be the rest of the word (sed's `-i`).
    pub short_optional_value: &'static str,
    /// Short options known to take no value.
    pub short_flags: &'static str,
    /// Long options that take a value: `--name=VALUE` or `--name VALUE`.
    pub long_with_value: &'static [&'static str],
    /// Long options whose value can only follow `=`.
    pub long_optional_value: &'static [&'static str],
    /// Long options known to take no value.
    pub long_flags: &'static [&'static str],
    /// GNU getopt finds options anywhere (`sed s/a/b/ -e x`); BSD and
    /// POSIX getopt stop at the first operand.
    pub order: Order,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Order {
    Permute,
    StopAtOperand,
}

/// One option or operand, in command-line order.
#[derive(Debug)]
pub(super) enum Arg<'w> {
    /// `-x`, `-xVALUE`, `-x VALUE`, or one letter of a cluster `-vx`.
    Short {
        letter: char,
        value: Option<Value<'w>>,
        word: &'w Word,
    },
    /// `--name`, `--name=VALUE`, `--name VALUE`. `resolved` is the option
    /// `written` names, exactly or as getopt_long's unique abbreviation;
    /// `None` when it names none we know, or several.
    Long {
        written: String,
        resolved: Option<&'static str>,
        value: Option<Value<'w>>,
        word: &'w Word,
    },
    Operand(&'w Word),
    /// A word only known at run time that may turn out to be one or more
    /// options: `"$x"`, `$x` unquoted (which splits), `*`, `-n$x`.
    Unknown(&'w Word),
}

#[derive(Debug)]
pub(super) enum Value<'w> {
    Text(String),
    /// Only known at run time.
    RunTime(&'w Word),
    /// The option was the last word.
    Missing,
}

impl Arg<'_> {
    /// The word the option was written in, for messages.
    pub fn text(&self) -> &str {
        match self {
            Arg::Short { word, .. }
            | Arg::Long { word, .. }
            | Arg::Operand(word)
            | Arg::Unknown(word) => word.text(),
        }
    }
}

impl Arg<'_> {
    /// The option with its value when that is the next word: `-f prog.sed`.
    pub fn shown(&self) -> String {
        let (word, value) = match self {
            Arg::Short { word, value, .. } | Arg::Long { word, value, .. } => (word, value),
            Arg::Operand(word) | Arg::Unknown(word) => return word.text().to_string(),
        };
        match value {
            Some(Value::Text(text)) if !word.text().ends_with(text.as_str()) => {
                format!("{} {text}", word.text())
            }
            Some(Value::RunTime(next)) if !std::ptr::eq(*next, *word) => {
                format!("{} {}", word.text(), next.text())
            }
            _ => word.text().to_string(),
        }
    }
}

impl Value<'_> {
    pub fn text(&self) -> Option<&str> {
        match self {
            Value::Text(text) => Some(text),
            _ => None,
        }
    }
}

/// Whether a word only known at run time may expand to words starting with
/// `-`: it starts with an expansion, a glob or a dash, or has an unquoted
/// expansion, which word splitting can turn into several words
/// (`src/$f` with `f='x --compress-program=sh'`). A process substitution
/// is a `/dev/fd/N` path.
pub(super) fn may_be_options(word: &Word) -> bool {
    let Word::Dynamic(dynamic) = word else {
        return false;
    };
    if dynamic.generated_file {
        return false;
    }
    let expands = dynamic.source.contains(['$', '`']);
    if expands && !dynamic.base_is_exact {
        return true;
    }
    let start = dynamic.source.trim_start_matches(['"', '\'']);
    start.is_empty() || start.starts_with(['$', '`', '*', '?', '[', '-', '\\', '{', '<'])
}

/// The literal start of a dynamic word whose expansions are all quoted:
/// `--in-place="$x"` -> `--in-place=`. `None` when it may split.
pub(super) fn literal_prefix(word: &Word) -> Option<String> {
    let Word::Dynamic(dynamic) = word else {
        return None;
    };
    if !dynamic.base_is_exact {
        return None;
    }
    Some(
        dynamic
            .source
            .chars()
            .filter(|c| !matches!(c, '"' | '\''))
            .take_while(|c| !matches!(c, '$' | '`' | '\\' | '*' | '?' | '[' | '{'))
            .collect(),
    )
}

impl Syntax {
    /// The long option `written` names: exactly, or as the only one it
    /// abbreviates.
    pub fn resolve_long(&self, written: &str) -> Option<&'static str> {
        let all = || {
            self.long_with_value
                .iter()
                .chain(self.long_optional_value)
                .chain(self.long_flags)
                .copied()
        };
        if written.is_empty() {
            return None;
        }
        if let Some(exact) = all().find(|name| *name == written) {
            return Some(exact);
        }
        let mut matches = all().filter(|name| name.starts_with(written));
        match (matches.next(), matches.next()) {
            (Some(only), None) => Some(only),
            _ => None,
        }
    }

    /// Reads `args` (the words after the program name).
    pub fn scan<'w>(&self, args: &'w [Word]) -> Vec<Arg<'w>> {
        let mut out = Vec::new();
        let mut words = args.iter().peekable();
        let mut options_ended = false;
        // The previous option may have taken this word as its value
        // although we did not read it so: a `--` here may be a value, not
        // the end of the options.
        let mut maybe_value = false;
        while let Some(word) = words.next() {
            let was_maybe_value = std::mem::take(&mut maybe_value);
            if options_ended {
                out.push(Arg::Operand(word));
                continue;
            }
            let text = match word.literal() {
                Some(text) => text.to_string(),
                None if !may_be_options(word) => {
                    out.push(Arg::Operand(word));
                    options_ended = self.order == Order::StopAtOperand;
                    continue;
                }
                None => match literal_prefix(word) {
                    // `-n"$x"`: the known letters, then the unknown rest.
                    Some(prefix) if prefix.starts_with('-') && prefix.len() > 1 => {
                        let before = out.len();
                        maybe_value = self.read_option(&prefix, word, &mut words, &mut out, true);
                        if out.len() == before {
                            out.push(Arg::Unknown(word));
                        }
                        continue;
                    }
                    _ => {
                        out.push(Arg::Unknown(word));
                        continue;
                    }
                },
            };
            if text == "--" && !was_maybe_value {
                options_ended = true;
                continue;
            }
            if text == "--" {
                // The value of the option before, or the end of the
                // options: read what follows as options still.
                continue;
            }
            if text.len() < 2 || !text.starts_with('-') {
                out.push(Arg::Operand(word));
                options_ended = self.order == Order::StopAtOperand;
                continue;
            }
            maybe_value = self.read_option(&text, word, &mut words, &mut out, false);
        }
        out
    }

    /// Reads the option word `text` (`word` as written). `partial`: only
    /// the start of the word is known; the rest is only known at run time.
    /// Returns whether the next word may be a value this option took.
    fn read_option<'w>(
        &self,
        text: &str,
        word: &'w Word,
        words: &mut Words<'w>,
        out: &mut Vec<Arg<'w>>,
        partial: bool,
    ) -> bool {
        if let Some(long) = text.strip_prefix("--") {
            let (written, inline) = match long.split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (long, None),
            };
            if partial && inline.is_none() {
                // `--"$x"`, `--comp"$x"`: the name itself is unknown.
                out.push(Arg::Unknown(word));
                return false;
            }
            let resolved = self.resolve_long(written);
            let takes_value = resolved.is_some_and(|name| self.long_with_value.contains(&name));
            let value = match inline {
                Some(_) if partial => Some(Value::RunTime(word)),
                Some(value) => Some(Value::Text(value.to_string())),
                None if takes_value => Some(separate_value(words, out, true)),
                None => None,
            };
            out.push(Arg::Long {
                written: written.to_string(),
                resolved,
                value,
                word,
            });
            return resolved.is_none() && inline.is_none();
        }
        // After a letter we do not know, the rest of the cluster may be its
        // value or more letters, and the next word its value or a word of
        // its own: read it every way.
        let mut uncertain = false;
        let letters: Vec<char> = text.chars().skip(1).collect();
        for (i, &letter) in letters.iter().enumerate() {
            let rest: String = letters[i + 1..].iter().collect();
            let value = if self.short_with_value.contains(letter) {
                Some(match (rest.is_empty(), partial) {
                    (_, true) => Value::RunTime(word),
                    (false, false) => Value::Text(rest),
                    (true, false) => separate_value(words, out, !uncertain),
                })
            } else if self.short_optional_value.contains(letter) {
                match (rest.is_empty(), partial) {
                    (_, true) => Some(Value::RunTime(word)),
                    (false, false) => Some(Value::Text(rest)),
                    (true, false) => None,
                }
            } else {
                uncertain |= !self.short_flags.contains(letter);
                out.push(Arg::Short {
                    letter,
                    value: None,
                    word,
                });
                continue;
            };
            out.push(Arg::Short {
                letter,
                value,
                word,
            });
            if !uncertain {
                return false;
            }
        }
        if partial {
            // The rest of the cluster is only known at run time.
            out.push(Arg::Unknown(word));
        }
        uncertain
    }
}

type Words<'w> = std::iter::Peekable<std::slice::Iter<'w, Word>>;

/// The value of an option in the next word; `consume`: false when that
/// word is to be read as a word of its own too.
fn separate_value<'w>(words: &mut Words<'w>, out: &mut Vec<Arg<'w>>, consume: bool) -> Value<'w> {
    let next = match consume {
        true => words.next(),
        false => words.peek().copied(),
    };
    let Some(next) = next else {
        return Value::Missing;
    };
    match next.literal() {
        Some(value) => Value::Text(value.to_string()),
        None => {
            // An unquoted `$x` as a value splits, and the words after the
            // first stand where options do.
            if consume && may_be_options(next) && literal_prefix(next).is_none() {
                out.push(Arg::Unknown(next));
            }
            Value::RunTime(next)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SYNTAX: Syntax = Syntax {
        short_with_value: "o",
        short_optional_value: "i",
        short_flags: "v",
        long_with_value: &["output", "compress-program"],
        long_optional_value: &["in-place"],
        long_flags: &["verbose", "compress"],
        order: Order::Permute,
    };

    fn render(args: &[Arg]) -> Vec<String> {
        args.iter()
            .map(|arg| match arg {
                Arg::Short { letter, value, .. } => format!("-{letter}{}", show(value)),
                Arg::Long {
                    written,
                    resolved,
                    value,
                    ..
                } => format!("--{written}({}){}", resolved.unwrap_or("?"), show(value)),
                Arg::Operand(word) => format!("operand {}", word.text()),
                Arg::Unknown(word) => format!("unknown {}", word.text()),
            })
            .collect()
    }

    fn show(value: &Option<Value>) -> String {
        match value {
            None => String::new(),
            Some(Value::Text(text)) => format!(" = {text}"),
            Some(Value::RunTime(word)) => format!(" = run time {}", word.text()),
            Some(Value::Missing) => " = missing".to_string(),
        }
    }

    fn dynamic(source: &str, quoted: bool) -> Word {
        Word::Dynamic(crate::command::words::DynamicWord {
            source: source.to_string(),
            base_name: None,
            base_is_exact: quoted,
            generated_file: false,
        })
    }

    fn literal(text: &str) -> Word {
        Word::Literal(text.to_string())
    }

    #[test]
    fn options_are_read_as_getopt_reads_them() {
        let cases: Vec<(Vec<Word>, Vec<&str>)> = vec![
            (
                vec![literal("-vvoX"), literal("f")],
                vec!["-v", "-v", "-o = X", "operand f"],
            ),
            (
                vec![literal("-o"), literal("--"), literal("-v")],
                vec!["-o = --", "-v"],
            ),
            (vec![literal("--"), literal("-v")], vec!["operand -v"]),
            (
                vec![literal("--compress-prog=x"), literal("--comp")],
                vec!["--compress-prog(compress-program) = x", "--comp(?)"],
            ),
            (
                vec![literal("--compress"), literal("--output"), literal("f")],
                vec!["--compress(compress)", "--output(output) = f"],
            ),
            (
                vec![literal("-i"), literal("x"), literal("-ibak")],
                vec!["-i", "operand x", "-i = bak"],
            ),
            // An option we do not know may have taken `--` as its value.
            (
                vec![literal("--zz"), literal("--"), literal("-v")],
                vec!["--zz(?)", "-v"],
            ),
            // After an unknown letter, every reading: `-Q` with the value
            // `oX`, or `-Q -o X`; the next word a value or an option.
            (
                vec![literal("-QoX"), literal("-Qo"), literal("-v")],
                vec!["-Q", "-o = X", "-X", "-Q", "-o = -v", "-v"],
            ),
            (
                vec![literal("-Q"), literal("--"), literal("-v")],
                vec!["-Q", "-v"],
            ),
            (
                vec![dynamic("\"$f\"", true), dynamic("src/\"$f\"", true)],
                vec!["unknown \"$f\"", "operand src/\"$f\""],
            ),
            (
                vec![
                    dynamic("src/$f", false),
                    literal("--"),
                    dynamic("\"$f\"", true),
                ],
                vec!["unknown src/$f", "operand \"$f\""],
            ),
            (
                vec![dynamic("--output=\"$f\"", true), dynamic("-v\"$x\"", true)],
                vec![
                    "--output(output) = run time --output=\"$f\"",
                    "-v",
                    "unknown -v\"$x\"",
                ],
            ),
            (
                vec![literal("-o"), dynamic("$f", false)],
                vec!["unknown $f", "-o = run time $f"],
            ),
        ];
        for (words, expected) in cases {
            assert_eq!(render(&SYNTAX.scan(&words)), expected, "{words:?}");
        }
    }

    #[test]
    fn posix_order_stops_at_the_first_operand() {
        let syntax = Syntax {
            order: Order::StopAtOperand,
            ..SYNTAX
        };
        let words = [literal("-v"), literal("host"), literal("-oX")];
        assert_eq!(
            render(&syntax.scan(&words)),
            vec!["-v", "operand host", "operand -oX"]
        );
    }
}

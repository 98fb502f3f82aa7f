//! GNU sed runs shell commands from its script: the `e` command
//! (`1e date`) and the `e` flag of `s` (`s/.*/date/e`) run text as a
//! command. The script is read here as sed's compile.c reads it, so that
//! `s/e/E/g` and `a text with e` run while `s/x/y/e` and `1e cmd` do not;
//! a script that cannot be read is refused, as is one from a file
//! (`-f FILE`), unless `--sandbox` (which makes sed refuse e, r and w)
//! comes before it.

use super::getopt::{Arg, Order, Syntax, Value};
use crate::command::parse::short;
use crate::command::words::Word;

const SED: Syntax = Syntax {
    short_with_value: "efl",
    short_optional_value: "i",
    short_flags: "bsnrzuE",
    long_with_value: &["expression", "file", "line-length"],
    long_optional_value: &["in-place"],
    long_flags: &[
        "binary",
        "regexp-extended",
        "debug",
        "null-data",
        "zero-terminated",
        "quiet",
        "posix",
        "silent",
        "sandbox",
        "separate",
        "unbuffered",
        "version",
        "help",
        "follow-symlinks",
    ],
    order: Order::Permute,
};

const HINT: &str = "(`--sandbox` before it makes sed refuse e, r and w)";

/// Why `sed ARGS` may run a shell command, if it may.
pub(super) fn sed(args: &[Word]) -> Option<String> {
    // GNU getopt finds options anywhere, but stops at the first operand
    // when POSIXLY_CORRECT is set, which the script can do: then
    // `sed '1e cmd' -e p` runs `1e cmd`. Both readings must be safe.
    [Order::Permute, Order::StopAtOperand]
        .into_iter()
        .find_map(|order| reading(args, order))
}

fn reading(args: &[Word], order: Order) -> Option<String> {
    let syntax = Syntax { order, ..SED };
    let mut sandbox = false;
    let mut from_options = false;
    // The -e scripts before `--sandbox`, which sed compiles one after
    // another as one program (`-e 'a\' -e text`).
    let mut unsandboxed = String::new();
    let mut first_operand = None;
    for arg in syntax.scan(args) {
        let text = arg.text().to_string();
        let shown = arg.shown();
        match arg {
            Arg::Long {
                resolved: Some("sandbox"),
                ..
            } => sandbox = true,
            Arg::Short {
                letter: 'e', value, ..
            }
            | Arg::Long {
                resolved: Some("expression"),
                value,
                ..
            } => {
                from_options = true;
                if sandbox {
                    continue;
                }
                match value {
                    Some(Value::Text(chunk)) => {
                        if !unsandboxed.is_empty() {
                            unsandboxed.push('\n');
                        }
                        unsandboxed.push_str(&chunk);
                    }
                    Some(Value::RunTime(word)) => {
                        return Some(format!(
                            "the sed script `{}` is only known at run time {HINT}",
                            word.text()
                        ));
                    }
                    _ => {}
                }
            }
            Arg::Short { letter: 'f', .. }
            | Arg::Long {
                resolved: Some("file"),
                ..
            } => {
                from_options = true;
                if !sandbox {
                    return Some(format!(
                        "`{shown}` makes sed run a script from a file, which cannot be checked; pass the script with -e, or put `--sandbox` before it (sed then refuses e, r and w)"
                    ));
                }
            }
            Arg::Short { letter, .. }
                if !SED.short_flags.contains(letter) && !"li".contains(letter) =>
            {
                return Some(format!(
                    "`{text}` holds `-{letter}`, which is not a GNU sed option; write sed's options as its manual spells them"
                ));
            }
            Arg::Long {
                resolved: None,
                written,
                ..
            } => {
                return Some(format!(
                    "`--{written}` is not a GNU sed option (or abbreviates several); write sed's long options in full"
                ));
            }
            Arg::Unknown(_) if !sandbox => {
                return Some(format!(
                    "`{text}` is only known at run time and could be an option such as `-e 'e CMD'` that makes sed run a command; write options literally, put `--` before file names only known at run time, or put `--sandbox` first"
                ));
            }
            Arg::Operand(word) => {
                first_operand.get_or_insert(word);
            }
            _ => {}
        }
    }
    if from_options {
        return script_refusal(&unsandboxed);
    }
    // No -e or -f: the first operand is the script, compiled after every
    // option, so a `--sandbox` anywhere covers it.
    match first_operand {
        _ if sandbox => None,
        Some(Word::Literal(script)) => script_refusal(script),
        Some(word) => Some(format!(
            "the sed script `{}` is only known at run time {HINT}",
            word.text()
        )),
        None => None,
    }
}

fn script_refusal(script: &str) -> Option<String> {
    let problem = Reader::new(script).program().err()?;
    let shown = short(script);
    Some(match problem {
        Problem::Runs(what) => {
            format!("the sed script `{shown}` has {what}, which runs a shell command {HINT}")
        }
        Problem::Unreadable(why) => format!(
            "the sed script `{shown}` could not be read ({why}), so what it runs cannot be checked"
        ),
    })
}

#[derive(Debug, PartialEq, Eq)]
enum Problem {
    /// What in the script runs a command: "an `e` command (`1e date`)".
    Runs(String),
    /// Why the script could not be read as sed reads it.
    Unreadable(String),
}

fn unreadable(why: impl Into<String>) -> Problem {
    Problem::Unreadable(why.into())
}

/// The script, one character at a time, as sed's `inchar`/`savchar` read it.
struct Reader {
    chars: Vec<char>,
    at: usize,
}

/// `isspace` in the C locale: what separates commands.
fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0b' | '\x0c')
}

impl Reader {
    fn new(script: &str) -> Reader {
        Reader {
            chars: script.chars().collect(),
            at: 0,
        }
    }

    fn next(&mut self) -> Option<char> {
        let c = self.chars.get(self.at).copied();
        if c.is_some() {
            self.at += 1;
        }
        c
    }

    /// Puts back what `next` returned (sed's `savchar`, a no-op at the end).
    fn back(&mut self, c: Option<char>) {
        if c.is_some() {
            self.at -= 1;
        }
    }

    /// The next character that is not a space or a tab (`in_nonblank`).
    fn nonblank(&mut self) -> Option<char> {
        loop {
            match self.next() {
                Some(' ' | '\t') => {}
                other => return other,
            }
        }
    }

    /// In a locale whose characters take two bytes (GBK, Big5, Shift_JIS),
    /// a byte from 0x30 up that follows a non-ASCII one can be the second
    /// half of one character: `é\` there is one character, not an escape.
    /// Such a pair where the ASCII character is syntax reads differently
    /// there, so it is refused.
    fn same_in_every_locale(&self, syntax: char) -> Result<(), Problem> {
        let before = self.at.checked_sub(2).and_then(|i| self.chars.get(i));
        match before {
            Some(c) if !c.is_ascii() && syntax as u32 >= 0x30 => Err(unreadable(format!(
                "`{c}{syntax}` is read differently in some locales; put a space or another character between them"
            ))),
            _ => Ok(()),
        }
    }

    /// The text from `start` to the end of its line, for messages.
    fn line_from(&self, start: usize) -> String {
        self.chars[start.min(self.chars.len())..]
            .iter()
            .take_while(|c| **c != '\n')
            .collect()
    }

    /// The whole program (`compile_program`). Blocks may stay open: more
    /// -e scripts after `--sandbox` may close them.
    fn program(&mut self) -> Result<(), Problem> {
        let mut depth = 0usize;
        loop {
            let mut ch = loop {
                match self.next() {
                    Some(c) if c == ';' || is_space(c) => {}
                    other => break other,
                }
            };
            let Some(first) = ch else {
                return Ok(());
            };
            let start = self.at - 1;
            let addressed = self.address(first)?;
            if addressed {
                ch = self.nonblank();
                if ch == Some(',') {
                    let next = self.nonblank();
                    if !self.address_from(next)? {
                        return Err(unreadable("a `,` not followed by an address"));
                    }
                    ch = self.nonblank();
                }
            }
            if ch == Some('!') {
                ch = self.nonblank();
                if ch == Some('!') {
                    return Err(unreadable("multiple `!`s"));
                }
            }
            let Some(command) = ch else {
                return Err(unreadable("an address without a command"));
            };
            match command {
                '#' if !addressed => while !matches!(self.next(), None | Some('\n')) {},
                'v' => {
                    self.label()?;
                }
                '{' => depth += 1,
                '}' if depth > 0 && !addressed => {
                    depth -= 1;
                    self.end_of_command()?;
                }
                'e' => {
                    return Err(Problem::Runs(format!(
                        "an `e` command (`{}`)",
                        short(&self.line_from(start))
                    )));
                }
                'a' | 'i' | 'c' => self.text()?,
                ':' if !addressed => {
                    if self.label()?.is_empty() {
                        return Err(unreadable("a `:` without a label"));
                    }
                }
                'b' | 't' | 'T' => {
                    self.label()?;
                }
                'q' | 'Q' | 'l' => {
                    let next = self.nonblank();
                    match next {
                        Some(c) if c.is_ascii_digit() => self.integer(),
                        other => self.back(other),
                    }
                    self.end_of_command()?;
                }
                '=' | 'd' | 'D' | 'F' | 'g' | 'G' | 'h' | 'H' | 'n' | 'N' | 'p' | 'P' | 'z'
                | 'x' => self.end_of_command()?,
                'r' | 'R' | 'w' | 'W' => self.filename(),
                's' => {
                    let delimiter = self.delimiter("s")?;
                    self.delimited(delimiter, true, "s")?;
                    self.delimited(delimiter, false, "s")?;
                    if self.substitution_flags()? {
                        let text: String = self.chars[start..self.at].iter().collect();
                        return Err(Problem::Runs(format!(
                            "the `e` flag of `s` (`{}`)",
                            short(text.trim_end_matches([';', '\n']))
                        )));
                    }
                }
                'y' => {
                    let delimiter = self.delimiter("y")?;
                    self.delimited(delimiter, false, "y")?;
                    self.delimited(delimiter, false, "y")?;
                    self.end_of_command()?;
                }
                '#' | ':' | '}' => {
                    return Err(unreadable(format!("a misplaced `{command}`")));
                }
                other => return Err(unreadable(format!("an unknown command `{other}`"))),
            }
        }
    }

    /// An address starting with `ch` (`compile_address`); false, with
    /// nothing read, if `ch` starts none.
    fn address(&mut self, ch: char) -> Result<bool, Problem> {
        match ch {
            '/' => {
                self.delimited('/', true, "address")?;
            }
            '\\' => {
                let delimiter = self.delimiter("address")?;
                self.delimited(delimiter, true, "address")?;
            }
            c if c.is_ascii_digit() => {
                self.integer();
                let next = self.nonblank();
                if next == Some('~') {
                    let step = self.nonblank();
                    self.integer_from(step);
                } else {
                    self.back(next);
                }
                return Ok(true);
            }
            '+' | '~' => {
                let step = self.nonblank();
                self.integer_from(step);
                return Ok(true);
            }
            '$' => return Ok(true),
            _ => return Ok(false),
        }
        // A regex address: its `I` and `M` flags.
        loop {
            let next = self.nonblank();
            if !matches!(next, Some('I' | 'M')) {
                self.back(next);
                return Ok(true);
            }
        }
    }

    fn address_from(&mut self, ch: Option<char>) -> Result<bool, Problem> {
        match ch {
            Some(c) => self.address(c),
            None => Ok(false),
        }
    }

    /// Digits after one already read (`in_integer`).
    fn integer(&mut self) {
        loop {
            let next = self.next();
            if !next.is_some_and(|c| c.is_ascii_digit()) {
                self.back(next);
                return;
            }
        }
    }

    /// `in_integer(ch)` with `ch` already read: digits, or nothing.
    fn integer_from(&mut self, ch: Option<char>) {
        match ch {
            Some(c) if c.is_ascii_digit() => self.integer(),
            other => self.back(other),
        }
    }

    fn delimiter(&mut self, what: &str) -> Result<char, Problem> {
        match self.next() {
            Some(c) if c.is_ascii() && c != '\n' => Ok(c),
            Some('\n') | None => Err(unreadable(format!("an unterminated `{what}`"))),
            Some(c) => Err(unreadable(format!(
                "`{c}` as the delimiter of `{what}`, which sed refuses or reads byte by byte"
            ))),
        }
    }

    /// Up to and including the unescaped `delimiter` (`match_slash`);
    /// `regex`: a bracket expression `[...]` may hold the delimiter.
    fn delimited(&mut self, delimiter: char, regex: bool, what: &str) -> Result<(), Problem> {
        let unterminated = || unreadable(format!("an unterminated `{what}`"));
        loop {
            let c = match self.next() {
                None | Some('\n') => return Err(unterminated()),
                Some(c) if !c.is_ascii() => continue,
                Some(c) => c,
            };
            if c == delimiter || c == '\\' || (c == '[' && regex) {
                self.same_in_every_locale(c)?;
            }
            if c == delimiter {
                return Ok(());
            }
            if c == '\\' {
                let escaped = self.next().ok_or_else(unterminated)?;
                if regex && escaped == 'c' {
                    // Newer seds read `\cX` as one escape, older ones read
                    // X anew: the same only when X is not syntax.
                    match self.next() {
                        Some(x) if x != delimiter && !matches!(x, '\\' | '[' | '\n') => {}
                        _ => {
                            return Err(unreadable(format!(
                                "`\\c` before `{delimiter}`, `\\`, `[` or a line end, which sed versions read differently"
                            )));
                        }
                    }
                }
                continue;
            }
            if c == '[' && regex {
                self.bracket(&unterminated)?;
            }
        }
    }

    /// A bracket expression after its `[` (`snarf_char_class`): up to the
    /// `]` that closes it, past `[:alpha:]`, `[.x.]` and `[=x=]`.
    fn bracket(&mut self, unterminated: &dyn Fn() -> Problem) -> Result<(), Problem> {
        let mut c = self.next();
        if c == Some('^') {
            c = self.next();
        }
        if c == Some(']') {
            c = self.next();
        }
        let mut state = 0;
        let mut opened = ' ';
        loop {
            let ch = match c {
                None | Some('\n') => return Err(unterminated()),
                Some(ch) => ch,
            };
            if matches!(ch, '.' | ':' | '=' | '[' | ']') {
                self.same_in_every_locale(ch)?;
            }
            match ch {
                '.' | ':' | '=' if state == 1 => {
                    opened = ch;
                    state = 2;
                }
                '.' | ':' | '=' if state == 2 && ch == opened => state = 3,
                '[' => {
                    if state == 0 {
                        state = 1;
                    }
                }
                ']' if state <= 1 => return Ok(()),
                ']' if state == 3 => state = 0,
                _ => state &= !1,
            }
            c = self.next();
        }
    }

    /// The flags of `s` (`mark_subst_opts`): whether `e` is among them.
    fn substitution_flags(&mut self) -> Result<bool, Problem> {
        let mut eval = false;
        loop {
            match self.nonblank() {
                Some('i' | 'I' | 'm' | 'M' | 'p' | 'g') => {}
                Some('e') => eval = true,
                Some('w') => {
                    self.filename();
                    return Ok(eval);
                }
                Some(c) if c.is_ascii_digit() => self.integer(),
                c @ Some('}' | '#') => {
                    self.back(c);
                    return Ok(eval);
                }
                None | Some('\n' | ';') => return Ok(eval),
                Some('\r') if self.next() == Some('\n') => return Ok(eval),
                Some(c) => return Err(unreadable(format!("an unknown flag `{c}` of `s`"))),
            }
        }
    }

    /// What may follow a command: `;`, a line end, `}` or `#`
    /// (`read_end_of_cmd`).
    fn end_of_command(&mut self) -> Result<(), Problem> {
        match self.nonblank() {
            c @ Some('}' | '#') => {
                self.back(c);
                Ok(())
            }
            None | Some('\n' | ';') => Ok(()),
            Some(c) => Err(unreadable(format!("`{c}` after a command"))),
        }
    }

    /// A label (`read_label`): up to a blank, `;`, a line end, `}` or `#`.
    fn label(&mut self) -> Result<String, Problem> {
        let mut label = String::new();
        let mut c = self.nonblank();
        while let Some(ch) = c {
            if matches!(ch, '\n' | ' ' | '\t' | ';' | '}' | '#') {
                break;
            }
            // Older seds end a label at any space and sed 4.2 did not end
            // one at `#`: where versions differ, refuse.
            if ch.is_ascii_control() {
                return Err(unreadable("a control character in a label"));
            }
            label.push(ch);
            c = self.next();
        }
        match c {
            Some('#') => return Err(unreadable("`#` right after a label")),
            Some(ch @ (';' | '}')) => self.same_in_every_locale(ch)?,
            _ => {}
        }
        self.back(c);
        Ok(label)
    }

    /// The text of `a`, `i` and `c` (`read_text`): to the first line end
    /// not escaped by a backslash.
    fn text(&mut self) -> Result<(), Problem> {
        match self.nonblank() {
            None => return Err(unreadable("`a`, `i` or `c` without text")),
            // `a\` then the text (on the next line, or GNU's `a\text`).
            Some('\\') => {
                if self.next().is_none() {
                    return Ok(());
                }
            }
            other => self.back(other),
        }
        loop {
            match self.next() {
                None | Some('\n') => return Ok(()),
                Some('\\') => {
                    self.same_in_every_locale('\\')?;
                    if self.next().is_none() {
                        return Ok(());
                    }
                }
                Some(_) => {}
            }
        }
    }

    /// A file name of `r`, `w` or `s///w`: the rest of the line.
    fn filename(&mut self) {
        while !matches!(self.next(), None | Some('\n')) {}
    }
}

#[cfg(test)]
mod tests;

//! Turning tree-sitter word nodes into the words bash would pass to a program.
//!
//! Quote removal, backslash escapes, `$'...'` strings, line continuations and
//! brace expansion all happen here, so that `sh""utdown`, `\shutdown`,
//! `$'\x73hutdown'` and `shut{down,}` are seen as the command they run.

use tree_sitter::Node;

/// How many words one brace expansion may produce before we give up on it.
const MAX_BRACE_WORDS: usize = 256;
/// Longest word we brace-expand; longer ones with braces count as dynamic.
const MAX_BRACE_WORD_CHARS: usize = 4096;

/// One word of a command after quote removal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Word {
    /// Fully known before the script runs.
    Literal(String),
    /// Depends on an expansion, a substitution or a glob.
    Dynamic(DynamicWord),
}

/// A word whose value is only known at run time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct DynamicWord {
    /// The word as written in the script.
    pub source: String,
    /// The literal file name after the last `/` (`"$HOME"/bin/tool` -> `tool`).
    pub base_name: Option<String>,
    /// True when every expansion is double-quoted, so word splitting and
    /// globbing cannot change which program `base_name` names.
    pub base_is_exact: bool,
    /// A process substitution `<(...)`: a file whose content is produced at run time.
    pub generated_file: bool,
}

impl Word {
    /// The value of a literal word, or the source text of a dynamic one.
    pub fn text(&self) -> &str {
        match self {
            Word::Literal(text) => text,
            Word::Dynamic(dynamic) => &dynamic.source,
        }
    }

    pub fn literal(&self) -> Option<&str> {
        match self {
            Word::Literal(text) => Some(text),
            Word::Dynamic(_) => None,
        }
    }

    /// A word only known at run time: a glob, a placeholder that a program
    /// fills in (find's `{}`, xargs' `-I`), a brace expansion too big to follow.
    pub fn unknown(source: &str) -> Word {
        Word::Dynamic(DynamicWord {
            source: source.to_string(),
            base_name: None,
            base_is_exact: false,
            generated_file: false,
        })
    }
}

/// The command name a word gives: `(base name, known only at run time)`.
pub(super) fn command_name(word: &Word) -> (String, bool) {
    match word {
        Word::Literal(text) => (base_name(text).to_string(), false),
        Word::Dynamic(dynamic) => match &dynamic.base_name {
            Some(base) => (base.clone(), !dynamic.base_is_exact),
            None => (dynamic.source.clone(), true),
        },
    }
}

/// `/sbin/shutdown` -> `shutdown`; `./x` -> `x`.
pub(super) fn base_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The text of a node, or "" if its range is somehow not in `src`.
pub(super) fn node_text<'s>(node: Node, src: &'s str) -> &'s str {
    src.get(node.byte_range()).unwrap_or("")
}

/// One character after quote removal, or an expansion standing for unknown text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Piece {
    Char { c: char, quoted: bool },
    Expansion { quoted: bool },
}

/// Resolves the nodes of one shell word (several nodes when tree-sitter split
/// it at a `\<newline>` line continuation) into the words bash would produce.
pub(super) fn resolve_word(nodes: &[Node], src: &str) -> Vec<Word> {
    let source: String = nodes.iter().map(|n| node_text(*n, src)).collect();
    if let [node] = nodes
        && node.kind() == "process_substitution"
    {
        return vec![Word::Dynamic(DynamicWord {
            source,
            base_name: None,
            base_is_exact: false,
            generated_file: true,
        })];
    }
    let mut pieces = Vec::new();
    for node in nodes {
        collect_pieces(*node, src, &mut pieces);
    }
    if pieces.iter().any(|p| matches!(p, Piece::Expansion { .. })) {
        return vec![dynamic_word(source, &pieces)];
    }
    let chars: Vec<(char, bool)> = pieces
        .iter()
        .filter_map(|p| match p {
            Piece::Char { c, quoted } => Some((*c, *quoted)),
            Piece::Expansion { .. } => None,
        })
        .collect();
    // Brace expansion is what turns `shut{down,}` into `shutdown shut`.
    let Some(expanded) = expand_braces(chars) else {
        return vec![Word::unknown(&source)];
    };
    expanded.into_iter().map(literal_or_glob).collect()
}

/// An unquoted `*`, `?` or `[...]` makes the word a glob, expanded at run time
/// (`/sbin/shut*` could name anything).
fn literal_or_glob(chars: Vec<(char, bool)>) -> Word {
    let text: String = chars.iter().map(|(c, _)| c).collect();
    let unquoted = |wanted: char| chars.iter().position(|&(c, q)| c == wanted && !q);
    let bracket =
        unquoted('[').is_some_and(|open| chars[open..].iter().any(|&(c, q)| c == ']' && !q));
    if unquoted('*').is_some() || unquoted('?').is_some() || bracket {
        Word::unknown(&text)
    } else {
        Word::Literal(text)
    }
}

fn dynamic_word(source: String, pieces: &[Piece]) -> Word {
    let slash = pieces
        .iter()
        .rposition(|p| matches!(p, Piece::Char { c: '/', .. }));
    let tail = slash.map(|at| &pieces[at + 1..]).unwrap_or_default();
    let mut base = String::new();
    let mut tail_is_literal = !tail.is_empty();
    for piece in tail {
        match piece {
            Piece::Char { c, quoted } if *quoted || !matches!(c, '*' | '?' | '[') => base.push(*c),
            _ => tail_is_literal = false,
        }
    }
    let all_quoted = pieces
        .iter()
        .all(|p| !matches!(p, Piece::Expansion { quoted: false }));
    Word::Dynamic(DynamicWord {
        source,
        base_name: tail_is_literal.then_some(base),
        base_is_exact: all_quoted,
        generated_file: false,
    })
}

fn collect_pieces(node: Node, src: &str, out: &mut Vec<Piece>) {
    let text = node_text(node, src);
    match node.kind() {
        "word" | "brace_expression" => push_unquoted(text, out),
        "number" if node.named_child_count() == 0 => push_unquoted(text, out),
        "raw_string" => push_quoted(strip_delimiters(text, 1, 1).chars(), out),
        "ansi_c_string" => push_quoted(decode_escapes(strip_delimiters(text, 2, 1)).chars(), out),
        "string" => push_double_quoted(node, src, out),
        "translated_string" | "command_name" | "concatenation" => {
            push_children(node, src, out);
        }
        _ => out.push(Piece::Expansion { quoted: false }),
    }
}

/// Children in order. In a concatenation, text between children that no
/// named child covers (e.g. a stray `$`) is unquoted text of the word too.
fn push_children(node: Node, src: &str, out: &mut Vec<Piece>) {
    let with_gaps = node.kind() == "concatenation";
    let mut cursor = node.walk();
    let mut at = node.start_byte();
    for child in node.named_children(&mut cursor) {
        if with_gaps {
            push_unquoted(src.get(at..child.start_byte()).unwrap_or(""), out);
        }
        collect_pieces(child, src, out);
        at = child.end_byte();
    }
    if with_gaps {
        push_unquoted(src.get(at..node.end_byte()).unwrap_or(""), out);
    }
}

/// A `"..."` string: its text with `\$ \` \" \\ \<newline>` unescaped, and
/// quoted expansions inside it.
fn push_double_quoted(node: Node, src: &str, out: &mut Vec<Piece>) {
    let inner_end = node.end_byte().saturating_sub(1).max(node.start_byte());
    let mut at = node.start_byte() + 1;
    let mut literal = String::new();
    let mut cursor = node.walk();
    for child in node.named_children(&mut cursor) {
        literal.push_str(src.get(at..child.start_byte()).unwrap_or(""));
        if child.kind() == "string_content" {
            literal.push_str(node_text(child, src));
        } else {
            push_quoted(unescape_double_quoted(&literal).chars(), out);
            literal.clear();
            out.push(Piece::Expansion { quoted: true });
        }
        at = child.end_byte();
    }
    literal.push_str(src.get(at..inner_end).unwrap_or(""));
    push_quoted(unescape_double_quoted(&literal).chars(), out);
}

fn push_quoted(chars: impl Iterator<Item = char>, out: &mut Vec<Piece>) {
    out.extend(chars.map(|c| Piece::Char { c, quoted: true }));
}

/// Unquoted text: `\x` is a quoted `x`, `\<newline>` disappears.
fn push_unquoted(text: &str, out: &mut Vec<Piece>) {
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(Piece::Char { c, quoted: false });
            continue;
        }
        match chars.next() {
            Some('\n') => {}
            Some(escaped) => out.push(Piece::Char {
                c: escaped,
                quoted: true,
            }),
            None => out.push(Piece::Char { c, quoted: false }),
        }
    }
}

fn strip_delimiters(text: &str, front: usize, back: usize) -> &str {
    let end = text.len().saturating_sub(back);
    text.get(front..end).unwrap_or("")
}

pub(super) fn unescape_double_quoted(text: &str) -> String {
    unescape_backslashes(text, &['$', '`', '"', '\\'])
}

/// An unquoted heredoc body: only `\$`, `` \` ``, `\\` and `\<newline>` are escapes.
pub(super) fn unescape_heredoc(text: &str) -> String {
    unescape_backslashes(text, &['$', '`', '\\'])
}

fn unescape_backslashes(text: &str, escapable: &[char]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek().copied()) {
            ('\\', Some('\n')) => {
                chars.next();
            }
            ('\\', Some(next)) if escapable.contains(&next) => {
                out.push(next);
                chars.next();
            }
            _ => out.push(c),
        }
    }
    out
}

/// Decodes C-style escapes as `$'...'`, `echo -e` and `printf` do, so that
/// `$'\x73hutdown'` is read as `shutdown`. Stops at a NUL, as bash does.
pub(super) fn decode_escapes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(kind) = chars.next() else {
            out.push('\\');
            break;
        };
        let decoded = match kind {
            'a' => Some('\u{7}'),
            'b' => Some('\u{8}'),
            'e' | 'E' => Some('\u{1b}'),
            'f' => Some('\u{c}'),
            'n' => Some('\n'),
            'r' => Some('\r'),
            't' => Some('\t'),
            'v' => Some('\u{b}'),
            '\\' | '\'' | '"' | '?' => Some(kind),
            'x' => take_number(&mut chars, 16, 2),
            'u' => take_number(&mut chars, 16, 4),
            'U' => take_number(&mut chars, 16, 8),
            'c' => chars
                .next()
                .map(|ctl| char::from((ctl as u32 & 0x1f) as u8)),
            '0'..='7' => {
                let rest = take_digits(&mut chars, 8, 2);
                char::from_u32(((kind as u32 - '0' as u32) << (3 * rest.1)) + rest.0)
            }
            _ => None,
        };
        match decoded {
            Some('\0') => break,
            Some(decoded) => out.push(decoded),
            None => {
                out.push('\\');
                out.push(kind);
            }
        }
    }
    out
}

fn take_number(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    radix: u32,
    max: usize,
) -> Option<char> {
    let (value, count) = take_digits(chars, radix, max);
    if count == 0 {
        return None;
    }
    char::from_u32(value)
}

/// Up to `max` digits: `(value, how many)`.
fn take_digits(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    radix: u32,
    max: usize,
) -> (u32, u32) {
    let mut value = 0u32;
    let mut count = 0u32;
    while (count as usize) < max {
        let Some(digit) = chars.peek().and_then(|c| c.to_digit(radix)) else {
            break;
        };
        value = value.saturating_mul(radix).saturating_add(digit);
        count += 1;
        chars.next();
    }
    (value, count)
}

/// Bash brace expansion (`{a,b}`, `{1..3}`, `{a..c}`), left to right, with a
/// work list instead of recursion. `None` when the result would be too big.
fn expand_braces(chars: Vec<(char, bool)>) -> Option<Vec<Vec<(char, bool)>>> {
    let has_brace = chars.iter().any(|&(c, q)| c == '{' && !q);
    if !has_brace {
        return Some(vec![chars]);
    }
    if chars.len() > MAX_BRACE_WORD_CHARS {
        return None;
    }
    let mut done = Vec::new();
    let mut pending = vec![chars];
    let mut steps = 0;
    while let Some(word) = pending.pop() {
        steps += 1;
        if steps > 4 * MAX_BRACE_WORDS || done.len() + pending.len() > MAX_BRACE_WORDS {
            return None;
        }
        match find_brace(&word) {
            None => done.push(word),
            Some((open, close, alternatives)) => {
                for alternative in alternatives.into_iter().rev() {
                    let mut next = word[..open].to_vec();
                    next.extend(alternative);
                    next.extend_from_slice(&word[close + 1..]);
                    pending.push(next);
                }
            }
        }
    }
    Some(done)
}

type Alternatives = Vec<Vec<(char, bool)>>;

/// The first unquoted `{...}` that bash would expand: its bounds and alternatives.
fn find_brace(word: &[(char, bool)]) -> Option<(usize, usize, Alternatives)> {
    let unquoted = |i: usize, wanted: char| word.get(i) == Some(&(wanted, false));
    for open in (0..word.len()).filter(|&i| unquoted(i, '{')) {
        let mut depth = 0usize;
        let mut commas = Vec::new();
        let mut close = None;
        for j in open + 1..word.len() {
            if unquoted(j, '{') {
                depth += 1;
            } else if unquoted(j, '}') {
                if depth == 0 {
                    close = Some(j);
                    break;
                }
                depth -= 1;
            } else if unquoted(j, ',') && depth == 0 {
                commas.push(j);
            }
        }
        let Some(close) = close else { continue };
        if !commas.is_empty() {
            let mut bounds = vec![open];
            bounds.extend(commas);
            bounds.push(close);
            let alternatives = bounds.windows(2).map(|w| word[w[0] + 1..w[1]].to_vec());
            return Some((open, close, alternatives.collect()));
        }
        let inner: String = word[open + 1..close].iter().map(|(c, _)| c).collect();
        if let Some(sequence) = brace_sequence(&inner) {
            let alternatives = sequence
                .into_iter()
                .map(|item| item.chars().map(|c| (c, false)).collect());
            return Some((open, close, alternatives.collect()));
        }
    }
    None
}

/// `1..5`, `10..1..3`, `a..e`: the items, or `None` if not a sequence (or too long).
fn brace_sequence(inner: &str) -> Option<Vec<String>> {
    let parts: Vec<&str> = inner.split("..").collect();
    let (start, end) = match parts.as_slice() {
        [start, end] | [start, end, _] => (*start, *end),
        _ => return None,
    };
    let step = match parts.get(2) {
        Some(step) => step.parse::<i64>().ok()?.checked_abs()?.max(1),
        None => 1,
    };
    let as_char = |s: &str| {
        let mut chars = s.chars();
        chars
            .next()
            .filter(|c| c.is_ascii_alphabetic() && chars.next().is_none())
    };
    let (first, last, numeric) = match (start.parse::<i64>(), end.parse::<i64>()) {
        (Ok(a), Ok(b)) => (a, b, true),
        _ => (as_char(start)? as i64, as_char(end)? as i64, false),
    };
    let count = first.abs_diff(last) / step.unsigned_abs() + 1;
    if count > MAX_BRACE_WORDS as u64 {
        return None;
    }
    let direction = if last >= first { step } else { -step };
    let width = if numeric && (start.starts_with('0') || end.starts_with('0')) {
        start.len().max(end.len())
    } else {
        0
    };
    let items = (0..count as i64).map(|i| first + i * direction);
    Some(
        items
            .map(|value| match numeric {
                true => format!("{value:0width$}"),
                false => char::from_u32(value as u32)
                    .map(String::from)
                    .unwrap_or_default(),
            })
            .collect(),
    )
}

/// What `echo ARGS` prints, for a shell reading it from a pipe. Escapes are
/// decoded as dash's echo does, the more dangerous reading.
pub(super) fn echo_output(args: &[Word]) -> Option<String> {
    let mut words = args.iter().map(Word::literal).peekable();
    let mut newline = true;
    while let Some(Some(flag)) = words.peek()
        && flag.len() > 1
        && flag.starts_with('-')
        && flag[1..].chars().all(|c| matches!(c, 'n' | 'e' | 'E'))
    {
        newline &= !flag.contains('n');
        words.next();
    }
    let texts: Option<Vec<&str>> = words.collect();
    let mut out = decode_escapes(&texts?.join(" "));
    if newline {
        out.push('\n');
    }
    Some(out)
}

/// What `printf FORMAT ARGS` prints when the format only uses `%s`, `%b` and
/// `%%`; `None` for anything else (we do not emulate numbers and widths).
pub(super) fn printf_output(args: &[Word], max_len: usize) -> Option<String> {
    let texts: Option<Vec<&str>> = args.iter().map(Word::literal).collect();
    let texts = texts?;
    let (format, mut rest) = match texts.split_first()? {
        (&"--", rest) => rest.split_first()?,
        (first, _) if first.starts_with("-v") => return Some(String::new()),
        (first, rest) => (first, rest),
    };
    let mut out = String::new();
    loop {
        let mut used_argument = false;
        let mut literal = String::new();
        let mut chars = format.chars();
        while let Some(c) = chars.next() {
            if c != '%' {
                literal.push(c);
                continue;
            }
            let directive = chars.next();
            if directive == Some('%') {
                literal.push('%');
                continue;
            }
            out.push_str(&decode_escapes(&literal));
            literal.clear();
            let (argument, remaining) = rest.split_first().map_or(("", rest), |(a, r)| (*a, r));
            rest = remaining;
            used_argument = true;
            match directive {
                Some('s') => out.push_str(argument),
                Some('b') => out.push_str(&decode_escapes(argument)),
                _ => return None,
            }
        }
        out.push_str(&decode_escapes(&literal));
        if out.len() > max_len {
            return None;
        }
        if rest.is_empty() || !used_argument {
            break;
        }
    }
    Some(out)
}

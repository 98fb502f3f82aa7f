//! Reading the syntax tree: children, lists, a command's words, redirects,
//! and the repair of commands tree-sitter glued across lines.

use tree_sitter::Node;

use super::Stdin;
use crate::command::words::{self, Word, node_text, resolve_word};
use crate::command::wrappers;

pub(super) fn all_children(node: Node) -> Vec<Node> {
    let mut cursor = node.walk();
    node.children(&mut cursor).collect()
}

/// tree-sitter nests `a && b || c` to the left; flatten it without recursion
/// so that long chains do not count as deep nesting.
pub(super) fn flatten_list(list: Node) -> Vec<Node> {
    let mut parts = Vec::new();
    let mut pending = vec![list];
    while let Some(node) = pending.pop() {
        if node.kind() == "list" {
            let children = all_children(node).into_iter().filter(|c| c.is_named());
            pending.extend(children.rev());
        } else {
            parts.push(node);
        }
    }
    parts
}

/// The words of a command: its name, then its arguments. Usually one
/// command; see below for when tree-sitter glues several together.
pub(super) fn command_words(command: Node, src: &str) -> Vec<Vec<Word>> {
    let mut cursor = command.walk();
    let mut nodes: Vec<Node> = command.child_by_field_name("name").into_iter().collect();
    nodes.extend(
        command
            .children_by_field_name("argument", &mut cursor)
            .filter(|n| n.is_named()),
    );
    let mut commands: Vec<Vec<Vec<Node>>> = vec![Vec::new()];
    for node in nodes {
        let previous_end = commands
            .last()
            .and_then(|c| c.last()?.last())
            .map(|n| n.end_byte());
        let gap = previous_end.and_then(|end| src.get(end..node.start_byte()));
        let Some(words) = commands.last_mut() else {
            continue;
        };
        match (words.last_mut(), gap) {
            // tree-sitter splits `shut\<newline>down` in two, but bash removes
            // the line continuation first and runs `shutdown`: glue it back.
            (Some(word), Some(gap)) if is_line_continuation(gap) => word.push(node),
            // Should `parse_repaired` not have fixed a glued line (see
            // there), still treat the words after the newline as a command.
            (_, Some(gap)) if has_newline(gap) => {
                commands.push(vec![vec![node]]);
            }
            _ => words.push(vec![node]),
        }
    }
    commands
        .iter()
        .enumerate()
        .map(|(i, words)| {
            let mut resolved: Vec<Word> = words.iter().flat_map(|w| resolve_word(w, src)).collect();
            if i > 0 {
                // A glued-on command may start with assignments (`X=1 cmd`).
                let assignments = resolved
                    .iter()
                    .take_while(|w| wrappers::is_assignment(w))
                    .count();
                resolved.drain(..assignments);
            }
            resolved
        })
        .collect()
}

/// Where a command's words are separated by an unescaped newline (the end
/// of the word before it), found without recursion.
pub(super) fn glued_lines(root: Node, src: &str) -> Vec<usize> {
    let mut glued = Vec::new();
    let mut cursor = root.walk();
    'nodes: loop {
        let node = cursor.node();
        if node.kind() == "command" {
            let parts: Vec<Node> = all_children(node)
                .into_iter()
                .filter(|c| c.is_named())
                .collect();
            for pair in parts.windows(2) {
                let gap = src
                    .get(pair[0].end_byte()..pair[1].start_byte())
                    .unwrap_or("");
                if has_newline(gap) {
                    glued.push(pair[0].end_byte());
                }
            }
        }
        if cursor.goto_first_child() {
            continue;
        }
        while !cursor.goto_next_sibling() {
            if !cursor.goto_parent() {
                break 'nodes;
            }
        }
    }
    glued.sort_unstable();
    glued.dedup();
    glued
}

/// A newline that is not a `\<newline>` line continuation.
pub(super) fn has_newline(gap: &str) -> bool {
    gap.replace("\\\n", "").contains('\n')
}

pub(super) fn is_line_continuation(gap: &str) -> bool {
    gap.is_empty() || gap.as_bytes().chunks(2).all(|pair| pair == b"\\\n")
}

pub(super) fn redirect_operator(redirect: Node) -> &'static str {
    let operators = [
        ">", ">>", ">|", "&>", "&>>", "<>", ">&", "<", "<&", "<&-", ">&-",
    ];
    let found = all_children(redirect)
        .into_iter()
        .find(|c| !c.is_named())
        .map(|c| c.kind());
    operators
        .into_iter()
        .find(|op| Some(*op) == found)
        .unwrap_or("")
}

pub(super) fn heredoc_source(redirect: Node, src: &str) -> Stdin {
    let children = all_children(redirect);
    let Some(body) = children.iter().find(|c| c.kind() == "heredoc_body") else {
        return Stdin::Script("".into());
    };
    let delimiter = children
        .iter()
        .find(|c| c.kind() == "heredoc_start")
        .map_or("", |n| node_text(*n, src));
    // With an unquoted delimiter, `$X` and `$(...)` are expanded first: the
    // shell then runs text we cannot know.
    let expands = all_children(*body)
        .iter()
        .any(|c| c.is_named() && c.kind() != "heredoc_content");
    if expands {
        return Stdin::Generated("a heredoc with expansions".to_string());
    }
    let text = node_text(*body, src);
    if delimiter.contains(['\'', '"', '\\']) {
        Stdin::Script(text.into())
    } else {
        Stdin::Script(words::unescape_heredoc(text).into())
    }
}

pub(super) fn herestring_source(redirect: Node, src: &str) -> Stdin {
    let content: Vec<Node> = all_children(redirect)
        .into_iter()
        .filter(|c| c.is_named() && c.kind() != "file_descriptor")
        .collect();
    match resolve_word(&content, src).as_slice() {
        [Word::Literal(text)] => Stdin::Script(format!("{text}\n").into()),
        _ => Stdin::Generated(format!(
            "the here-string `{}`",
            short(node_text(redirect, src))
        )),
    }
}

/// `< FILE` or `< <(...)` on stdin; `None` for output and other descriptors.
pub(super) fn input_source(redirect: Node, src: &str) -> Option<Stdin> {
    let descriptor = redirect.child_by_field_name("descriptor");
    if !matches!(redirect_operator(redirect), "<" | "<>")
        || descriptor.is_some_and(|d| node_text(d, src) != "0")
    {
        return None;
    }
    Some(match redirect.child_by_field_name("destination") {
        Some(file) if file.kind() == "process_substitution" => {
            Stdin::Generated(format!("`{}`", short(node_text(file, src))))
        }
        _ => Stdin::File,
    })
}

pub(super) fn generated_by(node: Node, src: &str) -> Stdin {
    Stdin::Generated(format!("the output of `{}`", short(node_text(node, src))))
}

pub(super) fn join_words(words: &[Word]) -> String {
    words.iter().map(Word::text).collect::<Vec<_>>().join(" ")
}

pub(super) fn normalise_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// At most 80 characters of `text`, on one line, for messages.
pub(in crate::command) fn short(text: &str) -> String {
    let text = normalise_whitespace(text);
    match text.char_indices().nth(80) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text,
    }
}

/// Where the first syntax error is, found without recursion.
pub(super) fn syntax_error(root: Node, src: &str) -> String {
    let mut cursor = root.walk();
    loop {
        let node = cursor.node();
        if node.is_error() || node.is_missing() {
            let at = node.start_position();
            let what = match node.is_missing() {
                true => format!("missing `{}`", node.kind()),
                false => format!("unexpected `{}`", short(node_text(node, src))),
            };
            return format!(
                "syntax error at line {}, column {}: {what}",
                at.row + 1,
                at.column + 1
            );
        }
        if node.has_error() && cursor.goto_first_child() {
            continue;
        }
        while !cursor.goto_next_sibling() {
            if !cursor.goto_parent() {
                return "syntax error".to_string();
            }
        }
    }
}

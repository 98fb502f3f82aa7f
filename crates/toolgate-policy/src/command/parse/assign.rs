//! The variables a script sets. Under a command allowlist a script may not
//! change which program a name finds (`PATH=. ls`, `unset PATH`,
//! `BASH_CMDS[ls]=./x`) nor make a listed program run another
//! (`export LD_PRELOAD=$PWD/x.so`); the policy decides which names matter,
//! this module finds every way bash assigns one.

use tree_sitter::Node;

use super::{Extractor, Word, all_children, node_text, short};

/// One variable the script sets (or unsets).
#[derive(Debug)]
pub(in crate::command) struct Assignment {
    pub name: String,
    /// The statement that sets it, shortened, for messages.
    pub command: String,
}

/// Arithmetic operators that write the variable they apply to.
const ARITHMETIC_WRITES: &[&str] = &[
    "=", "+=", "-=", "*=", "/=", "%=", "<<=", ">>=", "&=", "^=", "|=", "++", "--",
];

impl Extractor {
    /// Notes the variables `node` sets, if it is a node that sets variables:
    /// `X=v` (alone, before a command, in `export`/`local`/`declare`),
    /// `X[i]=v`, `for X in`, `unset X`, `declare -n ref=X`, `${X:=v}` and
    /// arithmetic (`((X=0))`, `$((X++))`).
    pub(super) fn note_assignments(&mut self, node: Node, src: &str) {
        let names: Vec<Node> = match node.kind() {
            "variable_assignment" => node
                .child_by_field_name("name")
                .map(|name| match name.kind() {
                    "subscript" => name.child_by_field_name("name").unwrap_or(name),
                    _ => name,
                })
                .into_iter()
                .collect(),
            "for_statement" => node.child_by_field_name("variable").into_iter().collect(),
            "unset_command" | "declaration_command" => declared_names(node, src),
            "expansion" if has_operator(node, &["=", ":="]) => variable_names(node),
            "binary_expression" | "unary_expression" | "postfix_expression"
                if has_operator(node, ARITHMETIC_WRITES) =>
            {
                variable_names(node)
            }
            _ => return,
        };
        for name in names {
            self.assigned(node_text(name, src), node_text(node, src));
        }
    }

    /// Builtins that set the variables their arguments name: `read X`,
    /// `printf -v X`, `wait -p X`, `mapfile X`, `getopts o X`, `let X=1`.
    pub(super) fn note_builtin_assignments(&mut self, name: &str, args: &[Word], text: &str) {
        if !matches!(
            name,
            "read" | "printf" | "wait" | "mapfile" | "readarray" | "getopts" | "let"
        ) {
            return;
        }
        for arg in args.iter().filter_map(Word::literal) {
            // Any argument that names a variable is taken as set: refusing
            // `read -p PATH x` is the cheap mistake. `let X=1`, `X[0]`: the
            // name before the operator. `-vX` is `-v X`, and options
            // cluster (`-rvX`): each place a name could start counts.
            let (word, starts) = match arg.strip_prefix('-') {
                Some(options) => (
                    options,
                    options.char_indices().take(8).map(|(i, _)| i).collect(),
                ),
                None => (arg, vec![0]),
            };
            for start in starts {
                let rest = &word[start..];
                let end = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                if end > 0 {
                    self.assigned(&rest[..end], text);
                }
            }
        }
    }

    fn assigned(&mut self, name: &str, statement: &str) {
        self.analysis.assignments.push(Assignment {
            name: name.to_string(),
            command: short(statement),
        });
    }
}

/// The names an `unset`, `export`, `declare`, `local`, ... statement names
/// on its own (`export X`, `unset -v X`); assignments among them are
/// variable_assignment nodes, noted when the walk reaches them. With `-n`
/// (a name reference) the value names a variable too: after
/// `declare -n r=PATH`, `r=.` sets PATH.
fn declared_names<'t>(node: Node<'t>, src: &str) -> Vec<Node<'t>> {
    let children = all_children(node);
    let nameref = children.iter().any(|c| {
        let text = node_text(*c, src);
        c.kind() == "word" && text.starts_with('-') && text.contains('n')
    });
    let mut names = Vec::new();
    for child in children {
        match child.kind() {
            "variable_name" => names.push(child),
            "word" if !node_text(child, src).starts_with('-') => names.push(child),
            "variable_assignment" if nameref => names.extend(child.child_by_field_name("value")),
            _ => {}
        }
    }
    names
}

fn has_operator(node: Node, operators: &[&str]) -> bool {
    all_children(node)
        .iter()
        .any(|c| !c.is_named() && operators.contains(&c.kind()))
}

fn variable_names(node: Node) -> Vec<Node> {
    all_children(node)
        .into_iter()
        .filter(|c| c.kind() == "variable_name")
        .collect()
}

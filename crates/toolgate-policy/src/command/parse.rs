//! Walking the tree-sitter-bash syntax tree to find every command a script
//! runs, including the ones hidden inside substitutions, function bodies,
//! wrappers (`sudo X`), shell strings (`bash -c '...'`) and heredocs fed to a
//! shell.

use std::borrow::Cow;
use std::cell::RefCell;
use std::ops::ControlFlow;
use std::rc::Rc;
use std::time::{Duration, Instant};

use tree_sitter::{Node, ParseOptions, Parser, Tree};

use super::launchers;
use super::words::{self, Word, node_text, resolve_word};
use super::wrappers::{self, Next, ScriptText};

mod assign;
mod tree;

pub(super) use assign::Assignment;
pub(super) use tree::short;
use tree::*;

/// How deep scripts inside scripts (`bash -c`, `eval`, heredocs) may nest.
pub(super) const MAX_SCRIPT_DEPTH: usize = 16;
/// How deep the syntax tree may nest; also bounds our recursion (and stack).
const MAX_NODE_DEPTH: usize = 200;
/// How many `find -exec`s may nest inside each other.
const MAX_LAYERS: usize = 32;
/// Largest script (or nested script) we parse.
const MAX_SCRIPT_BYTES: usize = 1 << 20;
/// Largest total of all nested scripts parsed for one check.
const MAX_TOTAL_BYTES: usize = 8 << 20;
/// Time one check may take: garbage input makes tree-sitter's error recovery slow.
const TIME_BUDGET: Duration = Duration::from_secs(2);
/// How many times we repair and re-parse a misparsed script.
const MAX_REPAIRS: usize = 4;
/// How many reasons for "cannot analyse" we keep.
const MAX_PROBLEMS: usize = 16;
/// Index of `Stdin::Inherited` in `Extractor::stdin`.
const INHERITED: usize = 0;

/// One command the script runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimpleCommand {
    /// Base name of the program (`/sbin/shutdown` -> `shutdown`), after
    /// quote removal. For a wrapper (`sudo X`) there is one entry for the
    /// wrapper and one for X. When `dynamic_name` is set, this is the name as
    /// written (`$X`), or the literal file name after its last `/`.
    pub name: String,
    /// The program as written, after quote removal: `ls`, `./ls`,
    /// `/usr/bin/ls` (the source text when the word is only known at run
    /// time). A command allowlist matches this, not `name`: `./ls` is a file
    /// in the working directory, not the `ls` the list means.
    pub program: String,
    /// The arguments after quote removal (source text for dynamic ones).
    pub args: Vec<String>,
    /// The command's words joined by one space: name as written, then args.
    pub text: String,
    /// The name is only known at run time (`$X`, `$(echo rm)`, `shut*`).
    pub dynamic_name: bool,
}

/// Every command `script` runs, in source order; `Err` explains why the
/// script cannot be fully analysed (syntax error, a shell string only known
/// at run time, nesting too deep).
pub fn extract_commands(script: &str) -> Result<Vec<SimpleCommand>, String> {
    let analysis = analyse(script);
    match analysis.problems.into_iter().next() {
        Some(problem) => Err(problem),
        None => Ok(analysis.commands),
    }
}

/// Everything the policy needs to know about a script.
#[derive(Debug, Default)]
pub(super) struct Analysis {
    pub commands: Vec<SimpleCommand>,
    pub functions: Vec<FunctionDef>,
    /// Calls made from inside function bodies, for fork bomb detection.
    pub calls: Vec<Call>,
    pub device_writes: Vec<DeviceWrite>,
    /// The target of every output redirect (`> out`, `2>> log`, `&> $F`)
    /// that writes a file, as resolved or as written when only known at
    /// run time; descriptor duplications (`2>&1`) are not writes. For
    /// approvals by command prefix: a grant for `cargo test` does not cover
    /// `cargo test > Cargo.toml`.
    pub output_redirects: Vec<String>,
    /// Every variable the script sets, for the allowlist.
    pub assignments: Vec<Assignment>,
    /// Commands told to run a program their words do not name (`git -c
    /// alias.x='!cmd' x`), for the allowlist.
    pub launches: Vec<Launch>,
    /// Why (part of) the script could not be analysed.
    pub problems: Vec<String>,
}

#[derive(Debug)]
pub(super) struct FunctionDef {
    pub name: String,
    pub text: String,
}

#[derive(Debug)]
pub(super) struct Call {
    /// Index into `Analysis::functions`.
    pub caller: usize,
    pub callee: String,
    /// The call runs in a new process (pipeline, `&`, subshell, substitution).
    pub forks: bool,
}

/// A command whose arguments make it run another program.
#[derive(Debug)]
pub(super) struct Launch {
    pub command: String,
    pub reason: String,
}

/// A write to a literal path that may be a block device.
#[derive(Debug)]
pub(super) struct DeviceWrite {
    pub command: String,
    pub target: String,
    pub kind: WriteKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WriteKind {
    Dd,
    Redirect,
    Tee,
}

/// Where a command's standard input comes from, as far as we can tell.
#[derive(Debug, Clone)]
enum Stdin {
    /// Whatever the script itself was given.
    Inherited,
    /// A file: its content is the sandbox's business, like `bash FILE`.
    File,
    /// Text known now: a heredoc, a here-string, `echo ... |`. (Shared:
    /// `cat | cat | ...` passes it on without copying.)
    Script(Rc<str>),
    /// Produced at run time (`curl ... |`); the text says by what.
    Generated(String),
}

#[derive(Debug, Clone, Copy)]
struct Context {
    script_depth: usize,
    node_depth: usize,
    /// The function whose body we are in, as an index into `Analysis::functions`.
    function: Option<usize>,
    forks: bool,
    /// Index into `Extractor::stdin`.
    stdin: usize,
}

impl Context {
    fn forked(self) -> Context {
        Context {
            forks: true,
            ..self
        }
    }
}

pub(super) fn analyse(script: &str) -> Analysis {
    let mut extractor = Extractor {
        analysis: Analysis::default(),
        stdin: vec![Stdin::Inherited],
        bytes_parsed: 0,
        nodes_walked: 0,
        deadline: Instant::now() + TIME_BUDGET,
        out_of_time: false,
    };
    let top = Context {
        script_depth: 0,
        node_depth: 0,
        function: None,
        forks: false,
        stdin: INHERITED,
    };
    extractor.script(script, top);
    extractor.analysis
}

thread_local! {
    // tree_sitter::Parser is not Sync; one per thread, reused across checks.
    static PARSER: RefCell<Option<Parser>> = const { RefCell::new(None) };
}

/// Parses `script`, giving up (`None`) at `deadline`.
fn parse(script: &str, deadline: Instant) -> Option<Tree> {
    PARSER.with(|cell| {
        let mut slot = cell.try_borrow_mut().ok()?;
        if slot.is_none() {
            let mut parser = Parser::new();
            parser
                .set_language(&tree_sitter_bash::LANGUAGE.into())
                .ok()?;
            *slot = Some(parser);
        }
        let parser = slot.as_mut()?;
        let mut give_up = |_: &_| match Instant::now() >= deadline {
            true => ControlFlow::Break(()),
            false => ControlFlow::Continue(()),
        };
        let options = ParseOptions::new().progress_callback(&mut give_up);
        let bytes = guard_scanner(script);
        let mut read = |at: usize, _| bytes.get(at..).unwrap_or_default();
        let tree = parser.parse_with_options(&mut read, None, Some(options));
        if tree.is_none() {
            parser.reset(); // else the next parse would resume this one
        }
        tree
    })
}

/// tree-sitter-bash 0.25's scanner classifies the character after `{` and
/// after `{1.` with C `isdigit`, which reads far outside its table for a
/// code point above 255 and crashes the process (`echo {😀`). The parser
/// gets those characters as ASCII of the same byte length instead: the
/// scanner gives up on a non-digit either way, and node byte ranges still
/// slice the real script.
fn guard_scanner(script: &str) -> Cow<'_, [u8]> {
    let bytes = script.as_bytes();
    let mut guarded: Option<Vec<u8>> = None;
    let mut at = 0;
    while let Some(offset) = bytes
        .get(at..)
        .and_then(|rest| rest.iter().position(|&b| b == b'{'))
    {
        at += offset + 1;
        while bytes
            .get(at)
            .is_some_and(|b| b.is_ascii_digit() || *b == b'.')
        {
            at += 1;
        }
        let Some(c) = script.get(at..).and_then(|rest| rest.chars().next()) else {
            continue;
        };
        if !c.is_ascii() {
            let out = guarded.get_or_insert_with(|| bytes.to_vec());
            out[at..at + c.len_utf8()].fill(b'x');
            at += c.len_utf8();
        }
    }
    guarded.map_or(Cow::Borrowed(bytes), Cow::Owned)
}

struct Extractor {
    analysis: Analysis,
    stdin: Vec<Stdin>,
    bytes_parsed: usize,
    nodes_walked: usize,
    deadline: Instant,
    out_of_time: bool,
}

impl Extractor {
    fn problem(&mut self, reason: String) {
        // The first few reasons are all anyone reads; the cap keeps a script
        // with thousands of them linear.
        if self.analysis.problems.len() < MAX_PROBLEMS && !self.analysis.problems.contains(&reason)
        {
            self.analysis.problems.push(reason);
        }
    }

    fn script(&mut self, script: &str, ctx: Context) {
        self.bytes_parsed += script.len();
        // Bounds the work an adversarial script can cause.
        if script.len() > MAX_SCRIPT_BYTES || self.bytes_parsed > MAX_TOTAL_BYTES {
            self.problem("the script is too large to analyse (over 1 MiB)".to_string());
            return;
        }
        let Some((tree, script)) = self.parse_repaired(script) else {
            self.give_up_for_time();
            return;
        };
        let root = tree.root_node();
        // bash runs the lines before a syntax error, so we still look for
        // denied commands in the rest of the tree.
        if root.has_error() {
            self.problem(syntax_error(root, &script));
        }
        self.walk(root, &script, ctx);
    }

    /// tree-sitter-bash 0.25 sometimes glues the next line onto a command:
    /// `a | b | c<newline>shutdown && d` parses as `c shutdown`, hiding
    /// `shutdown`. bash always ends a simple command at an unescaped
    /// newline, so we say so with a `;` there and parse again.
    fn parse_repaired<'s>(&self, script: &'s str) -> Option<(Tree, Cow<'s, str>)> {
        let mut source = Cow::Borrowed(script);
        let mut tree = parse(&source, self.deadline)?;
        for _ in 0..MAX_REPAIRS {
            let glued = glued_lines(tree.root_node(), &source);
            if glued.is_empty() {
                break;
            }
            let mut repaired = String::with_capacity(source.len() + glued.len());
            let mut from = 0;
            for at in glued {
                repaired.push_str(source.get(from..at)?);
                repaired.push(';');
                from = at;
            }
            repaired.push_str(source.get(from..)?);
            tree = parse(&repaired, self.deadline)?;
            source = Cow::Owned(repaired);
        }
        Some((tree, source))
    }

    fn give_up_for_time(&mut self) {
        self.out_of_time = true;
        let seconds = TIME_BUDGET.as_secs();
        self.problem(format!("the script took more than {seconds}s to analyse"));
    }

    /// A script inside the script (`bash -c`, `eval`, a heredoc fed to a shell).
    fn nested(&mut self, script: &str, ctx: Context, runner: &str) {
        if ctx.script_depth >= MAX_SCRIPT_DEPTH {
            self.problem(format!(
                "`{}` nests scripts more than {MAX_SCRIPT_DEPTH} levels deep",
                short(runner)
            ));
            return;
        }
        let inner = Context {
            script_depth: ctx.script_depth + 1,
            ..ctx
        };
        self.script(script, inner);
    }

    fn walk(&mut self, node: Node, src: &str, ctx: Context) {
        // Deep nesting is rare in real scripts and would exhaust our stack.
        if ctx.node_depth >= MAX_NODE_DEPTH {
            self.problem(format!(
                "the script nests more than {MAX_NODE_DEPTH} levels deep"
            ));
            return;
        }
        self.nodes_walked += 1;
        if self.nodes_walked.is_multiple_of(4096) && Instant::now() >= self.deadline {
            self.give_up_for_time();
        }
        if self.out_of_time {
            return;
        }
        let ctx = Context {
            node_depth: ctx.node_depth + 1,
            ..ctx
        };
        self.note_assignments(node, src);
        match node.kind() {
            "command" => self.command(node, src, ctx),
            "pipeline" => self.pipeline(node, src, ctx),
            "list" => {
                for part in flatten_list(node) {
                    self.walk(part, src, ctx);
                }
            }
            "redirected_statement" => self.redirected_statement(node, src, ctx),
            "function_definition" => self.function_definition(node, src, ctx),
            "subshell" | "command_substitution" | "process_substitution" => {
                self.children(node, src, ctx.forked());
            }
            "comment" => {}
            _ => self.children(node, src, ctx),
        }
    }

    fn children(&mut self, node: Node, src: &str, ctx: Context) {
        let children = all_children(node);
        for (i, child) in children.iter().enumerate() {
            // `cmd &` runs cmd in a new background process.
            let background = children.get(i + 1).is_some_and(|next| next.kind() == "&");
            let ctx = if background { ctx.forked() } else { ctx };
            if child.is_named() {
                self.walk_child(*child, node, src, ctx);
            }
        }
    }

    fn command(&mut self, node: Node, src: &str, ctx: Context) {
        // Substitutions in assignments, arguments and redirects run too;
        // visit them around the command itself to keep source order.
        let name_start = node
            .child_by_field_name("name")
            .map_or(0, |n| n.start_byte());
        let (before, after): (Vec<Node>, Vec<Node>) = all_children(node)
            .into_iter()
            .filter(|c| c.is_named())
            .partition(|c| c.start_byte() < name_start);
        for child in before {
            self.walk_child(child, node, src, ctx);
        }
        let stdin = self.redirect_stdin(node, None, src, ctx.stdin);
        for words in command_words(node, src) {
            self.run_words(words, Context { stdin, ..ctx }, false, 0);
        }
        for child in after {
            self.walk_child(child, node, src, ctx);
        }
    }

    /// Records the command made of `words`, then whatever it runs in turn.
    fn run_words(
        &mut self,
        mut words: Vec<Word>,
        ctx: Context,
        mut from_input: bool,
        layer: usize,
    ) {
        // Each wrapper consumes at least its own name, so this ends; the
        // bound is for `env -S`, which can turn one word into several.
        for _ in 0..MAX_LAYERS * 4 {
            let Some((first, args)) = words.split_first() else {
                return;
            };
            let text = join_words(&words);
            let (name, dynamic_name) = words::command_name(first);
            self.record(&name, first.text(), args, &text, dynamic_name, ctx);
            if dynamic_name {
                return;
            }
            self.note_program_writes(&name, args, &text);
            self.note_builtin_assignments(&name, args, &text);
            if let Some(reason) = launchers::hidden_launch(&name, args) {
                self.analysis.launches.push(Launch {
                    command: text.clone(),
                    reason,
                });
            }
            match wrappers::next_layer(&name, args, from_input) {
                Next::Nothing => return,
                Next::Command {
                    words: inner,
                    args_from_input,
                } => {
                    words = inner;
                    from_input = args_from_input;
                }
                next => return self.run_next(next, &name, &text, ctx, layer),
            }
        }
        self.problem("too many commands wrap each other".to_string());
    }

    fn run_next(&mut self, next: Next, name: &str, text: &str, ctx: Context, layer: usize) {
        match next {
            Next::Nothing | Next::Command { .. } => {}
            Next::Commands(commands) if layer < MAX_LAYERS => {
                for command in commands {
                    self.run_words(command, ctx, false, layer + 1);
                }
            }
            Next::Commands(_) => self.problem(format!("`{}` nests too deeply", short(text))),
            Next::Scripts(scripts) => {
                for script in scripts {
                    match script {
                        ScriptText::Known(script) => self.nested(&script, ctx.forked(), text),
                        ScriptText::Unknown(source) => self.problem(format!(
                            "`{}` runs a script only known at run time: {}",
                            short(text),
                            short(&source)
                        )),
                    }
                }
            }
            Next::ReadsStdin => self.run_stdin(name, ctx),
            Next::GeneratedScript(source) => self.problem(format!(
                "`{}` runs a script generated at run time by `{}`",
                short(text),
                short(&source)
            )),
            Next::NameFromInput => self.problem(format!(
                "`{}` takes the command it runs from its input at run time",
                short(text)
            )),
        }
    }

    fn record(
        &mut self,
        name: &str,
        program: &str,
        args: &[Word],
        text: &str,
        dynamic_name: bool,
        ctx: Context,
    ) {
        if let Some(caller) = ctx.function {
            self.analysis.calls.push(Call {
                caller,
                callee: name.to_string(),
                forks: ctx.forks,
            });
        }
        self.analysis.commands.push(SimpleCommand {
            name: name.to_string(),
            program: program.to_string(),
            args: args.iter().map(|w| w.text().to_string()).collect(),
            text: text.to_string(),
            dynamic_name,
        });
    }

    /// A shell reading its script from stdin: a heredoc, a here-string or a pipe.
    fn run_stdin(&mut self, shell: &str, ctx: Context) {
        match self.stdin.get(ctx.stdin).cloned() {
            Some(Stdin::Script(script)) => {
                let consumed = Context {
                    stdin: INHERITED,
                    ..ctx
                };
                self.nested(&script, consumed, shell);
            }
            // `curl ... | sh`: the script only exists at run time.
            Some(Stdin::Generated(from)) => self.problem(format!(
                "`{shell}` runs a script read from {from}, which is only known at run time"
            )),
            Some(Stdin::Inherited | Stdin::File) | None => {}
        }
    }

    /// `dd of=DEVICE` and `tee DEVICE` overwrite a disk.
    fn note_program_writes(&mut self, name: &str, args: &[Word], text: &str) {
        let mut write = |target: &str, kind| {
            self.analysis.device_writes.push(DeviceWrite {
                command: text.to_string(),
                target: target.to_string(),
                kind,
            });
        };
        let mut unknown_dd_target = false;
        for arg in args {
            match (name, arg) {
                ("dd", Word::Literal(operand)) => {
                    if let Some(target) = operand.strip_prefix("of=") {
                        write(target, WriteKind::Dd);
                    }
                }
                ("dd", Word::Dynamic(dynamic)) => {
                    let unquoted = dynamic.source.trim_start_matches(['"', '\'']);
                    unknown_dd_target |= unquoted.starts_with("of=");
                }
                ("tee", Word::Literal(path)) if !path.starts_with('-') => {
                    write(path, WriteKind::Tee);
                }
                _ => {}
            }
        }
        // `D=/dev/sda; dd of=$D` must not slip past the block device rule.
        if unknown_dd_target {
            self.problem(format!(
                "`{}` writes to a file only known at run time",
                short(text)
            ));
        }
    }

    /// Walks `child` of `parent`, noting the writes of redirects on the way.
    /// (The parent is passed down because `Node::parent` searches from the
    /// root: quadratic on the wide trees of garbage input.)
    fn walk_child(&mut self, child: Node, parent: Node, src: &str, ctx: Context) {
        if child.kind() == "file_redirect" {
            self.note_redirect_write(child, parent, src);
        }
        self.walk(child, src, ctx);
    }

    /// `> /dev/sda` overwrites a disk as surely as dd does.
    fn note_redirect_write(&mut self, redirect: Node, statement: Node, src: &str) {
        let operator = redirect_operator(redirect);
        if !matches!(operator, ">" | ">>" | ">|" | "&>" | "&>>" | "<>" | ">&") {
            return;
        }
        let mut cursor = redirect.walk();
        let destination: Vec<Node> = redirect
            .children_by_field_name("destination", &mut cursor)
            .collect();
        let resolved = resolve_word(&destination, src);
        let [Word::Literal(target)] = resolved.as_slice() else {
            let written = destination.iter().map(|n| node_text(*n, src)).collect();
            self.analysis.output_redirects.push(written);
            return;
        };
        if operator == ">&" && (target == "-" || target.parse::<u32>().is_ok()) {
            return; // `>&2` duplicates a descriptor
        }
        self.analysis.output_redirects.push(target.clone());
        self.analysis.device_writes.push(DeviceWrite {
            command: normalise_whitespace(node_text(statement, src)),
            target: target.clone(),
            kind: WriteKind::Redirect,
        });
    }

    fn pipeline(&mut self, node: Node, src: &str, ctx: Context) {
        let stages: Vec<Node> = all_children(node)
            .into_iter()
            .filter(|n| n.is_named() && n.kind() != "comment")
            .collect();
        // Every stage of a real pipeline runs in its own process.
        let ctx = if stages.len() > 1 { ctx.forked() } else { ctx };
        let mut stdin = ctx.stdin;
        for stage in stages {
            self.walk(stage, src, Context { stdin, ..ctx });
            stdin = self.output_of(stage, src, stdin);
        }
    }

    fn redirected_statement(&mut self, node: Node, src: &str, ctx: Context) {
        let body = node.child_by_field_name("body");
        let stdin = self.redirect_stdin(node, body, src, ctx.stdin);
        let redirects: Vec<Node> = all_children(node)
            .into_iter()
            .filter(|n| n.is_named() && Some(*n) != body)
            .collect();
        // tree-sitter puts the rest of the line after `<<EOF` (`| sh`) inside the redirect.
        let piped = redirects.iter().any(|r| {
            r.kind() == "heredoc_redirect"
                && all_children(*r).iter().any(|c| c.kind() == "pipeline")
        });
        let body_ctx = Context {
            stdin,
            ..if piped { ctx.forked() } else { ctx }
        };
        if let Some(body) = body {
            self.walk(body, src, body_ctx);
        }
        for redirect in redirects {
            if redirect.kind() == "heredoc_redirect" {
                self.heredoc_redirect(redirect, body, src, ctx, stdin);
            } else {
                self.walk_child(redirect, node, src, ctx);
            }
        }
    }

    /// The parts of a heredoc redirect that run: `$(...)` in an unquoted body,
    /// the rest of the pipeline (`cat <<EOF | sh`), `&& next`, more redirects.
    fn heredoc_redirect(
        &mut self,
        redirect: Node,
        body: Option<Node>,
        src: &str,
        ctx: Context,
        body_stdin: usize,
    ) {
        for child in all_children(redirect).into_iter().filter(|c| c.is_named()) {
            match child.kind() {
                "heredoc_start" | "heredoc_end" => {}
                "pipeline" => {
                    let piped_in = match body {
                        Some(body) => self.output_of(body, src, body_stdin),
                        None => INHERITED,
                    };
                    let ctx = Context {
                        stdin: piped_in,
                        ..ctx.forked()
                    };
                    self.walk(child, src, ctx);
                }
                _ => self.walk_child(child, redirect, src, ctx),
            }
        }
    }

    /// The stdin of `node` after its `<`, `<<`, `<<<` redirects.
    fn redirect_stdin(
        &mut self,
        node: Node,
        body: Option<Node>,
        src: &str,
        inherited: usize,
    ) -> usize {
        let mut stdin = inherited;
        for redirect in all_children(node).into_iter().filter(|n| Some(*n) != body) {
            let source = match redirect.kind() {
                "heredoc_redirect" => heredoc_source(redirect, src),
                "herestring_redirect" => herestring_source(redirect, src),
                "file_redirect" => match input_source(redirect, src) {
                    Some(source) => source,
                    None => continue,
                },
                _ => continue,
            };
            stdin = self.push_stdin(source);
        }
        stdin
    }

    fn push_stdin(&mut self, source: Stdin) -> usize {
        self.stdin.push(source);
        self.stdin.len() - 1
    }

    /// What one pipeline stage writes to the next.
    fn output_of(&mut self, stage: Node, src: &str, stdin: usize) -> usize {
        let source = match (stage.kind(), stage.child_by_field_name("body")) {
            ("command", _) => self.command_output(stage, src, stdin),
            ("redirected_statement", Some(body)) if body.kind() == "command" => {
                let stdin = self.redirect_stdin(stage, Some(body), src, stdin);
                self.command_output(body, src, stdin)
            }
            _ => generated_by(stage, src),
        };
        self.push_stdin(source)
    }

    /// The output of `echo`, `printf` and `cat` is known when their input is.
    fn command_output(&mut self, command: Node, src: &str, stdin: usize) -> Stdin {
        let stdin = self.redirect_stdin(command, None, src, stdin);
        let words = command_words(command, src)
            .into_iter()
            .next()
            .unwrap_or_default();
        let Some((Word::Literal(first), args)) = words.split_first() else {
            return generated_by(command, src);
        };
        let known = match words::base_name(first) {
            "echo" => words::echo_output(args).map(|text| Stdin::Script(text.into())),
            "printf" => {
                words::printf_output(args, MAX_SCRIPT_BYTES).map(|text| Stdin::Script(text.into()))
            }
            "cat" if args.iter().all(|a| a.text() == "-") => self.stdin.get(stdin).cloned(),
            "cat" if args.iter().all(|a| a.literal().is_some()) => Some(Stdin::File),
            _ => None,
        };
        known.unwrap_or_else(|| generated_by(command, src))
    }

    fn function_definition(&mut self, node: Node, src: &str, ctx: Context) {
        let name_node = node.child_by_field_name("name");
        let body = node.child_by_field_name("body");
        let name = name_node.map_or_else(String::new, |n| {
            let resolved = resolve_word(&[n], src);
            resolved
                .first()
                .map_or_else(String::new, |w| w.text().to_string())
        });
        self.analysis.functions.push(FunctionDef {
            name,
            text: normalise_whitespace(node_text(node, src)),
        });
        // The body runs later, when called, with whatever stdin the call has.
        let body_ctx = Context {
            function: Some(self.analysis.functions.len() - 1),
            forks: false,
            stdin: INHERITED,
            ..ctx
        };
        for child in all_children(node).into_iter().filter(|c| c.is_named()) {
            if Some(child) == body {
                self.walk(child, src, body_ctx);
            } else if Some(child) != name_node {
                self.walk(child, src, ctx);
            }
        }
    }
}

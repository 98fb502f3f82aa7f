//! Commands that run other commands: `sudo X`, `env X`, `timeout 5 X`,
//! `bash -c '...'`, `find -exec X ;`, `xargs X` ...
//!
//! Each one is a way to hide a denied command behind an allowed one, so for
//! each we find what it runs: more words to treat as a command, or a string
//! to parse as a script.

use super::words::Word;

/// Shells whose `-c STRING` runs a script and that read one from stdin otherwise.
const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "lksh", "oksh", "pdksh", "ash", "rbash", "yash",
    "posh", "fish", "csh", "tcsh",
];

/// What a command runs besides itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Next {
    /// Nothing we know of (or it only runs files, which the sandbox governs).
    Nothing,
    /// These words, as a command. `args_from_input`: more words are appended
    /// at run time (xargs), so a missing command name comes from the input.
    Command {
        words: Vec<Word>,
        args_from_input: bool,
    },
    /// Several commands (`find -exec A ; -exec B ;`).
    Commands(Vec<Vec<Word>>),
    /// Strings run as shell scripts (`bash -c`, `eval`, `watch`, `trap`, `alias`).
    Scripts(Vec<ScriptText>),
    /// A shell that reads its script from standard input.
    ReadsStdin,
    /// A script file whose content is generated at run time (`bash <(curl ...)`).
    GeneratedScript(String),
    /// The command name is only known at run time (`... | xargs sudo`).
    NameFromInput,
}

/// A script given as a string: known, or only known at run time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ScriptText {
    Known(String),
    Unknown(String),
}

impl ScriptText {
    /// Words joined by spaces, as `eval` and `watch` do.
    fn from_words(words: &[Word]) -> ScriptText {
        let texts: Option<Vec<&str>> = words.iter().map(Word::literal).collect();
        let joined = || words.iter().map(Word::text).collect::<Vec<_>>().join(" ");
        match texts {
            Some(texts) => ScriptText::Known(texts.join(" ")),
            None => ScriptText::Unknown(joined()),
        }
    }
}

/// How a wrapper's options are spelled, enough to find where its command starts.
struct OptionSyntax {
    /// Short options that take a value (`-u USER`, `-uUSER`).
    short_with_value: &'static str,
    /// Long options that take a value as the next word (`--user USER`).
    long_with_value: &'static [&'static str],
}

struct WrapperSpec {
    name: &'static str,
    options: OptionSyntax,
    /// Operands before the command (`timeout DURATION`, `chroot DIR`).
    operands: usize,
    /// `NAME=VALUE` words may come before the command (`env X=1 cmd`).
    assignments: bool,
    /// Options after which no command runs (`command -v`, `taskset -p`).
    no_command: &'static str,
}

const fn spec(
    name: &'static str,
    short_with_value: &'static str,
    long_with_value: &'static [&'static str],
    operands: usize,
) -> WrapperSpec {
    WrapperSpec {
        name,
        options: OptionSyntax {
            short_with_value,
            long_with_value,
        },
        operands,
        assignments: false,
        no_command: "",
    }
}

const fn with_assignments(mut wrapper: WrapperSpec) -> WrapperSpec {
    wrapper.assignments = true;
    wrapper
}

const fn no_command_after(mut wrapper: WrapperSpec, options: &'static str) -> WrapperSpec {
    wrapper.no_command = options;
    wrapper
}

/// Wrappers that run their remaining words as a command after options.
const WRAPPERS: &[WrapperSpec] = &[
    with_assignments(spec(
        "env",
        "uCSa",
        &["unset", "chdir", "split-string", "argv0"],
        0,
    )),
    no_command_after(
        with_assignments(spec(
            "sudo",
            "CDgpRrTtUu",
            &[
                "close-from",
                "chdir",
                "group",
                "host",
                "prompt",
                "chroot",
                "role",
                "type",
                "user",
            ],
            0,
        )),
        "eKlVv",
    ),
    spec("doas", "aCu", &[], 0),
    spec("nohup", "", &[], 0),
    spec("exec", "a", &[], 0),
    no_command_after(spec("command", "", &[], 0), "vV"),
    spec("builtin", "", &[], 0),
    spec("time", "fo", &["format", "output"], 0),
    spec("nice", "n", &["adjustment"], 0),
    no_command_after(
        spec(
            "ionice",
            "cnpPu",
            &["class", "classdata", "pid", "pgid", "uid"],
            0,
        ),
        "pPu",
    ),
    spec("timeout", "ks", &["kill-after", "signal"], 1),
    spec("stdbuf", "ioe", &["input", "output", "error"], 0),
    spec("setsid", "", &[], 0),
    spec("chroot", "", &["userspec", "groups"], 1),
    spec("busybox", "", &[], 0),
    spec("unbuffer", "", &[], 0),
    spec("rlwrap", "", &[], 0),
    spec(
        "strace",
        "abeEIoOpPsSuX",
        &["output", "signal", "trace", "user"],
        0,
    ),
    no_command_after(spec("taskset", "", &[], 1), "p"),
    no_command_after(spec("chrt", "TPD", &[], 1), "p"),
    spec(
        "numactl",
        "iPpmNCw",
        &[
            "interleave",
            "preferred",
            "membind",
            "cpunodebind",
            "physcpubind",
        ],
        0,
    ),
    no_command_after(spec("prlimit", "p", &["pid"], 0), "p"),
    spec("fakeroot", "sil", &["lib", "faked"], 0),
    spec("pkexec", "", &["user"], 0),
    spec("unshare", "SGRw", &["setuid", "setgid", "root", "wd"], 0),
    spec("nsenter", "tSG", &["target", "setuid", "setgid"], 0),
    spec("firejail", "", &[], 0),
    spec("proxychains", "f", &[], 0),
    spec("proxychains4", "f", &[], 0),
    spec("torsocks", "uapP", &["user", "pass", "address", "port"], 0),
    spec("valgrind", "", &[], 0),
    spec(
        "xvfb-run",
        "nsfepw",
        &["server-num", "server-args", "auth-file", "error-file"],
        0,
    ),
    spec("dbus-run-session", "", &[], 0),
    spec(
        "systemd-run",
        "upMHE",
        &[
            "unit",
            "property",
            "description",
            "slice",
            "uid",
            "gid",
            "nice",
            "setenv",
        ],
        0,
    ),
];

/// What the command `name ARGS` runs.
pub(super) fn next_layer(name: &str, args: &[Word], args_from_input: bool) -> Next {
    if SHELLS.contains(&name) {
        return shell(args, args_from_input);
    }
    match name {
        "eval" => scripts(vec![ScriptText::from_words(args)]),
        "source" | "." => source(args),
        "find" => find(args),
        "xargs" => xargs(args),
        "watch" => watch(args),
        "su" | "runuser" | "script" => string_option(name, args),
        "sg" => sg(args),
        "flock" => flock(args),
        "trap" => trap(args),
        "alias" => alias(args),
        "at" | "batch" => at(args),
        "coproc" => coproc(args),
        _ => match WRAPPERS.iter().find(|w| w.name == name) {
            Some(wrapper) => generic_wrapper(wrapper, args, args_from_input),
            None => Next::Nothing,
        },
    }
}

/// Options parsed off the front of a wrapper's arguments.
struct ParsedOptions {
    /// Index of the first operand.
    operands_at: usize,
    /// Every option seen (short as one char, long as its name) with its value.
    options: Vec<(String, Option<Word>)>,
}

impl ParsedOptions {
    fn value_of(&self, names: &[&str]) -> Option<&Word> {
        let found = self
            .options
            .iter()
            .find(|(name, _)| names.contains(&name.as_str()));
        found.and_then(|(_, value)| value.as_ref())
    }

    fn has(&self, names: &[&str]) -> bool {
        self.options
            .iter()
            .any(|(name, _)| names.contains(&name.as_str()))
    }
}

/// getopt-style parsing that stops at the first operand, as wrappers do.
fn parse_options(args: &[Word], syntax: &OptionSyntax) -> ParsedOptions {
    let mut options = Vec::new();
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        let text = arg.text();
        if text == "--" {
            i += 1;
            break;
        }
        if let Some(long) = text.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((name, value)) => (name, Some(Word::Literal(value.to_string()))),
                None => (long, None),
            };
            let takes_next = inline.is_none() && syntax.long_with_value.contains(&name);
            let value = if takes_next {
                args.get(i + 1).cloned()
            } else {
                inline
            };
            i += if takes_next { 2 } else { 1 };
            options.push((name.to_string(), value));
            continue;
        }
        let Some(cluster) = text.strip_prefix('-').filter(|c| !c.is_empty()) else {
            break;
        };
        i += 1;
        for (at, c) in cluster.char_indices() {
            if !syntax.short_with_value.contains(c) {
                options.push((c.to_string(), None));
                continue;
            }
            let attached = &cluster[at + c.len_utf8()..];
            let value = if attached.is_empty() {
                i += 1;
                args.get(i - 1).cloned()
            } else {
                Some(Word::Literal(attached.to_string()))
            };
            options.push((c.to_string(), value));
            break;
        }
    }
    ParsedOptions {
        operands_at: i.min(args.len()),
        options,
    }
}

/// `NAME=VALUE`
pub(super) fn is_assignment(word: &Word) -> bool {
    let text = word.text();
    let Some((name, _)) = text.split_once('=') else {
        return false;
    };
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn generic_wrapper(wrapper: &WrapperSpec, args: &[Word], args_from_input: bool) -> Next {
    let parsed = parse_options(args, &wrapper.options);
    let no_command: Vec<String> = wrapper.no_command.chars().map(String::from).collect();
    if parsed
        .options
        .iter()
        .any(|(name, _)| no_command.contains(name))
    {
        return Next::Nothing;
    }
    let mut rest = &args[parsed.operands_at..];
    if wrapper.name == "env" && rest.first().is_some_and(|w| w.text() == "-") {
        rest = &rest[1..]; // `env - cmd` is `env -i cmd`
    }
    rest = rest.get(wrapper.operands..).unwrap_or_default();
    if wrapper.assignments {
        let skip = rest.iter().take_while(|w| is_assignment(w)).count();
        rest = &rest[skip..];
    }
    let mut words = Vec::new();
    // `env -S 'shutdown -h now'` splits its string into the command's words.
    if wrapper.name == "env"
        && let Some(split) = parsed.value_of(&["S", "split-string"])
    {
        match split.literal() {
            Some(text) => words.extend(text.split_whitespace().map(|w| Word::Literal(w.into()))),
            None => words.push(Word::unknown(split.text())),
        }
    }
    words.extend_from_slice(rest);
    if words.is_empty() && args_from_input {
        return Next::NameFromInput;
    }
    Next::Command {
        words,
        args_from_input,
    }
}

/// `bash [options] -c STRING`, `bash FILE`, or `bash` reading stdin.
fn shell(args: &[Word], args_from_input: bool) -> Next {
    let mut runs_string = false;
    let mut reads_stdin = false;
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        let text = arg.text();
        i += 1;
        if text == "--" || text == "-" {
            reads_stdin |= text == "-";
            break;
        }
        if let Some(long) = text.strip_prefix("--") {
            // fish spells -c as --command.
            if let Some(script) = long.strip_prefix("command=") {
                return scripts(vec![match arg.literal() {
                    Some(_) => ScriptText::Known(script.to_string()),
                    None => ScriptText::Unknown(text.to_string()),
                }]);
            }
            runs_string |= long == "command";
            if ["rcfile", "init-file"].contains(&long) {
                i += 1;
            }
            continue;
        }
        let Some(cluster) = text.strip_prefix(['-', '+']).filter(|c| !c.is_empty()) else {
            i -= 1;
            break;
        };
        runs_string |= text.starts_with('-') && cluster.contains('c');
        reads_stdin |= cluster.contains('s');
        i += cluster.chars().filter(|c| matches!(c, 'o' | 'O')).count();
    }
    let operand = args.get(i);
    if runs_string {
        return match operand {
            Some(script) => scripts(vec![ScriptText::from_words(std::slice::from_ref(script))]),
            None if args_from_input => Next::NameFromInput,
            None => Next::Nothing,
        };
    }
    script_file(
        operand,
        reads_stdin || (operand.is_none() && !args_from_input),
    )
}

/// A shell or `source` given a script file (or none, reading stdin).
fn script_file(file: Option<&Word>, reads_stdin: bool) -> Next {
    if reads_stdin {
        return Next::ReadsStdin;
    }
    match file {
        Some(Word::Dynamic(dynamic)) if dynamic.generated_file => {
            Next::GeneratedScript(dynamic.source.clone())
        }
        Some(Word::Literal(path)) if path == "/dev/stdin" => Next::ReadsStdin,
        _ => Next::Nothing,
    }
}

fn scripts(scripts: Vec<ScriptText>) -> Next {
    let scripts: Vec<ScriptText> = scripts
        .into_iter()
        .filter(|s| !matches!(s, ScriptText::Known(text) if text.trim().is_empty()))
        .collect();
    if scripts.is_empty() {
        Next::Nothing
    } else {
        Next::Scripts(scripts)
    }
}

/// `source FILE` / `. FILE`: like a shell given a file.
fn source(args: &[Word]) -> Next {
    let file = args.iter().find(|w| w.text() != "--");
    script_file(file, false)
}

/// `find ... -exec CMD ... ;` (also `-execdir`, `-ok`, `-okdir`, ending in `;` or `+`).
fn find(args: &[Word]) -> Next {
    let mut commands = Vec::new();
    let mut words = args.iter();
    while let Some(word) = words.next() {
        if !matches!(word.text(), "-exec" | "-execdir" | "-ok" | "-okdir") {
            continue;
        }
        let command: Vec<Word> = words
            .by_ref()
            .take_while(|w| !matches!(w.literal(), Some(";" | "+")))
            // find substitutes `{}` at run time: `-exec {} \;` runs file names.
            .map(|w| match w.text().contains("{}") {
                true => Word::unknown(w.text()),
                false => w.clone(),
            })
            .collect();
        commands.push(command);
    }
    match commands.is_empty() {
        true => Next::Nothing,
        false => Next::Commands(commands),
    }
}

/// `xargs [options] [CMD [ARGS]]`: runs CMD (default `echo`) with words from its input.
fn xargs(args: &[Word]) -> Next {
    let syntax = OptionSyntax {
        short_with_value: "aEdILnPs",
        long_with_value: &[
            "arg-file",
            "delimiter",
            "max-lines",
            "max-args",
            "max-procs",
            "max-chars",
            "process-slot-var",
        ],
    };
    let parsed = parse_options(args, &syntax);
    let placeholder = xargs_placeholder(&parsed, &args[..parsed.operands_at]);
    let words: Vec<Word> = args[parsed.operands_at..]
        .iter()
        .map(|w| match placeholder.as_deref() {
            // `xargs -I{} {}` takes the command name from its input.
            Some(p) if w.text().contains(p) => Word::unknown(w.text()),
            _ => w.clone(),
        })
        .collect();
    if words.is_empty() {
        return Next::Nothing; // runs echo
    }
    Next::Command {
        words,
        args_from_input: placeholder.is_none(),
    }
}

/// The replace string of `-I R`, `-iR`, `-i`, `--replace[=R]`.
fn xargs_placeholder(parsed: &ParsedOptions, option_words: &[Word]) -> Option<String> {
    if let Some(value) = parsed.value_of(&["I", "replace"]) {
        return Some(value.text().to_string());
    }
    if parsed.has(&["replace"]) {
        return Some("{}".to_string());
    }
    let short_i = option_words.iter().find_map(|w| {
        let cluster = w.text().strip_prefix('-')?;
        let at = cluster.find('i').filter(|_| !cluster.starts_with('-'))?;
        Some(&cluster[at + 1..])
    })?;
    Some(if short_i.is_empty() { "{}" } else { short_i }.to_string())
}

/// `watch [options] CMD...` runs `sh -c "CMD..."`, or CMD directly with `-x`.
fn watch(args: &[Word]) -> Next {
    let syntax = OptionSyntax {
        short_with_value: "nq",
        long_with_value: &["interval", "equexit"],
    };
    let parsed = parse_options(args, &syntax);
    let rest = &args[parsed.operands_at..];
    if parsed.has(&["x", "exec"]) {
        return Next::Command {
            words: rest.to_vec(),
            args_from_input: false,
        };
    }
    scripts(vec![ScriptText::from_words(rest)])
}

/// `su -c STRING`, `runuser -c STRING`, `script -c STRING`; `runuser -u USER CMD`.
fn string_option(name: &str, args: &[Word]) -> Next {
    let syntax = OptionSyntax {
        short_with_value: "cCsgGwuEIOTt",
        long_with_value: &["command", "session-command", "shell", "group", "user"],
    };
    let mut found = Vec::new();
    // su accepts options after the user name, so look at every word.
    let mut at = 0;
    while at < args.len() {
        let parsed = parse_options(&args[at..], &syntax);
        if let Some(script) = parsed.value_of(&["c", "command", "session-command"]) {
            found.push(ScriptText::from_words(std::slice::from_ref(script)));
        }
        if name == "runuser" && parsed.has(&["u", "user"]) {
            let words = args[at + parsed.operands_at..].to_vec();
            return Next::Command {
                words,
                args_from_input: false,
            };
        }
        at += parsed.operands_at.max(1);
    }
    scripts(found)
}

/// `sg GROUP [-c] COMMAND` passes COMMAND to `sh -c`.
fn sg(args: &[Word]) -> Next {
    let rest = args.get(1..).unwrap_or_default();
    let rest = match rest.first() {
        Some(flag) if flag.text() == "-c" => &rest[1..],
        _ => rest,
    };
    scripts(vec![ScriptText::from_words(rest)])
}

/// `flock [options] FILE CMD...` or `flock [options] FILE -c STRING`.
fn flock(args: &[Word]) -> Next {
    let syntax = OptionSyntax {
        short_with_value: "wE",
        long_with_value: &["timeout", "wait", "conflict-exit-code"],
    };
    let parsed = parse_options(args, &syntax);
    let rest = args.get(parsed.operands_at + 1..).unwrap_or_default();
    match rest.split_first() {
        Some((flag, script)) if matches!(flag.text(), "-c" | "--command") => {
            scripts(vec![ScriptText::from_words(&script[..script.len().min(1)])])
        }
        Some(_) => Next::Command {
            words: rest.to_vec(),
            args_from_input: false,
        },
        None => Next::Nothing,
    }
}

/// `trap 'HANDLER' SIGNALS...` runs HANDLER later.
fn trap(args: &[Word]) -> Next {
    let args = match args.first() {
        Some(first) if first.text() == "--" => &args[1..],
        Some(first) if first.text().starts_with('-') && first.text() != "-" => {
            return Next::Nothing;
        }
        _ => args,
    };
    match args {
        [handler, _signal, ..] if handler.text() != "-" => {
            scripts(vec![ScriptText::from_words(std::slice::from_ref(handler))])
        }
        _ => Next::Nothing,
    }
}

/// `alias NAME='VALUE'`: VALUE runs wherever NAME is used.
fn alias(args: &[Word]) -> Next {
    let values = args.iter().filter_map(|word| match word {
        Word::Literal(text) => text
            .split_once('=')
            .map(|(_, value)| ScriptText::Known(value.to_string())),
        Word::Dynamic(dynamic) => Some(ScriptText::Unknown(dynamic.source.clone())),
    });
    scripts(values.collect())
}

/// `at TIME` and `batch` run the script they read from stdin later.
fn at(args: &[Word]) -> Next {
    let syntax = OptionSyntax {
        short_with_value: "qft",
        long_with_value: &[],
    };
    let parsed = parse_options(args, &syntax);
    // -f reads a file; -l, -r, -d, -c list, remove or print jobs.
    match parsed.has(&["f", "l", "r", "d", "c"]) {
        true => Next::Nothing,
        false => Next::ReadsStdin,
    }
}

/// `coproc CMD`, `coproc { CMD; }`, `coproc NAME { CMD; }`: tree-sitter
/// parses the braces as words, so skip them (and the NAME) to find CMD.
fn coproc(args: &[Word]) -> Next {
    let brace = args.iter().take(2).position(|w| w.literal() == Some("{"));
    let words = match brace {
        Some(at) => args[at + 1..].to_vec(),
        None => args.to_vec(),
    };
    Next::Command {
        words,
        args_from_input: false,
    }
}

//! Programs that run other programs when their arguments tell them to:
//! `git -c alias.x='!cmd' x`, `git fetch --upload-pack=cmd`,
//! `awk 'BEGIN{system("cmd")}'`, `find $opt cmd \;` with `opt=-exec`,
//! `sed 's/x/cmd/e'` (`sed`), `sort --compress-program=cmd`,
//! `rg --pre cmd` (`filters`), `tar --to-command=cmd`, `rsync -e cmd`,
//! `ssh -o ProxyCommand=cmd` (`remote`); `getopt` reads their options as
//! their own parsers do.
//!
//! Unlike the wrappers (`sudo X`, `find -exec X ;`), what these run is not a
//! command we can check: it is a string inside an option or a program in
//! another language. Under a command allowlist they are refused where the
//! command line shows it, so that listing `git` or `awk` does not list every
//! program. What they run from files (a repository's config, an awk script
//! file) is the sandbox's business, and the docs say so.

mod filters;
mod getopt;
mod remote;
mod sed;

use super::words::Word;

/// Why running `name` with `args` may start a program the words do not
/// name, or `None` when it cannot as far as the command line shows.
pub(super) fn hidden_launch(name: &str, args: &[Word]) -> Option<String> {
    match name {
        "git" => git(args),
        "awk" | "gawk" | "mawk" | "nawk" | "original-awk" => awk(name, args),
        "find" => find(args),
        "sed" | "gsed" => sed::sed(args),
        "sort" => filters::sort(args),
        "rg" => filters::rg(args),
        "tar" | "gtar" => remote::tar(args),
        "rsync" => remote::rsync(args),
        "ssh" => remote::ssh(args),
        "scp" => remote::scp(args),
        "sftp" => remote::sftp(args),
        _ => None,
    }
}

/// A word that may expand to something starting with `-` (an option) at run
/// time: it starts with an expansion, a substitution or a glob (a file can
/// be named `--upload-pack=cmd`), or has an unquoted expansion, which word
/// splitting can turn into several words (`HEAD:$p` with `p='x --exec=cmd'`).
fn may_be_an_option(word: &Word) -> bool {
    let Word::Dynamic(dynamic) = word else {
        return false;
    };
    let splits = dynamic.source.contains(['$', '`']) && !dynamic.base_is_exact;
    let source = dynamic.source.trim_start_matches('"');
    (splits && !dynamic.generated_file) || source.starts_with(['$', '`', '*', '?', '['])
}

fn unknown_option(program: &str, word: &Word, example: &str) -> String {
    format!(
        "`{}` is only known at run time and could be an option such as `{example}` that makes {program} run a command; write the option literally",
        word.text()
    )
}

/// `find`'s actions that run a command are followed as wrappers; a word
/// that could become one of them at run time is not.
fn find(args: &[Word]) -> Option<String> {
    let word = args.iter().find(|w| may_be_an_option(w))?;
    Some(unknown_option("find", word, "-exec"))
}

/// Git options (before or after the subcommand) that name a program to run.
const GIT_PROGRAM_OPTIONS: &[&str] = &[
    "--upload-pack",
    "--receive-pack",
    "--exec",
    "--template",
    "--smtp-server",
    "--sendmail-cmd",
    "--to-cmd",
    "--cc-cmd",
    "--extcmd",
    "--open-files-in-pager",
];

/// Git global options that take the next word as their value.
const GIT_GLOBAL_WITH_VALUE: &[&str] = &[
    "-C",
    "-c",
    "--git-dir",
    "--work-tree",
    "--namespace",
    "--config-env",
    "--super-prefix",
];

/// Options whose value is data, so a run-time value there is harmless.
const GIT_DATA_OPTIONS: &[&str] = &[
    "-C",
    "-m",
    "--message",
    "-F",
    "--file",
    "-b",
    "-B",
    "--branch",
    "--author",
    "--format",
    "--pretty",
    "--since",
    "--until",
    "--grep",
];

fn git(args: &[Word]) -> Option<String> {
    let subcommand = git_subcommand(args);
    let mut words = args.iter().enumerate().peekable();
    let mut after_dashes = false;
    while let Some((i, word)) = words.next() {
        let Some(text) = word.literal() else {
            let follows_data_option = i
                .checked_sub(1)
                .and_then(|p| args.get(p)?.literal())
                .is_some_and(|p| GIT_DATA_OPTIONS.contains(&p));
            if !after_dashes && !follows_data_option && may_be_an_option(word) {
                return Some(unknown_option("git", word, "--upload-pack=CMD"));
            }
            continue;
        };
        if after_dashes {
            if text.contains("ext::") {
                return Some(format!(
                    "`{text}` is an ext:: URL, with which git runs the command it names"
                ));
            }
            continue;
        }
        if text == "--" {
            after_dashes = true;
            continue;
        }
        // `-c KEY=VALUE` (git's global option, and clone's), `-cKEY=VALUE`,
        // `--config KEY=VALUE`, `--config-env KEY=ENVVAR`.
        let setting = match text {
            "-c" | "--config" | "--config-env" => Some(words.peek().map(|(_, w)| *w)),
            _ => ["--config=", "--config-env="]
                .iter()
                .find_map(|p| text.strip_prefix(p))
                .or_else(|| text.strip_prefix("-c").filter(|rest| rest.contains('=')))
                .map(|_| Some(word)),
        };
        if let Some(setting) = setting {
            if let Some(why) = setting.and_then(|w| git_setting_refusal(text, w)) {
                return Some(why);
            }
            continue;
        }
        let option = text.split('=').next().unwrap_or(text);
        if GIT_PROGRAM_OPTIONS.contains(&option) || (option == "--exec-path" && text.contains('='))
        {
            return Some(format!("`{text}` names a program for git to run"));
        }
        if text.contains("ext::") {
            return Some(format!(
                "`{text}` is an ext:: URL, with which git runs the command it names"
            ));
        }
        if let Some(why) = git_subcommand_refusal(subcommand.as_deref(), text) {
            return Some(why);
        }
    }
    if let Some(sub @ ("config" | "bisect" | "submodule" | "filter-branch")) = subcommand.as_deref()
    {
        return git_subcommand_args_refusal(sub, args);
    }
    None
}

/// The subcommand: the first word that is not a global option or its value.
fn git_subcommand(args: &[Word]) -> Option<String> {
    let mut words = args.iter();
    while let Some(word) = words.next() {
        let text = word.text();
        if GIT_GLOBAL_WITH_VALUE.contains(&text) {
            words.next();
        } else if !text.starts_with('-') {
            return Some(text.to_string());
        }
    }
    None
}

/// Options of one subcommand that run a command: `rebase -x CMD`,
/// `fetch -u CMD` (`--upload-pack`), `difftool -x CMD`, `grep -O`.
fn git_subcommand_refusal(subcommand: Option<&str>, text: &str) -> Option<String> {
    let short = text.strip_prefix('-').filter(|s| !s.starts_with('-'))?;
    let letter = match subcommand? {
        "rebase" | "difftool" => 'x',
        "clone" | "fetch" | "ls-remote" | "pull" => 'u',
        "grep" => 'O',
        _ => return None,
    };
    // Short options cluster: `-ix CMD` is `-i -x CMD`.
    short
        .contains(letter)
        .then(|| format!("`{text}` names a program for git to run"))
}

/// `git config KEY VALUE`, `git bisect run CMD`, `git submodule foreach CMD`,
/// `git filter-branch --tree-filter CMD`.
fn git_subcommand_args_refusal(subcommand: &str, args: &[Word]) -> Option<String> {
    let texts = || args.iter().map(Word::text);
    match subcommand {
        "config" => texts().find_map(|t| {
            git_key_refusal(t).map(|why| format!("`git config {t}` sets a key with which {why}"))
        }),
        "bisect" if texts().any(|t| t == "run") => {
            Some("`git bisect run` runs the command it is given".to_string())
        }
        "submodule" if texts().any(|t| t == "foreach") => {
            Some("`git submodule foreach` runs the command it is given".to_string())
        }
        "filter-branch" => {
            Some("`git filter-branch` runs the filters it is given as commands".to_string())
        }
        _ => None,
    }
}

/// Why `-c`/`--config-env` with `setting` may run a program, if it may.
fn git_setting_refusal(option: &str, setting: &Word) -> Option<String> {
    let Some(text) = setting.literal() else {
        return Some(format!(
            "the git setting `{}` after `{option}` is only known at run time",
            setting.text()
        ));
    };
    let text = text
        .strip_prefix("-c")
        .filter(|_| option.starts_with("-c") && option.len() > 2)
        .unwrap_or(text);
    let text = ["--config=", "--config-env="]
        .iter()
        .find_map(|p| text.strip_prefix(p))
        .unwrap_or(text);
    let why = git_key_refusal(text)?;
    Some(format!("`{option} {text}` sets a key with which {why}"))
}

/// Why git config key `setting` (`KEY` or `KEY=VALUE`) may run a program.
fn git_key_refusal(setting: &str) -> Option<&'static str> {
    let key = setting
        .split('=')
        .next()
        .unwrap_or(setting)
        .to_ascii_lowercase();
    let (section, rest) = key.split_once('.')?;
    let name = rest.rsplit('.').next().unwrap_or(rest);
    let subsection = rest.contains('.');
    let runs = match (section, name) {
        ("alias", _) => return Some("git runs an alias, which can be any shell command (`!cmd`)"),
        // Whole sections whose values are commands, paths of commands or
        // config files to include (which can set any of these).
        (
            "pager" | "filter" | "sendemail" | "protocol" | "include" | "includeif" | "difftool"
            | "mergetool" | "browser" | "man" | "gpg" | "credential" | "instaweb",
            _,
        ) => true,
        (
            "core",
            "pager"
            | "editor"
            | "sshcommand"
            | "hookspath"
            | "fsmonitor"
            | "gitproxy"
            | "askpass"
            | "alternaterefscommand"
            | "worktree",
        ) => true,
        ("sequence", "editor") | ("diff", "external") | ("web", "browser") => true,
        ("interactive", "difffilter") | ("imap", "tunnel") => true,
        ("uploadpack", "packobjectshook") => true,
        ("diff", "command") | ("merge", "driver") if subsection => true,
        ("remote", "uploadpack" | "receivepack" | "vcs") if subsection => true,
        (_, "textconv") => true,
        _ => false,
    };
    runs.then_some("git runs the command it names (or reads config that can)")
}

/// Awk options that load program text from a file or a library.
const AWK_PROGRAM_FILES: &[&str] = &[
    "-f",
    "--file",
    "-E",
    "--exec",
    "-i",
    "--include",
    "-l",
    "--load",
    "-W",
];

/// Awk options whose value is data.
const AWK_DATA_OPTIONS: &[&str] = &["-F", "-v", "--field-separator", "--assign"];

fn awk(name: &str, args: &[Word]) -> Option<String> {
    let mut words = args.iter();
    let checked = |program: Option<&Word>| -> Option<String> {
        let program = program?;
        let Some(text) = program.literal() else {
            return Some(format!(
                "the {name} program `{}` is only known at run time",
                program.text()
            ));
        };
        awk_program_refusal(text).map(|why| format!("the {name} program {why}"))
    };
    // Options, up to the program text.
    while let Some(word) = words.next() {
        let Some(text) = word.literal() else {
            return checked(Some(word));
        };
        if text == "--" {
            if let Some(why) = checked(words.next()) {
                return Some(why);
            }
            break;
        }
        if text == "-" || !text.starts_with('-') {
            if let Some(why) = checked(Some(word)) {
                return Some(why);
            }
            break;
        }
        let option = text.split('=').next().unwrap_or(text);
        let stuck = |short: &str| text.len() > 2 && text.starts_with(short);
        if AWK_PROGRAM_FILES
            .iter()
            .any(|o| *o == option || (o.len() == 2 && stuck(o)))
        {
            return Some(format!(
                "`{text}` makes {name} run a program from a file, which cannot be checked; pass the program text instead"
            ));
        }
        // `-e TEXT`, `-eTEXT`, `--source=TEXT`, `--source TEXT`: program
        // text, after which every operand is a file.
        if option == "-e" || option == "--source" || stuck("-e") {
            let value = match (stuck("-e"), text.split_once('=')) {
                (true, _) => Some(Word::Literal(text[2..].to_string())),
                (false, Some((_, value))) => Some(Word::Literal(value.to_string())),
                (false, None) => words.next().cloned(),
            };
            if let Some(why) = checked(value.as_ref()) {
                return Some(why);
            }
            continue;
        }
        if AWK_DATA_OPTIONS.contains(&text) {
            words.next();
        }
    }
    // Operands: files and `var=value` assignments, unless one turns out
    // to be an option at run time.
    let word = words.find(|w| may_be_an_option(w))?;
    Some(unknown_option(name, word, "-f FILE"))
}

/// Why an awk program may run a command: `system(…)`, a pipe to or from a
/// command (`print | "cmd"`, `"cmd" | getline`, gawk's `|&`), or gawk's `@`
/// (indirect calls such as `@f("cmd")` with `f = "system"`, `@load`,
/// `@include`). Strings, comments and regular expressions in places where
/// awk can only see a regular expression are skipped; anywhere else a `|`
/// that is not `||` refuses, which may refuse a harmless program, never
/// pass a harmful one.
fn awk_program_refusal(program: &str) -> Option<String> {
    let chars: Vec<char> = program.chars().collect();
    let mut i = 0;
    // The last character outside strings, comments and whitespace.
    let mut previous: Option<char> = None;
    while let Some(&c) = chars.get(i) {
        match c {
            '"' => {
                i = skip_delimited(&chars, i, '"');
                previous = Some('"');
                continue;
            }
            '#' => {
                while chars.get(i).is_some_and(|c| *c != '\n') {
                    i += 1;
                }
                continue;
            }
            // A regular expression, where an operand must start.
            '/' if previous.is_none_or(|p| "(,~{};!&|\n".contains(p)) => {
                i = skip_delimited(&chars, i, '/');
                previous = Some('/');
                continue;
            }
            '|' if chars.get(i + 1) == Some(&'|') => {
                i += 2;
                previous = Some('|');
                continue;
            }
            '|' => return Some("pipes to or from a command (`|`)".to_string()),
            '@' => {
                return Some("uses gawk's `@` (an indirect call, @load or @include)".to_string());
            }
            c if c.is_ascii_alphabetic() || c == '_' => {
                let start = i;
                while chars
                    .get(i)
                    .is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_')
                {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                if word == "system" {
                    return Some("calls system(), which runs a command".to_string());
                }
                previous = Some('a');
                continue;
            }
            '\n' => previous = Some('\n'),
            c if c.is_whitespace() => {}
            c => previous = Some(c),
        }
        i += 1;
    }
    None
}

/// The index after the string or regex that opens at `start` (a backslash
/// escapes the next character); the end of the text if it never closes.
fn skip_delimited(chars: &[char], start: usize, delimiter: char) -> usize {
    let mut i = start + 1;
    while let Some(&c) = chars.get(i) {
        match c {
            '\\' => i += 2,
            c if c == delimiter => return i + 1,
            '\n' => return i,
            _ => i += 1,
        }
    }
    i
}

/// What the launcher tests of every module share.
#[cfg(test)]
pub(super) mod test_support {
    use crate::command::{CommandPolicy, CommandVerdict};

    /// The standard policy under an allowlist of `listed`.
    pub fn allowing(listed: &[&str]) -> Result<CommandPolicy, String> {
        let listed: Vec<String> = listed.iter().map(|s| s.to_string()).collect();
        CommandPolicy::standard()
            .allow_only(&listed, &[])
            .map_err(|e| e.to_string())
    }

    /// Each script is refused as a launch, with a reason naming `why`.
    pub fn expect_launches_refused(
        policy: &CommandPolicy,
        refused: &[(&str, &str)],
    ) -> Result<(), String> {
        for (script, why) in refused {
            match policy.check(script) {
                CommandVerdict::Denied { reason, .. } => {
                    assert!(reason.contains(why), "{script}: {reason}");
                    assert!(
                        reason.ends_with(
                            "under a command allowlist a listed program may not be told to run another"
                        ),
                        "{script}: {reason}"
                    );
                }
                other => return Err(format!("{script}: {other:?}")),
            }
        }
        Ok(())
    }

    /// Each script passes the command layer.
    pub fn expect_allowed(policy: &CommandPolicy, allowed: &[&str]) {
        for script in allowed {
            let verdict = policy.check(script);
            assert!(
                matches!(verdict, CommandVerdict::Allowed { .. }),
                "{script}: {verdict:?}"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{CommandPolicy, CommandVerdict};
    use super::test_support::{allowing, expect_allowed, expect_launches_refused};

    fn policy() -> Result<CommandPolicy, String> {
        allowing(&["git", "awk", "gawk", "find", "xargs", "ls", "cat"])
    }

    /// Each attack runs python3 (not listed) through a listed program; the
    /// reason must name the word.
    #[test]
    fn listed_programs_may_not_be_told_to_run_others() -> Result<(), String> {
        let policy = policy()?;
        let refused = [
            (
                "git -c alias.x='!python3 -c 1' x",
                "`-c alias.x=!python3 -c 1`",
            ),
            (
                "git -c core.pager='python3 -c 1' log",
                "`-c core.pager=python3 -c 1`",
            ),
            ("git -c Core.Pager=x log", "`-c Core.Pager=x`"),
            ("git -c pager.log=x log", "pager.log"),
            ("git -c core.editor=x commit", "core.editor"),
            (
                "git -c sequence.editor=x rebase -i HEAD~2",
                "sequence.editor",
            ),
            ("git -c core.sshCommand=x fetch", "core.sshCommand"),
            ("git -c core.hooksPath=hooks commit", "core.hooksPath"),
            ("git -c core.fsmonitor=x status", "core.fsmonitor"),
            ("git -c diff.external=x diff", "diff.external"),
            ("git -c diff.py.textconv=x diff", "diff.py.textconv"),
            ("git -c credential.helper=x fetch", "credential.helper"),
            ("git -c include.path=../cfg log", "include.path"),
            (
                "git -c protocol.ext.allow=always fetch",
                "protocol.ext.allow",
            ),
            ("git --config-env=core.pager=P log", "core.pager"),
            ("git --config-env core.pager=P log", "core.pager"),
            ("git clone -c core.hooksPath=h src dst", "core.hooksPath"),
            ("git clone --config core.pager=x src dst", "core.pager"),
            ("git -c \"$K\" log", "only known at run time"),
            (
                "git fetch --upload-pack='python3 -c 1' origin",
                "`--upload-pack=python3 -c 1`",
            ),
            ("git fetch --upload-pack x origin", "`--upload-pack`"),
            ("git clone -u x src dst", "`-u`"),
            ("git ls-remote -u x src", "`-u`"),
            ("git push --receive-pack=x origin", "`--receive-pack=x`"),
            ("git archive --remote=r --exec=x HEAD", "`--exec=x`"),
            ("git rebase --exec 'python3 -c 1' HEAD~1", "`--exec`"),
            ("git rebase -x 'python3 -c 1' HEAD~1", "`-x`"),
            ("git rebase -ix x HEAD~1", "`-ix`"),
            ("git difftool -x x", "`-x`"),
            ("git grep -O x", "`-O`"),
            ("git clone --template=t src dst", "`--template=t`"),
            ("git --exec-path=./bin status", "`--exec-path=./bin`"),
            ("git clone 'ext::sh -c python3' dst", "ext:: URL"),
            ("git fetch -- 'ext::sh -c x'", "ext:: URL"),
            ("git config alias.x '!python3'", "`git config alias.x`"),
            (
                "git config --global core.pager x",
                "`git config core.pager`",
            ),
            ("git bisect run python3 -c 1", "`git bisect run`"),
            ("git submodule foreach python3", "`git submodule foreach`"),
            ("git filter-branch --tree-filter x", "filter-branch"),
            ("git fetch $opt origin", "`$opt` is only known at run time"),
            ("git fetch * origin", "`*` is only known at run time"),
            // Unquoted, `$p` splits: `p='x --upload-pack=cmd'`.
            (
                "git fetch origin refs/$p",
                "`refs/$p` is only known at run time",
            ),
            ("awk 'BEGIN{system(\"python3 -c 1\")}'", "calls system()"),
            ("awk 'BEGIN { system (\"x\") }'", "calls system()"),
            ("awk '{print | \"python3\"}' f", "pipes"),
            ("awk 'BEGIN{\"python3\" | getline x}'", "pipes"),
            ("gawk 'BEGIN{print \"x\" |& \"python3\"}'", "pipes"),
            ("gawk 'BEGIN{f=\"system\"; @f(\"python3\")}'", "`@`"),
            ("gawk '@load \"x\"'", "`@`"),
            ("awk -f prog.awk f", "`-f`"),
            ("awk -fprog.awk f", "`-fprog.awk`"),
            ("gawk --file=prog.awk f", "`--file=prog.awk`"),
            ("gawk -i lib 'BEGIN{}'", "`-i`"),
            ("gawk -l ext 'BEGIN{}'", "`-l`"),
            ("gawk -e 'BEGIN{system(\"x\")}'", "calls system()"),
            ("gawk --source='BEGIN{system(\"x\")}'", "calls system()"),
            ("awk -F: -- 'BEGIN{system(\"x\")}'", "calls system()"),
            ("awk -v x=1 'BEGIN{system(\"x\")}'", "calls system()"),
            ("awk \"$prog\" f", "only known at run time"),
            ("awk '{print}' $f", "`$f` is only known at run time"),
            ("find . $a python3 \\;", "`$a` is only known at run time"),
        ];
        expect_launches_refused(&policy, &refused)
    }

    #[test]
    fn everyday_uses_of_listed_programs_still_run() -> Result<(), String> {
        let policy = policy()?;
        let allowed = [
            "git status",
            "git -C sub log --oneline -5",
            "git -c color.ui=never -c user.name=x commit -m \"$msg\"",
            "git log --format='%h %s' -- \"$file\"",
            "git push -u origin main",
            "git commit -c HEAD",
            "git config user.name",
            "git diff --stat",
            "git add src/*.rs",
            "git fetch origin \"refs/$p\"",
            "awk '{print $1}' f",
            "awk -F: '$3 > 100 || $1 == \"root\" {print $1}' /etc/passwd",
            "awk '/a|b/ {n++} END {print n}' f",
            "awk '{ if ($1 ~ /x|y/) print }' f",
            "awk 'BEGIN{print \"a | b\"}' # | here",
            "awk -v n=3 'NR <= n' f",
            "awk '{print > \"out.txt\"}' f",
            "find . -name '*.rs' -exec cat {} \\;",
            "find \"src\" -type f",
            "ls | xargs cat",
        ];
        expect_allowed(&policy, &allowed);
        // The wrappers' commands are checked as commands.
        for script in [
            "find . -exec python3 {} \\;",
            "find . -exec ./ls \\;",
            "ls | xargs python3",
            "ls | xargs ./cat",
        ] {
            assert!(
                matches!(policy.check(script), CommandVerdict::Denied { .. }),
                "{script}"
            );
        }
        // Without an allowlist these are the sandbox's business.
        assert!(matches!(
            CommandPolicy::standard().check("git -c core.pager=x log"),
            CommandVerdict::Allowed { .. }
        ));
        Ok(())
    }
}

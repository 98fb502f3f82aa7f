//! An allowlist: only named commands (or commands matching a pattern) may run.

use regex::{Regex, RegexBuilder};

use super::{CommandPolicyError, SimpleCommand};

/// Shell builtins that run no other program, so an allowlist need not name
/// them: `cd src && ls` must not need `cd` listed. `eval`, `exec`, `source`,
/// `command` and `builtin` are not here: they run what their arguments say.
const INERT_BUILTINS: &[&str] = &[
    "cd", "pushd", "popd", "dirs", "export", "unset", "set", "shift", "exit", "return", "read",
    "local", "declare", "typeset", "readonly", ":", "[", "test", "true", "false", "echo", "printf",
    "pwd", "wait", "umask", "type",
];

/// Commands a script may run when an allowlist is in force.
#[derive(Debug, Clone)]
pub(super) struct AllowList {
    /// Bare names (the program found on the sandbox's PATH) and absolute
    /// paths (exactly that file).
    commands: Vec<String>,
    patterns: Vec<Regex>,
}

impl AllowList {
    pub(super) fn new(
        commands: &[String],
        patterns: &[String],
    ) -> Result<Self, CommandPolicyError> {
        for name in commands {
            if let Some(reason) = unlistable(name) {
                return Err(CommandPolicyError::InvalidAllowedCommand {
                    name: name.clone(),
                    reason: reason.to_string(),
                });
            }
        }
        Ok(AllowList {
            commands: commands.to_vec(),
            patterns: patterns
                .iter()
                .map(|p| compile_allow_pattern(p))
                .collect::<Result<_, _>>()?,
        })
    }

    /// Why `command` may not run, if it may not.
    pub(super) fn refusal(&self, command: &SimpleCommand) -> Option<String> {
        if command.dynamic_name {
            // `$X` or `$(…)` as a command name could be anything at run time.
            return Some(format!(
                "the command name in `{}` is only known at run time, and only listed commands may run",
                super::parse::short(&command.text)
            ));
        }
        // The program as written, not its base name: `./ls` is whatever the
        // agent wrote to the working directory (`printf … > ls; chmod +x
        // ls; ./ls`), not the `ls` on PATH the list means. Exact and
        // case-sensitive: `Python3` is not `python3` on Linux, and an
        // allowlist errs on the side of refusing.
        let program = command.program.as_str();
        let path_qualified = program.contains('/');
        let listed = self.commands.iter().any(|c| c == program)
            || (!path_qualified && INERT_BUILTINS.contains(&program));
        if listed || self.patterns.iter().any(|p| names_command(p, command)) {
            return None;
        }
        let listing = match self.commands.is_empty() {
            true => String::new(),
            false => format!(" (allowed: {})", self.commands.join(" ")),
        };
        Some(match path_qualified {
            true if self.commands.iter().any(|c| c == &command.name) => format!(
                "`{program}` is not an allowed command{listing}: `{}` is listed, which means the program found on PATH; a path runs only when that exact path is listed",
                command.name
            ),
            true => format!(
                "`{program}` is not an allowed command{listing}: a path runs only when that exact path is listed"
            ),
            false => format!("`{program}` is not an allowed command{listing}"),
        })
    }
}

/// Why a script under an allowlist may not set the variable `name`, if it
/// may not: it would change which program a listed name finds, or make a
/// listed program run one the list does not name.
pub(super) fn assignment_refusal(name: &str) -> Option<&'static str> {
    match name {
        // Empty or relative PATH entries (`PATH=.:$PATH`, `unset PATH`,
        // which searches the working directory) find `./ls` for `ls`;
        // BASH_CMDS is bash's table of where each name was found, and
        // `BASH_CMDS[ls]=./x` makes `ls` run ./x.
        "PATH" | "BASH_CMDS" => Some("it changes which program a command name finds"),
        "BASH_ALIASES" => Some("it defines an alias that replaces a command"),
        // Options from a file, where the command line check cannot see
        // them: `--pre=CMD` in rg's, an archive `host:file` for tar.
        "RIPGREP_CONFIG_PATH" => {
            Some("rg reads options from the file it names, which can make it run a command")
        }
        "TAPE" => {
            Some("tar reads the archive it names, which can be on a host reached through rsh")
        }
        _ => toolgate_core::command_env::program_changing_variable(name),
    }
}

/// Why `name` cannot be an allowlist entry, if it cannot.
fn unlistable(name: &str) -> Option<&'static str> {
    if name.is_empty() || name.chars().any(char::is_whitespace) {
        return Some(
            "expected a program's name such as `git` or an absolute path such as `/usr/bin/git` (no spaces)",
        );
    }
    // A relative path names a file under the working directory, which the
    // agent can write: listing it would allow whatever the agent puts there.
    if name.contains('/') && !name.starts_with('/') {
        return Some(
            "a relative path names a file the agent can write; list a program's name (found on PATH, such as `git`) or an absolute path (such as `/usr/bin/git`)",
        );
    }
    None
}

/// An allow pattern names a command only when it matches the command's text
/// from its start and covers the whole program word: unanchored, `npm test`
/// would otherwise allow `python3 -c '…' 'npm test'` and `./npm test`.
fn names_command(pattern: &Regex, command: &SimpleCommand) -> bool {
    pattern
        .find(&command.text)
        .is_some_and(|m| m.start() == 0 && m.end() >= command.program.len())
}

fn compile_allow_pattern(pattern: &str) -> Result<Regex, CommandPolicyError> {
    let invalid = |reason: String| CommandPolicyError::InvalidAllowPattern {
        pattern: pattern.to_string(),
        reason,
    };
    if pattern.is_empty() {
        return Err(invalid(
            "it is empty and would allow every command".to_string(),
        ));
    }
    RegexBuilder::new(pattern)
        .build()
        .map_err(|e| invalid(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::super::{CommandPolicy, CommandVerdict};

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn allowed(policy: &CommandPolicy, script: &str) -> bool {
        matches!(policy.check(script), CommandVerdict::Allowed { .. })
    }

    #[test]
    fn only_listed_commands_run_with_pipes_lists_and_redirections() -> Result<(), String> {
        let policy = CommandPolicy::standard()
            .allow_only(&names(&["cat", "grep", "git", "sort"]), &[])
            .map_err(|e| e.to_string())?;
        let cases = [
            ("cat a.txt | grep x | sort > out.txt", true),
            ("cd src && git status 2>&1; echo done", true),
            ("[ -f a ] && test -d b || true", true),
            ("cat <<EOF > f\nhi\nEOF", true),
            ("/usr/bin/git log", false),
            ("python3 -c 1", false),
            ("cat a | python3", false),
            ("git log && curl https://example.com", false),
            ("env cat a", false),
            ("sudo cat a", false),
            ("bash -c 'cat a'", false),
            ("$(echo cat) a", false),
            ("X=cat; $X a", false),
            ("eval 'cat a'", false),
            ("cat $(curl -s x)", false),
            ("Cat a", false),
            ("cat 'unterminated", false),
        ];
        for (script, expected) in cases {
            assert_eq!(allowed(&policy, script), expected, "{script}");
        }
        Ok(())
    }

    #[test]
    fn an_empty_list_allows_only_builtins_and_patterns_allow_by_text() -> Result<(), String> {
        let empty = CommandPolicy::standard()
            .allow_only(&[], &[])
            .map_err(|e| e.to_string())?;
        assert!(allowed(&empty, "cd /tmp && echo hi"));
        assert!(!allowed(&empty, "ls"));
        let patterns = CommandPolicy::standard()
            .allow_only(&[], &names(&[r"^npm (test|run build)$"]))
            .map_err(|e| e.to_string())?;
        assert!(allowed(&patterns, "npm test"));
        assert!(!allowed(&patterns, "npm install evil"));
        Ok(())
    }

    #[test]
    fn denials_still_win_and_bad_names_are_refused() {
        let policy = CommandPolicy::standard().allow_only(&names(&["shutdown"]), &[]);
        assert!(
            policy.is_ok_and(|p| !allowed(&p, "shutdown -h now")),
            "a denied binary stays denied when listed"
        );
        for bad in ["", "./ls", "bin/ls", "ls -la"] {
            assert!(
                CommandPolicy::standard()
                    .allow_only(&names(&[bad]), &[])
                    .is_err(),
                "{bad:?}"
            );
        }
    }

    /// `printf … > ls; chmod +x ls; ./ls` under `ls` listed ran the agent's
    /// file: a listed name means the program on PATH, a path only itself.
    #[test]
    fn a_path_runs_only_when_that_exact_path_is_listed() -> Result<(), String> {
        let policy = CommandPolicy::standard()
            .allow_only(
                &names(&["ls", "cat", "printf", "chmod", "/usr/bin/git"]),
                &[],
            )
            .map_err(|e| e.to_string())?;
        let cases = [
            ("ls -la", true),
            ("/usr/bin/git status", true),
            ("printf '#!/bin/sh\\nid\\n' > ls; chmod +x ls; ./ls", false),
            ("./ls", false),
            ("/tmp/x/ls", false),
            ("/usr/bin/ls", false),
            ("sub/ls", false),
            ("\"$PWD\"/ls", false),
            ("~/ls", false),
            ("git status", false),
            ("/usr/bin//git status", false),
            ("./printf x", false),
            ("./cd", false),
        ];
        for (script, expected) in cases {
            assert_eq!(allowed(&policy, script), expected, "{script}");
        }
        let CommandVerdict::Denied { command, reason } = policy.check("chmod +x ls; ./ls") else {
            return Err("./ls must be refused".to_string());
        };
        assert_eq!(command, "./ls");
        assert_eq!(
            reason,
            "`./ls` is not an allowed command (allowed: ls cat printf chmod /usr/bin/git): `ls` is listed, which means the program found on PATH; a path runs only when that exact path is listed"
        );
        Ok(())
    }

    #[test]
    fn denials_match_every_path_of_a_denied_name() -> Result<(), String> {
        let policy = CommandPolicy::standard()
            .deny_binary("rm")
            .and_then(|p| p.allow_only(&names(&["rm", "/bin/rm"]), &[]))
            .map_err(|e| e.to_string())?;
        for script in ["rm -f x", "/bin/rm -f x", "./rm"] {
            assert!(!allowed(&policy, script), "{script}");
        }
        Ok(())
    }

    /// Unanchored, `npm test` allowed any command whose text contained it.
    #[test]
    fn patterns_match_a_command_from_its_start() -> Result<(), String> {
        let policy = CommandPolicy::standard()
            .allow_only(&[], &names(&["npm test", r"^\./gradlew build$"]))
            .map_err(|e| e.to_string())?;
        let cases = [
            ("npm test", true),
            ("npm test --watch", true),
            ("./gradlew build", true),
            ("python3 -c 'import os' 'npm test'", false),
            ("./npm test", false),
            ("/tmp/npm test", false),
        ];
        for (script, expected) in cases {
            assert_eq!(allowed(&policy, script), expected, "{script}");
        }
        Ok(())
    }

    /// `PATH=.:$PATH ls` finds ./ls; `export LD_PRELOAD=$PWD/x.so; ls`
    /// runs the agent's library inside ls.
    #[test]
    fn scripts_may_not_change_what_a_listed_name_runs() -> Result<(), String> {
        let policy = CommandPolicy::standard()
            .allow_only(&names(&["ls", "cat"]), &[])
            .map_err(|e| e.to_string())?;
        let refused = [
            ("PATH=.:$PATH ls", "PATH"),
            ("PATH=. ; ls", "PATH"),
            ("export PATH=\"$PWD\"; ls", "PATH"),
            ("local PATH+=:.; ls", "PATH"),
            ("declare -x PATH=; ls", "PATH"),
            ("unset PATH; ls", "PATH"),
            ("unset -v PATH; ls", "PATH"),
            ("for PATH in . ; do ls; done", "PATH"),
            ("read PATH <<< .; ls", "PATH"),
            ("read -r -a PATH <<< .; ls", "PATH"),
            ("printf -v PATH .; ls", "PATH"),
            ("printf -vPATH .; ls", "PATH"),
            ("wait -p PATH; ls", "PATH"),
            ("((PATH=0)); ls", "PATH"),
            ("echo $((PATH=1)); ls", "PATH"),
            (": ${LD_PRELOAD:=./x.so}; ls", "LD_PRELOAD"),
            ("declare -n r=PATH; r=.; ls", "PATH"),
            ("BASH_CMDS[ls]=./x; ls", "BASH_CMDS"),
            ("export LD_PRELOAD=$PWD/x.so; ls", "LD_PRELOAD"),
            ("LD_PRELOAD=./x.so ls", "LD_PRELOAD"),
            ("BASH_ENV=./x cat a", "BASH_ENV"),
            ("RIPGREP_CONFIG_PATH=./rc cat a", "RIPGREP_CONFIG_PATH"),
            ("export TAPE=host:/dev/st0; cat a", "TAPE"),
            ("(PATH=.; ls)", "PATH"),
            ("cat $(PATH=. ls)", "PATH"),
        ];
        for (script, name) in refused {
            match policy.check(script) {
                CommandVerdict::Denied { reason, .. } => assert!(
                    reason.starts_with(&format!("sets `{name}` (")),
                    "{script}: {reason}"
                ),
                other => return Err(format!("{script}: {other:?}")),
            }
        }
        for script in [
            "X=1 ls",
            "echo $PATH; ls",
            "LANG=C ls",
            "read -r line <<< x; ls",
        ] {
            assert!(allowed(&policy, script), "{script}");
        }
        // Without an allowlist the sandbox is the boundary: nothing to refuse.
        assert!(matches!(
            CommandPolicy::standard().check("PATH=. ls"),
            CommandVerdict::Allowed { .. }
        ));
        Ok(())
    }

    #[test]
    fn bad_allow_patterns_and_relative_paths_say_what_to_write() {
        let error = |commands: &[&str], patterns: &[&str]| {
            CommandPolicy::standard()
                .allow_only(&names(commands), &names(patterns))
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        let text = error(&[], &["("]);
        assert!(text.starts_with("invalid allow pattern `(`: "), "{text}");
        assert!(!text.contains("deny"), "{text}");
        assert!(error(&[], &[""]).contains("would allow every command"));
        assert_eq!(
            error(&["./ls"], &[]),
            "invalid allowed command `./ls`: a relative path names a file the agent can write; list a program's name (found on PATH, such as `git`) or an absolute path (such as `/usr/bin/git`)"
        );
    }
}

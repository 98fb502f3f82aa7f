//! An allowlist: only named commands (or commands matching a pattern) may run.

use regex::Regex;

use super::{CommandPolicyError, SimpleCommand, compile_pattern, first_matching};

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
    commands: Vec<String>,
    patterns: Vec<Regex>,
}

impl AllowList {
    pub(super) fn new(
        commands: &[String],
        patterns: &[String],
    ) -> Result<Self, CommandPolicyError> {
        for name in commands {
            if name.is_empty() || name.contains('/') || name.chars().any(char::is_whitespace) {
                return Err(CommandPolicyError::InvalidAllowedCommand { name: name.clone() });
            }
        }
        Ok(AllowList {
            commands: commands.to_vec(),
            patterns: patterns
                .iter()
                .map(|p| compile_pattern(p))
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
        // Exact, case-sensitive names: `Python3` is not `python3` on Linux,
        // and an allowlist errs on the side of refusing.
        let listed = self.commands.contains(&command.name)
            || INERT_BUILTINS.contains(&command.name.as_str());
        if listed || first_matching(&self.patterns, command).is_some() {
            return None;
        }
        Some(if self.commands.is_empty() {
            format!("`{}` is not an allowed command", command.name)
        } else {
            format!(
                "`{}` is not an allowed command (allowed: {})",
                command.name,
                self.commands.join(" ")
            )
        })
    }
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
            ("/usr/bin/git log", true),
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
        for bad in ["", "/bin/ls", "ls -la"] {
            assert!(
                CommandPolicy::standard()
                    .allow_only(&names(&[bad]), &[])
                    .is_err(),
                "{bad:?}"
            );
        }
    }
}

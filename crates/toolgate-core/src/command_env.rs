//! Environment variables that change what a command runs.
//!
//! A command tool's `env` argument sets variables for a shell script. Some
//! variables do far more than configure: they make the shell, the dynamic
//! loader, git or an interpreter run code that no word of the script names.
//! With them an agent runs a program the command policy never saw (`ls` with
//! `BASH_ENV=/dev/stdin` runs whatever stdin holds), so toolgate never sets
//! them for a command, from any source: the `env` argument, a host variable
//! passed by name (`pass_env`), and, under a command allowlist, the script's
//! own assignments.
//!
//! The list lives here because three layers share it: the sandbox refuses
//! such a command outright (the last line of defence, whatever tool built
//! it), the tools word the error for the caller, and the command policy
//! applies it to assignments inside a script.
//!
//! The criterion: a variable is listed when it makes a program run code or
//! another program that neither its command line nor the files it was asked
//! to work on name. Variables that only move configuration directories
//! (`HOME`, `XDG_CONFIG_HOME`, `ZDOTDIR`) are not: the sandbox's home is a
//! writable directory already, so refusing them would claim a protection
//! that does not exist (programs that read config files there are the
//! sandbox's business; see the allowlist note in the README). `IFS` is not
//! listed either: bash and dash reset it at startup instead of importing it.

/// Exact names, by what they let an agent run. Each group names the attack.
const EXACT: &[(&str, &[&str])] = &[
    (
        // bash sources $BASH_ENV before a non-interactive script, sh (and
        // bash in POSIX mode) $ENV; SHELLOPTS=xtrace with a PS4 holding
        // `$(...)` runs a command at the first traced line; BASHOPTS sets
        // shopt options (extdebug sources a debugger); PROMPT_COMMAND and the
        // prompts run in interactive shells (`bash -i`); EXECIGNORE changes
        // which file a command name finds; BASH_LOADABLES_PATH which library
        // `enable -f` loads.
        "the shell runs code it names at startup",
        &[
            "BASH_ENV",
            "ENV",
            "SHELLOPTS",
            "BASHOPTS",
            "PS0",
            "PS1",
            "PS2",
            "PS3",
            "PS4",
            "PROMPT_COMMAND",
            "EXECIGNORE",
            "BASH_LOADABLES_PATH",
        ],
    ),
    (
        // glibc's iconv loads conversion modules (shared objects) from
        // GCONV_PATH: the pkexec exploit (CVE-2021-4034). GLIBC_TUNABLES is
        // parsed by ld.so before main (CVE-2023-4911).
        "the C library loads shared objects it names into every program",
        &["GCONV_PATH", "GLIBC_TUNABLES"],
    ),
    (
        // Git runs these as commands (pager, editor, ssh, askpass, external
        // diff, proxy) or takes its config from them (GIT_CONFIG_COUNT /
        // GIT_CONFIG_KEY_n / GIT_CONFIG_VALUE_n and GIT_CONFIG_PARAMETERS
        // are `git -c`: core.pager, alias.x=!cmd); GIT_EXEC_PATH is where it
        // finds its subcommands; GIT_DIR, GIT_WORK_TREE and GIT_COMMON_DIR
        // point it at a repository whose config and hooks the agent wrote,
        // around the protected .git/config and .git/hooks; GIT_TEMPLATE_DIR
        // copies hooks into new repositories; GIT_ALLOW_PROTOCOL and
        // GIT_PROTOCOL_FROM_USER open `ext::` URLs, which run a command.
        "git runs the command it names or reads config and hooks from it",
        &[
            "GIT_CONFIG",
            "GIT_CONFIG_COUNT",
            "GIT_CONFIG_PARAMETERS",
            "GIT_CONFIG_GLOBAL",
            "GIT_CONFIG_SYSTEM",
            "GIT_EXEC_PATH",
            "GIT_SSH",
            "GIT_SSH_COMMAND",
            "GIT_PAGER",
            "GIT_EDITOR",
            "GIT_SEQUENCE_EDITOR",
            "GIT_ASKPASS",
            "GIT_EXTERNAL_DIFF",
            "GIT_PROXY_COMMAND",
            "GIT_DIR",
            "GIT_WORK_TREE",
            "GIT_COMMON_DIR",
            "GIT_TEMPLATE_DIR",
            "GIT_ALLOW_PROTOCOL",
            "GIT_PROTOCOL_FROM_USER",
        ],
    ),
    (
        // Pagers, editors, browsers and password helpers that many programs
        // (man, git, less, ssh, sudo, crontab, systemctl) start by running
        // the command in these variables; less runs LESSOPEN/LESSCLOSE as
        // input filters and LESS may carry `+!command`; tar takes options
        // from TAR_OPTIONS (`--to-command`, `--use-compress-program`);
        // rsync and cvs run their remote shell from these.
        "programs start the pager, editor or helper it names",
        &[
            "PAGER",
            "MANPAGER",
            "MANOPT",
            "SYSTEMD_PAGER",
            "EDITOR",
            "VISUAL",
            "SYSTEMD_EDITOR",
            "BROWSER",
            "LESS",
            "LESSOPEN",
            "LESSCLOSE",
            "SSH_ASKPASS",
            "SUDO_ASKPASS",
            "TAR_OPTIONS",
            "RSYNC_RSH",
            "RSYNC_CONNECT_PROG",
            "CVS_RSH",
        ],
    ),
    (
        // Interpreters run code from these before the script they were
        // given: Python imports sitecustomize from PYTHONPATH and runs
        // PYTHONSTARTUP; perl -M modules from PERL5OPT; ruby -r from
        // RUBYOPT; node --require from NODE_OPTIONS; the JVM loads agents
        // from JAVA_TOOL_OPTIONS; lua runs LUA_INIT; php reads an ini with
        // auto_prepend_file from PHPRC. A listed program written in one of
        // these languages would run the agent's code.
        "the interpreter runs code it names before its script",
        &[
            "PYTHONSTARTUP",
            "PYTHONPATH",
            "PYTHONHOME",
            "PYTHONUSERBASE",
            "PYTHONBREAKPOINT",
            "PERL5OPT",
            "PERL5LIB",
            "PERLLIB",
            "PERL5DB",
            "RUBYOPT",
            "RUBYLIB",
            "NODE_OPTIONS",
            "NODE_PATH",
            "JAVA_TOOL_OPTIONS",
            "JDK_JAVA_OPTIONS",
            "_JAVA_OPTIONS",
            "CLASSPATH",
            "PHPRC",
            "PHP_INI_SCAN_DIR",
            "R_PROFILE",
            "R_PROFILE_USER",
        ],
    ),
    (
        // ripgrep reads default options (`--pre CMD`) from this file; tar's
        // default archive may be `host:file`, which runs rsh or ssh.
        "the program takes options or an archive from it that run a command",
        &["RIPGREP_CONFIG_PATH", "TAPE"],
    ),
    (
        // Build tools start every compiler through these wrappers (cargo's
        // RUSTC_WRAPPER, go's -toolexec in GOFLAGS).
        "the build tool runs every compiler through the program it names",
        &[
            "RUSTC_WRAPPER",
            "RUSTC_WORKSPACE_WRAPPER",
            "CARGO_BUILD_RUSTC_WRAPPER",
            "CARGO_BUILD_RUSTC_WORKSPACE_WRAPPER",
            "GOFLAGS",
        ],
    ),
];

/// Names refused by prefix.
const PREFIXES: &[(&str, &str)] = &[
    // ld.so(8) reads LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT, LD_PROFILE ...
    // before main: a preloaded library runs its code inside every
    // dynamically linked program, listed or not.
    (
        "LD_",
        "the dynamic loader loads the libraries it names into every program",
    ),
    // Exported bash functions (`BASH_FUNC_ls%%`) replace commands by name.
    (
        "BASH_FUNC_",
        "bash defines a function from it that replaces a command",
    ),
    // GIT_CONFIG_KEY_<n> / GIT_CONFIG_VALUE_<n>: see GIT_CONFIG_COUNT.
    (
        "GIT_CONFIG_",
        "git runs the command it names or reads config and hooks from it",
    ),
    // lua reads LUA_INIT_5_4, LUA_INIT_5_3 ... as well as LUA_INIT.
    (
        "LUA_INIT",
        "the interpreter runs code it names before its script",
    ),
];

/// npm reads its config from `npm_config_*` variables in any case; these
/// keys name the shell that runs package scripts, the programs it starts
/// and the config files it reads.
const NPM_CONFIG_KEYS: &[&str] = &[
    "script_shell",
    "shell",
    "node_options",
    "git",
    "editor",
    "browser",
    "userconfig",
    "globalconfig",
];

/// Why `name` may not be set for a command, or `None` if it may.
pub fn program_changing_variable(name: &str) -> Option<&'static str> {
    // Not a variable a shell can name (`BASH_FUNC_ls%%`, `f()`): bash
    // imports functions through such names.
    if name.contains("%%") || name.contains("()") {
        return Some("bash defines a function from it that replaces a command");
    }
    if let Some((reason, _)) = EXACT.iter().find(|(_, names)| names.contains(&name)) {
        return Some(reason);
    }
    if let Some((_, reason)) = PREFIXES.iter().find(|(p, _)| name.starts_with(p)) {
        return Some(reason);
    }
    let lower = name.to_ascii_lowercase();
    let npm_key = lower.strip_prefix("npm_config_")?;
    NPM_CONFIG_KEYS
        .contains(&npm_key)
        .then_some("npm runs the program it names or reads its config from it")
}

/// The names among `names` that may not be set for a command, each with its
/// reason, in the order given; empty when all may.
pub fn refused_variables<'a, I>(names: I) -> Vec<(&'a str, &'static str)>
where
    I: IntoIterator<Item = &'a str>,
{
    names
        .into_iter()
        .filter_map(|name| program_changing_variable(name).map(|why| (name, why)))
        .collect()
}

/// One message naming every refused variable and why, for errors.
pub fn describe_refused(refused: &[(&str, &str)]) -> String {
    let parts: Vec<String> = refused
        .iter()
        .map(|(name, why)| format!("`{name}` ({why})"))
        .collect();
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn variables_that_change_what_runs_are_named_and_others_pass() {
        let refused = [
            "BASH_ENV",
            "ENV",
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "LD_AUDIT",
            "LD_ANYTHING_NEW",
            "BASH_FUNC_ls%%",
            "BASH_FUNC_ls",
            "ls()",
            "PROMPT_COMMAND",
            "SHELLOPTS",
            "BASHOPTS",
            "PS4",
            "GIT_CONFIG_COUNT",
            "GIT_CONFIG_KEY_0",
            "GIT_CONFIG_VALUE_0",
            "GIT_CONFIG_PARAMETERS",
            "GIT_EXEC_PATH",
            "GIT_SSH_COMMAND",
            "GIT_DIR",
            "PAGER",
            "EDITOR",
            "VISUAL",
            "PYTHONSTARTUP",
            "PYTHONPATH",
            "PERL5OPT",
            "RUBYOPT",
            "NODE_OPTIONS",
            "LUA_INIT_5_4",
            "npm_config_script_shell",
            "NPM_CONFIG_SCRIPT_SHELL",
            "GCONV_PATH",
            "RIPGREP_CONFIG_PATH",
            "TAPE",
        ];
        for name in refused {
            assert!(program_changing_variable(name).is_some(), "{name}");
        }
        let allowed = [
            "PATH",
            "HOME",
            "LANG",
            "TERM",
            "RUST_LOG",
            "CI",
            "GIT_AUTHOR_NAME",
            "GIT_COMMITTER_EMAIL",
            "IFS",
            "npm_config_registry",
            "PYTHONUNBUFFERED",
            "LDFLAGS",
            "MY_BASH_ENV",
        ];
        for name in allowed {
            assert_eq!(program_changing_variable(name), None, "{name}");
        }
    }

    #[test]
    fn every_refused_name_is_reported_in_order() {
        let refused = refused_variables(["CI", "LD_PRELOAD", "BASH_ENV", "X"]);
        let names: Vec<&str> = refused.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["LD_PRELOAD", "BASH_ENV"]);
        let text = describe_refused(&refused);
        assert!(
            text.starts_with("`LD_PRELOAD` (the dynamic loader"),
            "{text}"
        );
        assert!(text.contains("`BASH_ENV` (the shell runs code"), "{text}");
    }
}

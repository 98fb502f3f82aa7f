use pretty_assertions::assert_eq;
use proptest::prelude::*;

use super::*;

/// Scripts the standard policy must deny, with a piece of the expected reason.
const DENIED: &[(&str, &str)] = &[
    // power-off by other means (default patterns)
    ("systemctl poweroff", "denied pattern"),
    ("sudo systemctl --force reboot", "denied pattern"),
    ("ls && telinit 6", "denied pattern"),
    ("init 0", "denied pattern"),
    // lists, pipelines, background
    ("ls; shutdown", "`shutdown`"),
    ("ls && shutdown -h now", "`shutdown`"),
    ("false || reboot", "`reboot`"),
    ("halt & ls", "`halt`"),
    ("ls\npoweroff", "`poweroff`"),
    ("ls | shutdown", "`shutdown`"),
    ("shutdown | cat", "`shutdown`"),
    ("ls |& reboot", "`reboot`"),
    // subshells and groups
    ("(shutdown)", "`shutdown`"),
    ("(ls; (reboot))", "`reboot`"),
    ("{ ls; shutdown; }", "`shutdown`"),
    // substitutions
    ("echo $(shutdown)", "`shutdown`"),
    ("echo \"$(reboot)\"", "`reboot`"),
    ("x=$(halt)", "`halt`"),
    ("local x=$(halt)", "`halt`"),
    ("a=(1 $(poweroff))", "`poweroff`"),
    ("echo `shutdown`", "`shutdown`"),
    ("echo $((1 + $(reboot)))", "`reboot`"),
    ("cat <(shutdown)", "`shutdown`"),
    ("diff <(ls) <(reboot)", "`reboot`"),
    ("echo hi > >(halt)", "`halt`"),
    ("while read l; do :; done < <(poweroff)", "`poweroff`"),
    // control flow: conditions and bodies
    ("if shutdown; then :; fi", "`shutdown`"),
    ("if true; then reboot; fi", "`reboot`"),
    ("if false; then :; elif halt; then :; fi", "`halt`"),
    ("if false; then :; else poweroff; fi", "`poweroff`"),
    ("while shutdown; do :; done", "`shutdown`"),
    ("while true; do reboot; done", "`reboot`"),
    ("until halt; do :; done", "`halt`"),
    ("for i in 1 2; do shutdown; done", "`shutdown`"),
    ("for i in $(reboot); do :; done", "`reboot`"),
    ("for ((i = 0; i < 3; i++)); do halt; done", "`halt`"),
    ("case x in x) shutdown ;; esac", "`shutdown`"),
    ("[[ -n $(reboot) ]]", "`reboot`"),
    ("! shutdown", "`shutdown`"),
    // function bodies
    ("f(){ shutdown; }; f", "`shutdown`"),
    ("function g { reboot; }; g", "`reboot`"),
    ("f() ( halt )", "`halt`"),
    // paths
    ("/sbin/shutdown -h now", "`shutdown`"),
    ("./shutdown", "`shutdown`"),
    ("../../usr/sbin/reboot", "`reboot`"),
    ("~/bin/halt", "`halt`"),
    ("\"$HOME\"/bin/shutdown", "`shutdown`"),
    ("$HOME/bin/shutdown", "`shutdown`"),
    // quoting, escapes, concatenation, expansion tricks
    ("\"shutdown\"", "`shutdown`"),
    ("'shutdown'", "`shutdown`"),
    ("\\shutdown", "`shutdown`"),
    ("sh\"\"utdown", "`shutdown`"),
    ("s'hut'\"do\"wn", "`shutdown`"),
    ("$'shutdown'", "`shutdown`"),
    ("$'\\x73hutdown'", "`shutdown`"),
    ("$'\\163hutdown'", "`shutdown`"),
    ("$\"reboot\"", "`reboot`"),
    ("shut\\\ndown", "`shutdown`"),
    ("\"shut\\\ndown\"", "`shutdown`"),
    ("shut{down,}", "`shutdown`"),
    ("re{b,}oot", "`reboot`"),
    ("SHUTDOWN", "`SHUTDOWN`"),
    // assignments before the command
    ("X=1 shutdown", "`shutdown`"),
    ("X=1 Y=\"a b\" reboot", "`reboot`"),
    // wrappers
    ("env shutdown", "`shutdown`"),
    ("env -i shutdown", "`shutdown`"),
    ("env -u HOME shutdown", "`shutdown`"),
    ("env -i -u HOME X=1 Y=2 shutdown", "`shutdown`"),
    ("env - reboot", "`reboot`"),
    ("env -S 'shutdown -h now'", "`shutdown`"),
    ("sudo shutdown", "`shutdown`"),
    ("sudo -u root -E shutdown -h now", "`shutdown`"),
    ("sudo --user=root -- reboot", "`reboot`"),
    ("sudo X=1 halt", "`halt`"),
    ("doas -u root halt", "`halt`"),
    ("nohup shutdown &", "`shutdown`"),
    ("exec shutdown", "`shutdown`"),
    ("exec -a name reboot", "`reboot`"),
    ("command shutdown", "`shutdown`"),
    ("command -p reboot", "`reboot`"),
    ("builtin halt", "`halt`"),
    ("time shutdown", "`shutdown`"),
    ("time -p reboot", "`reboot`"),
    ("nice shutdown", "`shutdown`"),
    ("nice -n 10 shutdown", "`shutdown`"),
    ("nice -5 reboot", "`reboot`"),
    ("ionice -c 3 shutdown", "`shutdown`"),
    ("ionice -c3 -n7 reboot", "`reboot`"),
    ("timeout 5 shutdown", "`shutdown`"),
    ("timeout -s KILL -k 1 5s shutdown", "`shutdown`"),
    ("timeout --signal=TERM 5 reboot", "`reboot`"),
    ("stdbuf -oL shutdown", "`shutdown`"),
    ("stdbuf -i 0 -o L reboot", "`reboot`"),
    ("setsid shutdown", "`shutdown`"),
    ("setsid -f reboot", "`reboot`"),
    ("xargs shutdown", "`shutdown`"),
    ("xargs -0 -n1 -P4 reboot", "`reboot`"),
    ("ls | xargs -I{} halt {}", "`halt`"),
    ("watch shutdown", "`shutdown`"),
    ("watch -n 5 'reboot now'", "`reboot`"),
    ("watch -x poweroff", "`poweroff`"),
    ("chroot /mnt shutdown", "`shutdown`"),
    ("chroot --userspec=1:1 / reboot", "`reboot`"),
    ("busybox reboot", "`reboot`"),
    ("busybox sh -c halt", "`halt`"),
    ("coproc shutdown", "`shutdown`"),
    ("coproc NAME { shutdown; }", "`shutdown`"),
    ("at now <<< 'reboot'", "`reboot`"),
    ("echo halt | at now + 1 minute", "`halt`"),
    (
        "sudo env X=1 nice -n 5 timeout 10 nohup shutdown",
        "`shutdown`",
    ),
    (
        "nice -n 5 ionice -c3 stdbuf -oL setsid chroot / busybox halt",
        "`halt`",
    ),
    ("su -c 'reboot' root", "`reboot`"),
    ("su - root -c halt", "`halt`"),
    ("runuser -u nobody -- poweroff", "`poweroff`"),
    ("flock /tmp/lock shutdown", "`shutdown`"),
    ("flock -w 5 /tmp/lock -c 'reboot'", "`reboot`"),
    ("strace -f -o log shutdown", "`shutdown`"),
    ("taskset -c 0 shutdown", "`shutdown`"),
    ("unshare -r reboot", "`reboot`"),
    ("systemd-run --unit=x reboot", "`reboot`"),
    ("script -qc 'halt' /dev/null", "`halt`"),
    ("trap 'shutdown' EXIT", "`shutdown`"),
    ("alias x='reboot'", "`reboot`"),
    // shells and eval running a string
    ("bash -c 'shutdown'", "`shutdown`"),
    ("sh -c \"reboot\"", "`reboot`"),
    ("zsh -c halt", "`halt`"),
    ("dash -c poweroff", "`poweroff`"),
    ("ksh -c shutdown", "`shutdown`"),
    ("fish -c reboot", "`reboot`"),
    ("fish --command='halt'", "`halt`"),
    ("bash -ec 'ls; shutdown'", "`shutdown`"),
    ("bash -o pipefail -c shutdown", "`shutdown`"),
    ("bash --norc -c reboot", "`reboot`"),
    ("/bin/bash -c 'ls && halt'", "`halt`"),
    ("env bash -c shutdown", "`shutdown`"),
    ("sudo sh -c 'reboot'", "`reboot`"),
    ("eval shutdown", "`shutdown`"),
    ("eval 'reboot -f'", "`reboot`"),
    ("eval \"ls; halt\"", "`halt`"),
    ("bash -c 'bash -c \"sh -c shutdown\"'", "`shutdown`"),
    ("bash -c \"eval 'reboot'\"", "`reboot`"),
    ("bash -c ':(){ :|:& };:'", "fork bomb"),
    // find
    ("find . -exec shutdown \\;", "`shutdown`"),
    ("find / -name x -execdir reboot {} +", "`reboot`"),
    ("find . -ok halt ';'", "`halt`"),
    ("find . -exec sh -c 'shutdown' \\;", "`shutdown`"),
    (
        "find . -name '*.rs' -exec cat {} \\; -exec reboot \\;",
        "`reboot`",
    ),
    // heredocs, here-strings and pipes into a shell
    ("bash <<EOF\nshutdown\nEOF", "`shutdown`"),
    ("sh <<'EOF'\nreboot\nEOF", "`reboot`"),
    ("bash <<-EOF\n\thalt\n\tEOF", "`halt`"),
    ("bash -s <<EOF\nls\nshutdown\nEOF", "`shutdown`"),
    ("sudo bash <<EOF\nshutdown\nEOF", "`shutdown`"),
    ("{ sh; } <<EOF\nreboot\nEOF", "`reboot`"),
    ("sh <<< 'reboot'", "`reboot`"),
    ("bash <<< \"shutdown -h now\"", "`shutdown`"),
    ("cat <<EOF | sh\nreboot\nEOF", "`reboot`"),
    ("cat <<< shutdown | bash", "`shutdown`"),
    (". /dev/stdin <<< 'reboot'", "`reboot`"),
    ("bash /dev/stdin <<< halt", "`halt`"),
    ("sh -c -- 'shutdown'", "`shutdown`"),
    ("echo -e 'ls\\nreboot' | sh", "`reboot`"),
    ("x=$(cat <<EOF\n$(reboot)\nEOF\n)", "`reboot`"),
    ("echo shutdown | sh", "`shutdown`"),
    ("echo 'ls; reboot' | bash", "`reboot`"),
    ("printf 'halt\\n' | sh", "`halt`"),
    ("printf '%s\\n' reboot | bash", "`reboot`"),
    ("cat <<EOF\n$(shutdown)\nEOF", "`shutdown`"),
    // mkfs*
    ("mkfs /dev/sdb", "`mkfs`"),
    ("mkfs.ext4 /dev/sdb1", "(matches `mkfs*`)"),
    ("/sbin/mkfs.xfs -f /dev/vdb", "`mkfs.xfs`"),
    // fork bombs
    (":(){ :|:& };:", "fork bomb"),
    ("bomb(){ bomb|bomb& }; bomb", "fork bomb"),
    ("f(){ f & }; f", "fork bomb"),
    ("f() { f | f; }; f", "fork bomb"),
    ("f(){ (f) }; f", "fork bomb"),
    ("a(){ b|b& }; b(){ a|a& }; a", "fork bomb"),
    // writes to block devices
    (
        "dd if=/dev/zero of=/dev/sda",
        "dd writes to the block device /dev/sda",
    ),
    ("dd if=x.img of=/dev/nvme0n1 bs=4M", "/dev/nvme0n1"),
    ("dd of=/dev/mmcblk0", "/dev/mmcblk0"),
    ("dd of=/dev/disk/by-id/usb-x", "/dev/disk/by-id/usb-x"),
    ("dd of=/dev/mapper/root", "/dev/mapper/root"),
    ("dd of=/dev/dm-0", "/dev/dm-0"),
    ("dd of=/dev/loop0", "/dev/loop0"),
    ("dd of=/dev/xvda", "/dev/xvda"),
    ("dd of=/dev/hda", "/dev/hda"),
    ("dd of=/dev/vda1", "/dev/vda1"),
    ("sudo dd if=img of=/dev/sdb status=progress", "/dev/sdb"),
    ("dd 'of=/dev/sda'", "/dev/sda"),
    ("dd of=/dev/./sda", "/dev/sda"),
    ("dd of=//dev//sda", "/dev/sda"),
    ("dd of=/tmp/../dev/sda", "/dev/sda"),
    (
        "cat disk.img > /dev/sda",
        "redirects output to the block device /dev/sda",
    ),
    ("echo x >> /dev/sdb", "/dev/sdb"),
    ("cat x &> /dev/nvme0n1", "/dev/nvme0n1"),
    (
        "tee /dev/sda < img",
        "tee writes to the block device /dev/sda",
    ),
    // tree-sitter-bash glues the line after a 3-stage pipeline onto it when
    // that line has `&&` or `||`; bash ends a command at the newline.
    ("ls | ls | ls\nshutdown && true", "`shutdown`"),
    ("a | b | c\nX=1 sudo reboot || true", "`reboot`"),
    ("a | b | c\n\n  halt && true", "`halt`"),
    ("ls | ls | ls\n{ shutdown > /dev/null; }", "`shutdown`"),
    (
        "a | b | c\nif true; then reboot; fi > log && true",
        "`reboot`",
    ),
    // a denial wins over parts that cannot be analysed
    ("$X; shutdown", "`shutdown`"),
    ("shutdown\necho $(", "`shutdown`"),
    // bash reads `$((` as arithmetic, then falls back to a subshell; tree-sitter
    // reports a syntax error but still sees the command.
    ("echo $((ls); shutdown)", "`shutdown`"),
];

/// Scripts the standard policy must allow, with the commands it reports.
const ALLOWED: &[(&str, &[&str])] = &[
    ("", &[]),
    ("  \n\t ", &[]),
    ("# shutdown", &[]),
    ("echo shutdown", &["echo"]),
    ("systemctl status nginx", &["systemctl"]),
    ("grep reboot log.txt", &["grep"]),
    ("git commit -m \"halt\"", &["git"]),
    ("man poweroff", &["man"]),
    ("cat <<EOF\nshutdown now\nEOF", &["cat"]),
    ("cat <<'EOF' > notes.md\nreboot\nEOF", &["cat"]),
    ("dd if=/dev/zero of=out.img bs=1M count=1", &["dd"]),
    ("dd if=/dev/sda of=/dev/null", &["dd"]),
    ("ls && cargo build | tee log", &["ls", "cargo", "tee"]),
    ("echo x > /dev/null 2>&1", &["echo"]),
    ("echo x >&2", &["echo"]),
    ("rebooted --help; shutdownd", &["rebooted", "shutdownd"]),
    ("sudo apt-get install -y jq", &["sudo", "apt-get"]),
    ("command -v shutdown", &["command"]),
    ("find . -name shutdown", &["find"]),
    ("find . -name '*.rs' -exec wc -l {} +", &["find", "wc"]),
    ("xargs -n1 echo", &["xargs", "echo"]),
    ("bash script.sh", &["bash"]),
    ("bash -c 'echo hi'", &["bash", "echo"]),
    ("timeout 5 cargo test", &["timeout", "cargo"]),
    ("env RUST_LOG=debug cargo run", &["env", "cargo"]),
    ("echo ls | sh", &["echo", "sh", "ls"]),
    ("cat install.sh | sh", &["cat", "sh"]),
    ("sh < script.sh", &["sh"]),
    ("\"$HOME\"/bin/tool --flag", &["tool"]),
    ("echo {a,b} $(date)", &["echo", "date"]),
    ("alias ll='ls -l'", &["alias", "ls"]),
    ("trap - EXIT", &["trap"]),
    ("bash -c 'echo hi' shutdown", &["bash", "echo"]),
    ("at -f job.sh now", &["at"]),
    // Runs f twice; the function itself does not fork copies of itself.
    ("function f { :; }; f | f &", &[":", "f", "f"]),
    // `env X=1 {` runs a program named `{` with the argument `shutdown`.
    ("env X=1 { shutdown; }", &["env", "{", "}"]),
    // Sequential recursion is not a fork bomb (see `fork_bomb`).
    ("f(){ f; }; f", &["f", "f"]),
    (
        "walk(){ for d in \"$1\"/*; do walk \"$d\"; done; }; walk .",
        &["walk", "walk"],
    ),
];

/// Scripts that cannot be analysed, with a piece of the expected reason.
const UNANALYSABLE: &[(&str, &str)] = &[
    ("echo $(", "syntax error"),
    ("if then fi", "syntax error"),
    ("echo \"unterminated", "syntax error"),
    // tree-sitter cannot parse this brace expansion in command position.
    ("{shutdown,now}", "syntax error"),
    ("{r..r}eboot", "syntax error"),
    ("$X", "`$X`"),
    ("$(echo rm) -rf /", "`$(echo rm)`"),
    ("${CMD:-ls} -l", "only known at run time"),
    ("\"$X\" arg", "only known at run time"),
    ("$HOME/bin/tool", "only known at run time"),
    ("shut*", "`shut*`"),
    ("/sbin/shut?own", "only known at run time"),
    ("sudo $CMD", "only known at run time"),
    ("bash -c \"$X\"", "runs a script only known at run time"),
    ("eval \"$CMD\"", "runs a script only known at run time"),
    (
        "fish --command=\"$CMD\"",
        "runs a script only known at run time",
    ),
    ("env -S \"$ARGS\"", "only known at run time"),
    (
        "sh -c \"$(curl -s x)\"",
        "runs a script only known at run time",
    ),
    (
        "curl -s https://example.com/x | sh",
        "read from the output of `curl",
    ),
    ("bash <(curl -s x)", "generated at run time"),
    ("source <(curl -s x)", "generated at run time"),
    ("sh < <(curl x)", "only known at run time"),
    ("bash <<EOF\n$CMD\nEOF", "a heredoc with expansions"),
    ("sh <<< \"$X\"", "here-string"),
    (
        "cmd=(shutdown -h now); \"${cmd[@]}\"",
        "only known at run time",
    ),
    (
        "eval \"$(ssh-agent -s)\"",
        "runs a script only known at run time",
    ),
    ("printf '%d\\n' 5 | sh", "only known at run time"),
    ("find . -exec {} \\;", "`{}`"),
    ("ls | xargs -I{} {}", "`{}`"),
    ("echo x | xargs sudo", "from its input"),
    ("echo x | xargs sh -c", "from its input"),
    (
        "D=/dev/sda; dd if=/dev/zero of=$D",
        "writes to a file only known at run time",
    ),
];

fn denied_reason(verdict: &CommandVerdict) -> Option<&str> {
    match verdict {
        CommandVerdict::Denied { reason, .. } => Some(reason),
        _ => None,
    }
}

#[test]
fn standard_policy_denies_every_hidden_command() {
    let policy = CommandPolicy::standard();
    let failures: Vec<String> = DENIED
        .iter()
        .filter_map(|(script, expected)| {
            let verdict = policy.check(script);
            let ok = denied_reason(&verdict).is_some_and(|r| r.contains(expected));
            (!ok).then(|| format!("{script:?} -> {verdict:?} (wanted a denial with {expected:?})"))
        })
        .collect();
    assert_eq!(failures, Vec::<String>::new());
}

#[test]
fn standard_policy_allows_harmless_scripts() {
    let policy = CommandPolicy::standard();
    let failures: Vec<String> = ALLOWED
        .iter()
        .filter_map(|(script, commands)| {
            let verdict = policy.check(script);
            let expected = CommandVerdict::Allowed {
                commands: commands.iter().map(|c| c.to_string()).collect(),
            };
            (verdict != expected).then(|| format!("{script:?} -> {verdict:?}, wanted {expected:?}"))
        })
        .collect();
    assert_eq!(failures, Vec::<String>::new());
}

#[test]
fn scripts_that_cannot_be_analysed_say_why() {
    let policy = CommandPolicy::standard();
    let failures: Vec<String> = UNANALYSABLE
        .iter()
        .filter_map(|(script, expected)| {
            let verdict = policy.check(script);
            let ok = matches!(&verdict, CommandVerdict::Unanalysable { reason } if reason.contains(expected));
            (!ok).then(|| format!("{script:?} -> {verdict:?} (wanted Unanalysable with {expected:?})"))
        })
        .collect();
    assert_eq!(failures, Vec::<String>::new());
}

#[test]
fn denial_names_the_command_and_the_rule() {
    let policy = CommandPolicy::standard();
    let cases = [
        (
            "ls && sudo shutdown -h now",
            "shutdown -h now",
            "`shutdown` is a denied command",
        ),
        (
            "mkfs.ext4 /dev/sdb1",
            "mkfs.ext4 /dev/sdb1",
            "`mkfs.ext4` is a denied command (matches `mkfs*`)",
        ),
        (
            "dd if=/dev/zero of=/dev/sda",
            "dd if=/dev/zero of=/dev/sda",
            "dd writes to the block device /dev/sda",
        ),
        (
            ":(){ :|:& };:",
            ":(){ :|:& }",
            "fork bomb: function `:` starts copies of itself in new processes",
        ),
    ];
    for (script, command, reason) in cases {
        let expected = CommandVerdict::Denied {
            command: command.to_string(),
            reason: reason.to_string(),
        };
        assert_eq!(policy.check(script), expected, "{script}");
    }
}

#[test]
fn extract_commands_reports_every_layer() {
    let commands = extract_commands("X=1 sudo -u root /sbin/shutdown -h 'now'; $CMD x");
    let command = |name: &str, args: &[&str], text: &str, dynamic_name| SimpleCommand {
        name: name.to_string(),
        program: text.split(' ').next().unwrap_or_default().to_string(),
        args: args.iter().map(|a| a.to_string()).collect(),
        text: text.to_string(),
        dynamic_name,
    };
    let expected = vec![
        command(
            "sudo",
            &["-u", "root", "/sbin/shutdown", "-h", "now"],
            "sudo -u root /sbin/shutdown -h now",
            false,
        ),
        command("shutdown", &["-h", "now"], "/sbin/shutdown -h now", false),
        command("$CMD", &["x"], "$CMD x", true),
    ];
    assert_eq!(commands, Ok(expected));
}

#[test]
fn extract_commands_fails_on_syntax_errors() {
    let Err(reason) = extract_commands("echo $(") else {
        panic!("a syntax error must be an error");
    };
    assert!(reason.contains("line 1, column 6"), "{reason}");
    assert_eq!(extract_commands(""), Ok(Vec::new()));
}

#[test]
fn deny_patterns_match_single_commands_not_the_script() {
    let patterns = [
        r"^rm -rf /$".to_string(),
        r"^git push .*--force".to_string(),
    ];
    let Ok(policy) = CommandPolicy::new(&[], &patterns, ParseFallback::Deny) else {
        panic!("valid patterns");
    };
    for script in [
        "rm -rf /",
        "/bin/rm   -rf   /",
        "sudo rm -rf '/'",
        "git push origin main --force",
    ] {
        let reason = denied_reason(&policy.check(script)).map(str::to_string);
        assert!(
            reason.is_some_and(|r| r.starts_with("matches the denied pattern `")),
            "{script}"
        );
    }
    for script in [
        "echo 'rm -rf /'",
        "rm -rf /tmp/x",
        "git push origin main",
        "ls; rm -rf x /",
    ] {
        assert!(
            matches!(policy.check(script), CommandVerdict::Allowed { .. }),
            "{script}"
        );
    }
}

#[test]
fn extending_the_defaults() {
    let Ok(policy) = CommandPolicy::standard()
        .deny_binary("curl")
        .and_then(|p| p.deny_binary("sudo"))
        .and_then(|p| p.deny_pattern("--no-verify"))
    else {
        panic!("valid additions");
    };
    for script in ["curl -s x", "sudo ls", "shutdown", "git commit --no-verify"] {
        assert!(denied_reason(&policy.check(script)).is_some(), "{script}");
    }
    assert_eq!(
        policy.check("wget x"),
        CommandVerdict::Allowed {
            commands: vec!["wget".to_string()]
        }
    );
}

#[test]
fn invalid_entries_are_rejected_with_a_clear_message() {
    let glob = CommandPolicy::new(&["[".to_string()], &[], ParseFallback::Deny);
    let Err(error) = glob else {
        panic!("`[` is not a valid glob")
    };
    assert!(matches!(error, CommandPolicyError::InvalidGlob { .. }));
    assert!(
        error
            .to_string()
            .contains("invalid deny_binaries entry `[`"),
        "{error}"
    );

    let Err(error) = CommandPolicy::standard().deny_binary("/sbin/shutdown") else {
        panic!("a path is not a base name");
    };
    assert!(error.to_string().contains("base name"), "{error}");

    let Err(error) = CommandPolicy::standard().deny_pattern("(unclosed") else {
        panic!("`(unclosed` is not a valid regex");
    };
    assert!(matches!(error, CommandPolicyError::InvalidRegex { .. }));
    assert!(
        error
            .to_string()
            .contains("invalid deny_patterns entry `(unclosed`"),
        "{error}"
    );
    assert!(CommandPolicy::standard().deny_pattern("").is_err());
}

#[test]
fn defaults_and_fallback() {
    let policy = CommandPolicy::default();
    assert!(
        policy.binary_matcher.is_some(),
        "the default deny list must compile"
    );
    assert_eq!(policy.parse_fallback(), ParseFallback::Sandbox);
    let policy = policy.with_parse_fallback(ParseFallback::Deny);
    assert_eq!(policy.parse_fallback(), ParseFallback::Deny);
}

#[test]
fn structural_rules_apply_to_custom_policies_too() {
    let Ok(policy) = CommandPolicy::new(&[], &[], ParseFallback::Sandbox) else {
        panic!("an empty policy is valid");
    };
    assert!(denied_reason(&policy.check(":(){ :|:& };:")).is_some());
    assert!(denied_reason(&policy.check("dd if=/dev/zero of=/dev/sda")).is_some());
    assert!(matches!(
        policy.check("shutdown"),
        CommandVerdict::Allowed { .. }
    ));
}

/// `sh <<E1` / `sh <<E2` / ... nested `levels` deep around `inner`.
fn nested_heredocs(levels: usize, inner: &str) -> String {
    let mut script = inner.to_string();
    for level in 0..levels {
        script = format!("sh <<E{level}\n{script}\nE{level}");
    }
    script
}

#[test]
fn nested_scripts_are_followed_up_to_the_depth_limit() {
    let policy = CommandPolicy::standard();
    let within = nested_heredocs(parse::MAX_SCRIPT_DEPTH, "shutdown");
    assert!(denied_reason(&policy.check(&within)).is_some());
    let beyond = nested_heredocs(parse::MAX_SCRIPT_DEPTH + 1, "ls");
    let verdict = policy.check(&beyond);
    assert!(
        matches!(&verdict, CommandVerdict::Unanalysable { reason } if reason.contains("levels deep")),
        "{verdict:?}"
    );
}

#[test]
fn deep_syntax_trees_do_not_overflow_the_stack() {
    let policy = CommandPolicy::standard();
    let deep = format!("echo {}x{}", "$(echo ".repeat(5000), ")".repeat(5000));
    assert!(matches!(
        policy.check(&deep),
        CommandVerdict::Unanalysable { .. }
    ));
    let braces = format!("echo {}", "{a,".repeat(3000));
    let _ = policy.check(&braces);
    let long_chain = vec!["ls"; 5000].join(" && ");
    let CommandVerdict::Allowed { commands } = policy.check(&long_chain) else {
        panic!("a long && chain is fine");
    };
    assert_eq!(commands.len(), 5000);
}

#[test]
fn huge_scripts_are_not_analysed() {
    let huge = format!("{}\nshutdown", " ".repeat(1 << 20));
    let verdict = CommandPolicy::standard().check(&huge);
    assert!(
        matches!(&verdict, CommandVerdict::Unanalysable { reason } if reason.contains("too large")),
        "{verdict:?}"
    );
}

#[test]
fn brace_expansion_is_bounded() {
    let policy = CommandPolicy::standard();
    let verdict = policy.check("{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}");
    assert!(
        matches!(verdict, CommandVerdict::Unanalysable { .. }),
        "{verdict:?}"
    );
    assert!(matches!(
        policy.check("echo {1..100000000}"),
        CommandVerdict::Allowed { .. }
    ));
}

const SAFE: &[&str] = &[
    "ls",
    "echo hi",
    "cat f",
    "git status",
    "cargo build",
    "grep -r x .",
    "true",
    "pwd",
];
const DENIED_NAMES: &[&str] = &["shutdown", "reboot", "halt", "poweroff", "mkfs.ext4"];
const SEPARATORS: &[&str] = &["; ", " && ", " || ", " | ", "\n"];

/// Wraps one command (or, for `STRUCTURAL` ways, a list) so that it still runs.
fn wrap(command: &str, how: usize) -> String {
    match how {
        0 => command.to_string(),
        1 => format!("$( {command} )"),
        2 => format!("( {command} )"),
        3 => format!("{{ {command}; }}"),
        4 => format!("if true; then {command}; fi"),
        5 => format!("bash -c \"{}\"", escape_double_quoted(command)),
        6 => format!("f() {{ {command}; }}; f"),
        7 => format!("for i in 1; do {command}; done"),
        8 => format!("eval '{}'", command.replace('\'', "'\\''")),
        9 => format!("env X=1 {command}"),
        10 => format!("/usr/sbin/{command}"),
        11 => format!("sudo -u root {command}"),
        12 => format!("timeout 5 {command}"),
        13 => format!("{command} > /dev/null 2>&1"),
        14 => format!("! {command}"),
        _ => format!("{{ {command} & }}"),
    }
}

/// Ways of `wrap` that apply to a whole list of commands.
const STRUCTURAL: usize = 9;
const WAYS: usize = 16;

fn escape_double_quoted(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if matches!(c, '\\' | '"' | '$' | '`') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

proptest! {
    #[test]
    fn a_denied_command_is_found_wherever_it_is(
        safe in prop::collection::vec((0..SAFE.len(), 0..WAYS), 0..6),
        denied in (0..DENIED_NAMES.len(), 0..WAYS, prop::collection::vec(0..STRUCTURAL, 0..2)),
        position in any::<prop::sample::Index>(),
        separators in prop::collection::vec(0..SEPARATORS.len(), 6),
        outer in prop::collection::vec(0..STRUCTURAL, 0..3),
    ) {
        let mut commands: Vec<String> = safe.iter().map(|&(c, how)| wrap(SAFE[c], how)).collect();
        let at = position.index(commands.len() + 1);
        let hidden = wrap(DENIED_NAMES[denied.0], denied.1);
        let hidden = denied.2.iter().fold(hidden, |c, &how| wrap(&c, how));
        commands.insert(at, hidden);
        let mut script = String::new();
        for (i, command) in commands.iter().enumerate() {
            if i > 0 {
                script.push_str(SEPARATORS[separators[i - 1]]);
            }
            script.push_str(command);
        }
        // Wrap the whole script too, in the ways that apply to a list of commands.
        let script = outer.iter().fold(script, |s, &how| wrap(&s, how));
        let verdict = CommandPolicy::standard().check(&script);
        prop_assert!(denied_reason(&verdict).is_some(), "{:?} -> {:?}", script, verdict);
    }

    #[test]
    fn harmless_commands_are_never_denied(
        safe in prop::collection::vec((0..SAFE.len(), 0..WAYS), 1..8),
        separators in prop::collection::vec(0..SEPARATORS.len(), 8),
        outer in prop::collection::vec(0..STRUCTURAL, 0..3),
    ) {
        // Way 6 defines `f` again at each level, which the name-based fork
        // bomb rule would read as recursion.
        let ways = |how: usize| if how == 6 { 0 } else { how };
        let mut script = String::new();
        for (i, &(c, how)) in safe.iter().enumerate() {
            if i > 0 {
                script.push_str(SEPARATORS[separators[i - 1]]);
            }
            script.push_str(&wrap(SAFE[c], ways(how)));
        }
        let script = outer.iter().fold(script, |s, &how| wrap(&s, ways(how)));
        let verdict = CommandPolicy::standard().check(&script);
        prop_assert!(denied_reason(&verdict).is_none(), "{:?} -> {:?}", script, verdict);
    }

    #[test]
    fn check_never_panics(script in any::<String>()) {
        let _ = CommandPolicy::standard().check(&script);
    }

    #[test]
    fn check_never_panics_on_shell_like_text(script in "[a-z0-9.é€😀􏿿 $(){};|&'\"\\\\<>\n`#=*?,.!-]{0,200}") {
        let _ = CommandPolicy::standard().check(&script);
        let _ = extract_commands(&script);
    }
}

#[test]
fn characters_beyond_latin1_after_a_brace_do_not_crash_the_parser() {
    // tree-sitter-bash's scanner passes the character after `{` (and after
    // `{1.`) to C `isdigit`; a code point far above 255 read outside its
    // table and killed the process.
    let policy = CommandPolicy::standard();
    for script in [
        "echo {\u{10FFFF}",
        "echo {12\u{10FFFF}",
        "echo {1.\u{10FFFF}",
        "echo {1..2\u{10FFFF}",
        "{\u{1F600}} && shutdown",
        "echo {\u{e9}{\u{10FFFF}",
    ] {
        let _ = policy.check(script);
    }
    assert!(denied_reason(&policy.check("echo {\u{10FFFF}; shutdown")).is_some());
    let CommandVerdict::Allowed { commands } = policy.check("echo {\u{1F600}x}") else {
        panic!("a brace word with an emoji is an ordinary argument");
    };
    assert_eq!(commands, ["echo"]);
}

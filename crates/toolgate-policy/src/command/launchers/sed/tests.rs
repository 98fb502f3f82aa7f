//! sed scripts read as GNU sed reads them, and the verdicts on them.

use super::{Problem, Reader};
use crate::command::{CommandPolicy, CommandVerdict};

fn read(script: &str) -> Result<(), Problem> {
    Reader::new(script).program()
}

#[test]
fn scripts_are_read_as_sed_reads_them() {
    let harmless = [
        "s/foo/bar/g",
        "1,5p",
        "s|a|b|",
        "/^#/d",
        "s/e/E/g",
        "s/a/b/;s/c/d/",
        "s/a/b/ ; p",
        "s/x/y/2g",
        "s/x/y/w out.txt",
        "s/x/y/w e.txt;e",
        "s/[/]/x/",
        "s/[]/e]/x/",
        "s/[[:alpha:]/]/x/",
        "s/a\\/e/b/",
        "s/a/b\\/e/",
        "s/\\n/ /g",
        "s,a,b\\\nc,",
        "y/abc/xyz/",
        "y/a\\/b/xyz/",
        "1a text; e date",
        "1a\\\ntext\\\ne date",
        "$a\\",
        "1i\\  indented",
        "/x/c replaced",
        ":a;N;$!ba;s/\\n/ /g",
        ":top\n/x/b top",
        "b end; p; :end",
        "t",
        "/x/{s/a/b/;p}",
        "/x/ { p } ; d",
        "1!d",
        "1 , 3 ! p",
        "0,/re/d",
        "1~2d",
        "2,+3d",
        "2,~4d",
        "/a/I,/b/M p",
        "\\%x%d",
        "\\,a\\,b,d",
        "# comment with e\np",
        "p # e trailing",
        "q5",
        "l 40",
        "Q",
        "r e.txt",
        "w /dev/stdout",
        "=",
        "v 4.2",
        "F;z;x;h;H;g;G;n;N;D;P",
        "s/ä/ae/g",
        "s/“/\"/g",
        "s/\\cA/x/",
        "",
        "1{",
    ];
    for script in harmless {
        assert_eq!(read(script), Ok(()), "{script:?}");
    }
    let runs = [
        ("1e date", "`e` command"),
        ("e", "`e` command"),
        ("e date", "`e` command"),
        ("s/e/E/e", "`e` flag"),
        ("s/x/date/ge", "`e` flag"),
        ("s/x/y/ e", "`e` flag"),
        ("s|x|y|pe;p", "`e` flag"),
        ("/x/e cmd", "`e` command"),
        ("/x/ !e cmd", "`e` command"),
        ("1,3e cmd", "`e` command"),
        ("p;e cmd", "`e` command"),
        ("p\ne cmd", "`e` command"),
        ("1{e cmd\n}", "`e` command"),
        ("/x/{p;s/a/b/e}", "`e` flag"),
        ("b x;e cmd", "`e` command"),
        ("b x e cmd", "`e` command"),
        ("1a text\ne cmd", "`e` command"),
        ("1a text\\\\\ne cmd", "`e` command"),
        ("s/[/]/x/e", "`e` flag"),
        ("y/a/b/;e cmd", "`e` command"),
        ("# c\ne cmd", "`e` command"),
        ("r file\ne cmd", "`e` command"),
        ("s/x/y/w f\ne cmd", "`e` command"),
        ("q;e cmd", "`e` command"),
        ("1~2e cmd", "`e` command"),
        ("$e cmd", "`e` command"),
        ("/a/I e cmd", "`e` command"),
        ("\\%a%e cmd", "`e` command"),
    ];
    for (script, what) in runs {
        match read(script) {
            Err(Problem::Runs(found)) => assert!(found.contains(what), "{script:?}: {found}"),
            other => panic!("{script:?}: {other:?}"),
        }
    }
    let unreadable = [
        "s/a/b",
        "s/a/b/x",
        "s/a\nb/c/",
        "y/abc/xy",
        "k",
        "1",
        "p x",
        "}",
        "1}",
        "1:a",
        ":",
        "1!!d",
        "s/[a/b/",
        "sé/x/",
        // Versions and locales that read these differently.
        "s/\\c/x/e",
        "s/\\c\\/x/",
        "s/x/中\\/;e cmd;/",
        "1a é\\\ne cmd",
        "b x#\ne cmd",
        "b x\x0be cmd",
        "s|é|e|",
    ];
    for script in unreadable {
        assert!(
            matches!(read(script), Err(Problem::Unreadable(_))),
            "{script:?}: {:?}",
            read(script)
        );
    }
}

/// What the real GNU sed makes of `script` with `--sandbox`, which
/// refuses e, r and w as it compiles them: `Some(true)` if it found one,
/// `Some(false)` if it compiled the script, `None` for another error.
fn gnu_sed_finds_e(script: &str) -> Option<bool> {
    let output = std::process::Command::new("sed")
        .args(["--sandbox", "-n", "-e", script])
        .stdin(std::process::Stdio::null())
        .output()
        .ok()?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    match (output.status.success(), stderr.contains("sandbox mode")) {
        (_, true) => Some(true),
        (true, false) => Some(false),
        (false, false) => None,
    }
}

/// Pieces of sed syntax and single characters that matter to it, and
/// no `r`, `w`, `R` or `W`, so that what `--sandbox` refuses is an `e`.
const PIECES: &[&str] = &[
    "s/a/b/",
    "s|x|y|",
    "s/[/]/x/",
    "y/ab/cd/",
    "e",
    "e x",
    "1",
    "$",
    "/x/",
    "\\%x%",
    "0,/x/",
    "1~2",
    "{",
    "}",
    ";",
    "\n",
    "a x",
    "a\\",
    "i\\\n",
    "c",
    ":l",
    "b l",
    "t",
    "T",
    "p",
    "g",
    "q",
    "l 5",
    "=",
    "v",
    "#",
    " ",
    "\t",
    "!",
    ",",
    "+1",
    "I",
    "M",
    "s",
    "/",
    "|",
    "\\",
    "[",
    "]",
    "[:alpha:]",
    "[.",
    ".]",
    "\\c",
    "\\n",
    "x",
    "é",
    "中",
    "2",
    "&",
    "\r",
];

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1000))]

    /// Differential: whatever this reader lets through, the real sed
    /// (the one on PATH) compiles without an `e`; what it says runs a
    /// command, sed finds an `e` in too.
    #[test]
    fn the_reader_agrees_with_gnu_sed(
        picks in proptest::collection::vec(0..PIECES.len(), 1..12),
    ) {
        let script: String = picks.iter().map(|&i| PIECES[i]).collect();
        let ours = read(&script);
        let theirs = gnu_sed_finds_e(&script);
        match ours {
            Ok(()) => proptest::prop_assert_ne!(theirs, Some(true), "{:?}", script),
            // sed may stop at another error first (`+1e`).
            Err(Problem::Runs(_)) => proptest::prop_assert_ne!(theirs, Some(false), "{:?}", script),
            Err(Problem::Unreadable(_)) => {}
        }
    }
}

#[test]
fn gnu_sed_is_here_to_compare_with() {
    assert_eq!(
        gnu_sed_finds_e("1e date"),
        Some(true),
        "GNU sed is needed on PATH"
    );
    assert_eq!(gnu_sed_finds_e("s/a/b/g"), Some(false));
}

fn policy() -> Result<CommandPolicy, String> {
    crate::command::launchers::test_support::allowing(&["sed", "cat"])
}

#[test]
fn sed_may_not_be_told_to_run_a_command() -> Result<(), String> {
    let policy = policy()?;
    let refused = [
        ("sed 's/e/E/e' f", "`e` flag of `s` (`s/e/E/e`)"),
        ("sed '1e date' f", "an `e` command (`1e date`)"),
        ("sed -n -e p -e '1e date' f", "`e` command"),
        ("sed --expression='1e date' f", "`e` command"),
        ("sed --expr '1e date' f", "`e` command"),
        ("sed -ne '1e date' f", "`e` command"),
        ("sed -e'1e date' f", "`e` command"),
        ("sed -i 's/x/y/e' f", "`e` flag"),
        ("sed -E -s -z -u --posix 's/x/y/e' f", "`e` flag"),
        ("sed f -e '1e date'", "`e` command"),
        ("sed -e 'a\\' -e 'x' -e '1e date' f", "`e` command"),
        // Compiled before `--sandbox` is seen.
        ("sed -e '1e date' --sandbox f", "`e` command"),
        // With POSIXLY_CORRECT the first operand is the script.
        ("sed '1e date' -e p f", "`e` command"),
        ("POSIXLY_CORRECT=1 sed '1e date' --sandbox f", "`e` command"),
        (
            "sed -f prog.sed f",
            "`-f prog.sed` makes sed run a script from a file",
        ),
        ("sed --file=prog.sed f", "`--file=prog.sed`"),
        ("sed -nf prog.sed f", "`-nf prog.sed`"),
        ("sed -f prog.sed --sandbox f", "`-f prog.sed`"),
        (
            "sed \"$script\" f",
            "`\"$script\"` is only known at run time",
        ),
        ("sed -e \"$s\" f", "is only known at run time"),
        ("sed -i \"s/$old/$new/g\" f", "is only known at run time"),
        (
            "sed 's/a/b/' \"$f\"",
            "`\"$f\"` is only known at run time and could be an option",
        ),
        ("sed 's/a/b/' $f", "`$f` is only known at run time"),
        ("sed 's/a/b/' *.txt", "`*.txt` is only known at run time"),
        ("sed -n\"$x\" p f", "`-n\"$x\"` is only known at run time"),
        ("sed 's/a/b' f", "could not be read (an unterminated `s`)"),
        ("sed -Q p f", "`-Q`, which is not a GNU sed option"),
        ("sed --s p f", "`--s` is not a GNU sed option"),
    ];
    for (script, why) in refused {
        match policy.check(script) {
            CommandVerdict::Denied { reason, .. } => {
                assert!(reason.contains(why), "{script}: {reason}");
            }
            other => return Err(format!("{script}: {other:?}")),
        }
    }
    Ok(())
}

#[test]
fn everyday_sed_still_runs() -> Result<(), String> {
    let policy = policy()?;
    let allowed = [
        "sed 's/foo/bar/g' f",
        "sed -n '1,5p' f",
        "sed -i 's|a|b|' f",
        "sed -i.bak -e 's/a/b/' f",
        "sed -ie 's/a/b/' f",
        "sed '/^#/d' f",
        "sed -E 's/(a|b)+/x/g' f",
        "sed -n '/start/,/end/{/x/p}' f",
        "sed ':a;N;$!ba;s/\\n/ /g' f",
        "sed '$a\\\nlast line' f",
        "sed -e '1i header' -e '$a footer' f",
        "sed -e '1{' -e 'p' -e '}' f",
        "sed --in-place=.orig -e 's/a/b/' f",
        "sed 's/a/b/' -- \"$f\"",
        "sed 's/a/b/' src/*.rs",
        "sed -n 's/x/y/w out.txt' f",
        "sed --sandbox '1e date' f",
        "sed --sandbox -f prog.sed f",
        "sed --sandbox -e \"$s\" \"$f\"",
        "sed -s -n -z -u --debug --follow-symlinks -l 80 p f",
        "sed --version",
        "cat f | sed 's/a/b/'",
    ];
    crate::command::launchers::test_support::expect_allowed(&policy, &allowed);
    // Without an allowlist sed is the sandbox's business.
    assert!(matches!(
        CommandPolicy::standard().check("sed '1e date' f"),
        CommandVerdict::Allowed { .. }
    ));
    Ok(())
}

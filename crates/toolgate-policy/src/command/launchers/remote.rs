//! Programs that reach other hosts through a program an option names, or
//! run one for the data: tar (`--to-command`, `-I`, `--checkpoint-action=
//! exec=`, `-F`, `--rsh-command`, an archive `host:file`), rsync (`-e`,
//! `--rsync-path`, `--daemon`, a path `host:path`) and ssh, scp and sftp
//! (`-o ProxyCommand=…`, `-F CONFIG`, `-S`, `-D`, sftp's `-b`).
//!
//! What they reach on the other host is not a program started here; what
//! the host's own configuration makes them run (`/etc/ssh/ssh_config`) is
//! the sandbox's business.

use super::filters::names;
use super::getopt::{Arg, Order, Syntax, Value, literal_prefix};
use crate::command::words::Word;

const TAR: Syntax = Syntax {
    short_with_value: "bCfFgHIKLNTVX",
    short_optional_value: "",
    short_flags: "AcdrtuxGnSkUWOmpsMBiajJzZhPlRvwo",
    long_with_value: &[
        "add-file",
        "after-date",
        "blocking-factor",
        "checkpoint-action",
        "directory",
        "exclude",
        "exclude-from",
        "exclude-ignore",
        "exclude-ignore-recursive",
        "exclude-tag",
        "exclude-tag-all",
        "exclude-tag-under",
        "file",
        "files-from",
        "format",
        "group",
        "group-map",
        "hole-detection",
        "index-file",
        "info-script",
        "label",
        "level",
        "listed-incremental",
        "mode",
        "mtime",
        "new-volume-script",
        "newer",
        "newer-mtime",
        "no-quote-chars",
        "owner",
        "owner-map",
        "pax-option",
        "quote-chars",
        "quoting-style",
        "record-size",
        "rmt-command",
        "rsh-command",
        "sort",
        "sparse-version",
        "starting-file",
        "strip-components",
        "suffix",
        "tape-length",
        "to-command",
        "transform",
        "use-compress-program",
        "volno-file",
        "warning",
        "xattrs-exclude",
        "xattrs-include",
        "xform",
    ],
    long_optional_value: &[
        "atime-preserve",
        "backup",
        "checkpoint",
        "occurrence",
        "one-top-level",
        "totals",
    ],
    long_flags: &[
        "absolute-names",
        "append",
        "auto-compress",
        "bzip2",
        "create",
        "delete",
        "dereference",
        "diff",
        "exclude-vcs",
        "extract",
        "force-local",
        "gunzip",
        "gzip",
        "help",
        "ignore-zeros",
        "keep-old-files",
        "list",
        "lzip",
        "lzma",
        "lzop",
        "no-recursion",
        "null",
        "numeric-owner",
        "overwrite",
        "preserve-permissions",
        "remove-files",
        "same-owner",
        "to-stdout",
        "touch",
        "update",
        "verbose",
        "verify",
        "version",
        "xz",
        "zstd",
    ],
    order: Order::Permute,
};

/// Long options of tar that name a command, and what tar does with it.
const TAR_COMMANDS: &[(&str, &str)] = &[
    (
        "to-command",
        "pipes every extracted file to the command it names",
    ),
    (
        "use-compress-program",
        "names the program tar compresses or decompresses through",
    ),
    (
        "info-script",
        "names a script tar runs at the end of every volume",
    ),
    (
        "new-volume-script",
        "names a script tar runs at the end of every volume",
    ),
    (
        "rsh-command",
        "names the remote shell tar runs to reach a remote archive",
    ),
    (
        "rmt-command",
        "names the program tar runs on the archive's host",
    ),
];

/// The archive names a file on another host (`host:file`, `user@host:f`),
/// which tar reaches by running rsh: a colon with no slash before it.
fn remote_archive(name: &str) -> bool {
    name.find(':')
        .is_some_and(|colon| colon > 0 && !name[..colon].contains('/'))
}

/// `tar cvfI x.tar prog`: a first word without `-` holds option letters,
/// whose values are the next words in turn.
fn tar_words(args: &[Word]) -> Vec<Word> {
    let Some((Word::Literal(first), rest)) = args.split_first() else {
        return args.to_vec();
    };
    if first.starts_with('-') {
        return args.to_vec();
    }
    let mut rest = rest.iter();
    let mut words = Vec::new();
    for letter in first.chars() {
        words.push(Word::Literal(format!("-{letter}")));
        if TAR.short_with_value.contains(letter)
            && let Some(value) = rest.next()
        {
            words.push(value.clone());
        }
    }
    words.extend(rest.cloned());
    words
}

pub(super) fn tar(args: &[Word]) -> Option<String> {
    let words = tar_words(args);
    let scanned = TAR.scan(&words);
    let force_local = scanned.iter().any(|arg| {
        matches!(arg, Arg::Long { written, resolved, .. } if names(written, *resolved, "force-local"))
    });
    for arg in &scanned {
        let shown = arg.shown();
        let (command, value) = match arg {
            Arg::Unknown(word) => {
                return Some(super::unknown_option("tar", word, "--to-command=CMD"));
            }
            Arg::Short {
                letter: 'I', value, ..
            } => (Some("use-compress-program"), value),
            Arg::Short {
                letter: 'F', value, ..
            } => (Some("info-script"), value),
            Arg::Short {
                letter: 'f', value, ..
            } => (None, value),
            Arg::Long {
                written,
                resolved,
                value,
                ..
            } => {
                if let Some((name, _)) = TAR_COMMANDS
                    .iter()
                    .find(|(name, _)| names(written, *resolved, name))
                {
                    (Some(*name), value)
                } else if names(written, *resolved, "checkpoint-action") {
                    let exec = match value {
                        Some(Value::Text(action)) => action.starts_with("exec"),
                        Some(Value::RunTime(_)) => true,
                        _ => false,
                    };
                    if exec {
                        return Some(format!(
                            "`{shown}` makes tar run a command at every checkpoint (exec=)"
                        ));
                    }
                    continue;
                } else if names(written, *resolved, "file") {
                    (None, value)
                } else {
                    continue;
                }
            }
            _ => continue,
        };
        if let Some(name) = command {
            let why = TAR_COMMANDS
                .iter()
                .find(|(n, _)| *n == name)
                .map_or("names a command tar runs", |(_, why)| why);
            return Some(format!("`{shown}` {why}"));
        }
        // The archive: a remote one runs rsh, unless --force-local.
        let remote = match value {
            Some(Value::Text(archive)) => remote_archive(archive),
            Some(Value::RunTime(_)) => true,
            _ => false,
        };
        if remote && !force_local {
            return Some(format!(
                "`{shown}` may name an archive on another host (`host:file`), which tar reaches by running rsh or ssh; add `--force-local` to read it as a local file"
            ));
        }
    }
    None
}

const RSYNC: Syntax = Syntax {
    short_with_value: "efBTM@",
    short_optional_value: "",
    short_flags: "vqcarRbudLlkKHpEAXogDtUNOJmnWxCyzhiSPF0468s",
    long_with_value: &[
        "rsh",
        "rsync-path",
        "filter",
        "exclude",
        "include",
        "exclude-from",
        "include-from",
        "files-from",
        "block-size",
        "temp-dir",
        "remote-option",
        "modify-window",
        "backup-dir",
        "suffix",
        "chmod",
        "chown",
        "usermap",
        "groupmap",
        "max-delete",
        "max-size",
        "min-size",
        "max-alloc",
        "partial-dir",
        "compare-dest",
        "copy-dest",
        "link-dest",
        "compress-choice",
        "zc",
        "compress-level",
        "zl",
        "skip-compress",
        "checksum-choice",
        "cc",
        "out-format",
        "log-file",
        "log-file-format",
        "password-file",
        "early-input",
        "bwlimit",
        "stop-after",
        "stop-at",
        "write-batch",
        "only-write-batch",
        "read-batch",
        "protocol",
        "iconv",
        "checksum-seed",
        "timeout",
        "contimeout",
        "port",
        "sockopts",
        "outbuf",
        "config",
        "address",
        "info",
        "debug",
        "copy-as",
        "dparam",
    ],
    long_optional_value: &[],
    long_flags: &[
        "daemon",
        "archive",
        "verbose",
        "recursive",
        "dry-run",
        "delete",
        "delete-after",
        "delete-excluded",
        "progress",
        "partial",
        "compress",
        "checksum",
        "update",
        "links",
        "hard-links",
        "perms",
        "times",
        "owner",
        "group",
        "human-readable",
        "stats",
        "itemize-changes",
        "quiet",
        "mkpath",
        "relative",
        "existing",
        "ignore-existing",
        "numeric-ids",
        "one-file-system",
        "whole-file",
        "inplace",
        "sparse",
        "xattrs",
        "acls",
        "protect-args",
        "secluded-args",
        "list-only",
        "help",
        "version",
    ],
    order: Order::Permute,
};

/// An rsync path that names another host through a remote shell:
/// `host:path`, `user@host:path`; not `host::module` or `rsync://`, which
/// rsync reaches over TCP itself.
fn remote_shell_path(path: &str) -> bool {
    if path.starts_with("rsync://") {
        return false;
    }
    match path.find(':') {
        Some(colon) => !path[..colon].contains('/') && !path[colon + 1..].starts_with(':'),
        None => false,
    }
}

pub(super) fn rsync(args: &[Word]) -> Option<String> {
    for arg in RSYNC.scan(args) {
        let shown = arg.shown();
        match &arg {
            Arg::Unknown(word) => {
                return Some(super::unknown_option("rsync", word, "--rsh=CMD"));
            }
            Arg::Short { letter: 'e', .. } => {
                return Some(format!("`{shown}` names the remote shell rsync runs"));
            }
            Arg::Long {
                written, resolved, ..
            } => {
                let why = if names(written, *resolved, "rsh") {
                    "names the remote shell rsync runs"
                } else if names(written, *resolved, "rsync-path") {
                    "names the command rsync runs, through a shell, to start its other side"
                } else if names(written, *resolved, "daemon") {
                    "starts rsync's daemon, whose configuration runs commands (pre-xfer exec, post-xfer exec)"
                } else {
                    continue;
                };
                return Some(format!("`{shown}` {why}"));
            }
            Arg::Operand(Word::Literal(path)) if remote_shell_path(path) => {
                return Some(format!(
                    "`{path}` names a path on another host, which rsync reaches by running ssh; write a local path as `./{path}`, or use `host::module` or `rsync://` for an rsync daemon"
                ));
            }
            Arg::Operand(word @ Word::Dynamic(_)) => {
                // `"$dst"` may turn out to be `host:path`; `./"$dst"` may not.
                let prefix = literal_prefix(word).unwrap_or_default();
                if !prefix.contains('/') && (!prefix.contains(':') || remote_shell_path(&prefix)) {
                    return Some(format!(
                        "`{}` is only known at run time and may name a path on another host (`host:path`), which rsync reaches by running ssh; start it with `./` or `/`",
                        word.text()
                    ));
                }
            }
            _ => {}
        }
    }
    None
}

const SSH: Syntax = Syntax {
    short_with_value: "BbcDEeFIiJLlmOopPQRSWw",
    short_optional_value: "",
    short_flags: "46AaCfGgKkMNnqsTtVvXxYy",
    long_with_value: &[],
    long_optional_value: &[],
    long_flags: &[],
    order: Order::StopAtOperand,
};

const SCP: Syntax = Syntax {
    short_with_value: "cDFiJlMoPSX",
    short_flags: "12346ABCOpqRrsTvdft",
    ..SSH
};

const SFTP: Syntax = Syntax {
    short_with_value: "BbcDFiJloPRSsX",
    short_flags: "1246AaCfNpqrv",
    ..SSH
};

/// Why the ssh option `-o SETTING` may run a program here, if it may.
fn ssh_setting_refusal(setting: &str) -> Option<&'static str> {
    let setting = setting.trim_start();
    let keyword: String = setting
        .chars()
        .take_while(|c| !c.is_whitespace() && *c != '=')
        .collect::<String>()
        .to_ascii_lowercase();
    let value = setting[keyword.len()..]
        .trim_start_matches(|c: char| c.is_whitespace() || c == '=')
        .trim();
    let disabled = value.eq_ignore_ascii_case("none");
    match keyword.as_str() {
        "proxycommand" | "knownhostscommand" if !disabled => {
            Some("ssh runs the command it names (through a shell)")
        }
        "localcommand" | "permitlocalcommand" => {
            Some("ssh runs the LocalCommand (through a shell) after it connects")
        }
        "controlpath" if !disabled => {
            Some("ssh hands the connection to whatever listens on the control socket it names")
        }
        "securitykeyprovider" | "pkcs11provider" => {
            Some("ssh loads the library it names into itself")
        }
        "xauthlocation" => Some("ssh runs the xauth program it names"),
        "match" => Some("a Match block runs the command of its `exec` criterion"),
        "include" => Some("ssh reads the configuration files it names, which can name commands"),
        _ => None,
    }
}

/// Why one option of ssh, scp or sftp may run a program, if it may.
fn ssh_family_refusal(program: &str, syntax: &Syntax, arg: &Arg) -> Option<String> {
    let shown = arg.shown();
    let (letter, value) = match arg {
        Arg::Unknown(word) => {
            return Some(super::unknown_option(program, word, "-oProxyCommand=CMD"));
        }
        Arg::Long { .. } => {
            return Some(format!("`{shown}` is not an option of {program}"));
        }
        Arg::Short { letter, value, .. } => (*letter, value),
        Arg::Operand(_) => return None,
    };
    if !syntax.short_with_value.contains(letter) && !syntax.short_flags.contains(letter) {
        return Some(format!(
            "`{shown}` holds `-{letter}`, which is not an option of {program} toolgate knows; it may take a value that hides another option"
        ));
    }
    let why = match (program, letter) {
        (_, 'o') => match value {
            Some(Value::Text(setting)) => ssh_setting_refusal(setting)?,
            Some(Value::RunTime(_)) => {
                "the ssh option is only known at run time and could be ProxyCommand, which runs a command"
            }
            _ => return None,
        },
        (_, 'F') if value.as_ref().and_then(Value::text) == Some("none") => return None,
        (_, 'F') => {
            "makes ssh read a configuration file, which can name commands (ProxyCommand, LocalCommand)"
        }
        ("ssh", 'S') => "hands the connection to whatever listens on the control socket it names",
        ("ssh", 'I') => "makes ssh load the PKCS#11 library it names",
        ("scp" | "sftp", 'S') => "names the program to run instead of ssh",
        ("scp" | "sftp", 'D') => "names a local sftp server program to run instead of connecting",
        ("sftp", 'b') => {
            "runs sftp commands from a file, and a `!` command there runs a local shell command"
        }
        _ => return None,
    };
    Some(format!("`{shown}`: {why}"))
}

pub(super) fn ssh(args: &[Word]) -> Option<String> {
    // Options, the destination, options again, then the remote command,
    // which runs on the other host.
    let before = SSH.scan(args);
    for arg in &before {
        if let Arg::Operand(host) = arg {
            let at = args.iter().position(|w| std::ptr::eq(w, *host))?;
            return SSH
                .scan(&args[at + 1..])
                .iter()
                .take_while(|arg| !matches!(arg, Arg::Operand(_)))
                .find_map(|arg| ssh_family_refusal("ssh", &SSH, arg));
        }
        if let Some(why) = ssh_family_refusal("ssh", &SSH, arg) {
            return Some(why);
        }
    }
    None
}

pub(super) fn scp(args: &[Word]) -> Option<String> {
    SCP.scan(args)
        .iter()
        .find_map(|arg| ssh_family_refusal("scp", &SCP, arg))
}

pub(super) fn sftp(args: &[Word]) -> Option<String> {
    SFTP.scan(args)
        .iter()
        .find_map(|arg| ssh_family_refusal("sftp", &SFTP, arg))
}

#[cfg(test)]
mod tests {
    use crate::command::CommandPolicy;
    use crate::command::launchers::test_support::{
        allowing, expect_allowed, expect_launches_refused,
    };

    fn policy() -> Result<CommandPolicy, String> {
        allowing(&["tar", "rsync", "ssh", "scp", "sftp", "cat"])
    }

    #[test]
    fn remote_and_archive_programs_may_not_be_told_to_run_a_command() -> Result<(), String> {
        let policy = policy()?;
        let refused = [
            (
                "tar -xf a.tar --to-command='python3 -c 1'",
                "`--to-command=python3 -c 1` pipes every extracted file",
            ),
            (
                "tar -x --to-command python3 -f a.tar",
                "`--to-command python3`",
            ),
            ("tar --to-com=x -xf a.tar", "`--to-com=x`"),
            (
                "tar -I 'python3 -c 1' -xf a.tar",
                "`-I python3 -c 1` names the program tar compresses",
            ),
            ("tar -cIx -f a.tar .", "`-cIx`"),
            (
                "tar --use-compress-program=x -cf a.tar .",
                "`--use-compress-program=x`",
            ),
            ("tar cfI a.tar x .", "`-I x`"),
            (
                "tar -cf a.tar --checkpoint=1 --checkpoint-action=exec='python3 -c 1' .",
                "makes tar run a command at every checkpoint",
            ),
            (
                "tar -cf a.tar --checkpoint-action exec=x .",
                "`--checkpoint-action exec=x`",
            ),
            (
                "tar -c -M -F ./next.sh -f a.tar .",
                "`-F ./next.sh` names a script",
            ),
            ("tar -cM --info-script=x -f a.tar .", "`--info-script=x`"),
            (
                "tar -cM --new-volume-script=x -f a.tar .",
                "`--new-volume-script=x`",
            ),
            (
                "tar --rsh-command=/bin/x -cf h:a.tar .",
                "`--rsh-command=/bin/x` names the remote shell",
            ),
            ("tar --rmt-command=x -cf h:a.tar .", "`--rmt-command=x`"),
            (
                "tar -cf host:a.tar .",
                "`-cf host:a.tar` may name an archive on another host",
            ),
            ("tar -cfuser@host:a.tar .", "`-cfuser@host:a.tar`"),
            ("tar --file=h:/a.tar -x", "`--file=h:/a.tar`"),
            ("tar cf h:a.tar .", "`-f h:a.tar`"),
            (
                "tar -xf \"$archive\"",
                "`-xf \"$archive\"` may name an archive on another host",
            ),
            (
                "tar -cf a.tar \"$dir\"",
                "`\"$dir\"` is only known at run time",
            ),
            (
                "rsync -e 'python3 -c 1' a h:b",
                "`-e python3 -c 1` names the remote shell rsync runs",
            ),
            ("rsync -avex a h:b", "`-avex`"),
            ("rsync --rsh=x a h:b", "`--rsh=x`"),
            (
                "rsync --rsync-path='x; rsync' a h:b",
                "`--rsync-path=x; rsync` names the command rsync runs",
            ),
            (
                "rsync --daemon --config=./rsyncd.conf",
                "`--daemon` starts rsync's daemon",
            ),
            (
                "rsync -a src/ host:dst/",
                "`host:dst/` names a path on another host",
            ),
            ("rsync -a user@host:src/ dst/", "`user@host:src/`"),
            (
                "rsync -a -- src \"$dst\"",
                "`\"$dst\"` is only known at run time and may name a path on another host",
            ),
            ("rsync -a src $dst", "`$dst` is only known at run time"),
            (
                "ssh -o ProxyCommand='python3 -c 1' h",
                "`-o ProxyCommand=python3 -c 1`: ssh runs the command it names",
            ),
            ("ssh -oProxyCommand=x h", "`-oProxyCommand=x`"),
            ("ssh -vo 'proxycommand x' h", "`-vo proxycommand x`"),
            ("ssh -o 'ProxyCommand = x' h", "ssh runs the command"),
            ("ssh h -o ProxyCommand=x", "`-o ProxyCommand=x`"),
            (
                "ssh -o PermitLocalCommand=yes -o LocalCommand=x h",
                "`-o PermitLocalCommand=yes`",
            ),
            ("ssh -o KnownHostsCommand=x h", "`-o KnownHostsCommand=x`"),
            ("ssh -o XAuthLocation=./x -X h", "xauth"),
            ("ssh -o SecurityKeyProvider=./x.so h", "loads the library"),
            (
                "ssh -o \"$opt\" h",
                "the ssh option is only known at run time",
            ),
            (
                "ssh -F ./cfg h",
                "`-F ./cfg`: makes ssh read a configuration file",
            ),
            ("ssh -S ./sock h", "`-S ./sock`: hands the connection"),
            (
                "ssh -I ./p11.so h",
                "`-I ./p11.so`: makes ssh load the PKCS#11 library",
            ),
            ("ssh \"$host\"", "`\"$host\"` is only known at run time"),
            ("ssh -Z x h", "`-Z`, which is not an option of ssh"),
            (
                "scp -S ./x a h:b",
                "`-S ./x`: names the program to run instead of ssh",
            ),
            ("scp -o ProxyCommand=x a h:b", "`-o ProxyCommand=x`"),
            ("scp -F cfg a h:b", "`-F cfg`"),
            (
                "scp -D ./server a h:b",
                "`-D ./server`: names a local sftp server program",
            ),
            ("sftp -S ./x h", "`-S ./x`"),
            ("sftp -D ./server h", "`-D ./server`"),
            (
                "sftp -b cmds.txt h",
                "`-b cmds.txt`: runs sftp commands from a file",
            ),
            ("sftp -oProxyCommand=x h", "`-oProxyCommand=x`"),
        ];
        expect_launches_refused(&policy, &refused)
    }

    #[test]
    fn everyday_archives_and_copies_still_run() -> Result<(), String> {
        let policy = policy()?;
        let allowed = [
            "tar -czf out.tgz src",
            "tar xzvf a.tgz -C dest",
            "tar -xf ./a:b.tar",
            "tar --force-local -xf c:a.tar",
            "tar -cf a.tar --checkpoint=100 --checkpoint-action=dot .",
            "tar -cJf a.tar.xz --exclude='*.o' --transform='s/^/pkg\\//' .",
            "tar -tf a.tar -- \"$member\"",
            "tar -xf /tmp/a.tar",
            "rsync -av --delete src/ dst/",
            "rsync -a --exclude '*.o' ./src/ /backup/",
            "rsync -a src/ rsync://host/module/",
            "rsync -a src/ host::module/",
            "rsync -a -- ./\"$src\" /backup/",
            "ssh -p 2222 -i key -o BatchMode=yes -o StrictHostKeyChecking=no h ls -la",
            "ssh h cat -F x",
            "ssh -J jump h",
            "ssh -F none h",
            "ssh -o ProxyCommand=none h",
            "ssh h -- \"$cmd\"",
            "scp -P 2222 -o BatchMode=yes a h:b",
            "scp -r dir h:",
            "sftp -P 2222 h",
        ];
        expect_allowed(&policy, &allowed);
        Ok(())
    }
}

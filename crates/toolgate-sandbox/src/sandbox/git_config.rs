//! Taking the keys that run programs out of the config of a repository a
//! command created ([`super::new_repos`]).
//!
//! Attack: a command runs `git init sub` and writes `core.fsmonitor = ./evil`
//! (or `include.path`, a filter driver, a `!` alias ...) into
//! `sub/.git/config`; the user's next `git status` in `sub` on the host runs
//! it. The config is read once through a descriptor that follows no symlink,
//! parsed and edited by host git on a private copy (`--no-includes`, no
//! system or global config, an empty HOME, discovery stopped at the copy's
//! directory: nothing in it can run or pull in anything), and the result is
//! renamed over the original, so a symlinked or hard-linked `config` never
//! leads the edit to another file.

use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

/// Keys (section, variable; any subsection) whose value git runs as a
/// program, or that make it read or use another file or directory:
/// `git help config`, checked against git 2.47.
const DANGEROUS: &[(&str, &str)] = &[
    // Run at `git status` and most commands.
    ("core", "fsmonitor"),
    // Hooks from anywhere.
    ("core", "hookspath"),
    ("core", "sshcommand"),
    ("core", "pager"),
    ("core", "editor"),
    ("core", "askpass"),
    ("core", "gitproxy"),
    ("core", "alternaterefscommand"),
    // Points the work tree elsewhere: `git checkout` would write outside the root.
    ("core", "worktree"),
    ("sequence", "editor"),
    ("diff", "external"),
    ("diff", "textconv"),
    ("diff", "command"),
    ("merge", "driver"),
    ("filter", "clean"),
    ("filter", "smudge"),
    ("filter", "process"),
    ("credential", "helper"),
    ("gpg", "program"),
    ("gpg", "defaultkeycommand"),
    ("uploadpack", "packobjectshook"),
    ("remote", "uploadpack"),
    ("remote", "receivepack"),
    // Runs `git-remote-<vcs>` from PATH.
    ("remote", "vcs"),
    // Pull in another file, which may hold any of these.
    ("include", "path"),
    ("includeif", "path"),
    ("interactive", "difffilter"),
    ("difftool", "cmd"),
    ("difftool", "path"),
    ("mergetool", "cmd"),
    ("mergetool", "path"),
    ("guitool", "cmd"),
    ("browser", "cmd"),
    ("browser", "path"),
    ("web", "browser"),
    ("man", "cmd"),
    ("man", "path"),
    ("instaweb", "httpd"),
    ("instaweb", "browser"),
    ("imap", "tunnel"),
    ("sendemail", "smtpserver"),
    ("sendemail", "sendmailcmd"),
    ("sendemail", "tocmd"),
    ("sendemail", "cccmd"),
    ("sendemail", "headercmd"),
    ("trailer", "command"),
    ("trailer", "cmd"),
    // `protocol.ext.allow = always` makes an `ext::` remote URL a command.
    ("protocol", "allow"),
    // `git init` run again copies hooks from there.
    ("init", "templatedir"),
];

/// Whether git would run (or read) something this key names.
pub(super) fn is_dangerous(key: &str, value: Option<&str>) -> bool {
    let key = key.to_ascii_lowercase();
    let (Some((section, _)), Some((_, var))) = (key.split_once('.'), key.rsplit_once('.')) else {
        return false;
    };
    let shell = || value.is_some_and(|v| v.trim_start().starts_with('!'));
    match section {
        // `alias.x = !cmd` runs a shell command; others expand to git options.
        "alias" => shell(),
        // `submodule.<name>.update = !cmd` runs it at `git submodule update`.
        "submodule" if var == "update" => shell(),
        // `pager.<cmd>` is the pager of that command; `hook.<name>.command`
        // (newer git) a hook from config.
        "pager" | "hook" => true,
        _ => DANGEROUS.contains(&(section, var)),
    }
}

/// Whether `text` can hold a dangerous key at all: git reads section and
/// variable names only as written (letters, digits and `-`, in any case,
/// never escaped or split), so a config in which none of their names
/// appears needs no parse (and no git process), such as that of a fresh
/// `git init` or `git clone`.
fn may_be_dangerous(text: &[u8]) -> bool {
    let lower = text.to_ascii_lowercase();
    let has = |word: &str| lower.windows(word.len()).any(|w| w == word.as_bytes());
    DANGEROUS.iter().any(|(_, var)| has(var))
        || ["alias", "submodule", "pager", "hook"].into_iter().any(has)
}

/// The largest config read; a larger one is replaced, not parsed.
const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// Which config file of a git dir.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ConfigFile {
    /// `config`, of a bare repository or not.
    Main { bare: bool },
    /// `config.worktree`.
    Worktree,
}

impl ConfigFile {
    pub(super) fn name(self) -> &'static str {
        match self {
            ConfigFile::Main { .. } => "config",
            ConfigFile::Worktree => "config.worktree",
        }
    }

    /// What replaces a config that cannot be edited safely.
    fn minimal(self) -> String {
        match self {
            ConfigFile::Main { bare } => {
                format!("[core]\n\trepositoryformatversion = 0\n\tbare = {bare}\n")
            }
            ConfigFile::Worktree => String::new(),
        }
    }
}

/// The keys taken out of a config, and what is left of it.
type Edited = (Vec<String>, Vec<u8>);

/// Host git on private copies, in a directory of toolgate's own.
pub(super) struct ConfigEditor {
    dir: PathBuf,
}

impl ConfigEditor {
    /// A fresh private directory under `state_dir`.
    pub(super) fn new(state_dir: &Path) -> Result<ConfigEditor, String> {
        use std::os::unix::fs::DirBuilderExt;
        static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = state_dir.join(format!("git-config-{}-{seq}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .recursive(true)
            .create(dir.join("home"))
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(ConfigEditor { dir })
    }

    fn copy(&self) -> PathBuf {
        self.dir.join("config")
    }

    /// `git config --file COPY --no-includes ARGS`, which reads that file
    /// alone and runs nothing.
    fn git(&self, args: &[&str]) -> Result<Vec<u8>, String> {
        let home = self.dir.join("home");
        let out = Command::new("git")
            .env_clear()
            .env("PATH", super::FALLBACK_PATH)
            .env("HOME", &home)
            .env("LC_ALL", "C")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CEILING_DIRECTORIES", &self.dir)
            .current_dir(&home)
            .arg("config")
            .arg("--file")
            .arg(self.copy())
            .arg("--no-includes")
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run git: {e}"))?;
        match out.status.code() {
            Some(0) => Ok(out.stdout),
            // `--unset-all` of a key that is not there.
            Some(5) if args.first() == Some(&"--unset-all") => Ok(Vec::new()),
            _ => Err(format!(
                "git cannot read it: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )),
        }
    }

    /// Every key of the copy with its value (none for a bare boolean).
    fn entries(&self) -> Result<Vec<(String, Option<String>)>, String> {
        let out = self.git(&["--null", "--list"])?;
        Ok(out
            .split(|b| *b == 0)
            .filter(|e| !e.is_empty())
            .map(|entry| {
                let text = String::from_utf8_lossy(entry);
                match text.split_once('\n') {
                    Some((key, value)) => (key.to_owned(), Some(value.to_owned())),
                    None => (text.into_owned(), None),
                }
            })
            .collect())
    }

    /// Takes the dangerous keys out of `file` in the git dir `git_dir`
    /// (open as `dir`), saying what it did.
    pub(super) fn neutralise(
        &self,
        dir: &OwnedFd,
        git_dir: &Path,
        file: ConfigFile,
        warnings: &mut Vec<String>,
    ) {
        let name = file.name();
        let path = git_dir.join(name);
        let stat = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => stat,
            Err(_) => return,
        };
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
            // A symlink would make git read (and an edit write) another file.
            return replace(dir, &path, file, "it is not a regular file", warnings);
        }
        let text = match read_nofollow(dir, name) {
            Ok(text) => text,
            Err(why) => return replace(dir, &path, file, &why, warnings),
        };
        if !may_be_dangerous(&text) {
            return;
        }
        let edited = self.edit(&text);
        match edited {
            Ok(None) => {}
            Ok(Some((keys, bytes))) => match install(dir, name, &bytes) {
                Ok(()) => warnings.extend(keys.iter().map(|key| {
                    format!(
                        "removed `{key}` from {} (a repository a command created): git on the host would run or read what it names",
                        path.display()
                    )
                })),
                Err(e) => warnings.push(format!(
                    "{} (a repository a command created) sets {}, which could not be removed: {e}; remove them before running git there",
                    path.display(),
                    keys.join(", ")
                )),
            },
            Err(why) => replace(dir, &path, file, &why, warnings),
        }
    }

    /// The dangerous keys of `text` and the text without them, or `None`
    /// when it has none.
    fn edit(&self, text: &[u8]) -> Result<Option<Edited>, String> {
        std::fs::write(self.copy(), text).map_err(|e| format!("cannot copy it: {e}"))?;
        let mut keys: Vec<String> = self
            .entries()?
            .into_iter()
            .filter(|(key, value)| is_dangerous(key, value.as_deref()))
            .map(|(key, _)| key)
            .collect();
        keys.dedup();
        if keys.is_empty() {
            return Ok(None);
        }
        for key in &keys {
            self.git(&["--unset-all", key])?;
        }
        // Whatever git could not unset (a key it lists but will not
        // address) leaves the file to be replaced.
        if self
            .entries()?
            .iter()
            .any(|(key, value)| is_dangerous(key, value.as_deref()))
        {
            return Err("its dangerous keys could not be removed".into());
        }
        let bytes = std::fs::read(self.copy()).map_err(|e| format!("cannot read the copy: {e}"))?;
        Ok(Some((keys, bytes)))
    }
}

impl Drop for ConfigEditor {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Replaces a config that cannot be edited safely with a minimal one.
fn replace(dir: &OwnedFd, path: &Path, file: ConfigFile, why: &str, warnings: &mut Vec<String>) {
    let name = file.name();
    let result =
        remove_entry(dir, name).and_then(|()| install(dir, name, file.minimal().as_bytes()));
    warnings.push(match result {
        Ok(()) => format!(
            "replaced {} (a repository a command created) with a minimal config: {why}",
            path.display()
        ),
        Err(e) => format!(
            "{} (a repository a command created) could not be checked ({why}) nor replaced: {e}; remove it before running git there",
            path.display()
        ),
    });
}

/// Reads a small regular file in `dir` without following a symlink (or
/// blocking on a fifo).
pub(super) fn read_nofollow(dir: &impl AsFd, name: &str) -> Result<Vec<u8>, String> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir, name, flags, Mode::empty())
        .map_err(|e| format!("cannot open it: {e}"))?;
    let stat = rustix::fs::fstat(&fd).map_err(|e| format!("cannot stat it: {e}"))?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Err("it is not a regular file".into());
    }
    let mut bytes = Vec::new();
    std::fs::File::from(fd)
        .take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read it: {e}"))?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(format!("it is larger than {MAX_CONFIG_BYTES} bytes"));
    }
    Ok(bytes)
}

/// Removes `name` in `dir`, whatever it is, following no symlink.
pub(super) fn remove_entry(
    dir: &OwnedFd,
    name: impl AsRef<std::ffi::OsStr>,
) -> Result<(), std::io::Error> {
    let name = name.as_ref();
    match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::NOENT) => Ok(()),
        Err(rustix::io::Errno::ISDIR | rustix::io::Errno::PERM) => {
            let dup = dir.try_clone()?;
            cap_std::fs::Dir::from_std_file(std::fs::File::from(dup)).remove_dir_all(name)
        }
        Err(e) => Err(e.into()),
    }
}

/// Writes `bytes` as `name` in `dir`: a new file (so no hard link of the
/// old one changes), renamed over the old entry (so no symlink is followed).
fn install(dir: &OwnedFd, name: &str, bytes: &[u8]) -> Result<(), std::io::Error> {
    let staging = format!(".{name}.toolgate-new");
    remove_entry(dir, &staging)?;
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir, staging.as_str(), flags, Mode::from_raw_mode(0o644))?;
    std::fs::File::from(fd).write_all(bytes)?;
    rustix::fs::renameat(dir, staging.as_str(), dir, name)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_that_run_programs_are_dangerous_and_ordinary_ones_are_not() {
        let dangerous = [
            ("core.fsmonitor", Some("./evil")),
            ("core.hooksPath", Some("h")),
            ("diff.x.textconv", Some("cat")),
            ("diff.A.B.Command", Some("x")),
            ("credential.https://example.com.helper", Some("x")),
            ("gpg.ssh.program", Some("x")),
            ("includeif.gitdir:/x/.path", Some("x")),
            ("include.path", Some("x")),
            ("alias.st", Some("!sh -c x")),
            ("alias.st", Some("  !x")),
            ("pager.status", Some("evil")),
            ("submodule.m.update", Some("!evil")),
            ("protocol.ext.allow", Some("always")),
            ("remote.origin.uploadpack", Some("evil")),
            ("hook.x.command", Some("evil")),
        ];
        for (key, value) in dangerous {
            assert!(is_dangerous(key, value), "{key}");
        }
        let fine = [
            ("core.bare", Some("false")),
            ("core.repositoryformatversion", Some("0")),
            ("remote.origin.url", Some("/x")),
            (
                "remote.origin.fetch",
                Some("+refs/heads/*:refs/remotes/origin/*"),
            ),
            ("branch.main.remote", Some("origin")),
            ("alias.st", Some("status")),
            ("submodule.m.update", Some("rebase")),
            ("user.name", None),
            ("nodots", None),
        ];
        for (key, value) in fine {
            assert!(!is_dangerous(key, value), "{key}");
        }
    }

    #[test]
    fn only_configs_naming_a_dangerous_key_are_parsed() {
        let fresh = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n[remote \"origin\"]\n\turl = /src/x\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n";
        assert!(!may_be_dangerous(fresh.as_bytes()));
        for text in [
            "[CORE]FSMonitor=x",
            "[core]\n\tfsMonitor = x",
            "[Alias]\n\tst = !x",
            "[include]path=x",
            "[diff \"x\"]\n\ttextConv = x",
            "[core.x]\n\thooksPath = x",
        ] {
            assert!(may_be_dangerous(text.as_bytes()), "{text}");
        }
    }
}

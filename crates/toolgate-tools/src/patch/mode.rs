//! File modes in git diffs (`old mode 100644` / `new mode 100755`, `new
//! file mode 100755`) and what applying one does to a file's permissions.
//!
//! Git records only whether a regular file is executable, so that is all a
//! mode in a patch changes: 100755 adds the execute bits wherever the file
//! has read bits (0644 becomes 0755, a private 0600 becomes 0700, never
//! 0755), and 100644 removes every execute bit. Read and write bits are kept,
//! so a patch cannot widen who may read or write a file. Setuid, setgid and
//! sticky are always cleared. Attack: an inert setuid file in the workspace
//! (mode 4644, owned by root, as toolgate often runs) armed by a patch that
//! only says `new mode 100755`.
//!
//! Other modes (120000 a symbolic link, 160000 a submodule, 040000 a
//! directory, or any other number) are refused: apply_patch changes regular
//! files only.

/// The mode a git diff gives a regular file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileMode {
    /// `100644`: not executable.
    Regular,
    /// `100755`: executable.
    Executable,
}

impl FileMode {
    /// Parses the mode of an `old mode` / `new mode` / `new file mode` /
    /// `deleted file mode` line; the error says why another mode is refused.
    pub fn from_git(text: &str) -> Result<FileMode, String> {
        match text.trim() {
            "100644" => Ok(FileMode::Regular),
            "100755" => Ok(FileMode::Executable),
            other => {
                let what = match other {
                    "120000" => " (a symbolic link)",
                    "160000" => " (a git submodule)",
                    "040000" | "40000" => " (a directory)",
                    _ => "",
                };
                Err(format!(
                    "the mode {other:?}{what} is not supported; apply_patch changes regular \
                     files, and a mode only as 100644 (not executable) or 100755 \
                     (executable): change the mode line, or make that change with a command"
                ))
            }
        }
    }

    /// How git writes it.
    pub fn as_git(self) -> &'static str {
        match self {
            FileMode::Regular => "100644",
            FileMode::Executable => "100755",
        }
    }

    /// The permission bits a file of mode `current` gets (see the module
    /// docs): only the permission bits, execute following read.
    #[must_use]
    pub fn apply(self, current: u32) -> u32 {
        let kept = current & 0o666;
        match self {
            FileMode::Regular => kept,
            FileMode::Executable => kept | ((current & 0o444) >> 2),
        }
    }
}

/// The mode a file new to the tree gets from the jail: 0644 less this
/// process's umask (read from /proc, as reading it any other way changes it;
/// 022 if /proc cannot tell).
pub fn creation_mode() -> u32 {
    let umask = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with("Umask:"))?;
            u32::from_str_radix(line["Umask:".len()..].trim(), 8).ok()
        })
        .unwrap_or(0o022);
    0o644 & !umask
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn execute_follows_read_and_special_bits_go() {
        let table = [
            (FileMode::Executable, 0o644, 0o755),
            (FileMode::Executable, 0o600, 0o700),
            (FileMode::Executable, 0o640, 0o750),
            (FileMode::Executable, 0o755, 0o755),
            (FileMode::Executable, 0o4644, 0o755),
            (FileMode::Executable, 0o2640, 0o750),
            (FileMode::Executable, 0o1600, 0o700),
            (FileMode::Executable, 0o200, 0o200),
            (FileMode::Regular, 0o755, 0o644),
            (FileMode::Regular, 0o4755, 0o644),
            (FileMode::Regular, 0o711, 0o600),
            (FileMode::Regular, 0o644, 0o644),
            // The file type bits of a full st_mode are dropped too.
            (FileMode::Executable, 0o100_644, 0o755),
        ];
        for (mode, current, expected) in table {
            assert_eq!(mode.apply(current), expected, "{mode:?} on {current:o}");
        }
    }

    #[test]
    fn only_the_two_regular_modes_parse() {
        assert_eq!(FileMode::from_git("100644"), Ok(FileMode::Regular));
        assert_eq!(FileMode::from_git(" 100755"), Ok(FileMode::Executable));
        for (text, what) in [
            ("120000", "\"120000\" (a symbolic link)"),
            ("160000", "\"160000\" (a git submodule)"),
            ("100664", "\"100664\" is"),
            ("104755", "\"104755\" is"),
            ("", "\"\" is"),
        ] {
            let message = FileMode::from_git(text).unwrap_err();
            assert!(
                message.starts_with(&format!("the mode {what}")),
                "{message}"
            );
            assert!(message.contains("100644 (not executable)"), "{message}");
        }
        assert_eq!(FileMode::Executable.as_git(), "100755");
    }

    #[test]
    fn a_new_file_gets_0644_less_the_umask() {
        let mode = creation_mode();
        assert_eq!(mode & !0o644, 0, "{mode:o}");
    }
}

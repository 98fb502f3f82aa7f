//! The memory tools (`memory_append`, `memory_replace`, `memory_search`,
//! `memory_read`): facts an agent keeps across sessions, as plain Markdown
//! files in one directory of the workspace (`memory/` by default).
//!
//! The files are ordinary files, so they survive restarts and people can read
//! and edit them. Each tool takes a file *name*, never a path: names are
//! validated ([`check_file_name`]) and every byte goes through the workspace's
//! file jail, so neither a crafted name nor a symlink planted in the memory
//! directory leads anywhere else.
//!
//! This is not a database: no locking across processes (one process
//! serialises its own writes), no history beyond what the files show.

mod append;
mod index;
mod read;
mod replace;
mod search;

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use toolgate_core::{Registry, ToolError, ToolRegistrationError, Typed};
use toolgate_sandbox::{EntryKind, JailError};

pub use self::append::{MemoryAppendArgs, MemoryAppendTool};
pub use self::read::{MemoryReadArgs, MemoryReadTool};
pub use self::replace::{MemoryReplaceArgs, MemoryReplaceTool};
pub use self::search::{MemorySearchArgs, MemorySearchTool};
use crate::fs::{Fs, Located, jail_error};
use crate::text::{Decoded, NotText};

/// The access group of the memory tools.
pub const MEMORY_GROUP: &str = "group:memory";

/// Longest memory file name, in bytes.
pub const MAX_NAME_LEN: usize = 100;

/// Where the memory files live.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MemoryConfig {
    /// The memory directory, relative to the workspace (default `memory`).
    pub dir: String,
    /// The file used when a call names none (default `MEMORY.md`).
    pub default_file: String,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            dir: "memory".to_owned(),
            default_file: "MEMORY.md".to_owned(),
        }
    }
}

/// Why a [`MemoryConfig`] cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryConfigError {
    /// The directory is empty, absolute, or has `..` or `.` components.
    #[error(
        "memory directory `{0}` must be a relative path inside the workspace without `.` or \
         `..` components, such as `memory` or `.agent/memory`"
    )]
    Dir(String),
    /// The default file name is not a valid memory file name.
    #[error("default memory file: {0}")]
    DefaultFile(String),
}

impl MemoryConfig {
    /// Sets the memory directory (relative to the workspace).
    pub fn dir(mut self, dir: impl Into<String>) -> Self {
        self.dir = dir.into();
        self
    }

    /// Sets the file used when a call names none.
    pub fn default_file(mut self, name: impl Into<String>) -> Self {
        self.default_file = name.into();
        self
    }

    /// Checks the directory and the default file name.
    pub fn validate(&self) -> Result<(), MemoryConfigError> {
        let dir = Path::new(&self.dir);
        let plain = !self.dir.is_empty()
            && !self.dir.contains('\0')
            && dir
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_)))
            // `Path::components` silently drops inner `.`; refuse it on the text.
            && !self.dir.split('/').any(|part| part == ".");
        if !plain {
            return Err(MemoryConfigError::Dir(self.dir.clone()));
        }
        check_file_name(&self.default_file).map_err(MemoryConfigError::DefaultFile)
    }
}

/// Registers the four memory tools over `fs`, storing files as `memory` says.
pub fn register_memory_tools(
    registry: &mut Registry,
    fs: Arc<Fs>,
    memory: MemoryConfig,
) -> Result<(), ToolRegistrationError> {
    let store = Arc::new(MemoryStore::new(fs, memory));
    registry.register(Arc::new(Typed::new(MemoryAppendTool::new(store.clone()))))?;
    registry.register(Arc::new(Typed::new(MemoryReplaceTool::new(store.clone()))))?;
    registry.register(Arc::new(Typed::new(MemorySearchTool::new(store.clone()))))?;
    registry.register(Arc::new(Typed::new(MemoryReadTool::new(store))))?;
    Ok(())
}

/// Checks a memory file name: `[A-Za-z0-9][A-Za-z0-9._-]*\.md`, at most
/// [`MAX_NAME_LEN`] bytes, no `..`. The error says what was wrong.
pub fn check_file_name(name: &str) -> Result<(), String> {
    let problem = if name.is_empty() {
        Some("it is empty".to_owned())
    } else if name.len() > MAX_NAME_LEN {
        Some(format!(
            "it is {} bytes long, over {MAX_NAME_LEN}",
            name.len()
        ))
    } else if name.contains('/') || name.contains('\\') {
        // Attack: `../x.md`, `a/b.md`, `/etc/passwd`: a name never selects a directory.
        Some("it contains a path separator".to_owned())
    } else if name.contains("..") {
        // Attack: `..` climbing out of the memory directory.
        Some("it contains `..`".to_owned())
    } else if name.starts_with('.') {
        // Hidden files (and the jail's own temp files) are not memory.
        Some("it starts with a dot".to_owned())
    } else if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        // Attack: NUL, newlines, control and look-alike characters in names.
        Some(format!("it contains the character {c:?}"))
    } else if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        Some("it does not start with a letter or digit".to_owned())
    } else if !name.ends_with(".md") || name.len() == ".md".len() {
        Some("it does not end in `.md`".to_owned())
    } else {
        None
    };
    match problem {
        None => Ok(()),
        Some(why) => Err(format!(
            "{name:?} is not a memory file name ({why}); memory file names are plain names \
             like NOTES.md: letters, digits, `.`, `_` and `-`, ending in .md, at most \
             {MAX_NAME_LEN} characters"
        )),
    }
}

/// A memory file's text as it was read.
pub(crate) struct Loaded {
    pub decoded: Decoded,
    pub sha256: String,
}

/// One memory file in the directory.
pub(crate) struct Listed {
    pub name: String,
    pub size: u64,
    pub modified: Option<std::time::SystemTime>,
}

/// The memory directory of one workspace, shared by the four tools.
pub(crate) struct MemoryStore {
    fs: Arc<Fs>,
    config: MemoryConfig,
    /// Serialises read-modify-write in this process, so two concurrent
    /// appends cannot lose one of them.
    writing: Mutex<()>,
}

impl MemoryStore {
    pub fn new(fs: Arc<Fs>, config: MemoryConfig) -> MemoryStore {
        MemoryStore {
            fs,
            config,
            writing: Mutex::new(()),
        }
    }

    pub fn fs(&self) -> &Fs {
        &self.fs
    }

    pub fn lock(&self) -> MutexGuard<'_, ()> {
        // A panic while holding the lock leaves no partial state (writes are
        // atomic), so a poisoned lock is still usable.
        self.writing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The validated name a call refers to (the default one when absent).
    pub fn name(&self, file: Option<&str>) -> Result<String, ToolError> {
        let name = file.unwrap_or(&self.config.default_file);
        check_file_name(name).map_err(ToolError::InvalidArguments)?;
        Ok(name.to_owned())
    }

    /// The path a call touches, for the path layer: the named (or default)
    /// file, or the directory for calls that take no file and read them all.
    pub fn embedded_paths(&self, args: &serde_json::Value, whole_dir: bool) -> Vec<String> {
        match args.get("file").and_then(serde_json::Value::as_str) {
            Some(file) => vec![format!("{}/{file}", self.config.dir)],
            None if whole_dir => vec![self.config.dir.clone()],
            None => vec![format!("{}/{}", self.config.dir, self.config.default_file)],
        }
    }

    /// The memory directory in its jail.
    pub fn dir(&self) -> Result<Located, ToolError> {
        self.config
            .validate()
            .map_err(|e| ToolError::Failed(format!("the memory tools are misconfigured: {e}")))?;
        self.fs.locate(&self.config.dir)
    }

    /// The file `name` (already validated) in its jail. Refuses an entry
    /// that is not a regular file.
    pub fn file(&self, name: &str) -> Result<Located, ToolError> {
        let dir = self.dir()?;
        let place = dir.sibling(dir.rel.join(name));
        // Attack: `memory/NOTES.md -> ../src/main.rs` (or out of the root,
        // which the jail refuses anyway): a memory tool must not become a
        // way to read or write files outside the memory directory, so a
        // symlink (or anything but a plain file) is refused before any I/O.
        let entries = match dir.jail.list(&dir.rel) {
            Ok(entries) => entries,
            Err(JailError::NotFound { .. }) => return Ok(place),
            Err(e) => return Err(jail_error(e)),
        };
        match entries.iter().find(|e| e.name == name).map(|e| e.kind) {
            None | Some(EntryKind::File) => Ok(place),
            Some(EntryKind::Symlink) => Err(ToolError::Failed(format!(
                "`{}` is a symbolic link; memory files must be regular files. Ask the user to \
                 replace the link with a file, or use another name",
                place.shown
            ))),
            Some(_) => Err(ToolError::Failed(format!(
                "`{}` is not a regular file; use another memory file name",
                place.shown
            ))),
        }
    }

    /// Reads a memory file; `None` when it does not exist yet.
    pub fn load(&self, place: &Located) -> Result<Option<Loaded>, ToolError> {
        let max = self.fs.limits().max_file_bytes;
        let bytes = match place.jail.read(&place.rel, max) {
            Ok(bytes) => bytes,
            Err(JailError::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(jail_error(e)),
        };
        let sha256 = crate::text::sha256_hex(&bytes);
        let decoded = Decoded::new(&bytes).map_err(|e| {
            let why = match e {
                NotText::Binary => "contains NUL bytes".to_owned(),
                NotText::Encoding(at) => format!("is not UTF-8 (first bad byte at offset {at})"),
            };
            ToolError::Failed(format!(
                "`{}` {why}; memory files are UTF-8 Markdown. Fix or remove it with the file \
                 tools",
                place.shown
            ))
        })?;
        Ok(Some(Loaded { decoded, sha256 }))
    }

    /// Writes a memory file atomically, refusing one over the size limit.
    pub fn store(&self, place: &Located, bytes: &[u8]) -> Result<(), ToolError> {
        let max = self.fs.limits().max_file_bytes;
        if bytes.len() as u64 > max {
            return Err(ToolError::Failed(format!(
                "`{}` would be {} bytes, over the limit of {max} bytes per file; nothing was \
                 changed. Keep memory short: replace outdated facts, or use another file",
                place.shown,
                bytes.len()
            )));
        }
        place.jail.write(&place.rel, bytes).map_err(jail_error)
    }

    /// The memory files, sorted by name, and the names of entries that are
    /// not memory files (bad names, symlinks, directories).
    pub fn list(&self) -> Result<(Vec<Listed>, Vec<String>), ToolError> {
        let dir = self.dir()?;
        let entries = match dir.jail.list(&dir.rel) {
            Ok(entries) => entries,
            Err(JailError::NotFound { .. }) => return Ok((Vec::new(), Vec::new())),
            Err(e) => return Err(jail_error(e)),
        };
        let mut files = Vec::new();
        let mut ignored = Vec::new();
        for entry in entries {
            if entry.name.starts_with('.') {
                // Hidden entries, the jail's temp files among them.
                continue;
            }
            if entry.kind == EntryKind::File && check_file_name(&entry.name).is_ok() {
                files.push(Listed {
                    name: entry.name,
                    size: entry.size,
                    modified: entry.modified,
                });
            } else {
                ignored.push(entry.name);
            }
        }
        Ok((files, ignored))
    }
}

/// `{n:>6}\t{line}`, the numbering of the read tool.
pub(crate) fn numbered(n: usize, line: &str) -> String {
    format!("{n:>6}\t{line}\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn names_are_plain_markdown_names() {
        let cases: &[(&str, bool)] = &[
            ("MEMORY.md", true),
            ("notes.md", true),
            ("2024-06_deploy.v2.md", true),
            ("a.md", true),
            ("", false),
            (".md", false),
            (".hidden.md", false),
            ("../x.md", false),
            ("a..b.md", false),
            ("a/b.md", false),
            ("/etc/passwd", false),
            ("a\\b.md", false),
            ("x.txt", false),
            ("x.MD", false),
            ("x.md\0", false),
            ("-x.md", false),
            ("_x.md", false),
            ("x .md", false),
            ("x\n.md", false),
            ("é.md", false),
        ];
        for (name, ok) in cases {
            assert_eq!(check_file_name(name).is_ok(), *ok, "{name:?}");
        }
        let long = format!("{}.md", "a".repeat(MAX_NAME_LEN - 3));
        assert!(check_file_name(&long).is_ok());
        let longer = format!("{}.md", "a".repeat(MAX_NAME_LEN - 2));
        assert!(check_file_name(&longer).is_err());
        let err = check_file_name("../x.md").unwrap_err();
        assert!(err.contains("plain names like NOTES.md"), "{err}");
    }

    #[test]
    fn config_is_validated() {
        assert_eq!(MemoryConfig::default().validate(), Ok(()));
        assert_eq!(
            MemoryConfig::default().dir(".agent/memory").validate(),
            Ok(())
        );
        for dir in ["", "/abs", "../up", "a/../b", "./m", "a/./b"] {
            assert_eq!(
                MemoryConfig::default().dir(dir).validate(),
                Err(MemoryConfigError::Dir(dir.to_owned())),
                "{dir:?}"
            );
        }
        assert!(matches!(
            MemoryConfig::default().default_file("x.txt").validate(),
            Err(MemoryConfigError::DefaultFile(_))
        ));
    }

    proptest! {
        #[test]
        fn accepted_names_match_the_pattern(name in "\\PC{0,12}") {
            let pattern = name.len() <= MAX_NAME_LEN
                && name.ends_with(".md")
                && name.len() > 3
                && name.starts_with(|c: char| c.is_ascii_alphanumeric())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
                && !name.contains("..");
            prop_assert_eq!(check_file_name(&name).is_ok(), pattern);
        }

        #[test]
        fn generated_valid_names_pass(stem in "[A-Za-z0-9][A-Za-z0-9_-]{0,20}") {
            let name = format!("{stem}.md");
            prop_assert!(check_file_name(&name).is_ok());
        }
    }
}

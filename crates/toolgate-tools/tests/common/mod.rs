#![allow(clippy::unwrap_used, clippy::expect_used)]
// Each test file uses a different part of these helpers.
#![allow(dead_code)]

//! Shared fixture of the black-box tests: a workspace root in a temp dir, a
//! sibling `outside` tree with canary files that no call may touch, and the
//! file tools behind the real `Executor` (validation, policy, tool).

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use toolgate_core::{CallContext, Content, Registry, ToolOutput};
use toolgate_policy::{CallError, CallResult, Executor, Policy, PolicyPreset};
use toolgate_sandbox::{LocalWorkspace, Sandbox, SandboxConfig};
use toolgate_tools::Limits;

/// What the canary files hold.
pub const CANARY: &str = "canary: must never change\n";

/// A temp dir holding `root/` (the workspace), `outside/` (canaries, and a
/// fake home with `.ssh/id_rsa`) and `state/` (the sandbox's own files).
pub struct Fixture {
    /// Keeps the temp dir alive.
    _dir: tempfile::TempDir,
    /// The workspace root (canonical).
    pub root: PathBuf,
    /// The sibling directory no call may touch.
    pub outside: PathBuf,
    /// The home directory the path policy expands `~` to (inside `outside`).
    pub home: PathBuf,
    pub executor: Executor,
    pub ctx: CallContext,
}

impl Fixture {
    /// The fixture with the default limits.
    pub fn new() -> Fixture {
        Fixture::with_limits(Limits::default())
    }

    /// The fixture with `limits` for the file tools.
    pub fn with_limits(limits: Limits) -> Fixture {
        // An explicit home: tests never depend on (or change) $HOME.
        Fixture::with_policy(limits, |home| {
            Policy::preset(PolicyPreset::Standard, Some(home))
        })
    }

    /// The fixture with `limits` and the policy `policy_for(home)`.
    pub fn with_policy(limits: Limits, policy_for: impl FnOnce(&Path) -> Policy) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let root = base.join("root");
        let outside = base.join("outside");
        let home = outside.join("home");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(outside.join("dir")).unwrap();
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::write(outside.join("canary"), CANARY).unwrap();
        std::fs::write(outside.join("dir/canary"), CANARY).unwrap();
        std::fs::write(home.join(".ssh/id_rsa"), CANARY).unwrap();
        let sandbox = Sandbox::new(SandboxConfig::new(
            // The file tools never spawn a command.
            PathBuf::from("/nonexistent/stage2"),
            base.join("state"),
        ))
        .unwrap();
        let workspace =
            LocalWorkspace::new("test", vec![root.clone()], root.clone(), sandbox).unwrap();
        let mut registry = Registry::new();
        let fs = Arc::new(toolgate_tools::Fs::new(Arc::new(workspace), limits));
        toolgate_tools::register_fs_tools(&mut registry, fs).unwrap();
        let policy = policy_for(&home);
        let executor = Executor::builder(registry).policy(policy).build();
        let ctx =
            CallContext::new("test-call", "test", root.clone()).with_roots(vec![root.clone()]);
        Fixture {
            _dir: dir,
            root,
            outside,
            home,
            executor,
            ctx,
        }
    }

    /// Calls `name` through the whole pipeline.
    pub async fn call(&self, name: &str, args: Value) -> Result<ToolOutput, CallError> {
        self.call_result(name, args).await.map(|r| r.output)
    }

    /// Like [`Fixture::call`], with what the pipeline added (truncation).
    pub async fn call_result(&self, name: &str, args: Value) -> Result<CallResult, CallError> {
        self.executor.call(name, args, &self.ctx).await
    }

    /// Calls `name` and expects success.
    pub async fn ok(&self, name: &str, args: Value) -> ToolOutput {
        let shown = args.to_string();
        match self.call(name, args).await {
            Ok(output) => output,
            Err(e) => panic!("{name} {shown} failed: {e}"),
        }
    }

    /// Calls `name` and expects an error; returns its message.
    pub async fn err(&self, name: &str, args: Value) -> String {
        let shown = args.to_string();
        match self.call(name, args).await {
            Ok(output) => panic!("{name} {shown} succeeded: {output:#?}"),
            Err(e) => e.to_string(),
        }
    }

    /// `rel` inside the root.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// Writes `rel` inside the root (parents created).
    pub fn put(&self, rel: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
        let path = self.root.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&path, bytes).unwrap();
        path
    }

    /// The bytes of `rel` inside the root.
    pub fn bytes(&self, rel: &str) -> Vec<u8> {
        std::fs::read(self.root.join(rel)).unwrap()
    }

    /// A symlink `rel` inside the root pointing at `target` (as given).
    pub fn symlink(&self, rel: &str, target: impl AsRef<Path>) {
        let path = self.root.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::os::unix::fs::symlink(target, path).unwrap();
    }

    /// Everything in `outside`, to compare before and after a call.
    pub fn outside_snapshot(&self) -> Snapshot {
        Snapshot::of(&self.outside)
    }

    /// Everything in the root.
    pub fn root_snapshot(&self) -> Snapshot {
        Snapshot::of(&self.root)
    }
}

/// One entry of a tree as the tests compare it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    Dir { mode: u32 },
    File { mode: u32, bytes: Vec<u8> },
    Symlink { target: PathBuf },
    Other,
}

/// A tree's entries by relative path, symlinks recorded, never followed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot(pub BTreeMap<PathBuf, Entry>);

impl Snapshot {
    pub fn of(dir: &Path) -> Snapshot {
        let mut entries = BTreeMap::new();
        walk(dir, dir, &mut entries);
        Snapshot(entries)
    }
}

fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Entry>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let rel = path.strip_prefix(base).unwrap().to_owned();
        let mode = meta.permissions().mode() & 0o7777;
        let kind = meta.file_type();
        if kind.is_symlink() {
            let target = std::fs::read_link(&path).unwrap();
            out.insert(rel, Entry::Symlink { target });
        } else if kind.is_dir() {
            out.insert(rel, Entry::Dir { mode });
            walk(base, &path, out);
        } else if kind.is_file() {
            let bytes = std::fs::read(&path).unwrap();
            out.insert(rel, Entry::File { mode, bytes });
        } else {
            out.insert(rel, Entry::Other);
        }
    }
}

/// The text parts of an output, joined.
pub fn text(output: &ToolOutput) -> String {
    output
        .content
        .iter()
        .filter_map(|c| match c {
            Content::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("")
}

/// The structured facts of an output.
pub fn facts(output: &ToolOutput) -> Value {
    output.structured.clone().expect("structured output")
}

/// Lower-case hex SHA-256, computed independently of the tools.
pub fn sha256(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

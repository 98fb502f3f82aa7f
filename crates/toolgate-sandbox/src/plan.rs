//! The bubblewrap plan: one ordered argv.
//!
//! The order is fixed, because later mounts shadow earlier ones:
//! namespaces and process flags, read-only system directories, fresh
//! /proc, /dev and /tmp, writable roots (and the directories pinned on the
//! way to protected paths), extra read-only paths, the egress proxy's
//! socket (network mode `proxy`), read-deny masks, and write-deny masks
//! last, so nothing after them can undo them.

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

use toolgate_core::normalize_path;

use crate::spec::{MANDATORY_WRITE_DENY, NetworkMode, SYSTEM_READ_DENY, SandboxSpec};
use crate::stage2::Stage2Args;

/// Where stage 2 appears inside the sandbox.
pub const STAGE2_PATH: &str = "/.toolgate/stage2";

/// Where the egress proxy's socket appears inside the sandbox (network mode
/// `proxy`); stage 2's forwarder connects to it.
pub const EGRESS_SOCKET_PATH: &str = "/run/toolgate/egress.sock";

/// System directories bound read-only (or recreated as symlinks on
/// merged-/usr systems).
const SYSTEM_PATHS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt",
];

/// What is at a host path, without following a final symlink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostEntry {
    /// A directory.
    Dir,
    /// Anything that is not a directory or a symlink.
    File,
    /// A symlink and its target as written.
    Symlink(PathBuf),
    /// Nothing.
    Missing,
}

/// The host filesystem as the plan sees it; a fixture in tests.
pub trait HostView {
    /// What is at `path` (absolute), not following a final symlink.
    fn entry(&self, path: &Path) -> HostEntry;
    /// A small text file (a worktree's `.git` file), if readable.
    fn read_small(&self, path: &Path) -> Option<String>;
    /// Whether this process may read `path`. A sandboxed command has fewer
    /// rights than its parent, so what the parent cannot read needs no mask.
    fn readable(&self, _path: &Path) -> bool {
        true
    }
    /// Files and directories under the read-only system directories that
    /// only their owner (or group) may read: as uid 0 the command would pass
    /// the owner check, so they are masked.
    fn private_system_paths(&self) -> Vec<PathBuf> {
        Vec::new()
    }
}

/// The real filesystem.
#[derive(Debug, Clone, Copy, Default)]
pub struct RealHost;

impl HostView for RealHost {
    fn entry(&self, path: &Path) -> HostEntry {
        match std::fs::symlink_metadata(path) {
            Err(_) => HostEntry::Missing,
            Ok(m) if m.is_symlink() => match std::fs::read_link(path) {
                Ok(target) => HostEntry::Symlink(target),
                Err(_) => HostEntry::Missing,
            },
            Ok(m) if m.is_dir() => HostEntry::Dir,
            Ok(_) => HostEntry::File,
        }
    }

    fn read_small(&self, path: &Path) -> Option<String> {
        let text = std::fs::read_to_string(path).ok()?;
        (text.len() < 4096).then_some(text)
    }

    fn readable(&self, path: &Path) -> bool {
        rustix::fs::access(path, rustix::fs::Access::READ_OK).is_ok()
    }

    fn private_system_paths(&self) -> Vec<PathBuf> {
        // Only uid 0 can read what others may not; scanned once per process.
        static PRIVATE: std::sync::OnceLock<Vec<PathBuf>> = std::sync::OnceLock::new();
        if !rustix::process::geteuid().is_root() {
            return Vec::new();
        }
        PRIVATE
            .get_or_init(|| {
                let mut found = Vec::new();
                for dir in ["/etc", "/opt"] {
                    scan_private(Path::new(dir), &mut found);
                }
                found
            })
            .clone()
    }
}

/// Collects entries others may not read (files) or enter (directories),
/// without descending into the latter or following symlinks (entry
/// metadata does not follow them). /usr is not scanned: it is large, and
/// what it holds is meant to be read.
fn scan_private(dir: &Path, found: &mut Vec<PathBuf>) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        let mode = meta.permissions().mode();
        if meta.is_dir() {
            if mode & 0o001 == 0 {
                found.push(entry.path());
            } else {
                scan_private(&entry.path(), found);
            }
        } else if meta.is_file() && mode & 0o004 == 0 {
            found.push(entry.path());
        }
    }
}

/// Host files the plan needs besides the spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanFiles {
    /// The bwrap binary.
    pub bwrap: PathBuf,
    /// Our own binary, run inside as stage 2.
    pub stage2: PathBuf,
    /// An empty read-only file bound over absent write-deny files, so that
    /// writing them fails instead of going nowhere.
    pub empty_file: PathBuf,
    /// An empty read-only directory bound over absent write-deny
    /// directories and over read-deny directories (one mount each).
    pub empty_dir: PathBuf,
    /// Arguments that select the stage-2 entry point of `stage2` (the
    /// hidden subcommand of the `toolgate` binary); empty for a dedicated
    /// stage-2 binary.
    pub stage2_prefix: Vec<OsString>,
    /// The egress proxy's unix socket on the host, for network mode
    /// `proxy`: a fresh one per run.
    pub egress_socket: Option<PathBuf>,
}

/// A plan that cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// Roots and paths must be absolute.
    #[error("sandbox path `{}` is not absolute", path.display())]
    NotAbsolute {
        /// The path.
        path: PathBuf,
    },
    /// A writable root is not an existing directory.
    #[error("writable root `{}` is not an existing directory", path.display())]
    RootMissing {
        /// The root.
        path: PathBuf,
    },
    /// A protected path (or a directory on the way to it) is a symlink,
    /// which no mount can keep the command from replacing.
    #[error(
        "`{}` is a symlink inside a writable root, on the way to a protected path; a sandboxed command could replace it. Replace the symlink with the real directory or file (or make that root read-only)",
        path.display()
    )]
    UnprotectableSymlink {
        /// The symlink.
        path: PathBuf,
    },
    /// Network mode `proxy` without a proxy socket to bind.
    #[error(
        "network mode `proxy` needs the egress proxy's socket; run through `Sandbox`, which starts the proxy"
    )]
    NoEgressSocket,
    /// The working directory is not inside a root.
    #[error("working directory `{}` is not inside a writable root", path.display())]
    CwdOutsideRoots {
        /// The cwd.
        path: PathBuf,
    },
}

/// The argv and the host paths bwrap will create as mount points, which are
/// removed again after the run (so no stray files are left on the host).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BwrapPlan {
    /// `bwrap ... -- stage2 ... -- program args...`.
    pub argv: Vec<OsString>,
    /// Absent host paths that become mount points, in creation order.
    pub created_mount_points: Vec<PathBuf>,
}

struct Builder {
    argv: Vec<OsString>,
    created: Vec<PathBuf>,
}

impl Builder {
    fn push(&mut self, args: &[&str]) {
        self.argv.extend(args.iter().map(OsString::from));
    }

    fn push_path(&mut self, flag: &str, paths: &[&Path]) {
        self.argv.push(flag.into());
        self.argv
            .extend(paths.iter().map(|p| p.as_os_str().to_owned()));
    }
}

impl BwrapPlan {
    /// Builds the plan for `spec`, running `command` through stage 2.
    pub fn build(
        spec: &SandboxSpec,
        files: &PlanFiles,
        stage2: &Stage2Args,
        command: &[OsString],
        host: &dyn HostView,
    ) -> Result<BwrapPlan, PlanError> {
        check_spec(spec, host)?;
        let mut b = Builder {
            argv: vec![files.bwrap.as_os_str().to_owned()],
            created: Vec::new(),
        };
        process_flags(&mut b, spec);
        system_mounts(&mut b, host);
        // Fresh kernel views and a private /tmp; roots under /tmp come after,
        // so the tmpfs does not hide them.
        b.push(&["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]);
        for root in &spec.writable_roots {
            b.push_path("--bind", &[root, root]);
        }
        let protection = write_deny_protection(spec, host)?;
        // Pins before any mask: binding a directory later would hide the
        // masks already mounted below it (and would make a read-only path
        // on the way writable again).
        for pin in &protection.pins {
            b.push_path("--bind", &[pin, pin]);
        }
        for path in &spec.read_only_paths {
            if host.entry(path) != HostEntry::Missing {
                b.push_path("--ro-bind", &[path, path]);
            }
        }
        if spec.network == NetworkMode::Proxy {
            // After the roots and read-only paths, so none of them can hide
            // it; read-only, so the command cannot replace it with a socket
            // of its own (connecting needs no write access to the mount).
            let socket = files
                .egress_socket
                .as_deref()
                .ok_or(PlanError::NoEgressSocket)?;
            b.push_path("--ro-bind", &[socket, Path::new(EGRESS_SOCKET_PATH)]);
        }
        read_deny_masks(&mut b, spec, files, host);
        write_deny_masks(&mut b, files, protection.masks);
        b.push_path("--ro-bind", &[&files.stage2, Path::new(STAGE2_PATH)]);
        b.push_path("--chdir", &[&spec.cwd]);
        b.push(&["--", STAGE2_PATH]);
        b.argv.extend(files.stage2_prefix.iter().cloned());
        b.argv.extend(stage2.to_argv());
        b.argv.push("--".into());
        b.argv.extend(command.iter().cloned());
        Ok(BwrapPlan {
            argv: b.argv,
            created_mount_points: b.created,
        })
    }
}

fn check_spec(spec: &SandboxSpec, host: &dyn HostView) -> Result<(), PlanError> {
    let all = spec
        .writable_roots
        .iter()
        .chain(&spec.read_only_paths)
        .chain(&spec.read_deny)
        .chain(&spec.write_deny)
        .chain(std::iter::once(&spec.cwd));
    for path in all {
        if !path.is_absolute() {
            return Err(PlanError::NotAbsolute { path: path.clone() });
        }
    }
    for root in &spec.writable_roots {
        if host.entry(root) != HostEntry::Dir {
            return Err(PlanError::RootMissing { path: root.clone() });
        }
    }
    if !spec.writable_roots.iter().any(|r| spec.cwd.starts_with(r)) {
        return Err(PlanError::CwdOutsideRoots {
            path: spec.cwd.clone(),
        });
    }
    Ok(())
}

fn process_flags(b: &mut Builder, spec: &SandboxSpec) {
    // A new user namespace even as root, so `--cap-drop ALL` leaves the
    // command with no capability at all in any namespace.
    b.push(&[
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
    ]);
    if spec.network != NetworkMode::Host {
        b.push(&["--unshare-net"]);
    }
    b.push(&[
        "--hostname",
        "toolgate",
        // No process may outlive the sandbox, nor reach the caller's
        // terminal (TIOCSTI injection into the parent's tty).
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        // The environment reaches stage 2 through a file descriptor, so no
        // value ever appears in an argv that other host processes can read.
        "--clearenv",
    ]);
}

fn system_mounts(b: &mut Builder, host: &dyn HostView) {
    for path in SYSTEM_PATHS {
        let path = Path::new(path);
        match host.entry(path) {
            // Recreate merged-/usr symlinks instead of binding through them:
            // binding a path and also creating a symlink on it would fail.
            HostEntry::Symlink(target) => b.push_path("--symlink", &[&target, path]),
            HostEntry::Dir => b.push_path("--ro-bind", &[path, path]),
            HostEntry::File | HostEntry::Missing => {}
        }
    }
}

fn read_deny_masks(b: &mut Builder, spec: &SandboxSpec, files: &PlanFiles, host: &dyn HostView) {
    let mut paths: Vec<PathBuf> = SYSTEM_READ_DENY.iter().map(PathBuf::from).collect();
    paths.extend(host.private_system_paths());
    paths.extend(spec.read_deny.iter().cloned());
    paths.sort();
    paths.dedup();
    for path in &paths {
        if !host.readable(path) {
            continue;
        }
        match resolve(host, path) {
            // An empty directory hides a directory; /dev/null a file.
            Resolved::Existing { path, is_dir: true } => {
                b.push_path("--ro-bind", &[&files.empty_dir, &path]);
            }
            Resolved::Existing {
                path,
                is_dir: false,
            } => {
                b.push_path("--ro-bind", &[Path::new("/dev/null"), &path]);
            }
            // Nothing there to read.
            Resolved::Missing { .. } | Resolved::Unreachable => {}
        }
    }
}

/// One write-deny mount.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Mask {
    /// An existing file or directory made read-only where it is.
    ReadOnly(PathBuf),
    /// An absent name blocked with the empty read-only file.
    EmptyFile(PathBuf),
    /// An absent name blocked with the empty read-only directory.
    EmptyDir(PathBuf),
}

impl Mask {
    fn path(&self) -> &Path {
        match self {
            Mask::ReadOnly(p) | Mask::EmptyFile(p) | Mask::EmptyDir(p) => p,
        }
    }
}

/// Pins and masks, collected before any is emitted so they can be ordered.
#[derive(Default)]
struct Protection {
    /// Directories on the way to a protected path, bound onto themselves so
    /// that their names cannot be renamed or removed (a mount point is busy).
    pins: Vec<PathBuf>,
    masks: Vec<Mask>,
}

fn write_deny_protection(spec: &SandboxSpec, host: &dyn HostView) -> Result<Protection, PlanError> {
    let mut targets: Vec<(PathBuf, bool)> = Vec::new();
    for root in &spec.writable_roots {
        for (rel, is_dir) in MANDATORY_WRITE_DENY {
            targets.push((root.join(rel), *is_dir));
        }
        targets.extend(worktree_git_dirs(host, root));
    }
    let root = Path::new("/");
    targets.extend(
        spec.write_deny
            .iter()
            .map(|p| (normalize_path(p, root), false)),
    );
    let mut protection = Protection::default();
    for (path, is_dir) in targets {
        protect(&mut protection, spec, host, &path, is_dir)?;
    }
    let Protection {
        mut pins,
        mut masks,
    } = protection;
    masks.sort_by_key(|m| (m.path().components().count(), m.clone()));
    masks.dedup_by(|a, b| a.path() == b.path());
    pins.sort_by_key(|p| (p.components().count(), p.clone()));
    pins.dedup();
    // A masked path is pinned by its own mount already.
    pins.retain(|p| !masks.iter().any(|m| m.path() == p));
    Ok(Protection { pins, masks })
}

/// The write-deny masks, last of all mounts so nothing can undo them.
fn write_deny_masks(b: &mut Builder, files: &PlanFiles, masks: Vec<Mask>) {
    for mask in masks {
        match &mask {
            Mask::ReadOnly(p) => b.push_path("--ro-bind", &[p, p]),
            Mask::EmptyFile(p) => b.push_path("--ro-bind", &[&files.empty_file, p]),
            Mask::EmptyDir(p) => b.push_path("--ro-bind", &[&files.empty_dir, p]),
        }
        if !matches!(mask, Mask::ReadOnly(_)) {
            b.created.push(mask.path().to_owned());
        }
    }
}

/// Walks from the writable root holding `path` down to it, pinning every
/// directory on the way and masking the first thing that is not one.
fn protect(
    protection: &mut Protection,
    spec: &SandboxSpec,
    host: &dyn HostView,
    path: &Path,
    is_dir: bool,
) -> Result<(), PlanError> {
    // Outside every writable root nothing can write it anyway.
    let Some(root) = spec
        .writable_roots
        .iter()
        .filter(|r| path.starts_with(r))
        .max_by_key(|r| r.components().count())
    else {
        return Ok(());
    };
    let Ok(relative) = path.strip_prefix(root) else {
        return Ok(());
    };
    let names: Vec<Component> = relative.components().collect();
    if names.is_empty() {
        // The root itself is to be read-only.
        protection.masks.push(Mask::ReadOnly(root.clone()));
        return Ok(());
    }
    let mut current = root.clone();
    for (index, name) in names.iter().enumerate() {
        current.push(name);
        let last = index + 1 == names.len();
        match host.entry(&current) {
            HostEntry::Dir if !last => protection.pins.push(current.clone()),
            // A file in the middle (a worktree's `.git` file) is masked too:
            // replaced by a directory, it would open the way below it.
            HostEntry::Dir | HostEntry::File => {
                protection.masks.push(Mask::ReadOnly(current));
                return Ok(());
            }
            // A symlink's name can be removed and recreated by the command;
            // no mount can pin a symlink, so the plan refuses.
            HostEntry::Symlink(_) => {
                return Err(PlanError::UnprotectableSymlink { path: current });
            }
            // Blocked where it would first be created: `mkdir -p .git/hooks`
            // in a root without `.git` must not be able to make `.git`.
            HostEntry::Missing => {
                let mask = if last && is_dir {
                    Mask::EmptyDir(current)
                } else {
                    Mask::EmptyFile(current)
                };
                protection.masks.push(mask);
                return Ok(());
            }
        }
    }
    Ok(())
}

/// For a root whose `.git` is a file (a worktree), the real git dir's hooks
/// and config, which git on the host would run and read.
fn worktree_git_dirs(host: &dyn HostView, root: &Path) -> Vec<(PathBuf, bool)> {
    let dot_git = root.join(".git");
    if host.entry(&dot_git) != HostEntry::File {
        return Vec::new();
    }
    let Some(text) = host.read_small(&dot_git) else {
        return Vec::new();
    };
    let Some(gitdir) = text.lines().find_map(|l| l.strip_prefix("gitdir:")) else {
        return Vec::new();
    };
    let gitdir = normalize_path(Path::new(gitdir.trim()), root);
    let common = host
        .read_small(&gitdir.join("commondir"))
        .map(|c| normalize_path(Path::new(c.trim()), &gitdir))
        .unwrap_or_else(|| gitdir.clone());
    vec![
        // The pointer itself: rewritten, it sends git anywhere.
        (dot_git, false),
        (gitdir.join("config"), false),
        (gitdir.join("config.worktree"), false),
        (gitdir.join("commondir"), false),
        (gitdir.join("hooks"), true),
        (common.join("config"), false),
        (common.join("hooks"), true),
    ]
}

/// Where a host path leads once symlinks in it are followed.
#[derive(Debug, PartialEq, Eq)]
enum Resolved {
    /// It exists (after following symlinks) at `path`.
    Existing { path: PathBuf, is_dir: bool },
    /// It does not; `first_missing` is the first component that would have
    /// to be created.
    Missing { first_missing: PathBuf },
    /// A non-directory in the middle, or a symlink loop: it cannot be created.
    Unreachable,
}

fn resolve(host: &dyn HostView, path: &Path) -> Resolved {
    let mut pending: Vec<PathBuf> = vec![path.to_owned()];
    let mut current = PathBuf::from("/");
    let mut hops = 0;
    while let Some(next) = pending.pop() {
        let mut components: Vec<Component> = next.components().collect();
        components.reverse();
        while let Some(component) = components.pop() {
            let candidate = match component {
                Component::RootDir => {
                    current = PathBuf::from("/");
                    continue;
                }
                Component::CurDir | Component::Prefix(_) => continue,
                Component::ParentDir => {
                    current.pop();
                    continue;
                }
                Component::Normal(name) => current.join(name),
            };
            match host.entry(&candidate) {
                HostEntry::Dir => current = candidate,
                HostEntry::File if components.is_empty() => {
                    return Resolved::Existing {
                        path: candidate,
                        is_dir: false,
                    };
                }
                HostEntry::File => return Resolved::Unreachable,
                HostEntry::Missing => {
                    return Resolved::Missing {
                        first_missing: candidate,
                    };
                }
                HostEntry::Symlink(target) => {
                    hops += 1;
                    if hops > 40 {
                        return Resolved::Unreachable;
                    }
                    // Resume with the target, then the rest of this path.
                    let rest: PathBuf = components.iter().rev().collect();
                    let resumed = if target.is_absolute() {
                        target.join(rest)
                    } else {
                        current.join(target).join(rest)
                    };
                    pending.push(resumed);
                    break;
                }
            }
        }
        if pending.is_empty() {
            break;
        }
        if !pending.last().is_some_and(|p| p.is_absolute()) {
            return Resolved::Unreachable;
        }
        current = PathBuf::from("/");
    }
    Resolved::Existing {
        path: current,
        is_dir: true,
    }
}

#[cfg(test)]
mod tests;

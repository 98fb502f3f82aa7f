//! The bubblewrap plan: one ordered argv.
//!
//! The order is fixed, because later mounts shadow earlier ones:
//! namespaces and process flags, read-only system directories, fresh
//! /proc, /dev and /tmp, writable roots (and the directories pinned on the
//! way to protected paths), extra read-only paths, the egress proxy's
//! socket (network mode `proxy`), read-deny masks, and write-deny masks
//! last, so nothing after them can undo them.
//!
//! As root, the masks are not bubblewrap's to mount: they go to stage 2 as
//! its `--ro-bind` list, in the same order, and stage 2 mounts them inside
//! the sandbox's namespaces before it drops every capability (see
//! `stage2::masks`: bubblewrap re-reads the mount table after each
//! read-only bind, which made the masks most of its time). bubblewrap binds
//! their two sources, an empty directory and an empty file, at fixed paths.
//! Unprivileged, bubblewrap mounts them as before (see
//! [`HostView::masks_in_stage2`]).

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

use crate::repos::{RootScan, ScanTooLarge};
use crate::spec::{NetworkMode, SYSTEM_READ_DENY, SandboxSpec};
use crate::stage2::{Stage2Args, StageMask};

mod private;
mod protect;

use protect::{Mask, write_deny_protection};

/// Where stage 2 appears inside the sandbox.
pub const STAGE2_PATH: &str = "/.toolgate/stage2";

/// Where the empty read-only directory that masks directories appears
/// inside the sandbox.
pub const MASK_DIR_PATH: &str = "/.toolgate/empty-dir";

/// Where the empty read-only file that masks absent files appears inside
/// the sandbox.
pub const MASK_FILE_PATH: &str = "/.toolgate/empty";

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
    /// Whether `path` is an empty directory or an empty regular file (not
    /// following a final symlink).
    fn is_empty(&self, path: &Path) -> bool;
    /// Whether stage 2 can mount the masks itself: toolgate runs as root.
    /// Unprivileged, bubblewrap ends its setup in a nested user namespace
    /// that holds no right over the sandbox's mounts, so bubblewrap mounts
    /// them.
    fn masks_in_stage2(&self) -> bool {
        rustix::process::geteuid().is_root()
    }
    /// Whether stage 2 keeps absent protected names from being created
    /// (see `stage2::creations`), so that no placeholder is needed on the
    /// host; without it, each is blocked by a mount on a placeholder.
    fn guards_creations(&self) -> bool {
        false
    }
    /// The repositories inside `root` ([`crate::repos`]), reading at most
    /// `budget` directory entries.
    fn scan_root(&self, root: &Path, budget: usize) -> Result<RootScan, ScanTooLarge>;
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
        // Only uid 0 can read what others may not.
        if !rustix::process::geteuid().is_root() {
            return Vec::new();
        }
        private::system_paths()
    }

    fn is_empty(&self, path: &Path) -> bool {
        match std::fs::symlink_metadata(path) {
            Ok(m) if m.is_dir() => std::fs::read_dir(path).is_ok_and(|mut d| d.next().is_none()),
            Ok(m) => m.is_file() && m.len() == 0,
            Err(_) => false,
        }
    }

    fn guards_creations(&self) -> bool {
        crate::stage2::creations_guard_supported()
    }

    fn scan_root(&self, root: &Path, budget: usize) -> Result<RootScan, ScanTooLarge> {
        // On a few threads (the walk is syscall-bound, see
        // benches/nested_scan.rs), and kept while nothing it read changed.
        crate::repos::watched::scan(root, budget)
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
    #[error("working directory `{}` is not inside a writable root or a read-only path", path.display())]
    CwdOutsideRoots {
        /// The cwd.
        path: PathBuf,
    },
    /// A root is too large to search for nested repositories; running
    /// there would leave them unprotected, so the run is refused.
    #[error("{0}")]
    ScanTooLarge(String),
}

/// The argv and what the run changes on the host: the placeholders created
/// as mount points for absent protected names (removed again after the
/// run), and the names checked after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BwrapPlan {
    /// `bwrap ... -- stage2 ... -- program args...`.
    pub argv: Vec<OsString>,
    /// Absent host paths that become mount points, in creation order: an
    /// empty directory each, an empty file for some names inside a git dir.
    pub created_mount_points: Vec<PathBuf>,
    /// Those of them that are files.
    pub placeholder_files: Vec<PathBuf>,
    /// Existing empty entries masked read-only, which may be another run's
    /// placeholders: they must stay while this run lives.
    pub empty_masked: Vec<PathBuf>,
    /// Absent names no mask can block (`commondir` in a git dir), checked
    /// after the run.
    pub audited: Vec<PathBuf>,
}

impl BwrapPlan {
    /// A plan that masks nothing (the landlock and none backends).
    pub fn unmasked(argv: Vec<OsString>) -> BwrapPlan {
        BwrapPlan {
            argv,
            created_mount_points: Vec::new(),
            placeholder_files: Vec::new(),
            empty_masked: Vec::new(),
            audited: Vec::new(),
        }
    }
}

struct Builder {
    argv: Vec<OsString>,
    created: Vec<PathBuf>,
    files: Vec<PathBuf>,
    /// With `Some`, stage 2's read-only binds (sources inside the
    /// sandbox); with `None`, the masks are bubblewrap's.
    masks: Option<Vec<StageMask>>,
    /// The empty directory and file, as the masks' mounter sees them.
    empty_dir: PathBuf,
    empty_file: PathBuf,
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

    /// A read-only bind of `source` over `target`: stage 2's or bubblewrap's;
    /// `hides`: a read-deny mask (see [`StageMask::hides`]).
    fn mask(&mut self, source: &Path, target: &Path, hides: bool) {
        match &mut self.masks {
            Some(masks) => masks.push(StageMask {
                source: source.to_owned(),
                target: target.to_owned(),
                hides,
            }),
            None => self.push_path("--ro-bind", &[source, target]),
        }
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
            files: Vec::new(),
            masks: None,
            empty_dir: files.empty_dir.clone(),
            empty_file: files.empty_file.clone(),
        };
        let in_stage2 = host.masks_in_stage2();
        if in_stage2 {
            b.masks = Some(Vec::new());
            b.empty_dir = MASK_DIR_PATH.into();
            b.empty_file = MASK_FILE_PATH.into();
        }
        process_flags(&mut b, spec, in_stage2);
        system_mounts(&mut b, host);
        // Fresh kernel views and a private /tmp; roots under /tmp come after,
        // so the tmpfs does not hide them.
        b.push(&["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]);
        for root in &spec.writable_roots {
            b.push_path("--bind", &[root, root]);
        }
        let hidden = read_deny_paths(spec, host);
        let hidden_paths: Vec<PathBuf> = hidden.iter().map(|(p, _)| p.clone()).collect();
        let protection = write_deny_protection(spec, host, &hidden_paths)?;
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
        read_deny_masks(&mut b, &hidden, None);
        let read_only: Vec<PathBuf> = protection
            .masks
            .iter()
            .filter_map(|m| match m {
                Mask::ReadOnly(p) => Some(p.clone()),
                _ => None,
            })
            .collect();
        let mut deny_create = Vec::new();
        let guarded = host.guards_creations().then_some(&mut deny_create);
        write_deny_masks(&mut b, protection.masks, guarded);
        // A read-only bind of a protected directory brings the host's
        // content back, over a read-deny mask inside it (`.vscode/secret`
        // hidden, `.vscode` then bound read-only): those masks again.
        read_deny_masks(&mut b, &hidden, Some(&read_only));
        let masks = b.masks.take().unwrap_or_default();
        for (source, inside) in [
            (&files.empty_dir, MASK_DIR_PATH),
            (&files.empty_file, MASK_FILE_PATH),
        ] {
            if masks.iter().any(|m| m.source == Path::new(inside)) {
                b.push_path("--ro-bind", &[source, Path::new(inside)]);
            }
        }
        b.push_path("--ro-bind", &[&files.stage2, Path::new(STAGE2_PATH)]);
        b.push_path("--chdir", &[&spec.cwd]);
        b.push(&["--", STAGE2_PATH]);
        b.argv.extend(files.stage2_prefix.iter().cloned());
        // Their mounts stay, and stage 2 refuses writes there itself: a host
        // program replacing one during the run detaches its mount.
        let deny_write = if host.guards_creations() {
            read_only
        } else {
            Vec::new()
        };
        let stage2 = Stage2Args {
            masks,
            deny_create,
            deny_write,
            ..stage2.clone()
        };
        b.argv.extend(stage2.to_argv());
        b.argv.push("--".into());
        b.argv.extend(command.iter().cloned());
        Ok(BwrapPlan {
            argv: b.argv,
            created_mount_points: b.created,
            placeholder_files: b.files,
            empty_masked: protection.empty_masked,
            audited: protection.audited,
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
    // The working directory must exist inside the sandbox: in a root, or
    // in a read-only path (a health check writes nowhere).
    if !spec
        .writable_roots
        .iter()
        .chain(&spec.read_only_paths)
        .any(|r| spec.cwd.starts_with(r))
    {
        return Err(PlanError::CwdOutsideRoots {
            path: spec.cwd.clone(),
        });
    }
    Ok(())
}

fn process_flags(b: &mut Builder, spec: &SandboxSpec, masks_in_stage2: bool) {
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
    ]);
    if masks_in_stage2 {
        // Stage 2 keeps these two of the sandbox's own user namespace just
        // long enough to mount the masks and empty the bounding set, then
        // drops every capability and checks that none is left.
        b.push(&["--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP"]);
    }
    b.push(&[
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

/// The existing paths read-deny masks hide (after following symlinks),
/// each with whether it is a directory.
fn read_deny_paths(spec: &SandboxSpec, host: &dyn HostView) -> Vec<(PathBuf, bool)> {
    let mut paths: Vec<PathBuf> = SYSTEM_READ_DENY.iter().map(PathBuf::from).collect();
    paths.extend(host.private_system_paths());
    paths.extend(spec.read_deny.iter().cloned());
    paths.sort();
    paths.dedup();
    let mut hidden: Vec<(PathBuf, bool)> = paths
        .iter()
        .filter(|path| host.readable(path))
        .filter_map(|path| match resolve(host, path) {
            Resolved::Existing { path, is_dir } => Some((path, is_dir)),
            // Nothing there to read.
            Resolved::Missing { .. } | Resolved::Unreachable => None,
        })
        .collect();
    hidden.sort();
    hidden.dedup();
    // A path below a hidden directory is hidden with it, and a mask on it
    // could not even be mounted: bubblewrap cannot make a mount point in
    // the read-only empty directory over its parent. (With toolgate's data
    // directory in a root, the store's files below it failed every command.)
    let dirs: Vec<PathBuf> = hidden
        .iter()
        .filter(|(_, is_dir)| *is_dir)
        .map(|(path, _)| path.clone())
        .collect();
    hidden.retain(|(path, _)| !dirs.iter().any(|dir| path != dir && path.starts_with(dir)));
    hidden
}

/// Read-deny masks: an empty directory hides a directory, /dev/null a
/// file. With `only_under` non-empty, just those strictly below one of its
/// paths.
fn read_deny_masks(b: &mut Builder, hidden: &[(PathBuf, bool)], only_under: Option<&[PathBuf]>) {
    for (path, is_dir) in hidden {
        // `Some`: only the masks below these directories (none when the
        // list is empty, never all of them again).
        if let Some(dirs) = only_under
            && !dirs.iter().any(|o| path.starts_with(o) && path != o)
        {
            continue;
        }
        let source = if *is_dir {
            b.empty_dir.clone()
        } else {
            PathBuf::from("/dev/null")
        };
        b.mask(&source, path, true);
    }
}

/// The write-deny masks, last of all mounts so nothing can undo them. With
/// `guarded`, absent names go there instead (stage 2 refuses creating
/// them), and nothing is created on the host.
fn write_deny_masks(b: &mut Builder, masks: Vec<Mask>, mut guarded: Option<&mut Vec<PathBuf>>) {
    for mask in masks {
        if let (Some(guarded), Mask::EmptyDir(path) | Mask::EmptyFile(path)) =
            (guarded.as_deref_mut(), &mask)
        {
            guarded.push(path.clone());
            continue;
        }
        let source = match &mask {
            Mask::ReadOnly(p) => p.clone(),
            Mask::EmptyFile(_) => b.empty_file.clone(),
            Mask::EmptyDir(_) => b.empty_dir.clone(),
        };
        b.mask(&source, mask.path(), false);
        if let Mask::EmptyFile(p) = &mask {
            b.files.push(p.clone());
        }
        if !matches!(mask, Mask::ReadOnly(_)) {
            b.created.push(mask.path().to_owned());
        }
    }
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

//! A cgroup per command: the limits that hold for every process the command starts,
//! root or not, and a kill that reaches all of them.
//!
//! `setrlimit` bounds one process at a time and RLIMIT_NPROC is not enforced for uid 0
//! (which a command under bubblewrap keeps when toolgate runs as root), so a fork bomb,
//! or a hundred processes that each stay under RLIMIT_DATA, get around rlimits. A cgroup
//! counts the whole command: `pids.max` caps its processes and threads, `memory.max`
//! its memory, `cpu.max` its CPU share.
//!
//! Where the cgroups live ([`host`]): under the cgroup toolgate itself is in, so that
//! whatever limits the administrator put on toolgate still bound its commands (a child
//! cgroup cannot take more than its parent). On cgroup v1 a command's cgroup is
//! `<own>/toolgate-<pid>-<n>` in each hierarchy of a needed controller; on cgroup v2 it is
//! `<own>/toolgate/toolgate-<pid>-<n>`, which needs toolgate's own cgroup delegated to it
//! (see [`host`]).
//!
//! Lifetime: created before the fork, joined by the child between `fork` and `exec`
//! (a raw `write` of "0", async-signal-safe; see [`join_file`] for which file), so the
//! command never runs a single instruction outside it; everything in it is killed and the cgroup removed
//! when the run ends, also when the run is cancelled. Cgroups of a toolgate that died
//! are swept when the next toolgate first uses cgroups.
//!
//! The command cannot lift its own limits: under bubblewrap /sys is mounted read-only,
//! under the landlock backend Landlock allows writes only to the roots and the private
//! temp dir. Only the development backend `none` leaves a root command able to.

mod host;

use std::fs;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rustix::fs::{Mode, OFlags};
use rustix::process::{Pid, Signal};

pub use host::{CgroupHost, Controller, Slot, Version};

use super::limits::ResourceLimits;

/// How long the end of a run waits for the killed processes of a cgroup to be gone
/// before it leaves the (then empty or not) cgroup to the next start's sweep.
const REMOVE_WITHIN: Duration = Duration::from_secs(5);

/// Between two looks at a cgroup whose processes were killed.
const REMOVE_POLL: Duration = Duration::from_millis(2);

/// The cgroup(s) of one command: one directory per hierarchy that holds a controller
/// with a limit (one in all on cgroup v2).
#[derive(Debug)]
pub(crate) struct CommandCgroup {
    dirs: Vec<(PathBuf, Version)>,
    /// The [`join_file`] of each directory, opened before the fork: the child only
    /// writes.
    procs: Vec<Arc<OwnedFd>>,
    /// What the cgroup holds, for the mechanism report.
    pub(crate) holds: Vec<Controller>,
    removed: bool,
}

impl CommandCgroup {
    /// A new cgroup for one command with the cgroup limits of `limits` written, or
    /// `None` when `limits` has none that a controller of `host` can hold.
    pub(crate) fn create(
        host: &CgroupHost,
        limits: &ResourceLimits,
    ) -> io::Result<Option<CommandCgroup>> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let wanted = wanted_controllers(limits);
        let parents = host.parents_for(&wanted);
        if parents.is_empty() {
            return Ok(None);
        }
        let name = format!(
            "toolgate-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let mut cgroup = CommandCgroup {
            dirs: Vec::new(),
            procs: Vec::new(),
            holds: Vec::new(),
            removed: false,
        };
        // On error the directories made so far are removed by `Drop`.
        for (parent, version, controllers) in parents {
            let dir = parent.join(&name);
            fs::create_dir(&dir).map_err(|e| at(&dir, e))?;
            cgroup.dirs.push((dir.clone(), version));
            for controller in &controllers {
                write_limit(&dir, version, *controller, limits)?;
            }
            cgroup.holds.extend(controllers);
            let procs = dir.join(join_file(version));
            let fd = rustix::fs::open(&procs, OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty())
                .map_err(|e| at(&procs, e.into()))?;
            cgroup.procs.push(Arc::new(fd));
        }
        Ok(Some(cgroup))
    }

    /// What the child needs to join the cgroup: its [`join_file`] descriptors.
    pub(crate) fn join_handle(&self) -> CgroupJoin {
        CgroupJoin(self.procs.clone())
    }

    /// Kills every process left in the cgroup, waiting (asynchronously) until none is
    /// left, then removes it from a blocking task: removing an empty cgroup can take
    /// milliseconds (on v1 the memory controller waits for the kernel to take it
    /// offline), which the run's answer need not wait for.
    pub(crate) async fn close(mut self) {
        let deadline = Instant::now() + REMOVE_WITHIN;
        while !self.kill_all() && Instant::now() < deadline {
            tokio::time::sleep(REMOVE_POLL).await;
        }
        let mut rest = CommandCgroup {
            dirs: std::mem::take(&mut self.dirs),
            procs: Vec::new(),
            holds: Vec::new(),
            removed: true,
        };
        self.removed = true;
        tokio::task::spawn_blocking(move || {
            while !rest.try_remove() && Instant::now() < deadline {
                std::thread::sleep(REMOVE_POLL);
                rest.kill_all();
            }
            // Whatever could not be removed now the next start's sweep removes.
        });
    }

    /// SIGKILL to every process in the cgroup: `cgroup.kill` on v2, which the kernel
    /// applies atomically (a fork racing the kill cannot escape it); on v1 each pid of
    /// `cgroup.procs`, which the caller repeats until the cgroup is empty, since a
    /// process can fork between the read and the kill (fewer each round: a process
    /// with SIGKILL pending forks no more). True once no process is left in it.
    fn kill_all(&self) -> bool {
        for (dir, version) in &self.dirs {
            kill_cgroup(dir, *version);
        }
        self.dirs.iter().all(|(dir, _)| procs_of(dir).is_empty())
    }

    /// Removes every directory that is empty; true once all are gone.
    fn try_remove(&mut self) -> bool {
        self.dirs.retain(|(dir, _)| match fs::remove_dir(dir) {
            Ok(()) => false,
            Err(e) => e.kind() != io::ErrorKind::NotFound,
        });
        self.dirs.is_empty()
    }
}

impl Drop for CommandCgroup {
    /// A run that was cancelled (or failed to start) never reached `close`: its processes
    /// are killed here and the cgroup removed from a thread of its own, which may wait a
    /// little for the dead to be reaped.
    fn drop(&mut self) {
        if self.removed {
            return;
        }
        self.kill_all();
        if self.try_remove() {
            return;
        }
        let mut rest = CommandCgroup {
            dirs: std::mem::take(&mut self.dirs),
            procs: Vec::new(),
            holds: Vec::new(),
            removed: true,
        };
        let _ = std::thread::Builder::new()
            .name("toolgate-cgroup-removal".into())
            .spawn(move || {
                let deadline = Instant::now() + REMOVE_WITHIN;
                while !rest.try_remove() && Instant::now() < deadline {
                    std::thread::sleep(REMOVE_POLL);
                    rest.kill_all();
                }
            });
    }
}

/// The file a forked child writes "0" to, to move itself into a command cgroup.
///
/// On cgroup v1 it is `tasks`, which moves the writing thread. A child between
/// `fork` and `exec` has one thread, so that is the whole process, and whatever it
/// starts is born inside. Through `cgroup.procs` the kernel would move the whole
/// thread group: it takes the global threadgroup lock for writing, which waits for
/// an RCU grace period whenever no other migration came shortly before, 5 to 20 ms
/// on a quiet machine, on the path of every sandboxed command. Moving only the
/// calling thread needs no such lock.
///
/// On cgroup v2 `cgroup.threads` moves threads only within one threaded subtree, not
/// into another domain cgroup, so a command joins through `cgroup.procs` there.
fn join_file(version: Version) -> &'static str {
    match version {
        Version::V1 => "tasks",
        Version::V2 => "cgroup.procs",
    }
}

/// The [`join_file`] descriptors of a command cgroup, for the child to join it.
#[derive(Debug)]
pub(crate) struct CgroupJoin(Vec<Arc<OwnedFd>>);

impl CgroupJoin {
    /// Moves the calling process into the cgroup. Async-signal-safe: raw `write`s of
    /// "0" ("the writer") to descriptors opened before the fork, so it runs in the child
    /// between `fork` and `exec`.
    pub(crate) fn join_from_child(&self) -> io::Result<()> {
        for fd in &self.0 {
            rustix::io::write(fd.as_fd(), b"0")?;
        }
        Ok(())
    }
}

/// The controllers `limits` needs.
fn wanted_controllers(limits: &ResourceLimits) -> Vec<Controller> {
    let mut wanted = Vec::new();
    if limits.processes.is_some() {
        wanted.push(Controller::Pids);
    }
    if limits.memory_bytes.is_some() {
        wanted.push(Controller::Memory);
    }
    if limits.cpu_percent.is_some() {
        wanted.push(Controller::Cpu);
    }
    wanted
}

/// The period of `cpu.max` / `cpu.cfs_period_us`, in microseconds (the kernel's default).
const CPU_PERIOD_US: u64 = 100_000;

fn write_limit(
    dir: &Path,
    version: Version,
    controller: Controller,
    limits: &ResourceLimits,
) -> io::Result<()> {
    let write = |file: &str, value: String| {
        let path = dir.join(file);
        fs::write(&path, value).map_err(|e| at(&path, e))
    };
    match (controller, version) {
        (Controller::Pids, _) => {
            if let Some(max) = limits.processes {
                write("pids.max", max.max(1).to_string())?;
            }
        }
        (Controller::Memory, Version::V2) => {
            if let Some(max) = limits.memory_bytes {
                write("memory.max", max.to_string())?;
                // Without this the command could go on in swap past memory.max, which
                // pushes the host's own memory out instead of stopping the command.
                // Absent where swap is not accounted (no swap controller, no swap).
                if dir.join("memory.swap.max").exists() {
                    write("memory.swap.max", "0".into())?;
                }
            }
        }
        (Controller::Memory, Version::V1) => {
            if let Some(max) = limits.memory_bytes {
                write("memory.limit_in_bytes", max.to_string())?;
                // memory + swap, set after the memory limit, which it may not undercut.
                if dir.join("memory.memsw.limit_in_bytes").exists() {
                    write("memory.memsw.limit_in_bytes", max.to_string())?;
                }
            }
        }
        (Controller::Cpu, Version::V2) => {
            if let Some(percent) = limits.cpu_percent {
                let quota = cpu_quota(percent);
                write("cpu.max", format!("{quota} {CPU_PERIOD_US}"))?;
            }
        }
        (Controller::Cpu, Version::V1) => {
            if let Some(percent) = limits.cpu_percent {
                write("cpu.cfs_period_us", CPU_PERIOD_US.to_string())?;
                write("cpu.cfs_quota_us", cpu_quota(percent).to_string())?;
            }
        }
    }
    Ok(())
}

/// The quota per period for `percent` of one CPU (at least the kernel's minimum, 1 ms).
fn cpu_quota(percent: u64) -> u64 {
    (percent.saturating_mul(CPU_PERIOD_US) / 100).max(1000)
}

/// Kills what is in the cgroup at `dir` (see [`CommandCgroup::kill_all`]).
fn kill_cgroup(dir: &Path, version: Version) {
    if version == Version::V2 && fs::write(dir.join("cgroup.kill"), "1").is_ok() {
        return;
    }
    // cgroup v1, or a v2 kernel before 5.14 without cgroup.kill.
    for pid in procs_of(dir) {
        let _ = rustix::process::kill_process(pid, Signal::KILL);
    }
}

/// The processes in the cgroup at `dir`.
fn procs_of(dir: &Path) -> Vec<Pid> {
    fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.trim().parse::<i32>().ok())
        .filter_map(Pid::from_raw)
        .collect()
}

/// The pid in the name of a command cgroup (`toolgate-<pid>-<n>`), if it is one.
fn owner_of(name: &str) -> Option<u32> {
    let (pid, n) = name.strip_prefix("toolgate-")?.split_once('-')?;
    n.parse::<u64>().ok()?;
    pid.parse().ok()
}

/// Removes the command cgroups under `parent` whose toolgate is gone (killed, crashed,
/// or a machine that lost power between a run and its cleanup), killing what is left in
/// them first: a command without its toolgate is a command nobody supervises.
fn sweep(parent: &Path, version: Version) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(owner) = name.to_str().and_then(owner_of) else {
            continue;
        };
        // A live owner (this process or another toolgate) removes its own.
        if owner == std::process::id() || Path::new(&format!("/proc/{owner}")).exists() {
            continue;
        }
        let dir = entry.path();
        let deadline = Instant::now() + Duration::from_millis(500);
        loop {
            kill_cgroup(&dir, version);
            if fs::remove_dir(&dir).is_ok() || Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(REMOVE_POLL);
        }
    }
}

fn at(path: &Path, error: io::Error) -> io::Error {
    io::Error::new(error.kind(), format!("{}: {error}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn only_names_of_command_cgroups_have_an_owner() {
        let cases = [
            ("toolgate-123-0", Some(123)),
            ("toolgate-123-45", Some(123)),
            ("toolgate", None),
            ("toolgate-self", None),
            ("toolgate-123", None),
            ("toolgate-x-1", None),
            ("toolgate-1-x", None),
            ("other-1-2", None),
        ];
        for (name, owner) in cases {
            assert_eq!(owner_of(name), owner, "{name}");
        }
    }

    #[test]
    fn cpu_quota_is_a_share_of_the_period_never_below_the_minimum() {
        assert_eq!(
            [50, 100, 250, 0].map(cpu_quota),
            [50_000, 100_000, 250_000, 1000]
        );
    }
}

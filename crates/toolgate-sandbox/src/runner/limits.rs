//! Resource limits of one command: what it may take from the host (memory, processes,
//! CPU, disk, descriptors) whichever sandbox backend runs it. The wall-clock timeout is
//! the runner's own job.
//!
//! Each limit is held by the strongest mechanism the machine offers ([`ResourceLimits::
//! mechanisms`] says which, for `toolgate doctor`):
//!
//! | limit | first choice | fallback |
//! |---|---|---|
//! | `memory_bytes` | the command's cgroup (`memory.max`, v1 `memory.limit_in_bytes`): all its processes together | `RLIMIT_DATA`, per process |
//! | `processes` | the command's cgroup (`pids.max`): processes and threads, root included | root: a pid namespace capped by its own `pid_max` ([`super::pidns`]); others: `RLIMIT_NPROC` |
//! | `cpu_percent` | the command's cgroup (`cpu.max`, v1 `cpu.cfs_quota_us`) | none |
//! | `cpu_seconds`, `file_size_bytes`, `open_files`, `address_space_bytes` | `setrlimit`, per process | |
//!
//! rlimits are set between `fork` and `exec` and their hard limit lowered too, so the
//! command cannot raise them back; the cgroup is joined at the same point.

use std::io;

use rustix::process::{Resource, Rlimit};
use serde::Serialize;
use tokio::process::Command;

use super::cgroup::{CgroupHost, CommandCgroup, Controller};
use super::pidns::{PidNamespace, StandInExec};

/// Resource limits of a command. `None` keeps what the runner itself has.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ResourceLimits {
    /// CPU time in seconds of each process (`RLIMIT_CPU`): SIGXCPU at the limit, SIGKILL
    /// a second later.
    pub cpu_seconds: Option<u64>,
    /// Virtual address space in bytes of each process (`RLIMIT_AS`). Breaks programs
    /// that reserve large ranges up front (JVMs, V8, Go, sanitizers); `memory_bytes` is
    /// the limit meant for memory.
    pub address_space_bytes: Option<u64>,
    /// Largest file the command may write, in bytes (`RLIMIT_FSIZE`): SIGXFSZ past it.
    pub file_size_bytes: Option<u64>,
    /// Processes and threads of the whole command (cgroup `pids.max`; see the module
    /// doc for the fallbacks).
    pub processes: Option<u64>,
    /// Open file descriptors of each process (`RLIMIT_NOFILE`).
    pub open_files: Option<u64>,
    /// Memory of the whole command, in bytes (cgroup `memory.max`, swap not counted
    /// as room; without a memory cgroup `RLIMIT_DATA` of each process).
    pub memory_bytes: Option<u64>,
    /// CPU share of the whole command, in percent of one CPU (cgroup `cpu.max`; 200 is
    /// two CPUs). Not enforced without a cpu cgroup.
    pub cpu_percent: Option<u64>,
    /// Never use a cgroup, only rlimits and the pid-namespace cap: for hosts where
    /// toolgate must not create cgroups, and to exercise the fallbacks.
    pub skip_cgroups: bool,
}

const GIB: u64 = 1 << 30;

impl ResourceLimits {
    /// The defaults for an agent's commands: generous for builds and test suites, tight
    /// enough that no command can take the host down with it.
    ///
    /// - memory: 4 GiB or half the machine's memory, whichever is less: a parallel
    ///   build of a mid-size project fits, and the host keeps at least half;
    /// - processes: 1024 tasks (threads count): `make -j`, a test runner's workers and
    ///   a JVM fit many times over; a fork bomb stops within milliseconds;
    /// - file size: 4 GiB per file: debug binaries, core dumps and data files fit;
    /// - CPU time: 4 hours per process: the wall-clock timeouts bound foreground
    ///   commands; this bounds a background process that spins;
    /// - open files: 8192 per process;
    /// - no CPU share: a build may use every core; the timeouts bound it.
    pub fn recommended() -> ResourceLimits {
        let half_of_memory = rustix::system::sysinfo();
        let total = u64::from(half_of_memory.mem_unit).saturating_mul(half_of_memory.totalram);
        let memory = match total / 2 {
            0 => 4 * GIB,
            half => half.min(4 * GIB),
        };
        ResourceLimits {
            cpu_seconds: Some(4 * 3600),
            address_space_bytes: None,
            file_size_bytes: Some(4 * GIB),
            processes: Some(1024),
            open_files: Some(8192),
            memory_bytes: Some(memory),
            cpu_percent: None,
            skip_cgroups: false,
        }
    }

    /// Each limit the lower of `self`'s and `other`'s (a command's own limits can only
    /// tighten its sandbox's, `other`); whether cgroups are used is `other`'s choice.
    #[must_use]
    pub fn within(&self, other: &ResourceLimits) -> ResourceLimits {
        let lower = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        ResourceLimits {
            cpu_seconds: lower(self.cpu_seconds, other.cpu_seconds),
            address_space_bytes: lower(self.address_space_bytes, other.address_space_bytes),
            file_size_bytes: lower(self.file_size_bytes, other.file_size_bytes),
            processes: lower(self.processes, other.processes),
            open_files: lower(self.open_files, other.open_files),
            memory_bytes: lower(self.memory_bytes, other.memory_bytes),
            cpu_percent: lower(self.cpu_percent, other.cpu_percent),
            skip_cgroups: other.skip_cgroups,
        }
    }

    /// Which mechanism holds each limit that is set, on this machine, for this process.
    pub fn mechanisms(&self) -> Vec<LimitMechanism> {
        let host = self.cgroup_host();
        let choice = self.choose(&host, None);
        self.describe(&host, &choice)
    }

    fn cgroup_host(&self) -> CgroupHostRef {
        if self.skip_cgroups {
            CgroupHostRef::Owned(CgroupHost::unavailable("cgroups are turned off"))
        } else {
            CgroupHostRef::Shared(CgroupHost::get())
        }
    }

    /// Creates what this run's limits need (its cgroup) and plans the rest.
    pub(super) fn enforce(&self) -> io::Result<Enforcement> {
        let wants_cgroup = [self.processes, self.memory_bytes, self.cpu_percent]
            .iter()
            .any(Option::is_some);
        let host = self.cgroup_host();
        let cgroup = if wants_cgroup {
            CommandCgroup::create(host.get(), self).map_err(|e| {
                io::Error::new(e.kind(), format!("cannot create the command's cgroup: {e}"))
            })?
        } else {
            None
        };
        let held = cgroup.as_ref().map(|c| c.holds.clone()).unwrap_or_default();
        let choice = self.choose(&host, Some(&held));
        Ok(Enforcement {
            rlimits: self.rlimits(&choice),
            pid_cap: match choice.processes {
                ProcessCap::PidNamespace(cap) => Some(cap),
                _ => None,
            },
            cgroup,
        })
    }

    /// Decides the mechanism of each limit. `held`: the controllers the run's cgroup
    /// holds; `None` for the doctor, which creates none: those `host` offers.
    fn choose(&self, host: &CgroupHostRef, held: Option<&[Controller]>) -> Choice {
        let in_cgroup = |c: Controller| match held {
            Some(held) => held.contains(&c),
            None => host.get().place(c).is_ok(),
        };
        let processes = match self.processes {
            None => ProcessCap::Unset,
            Some(_) if in_cgroup(Controller::Pids) => ProcessCap::Cgroup,
            Some(max) if rustix::process::geteuid().is_root() => {
                match PidNamespace::available_capped() {
                    Ok(()) => ProcessCap::PidNamespace(PidNamespace::capped(max)),
                    Err(why) => ProcessCap::Unenforced(why),
                }
            }
            Some(max) => ProcessCap::Nproc(max.saturating_add(tasks_of_this_user())),
        };
        Choice {
            processes,
            memory_in_cgroup: in_cgroup(Controller::Memory),
            cpu_in_cgroup: in_cgroup(Controller::Cpu),
        }
    }

    fn rlimits(&self, choice: &Choice) -> RlimitPlan {
        let data = self.memory_bytes.filter(|_| !choice.memory_in_cgroup);
        let nproc = match choice.processes {
            ProcessCap::Nproc(max) => Some(max),
            _ => None,
        };
        [
            (Resource::Cpu, self.cpu_seconds),
            (Resource::As, self.address_space_bytes),
            (Resource::Fsize, self.file_size_bytes),
            (Resource::Nproc, nproc),
            (Resource::Nofile, self.open_files),
            (Resource::Data, data),
        ]
        .map(|(resource, limit)| {
            limit.map(|value| {
                let inherited_hard = rustix::process::getrlimit(resource).maximum;
                (resource, rlimit_for(resource, value, inherited_hard))
            })
        })
    }

    fn describe(&self, host: &CgroupHostRef, choice: &Choice) -> Vec<LimitMechanism> {
        let cgroup = |controller: Controller, file: &str| match host.get().place(controller) {
            Ok((dir, version)) => format!("{} {file} (under {})", version.as_str(), dir.display()),
            Err(_) => String::new(),
        };
        let why_no = |controller: Controller| match host.get().place(controller) {
            Ok(_) => String::new(),
            Err(why) => why.to_owned(),
        };
        let mut rows = Vec::new();
        let mut row = |limit, value: Option<u64>, mechanism: String, enforced, note: String| {
            if value.is_some() {
                rows.push(LimitMechanism {
                    limit,
                    value,
                    mechanism,
                    enforced,
                    note: (!note.is_empty()).then_some(note),
                });
            }
        };
        let memory_file = match host.get().place(Controller::Memory) {
            Ok((_, super::cgroup::Version::V1)) => "memory.limit_in_bytes",
            _ => "memory.max",
        };
        if choice.memory_in_cgroup {
            let mechanism = cgroup(Controller::Memory, memory_file);
            row("memory", self.memory_bytes, mechanism, true, String::new());
        } else {
            let note = format!(
                "per process only, not the whole command: {}",
                why_no(Controller::Memory)
            );
            row(
                "memory",
                self.memory_bytes,
                "RLIMIT_DATA".into(),
                true,
                note,
            );
        }
        match &choice.processes {
            ProcessCap::Unset => {}
            ProcessCap::Cgroup => {
                let mechanism = cgroup(Controller::Pids, "pids.max");
                row("processes", self.processes, mechanism, true, String::new());
            }
            ProcessCap::PidNamespace(_) => row(
                "processes",
                self.processes,
                "a pid namespace with its own pid_max".into(),
                true,
                format!("no pids cgroup: {}", why_no(Controller::Pids)),
            ),
            ProcessCap::Nproc(_) => row(
                "processes",
                self.processes,
                "RLIMIT_NPROC".into(),
                true,
                format!(
                    "counted with every process of this user, so set above their number now; \
                     no pids cgroup: {}",
                    why_no(Controller::Pids)
                ),
            ),
            ProcessCap::Unenforced(why) => row(
                "processes",
                self.processes,
                "NOT ENFORCED".into(),
                false,
                format!(
                    "no pids cgroup ({}) and no pid-namespace cap ({why}); RLIMIT_NPROC does \
                     nothing for root: a fork bomb is not contained",
                    why_no(Controller::Pids)
                ),
            ),
        }
        if choice.cpu_in_cgroup {
            let file = match host.get().place(Controller::Cpu) {
                Ok((_, super::cgroup::Version::V1)) => "cpu.cfs_quota_us",
                _ => "cpu.max",
            };
            row(
                "cpu_percent",
                self.cpu_percent,
                cgroup(Controller::Cpu, file),
                true,
                String::new(),
            );
        } else {
            let note = format!("no cpu cgroup: {}", why_no(Controller::Cpu));
            row(
                "cpu_percent",
                self.cpu_percent,
                "NOT ENFORCED".into(),
                false,
                note,
            );
        }
        let per_process = String::new();
        row(
            "cpu_seconds",
            self.cpu_seconds,
            "RLIMIT_CPU".into(),
            true,
            per_process.clone(),
        );
        row(
            "file_size",
            self.file_size_bytes,
            "RLIMIT_FSIZE".into(),
            true,
            per_process.clone(),
        );
        row(
            "open_files",
            self.open_files,
            "RLIMIT_NOFILE".into(),
            true,
            per_process.clone(),
        );
        row(
            "address_space",
            self.address_space_bytes,
            "RLIMIT_AS".into(),
            true,
            per_process,
        );
        rows
    }
}

/// How one limit is held on this machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LimitMechanism {
    /// The limit's name (as in `[limits]`).
    pub limit: &'static str,
    /// Its value.
    pub value: Option<u64>,
    /// What holds it: a cgroup file, an rlimit, the pid-namespace cap, or NOT ENFORCED.
    pub mechanism: String,
    /// False when nothing on this machine holds it.
    pub enforced: bool,
    /// Why it is held more weakly than it could be, or not at all.
    pub note: Option<String>,
}

/// The process's shared host, or one made for a run that skips cgroups.
enum CgroupHostRef {
    Shared(&'static CgroupHost),
    Owned(CgroupHost),
}

impl CgroupHostRef {
    fn get(&self) -> &CgroupHost {
        match self {
            CgroupHostRef::Shared(host) => host,
            CgroupHostRef::Owned(host) => host,
        }
    }
}

#[derive(Debug)]
enum ProcessCap {
    Unset,
    Cgroup,
    PidNamespace(PidNamespace),
    /// RLIMIT_NPROC at this value: the user's tasks now plus the limit.
    Nproc(u64),
    Unenforced(String),
}

#[derive(Debug)]
struct Choice {
    processes: ProcessCap,
    memory_in_cgroup: bool,
    cpu_in_cgroup: bool,
}

/// The tasks (processes and threads) of this process's real user now: RLIMIT_NPROC
/// counts them all, not only the command's, so the command's limit goes on top.
fn tasks_of_this_user() -> u64 {
    let uid = rustix::process::getuid().as_raw().to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut tasks = 0;
    for entry in entries.flatten() {
        if !entry
            .file_name()
            .to_string_lossy()
            .bytes()
            .all(|b| b.is_ascii_digit())
        {
            continue;
        }
        let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else {
            continue;
        };
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next())
        };
        if field("Uid:") == Some(uid.as_str()) {
            tasks += field("Threads:").and_then(|t| t.parse().ok()).unwrap_or(1);
        }
    }
    tasks
}

/// The `setrlimit` calls of a run, prepared before the fork because the child may not
/// allocate between `fork` and `exec`.
type RlimitPlan = [Option<(Resource, Rlimit)>; 6];

/// What one run's limits need in the child and after the run.
#[derive(Debug)]
pub(super) struct Enforcement {
    rlimits: RlimitPlan,
    cgroup: Option<CommandCgroup>,
    pid_cap: Option<PidNamespace>,
}

impl Enforcement {
    /// Makes the child set its rlimits and join its cgroup between `fork` and `exec`,
    /// so they hold from the first instruction of the command and for everything it
    /// starts.
    pub(super) fn apply_before_exec(&self, command: &mut Command) {
        let plan = self.rlimits;
        if plan.iter().any(Option::is_some) {
            // SAFETY: the closure runs in the forked child before `exec`, where only
            // async-signal-safe work is allowed. It reads a `Copy` array prepared before
            // the fork (no allocation, no locks), makes raw `prlimit64` syscalls, and
            // turns a failure into an `io::Error` from the raw errno, which does not
            // allocate.
            unsafe {
                command.pre_exec(move || {
                    for (resource, limit) in plan.iter().flatten() {
                        rustix::process::setrlimit(*resource, *limit)?;
                    }
                    Ok(())
                });
            }
        }
        if let Some(cgroup) = &self.cgroup {
            let procs = cgroup.join_handle();
            // SAFETY: as above: raw `write`s to descriptors opened before the fork.
            unsafe {
                command.pre_exec(move || procs.join_from_child());
            }
        }
    }

    /// Makes the child enter a pid namespace before `exec`: a capped one where that is
    /// the process cap; else, with `tied`, one that only ties the command's processes
    /// to its init, where this process may make one (root; see `pidns`). Register it after every
    /// other `pre_exec` hook: it forks, and the hooks registered after it would run
    /// only in the grandchild that execs, not in the child the runner waits for.
    /// `tied`: [`super::ExecRequest::own_pid_namespace`]; the stand-in: see
    /// [`super::ExecRequest::stand_in`].
    pub(super) fn enter_pid_namespace(&self, command: &mut Command, request: &super::ExecRequest) {
        let namespace = match self.pid_cap {
            Some(cap) => cap,
            None if request.own_pid_namespace && PidNamespace::available().is_ok() => {
                PidNamespace::uncapped()
            }
            None => return,
        };
        let stand_in = request.stand_in.as_deref().and_then(|stage2| {
            StandInExec::new(
                stage2,
                namespace,
                &request.program,
                &request.args,
                &request.env,
            )
        });
        namespace.apply_before_exec(command, stand_in);
    }

    /// After the run: kills whatever is left in the command's cgroup (processes that
    /// left its process group or outlived it) and removes the cgroup.
    pub(super) async fn finish(mut self) {
        if let Some(cgroup) = self.cgroup.take() {
            cgroup.close().await;
        }
    }
}

/// Soft and hard limit for `value`, never above the hard limit the runner already has
/// (the child inherits it, and an unprivileged process cannot raise it, so asking for
/// more would only make the spawn fail).
fn rlimit_for(resource: Resource, value: u64, inherited_hard: Option<u64>) -> Rlimit {
    let clamp = |v: u64| inherited_hard.map_or(v, |hard| v.min(hard));
    let current = clamp(value);
    // The hard limit is lowered too: otherwise the command could simply raise its own
    // soft limit back and run unbounded. For CPU time the hard limit is one second
    // later, so the command first gets SIGXCPU, which names the cause, then SIGKILL.
    let maximum = if resource == Resource::Cpu {
        clamp(value.saturating_add(1))
    } else {
        current
    };
    Rlimit {
        current: Some(current),
        maximum: Some(maximum),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn rlimit_lowers_soft_and_hard_and_never_exceeds_the_inherited_hard_limit() {
        let cases = [
            (Resource::Nofile, 64, None, (64, 64)),
            (Resource::Nofile, 64, Some(32), (32, 32)),
            (Resource::Fsize, 4096, Some(u64::MAX), (4096, 4096)),
            (Resource::Cpu, 5, None, (5, 6)),
            (Resource::Cpu, 5, Some(5), (5, 5)),
            (Resource::Cpu, u64::MAX, None, (u64::MAX, u64::MAX)),
        ];
        for (resource, value, hard, (current, maximum)) in cases {
            assert_eq!(
                rlimit_for(resource, value, hard),
                Rlimit {
                    current: Some(current),
                    maximum: Some(maximum)
                },
                "{resource:?} {value} under {hard:?}"
            );
        }
    }

    #[test]
    fn rlimits_are_the_limits_set_in_a_fixed_order_and_data_only_without_a_memory_cgroup() {
        let limits = ResourceLimits {
            file_size_bytes: Some(1 << 20),
            open_files: Some(64),
            memory_bytes: Some(1 << 30),
            ..ResourceLimits::default()
        };
        let planned = |memory_in_cgroup| {
            let choice = Choice {
                processes: ProcessCap::Unset,
                memory_in_cgroup,
                cpu_in_cgroup: false,
            };
            let plan = limits.rlimits(&choice);
            plan.iter().flatten().map(|(r, _)| *r).collect::<Vec<_>>()
        };
        assert_eq!(planned(true), vec![Resource::Fsize, Resource::Nofile]);
        assert_eq!(
            planned(false),
            vec![Resource::Fsize, Resource::Nofile, Resource::Data]
        );
        let none = Choice {
            processes: ProcessCap::Unset,
            memory_in_cgroup: false,
            cpu_in_cgroup: false,
        };
        assert!(
            ResourceLimits::default()
                .rlimits(&none)
                .iter()
                .all(Option::is_none)
        );
    }

    #[test]
    fn within_takes_the_lower_of_each_limit() {
        let sandbox = ResourceLimits {
            processes: Some(512),
            memory_bytes: Some(1 << 30),
            cpu_seconds: None,
            ..ResourceLimits::default()
        };
        let command = ResourceLimits {
            processes: Some(64),
            memory_bytes: Some(1 << 40),
            cpu_seconds: Some(5),
            skip_cgroups: true,
            ..ResourceLimits::default()
        };
        assert_eq!(
            command.within(&sandbox),
            ResourceLimits {
                processes: Some(64),
                memory_bytes: Some(1 << 30),
                cpu_seconds: Some(5),
                skip_cgroups: false,
                ..ResourceLimits::default()
            }
        );
    }

    #[test]
    fn recommended_limits_bound_every_dimension_but_the_cpu_share() {
        let limits = ResourceLimits::recommended();
        assert!(limits.memory_bytes.is_some_and(|m| m > 0 && m <= 4 * GIB));
        assert_eq!(
            (
                limits.processes,
                limits.file_size_bytes,
                limits.cpu_seconds,
                limits.open_files,
                limits.cpu_percent
            ),
            (Some(1024), Some(4 * GIB), Some(14_400), Some(8192), None)
        );
    }
}

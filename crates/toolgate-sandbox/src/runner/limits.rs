//! Resource limits (`setrlimit`) for the child, set between `fork` and `exec`.
//!
//! They bound what one command can take from the host (CPU time, memory, disk, process
//! slots, descriptors) whichever sandbox backend runs it; the wall-clock timeout is the
//! runner's own job.

use rustix::process::{Resource, Rlimit};
use tokio::process::Command;

/// Resource limits applied to the child with `setrlimit` before `exec`. `None` keeps the
/// limit the runner itself has.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceLimits {
    /// CPU time in seconds (`RLIMIT_CPU`): SIGXCPU at the limit, SIGKILL a second later.
    pub cpu_seconds: Option<u64>,
    /// Virtual address space in bytes (`RLIMIT_AS`).
    pub address_space_bytes: Option<u64>,
    /// Largest file the command may write, in bytes (`RLIMIT_FSIZE`): SIGXFSZ past it.
    pub file_size_bytes: Option<u64>,
    /// Processes of the user (`RLIMIT_NPROC`); not enforced for root.
    pub processes: Option<u64>,
    /// Open file descriptors (`RLIMIT_NOFILE`).
    pub open_files: Option<u64>,
}

/// The `setrlimit` calls for some limits, prepared before the fork because the child may
/// not allocate between `fork` and `exec`.
type RlimitPlan = [Option<(Resource, Rlimit)>; 5];

impl ResourceLimits {
    fn plan(&self) -> RlimitPlan {
        [
            (Resource::Cpu, self.cpu_seconds),
            (Resource::As, self.address_space_bytes),
            (Resource::Fsize, self.file_size_bytes),
            (Resource::Nproc, self.processes),
            (Resource::Nofile, self.open_files),
        ]
        .map(|(resource, limit)| {
            limit.map(|value| {
                let inherited_hard = rustix::process::getrlimit(resource).maximum;
                (resource, rlimit_for(resource, value, inherited_hard))
            })
        })
    }

    /// Makes the child set these limits on itself between `fork` and `exec`, so they
    /// hold from the first instruction of the command and for everything it starts.
    pub(super) fn apply_before_exec(&self, command: &mut Command) {
        let plan = self.plan();
        // Without limits there is nothing to do in the child.
        if plan.iter().all(Option::is_none) {
            return;
        }
        // SAFETY: the closure runs in the forked child before `exec`, where only
        // async-signal-safe work is allowed. It reads a `Copy` array prepared before the
        // fork (no allocation, no locks), makes raw `prlimit64` syscalls, and turns a
        // failure into an `io::Error` from the raw errno, which does not allocate.
        unsafe {
            command.pre_exec(move || {
                for (resource, limit) in plan.iter().flatten() {
                    rustix::process::setrlimit(*resource, *limit)?;
                }
                Ok(())
            });
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
    fn plan_lists_only_the_limits_that_are_set_in_a_fixed_order() {
        let limits = ResourceLimits {
            file_size_bytes: Some(1 << 20),
            open_files: Some(64),
            ..ResourceLimits::default()
        };
        let planned: Vec<_> = limits.plan().iter().flatten().map(|(r, _)| *r).collect();
        assert_eq!(planned, vec![Resource::Fsize, Resource::Nofile]);
        assert!(ResourceLimits::default().plan().iter().all(Option::is_none));
    }
}

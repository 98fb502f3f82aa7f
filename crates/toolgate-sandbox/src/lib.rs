//! toolgate's boundary.
//!
//! Commands run inside bubblewrap (new user, pid, ipc, uts, cgroup and
//! network namespaces, every capability dropped, a read-only system and
//! only the writable roots bound read-write) and then through stage 2, our
//! own binary re-executed inside, which adds no_new_privs, a seccomp filter
//! and Landlock before it execs the command. Where bubblewrap cannot run,
//! the landlock backend applies stage 2 alone.
//!
//! Network access is `none`, `host`, or `proxy`: the empty namespace again,
//! with toolgate's egress proxy ([`proxy`], applying [`egress`] rules)
//! reachable on loopback through stage 2's forwarder and nothing else.
//!
//! This crate is the boundary; the policy layers of `toolgate-policy` are
//! defence in depth in front of it.

pub mod egress;
pub mod jail;
mod mountinfo;
pub mod plan;
pub mod probe;
pub mod proxy;
pub mod repos;
pub mod roots;
pub mod runner;
pub mod sandbox;
pub mod spec;
pub mod stage2;
mod walk;
pub mod workspace;

pub use jail::{EntryInfo, EntryKind, FileStat, Jail, JailError};
pub use plan::{BwrapPlan, HostEntry, HostView, PlanError, PlanFiles, RealHost};
pub use probe::{Backend, BackendChoice, Probe, probe, probe_cached};
pub use roots::{RootError, RootMap, canonical_lenient};
pub use sandbox::{
    EgressSetup, Sandbox, SandboxCommand, SandboxConfig, SandboxError, SandboxOutcome,
};
pub use spec::{CONFIG_FILE_NAME, NetworkMode, SandboxSpec};
pub use stage2::{Stage2Args, Stage2Error, StageMask};
pub use workspace::{FilesystemRules, Health, LocalWorkspace, Workspace, WorkspaceError};

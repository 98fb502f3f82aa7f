//! The seccomp filters stage 2 installs: system calls a sandboxed command
//! never needs and that attack the kernel, other processes or the sandbox.

use std::collections::BTreeMap;
use std::convert::TryInto;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use super::{Stage2Args, Stage2Error};
use crate::spec::NetworkMode;

/// System calls refused outright, each with the attack it stops.
const DENIED: &[(i64, &str)] = &[
    // Reading or steering other processes.
    (libc::SYS_ptrace, "ptrace"),
    (libc::SYS_process_vm_readv, "process_vm_readv"),
    (libc::SYS_process_vm_writev, "process_vm_writev"),
    // io_uring bypasses seccomp for the operations it performs.
    (libc::SYS_io_uring_setup, "io_uring_setup"),
    (libc::SYS_io_uring_enter, "io_uring_enter"),
    (libc::SYS_io_uring_register, "io_uring_register"),
    // The kernel keyring is shared beyond the sandbox.
    (libc::SYS_keyctl, "keyctl"),
    (libc::SYS_add_key, "add_key"),
    (libc::SYS_request_key, "request_key"),
    // Re-mounting would undo the bubblewrap plan.
    (libc::SYS_mount, "mount"),
    (libc::SYS_umount2, "umount2"),
    (libc::SYS_pivot_root, "pivot_root"),
    (libc::SYS_move_mount, "move_mount"),
    (libc::SYS_open_tree, "open_tree"),
    (libc::SYS_fsopen, "fsopen"),
    (libc::SYS_fsconfig, "fsconfig"),
    (libc::SYS_fsmount, "fsmount"),
    (libc::SYS_fspick, "fspick"),
    (libc::SYS_mount_setattr, "mount_setattr"),
    // New namespaces (user namespaces above all) reopen kernel attack surface.
    (libc::SYS_unshare, "unshare"),
    (libc::SYS_setns, "setns"),
    // Kernel-level programs, modules and machine control.
    (libc::SYS_bpf, "bpf"),
    (libc::SYS_perf_event_open, "perf_event_open"),
    (libc::SYS_userfaultfd, "userfaultfd"),
    (libc::SYS_kexec_load, "kexec_load"),
    (libc::SYS_kexec_file_load, "kexec_file_load"),
    (libc::SYS_init_module, "init_module"),
    (libc::SYS_finit_module, "finit_module"),
    (libc::SYS_delete_module, "delete_module"),
    (libc::SYS_reboot, "reboot"),
    (libc::SYS_swapon, "swapon"),
    (libc::SYS_swapoff, "swapoff"),
    (libc::SYS_acct, "acct"),
];

/// `clone` flags that create namespaces.
const NAMESPACE_FLAGS: &[u64] = &[
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWCGROUP as u64,
];

fn arch() -> Result<TargetArch, Stage2Error> {
    std::env::consts::ARCH
        .try_into()
        .map_err(|e| Stage2Error::Setup(format!("seccomp: unsupported architecture: {e:?}")))
}

fn condition(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, Stage2Error> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Qword, op, value)
        .map_err(|e| Stage2Error::Setup(format!("seccomp: {e}")))
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, Stage2Error> {
    SeccompRule::new(conditions).map_err(|e| Stage2Error::Setup(format!("seccomp: {e}")))
}

/// The programs to install: one refusing with EPERM, one answering
/// `clone3` with ENOSYS (its flags live in memory seccomp cannot read, so
/// libc falls back to `clone`, whose flags the first filter checks).
pub fn seccomp_filters(args: &Stage2Args) -> Result<Vec<BpfProgram>, Stage2Error> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for (nr, _name) in DENIED {
        rules.insert(*nr, Vec::new());
    }
    let mut clone_rules = Vec::new();
    for flag in NAMESPACE_FLAGS {
        clone_rules.push(rule(vec![condition(
            0,
            SeccompCmpOp::MaskedEq(*flag),
            *flag,
        )?])?);
    }
    rules.insert(libc::SYS_clone, clone_rules);
    let mut families = Vec::new();
    if !args.allow_unix_sockets {
        // A unix socket reaches host daemons (docker.sock, the session bus,
        // toolgate's own proxy) through any bound path.
        families.push(libc::AF_UNIX);
    }
    if args.network == NetworkMode::None && !args.in_network_namespace {
        // Without a network namespace, refusing IP sockets is what makes
        // `none` mean none.
        families.extend([
            libc::AF_INET,
            libc::AF_INET6,
            libc::AF_NETLINK,
            libc::AF_PACKET,
        ]);
    }
    if !families.is_empty() {
        let mut socket_rules = Vec::new();
        for family in families {
            socket_rules.push(rule(vec![condition(0, SeccompCmpOp::Eq, family as u64)?])?);
        }
        rules.insert(libc::SYS_socket, socket_rules);
    }
    let eperm = compile(rules, libc::EPERM)?;
    let clone3 = compile(
        BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
        libc::ENOSYS,
    )?;
    Ok(vec![eperm, clone3])
}

fn compile(rules: BTreeMap<i64, Vec<SeccompRule>>, errno: i32) -> Result<BpfProgram, Stage2Error> {
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        arch()?,
    )
    .map_err(|e| Stage2Error::Setup(format!("seccomp: {e}")))?;
    filter
        .try_into()
        .map_err(|e| Stage2Error::Setup(format!("seccomp: {e}")))
}

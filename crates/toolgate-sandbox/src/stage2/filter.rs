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

/// A condition on the low 32 bits of an argument: for arguments the kernel
/// reads as a 32-bit `int` or `unsigned int` (a socket family, an ioctl
/// request). Comparing all 64 bits would let `TIOCSTI | 1 << 32` past an
/// equality rule while the kernel still sees TIOCSTI.
fn condition32(arg: u8, op: SeccompCmpOp, value: u32) -> Result<SeccompCondition, Stage2Error> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, u64::from(value))
        .map_err(|e| Stage2Error::Setup(format!("seccomp: {e}")))
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, Stage2Error> {
    SeccompRule::new(conditions).map_err(|e| Stage2Error::Setup(format!("seccomp: {e}")))
}

/// `ioctl` requests refused, each with the attack it stops.
const DENIED_IOCTLS: &[(u32, &str)] = &[
    // Pushes bytes into a terminal's input queue: a command that shares the
    // user's terminal types commands into the user's shell, which runs them
    // unsandboxed once toolgate exits.
    (libc::TIOCSTI as u32, "TIOCSTI"),
    // The console's TIOCL_PASTESEL pastes the selection as input: the same
    // injection on a virtual console.
    (libc::TIOCLINUX as u32, "TIOCLINUX"),
];

/// The only families `socket()` may create; every other one is refused.
///
/// An allowlist, because a denylist misses families: AF_VSOCK reaches the
/// hypervisor's services whatever the network namespace, AF_PACKET and
/// AF_BLUETOOTH reach devices, AF_ALG and others are kernel attack surface
/// no build or test needs.
fn allowed_socket_families(args: &Stage2Args) -> Vec<libc::c_int> {
    let mut families = Vec::new();
    if args.allow_unix_sockets {
        // Otherwise refused: a unix socket reaches host daemons (docker.sock,
        // the session bus, toolgate's own proxy) through any bound path.
        families.push(libc::AF_UNIX);
    }
    if args.network == NetworkMode::Host || args.in_network_namespace {
        // IP is harmless inside an empty network namespace and wanted with
        // `host`; without a namespace and with `none` (landlock backend),
        // refusing it is what makes `none` mean none. glibc's getifaddrs
        // needs netlink.
        families.extend([libc::AF_INET, libc::AF_INET6, libc::AF_NETLINK]);
    }
    families
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

    // One rule whose conditions are ANDed: the family is none of the
    // allowed ones. No allowed family: every socket() is refused.
    let not_allowed = allowed_socket_families(args)
        .into_iter()
        .map(|family| condition32(0, SeccompCmpOp::Ne, family as u32))
        .collect::<Result<Vec<_>, _>>()?;
    let socket_rules = if not_allowed.is_empty() {
        Vec::new()
    } else {
        vec![rule(not_allowed)?]
    };
    rules.insert(libc::SYS_socket, socket_rules);
    // A connected pair reaches nothing outside the process tree, but only
    // for AF_UNIX; the other families that support it (AF_TIPC) are kernel
    // attack surface.
    rules.insert(
        libc::SYS_socketpair,
        vec![rule(vec![condition32(
            0,
            SeccompCmpOp::Ne,
            libc::AF_UNIX as u32,
        )?])?],
    );

    let mut ioctl_rules = Vec::new();
    for (request, _name) in DENIED_IOCTLS {
        ioctl_rules.push(rule(vec![condition32(1, SeccompCmpOp::Eq, *request)?])?);
    }
    rules.insert(libc::SYS_ioctl, ioctl_rules);

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

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn args(network: NetworkMode, in_netns: bool, unix: bool) -> Stage2Args {
        Stage2Args {
            network,
            in_network_namespace: in_netns,
            allow_unix_sockets: unix,
            ..Stage2Args::default()
        }
    }

    #[test]
    fn socket_families_are_an_allowlist() {
        use libc::{AF_INET, AF_INET6, AF_NETLINK, AF_UNIX};
        let cases = [
            // landlock backend, network none: nothing at all.
            (args(NetworkMode::None, false, false), vec![]),
            (args(NetworkMode::None, false, true), vec![AF_UNIX]),
            // bwrap, network none: IP inside the empty namespace.
            (
                args(NetworkMode::None, true, false),
                vec![AF_INET, AF_INET6, AF_NETLINK],
            ),
            (
                args(NetworkMode::Host, false, true),
                vec![AF_UNIX, AF_INET, AF_INET6, AF_NETLINK],
            ),
            // bwrap, network proxy: loopback to the forwarder, but no unix
            // socket that could reach the proxy (or anything) around it.
            (
                args(NetworkMode::Proxy, true, false),
                vec![AF_INET, AF_INET6, AF_NETLINK],
            ),
        ];
        for (args, expected) in cases {
            assert_eq!(allowed_socket_families(&args), expected, "{args:?}");
        }
    }

    /// The errno of `-1` results, 0 for success (the descriptors are closed).
    fn errno_of(ret: libc::c_long, fds: &[libc::c_int]) -> i32 {
        if ret < 0 {
            return std::io::Error::last_os_error().raw_os_error().unwrap_or(-1);
        }
        for fd in fds.iter().copied().filter(|fd| *fd >= 0) {
            // SAFETY: a descriptor this test just created and nothing else uses.
            unsafe { libc::close(fd) };
        }
        0
    }

    fn socket(family: u64) -> i32 {
        // SAFETY: socket(2) takes plain integers; the raw syscall lets the
        // family carry high bits, as an attacker's would.
        let fd = unsafe { libc::syscall(libc::SYS_socket, family, libc::SOCK_STREAM, 0) };
        errno_of(fd, &[fd as libc::c_int])
    }

    fn socketpair(family: libc::c_int) -> i32 {
        let mut fds = [-1; 2];
        // SAFETY: `fds` has room for the two descriptors socketpair writes.
        let ret = unsafe { libc::socketpair(family, libc::SOCK_STREAM, 0, fds.as_mut_ptr()) };
        errno_of(libc::c_long::from(ret), &fds)
    }

    /// `ioctl(-1, high_bits | request)`.
    fn ioctl(request: u32, high_bits: u64) -> i32 {
        let byte = b'x';
        // SAFETY: the request reads at most one byte from `byte`, which
        // outlives the call; the raw syscall lets the request carry high
        // bits, as an attacker's would.
        let ret = unsafe {
            libc::syscall(
                libc::SYS_ioctl,
                -1,
                high_bits | u64::from(request),
                &byte as *const u8,
            )
        };
        errno_of(ret, &[])
    }

    /// Installs the filters on a fresh thread (seccomp and no_new_privs are
    /// per thread, so the test process stays unfiltered) and runs `probe`
    /// there.
    fn under_filters<T, F>(args: Stage2Args, probe: F) -> T
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        std::thread::spawn(move || {
            for program in seccomp_filters(&args).unwrap() {
                seccompiler::apply_filter(&program).unwrap();
            }
            probe()
        })
        .join()
        .unwrap()
    }

    const HIGH: u64 = 1 << 32;

    #[test]
    fn landlock_backend_without_network_refuses_every_socket_family() {
        let got = under_filters(args(NetworkMode::None, false, false), || {
            [
                libc::AF_UNIX,
                libc::AF_INET,
                libc::AF_INET6,
                libc::AF_NETLINK,
                libc::AF_PACKET,
                libc::AF_VSOCK,
                libc::AF_BLUETOOTH,
                libc::AF_ALG,
            ]
            .map(|family| socket(family as u64))
        });
        assert_eq!(got, [libc::EPERM; 8]);
    }

    #[test]
    fn allowed_families_work_and_the_rest_stay_refused_also_with_high_bits() {
        let got = under_filters(args(NetworkMode::None, true, true), || {
            [
                socket(libc::AF_UNIX as u64),
                socket(libc::AF_INET as u64),
                socket(libc::AF_INET6 as u64),
                // The kernel reads the family as an int: high bits must
                // not smuggle a refused family past the filter.
                socket(HIGH | libc::AF_VSOCK as u64),
                socket(libc::AF_VSOCK as u64),
                socket(libc::AF_PACKET as u64),
                socketpair(libc::AF_UNIX),
                socketpair(libc::AF_INET),
                socketpair(libc::AF_TIPC),
            ]
        });
        assert_eq!(
            got,
            [
                0,
                0,
                0,
                libc::EPERM,
                libc::EPERM,
                libc::EPERM,
                0,
                libc::EPERM,
                libc::EPERM
            ]
        );
    }

    #[test]
    fn socketpair_of_unix_sockets_works_even_when_unix_sockets_are_refused() {
        let got = under_filters(args(NetworkMode::None, false, false), || {
            (socket(libc::AF_UNIX as u64), socketpair(libc::AF_UNIX))
        });
        assert_eq!(got, (libc::EPERM, 0));
    }

    #[test]
    fn terminal_injection_ioctls_are_refused_before_the_descriptor_is_looked_at() {
        let (sti, linux, winsz) = (
            libc::TIOCSTI as u32,
            libc::TIOCLINUX as u32,
            libc::TIOCGWINSZ as u32,
        );
        // Unfiltered, a bad descriptor gives EBADF: EPERM below is seccomp.
        assert_eq!([ioctl(sti, 0), ioctl(winsz, 0)], [libc::EBADF; 2]);
        let got = under_filters(args(NetworkMode::Host, false, true), move || {
            [
                ioctl(sti, 0),
                ioctl(linux, 0),
                // The kernel reads the request as 32 bits.
                ioctl(sti, HIGH),
                ioctl(winsz, 0),
            ]
        });
        assert_eq!(got, [libc::EPERM, libc::EPERM, libc::EPERM, libc::EBADF]);
    }
}

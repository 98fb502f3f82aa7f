//! A pid namespace of the command's own, whose init is the program toolgate execs
//! (bubblewrap), tied to toolgate's life; and, where no pids cgroup can be had, the
//! process cap held by that namespace's `pid_max`.
//!
//! Why a namespace of its own, also under bubblewrap (which makes one itself): when the
//! init of a pid namespace dies, the kernel kills every process in it, nested namespaces
//! included, whatever they are doing. bubblewrap's own pid 1 gets its parent-death
//! signal only at the end of its setup; until then it waits, in a read of an eventfd, for
//! bubblewrap's outer process to write its uid map. Attack: toolgate is SIGKILLed right
//! after `process_start`; the outer bubblewrap dies with it (its death signal) before that
//! write, and its child waits for ever, reparented to the host's init, in the command's
//! cgroup, with every descriptor it was given. No watcher inside the sandbox ever starts,
//! so nothing of ours could end it. As the init of a namespace of ours, the outer
//! bubblewrap takes that child with it, at any moment of its setup.
//!
//! The cap: since Linux 6.14 `/proc/sys/kernel/pid_max` is per pid namespace: the value a
//! process reads and writes is that of its own (active) pid namespace, and a fork needs a
//! free pid at every level, so a namespace with a small `pid_max` bounds everything forked
//! in it, also for uid 0, for which RLIMIT_NPROC does nothing. This is the fallback for
//! root on machines without a usable pids controller (a container with a read-only
//! cgroupfs, a cgroup v2 desktop where toolgate is not alone in its cgroup).
//!
//! The kernel refuses a `pid_max` below 301 (`echo 60 > pid_max` fails with EINVAL, which
//! a shell reports as "I/O error"), and pids below 300 are handed out only until the
//! allocator first wraps (`RESERVED_PIDS`). So the cap is set in two writes: `pid_max` =
//! 299 + N, and `ns_last_pid` = 300, which starts allocation at 301 and so in the range
//! [300, 299 + N) from the first fork on: N - 1 pids besides the namespace's init.
//!
//! How the child gets there, between `fork` and `exec` (async-signal-safe: raw syscalls
//! on values prepared before the fork):
//! 1. `unshare(CLONE_NEWPID | CLONE_NEWNS)`: the child's next child is pid 1 of a new
//!    pid namespace, in a mount namespace of its own.
//! 2. A raw `clone` (not libc's `fork`, which runs atfork handlers). The grandchild is in
//!    the namespace. It asks for SIGKILL when its parent dies and checks that the parent
//!    still lives; makes its mounts private and mounts a /proc of the new pid namespace
//!    (bubblewrap reads `/proc/<pid>/ns` of its child by the pid it sees, and a host
//!    /proc knows no such pid; the mount propagates nowhere); with a cap, writes
//!    `ns_last_pid` and `pid_max` (sysctls resolve against the writer's pid namespace, so
//!    these are the new namespace's). Then it returns to exec the command as the
//!    namespace's init.
//! 3. The child stays as the command's stand-in towards the runner ([`stand_in`]): it
//!    dies with toolgate (the runner's parent-death signal), which kills the init and so
//!    the namespace; it passes on the group's signals as they would have acted on the
//!    init (an init ignores signals it has no handler for); and it ends as the init
//!    ended.
//!
//! Given stage 2's binary, the child execs it right after step 1 (`__stand-in [--pid-max
//! N --last-pid N] -- PROGRAM ARGS...`, in the command's environment), and steps 2 and 3
//! happen there ([`stand_in_main`]): a copy of toolgate that lived as long as the
//! command would share all of toolgate's memory (every page toolgate then writes would
//! be copied for it), and forking the init from it would copy toolgate's page tables
//! once more. Only when that exec fails does the copy go on itself.
//!
//! Needs CAP_SYS_ADMIN (toolgate as root); [`PidNamespace::available`] and
//! [`PidNamespace::available_capped`] say whether this kernel and process can do it,
//! by trying once.

mod stand_in;

use std::ffi::{CStr, CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::sync::OnceLock;

use rustix::fs::{Mode, OFlags};
use rustix::process::Signal;
use tokio::process::Command;

/// `RESERVED_PIDS` of the kernel: below it pids are used only before the first wrap.
const RESERVED_PIDS: u64 = 300;

/// A pid namespace for one command, with or without a cap on its tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PidNamespace {
    cap: Option<Cap>,
}

/// The two sysctl values of a cap of N tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cap {
    pid_max: Digits,
    last_pid: Digits,
}

/// A number as decimal ASCII in a fixed buffer, so the child writes it without allocating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Digits {
    bytes: [u8; 20],
    len: usize,
}

impl Digits {
    fn of(mut value: u64) -> Digits {
        let mut bytes = [0u8; 20];
        let mut len = 0;
        loop {
            bytes[len] = b'0' + (value % 10) as u8;
            len += 1;
            value /= 10;
            if value == 0 {
                break;
            }
        }
        bytes[..len].reverse();
        Digits { bytes, len }
    }

    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl PidNamespace {
    /// At most `processes` tasks, the command's init included (at least 2: the
    /// kernel's smallest `pid_max` is 301).
    pub(crate) fn capped(processes: u64) -> PidNamespace {
        let pid_max = (RESERVED_PIDS - 1)
            .saturating_add(processes.max(2))
            .min(1 << 22);
        PidNamespace {
            cap: Some(Cap {
                pid_max: Digits::of(pid_max),
                last_pid: Digits::of(RESERVED_PIDS),
            }),
        }
    }

    /// A namespace that only ties the command's processes to its init.
    pub(crate) fn uncapped() -> PidNamespace {
        PidNamespace { cap: None }
    }

    /// Whether a pid namespace of the command's own can be made here (root, or
    /// CAP_SYS_ADMIN): tried once per process with `/bin/sh -c 'exit 0'`, unless
    /// [`PidNamespace::seed`] gave the answer of the cached probe.
    pub(crate) fn available() -> Result<(), String> {
        AVAILABLE.get_or_init(probe_own).clone()
    }

    /// Whether a capped pid namespace can be made here (root with a kernel that keeps
    /// `pid_max` per namespace): tried once per process with `/bin/sh -c 'exit 0'`,
    /// unless [`PidNamespace::seed`] gave the answer.
    pub(crate) fn available_capped() -> Result<(), String> {
        AVAILABLE_CAPPED.get_or_init(probe_capped).clone()
    }

    /// Takes both answers from the machine's probe (cached with it per kernel, user
    /// and capabilities), sparing a short-lived process the two trial runs.
    pub(crate) fn seed(found: &crate::probe::PidNamespaces) {
        let _ = AVAILABLE.set(found.own.clone());
        let _ = AVAILABLE_CAPPED.set(found.capped.clone());
    }

    /// Makes the command the init of a new pid namespace (see the module doc).
    /// Register it after every other `pre_exec` hook that must run in the child that
    /// execs: hooks registered later run in the grandchild only.
    /// `stand_in`: stage 2's binary, exec'd as the stand-in, and the command it then
    /// starts as the init (see the module doc).
    pub(crate) fn apply_before_exec(self, command: &mut Command, stand_in: Option<StandInExec>) {
        // SAFETY: runs in the forked child before exec. Only raw syscalls (unshare,
        // execve, open, pipe2, clone, mount, write, close, prctl, poll, sigprocmask,
        // signalfd, read, wait4, kill, exit) on values prepared before the fork: no
        // allocation, no lock. The raw clone duplicates this single-threaded child; the
        // copy returns into std's exec path like the child.
        unsafe {
            command.pre_exec(move || self.enter(stand_in.as_ref()));
        }
    }

    fn enter(&self, stand_in: Option<&StandInExec>) -> io::Result<()> {
        // SAFETY: the child is single-threaded; nothing shares its descriptor table.
        unsafe {
            rustix::thread::unshare_unsafe(
                rustix::thread::UnshareFlags::NEWPID | rustix::thread::UnshareFlags::NEWNS,
            )?;
        };
        if let Some(stand_in) = stand_in {
            // Returns only when the exec failed: this copy goes on then.
            stand_in.exec();
        }
        self.fork_init()
    }

    /// Forks the init, which returns here ready to exec the command; this process
    /// stays as its stand-in and never returns.
    fn fork_init(&self) -> io::Result<()> {
        // The host's procfs, opened before the init covers /proc with its own: the
        // stand-in reads the init's signal dispositions there, by its host pid.
        let host_proc = rustix::fs::open(
            c"/proc",
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        // Held by the stand-in alone (close-on-exec, and the init closes its copy): the
        // init sees it hang up once the stand-in is gone.
        let (alive_read, alive_write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
        // SAFETY: a raw fork (SIGCHLD as the exit signal, no new stack): both copies
        // go on with their own copy of this stack.
        let pid = unsafe { libc::syscall(libc::SYS_clone, libc::SIGCHLD, 0, 0, 0, 0) };
        match pid {
            -1 => Err(io::Error::last_os_error()),
            0 => {
                drop(alive_write);
                drop(host_proc);
                self.as_init(&alive_read)
            }
            pid => {
                drop(alive_read);
                stand_in::serve(pid as i32, &host_proc, &alive_write)
            }
        }
    }

    /// In the grandchild, pid 1 of the new namespace, before exec.
    fn as_init(&self, alive: &OwnedFd) -> io::Result<()> {
        rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
        // Attack: toolgate is killed between the clone and the prctl above, taking the
        // stand-in with it: the death signal is then never sent and the command would
        // run unsupervised. getppid says nothing here (a parent outside the namespace
        // reads as 0); the stand-in's end of this pipe closes only when it exits.
        let mut poll = libc::pollfd {
            fd: alive.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll on one valid pollfd, without waiting.
        if unsafe { libc::poll(&mut poll, 1, 0) } == -1 {
            return Err(io::Error::last_os_error());
        }
        if poll.revents & (libc::POLLHUP | libc::POLLIN) != 0 {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
        // SAFETY: raw mount syscalls with static C strings. Private first, so that the
        // new /proc does not propagate back to the host's mount namespace.
        unsafe {
            let none = c"none".as_ptr();
            if libc::mount(
                none,
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
            let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
            if libc::mount(
                c"proc".as_ptr(),
                c"/proc".as_ptr(),
                c"proc".as_ptr(),
                flags,
                std::ptr::null(),
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
        }
        if let Some(cap) = self.cap {
            write_sysctl(c"/proc/sys/kernel/ns_last_pid", cap.last_pid.as_bytes())?;
            write_sysctl(c"/proc/sys/kernel/pid_max", cap.pid_max.as_bytes())?;
        }
        Ok(())
    }
}

/// The argument that makes stage 2's binary the stand-in (see [`stand_in_main`]).
pub(crate) const STAND_IN_COMMAND: &CStr = c"__stand-in";

/// The exec of stage 2's binary as the stand-in: `__stand-in [--pid-max N --last-pid
/// N] -- PROGRAM ARGS...` in the command's environment. Built before the fork; the
/// child only reads it.
pub(crate) struct StandInExec {
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    /// What `argv` and `envp` point into.
    strings: Vec<CString>,
}

// SAFETY: the pointers point into `strings`, heap buffers owned here that are never
// moved, changed or freed before the struct is.
unsafe impl Send for StandInExec {}
// SAFETY: as above; nothing here changes after `new`.
unsafe impl Sync for StandInExec {}

impl StandInExec {
    /// `None` when a string holds a NUL byte (no exec could take it).
    pub(crate) fn new(
        stage2: &Path,
        namespace: PidNamespace,
        program: &OsStr,
        args: &[OsString],
        env: &[(OsString, OsString)],
    ) -> Option<StandInExec> {
        let c = |bytes: &[u8]| CString::new(bytes).ok();
        let mut strings = vec![
            c(stage2.as_os_str().as_bytes())?,
            STAND_IN_COMMAND.to_owned(),
        ];
        if let Some(cap) = namespace.cap {
            strings.push(c(b"--pid-max")?);
            strings.push(c(cap.pid_max.as_bytes())?);
            strings.push(c(b"--last-pid")?);
            strings.push(c(cap.last_pid.as_bytes())?);
        }
        strings.push(c(b"--")?);
        strings.push(c(program.as_bytes())?);
        for arg in args {
            strings.push(c(arg.as_bytes())?);
        }
        let argc = strings.len();
        for (key, value) in env {
            strings.push(c(&[key.as_bytes(), b"=", value.as_bytes()].concat())?);
        }
        let pointers = |range: &[CString]| {
            range
                .iter()
                .map(|s| s.as_ptr())
                .chain([std::ptr::null()])
                .collect::<Vec<_>>()
        };
        let (argv, envp) = strings.split_at(argc);
        let (argv, envp) = (pointers(argv), pointers(envp));
        Some(StandInExec {
            argv,
            envp,
            strings,
        })
    }

    /// Execs stage 2's binary; returns only when that failed. Between fork and exec:
    /// one raw syscall.
    fn exec(&self) {
        if let Some(program) = self.strings.first() {
            // SAFETY: NUL-terminated strings and NULL-terminated pointer arrays owned
            // by `self`, alive across the call.
            unsafe { libc::execve(program.as_ptr(), self.argv.as_ptr(), self.envp.as_ptr()) };
        }
    }
}

/// The stand-in as stage 2's binary runs it, with `args` after [`STAND_IN_COMMAND`]:
/// forks the command as the init of the pid namespace the runner's child entered
/// before its exec, and stands in for it (never returning). Returns what went wrong
/// otherwise: arguments not its own, or, in the init, what kept the command from
/// starting.
pub(crate) fn stand_in_main(args: &[OsString]) -> String {
    let usage = || {
        format!(
            "{} takes [--pid-max N --last-pid N] -- PROGRAM [ARGS...], not {args:?}",
            STAND_IN_COMMAND.to_string_lossy()
        )
    };
    let Some(split) = args.iter().position(|a| a == "--") else {
        return usage();
    };
    let (options, command) = (&args[..split], &args[split + 1..]);
    let number = |a: &OsString| a.to_str().and_then(|a| a.parse::<u64>().ok());
    let cap = match options {
        [] => None,
        [pid_max_flag, pid_max, last_pid_flag, last_pid]
            if pid_max_flag == "--pid-max" && last_pid_flag == "--last-pid" =>
        {
            match (number(pid_max), number(last_pid)) {
                (Some(pid_max), Some(last_pid)) => Some(Cap {
                    pid_max: Digits::of(pid_max),
                    last_pid: Digits::of(last_pid),
                }),
                _ => return usage(),
            }
        }
        _ => return usage(),
    };
    let Some((program, rest)) = command.split_first() else {
        return usage();
    };
    if let Err(e) = (PidNamespace { cap }).fork_init() {
        return format!("cannot start the pid namespace's init: {e}");
    }
    // The init, alone in this process: std's exec looks the program up in the PATH of
    // this environment, which is the command's.
    let error = std::process::Command::new(program).args(rest).exec();
    format!("cannot run {}: {error}", program.to_string_lossy())
}

fn write_sysctl(path: &std::ffi::CStr, value: &[u8]) -> io::Result<()> {
    let fd = rustix::fs::open(path, OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty())?;
    rustix::io::write(&fd, value)?;
    Ok(())
}

static AVAILABLE: OnceLock<Result<(), String>> = OnceLock::new();
static AVAILABLE_CAPPED: OnceLock<Result<(), String>> = OnceLock::new();

/// Tries a pid namespace of a command's own.
pub(crate) fn probe_own() -> Result<(), String> {
    probe(PidNamespace::uncapped(), "a pid namespace of its own")
}

/// Tries a capped pid namespace.
pub(crate) fn probe_capped() -> Result<(), String> {
    PidNamespace::available()?;
    probe(PidNamespace::capped(8), "a capped pid namespace").map_err(|e| {
        format!("this kernel keeps no pid_max per pid namespace (Linux 6.14 or later does): {e}")
    })
}

fn probe(namespace: PidNamespace, what: &str) -> Result<(), String> {
    if !rustix::process::geteuid().is_root() {
        return Err(format!("needs root (CAP_SYS_ADMIN) for {what}"));
    }
    let mut command = Command::new("/bin/sh");
    command
        .args(["-c", "exit 0"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    namespace.apply_before_exec(&mut command, None);
    let mut std_command = command.into_std();
    match std_command.status() {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(format!("{what} failed here ({status})")),
        Err(e) => Err(format!("{what} cannot be made here: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn digits_are_decimal_ascii() {
        for value in [0u64, 7, 300, 363, 4_194_304, u64::MAX] {
            assert_eq!(Digits::of(value).as_bytes(), value.to_string().as_bytes());
        }
    }

    #[test]
    fn the_stand_in_refuses_arguments_not_its_own() {
        // Accepting any of these would start something in a pid namespace this
        // process never entered (and end this test process).
        let cases: [&[&str]; 7] = [
            &[],
            &["sh"],
            &["--"],
            &["--pid-max", "400", "--", "sh"],
            &["--pid-max", "x", "--last-pid", "300", "--", "sh"],
            &["--last-pid", "300", "--pid-max", "400", "--", "sh"],
            &["--pid-max", "400", "--last-pid", "300", "sh"],
        ];
        for args in cases {
            let args: Vec<OsString> = args.iter().map(Into::into).collect();
            let message = stand_in_main(&args);
            assert!(
                message.starts_with("__stand-in takes [--pid-max N --last-pid N] -- PROGRAM"),
                "{args:?}: {message}"
            );
        }
    }

    #[test]
    fn the_stand_ins_exec_carries_the_cap_the_command_and_its_environment() {
        let text = |pointers: &[*const libc::c_char]| {
            let (last, strings) = pointers.split_last().unwrap();
            assert!(last.is_null());
            strings
                .iter()
                // SAFETY: each points into the struct's own C strings.
                .map(|p| unsafe { CStr::from_ptr(*p) }.to_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        };
        let args = [OsString::from("-c"), OsString::from("exit 3")];
        let env = [(OsString::from("PATH"), OsString::from("/bin"))];
        let capped = StandInExec::new(
            Path::new("/x/stage2"),
            PidNamespace::capped(64),
            OsStr::new("sh"),
            &args,
            &env,
        )
        .unwrap();
        assert_eq!(
            text(&capped.argv),
            [
                "/x/stage2",
                "__stand-in",
                "--pid-max",
                "363",
                "--last-pid",
                "300",
                "--",
                "sh",
                "-c",
                "exit 3"
            ]
        );
        assert_eq!(text(&capped.envp), ["PATH=/bin"]);
        let uncapped = StandInExec::new(
            Path::new("/x/stage2"),
            PidNamespace::uncapped(),
            OsStr::new("sh"),
            &[],
            &[],
        )
        .unwrap();
        assert_eq!(
            text(&uncapped.argv),
            ["/x/stage2", "__stand-in", "--", "sh"]
        );
        assert_eq!(text(&uncapped.envp), Vec::<String>::new());
        let nul = [(OsString::from("A"), OsString::from("b\0c"))];
        assert!(
            StandInExec::new(
                Path::new("/x/stage2"),
                PidNamespace::uncapped(),
                OsStr::new("sh"),
                &[],
                &nul
            )
            .is_none()
        );
    }

    #[test]
    fn the_cap_counts_the_init_and_never_goes_below_the_kernels_minimum() {
        let cases = [(64, 363), (2, 301), (1, 301), (0, 301), (u64::MAX, 1 << 22)];
        for (processes, pid_max) in cases {
            assert_eq!(
                PidNamespace::capped(processes).cap.map(|c| c.pid_max),
                Some(Digits::of(pid_max)),
                "{processes}"
            );
        }
    }
}

//! Stage 2: the last code that runs before the command, inside the sandbox.
//!
//! Our own binary is re-executed (inside bubblewrap, or directly with the
//! landlock backend). It reads the command's environment from a file
//! descriptor, sets no_new_privs, drops every capability, confines the
//! filesystem with Landlock where the kernel has it, in network mode
//! `proxy` forks the egress forwarder, installs a seccomp filter, and
//! finally execs the command (or, given toolgate's lifeline, forks it and
//! stays as its keeper, see `keeper`). Any failure before the exec ends
//! the run: stage 2 fails closed, it never runs the command less confined.

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;

use crate::spec::NetworkMode;

mod build_mark;
pub use build_mark::same_build;
mod caps;
mod creations;
mod filter;
mod forwarder;
mod keeper;
pub use keeper::Report;
mod landlock_rules;
mod masks;
mod pooled;

pub use pooled::Handout;

pub use creations::supported as creations_guard_supported;
pub use filter::seccomp_filters;
pub use forwarder::{HTTP_PROXY_PORT, SOCKS_PROXY_PORT};

/// Exit status of stage 2 when it refuses to run the command.
pub const STAGE2_FAILURE: i32 = 125;

/// How stage 2 confines the command.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stage2Args {
    /// Network mode; with `none` and no network namespace (landlock
    /// backend), IP sockets are refused by seccomp and Landlock.
    pub network: NetworkMode,
    /// Whether a network namespace already isolates the command (bwrap).
    pub in_network_namespace: bool,
    /// Whether `socket(AF_UNIX)` is allowed.
    pub allow_unix_sockets: bool,
    /// Hierarchies the command may read and execute.
    pub read: Vec<PathBuf>,
    /// Hierarchies the command may write.
    pub write: Vec<PathBuf>,
    /// Read-only binds stage 2 mounts, in order, before it drops its
    /// capabilities: the plan's masks (bubblewrap backend, as root).
    pub masks: Vec<StageMask>,
    /// Absent protected names the command may not create (see
    /// `creations`): refused where they would appear, with no placeholder on
    /// the host.
    pub deny_create: Vec<PathBuf>,
    /// Existing protected entries (the read-only masks inside the roots):
    /// besides their mount, stage 2 refuses every write at or beneath them
    /// (`EROFS`, as the mount would). A host program that replaces one
    /// during the run (`git config` renames a new `.git/config` over the
    /// old) detaches the mount from it in every namespace, and what the
    /// command then finds there is the host's new, writable entry.
    pub deny_write: Vec<PathBuf>,
    /// Descriptor holding the environment as `KEY=VALUE\0` records.
    pub env_fd: Option<i32>,
    /// The egress proxy's unix socket (as seen inside the sandbox): stage 2
    /// forwards 127.0.0.1:3128 and 127.0.0.1:1080 to it before confining
    /// the command (network mode `proxy`).
    pub egress_socket: Option<PathBuf>,
    /// Descriptor of toolgate's lifeline (end-of-file once toolgate is gone): stage 2
    /// then stays as the command's keeper and ends its whole tree with toolgate, or
    /// when the command ends.
    pub lifeline_fd: Option<i32>,
}

/// One read-only bind of the plan's masks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageMask {
    /// What is mounted (inside the sandbox).
    pub source: PathBuf,
    /// Where.
    pub target: PathBuf,
    /// A read-deny mask over what existed when the plan was made: skipped
    /// when its target no longer exists (nothing is left to read; a private
    /// /etc file deleted meanwhile must not fail the command). Any other
    /// mask that cannot be mounted ends the run.
    pub hides: bool,
}

/// Why stage 2 did not run the command.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Stage2Error {
    /// Bad arguments, or confinement could not be applied (fail closed).
    #[error("stage 2: {0}")]
    Setup(String),
    /// The exec itself failed.
    #[error("cannot run {program}: {message}")]
    Exec {
        /// The program.
        program: String,
        /// The OS error.
        message: String,
        /// 127 when it does not exist, 126 otherwise (shell convention).
        code: i32,
    },
}

impl Stage2Error {
    /// The exit status stage 2 ends with.
    pub fn exit_code(&self) -> i32 {
        match self {
            Stage2Error::Setup(_) => STAGE2_FAILURE,
            Stage2Error::Exec { code, .. } => *code,
        }
    }
}

impl Stage2Args {
    /// The arguments as passed on the command line (paths and flags only:
    /// no environment value ever appears here).
    pub fn to_argv(&self) -> Vec<OsString> {
        let mut argv: Vec<OsString> = vec!["--network".into(), self.network.as_str().into()];
        if self.in_network_namespace {
            argv.push("--in-netns".into());
        }
        if self.allow_unix_sockets {
            argv.push("--allow-unix-sockets".into());
        }
        for (flag, paths) in [("--read", &self.read), ("--write", &self.write)] {
            for path in paths {
                argv.push(flag.into());
                argv.push(path.as_os_str().to_owned());
            }
        }
        for mask in &self.masks {
            argv.push(if mask.hides { "--hide" } else { "--ro-bind" }.into());
            argv.push(mask.source.as_os_str().to_owned());
            argv.push(mask.target.as_os_str().to_owned());
        }
        for (flag, paths) in [
            ("--deny-create", &self.deny_create),
            ("--deny-write", &self.deny_write),
        ] {
            for path in paths {
                argv.push(flag.into());
                argv.push(path.as_os_str().to_owned());
            }
        }
        if let Some(fd) = self.env_fd {
            argv.push("--env-fd".into());
            argv.push(fd.to_string().into());
        }
        if let Some(socket) = &self.egress_socket {
            argv.push("--egress-socket".into());
            argv.push(socket.as_os_str().to_owned());
        }
        if let Some(fd) = self.lifeline_fd {
            argv.push("--lifeline-fd".into());
            argv.push(fd.to_string().into());
        }
        argv
    }

    /// Parses `args` up to `--`; the rest is the command.
    pub fn parse(args: &[OsString]) -> Result<(Stage2Args, Vec<OsString>), Stage2Error> {
        let mut parsed = Stage2Args::default();
        let mut iter = args.iter();
        let value = |iter: &mut std::slice::Iter<OsString>, flag: &str| {
            iter.next()
                .cloned()
                .ok_or_else(|| Stage2Error::Setup(format!("{flag} needs a value")))
        };
        while let Some(arg) = iter.next() {
            match arg.to_str() {
                Some("--pooled") => {
                    if iter.next().is_some() || parsed.env_fd.is_none() {
                        return Err(Stage2Error::Setup(
                            "--pooled comes last, after --env-fd".into(),
                        ));
                    }
                    return Ok((parsed, Vec::new()));
                }
                Some("--") => {
                    let command: Vec<OsString> = iter.cloned().collect();
                    if command.is_empty() {
                        return Err(Stage2Error::Setup("no command after --".into()));
                    }
                    return Ok((parsed, command));
                }
                Some("--network") => {
                    let word = value(&mut iter, "--network")?;
                    parsed.network = word
                        .to_str()
                        .unwrap_or_default()
                        .parse()
                        .map_err(|e| Stage2Error::Setup(format!("{e}")))?;
                }
                Some("--in-netns") => parsed.in_network_namespace = true,
                Some("--allow-unix-sockets") => parsed.allow_unix_sockets = true,
                Some("--read") => parsed.read.push(value(&mut iter, "--read")?.into()),
                Some("--write") => parsed.write.push(value(&mut iter, "--write")?.into()),
                Some("--deny-create") => parsed
                    .deny_create
                    .push(value(&mut iter, "--deny-create")?.into()),
                Some("--deny-write") => parsed
                    .deny_write
                    .push(value(&mut iter, "--deny-write")?.into()),
                Some(flag @ ("--ro-bind" | "--hide")) => {
                    let source = value(&mut iter, flag)?;
                    let target = value(&mut iter, flag)?;
                    parsed.masks.push(StageMask {
                        source: source.into(),
                        target: target.into(),
                        hides: flag == "--hide",
                    });
                }
                Some(flag @ ("--env-fd" | "--lifeline-fd")) => {
                    let fd = value(&mut iter, flag)?;
                    let fd = fd
                        .to_str()
                        .and_then(|s| s.parse::<i32>().ok())
                        .filter(|fd| *fd > 2)
                        .ok_or_else(|| {
                            Stage2Error::Setup(format!("{flag} needs a descriptor > 2"))
                        })?;
                    if flag == "--env-fd" {
                        parsed.env_fd = Some(fd);
                    } else {
                        parsed.lifeline_fd = Some(fd);
                    }
                }
                Some("--egress-socket") => {
                    parsed.egress_socket = Some(value(&mut iter, "--egress-socket")?.into());
                }
                _ => return Err(Stage2Error::Setup(format!("unknown argument {arg:?}"))),
            }
        }
        Err(Stage2Error::Setup("missing -- before the command".into()))
    }
}

/// Confines this process as `args` say and execs `command`; with no
/// command (`--pooled`), waits for the one toolgate hands it (see
/// `pooled`). Returns only on failure, with what went wrong.
pub fn confine_and_exec(args: &Stage2Args, command: &[OsString]) -> Stage2Error {
    let run = |confined: Confined| {
        let (command, env, denied, report) = match confined {
            Confined::Now {
                env,
                denied,
                socket,
            } => (command.to_vec(), env, denied, socket),
            Confined::Pooled { fd, mounted } => {
                let (handout, socket) = pooled::wait(fd, &mounted)?;
                // Their directories as they are now.
                let denied = creations::DeniedNames::open(&args.deny_create, &args.deny_write)?;
                (handout.command, handout.env, denied, Some(socket))
            }
        };
        match args.lifeline_fd {
            Some(lifeline) => keeper::keep(lifeline, &command, env, denied, report),
            None if denied.is_empty() => exec(&command, env),
            None => Err(Stage2Error::Setup(
                "protected names can only be guarded with a lifeline".into(),
            )),
        }
    };
    match confine(args, command.is_empty()).and_then(run) {
        Ok(never) => match never {},
        Err(e) => e,
    }
}

/// The whole of stage 2 as a program: parses `args`, confines, execs.
/// Returns the exit status only when the command could not be run; the
/// reason goes to stderr.
pub fn main_with_args(args: impl Iterator<Item = OsString>) -> i32 {
    build_mark::keep();
    let args: Vec<OsString> = args.collect();
    if let Some((first, rest)) = args.split_first()
        && first.as_bytes() == crate::runner::STAND_IN_COMMAND.to_bytes()
    {
        eprintln!("toolgate: {}", crate::runner::stand_in_main(rest));
        return STAGE2_FAILURE;
    }
    let error = match Stage2Args::parse(&args) {
        Ok((parsed, command)) => confine_and_exec(&parsed, &command),
        Err(e) => e,
    };
    eprintln!("toolgate: {error}");
    error.exit_code()
}

/// What confinement leaves to do before the command runs.
enum Confined {
    /// The command is known: its environment and the names it may not create.
    Now {
        env: Vec<(OsString, OsString)>,
        denied: creations::DeniedNames,
        /// The environment's descriptor when it is a socket: the keeper's
        /// report goes back over it.
        socket: Option<OwnedFd>,
    },
    /// It is not yet (`--pooled`): the socket it comes on, and the masks as
    /// mounted.
    Pooled { fd: i32, mounted: pooled::Mounted },
}

fn confine(args: &Stage2Args, pooled: bool) -> Result<Confined, Stage2Error> {
    // First, while stage 2 still holds the namespace's CAP_SYS_ADMIN.
    masks::apply(&args.masks)?;
    let confined = match (pooled, args.env_fd) {
        (true, Some(fd)) => Confined::Pooled {
            fd,
            mounted: pooled::Mounted::record(&args.masks),
        },
        (true, None) => return Err(Stage2Error::Setup("--pooled needs --env-fd".into())),
        (false, fd) => {
            let (env, socket) = match fd {
                Some(fd) => read_env(fd)?,
                None => (Vec::new(), None),
            };
            Confined::Now {
                // Their directories as the command sees them, masks and all.
                denied: creations::DeniedNames::open(&args.deny_create, &args.deny_write)?,
                env,
                socket,
            }
        }
    };
    // Without no_new_privs a setuid binary would regain what we drop.
    rustix::thread::set_no_new_privs(true)
        .map_err(|e| Stage2Error::Setup(format!("cannot set no_new_privs: {e}")))?;
    caps::drop_all()?;
    landlock_rules::restrict(args)?;
    if let Some(socket) = &args.egress_socket {
        // Before the command's seccomp filter: the forwarder is forked with
        // everything above already applied, and keeps what the filter would
        // take away from the command, unix sockets, to reach the proxy.
        forwarder::start(socket, args)?;
    }
    for program in seccomp_filters(args)? {
        seccompiler::apply_filter(&program)
            .map_err(|e| Stage2Error::Setup(format!("cannot install the seccomp filter: {e}")))?;
    }
    Ok(confined)
}

/// A command's environment, in order.
type Environment = Vec<(OsString, OsString)>;

/// Reads the environment from `fd` to its end; returns it, and the
/// descriptor when it is a socket (made close-on-exec: the command never
/// holds it), for the keeper's report.
fn read_env(fd: i32) -> Result<(Environment, Option<OwnedFd>), Stage2Error> {
    // SAFETY: the descriptor number comes from our own parent, which opened
    // it for us and passed it in `--env-fd`; nothing else in this process
    // uses it, and a pipe is closed here, a socket made close-on-exec.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let setup = |e: std::io::Error| Stage2Error::Setup(format!("cannot read the environment: {e}"));
    rustix::io::fcntl_setfd(&owned, rustix::io::FdFlags::CLOEXEC).map_err(|e| setup(e.into()))?;
    let mut file = std::fs::File::from(owned);
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(setup)?;
    let is_socket = rustix::fs::fstat(&file).is_ok_and(|s| {
        rustix::fs::FileType::from_raw_mode(s.st_mode) == rustix::fs::FileType::Socket
    });
    let socket = is_socket.then(|| OwnedFd::from(file));
    let mut env = Vec::new();
    for record in bytes.split(|b| *b == 0).filter(|r| !r.is_empty()) {
        let Some(eq) = record.iter().position(|b| *b == b'=') else {
            return Err(Stage2Error::Setup("malformed environment record".into()));
        };
        env.push((
            OsStr::from_bytes(&record[..eq]).to_owned(),
            OsStr::from_bytes(&record[eq + 1..]).to_owned(),
        ));
    }
    Ok((env, socket))
}

/// Serialises an environment for `--env-fd`.
pub fn encode_env(env: &[(OsString, OsString)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (key, value) in env {
        out.extend_from_slice(key.as_bytes());
        out.push(b'=');
        out.extend_from_slice(value.as_bytes());
        out.push(0);
    }
    out
}

fn exec(
    command: &[OsString],
    env: Vec<(OsString, OsString)>,
) -> Result<std::convert::Infallible, Stage2Error> {
    let Some((program, rest)) = command.split_first() else {
        return Err(Stage2Error::Setup("no command".into()));
    };
    let err = std::process::Command::new(program)
        .args(rest)
        .env_clear()
        .envs(env)
        .exec();
    Err(Stage2Error::Exec {
        program: String::from_utf8_lossy(&program.clone().into_vec()).into_owned(),
        message: err.to_string(),
        code: if err.kind() == std::io::ErrorKind::NotFound {
            127
        } else {
            126
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn arguments_round_trip() {
        let args = Stage2Args {
            network: NetworkMode::None,
            in_network_namespace: true,
            allow_unix_sockets: true,
            read: vec!["/".into()],
            write: vec!["/w".into(), "/tmp".into()],
            masks: vec![
                StageMask {
                    source: "/dev/null".into(),
                    target: "/etc/shadow".into(),
                    hides: true,
                },
                StageMask {
                    source: "/w/.git/config".into(),
                    target: "/w/.git/config".into(),
                    hides: false,
                },
            ],
            deny_create: vec!["/w/.mcp.json".into(), "/w/.git".into()],
            deny_write: vec!["/w/.vscode".into()],
            env_fd: Some(3),
            egress_socket: Some("/run/toolgate/egress.sock".into()),
            lifeline_fd: Some(4),
        };
        let mut argv = args.to_argv();
        argv.push("--".into());
        argv.push("ls".into());
        assert_eq!(Stage2Args::parse(&argv), Ok((args, vec!["ls".into()])));
    }

    #[test]
    fn bad_arguments_are_refused() {
        let parse = |a: &[&str]| {
            let a: Vec<OsString> = a.iter().map(OsString::from).collect();
            Stage2Args::parse(&a).map(|_| ()).map_err(|e| e.to_string())
        };
        assert_eq!(
            parse(&["--network", "wifi", "--", "x"]),
            Err("stage 2: unknown network mode `wifi`, expected one of: none, proxy, host".into())
        );
        assert_eq!(
            parse(&["--env-fd", "1", "--", "x"]),
            Err("stage 2: --env-fd needs a descriptor > 2".into())
        );
        assert_eq!(
            parse(&["--lifeline-fd", "x", "--", "x"]),
            Err("stage 2: --lifeline-fd needs a descriptor > 2".into())
        );
        assert_eq!(
            parse(&["--read"]),
            Err("stage 2: --read needs a value".into())
        );
        assert_eq!(
            parse(&["--egress-socket"]),
            Err("stage 2: --egress-socket needs a value".into())
        );
        assert_eq!(parse(&["--"]), Err("stage 2: no command after --".into()));
        assert_eq!(
            parse(&["ls"]),
            Err("stage 2: unknown argument \"ls\"".into())
        );
    }

    #[test]
    fn environment_encoding_keeps_values_with_equals_and_newlines() {
        let env = vec![
            (OsString::from("A"), OsString::from("x=y")),
            (OsString::from("B"), OsString::from("line1\nline2")),
        ];
        let bytes = encode_env(&env);
        let (r, mut w) = std::io::pipe().unwrap();
        std::io::Write::write_all(&mut w, &bytes).unwrap();
        drop(w);
        let fd = std::os::fd::IntoRawFd::into_raw_fd(OwnedFd::from(r));
        let (read, socket) = read_env(fd).unwrap();
        assert_eq!(read, env);
        assert!(socket.is_none(), "a pipe is no report socket");
    }
}

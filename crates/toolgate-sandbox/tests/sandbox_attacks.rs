//! Attacks on the real sandbox, as root: each tries an escape and checks
//! that it failed and that nothing outside the sandbox changed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use pretty_assertions::assert_eq;
use toolgate_sandbox::{
    BackendChoice, NetworkMode, Sandbox, SandboxCommand, SandboxConfig, SandboxOutcome, SandboxSpec,
};

/// A root to work in, a sibling outside it with a canary, and a state dir.
struct World {
    dir: tempfile::TempDir,
    sandbox: Sandbox,
}

impl World {
    fn new(backend: BackendChoice) -> World {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("root")).unwrap();
        std::fs::create_dir(dir.path().join("outside")).unwrap();
        std::fs::write(dir.path().join("outside/canary"), "canary").unwrap();
        let config = SandboxConfig::new(
            PathBuf::from(env!("CARGO_BIN_EXE_toolgate-sandbox-stage2")),
            dir.path().join("state"),
        )
        .backend(backend);
        let host_env = BTreeMap::from([
            ("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".to_owned()),
            ("HOME".to_owned(), "/root".to_owned()),
            ("LANG".to_owned(), "C.UTF-8".to_owned()),
            ("TOOLGATE_TEST_SECRET".to_owned(), "s3cr3t-value".to_owned()),
            (
                "HTTPS_PROXY".to_owned(),
                "http://user:pw@proxy.example:3128".to_owned(),
            ),
        ]);
        let sandbox = Sandbox::new(config).unwrap().with_host_env(host_env);
        World { dir, sandbox }
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    fn outside(&self) -> PathBuf {
        self.dir.path().join("outside")
    }

    fn spec(&self) -> SandboxSpec {
        SandboxSpec::for_root(self.root())
    }

    async fn sh(&self, script: &str) -> SandboxOutcome {
        self.run(self.spec(), SandboxCommand::shell(script)).await
    }

    async fn run(&self, spec: SandboxSpec, command: SandboxCommand) -> SandboxOutcome {
        self.sandbox.run(&spec, command).await.unwrap()
    }

    /// Everything under `outside/`, to compare before and after.
    fn outside_listing(&self) -> Vec<(PathBuf, Vec<u8>)> {
        listing(&self.outside())
    }
}

fn listing(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                stack.push(path.clone());
                out.push((path, Vec::new()));
            } else {
                out.push((path.clone(), std::fs::read(&path).unwrap_or_default()));
            }
        }
    }
    out.sort();
    out
}

fn ok(outcome: &SandboxOutcome) {
    assert_eq!(outcome.outcome.exit_code, 0, "{outcome:#?}");
}

#[tokio::test]
async fn writes_stay_inside_the_roots() {
    let w = World::new(BackendChoice::Bwrap);
    let before = w.outside_listing();
    let outside = w.outside();
    let o = w.sh("echo inside > inside.txt && cat inside.txt").await;
    ok(&o);
    assert_eq!(o.outcome.stdout, "inside\n");
    assert_eq!(
        std::fs::read_to_string(w.root().join("inside.txt")).unwrap(),
        "inside\n"
    );
    for script in [
        format!("echo x > {}/new", outside.display()),
        format!("echo x > {}/canary", outside.display()),
        "echo x > ../outside/new".to_owned(),
        "echo x > /etc/toolgate-test".to_owned(),
        "echo x >> /etc/passwd".to_owned(),
        "echo x > /usr/toolgate-test".to_owned(),
        "mkdir /opt/toolgate-test".to_owned(),
    ] {
        let o = w.sh(&script).await;
        assert_ne!(o.outcome.exit_code, 0, "{script} succeeded");
    }
    assert!(!Path::new("/etc/toolgate-test").exists());
    assert!(!Path::new("/usr/toolgate-test").exists());
    assert_eq!(w.outside_listing(), before);
}

#[tokio::test]
async fn symlinks_do_not_lead_out() {
    let w = World::new(BackendChoice::Bwrap);
    let root = w.root();
    let outside = w.outside();
    let link =
        |target: &Path, name: &str| std::os::unix::fs::symlink(target, root.join(name)).unwrap();
    link(&outside.join("canary"), "to_canary");
    link(&outside, "to_outside_dir");
    link(&outside.join("not-yet"), "dangling");
    link(&root.join("hop2"), "hop1");
    link(&root.join("hop3"), "hop2");
    link(&outside.join("via-chain"), "hop3");
    let before = w.outside_listing();
    for script in [
        "echo x > to_canary",
        "echo x > to_outside_dir/new",
        "mkdir to_outside_dir/newdir",
        "echo x > dangling",
        "echo x > hop1",
        "cat to_canary",
    ] {
        let o = w.sh(script).await;
        assert_ne!(o.outcome.exit_code, 0, "{script} succeeded: {o:?}");
    }
    assert_eq!(w.outside_listing(), before);
    assert!(!outside.join("not-yet").exists());
}

#[tokio::test]
async fn devices_links_and_fifos() {
    let w = World::new(BackendChoice::Bwrap);
    let o = w.sh("ln /etc/passwd hard").await;
    assert_ne!(o.outcome.exit_code, 0, "hard link to /etc/passwd: {o:?}");
    assert!(!w.root().join("hard").exists());
    let o = w.sh("mknod disk b 8 0").await;
    assert_ne!(o.outcome.exit_code, 0, "mknod: {o:?}");
    assert!(!w.root().join("disk").exists());
    let o = w.sh("mkfifo pipe && test -p pipe").await;
    ok(&o);
}

#[tokio::test]
async fn mandatory_deny_paths_cannot_be_written_or_created_and_git_still_commits() {
    let w = World::new(BackendChoice::Bwrap);
    let root = w.root();
    let git = |args: &[&str]| {
        let status = std::process::Command::new("git")
            .args(args)
            .current_dir(&root)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .unwrap();
        assert!(status.status.success(), "{status:?}");
    };
    git(&["init", "-q"]);
    std::fs::write(root.join(".bashrc"), "# original\n").unwrap();
    std::fs::write(root.join("a.txt"), "a\n").unwrap();
    let before_config = std::fs::read(root.join(".git/config")).unwrap();
    let attempts = [
        "echo evil > .git/hooks/pre-commit",
        "mkdir -p .git/hooks/sub",
        "echo '[core] fsmonitor = evil' >> .git/config",
        "rm -f .git/config",
        "mv .git/config .git/config.old",
        "echo evil >> .bashrc",
        "echo '{}' > .mcp.json",
        "mkdir -p .vscode/x",
        "echo '{}' > .vscode/tasks.json",
        "mkdir .idea",
        "mkdir -p .claude && echo x > .claude/settings.json",
        "mkdir -p .gemini && echo '{\"mcpServers\":{}}' > .gemini/settings.json",
        "mkdir -p .codex && echo x > .codex/config.toml",
        "echo '{\"mcp\":{}}' > opencode.json",
        "mkdir -p .amazonq && echo '{}' > .amazonq/mcp.json",
        "mkdir -p .kiro/hooks && echo x > .kiro/hooks/run.kiro.hook",
        "mkdir -p .roo && echo '{}' > .roo/mcp.json",
        "mkdir -p .zed && echo '[]' > .zed/tasks.json",
        "mkdir -p .continue/mcpServers",
        "mkdir -p .windsurf && echo '{}' > .windsurf/hooks.json",
        "mkdir -p .clinerules/hooks",
        "echo 'lint-cmd: evil' > .aider.conf.yml",
        "rm -rf .git/hooks",
        "rm -f .bashrc",
        "mv .claude .claude-old",
    ];
    for script in attempts {
        let o = w.sh(script).await;
        assert_ne!(o.outcome.exit_code, 0, "`{script}` succeeded");
    }
    assert_eq!(
        std::fs::read(root.join(".git/config")).unwrap(),
        before_config
    );
    assert_eq!(
        std::fs::read_to_string(root.join(".bashrc")).unwrap(),
        "# original\n"
    );
    for absent in [
        ".mcp.json",
        ".vscode",
        ".idea",
        ".claude",
        ".claude-old",
        ".cursor",
        ".gemini",
        ".codex",
        "opencode.json",
        ".amazonq",
        ".kiro",
        ".roo",
        ".zed",
        ".continue",
        ".windsurf",
        ".clinerules",
        ".aider.conf.yml",
    ] {
        assert!(
            std::fs::symlink_metadata(root.join(absent)).is_err(),
            "{absent} exists on the host after the run"
        );
    }
    assert_eq!(
        std::fs::read_dir(root.join(".git/hooks"))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .ends_with("pre-commit")
            })
            .count(),
        0
    );
    // Objects, refs and the index stay writable: committing works.
    let o = w
        .sh("git -c user.name=t -c user.email=t@t add a.txt && git -c user.name=t -c user.email=t@t commit -qm inside && git log --oneline | wc -l")
        .await;
    ok(&o);
    assert_eq!(o.outcome.stdout.trim(), "1");
}

#[tokio::test]
async fn a_root_without_git_cannot_get_one() {
    let w = World::new(BackendChoice::Bwrap);
    let o = w
        .sh("mkdir -p .git/hooks && echo evil > .git/hooks/post-checkout")
        .await;
    assert_ne!(o.outcome.exit_code, 0);
    assert!(
        std::fs::symlink_metadata(w.root().join(".git")).is_err(),
        "stray .git left behind"
    );
}

#[tokio::test]
async fn processes_capabilities_and_kernel_interfaces() {
    let w = World::new(BackendChoice::Bwrap);
    let o = w
        .sh("grep -E '^(NoNewPrivs|CapEff|CapPrm|CapAmb|CapInh|CapBnd):' /proc/self/status")
        .await;
    ok(&o);
    assert_eq!(
        o.outcome.stdout,
        "CapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nCapAmb:\t0000000000000000\nNoNewPrivs:\t1\n"
    );
    // Only the sandbox's own processes are visible: bubblewrap's init, stage 2
    // keeping the command, bash, ls and grep.
    let host_pid = std::process::id();
    let o = w
        .sh(&format!(
            "test ! -e /proc/{host_pid} && ls /proc | grep -c '^[0-9]'"
        ))
        .await;
    ok(&o);
    assert!(
        o.outcome.stdout.trim().parse::<u32>().unwrap() <= 5,
        "{o:?}"
    );
    for script in [
        "umount /proc",
        "echo x > /proc/1/mem",
        "python3 -c 'import ctypes,sys; sys.exit(0 if ctypes.CDLL(None).ptrace(16, 1, 0, 0) == 0 else 1)'",
        "unshare -U true",
        "python3 -c 'import socket; socket.socket(socket.AF_UNIX)'",
    ] {
        let o = w.sh(script).await;
        assert_ne!(o.outcome.exit_code, 0, "`{script}` succeeded");
    }
    let o = w
        .sh("python3 -c 'import socket; socket.socket(socket.AF_UNIX)' 2>&1 | tail -1")
        .await;
    assert!(
        o.outcome
            .stdout
            .contains("[Errno 1] Operation not permitted"),
        "{o:?}"
    );
    // A copied setuid binary gains nothing.
    let o = w
        .sh("cp /usr/bin/cat ./suid-cat && chmod 4755 ./suid-cat && ./suid-cat /proc/self/status | grep -E '^(CapEff|CapPrm):'")
        .await;
    ok(&o);
    assert_eq!(
        o.outcome.stdout,
        "CapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n"
    );
}

#[tokio::test]
async fn unix_sockets_only_when_allowed() {
    let w = World::new(BackendChoice::Bwrap);
    let script = SandboxCommand::shell("python3 -c 'import socket; socket.socket(socket.AF_UNIX)'");
    let o = w.run(w.spec().allow_unix_sockets(true), script).await;
    ok(&o);
}

fn marker_alive(marker: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        std::fs::read(e.path().join("cmdline"))
            .map(|c| String::from_utf8_lossy(&c).contains(marker))
            .unwrap_or(false)
    })
}

#[tokio::test]
async fn background_processes_die_with_the_sandbox_and_timeouts_kill_the_group() {
    let w = World::new(BackendChoice::Bwrap);
    let marker = format!("toolgate-bg-{}", std::process::id());
    let o = w
        .sh(&format!("(exec -a {marker} sleep 1000) & echo started"))
        .await;
    ok(&o);
    assert!(
        !marker_alive(&marker),
        "background process outlived the sandbox"
    );

    let marker = format!("toolgate-timeout-{}", std::process::id());
    let command = SandboxCommand::shell(&format!(
        "(exec -a {marker} sleep 1000) & exec -a {marker} sleep 1000"
    ))
    .timeout(Duration::from_secs(1));
    let o = w.run(w.spec(), command).await;
    assert!(o.outcome.timed_out, "{o:?}");
    assert!(
        !marker_alive(&marker),
        "a process of the timed-out group survived"
    );
}

#[tokio::test]
async fn no_network_by_default() {
    let w = World::new(BackendChoice::Bwrap);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    for script in [
        format!("echo hi > /dev/tcp/127.0.0.1/{port}"),
        format!("curl -s --max-time 3 http://127.0.0.1:{port}/"),
        format!("nc -z -w 2 127.0.0.1 {port}"),
        "getent hosts localhost.localdomain.invalid example.com".to_owned(),
    ] {
        let o = w.sh(&script).await;
        assert_ne!(o.outcome.exit_code, 0, "`{script}` succeeded: {o:?}");
    }
    assert!(
        listener.accept().is_err(),
        "the host listener got a connection"
    );
    // With host networking the same listener is reachable.
    let o = w
        .run(
            w.spec().network(NetworkMode::Host),
            SandboxCommand::shell(&format!("echo hi > /dev/tcp/127.0.0.1/{port}")),
        )
        .await;
    ok(&o);
}

#[tokio::test]
async fn environment_is_an_allowlist_and_values_never_reach_argv() {
    let w = World::new(BackendChoice::Bwrap);
    let command = SandboxCommand::new(["env"])
        .pass_env("HTTPS_PROXY")
        .set_env("TOOL_SETTING", "on");
    let o = w.run(w.spec(), command).await;
    ok(&o);
    let mut names: Vec<&str> = o
        .outcome
        .stdout
        .lines()
        .map(|l| l.split('=').next().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["HOME", "LANG", "PATH", "TMPDIR", "TOOL_SETTING"],
        "{}",
        o.outcome.stdout
    );
    assert!(!o.outcome.stdout.contains("s3cr3t"));
    assert!(!o.outcome.stdout.contains("proxy.example"));

    // While a command runs, no host process carries a value in its argv.
    let value = format!("argv-probe-{}", std::process::id());
    let command = SandboxCommand::shell("sleep 2").set_env("PROBE", &value);
    let run = w.run(w.spec(), command);
    let scan = async {
        tokio::time::sleep(Duration::from_millis(800)).await;
        marker_alive(&value)
    };
    let (o, seen) = tokio::join!(run, scan);
    ok(&o);
    assert!(!seen, "an environment value appeared in a command line");
}

#[tokio::test]
async fn exit_codes_and_signals_pass_through() {
    let w = World::new(BackendChoice::Bwrap);
    // bubblewrap reports a command killed by signal n as exit 128 + n, as a
    // shell does; the code is what reaches the caller.
    for (script, code) in [
        ("true", 0),
        ("exit 42", 42),
        ("no-such-command", 127),
        ("kill -9 $$", 137),
    ] {
        let o = w.sh(script).await;
        assert_eq!(o.outcome.exit_code, code, "{script}: {o:?}");
        assert_eq!(o.weakened, None);
    }
    let l = World::new(BackendChoice::Landlock);
    let o = l.sh("kill -9 $$").await;
    assert_eq!(
        (o.outcome.exit_code, o.outcome.signal),
        (137, Some(9)),
        "{o:?}"
    );
}

#[tokio::test]
async fn landlock_backend_confines_without_mount_namespaces() {
    let w = World::new(BackendChoice::Landlock);
    let before = w.outside_listing();
    let outside = w.outside();
    let o = w.sh("echo inside > inside.txt && cat inside.txt").await;
    ok(&o);
    for script in [
        format!("echo x > {}/new", outside.display()),
        format!("echo x > {}/canary", outside.display()),
        format!("cat {}/canary", outside.display()),
        "echo x > /etc/toolgate-test".to_owned(),
        "cat /root/.bashrc /root/.profile".to_owned(),
        "python3 -c 'import socket; socket.socket(socket.AF_UNIX)'".to_owned(),
        "python3 -c 'import socket; socket.socket(socket.AF_INET)'".to_owned(),
        "echo x > /dev/sda".to_owned(),
    ] {
        let o = w.sh(&script).await;
        assert_ne!(o.outcome.exit_code, 0, "`{script}` succeeded: {o:?}");
    }
    let symlink = w.root().join("to_outside");
    std::os::unix::fs::symlink(&outside, &symlink).unwrap();
    let o = w.sh("echo x > to_outside/new").await;
    assert_ne!(o.outcome.exit_code, 0);
    let o = w
        .sh("grep -E '^(NoNewPrivs|CapEff|CapPrm|CapAmb):' /proc/self/status")
        .await;
    assert_eq!(
        o.outcome.stdout,
        "CapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapAmb:\t0000000000000000\nNoNewPrivs:\t1\n"
    );
    assert_eq!(w.outside_listing(), before);
    assert!(!Path::new("/etc/toolgate-test").exists());
}

#[tokio::test]
async fn the_none_backend_says_so_on_every_result() {
    let w = World::new(BackendChoice::None);
    let o = w.sh("true").await;
    ok(&o);
    assert_eq!(
        o.weakened.as_deref(),
        Some("ran WITHOUT a sandbox (backend `none`, for development only)")
    );
}

/// Runs `python3 -c` with a helper `t(f)` that gives `ok`, or the errno
/// name of the OSError `f` raised.
fn python(body: &str) -> SandboxCommand {
    let code = format!(
        "import errno, fcntl, os, socket, termios\n\
         def t(f):\n    try:\n        f()\n        return 'ok'\n    except OSError as e:\n        return errno.errorcode.get(e.errno, str(e.errno))\n\
         {body}"
    );
    SandboxCommand::new(["python3", "-c", &code])
}

/// One line: AF_VSOCK, AF_PACKET, AF_INET, AF_NETLINK, AF_UNIX sockets and
/// an AF_UNIX socketpair.
const SOCKET_PROBE: &str = "print(\
     t(lambda: socket.socket(40, socket.SOCK_STREAM).close()), \
     t(lambda: socket.socket(17, socket.SOCK_DGRAM).close()), \
     t(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()), \
     t(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0).close()), \
     t(lambda: socket.socket(socket.AF_UNIX).close()), \
     t(lambda: [s.close() for s in socket.socketpair(socket.AF_UNIX)]))";

#[tokio::test]
async fn socket_families_are_an_allowlist_under_both_backends() {
    // AF_VSOCK reaches the hypervisor whatever the network namespace, and
    // AF_PACKET the devices: refused by both backends. IP and netlink only
    // inside bwrap's empty network namespace; AF_UNIX only when allowed; a
    // socketpair reaches nothing and always works.
    let cases = [
        (BackendChoice::Bwrap, false, "EPERM EPERM ok ok EPERM ok\n"),
        (BackendChoice::Bwrap, true, "EPERM EPERM ok ok ok ok\n"),
        (
            BackendChoice::Landlock,
            false,
            "EPERM EPERM EPERM EPERM EPERM ok\n",
        ),
        (
            BackendChoice::Landlock,
            true,
            "EPERM EPERM EPERM EPERM ok ok\n",
        ),
    ];
    for (backend, unix, expected) in cases {
        let w = World::new(backend);
        let spec = w.spec().allow_unix_sockets(unix);
        let o = w.run(spec, python(SOCKET_PROBE)).await;
        ok(&o);
        assert_eq!(
            o.outcome.stdout, expected,
            "{backend:?}, unix sockets {unix}: {o:?}"
        );
    }
}

/// TIOCSTI on stdin, on /dev/tty, and on a pty the probe makes its own
/// controlling terminal (in a forked child that starts a session), where
/// the kernel itself would allow it.
const TIOCSTI_PROBE: &str = "\
def sti(fd):\n    fcntl.ioctl(fd, termios.TIOCSTI, b'x')\n\
def own_pty():\n    os.setsid()\n    master, slave = os.openpty()\n    fcntl.ioctl(slave, termios.TIOCSCTTY, 0)\n    sti(slave)\n\
def in_child(f):\n    r, w = os.pipe()\n    pid = os.fork()\n    if pid == 0:\n        os.write(w, t(f).encode())\n        os._exit(0)\n    os.close(w)\n    os.waitpid(pid, 0)\n    return os.read(r, 100).decode()\n\
print(t(lambda: sti(0)), t(lambda: sti(os.open('/dev/tty', os.O_RDONLY))), in_child(own_pty))";

#[tokio::test]
async fn terminal_input_cannot_be_injected() {
    // Unsandboxed, the probe shows what the kernel alone allows: stdin (a
    // pipe) is no terminal, there is no controlling terminal (the runner
    // starts a new session), and on a terminal of its own TIOCSTI works.
    let none = World::new(BackendChoice::None);
    let o = none.run(none.spec(), python(TIOCSTI_PROBE).stdin("")).await;
    ok(&o);
    assert_eq!(o.outcome.stdout, "ENOTTY ENXIO ok\n", "{o:?}");
    // Sandboxed, seccomp refuses the request itself, whatever the
    // descriptor (EPERM where the kernel said ENOTTY); there is still no
    // controlling terminal (the landlock backend does not even grant
    // /dev/tty); and Landlock (stage 2 applies it under both backends)
    // leaves /dev/ptmx read-only, so no pty can be opened.
    let cases = [
        (BackendChoice::Bwrap, "EPERM ENXIO EACCES\n"),
        (BackendChoice::Landlock, "EPERM EACCES EACCES\n"),
    ];
    for (backend, expected) in cases {
        let w = World::new(backend);
        let o = w.run(w.spec(), python(TIOCSTI_PROBE).stdin("")).await;
        ok(&o);
        assert_eq!(o.outcome.stdout, expected, "{backend:?}: {o:?}");
    }
}

#[tokio::test]
async fn landlock_backend_command_runs_in_a_session_of_its_own() {
    let w = World::new(BackendChoice::Landlock);
    // /proc/self/stat: pid (comm) state ppid pgrp session tty_nr ...; comm
    // is "bash". Field 6 is the session, 7 the controlling terminal. The
    // session is led by stage 2, which keeps the command as its parent.
    let o = w
        .sh("read -r pid comm state ppid pgrp sid tty rest < /proc/self/stat; echo \"$$ $pid $ppid $pgrp $sid $tty\"")
        .await;
    ok(&o);
    let ids: Vec<i64> = o
        .outcome
        .stdout
        .split_whitespace()
        .map(|f| f.parse().unwrap())
        .collect();
    let (pid, keeper) = (ids[0], ids[2]);
    assert_eq!(ids, [pid, pid, keeper, keeper, keeper, 0], "{o:?}");
    // The test's own session may be 0 (a process started by a container
    // runtime outside any session), which rustix's Pid cannot hold.
    // SAFETY: getsid(0) only reads the caller's session id.
    let ours = unsafe { libc::getsid(0) };
    assert!(ours >= 0, "getsid: {}", std::io::Error::last_os_error());
    assert_ne!(i64::from(ours), keeper, "{o:?}");
}

/// The kernel's Landlock ABI version (0 without Landlock).
fn landlock_abi() -> i64 {
    // SAFETY: with a null attribute pointer, size 0 and the VERSION flag
    // (1), landlock_create_ruleset only returns the ABI version.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32,
        )
    };
    abi.max(0)
}

#[tokio::test]
async fn landlock_backend_cannot_signal_host_processes() {
    // Same uid as the command (root) and no PID namespace: only the
    // Landlock signal scope (ABI 6) keeps it from killing the host's
    // processes.
    assert!(
        landlock_abi() >= 6,
        "this machine's kernel has Landlock ABI {}",
        landlock_abi()
    );
    let mut sleeper = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let pid = sleeper.id();
    let script = format!("kill -0 {pid} 2>&1; echo \"exit $?\"; kill -TERM {pid} 2>&1");
    let sandboxed = World::new(BackendChoice::Landlock);
    let o = sandboxed.sh(&script).await;
    let alive = sleeper.try_wait().unwrap().is_none();
    // Unsandboxed the same probe reaches the process: the test means it.
    let none = World::new(BackendChoice::None);
    let control = none.sh(&format!("kill -0 {pid}")).await;
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    assert!(alive, "the sandboxed command killed a host process: {o:?}");
    assert!(
        o.outcome.stdout.starts_with(&format!(
            "bash: line 1: kill: ({pid}) - Operation not permitted\nexit 1\n"
        )),
        "{o:?}"
    );
    assert_ne!(o.outcome.exit_code, 0, "{o:?}");
    ok(&control);
}

#[tokio::test]
async fn landlock_backend_cannot_reach_host_abstract_unix_sockets() {
    // Abstract sockets have no path for the filesystem rules to deny, and
    // without a network namespace the host's are in reach (X11, session
    // buses): only the Landlock scope (ABI 6) stops a connect.
    use std::os::linux::net::SocketAddrExt;
    assert!(landlock_abi() >= 6, "Landlock ABI {}", landlock_abi());
    let name = format!("toolgate-test-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(&name).unwrap();
    let _listener = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    let probe =
        format!("s = socket.socket(socket.AF_UNIX)\nprint(t(lambda: s.connect('\\0{name}')))");
    let none = World::new(BackendChoice::None);
    let o = none.run(none.spec(), python(&probe)).await;
    assert_eq!(o.outcome.stdout, "ok\n", "control: {o:?}");
    let w = World::new(BackendChoice::Landlock);
    let spec = w.spec().allow_unix_sockets(true);
    let o = w.run(spec, python(&probe)).await;
    assert_eq!(o.outcome.stdout, "EPERM\n", "{o:?}");
}

//! Network mode `proxy` with ssh, the way git reaches ssh remotes: through
//! the SOCKS port with OpenBSD netcat as the ProxyCommand, inside real
//! bubblewrap. Only loopback is reached: a host sshd on 127.0.0.1 and a
//! static resolver that maps the test names to it.
//!
//! Needs sshd, ssh, ssh-keygen (openssh-server, openssh-client) and OpenBSD
//! netcat (netcat-openbsd) on the host, and root to run sshd; the test fails
//! (never skips) when one is missing.

use std::net::{Ipv4Addr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use toolgate_sandbox::proxy::{ConnectionRecord, Protocol};

use crate::world::{
    TIMED_OUT, World, assert_bytes_flowed, assert_openbsd_nc, free_port, host, host_env,
};

const SSHD: &str = "/usr/sbin/sshd";
/// ssh's exit code for its own errors (connection, authentication).
const SSH_ERROR: i32 = 255;
/// Options every ssh run inside the sandbox uses: no known_hosts, no prompts.
const SSH_OPTIONS: &str =
    "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -i key";

/// `records` as (host, port, protocol, allowed), after checking that allowed
/// ones moved bytes both ways and refused ones none back.
fn summary(records: Vec<ConnectionRecord>) -> Vec<(String, u16, Protocol, bool)> {
    assert_bytes_flowed(&records);
    records
        .into_iter()
        .map(|r| (r.host, r.port, r.protocol, r.allowed))
        .collect()
}

/// A host sshd on 127.0.0.1 accepting root with the client key at
/// `<dir>/client_key`; killed when dropped.
struct Sshd {
    child: Child,
    port: u16,
}

impl Sshd {
    fn start(dir: &Path) -> Sshd {
        assert!(
            Path::new(SSHD).exists(),
            "this test needs {SSHD} on the host (apt-get install openssh-server)"
        );
        assert!(
            rustix::process::geteuid().is_root(),
            "this test runs sshd and logs in as root: run it as root"
        );
        for key in ["host_key", "client_key"] {
            host(
                "ssh-keygen",
                &["-q", "-t", "ed25519", "-N", "", "-C", key, "-f", key],
                dir,
            );
        }
        std::fs::copy(dir.join("client_key.pub"), dir.join("authorized_keys")).unwrap();
        // Privilege separation chroots into this directory.
        std::fs::create_dir_all("/run/sshd").unwrap();
        // A free port for sshd, which cannot report the one it picked.
        let port = free_port();
        let d = dir.display();
        let config = format!(
            "ListenAddress 127.0.0.1\n\
             Port {port}\n\
             HostKey {d}/host_key\n\
             AuthorizedKeysFile {d}/authorized_keys\n\
             PermitRootLogin prohibit-password\n\
             PubkeyAuthentication yes\n\
             PasswordAuthentication no\n\
             KbdInteractiveAuthentication no\n\
             UsePAM no\n\
             StrictModes no\n\
             PidFile {d}/sshd.pid\n\
             LogLevel VERBOSE\n"
        );
        std::fs::write(dir.join("sshd_config"), config).unwrap();
        let log = std::fs::File::create(dir.join("sshd.log")).unwrap();
        let child = Command::new(SSHD)
            .args(["-D", "-e", "-f"])
            .arg(dir.join("sshd_config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("this test needs {SSHD} on the host: {e}"));
        let mut server = Sshd { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err() {
            if let Some(status) = server.child.try_wait().unwrap() {
                panic!(
                    "sshd exited early: {status}: {}",
                    std::fs::read_to_string(dir.join("sshd.log")).unwrap_or_default()
                );
            }
            assert!(Instant::now() < deadline, "sshd never listened");
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn ssh_reaches_an_allowed_host_through_the_socks_port_only() {
    host("ssh", &["-V"], Path::new("/"));
    assert_openbsd_nc();
    let keys = tempfile::tempdir().unwrap();
    let sshd = Sshd::start(keys.path());
    let port = sshd.port;
    let sshd_log = || std::fs::read_to_string(keys.path().join("sshd.log")).unwrap_or_default();
    let w = World::new(
        &[format!("ssh.test:{port}")],
        &[],
        &["ssh.test", "other.test"],
        host_env(&[]),
    );
    let key = w.root().join("key");
    std::fs::copy(keys.path().join("client_key"), &key).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let proxy = "-o ProxyCommand='nc -X 5 -x 127.0.0.1:1080 %h %p'";
    let allowed = ("ssh.test".to_owned(), port, Protocol::Socks5, true);

    let ok = w
        .sh(&format!(
            "timeout 20 ssh {SSH_OPTIONS} -p {port} {proxy} root@ssh.test echo reached-over-ssh"
        ))
        .await;
    assert_eq!(ok.outcome.exit_code, 0, "{ok:#?}\nsshd: {}", sshd_log());
    assert!(ok.outcome.stdout.contains("reached-over-ssh"), "{ok:#?}");
    assert_eq!(summary(w.take_records()), vec![allowed.clone()]);

    let refused = w
        .sh(&format!(
            "timeout 20 ssh {SSH_OPTIONS} -p {port} {proxy} root@other.test echo reached-other"
        ))
        .await;
    assert_ne!(refused.outcome.exit_code, TIMED_OUT, "{refused:#?}");
    assert_eq!(refused.outcome.exit_code, SSH_ERROR, "{refused:#?}");
    assert!(
        refused.outcome.stderr.contains("not allowed by ruleset"),
        "{refused:#?}"
    );
    assert!(
        !refused.outcome.stdout.contains("reached-other"),
        "{refused:#?}"
    );
    assert_eq!(
        summary(w.take_records()),
        vec![("other.test".to_owned(), port, Protocol::Socks5, false)]
    );

    // The host's loopback sshd is not in the sandbox's network namespace.
    let direct = w
        .sh(&format!(
            "timeout 20 ssh {SSH_OPTIONS} -p {port} root@127.0.0.1 echo reached-directly"
        ))
        .await;
    assert_eq!(direct.outcome.exit_code, SSH_ERROR, "{direct:#?}");
    assert!(
        direct.outcome.stderr.contains("Connection refused"),
        "{direct:#?}"
    );
    assert!(
        !direct.outcome.stdout.contains("reached-directly"),
        "{direct:#?}"
    );
    assert_eq!(summary(w.take_records()), Vec::new());

    // What git runs: the GIT_SSH_COMMAND the sandbox sets, plus git's own
    // arguments.
    let git = w
        .sh(&format!(
            "test -n \"$GIT_SSH_COMMAND\" || {{ echo GIT_SSH_COMMAND unset >&2; exit 3; }}; \
             eval \"timeout 20 $GIT_SSH_COMMAND {SSH_OPTIONS} -p {port} \
             root@ssh.test echo via-git-ssh-command\""
        ))
        .await;
    assert_eq!(git.outcome.exit_code, 0, "{git:#?}\nsshd: {}", sshd_log());
    assert!(
        git.outcome.stdout.contains("via-git-ssh-command"),
        "{git:#?}"
    );
    assert_eq!(summary(w.take_records()), vec![allowed]);
    drop(sshd);
}

//! The shared setup: a sandbox in proxy mode with its egress rules, a static
//! resolver and the records it collects, plus host-side helpers.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pretty_assertions::assert_eq;
use toolgate_sandbox::egress::EgressRules;
use toolgate_sandbox::proxy::{ConnectionRecord, EventSink, StaticResolver};
use toolgate_sandbox::{
    BackendChoice, NetworkMode, Sandbox, SandboxCommand, SandboxConfig, SandboxOutcome, SandboxSpec,
};

/// `timeout`'s exit code when the command ran out of time.
pub const TIMED_OUT: i32 = 124;
/// curl: failure receiving network data (here: the proxy refused the CONNECT).
pub const CURL_RECV_ERROR: i32 = 56;

/// A sandbox in proxy mode whose resolver maps every one of `names` to
/// 127.0.0.1, with a workspace root and the records it collects.
pub struct World {
    pub dir: tempfile::TempDir,
    pub sandbox: Sandbox,
    records: Arc<Mutex<Vec<ConnectionRecord>>>,
}

impl World {
    /// Allows `allow`, denies `deny`, resolves `names` to loopback, and
    /// injects `host_env` as the host's environment.
    pub fn new(
        allow: &[String],
        deny: &[String],
        names: &[&str],
        host_env: BTreeMap<String, String>,
    ) -> World {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("root")).unwrap();
        let rules = EgressRules::new(allow, deny).unwrap();
        let resolver = names.iter().fold(StaticResolver::new(), |r, name| {
            r.with(name, [IpAddr::V4(Ipv4Addr::LOCALHOST)])
        });
        let records = Arc::new(Mutex::new(Vec::new()));
        let sink: EventSink = {
            let records = Arc::clone(&records);
            Arc::new(move |record| records.lock().unwrap().push(record))
        };
        let config = SandboxConfig::new(stage2(), dir.path().join("state"))
            .backend(BackendChoice::Bwrap)
            .egress(rules, Arc::new(resolver), sink);
        let sandbox = Sandbox::new(config).unwrap().with_host_env(host_env);
        World {
            dir,
            sandbox,
            records,
        }
    }

    pub fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    pub fn spec(&self) -> SandboxSpec {
        SandboxSpec::for_root(self.root()).network(NetworkMode::Proxy)
    }

    pub async fn sh(&self, script: &str) -> SandboxOutcome {
        let command = SandboxCommand::shell(script).timeout(Duration::from_secs(60));
        self.sandbox.run(&self.spec(), command).await.unwrap()
    }

    /// The records since the last call.
    pub fn take_records(&self) -> Vec<ConnectionRecord> {
        std::mem::take(&mut *self.records.lock().unwrap())
    }
}

/// The stage 2 binary the sandbox runs.
pub fn stage2() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_toolgate-sandbox-stage2"))
}

/// A host environment with a plain `PATH`, plus `extra`.
pub fn host_env(extra: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut env = BTreeMap::from([("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".to_owned())]);
    env.extend(
        extra
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    env
}

/// Allowed connections moved bytes both ways; refused ones none back.
pub fn assert_bytes_flowed(records: &[ConnectionRecord]) {
    for record in records {
        if record.allowed {
            assert!(record.bytes_up > 0, "{record:?}");
            assert!(record.bytes_down > 0, "{record:?}");
        } else {
            assert_eq!(record.bytes_down, 0, "{record:?}");
            assert!(!record.reason.is_empty(), "{record:?}");
        }
    }
}

/// Runs a host program, failing the test loudly when it is missing or fails.
pub fn host(program: &str, args: &[&str], cwd: &Path) -> String {
    let install = match program {
        "ssh" | "ssh-keygen" => "apt-get install openssh-server openssh-client",
        _ => "install it",
    };
    let out = Command::new(program)
        .args(args)
        .current_dir(cwd)
        .output()
        .unwrap_or_else(|e| panic!("this test needs `{program}` on the host ({install}): {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Whether /usr/bin/nc is OpenBSD netcat (which speaks SOCKS5 with `-X 5`).
pub fn openbsd_nc() -> bool {
    nc_path().to_string_lossy().contains("openbsd")
}

/// Fails the test unless /usr/bin/nc is OpenBSD netcat.
pub fn assert_openbsd_nc() {
    let nc = nc_path();
    assert!(
        nc.to_string_lossy().contains("openbsd"),
        "this test needs OpenBSD netcat as /usr/bin/nc (apt-get install netcat-openbsd), found {nc:?}"
    );
}

fn nc_path() -> PathBuf {
    std::fs::canonicalize("/usr/bin/nc").unwrap_or_default()
}

/// A free port on 127.0.0.1, for servers that cannot report the one they picked.
pub fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

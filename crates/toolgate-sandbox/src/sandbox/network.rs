//! Network mode `proxy` on the sandbox's side: the egress setup a
//! [`SandboxConfig`](super::SandboxConfig) carries, the proxy started for
//! each run, and the variables that point the command at it.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::SandboxError;
use crate::egress::EgressRules;
use crate::probe::Backend;
use crate::proxy::{ConnectionRecord, EgressProxy, EventSink, Resolver};
use crate::spec::{NetworkMode, SandboxSpec};
use crate::stage2::{HTTP_PROXY_PORT, SOCKS_PROXY_PORT};

/// What network mode `proxy` enforces: the rules, how allowed names are
/// resolved, and where each connection's record goes. Configuration, not
/// part of the spec: the spec only says `proxy`.
#[derive(Clone)]
pub struct EgressSetup {
    rules: EgressRules,
    resolver: Arc<dyn Resolver>,
    records: EventSink,
}

impl EgressSetup {
    /// The rules, resolver and record sink of every proxied run.
    pub fn new(rules: EgressRules, resolver: Arc<dyn Resolver>, records: EventSink) -> Self {
        EgressSetup {
            rules,
            resolver,
            records,
        }
    }

    /// The rules the proxy applies.
    pub fn rules(&self) -> &EgressRules {
        &self.rules
    }
}

impl std::fmt::Debug for EgressSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EgressSetup")
            .field("rules", &self.rules)
            .finish_non_exhaustive()
    }
}

/// Equal when the rules are and the resolver and sink are the same objects.
impl PartialEq for EgressSetup {
    fn eq(&self, other: &Self) -> bool {
        self.rules == other.rules
            && Arc::ptr_eq(&self.resolver, &other.resolver)
            && Arc::ptr_eq(&self.records, &other.records)
    }
}

impl Eq for EgressSetup {}

/// The egress setup a `proxy` run needs; refuses `proxy` without one or
/// outside bubblewrap. `None` for the other modes.
pub(super) fn egress_for<'a>(
    spec: &SandboxSpec,
    backend: Backend,
    egress: Option<&'a EgressSetup>,
) -> Result<Option<&'a EgressSetup>, SandboxError> {
    if spec.network != NetworkMode::Proxy {
        return Ok(None);
    }
    if backend != Backend::Bwrap {
        // Only an empty network namespace keeps the command from going
        // around the proxy; the other backends have none.
        return Err(SandboxError::Setup(format!(
            "network mode `proxy` needs the bwrap backend, but this sandbox uses `{backend}`; install bubblewrap or use network mode `none`"
        )));
    }
    match egress {
        Some(setup) => Ok(Some(setup)),
        None => Err(SandboxError::Setup(
            "network mode `proxy` needs an egress allowlist: configure one with \
             SandboxConfig::egress (the [network] allow and deny lists of the policy); \
             an empty allowlist refuses every connection"
                .into(),
        )),
    }
}

/// One run's proxy, on a socket in a private directory of the state dir.
/// Stopped (and its directory removed) by [`RunningProxy::stop`], or on drop
/// when the run ends early.
/// The sandbox's record sink, and the run's too when it has one.
fn records_to(sandbox: EventSink, run: Option<EventSink>) -> EventSink {
    match run {
        None => sandbox,
        Some(run) => Arc::new(move |record: ConnectionRecord| {
            sandbox(record.clone());
            run(record);
        }),
    }
}

pub(super) struct RunningProxy {
    proxy: Option<EgressProxy>,
    dir: PathBuf,
}

impl RunningProxy {
    pub(super) fn start(
        state_dir: &Path,
        setup: &EgressSetup,
        run_records: Option<EventSink>,
    ) -> Result<Self, SandboxError> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = state_dir.join(format!(
            "egress-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let setup_error = |dir: &Path, e: std::io::Error| {
            SandboxError::Setup(format!("egress proxy in {}: {e}", dir.display()))
        };
        // 0700: no other local user may reach this run's proxy, which would
        // let them borrow the sandbox's allowlist.
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| setup_error(&dir, e))?;
        let mut running = RunningProxy { proxy: None, dir };
        let proxy = EgressProxy::bind(
            running.dir.join("egress.sock"),
            Arc::new(setup.rules.clone()),
            Arc::clone(&setup.resolver),
            records_to(Arc::clone(&setup.records), run_records),
        )
        .map_err(|e| setup_error(&running.dir, e))?;
        running.proxy = Some(proxy);
        Ok(running)
    }

    /// The socket on the host, bound into the sandbox.
    pub(super) fn socket(&self) -> Option<&Path> {
        self.proxy.as_ref().map(EgressProxy::path)
    }

    /// Ends open connections (each emits its record) and removes the socket.
    pub(super) async fn stop(mut self) {
        if let Some(proxy) = self.proxy.take() {
            proxy.shutdown().await;
        }
    }
}

impl Drop for RunningProxy {
    fn drop(&mut self) {
        // The proxy's own drop removes the socket; the directory is ours.
        drop(self.proxy.take());
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Host variables that configure proxies. In any mode they never enter (they
/// often carry credentials); in `proxy` mode they are replaced by
/// [`proxy_environment`].
pub(super) fn is_proxy_variable(name: &str) -> bool {
    const PROXY_VARIABLES: &[&str] = &[
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "no_proxy",
        "ftp_proxy",
        "socks_proxy",
    ];
    PROXY_VARIABLES.contains(&name.to_ascii_lowercase().as_str())
}

/// The variables that send the command's traffic through the forwarder's
/// ports, in both the upper- and lower-case spellings tools read.
/// `NO_PROXY` names the sandbox's loopback, less the names `rules` allow.
///
/// `GIT_SSH_COMMAND` routes ssh through the SOCKS port with OpenBSD
/// netcat's `-X 5 -x`; it is set only when the `nc` first on `path` is
/// OpenBSD's, since other netcats spell the option differently (with
/// another netcat, point ssh's ProxyCommand at 127.0.0.1:1080 yourself).
pub(super) fn proxy_environment(
    path: Option<&str>,
    rules: Option<&EgressRules>,
) -> BTreeMap<String, String> {
    let http = format!("http://127.0.0.1:{HTTP_PROXY_PORT}");
    // socks5h: the name travels to the proxy, which resolves it; there is
    // no DNS inside the sandbox.
    let socks = format!("socks5h://127.0.0.1:{SOCKS_PROXY_PORT}");
    // The sandbox's own loopback is reached directly, except for a name the
    // allowlist lists: that one means the host's (a dev server on the
    // host's 127.0.0.1), which only the proxy can reach, so clients must
    // not bypass the proxy for it.
    let no_proxy = ["localhost", "127.0.0.1", "::1"]
        .into_iter()
        .filter(|name| !rules.is_some_and(|rules| rules.allows_host(name)))
        .collect::<Vec<_>>()
        .join(",");
    let mut env = BTreeMap::new();
    for (name, value) in [
        ("http_proxy", &http),
        ("https_proxy", &http),
        ("all_proxy", &socks),
        ("no_proxy", &no_proxy),
    ] {
        env.insert(name.to_ascii_uppercase(), value.clone());
        env.insert(name.to_owned(), value.clone());
    }
    if path.is_some_and(openbsd_netcat_first) {
        env.insert(
            "GIT_SSH_COMMAND".into(),
            format!("ssh -o ProxyCommand='nc -X 5 -x 127.0.0.1:{SOCKS_PROXY_PORT} %h %p'"),
        );
    }
    env
}

/// Whether the first `nc` on `path` is OpenBSD netcat (Debian and Ubuntu
/// name it `nc.openbsd` behind the `nc` alternative). The sandbox sees the
/// host's system directories, so the host's answer is the command's.
fn openbsd_netcat_first(path: &str) -> bool {
    std::env::split_paths(OsStr::new(path))
        .map(|dir| dir.join("nc"))
        .find(|nc| nc.exists())
        .and_then(|nc| std::fs::canonicalize(nc).ok())
        .and_then(|real| {
            real.file_name()
                .map(|n| n.to_string_lossy().contains("openbsd"))
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn only_proxy_mode_needs_an_egress_setup_and_only_bwrap_can_give_it() {
        let setup = EgressSetup::new(
            EgressRules::default(),
            Arc::new(crate::proxy::StaticResolver::new()),
            Arc::new(|_| {}),
        );
        let spec = |network| SandboxSpec::for_root("/w").network(network);
        let outcome = |network, backend, egress| {
            egress_for(&spec(network), backend, egress)
                .map(|found| found.is_some())
                .map_err(|e| e.to_string())
        };
        assert_eq!(outcome(NetworkMode::None, Backend::Bwrap, None), Ok(false));
        assert_eq!(
            outcome(NetworkMode::Host, Backend::Landlock, None),
            Ok(false)
        );
        assert_eq!(
            outcome(NetworkMode::Proxy, Backend::Bwrap, Some(&setup)),
            Ok(true)
        );
        let missing = outcome(NetworkMode::Proxy, Backend::Bwrap, None).unwrap_err();
        assert!(missing.contains("needs an egress allowlist"), "{missing}");
        let landlock = outcome(NetworkMode::Proxy, Backend::Landlock, Some(&setup)).unwrap_err();
        assert!(landlock.contains("needs the bwrap backend"), "{landlock}");
    }

    #[test]
    fn proxy_variables_are_recognised_in_any_case() {
        for name in ["HTTP_PROXY", "https_proxy", "All_Proxy", "NO_PROXY"] {
            assert!(is_proxy_variable(name), "{name}");
        }
        for name in ["PATH", "PROXY", "HTTP_PROXY_USER"] {
            assert!(!is_proxy_variable(name), "{name}");
        }
    }

    #[test]
    fn the_proxy_environment_points_at_the_forwarder() {
        let env = proxy_environment(None, None);
        let expected: BTreeMap<String, String> = [
            ("ALL_PROXY", "socks5h://127.0.0.1:1080"),
            ("HTTPS_PROXY", "http://127.0.0.1:3128"),
            ("HTTP_PROXY", "http://127.0.0.1:3128"),
            ("NO_PROXY", "localhost,127.0.0.1,::1"),
            ("all_proxy", "socks5h://127.0.0.1:1080"),
            ("http_proxy", "http://127.0.0.1:3128"),
            ("https_proxy", "http://127.0.0.1:3128"),
            ("no_proxy", "localhost,127.0.0.1,::1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(env, expected);
    }

    #[test]
    fn loopback_names_the_allowlist_lists_go_through_the_proxy() {
        let no_proxy = |allowed: &[&str]| {
            let rules = EgressRules::new(allowed, &[]).unwrap();
            let env = proxy_environment(None, Some(&rules));
            assert_eq!(env["NO_PROXY"], env["no_proxy"]);
            env["NO_PROXY"].clone()
        };
        for (allowed, expected) in [
            (&[][..], "localhost,127.0.0.1,::1"),
            (&["example.com"][..], "localhost,127.0.0.1,::1"),
            (&["127.0.0.1"][..], "localhost,::1"),
            (&["127.0.0.1:8080"][..], "localhost,::1"),
            (&["localhost", "[::1]:443"][..], "127.0.0.1"),
            (&["localhost", "127.0.0.1", "[::1]"][..], ""),
            // Another loopback address is not one of the three names.
            (&["127.0.0.2"][..], "localhost,127.0.0.1,::1"),
        ] {
            assert_eq!(no_proxy(allowed), expected, "{allowed:?}");
        }
    }

    #[test]
    fn git_ssh_goes_through_socks_only_with_openbsd_netcat() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        std::fs::write(bin.join("nc.openbsd"), "").unwrap();
        std::os::unix::fs::symlink(bin.join("nc.openbsd"), bin.join("nc")).unwrap();
        let other = dir.path().join("other");
        std::fs::create_dir(&other).unwrap();
        std::fs::write(other.join("nc"), "").unwrap();
        let path = |dirs: &[&Path]| std::env::join_paths(dirs).unwrap().into_string().unwrap();
        let openbsd = proxy_environment(Some(&path(&[&bin, &other])), None);
        assert_eq!(
            openbsd.get("GIT_SSH_COMMAND").map(String::as_str),
            Some("ssh -o ProxyCommand='nc -X 5 -x 127.0.0.1:1080 %h %p'")
        );
        let other_first = proxy_environment(Some(&path(&[&other, &bin])), None);
        assert_eq!(other_first.get("GIT_SSH_COMMAND"), None);
    }
}

//! What this machine offers for sandboxing, found once per process, and the
//! backend chosen from it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

mod weakening;
pub use weakening::Weakening;

/// How long one probe of bubblewrap may take before it counts as failed.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// What bubblewrap can do here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BwrapProbe {
    /// The binary, if found.
    pub path: Option<PathBuf>,
    /// Its `--version`.
    pub version: Option<String>,
    /// Whether it created a user namespace.
    pub user_namespace: bool,
    /// Whether it mounted a fresh /proc in a new pid namespace.
    pub proc_mount: bool,
    /// Why it cannot be used, when it cannot.
    pub error: Option<String>,
}

/// The findings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Probe {
    /// bubblewrap.
    pub bwrap: BwrapProbe,
    /// The Landlock ABI version, if the kernel has Landlock enabled.
    pub landlock_abi: Option<u32>,
    /// Whether seccomp filters are available.
    pub seccomp: bool,
    /// Whether toolgate runs as uid 0.
    pub root: bool,
    /// Whether a command can have a pid namespace of its own (and one capped
    /// by its `pid_max`), tried once like the rest; `None` when not probed.
    #[serde(default)]
    pub pid_namespaces: Option<PidNamespaces>,
}

/// What [`crate::runner`] can make of pid namespaces here (root only): `Err`
/// says why not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PidNamespaces {
    /// A pid namespace whose init ties the command's processes to toolgate.
    pub own: Result<(), String>,
    /// One whose `pid_max` caps the command's processes.
    pub capped: Result<(), String>,
}

/// Which sandbox runs commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    /// bubblewrap outside, stage 2 inside.
    Bwrap,
    /// Stage 2 alone: Landlock, seccomp, rlimits, no capabilities.
    Landlock,
    /// Nothing: development only, chosen only explicitly, and every result says so.
    None,
}

toolgate_core::wire_enum!(Backend, "sandbox backend", {
    Bwrap => "bwrap",
    Landlock => "landlock",
    None => "none",
});

/// What the configuration asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BackendChoice {
    /// bwrap where it works, else landlock; never `none`.
    #[default]
    Auto,
    /// bwrap or fail.
    Bwrap,
    /// landlock or fail.
    Landlock,
    /// No sandbox (development only).
    None,
}

toolgate_core::wire_enum!(BackendChoice, "sandbox backend", {
    Auto => "auto",
    Bwrap => "bwrap",
    Landlock => "landlock",
    None => "none",
});

/// No requested sandbox can run here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BackendUnavailable(pub String);

impl Probe {
    /// Probes now (see [`probe`] for the cached result).
    pub fn run(bwrap: Option<&Path>) -> Probe {
        Probe {
            bwrap: probe_bwrap(bwrap.map(Path::to_owned).or_else(|| find_in_path("bwrap"))),
            landlock_abi: landlock_abi(),
            seccomp: Path::new("/proc/sys/kernel/seccomp/actions_avail").exists(),
            root: rustix::process::geteuid().is_root(),
            pid_namespaces: Some(crate::runner::probe_pid_namespaces()),
        }
    }

    /// Whether the bwrap backend works.
    pub fn bwrap_usable(&self) -> bool {
        self.bwrap.path.is_some() && self.bwrap.user_namespace && self.bwrap.proc_mount
    }

    /// Whether the landlock backend works.
    pub fn landlock_usable(&self) -> bool {
        self.landlock_abi.is_some() && self.seccomp
    }

    /// The backend for `choice`, or why there is none.
    pub fn select(&self, choice: BackendChoice) -> Result<Backend, BackendUnavailable> {
        let bwrap_missing = || {
            let why = self.bwrap.error.clone().unwrap_or_default();
            format!(
                "bubblewrap cannot run here ({why}); install it (apt-get install bubblewrap) or allow user namespaces"
            )
        };
        let landlock_missing = "the kernel offers no Landlock with seccomp (Linux 5.13 or newer with Landlock enabled)";
        match choice {
            BackendChoice::Bwrap if self.bwrap_usable() => Ok(Backend::Bwrap),
            BackendChoice::Bwrap => Err(BackendUnavailable(bwrap_missing())),
            BackendChoice::Landlock if self.landlock_usable() => Ok(Backend::Landlock),
            BackendChoice::Landlock => Err(BackendUnavailable(landlock_missing.into())),
            BackendChoice::None => Ok(Backend::None),
            BackendChoice::Auto if self.bwrap_usable() => Ok(Backend::Bwrap),
            BackendChoice::Auto if self.landlock_usable() => Ok(Backend::Landlock),
            BackendChoice::Auto => Err(BackendUnavailable(format!(
                "no sandbox is available: {}; and {landlock_missing}. For development only, `sandbox.backend = \"none\"` runs commands unsandboxed",
                bwrap_missing()
            ))),
        }
    }
}

/// The findings for this process, probed on first use.
pub fn probe() -> &'static Probe {
    static PROBE: OnceLock<Probe> = OnceLock::new();
    PROBE.get_or_init(|| Probe::run(None))
}

/// The findings for this process, taken from `state_dir/probe.json` when
/// that was written for the same bubblewrap binary, kernel and user, and
/// probed (and stored) otherwise. Saves the probe's two bubblewrap runs on
/// every start of a short-lived `toolgate` process.
pub fn probe_cached(state_dir: &Path) -> &'static Probe {
    static PROBE: OnceLock<Probe> = OnceLock::new();
    PROBE.get_or_init(|| {
        let file = state_dir.join("probe.json");
        let key = cache_key();
        let cached = trusted_read(&file)
            .and_then(|bytes| serde_json::from_slice::<CachedProbe>(&bytes).ok())
            .filter(|c| c.key == key);
        match cached {
            Some(mut cached) => {
                // The binary toolgate runs is never taken from the file:
                // only what the key was computed from.
                cached.probe.bwrap.path = find_in_path("bwrap");
                cached.probe
            }
            None => {
                let probe = Probe::run(None);
                probe.store(state_dir);
                probe
            }
        }
    })
}

/// The file's bytes if it belongs to us and nobody else may write it.
fn trusted_read(path: &Path) -> Option<Vec<u8>> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(path).ok()?;
    let ours = meta.uid() == rustix::process::geteuid().as_raw();
    (meta.is_file() && ours && meta.mode() & 0o022 == 0).then(|| std::fs::read(path).ok())?
}

#[derive(Serialize, Deserialize)]
struct CachedProbe {
    key: String,
    probe: Probe,
}

/// What a stored probe is valid for: the bwrap binary (path and mtime), the
/// kernel release and the effective uid.
fn cache_key() -> String {
    let bwrap = find_in_path("bwrap");
    let mtime = bwrap
        .as_ref()
        .and_then(|p| std::fs::metadata(p).ok())
        .and_then(|m| m.modified().ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    let uname = rustix::system::uname();
    // What namespaces this process may make depends on its capabilities
    // too (root in a container without CAP_SYS_ADMIN).
    let capabilities = rustix::thread::capabilities(None).map_or(0, |c| c.effective.bits());
    format!(
        "{:?}:{mtime}:{}:{}:{capabilities:x}",
        bwrap,
        uname.release().to_string_lossy(),
        rustix::process::geteuid().as_raw()
    )
}

impl Probe {
    /// Stores the findings for [`probe_cached`]; failures only cost a re-probe later.
    pub fn store(&self, state_dir: &Path) {
        let cached = CachedProbe {
            key: cache_key(),
            probe: self.clone(),
        };
        if let Ok(bytes) = serde_json::to_vec_pretty(&cached) {
            let _ = std::fs::create_dir_all(state_dir);
            let tmp = state_dir.join(format!("probe.json.{}", std::process::id()));
            if std::fs::write(&tmp, bytes).is_ok() {
                let _ = std::fs::rename(&tmp, state_dir.join("probe.json"));
            }
        }
    }
}

fn find_in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

fn probe_bwrap(path: Option<PathBuf>) -> BwrapProbe {
    let mut probe = BwrapProbe {
        path: path.clone(),
        version: None,
        user_namespace: false,
        proc_mount: false,
        error: None,
    };
    let Some(path) = path else {
        probe.error = Some("bwrap not found in PATH".into());
        return probe;
    };
    probe.version = run_with_timeout(Command::new(&path).arg("--version"))
        .ok()
        .map(|out| out.trim().trim_start_matches("bubblewrap ").to_owned());
    let base = ["--unshare-user", "--ro-bind", "/", "/", "--die-with-parent"];
    match run_with_timeout(Command::new(&path).args(base).args(["--", "true"])) {
        Ok(_) => probe.user_namespace = true,
        Err(e) => {
            probe.error = Some(format!("cannot create a user namespace: {e}"));
            return probe;
        }
    }
    let with_proc = [
        "--unshare-pid",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--",
        "true",
    ];
    match run_with_timeout(Command::new(&path).args(base).args(with_proc)) {
        Ok(_) => probe.proc_mount = true,
        Err(e) => probe.error = Some(format!("cannot mount /proc in a new pid namespace: {e}")),
    }
    probe
}

/// Runs a short command, returning stdout, or what went wrong (including
/// a hang past the timeout, after which it is killed).
fn run_with_timeout(command: &mut Command) -> Result<String, String> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let started = Instant::now();
    loop {
        match child.try_wait().map_err(|e| e.to_string())? {
            Some(_) => break,
            None if started.elapsed() > PROBE_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("timed out after {PROBE_TIMEOUT:?}"));
            }
            None => std::thread::sleep(Duration::from_millis(5)),
        }
    }
    let output = child.wait_with_output().map_err(|e| e.to_string())?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        let stderr = String::from_utf8_lossy(&output.stderr);
        Err(format!("{} ({})", stderr.trim(), output.status))
    }
}

/// The Landlock ABI version the kernel reports, if Landlock is enabled.
fn landlock_abi() -> Option<u32> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute pointer, size 0 and the VERSION flag,
    // landlock_create_ruleset only returns the ABI version (or an error);
    // it reads and writes no memory of ours.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(abi).ok().filter(|v| *v > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn findings(bwrap: bool, landlock: Option<u32>) -> Probe {
        Probe {
            bwrap: BwrapProbe {
                path: bwrap.then(|| "/usr/bin/bwrap".into()),
                version: None,
                user_namespace: bwrap,
                proc_mount: bwrap,
                error: (!bwrap).then(|| "bwrap not found in PATH".into()),
            },
            landlock_abi: landlock,
            seccomp: true,
            root: true,
            pid_namespaces: None,
        }
    }

    #[test]
    fn the_pid_namespace_findings_survive_the_cache_and_an_older_cache_lacks_them() {
        let mut probe = findings(true, Some(6));
        probe.pid_namespaces = Some(PidNamespaces {
            own: Ok(()),
            capped: Err("this kernel keeps no pid_max per pid namespace".into()),
        });
        let bytes = serde_json::to_vec(&probe).unwrap();
        assert_eq!(serde_json::from_slice::<Probe>(&bytes).unwrap(), probe);
        // A cache written before the field existed: probed again in-process.
        let mut old: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        old.as_object_mut().unwrap().remove("pid_namespaces");
        let read: Probe = serde_json::from_value(old).unwrap();
        assert_eq!(read.pid_namespaces, None);
    }

    #[test]
    fn selection_prefers_bwrap_and_never_picks_none_by_itself() {
        use BackendChoice as C;
        let table = [
            (findings(true, Some(6)), C::Auto, Ok(Backend::Bwrap)),
            (findings(false, Some(6)), C::Auto, Ok(Backend::Landlock)),
            (findings(true, None), C::Landlock, Err(())),
            (findings(false, Some(6)), C::Bwrap, Err(())),
            (findings(false, None), C::Auto, Err(())),
            (findings(false, None), C::None, Ok(Backend::None)),
        ];
        for (probe, choice, expected) in table {
            assert_eq!(probe.select(choice).map_err(|_| ()), expected, "{choice:?}");
        }
        let err = findings(false, None).select(C::Auto).unwrap_err();
        assert!(err.0.contains("apt-get install bubblewrap"), "{err}");
    }

    #[test]
    fn wire_names_agree_with_serde() {
        for b in Backend::ALL {
            assert_eq!(serde_json::to_value(b).unwrap(), b.as_str());
        }
        for c in BackendChoice::ALL {
            assert_eq!(serde_json::to_value(c).unwrap(), c.as_str());
            assert_eq!(c.as_str().parse::<BackendChoice>(), Ok(c));
        }
        for n in crate::NetworkMode::ALL {
            assert_eq!(serde_json::to_value(n).unwrap(), n.as_str());
        }
        assert_eq!(
            "docker".parse::<BackendChoice>().unwrap_err().to_string(),
            "unknown sandbox backend `docker`, expected one of: auto, bwrap, landlock, none"
        );
    }

    #[test]
    fn probing_this_machine_finds_bubblewrap_and_landlock() {
        // scripts/test installs bubblewrap; CI runs on a kernel with Landlock.
        let found = Probe::run(None);
        assert!(found.bwrap_usable(), "bubblewrap unusable: {found:?}");
        assert!(found.landlock_abi.is_some(), "no Landlock: {found:?}");
        assert!(found.seccomp);
    }
}

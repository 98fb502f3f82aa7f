//! What a backend weaker than bubblewrap gives up, and how to get
//! bubblewrap back: said at every start, on every command result and by
//! the doctor, so a fallback is never silent.

use std::path::Path;

use serde::Serialize;

use super::{Backend, BwrapProbe, Probe};

/// Commands run under a weaker backend than bubblewrap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Weakening {
    /// The backend that runs commands instead.
    pub backend: Backend,
    /// Why bubblewrap does not (the probe's finding); `None` when it would
    /// work and the weaker backend was asked for.
    pub bwrap_unusable: Option<String>,
    /// Each protection bubblewrap gives that commands lose, one phrase each.
    pub lost: Vec<String>,
    /// How to get bubblewrap back.
    pub restore: String,
}

impl Probe {
    /// What commands lose under `backend` on this machine, or `None` for
    /// bubblewrap.
    pub fn weakening(&self, backend: Backend) -> Option<Weakening> {
        self.weakening_with(backend, &UsernsSysctls::read())
    }

    fn weakening_with(&self, backend: Backend, sysctls: &UsernsSysctls) -> Option<Weakening> {
        let lost = match backend {
            Backend::Bwrap => return None,
            Backend::Landlock => self.lost_under_landlock(),
            Backend::None => vec![
                "every confinement: commands run on this machine with toolgate's own uid and \
                 privileges, and can write anywhere toolgate can, use the network and signal \
                 any process"
                    .to_owned(),
            ],
        };
        let bwrap_unusable = (!self.bwrap_usable()).then(|| {
            self.bwrap
                .error
                .clone()
                .unwrap_or_else(|| "bubblewrap does not work here".to_owned())
        });
        let restore = if self.bwrap_usable() {
            format!(
                "bubblewrap works on this machine: set `[sandbox] backend = \"auto\"` (or \
                 \"bwrap\") and leave TOOLGATE_SANDBOX_BACKEND and --no-sandbox out instead of \
                 asking for `{backend}`"
            )
        } else {
            restore_bwrap(&self.bwrap, sysctls)
        };
        Some(Weakening {
            backend,
            bwrap_unusable,
            lost,
            restore,
        })
    }

    /// The protections of bubblewrap the landlock backend lacks: it has no
    /// namespaces and no mounts, only Landlock, seccomp and rlimits.
    fn lost_under_landlock(&self) -> Vec<String> {
        let mut lost = vec![
            // The masks are bind mounts; Landlock grants whole roots.
            "no masks inside the roots: commands can write and create the protected names \
             (.git/hooks, .git/config, toolgate.toml, .mcp.json, .envrc, .bashrc, .vscode, \
             .claude ...) and toolgate's own files there, which run code on the host later"
                .to_owned(),
            "no pid namespace: commands see every host process in /proc".to_owned(),
            "no network namespace: network mode `proxy` (the egress allowlist) is refused"
                .to_owned(),
        ];
        if self.root {
            // Read-deny masks over /etc/shadow and the host keys are mounts
            // too; Landlock reads all of /etc, and uid 0 owns those files.
            lost.push(
                "no read masks: run as root, commands can read /etc/shadow, /etc/sudoers and \
                 the ssh host keys"
                    .to_owned(),
            );
        }
        if self.landlock_abi.is_some_and(|abi| abi < 6) {
            lost.push(format!(
                "Landlock ABI {} lacks scopes (ABI 6, Linux 6.12): commands can signal host \
                 processes of the same uid and reach abstract unix sockets",
                self.landlock_abi.unwrap_or_default()
            ));
        }
        lost
    }
}

impl Weakening {
    /// One sentence for the start of `mcp`, `serve`, `call` and `sandbox`.
    pub fn warning(&self) -> String {
        let why = self
            .bwrap_unusable
            .as_deref()
            .map_or_else(String::new, |why| format!(" (bubblewrap: {why})"));
        match self.backend {
            Backend::None => format!(
                "WARNING: commands run WITHOUT a sandbox (backend `none`){why}: they lose {}. \
                 Only the command allowlist and the file tools' roots stand in the way; to \
                 sandbox them: {}",
                self.lost.join("; "),
                self.restore
            ),
            backend => format!(
                "WARNING: the sandbox is weakened: commands run under the {backend} backend, \
                 not bubblewrap{why}. Lost: {}. To get bubblewrap back: {}",
                self.lost.join("; "),
                self.restore
            ),
        }
    }
}

impl Backend {
    /// The note every command result of this backend carries: short, since
    /// an agent reads it on every call; the start and `toolgate doctor` say
    /// the rest.
    pub fn weakened_note(self) -> Option<&'static str> {
        match self {
            Backend::Bwrap => None,
            Backend::Landlock => Some(
                "sandbox weakened: ran under the landlock backend, not bubblewrap (no masks of \
                 protected names such as .git/hooks and toolgate.toml inside the roots, no pid \
                 namespace); `toolgate doctor` says what is lost and how to get bubblewrap back",
            ),
            Backend::None => Some("ran WITHOUT a sandbox (backend `none`, for development only)"),
        }
    }
}

/// The kernel settings that turn unprivileged user namespaces off, as read
/// from /proc/sys (absent where the kernel has no such knob).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct UsernsSysctls {
    /// Ubuntu 23.10 and later (AppArmor): 1 refuses them to unconfined programs.
    apparmor_restrict: Option<u64>,
    /// Debian's kernels before 11: 0 refuses them.
    userns_clone: Option<u64>,
    /// Every kernel: 0 refuses them.
    max_user_namespaces: Option<u64>,
}

impl UsernsSysctls {
    fn read() -> Self {
        let read = |name: &str| {
            std::fs::read_to_string(Path::new("/proc/sys").join(name))
                .ok()
                .and_then(|v| v.trim().parse().ok())
        };
        UsernsSysctls {
            apparmor_restrict: read("kernel/apparmor_restrict_unprivileged_userns"),
            userns_clone: read("kernel/unprivileged_userns_clone"),
            max_user_namespaces: read("user/max_user_namespaces"),
        }
    }
}

/// How to make bubblewrap usable: the package, or the one setting that
/// refuses its user namespaces when the kernel shows which it is.
fn restore_bwrap(bwrap: &BwrapProbe, sysctls: &UsernsSysctls) -> String {
    if bwrap.path.is_none() {
        return "install bubblewrap (`apt-get install bubblewrap`, `dnf install bubblewrap`, \
                `apk add bubblewrap`) and start toolgate again"
            .to_owned();
    }
    if bwrap.user_namespace {
        // Namespaces work, /proc does not: a container that masks parts of it.
        return "bubblewrap cannot mount /proc in a new pid namespace, which happens in a \
                container whose /proc has masked paths: run the container with \
                `--security-opt systempaths=unconfined` (Docker) or on the host"
            .to_owned();
    }
    if sysctls.apparmor_restrict == Some(1) {
        return "AppArmor refuses unprivileged user namespaces (Ubuntu 24.04's default): \
                `sysctl kernel.apparmor_restrict_unprivileged_userns=0` (persist it in \
                /etc/sysctl.d/), or an AppArmor profile for bwrap that allows `userns` \
                (/etc/apparmor.d/bwrap: `profile bwrap /usr/bin/bwrap flags=(unconfined) \
                { userns, }`, then `apparmor_parser -r /etc/apparmor.d/bwrap`)"
            .to_owned();
    }
    if sysctls.userns_clone == Some(0) {
        return "the kernel refuses unprivileged user namespaces (older Debian kernels): \
                `sysctl kernel.unprivileged_userns_clone=1` (persist it in /etc/sysctl.d/)"
            .to_owned();
    }
    if sysctls.max_user_namespaces == Some(0) {
        return "user namespaces are turned off: `sysctl user.max_user_namespaces=15000` \
                (persist it in /etc/sysctl.d/)"
            .to_owned();
    }
    "user namespaces are refused here and no kernel setting says why: in a container, allow \
     unshare/clone of user namespaces (Docker: `--security-opt seccomp=unconfined`); on a \
     host, check `kernel.apparmor_restrict_unprivileged_userns` (Ubuntu 24.04: set it to 0 \
     or add an AppArmor profile for bwrap) and `kernel.unprivileged_userns_clone` (older \
     Debian: set it to 1)"
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn machine(bwrap: Option<&str>, userns: bool, proc_mount: bool) -> Probe {
        Probe {
            bwrap: BwrapProbe {
                path: bwrap.map(Into::into),
                version: None,
                user_namespace: userns,
                proc_mount,
                error: (!(userns && proc_mount)).then(|| "it failed".to_owned()),
            },
            landlock_abi: Some(6),
            seccomp: true,
            root: false,
            pid_namespaces: None,
        }
    }

    #[test]
    fn the_way_back_to_bubblewrap_names_what_this_machine_lacks() {
        let none = UsernsSysctls::default();
        let ubuntu = UsernsSysctls {
            apparmor_restrict: Some(1),
            max_user_namespaces: Some(1000),
            ..none
        };
        let debian = UsernsSysctls {
            userns_clone: Some(0),
            ..none
        };
        let bwrap = Some("/usr/bin/bwrap");
        let table = [
            (
                machine(None, false, false),
                ubuntu,
                "apt-get install bubblewrap",
            ),
            (
                machine(bwrap, false, false),
                ubuntu,
                "kernel.apparmor_restrict_unprivileged_userns=0",
            ),
            (
                machine(bwrap, false, false),
                debian,
                "kernel.unprivileged_userns_clone=1",
            ),
            (
                machine(bwrap, false, false),
                UsernsSysctls {
                    max_user_namespaces: Some(0),
                    ..none
                },
                "user.max_user_namespaces=",
            ),
            (machine(bwrap, false, false), none, "seccomp=unconfined"),
            (
                machine(bwrap, true, false),
                ubuntu,
                "systempaths=unconfined",
            ),
            (machine(bwrap, true, true), ubuntu, "backend = \"auto\""),
        ];
        for (probe, sysctls, expected) in table {
            let weakening = probe.weakening_with(Backend::Landlock, &sysctls);
            let restore = weakening.map(|w| w.restore).unwrap_or_default();
            assert!(
                restore.contains(expected),
                "{probe:?} {sysctls:?}: {restore}"
            );
        }
    }

    #[test]
    fn landlock_names_each_lost_protection_and_bwrap_loses_none() {
        let mut probe = machine(None, false, false);
        let sysctls = UsernsSysctls::default();
        assert_eq!(probe.weakening_with(Backend::Bwrap, &sysctls), None);
        let lost = |probe: &Probe| {
            probe
                .weakening_with(Backend::Landlock, &sysctls)
                .map(|w| w.lost.len())
        };
        assert_eq!(lost(&probe), Some(3));
        probe.root = true;
        assert_eq!(lost(&probe), Some(4));
        probe.landlock_abi = Some(4);
        assert_eq!(lost(&probe), Some(5));
        let w = probe.weakening_with(Backend::Landlock, &sysctls);
        let warning = w.map(|w| w.warning()).unwrap_or_default();
        for part in [
            "weakened",
            "landlock backend",
            "bubblewrap: it failed",
            ".git/hooks",
            "toolgate.toml",
            "pid namespace",
            "/etc/shadow",
            "apt-get install bubblewrap",
        ] {
            assert!(warning.contains(part), "{part}: {warning}");
        }
        let none = probe.weakening_with(Backend::None, &sysctls);
        assert!(none.is_some_and(|w| w.warning().contains("WITHOUT a sandbox")));
    }

    #[test]
    fn every_result_of_a_weaker_backend_carries_a_note() {
        assert_eq!(Backend::Bwrap.weakened_note(), None);
        for backend in [Backend::Landlock, Backend::None] {
            assert!(backend.weakened_note().is_some(), "{backend}");
        }
    }
}

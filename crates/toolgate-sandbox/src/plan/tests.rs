use std::collections::BTreeMap;

use pretty_assertions::assert_eq;

use super::*;
use crate::repos::{DirSource, Listed, ListedKind};

/// A host described in a table; everything not listed is missing.
#[derive(Default)]
struct Fixture {
    entries: BTreeMap<PathBuf, HostEntry>,
    texts: BTreeMap<PathBuf, String>,
    unreadable: Vec<PathBuf>,
    private: Vec<PathBuf>,
    /// Replaces the plan's budget for the nested-repository walk.
    scan_budget: Option<usize>,
    /// An unprivileged toolgate: bubblewrap mounts the masks.
    unprivileged: bool,
}

impl Fixture {
    fn merged_usr() -> Self {
        let mut f = Fixture::default();
        for dir in ["/usr", "/etc", "/opt", "/etc/ssh"] {
            f.dir(dir);
        }
        f.file("/etc/shadow");
        f.file("/etc/ssh/ssh_host_ed25519_key");
        f.link("/bin", "usr/bin");
        f.link("/sbin", "usr/sbin");
        f.link("/lib", "usr/lib");
        f.link("/lib64", "usr/lib64");
        f
    }

    fn dir(&mut self, p: &str) -> &mut Self {
        self.entries.insert(p.into(), HostEntry::Dir);
        self
    }

    fn file(&mut self, p: &str) -> &mut Self {
        self.entries.insert(p.into(), HostEntry::File);
        self
    }

    fn link(&mut self, p: &str, target: &str) -> &mut Self {
        self.entries
            .insert(p.into(), HostEntry::Symlink(target.into()));
        self
    }

    fn text(&mut self, p: &str, text: &str) -> &mut Self {
        self.file(p);
        self.texts.insert(p.into(), text.into());
        self
    }
}

impl HostView for Fixture {
    fn masks_in_stage2(&self) -> bool {
        !self.unprivileged
    }
    fn entry(&self, path: &Path) -> HostEntry {
        if path == Path::new("/") {
            return HostEntry::Dir;
        }
        self.entries
            .get(path)
            .cloned()
            .unwrap_or(HostEntry::Missing)
    }

    fn read_small(&self, path: &Path) -> Option<String> {
        self.texts.get(path).cloned()
    }

    fn readable(&self, path: &Path) -> bool {
        !self.unreadable.iter().any(|p| p == path)
    }

    fn private_system_paths(&self) -> Vec<PathBuf> {
        self.private.clone()
    }

    fn is_empty(&self, path: &Path) -> bool {
        match self.entry(path) {
            HostEntry::Dir => !self.entries.keys().any(|p| p.parent() == Some(path)),
            HostEntry::File => self.texts.get(path).is_none_or(String::is_empty),
            _ => false,
        }
    }

    fn scan_root(&self, root: &Path, budget: usize) -> Result<RootScan, ScanTooLarge> {
        crate::repos::scan_root(root, self.scan_budget.unwrap_or(budget), self)
    }
}

impl DirSource for Fixture {
    type Dir = PathBuf;

    fn open_root(&self, path: &Path) -> Option<PathBuf> {
        Some(path.to_owned())
    }

    fn open_child(&self, _: &PathBuf, parent: &Path, name: &std::ffi::OsStr) -> Option<PathBuf> {
        Some(parent.join(name))
    }

    fn list(&self, dir: &PathBuf) -> Option<Vec<Listed>> {
        if self.unreadable.contains(dir) {
            return None;
        }
        let listed = self
            .entries
            .iter()
            .filter(|(p, _)| p.parent() == Some(dir.as_path()))
            .map(|(p, e)| {
                let kind = match e {
                    HostEntry::Dir => ListedKind::Dir,
                    HostEntry::File => ListedKind::File,
                    HostEntry::Symlink(_) => ListedKind::Symlink,
                    HostEntry::Missing => ListedKind::Other,
                };
                (p.file_name().unwrap_or_default().to_owned(), kind)
            })
            .collect();
        Some(listed)
    }
}

fn files() -> PlanFiles {
    PlanFiles {
        bwrap: "/usr/bin/bwrap".into(),
        stage2: "/opt/toolgate/bin/toolgate".into(),
        empty_file: "/run/toolgate/empty".into(),
        empty_dir: "/run/toolgate/empty-dir".into(),
        stage2_prefix: Vec::new(),
        egress_socket: Some("/var/lib/toolgate/egress-RUN/egress.sock".into()),
    }
}

fn stage2_for(spec: &SandboxSpec) -> Stage2Args {
    Stage2Args {
        network: spec.network,
        in_network_namespace: spec.network != NetworkMode::Host,
        allow_unix_sockets: spec.allow_unix_sockets,
        read: vec!["/".into()],
        write: spec.writable_roots.clone(),
        masks: Vec::new(),
        deny_create: Vec::new(),
        deny_write: Vec::new(),
        env_fd: Some(3),
        egress_socket: (spec.network == NetworkMode::Proxy).then(|| EGRESS_SOCKET_PATH.into()),
        lifeline_fd: None,
    }
}

fn plan(spec: &SandboxSpec, host: &Fixture) -> BwrapPlan {
    let command: Vec<OsString> = vec!["bash".into(), "-c".into(), "make test".into()];
    BwrapPlan::build(spec, &files(), &stage2_for(spec), &command, host).unwrap()
}

/// The argv one flag per line, as a reviewer reads it.
fn render(plan: &BwrapPlan) -> String {
    let mut out = String::new();
    for arg in &plan.argv {
        let arg = arg.to_string_lossy();
        if arg.starts_with("--") && !out.is_empty() {
            out.push('\n');
        } else if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&arg);
    }
    out.push_str("\n\ncreated mount points:");
    for p in &plan.created_mount_points {
        out.push_str(&format!("\n{}", p.display()));
    }
    out
}

#[test]
fn plan_for_a_git_repository_on_a_merged_usr_host() {
    let mut host = Fixture::merged_usr();
    host.dir("/work")
        .dir("/work/app")
        .dir("/work/app/.git")
        .dir("/work/app/.git/hooks")
        .file("/work/app/.git/config")
        .file("/work/app/.bashrc")
        .dir("/work/app/.vscode")
        .dir("/work/app/secrets");
    let spec = SandboxSpec::for_root("/work/app")
        .read_deny("/work/app/secrets")
        .write_deny("/work/app/Cargo.lock");
    insta::assert_snapshot!(render(&plan(&spec, &host)));
}

#[test]
fn plan_for_a_fresh_directory_without_git_on_a_split_usr_host() {
    let mut host = Fixture::default();
    for dir in [
        "/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc", "/tmp", "/tmp/job",
    ] {
        host.dir(dir);
    }
    let spec = SandboxSpec::for_root("/tmp/job")
        .network(NetworkMode::Host)
        .allow_unix_sockets(true);
    insta::assert_snapshot!(render(&plan(&spec, &host)));
}

#[test]
fn plan_in_proxy_mode_binds_the_egress_socket_in_an_empty_network_namespace() {
    let mut host = Fixture::merged_usr();
    host.dir("/work").dir("/work/app").dir("/work/app/.git");
    let spec = SandboxSpec::for_root("/work/app").network(NetworkMode::Proxy);
    insta::assert_snapshot!(render(&plan(&spec, &host)));
}

#[test]
fn proxy_mode_without_a_proxy_socket_is_refused() {
    let mut host = Fixture::merged_usr();
    host.dir("/w");
    let spec = SandboxSpec::for_root("/w").network(NetworkMode::Proxy);
    let files = PlanFiles {
        egress_socket: None,
        ..files()
    };
    let err =
        BwrapPlan::build(&spec, &files, &stage2_for(&spec), &["true".into()], &host).unwrap_err();
    assert_eq!(err, PlanError::NoEgressSocket);
}

#[test]
fn plan_for_a_git_worktree_protects_the_real_git_dir() {
    let mut host = Fixture::merged_usr();
    host.dir("/src")
        .dir("/src/main")
        .dir("/src/main/.git")
        .dir("/src/main/.git/hooks")
        .file("/src/main/.git/config")
        .dir("/src/main/.git/worktrees")
        .dir("/src/main/.git/worktrees/feature")
        .text("/src/main/.git/worktrees/feature/commondir", "../..\n")
        .dir("/src/feature")
        .text(
            "/src/feature/.git",
            "gitdir: ../main/.git/worktrees/feature\n",
        );
    let spec = SandboxSpec::for_root("/src/feature").writable_root("/src/main");
    let plan = plan(&spec, &host);
    let text = render(&plan);
    for protected in [
        "/src/main/.git/hooks /src/main/.git/hooks",
        "/src/main/.git/config /src/main/.git/config",
    ] {
        assert!(text.contains(&format!("--ro-bind {protected}")), "{text}");
    }
    // The worktree's own git dir lies under the read-only `.git/worktrees`:
    // nothing below it is masked again (bwrap could not make a mount point
    // inside a read-only mount).
    assert!(
        text.contains("--ro-bind /src/main/.git/worktrees /src/main/.git/worktrees\n"),
        "{text}"
    );
    assert!(!text.contains(" /src/main/.git/worktrees/"), "{text}");
    insta::assert_snapshot!(text);
}

#[test]
fn mounts_come_in_the_fixed_order() {
    let mut host = Fixture::merged_usr();
    host.dir("/w")
        .dir("/w/.git")
        .file("/w/.git/config")
        .dir("/w/private");
    let spec = SandboxSpec::for_root("/w")
        .read_deny("/w/private")
        .network(NetworkMode::Proxy);
    let argv: Vec<String> = plan(&spec, &host)
        .argv
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let position = |needle: &[&str]| {
        argv.windows(needle.len())
            .position(|w| w == needle)
            .unwrap_or_else(|| panic!("{needle:?} not in {argv:?}"))
    };
    let order = [
        position(&["--cap-drop", "ALL"]),
        position(&["--ro-bind", "/usr", "/usr"]),
        position(&["--proc", "/proc"]),
        position(&["--tmpfs", "/tmp"]),
        position(&["--bind", "/w", "/w"]),
        position(&["--bind", "/w/.git", "/w/.git"]),
        position(&[
            "--ro-bind",
            "/var/lib/toolgate/egress-RUN/egress.sock",
            EGRESS_SOCKET_PATH,
        ]),
        position(&["--ro-bind", "/run/toolgate/empty-dir", MASK_DIR_PATH]),
        position(&["--ro-bind", "/opt/toolgate/bin/toolgate", STAGE2_PATH]),
        position(&["--", STAGE2_PATH]),
        // The masks are stage 2's, after bubblewrap's mounts and in the
        // same fixed order among themselves; the command comes last.
        position(&["--hide", "/dev/null", "/etc/shadow"]),
        position(&["--hide", MASK_DIR_PATH, "/w/private"]),
        position(&["--ro-bind", "/w/.git/config", "/w/.git/config"]),
        position(&["--", "bash", "-c"]),
    ];
    let mut sorted = order;
    sorted.sort();
    assert_eq!(order, sorted, "{argv:?}");
    // No system path is both bound and recreated as a symlink.
    for path in SYSTEM_PATHS {
        let bound = argv
            .windows(3)
            .any(|w| w[0] == "--ro-bind" && w[2] == *path);
        let linked = argv
            .windows(3)
            .any(|w| w[0] == "--symlink" && w[2] == *path);
        assert!(!(bound && linked), "{path} bound and linked");
    }
}

#[test]
fn unprivileged_the_masks_are_bubblewraps_in_the_same_order() {
    let mut host = Fixture::merged_usr();
    host.dir("/w")
        .dir("/w/.git")
        .file("/w/.git/config")
        .dir("/w/private");
    let spec = SandboxSpec::for_root("/w").read_deny("/w/private");
    let as_root = plan(&spec, &host);
    host.unprivileged = true;
    let unprivileged = plan(&spec, &host);
    let argv: Vec<String> = unprivileged
        .argv
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let stage2 = argv.iter().position(|a| a == STAGE2_PATH).unwrap();
    // Each mask with its source named by kind, wherever the mounter sees it.
    let masks = |argv: &[String], dir: &str, file: &str| -> Vec<String> {
        argv.windows(3)
            .filter(|w| (w[0] == "--ro-bind" || w[0] == "--hide") && w[2].starts_with("/w/"))
            .map(|w| {
                let source = if w[1] == dir {
                    "EMPTY-DIR"
                } else if w[1] == file {
                    "EMPTY-FILE"
                } else {
                    &w[1]
                };
                format!("{source} {}", w[2])
            })
            .collect()
    };
    let (host_dir, host_file) = ("/run/toolgate/empty-dir", "/run/toolgate/empty");
    // The same masks in the same order, before stage 2 and from the host's
    // empty directory; no capability is kept for stage 2.
    let root_argv: Vec<String> = as_root
        .argv
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let bwrap_masks = masks(&argv[..stage2], host_dir, host_file);
    assert!(bwrap_masks.contains(&"EMPTY-FILE /w/.git/config.worktree".to_owned()));
    assert_eq!(
        bwrap_masks,
        masks(&root_argv, MASK_DIR_PATH, MASK_FILE_PATH)
    );
    assert!(masks(&argv[stage2..], host_dir, host_file).is_empty());
    assert!(!argv.iter().any(|a| a == "--cap-add"), "{argv:?}");
    assert!(root_argv.iter().any(|a| a == "CAP_SYS_ADMIN"));
    assert_eq!(
        as_root.created_mount_points,
        unprivileged.created_mount_points
    );
}

#[test]
fn specs_that_cannot_work_are_refused() {
    let mut host = Fixture::merged_usr();
    host.dir("/w").file("/w/file");
    let cases = [
        (
            SandboxSpec::for_root("relative"),
            "sandbox path `relative` is not absolute",
        ),
        (
            SandboxSpec::for_root("/nope"),
            "writable root `/nope` is not an existing directory",
        ),
        (
            SandboxSpec::for_root("/w/file"),
            "writable root `/w/file` is not an existing directory",
        ),
        (
            SandboxSpec::for_root("/w").cwd("/etc"),
            "working directory `/etc` is not inside a writable root or a read-only path",
        ),
    ];
    for (spec, expected) in cases {
        let err = BwrapPlan::build(&spec, &files(), &stage2_for(&spec), &["true".into()], &host)
            .unwrap_err();
        assert_eq!(err.to_string(), expected);
    }
}

#[test]
fn resolve_follows_symlinks_and_finds_the_first_missing_component() {
    let mut host = Fixture::default();
    host.dir("/w")
        .link("/w/l", "/w/real")
        .dir("/w/real")
        .link("/w/loop", "/w/loop")
        .file("/w/f");
    let cases = [
        (
            "/w/real",
            Resolved::Existing {
                path: "/w/real".into(),
                is_dir: true,
            },
        ),
        (
            "/w/l/x/y",
            Resolved::Missing {
                first_missing: "/w/real/x".into(),
            },
        ),
        (
            "/w/a/b",
            Resolved::Missing {
                first_missing: "/w/a".into(),
            },
        ),
        (
            "/w/f",
            Resolved::Existing {
                path: "/w/f".into(),
                is_dir: false,
            },
        ),
        ("/w/f/x", Resolved::Unreachable),
        ("/w/loop/x", Resolved::Unreachable),
    ];
    for (path, expected) in cases {
        assert_eq!(resolve(&host, Path::new(path)), expected, "{path}");
    }
}

#[test]
fn files_the_caller_cannot_read_need_no_read_mask() {
    let mut host = Fixture::merged_usr();
    host.dir("/w");
    let spec = SandboxSpec::for_root("/w");
    let masked =
        |host: &Fixture| render(&plan(&spec, host)).contains("--hide /dev/null /etc/shadow");
    assert!(masked(&host));
    host.unreadable.push("/etc/shadow".into());
    assert!(!masked(&host));
}

#[test]
fn protected_names_that_are_symlinks_refuse_the_plan() {
    for (link, target) in [
        ("/w/.git/hooks", "../githooks"),
        ("/w/.bashrc", "dotfiles/bashrc"),
        ("/w/.git", "/elsewhere/.git"),
    ] {
        let mut host = Fixture::merged_usr();
        host.dir("/w")
            .dir("/w/.git")
            .dir("/w/githooks")
            .dir("/w/dotfiles");
        host.entries.remove(Path::new(link));
        host.link(link, target);
        let spec = SandboxSpec::for_root("/w");
        let err = BwrapPlan::build(&spec, &files(), &stage2_for(&spec), &["true".into()], &host)
            .unwrap_err();
        assert_eq!(
            err,
            PlanError::UnprotectableSymlink { path: link.into() },
            "{link}"
        );
    }
}

#[test]
fn a_file_on_the_way_to_a_protected_path_is_masked() {
    // A worktree's `.git` file, or another run's placeholder.
    let mut host = Fixture::merged_usr();
    host.dir("/w").file("/w/.git");
    let spec = SandboxSpec::for_root("/w");
    let text = render(&plan(&spec, &host));
    assert!(text.contains("--ro-bind /w/.git /w/.git\n"), "{text}");
    assert!(!text.contains("/w/.git/"), "{text}");
}

#[test]
fn private_system_files_and_directories_are_masked() {
    let mut host = Fixture::merged_usr();
    host.dir("/w")
        .dir("/etc/ssl")
        .dir("/etc/ssl/private")
        .file("/opt/app.key");
    host.private = vec!["/etc/ssl/private".into(), "/opt/app.key".into()];
    let spec = SandboxSpec::for_root("/w");
    let text = render(&plan(&spec, &host));
    assert!(
        text.contains("--hide /.toolgate/empty-dir /etc/ssl/private\n"),
        "{text}"
    );
    assert!(text.contains("--hide /dev/null /opt/app.key\n"), "{text}");
}

#[test]
fn this_host_lists_its_private_system_files_when_root() {
    let private = RealHost.private_system_paths();
    if rustix::process::geteuid().is_root() {
        assert!(
            private.iter().any(|p| p == Path::new("/etc/shadow")),
            "{private:?}"
        );
    } else {
        assert_eq!(private, Vec::<PathBuf>::new());
    }
}

#[test]
fn nested_repositories_are_protected_like_the_root() {
    let mut host = Fixture::merged_usr();
    host.dir("/w")
        .dir("/w/vendor")
        .dir("/w/vendor/lib")
        .dir("/w/vendor/lib/.git")
        .dir("/w/vendor/lib/.git/hooks")
        .file("/w/vendor/lib/.git/config")
        .dir("/w/store")
        .dir("/w/store/mirror.git")
        .file("/w/store/mirror.git/HEAD")
        .dir("/w/store/mirror.git/objects")
        .dir("/w/store/mirror.git/refs")
        .file("/w/store/mirror.git/config")
        .dir("/w/checkout")
        .text("/w/checkout/.git", "gitdir: ../store/checkout.git\n");
    let plan = plan(&SandboxSpec::for_root("/w"), &host);
    let text = render(&plan);
    for line in [
        "--bind /w/vendor/lib/.git /w/vendor/lib/.git\n",
        "--ro-bind /w/vendor/lib/.git/config /w/vendor/lib/.git/config\n",
        "--ro-bind /w/vendor/lib/.git/hooks /w/vendor/lib/.git/hooks\n",
        "--ro-bind /.toolgate/empty /w/vendor/lib/.git/config.worktree\n",
        "--ro-bind /w/store/mirror.git/config /w/store/mirror.git/config\n",
        "--ro-bind /.toolgate/empty-dir /w/store/mirror.git/hooks\n",
        "--ro-bind /w/checkout/.git /w/checkout/.git\n",
        // The git dir the `.git` file names does not exist: blocked where
        // it would be created.
        "--ro-bind /.toolgate/empty-dir /w/store/checkout.git\n",
    ] {
        assert!(text.contains(line), "{line} not in\n{text}");
    }
    // A commondir cannot be masked while absent: checked after the run.
    assert_eq!(
        plan.audited,
        vec![
            PathBuf::from("/w/store/mirror.git/commondir"),
            PathBuf::from("/w/vendor/lib/.git/commondir"),
        ]
    );
    assert!(plan.created_mount_points.contains(&"/w/.git".into()));
    assert_eq!(
        plan.placeholder_files,
        vec![
            PathBuf::from("/w/store/mirror.git/config.worktree"),
            PathBuf::from("/w/vendor/lib/.git/config.worktree"),
        ]
    );
}

#[test]
fn a_root_too_large_to_search_refuses_the_plan() {
    let mut host = Fixture::merged_usr();
    host.dir("/w").dir("/w/a").file("/w/a/1").file("/w/a/2");
    host.scan_budget = Some(2);
    let spec = SandboxSpec::for_root("/w");
    let err =
        BwrapPlan::build(&spec, &files(), &stage2_for(&spec), &["true".into()], &host).unwrap_err();
    assert!(
        matches!(&err, PlanError::ScanTooLarge(m) if m.contains("more than 2 directory entries")),
        "{err}"
    );
}

#[test]
fn a_read_deny_mask_inside_a_protected_directory_is_mounted_again_after_it() {
    let mut host = Fixture::merged_usr();
    host.dir("/w")
        .dir("/w/.git")
        .dir("/w/.vscode")
        .file("/w/.vscode/secret.json");
    let spec = SandboxSpec::for_root("/w").read_deny("/w/.vscode/secret.json");
    let argv: Vec<String> = plan(&spec, &host)
        .argv
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let at = |needle: [&str; 3]| -> Vec<usize> {
        argv.windows(3)
            .enumerate()
            .filter(|(_, w)| *w == needle)
            .map(|(i, _)| i)
            .collect()
    };
    let masked = at(["--hide", "/dev/null", "/w/.vscode/secret.json"]);
    let protected = at(["--ro-bind", "/w/.vscode", "/w/.vscode"]);
    // The read-only bind of `.vscode` brings the host's file back; the
    // read-deny mask follows it again.
    assert_eq!(protected.len(), 1, "{argv:?}");
    assert_eq!(masked.len(), 2, "{argv:?}");
    assert!(
        masked[0] < protected[0] && protected[0] < masked[1],
        "{argv:?}"
    );
}

//! The path layer, table-driven.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;
use toolgate_policy::path::normalize;
use toolgate_policy::{PathPolicy, PathRules, PathVerdict};

fn verdict(policy: &PathPolicy, path: &str) -> String {
    let roots = [PathBuf::from("/work/app"), PathBuf::from("/work/lib")];
    match policy.check(Path::new(path), Path::new("/work/app"), &roots) {
        PathVerdict::Allowed { path, by } => format!("allow {} by {by}", path.display()),
        PathVerdict::Denied { reason, .. } => format!("deny: {reason}"),
    }
}

fn standard() -> PathPolicy {
    PathPolicy::new(
        PathRules::default(),
        Some(Path::new("/home/ann")),
        PathBuf::from("/tmp"),
    )
    .unwrap()
}

#[test]
fn default_rules() {
    let p = standard();
    let outside = |x: &str| {
        format!(
            "deny: `{x}` is outside the workspace roots (/work/app, /work/lib) and every allowed \
             pattern; use a path inside a workspace root"
        )
    };
    let table = [
        ("src/main.rs", "allow /work/app/src/main.rs by workspace root /work/app".to_owned()),
        ("/work/lib/x", "allow /work/lib/x by workspace root /work/lib".to_owned()),
        ("/work/app", "allow /work/app by workspace root /work/app".to_owned()),
        // The file tools reach only inside the roots (the jail), so the temp
        // dir is not allowed by default either.
        ("/tmp/scratch.txt", outside("/tmp/scratch.txt")),
        // Lexical escapes are folded before matching.
        ("../../etc/passwd", outside("/etc/passwd")),
        ("src/../../../etc/shadow", "deny: `/etc/shadow` matches the denied pattern `/etc/shadow`".to_owned()),
        ("/../../../../etc/gshadow", "deny: `/etc/gshadow` matches the denied pattern `/etc/gshadow`".to_owned()),
        // Prefix siblings of a root are not inside it.
        ("/work/app2/x", outside("/work/app2/x")),
        ("/work/app.bak", outside("/work/app.bak")),
        ("/etc/passwd", outside("/etc/passwd")),
        // Kernel interfaces and credential stores, the directory itself too.
        ("/proc/self/mem", "deny: `/proc/self/mem` matches the denied pattern `/proc/**`".to_owned()),
        ("/proc", "deny: `/proc` matches the denied pattern `/proc/**`".to_owned()),
        ("/sys/kernel/x", "deny: `/sys/kernel/x` matches the denied pattern `/sys/**`".to_owned()),
        ("/dev/sda", "deny: `/dev/sda` matches the denied pattern `/dev/**`".to_owned()),
        ("/home/ann/.ssh/id_ed25519", "deny: `/home/ann/.ssh/id_ed25519` matches the denied pattern `~/.ssh/**`".to_owned()),
        ("/home/ann/.ssh", "deny: `/home/ann/.ssh` matches the denied pattern `~/.ssh/**`".to_owned()),
        ("/home/ann/.aws/credentials", "deny: `/home/ann/.aws/credentials` matches the denied pattern `~/.aws/**`".to_owned()),
        ("/home/ann/.gnupg/x", "deny: `/home/ann/.gnupg/x` matches the denied pattern `~/.gnupg/**`".to_owned()),
        ("/home/ann/.config/gcloud/creds.db", "deny: `/home/ann/.config/gcloud/creds.db` matches the denied pattern `~/.config/gcloud/**`".to_owned()),
        ("/home/ann/.kube/config", "deny: `/home/ann/.kube/config` matches the denied pattern `~/.kube/**`".to_owned()),
        ("a\0b", "deny: the path contains a NUL byte".to_owned()),
        // `~` is the home directory, as a tool expanding it would see it.
        ("~/.ssh/id_ed25519", "deny: `/home/ann/.ssh/id_ed25519` matches the denied pattern `~/.ssh/**`".to_owned()),
        ("~", outside("/home/ann")),
        ("~bob/.ssh/id_rsa", "deny: `~bob/.ssh/id_rsa` starts with `~`, which names a home directory this policy cannot resolve; use an absolute or relative path".to_owned()),
    ];
    for (path, expected) in table {
        assert_eq!(verdict(&p, path), expected, "{path:?}");
    }
}

#[test]
fn deny_beats_allow_even_inside_a_root() {
    let rules = PathRules {
        allow: vec!["/data/**".into()],
        deny: vec![
            "/work/app/secrets/**".into(),
            "**/*.pem".into(),
            "/data/private/*".into(),
        ],
        ..PathRules::default()
    };
    let p = PathPolicy::new(rules, None, PathBuf::from("/tmp")).unwrap();
    let table = [
        (
            "secrets/token",
            "deny: `/work/app/secrets/token` matches the denied pattern `/work/app/secrets/**`",
        ),
        (
            "/work/lib/key.pem",
            "deny: `/work/lib/key.pem` matches the denied pattern `**/*.pem`",
        ),
        (
            "/data/private/x",
            "deny: `/data/private/x` matches the denied pattern `/data/private/*`",
        ),
        // `*` does not cross a separator.
        (
            "/data/private/x/y",
            "allow /data/private/x/y by pattern `/data/**`",
        ),
        ("/data/public", "allow /data/public by pattern `/data/**`"),
    ];
    for (path, expected) in table {
        assert_eq!(verdict(&p, path), expected, "{path:?}");
    }
}

#[test]
fn implicit_allowances_can_be_switched_off_and_bad_globs_are_refused() {
    let rules = PathRules {
        workspace_roots: false,
        temp_dir: false,
        ..PathRules::default()
    };
    let p = PathPolicy::new(rules, None, PathBuf::from("/tmp")).unwrap();
    assert_eq!(
        verdict(&p, "src/x"),
        "deny: `/work/app/src/x` is outside every allowed pattern; use a path inside a \
         workspace root"
    );
    assert!(verdict(&p, "/tmp/x").starts_with("deny"));
    // The temp dir, when switched on, is allowed and named.
    let rules = PathRules {
        temp_dir: true,
        ..PathRules::default()
    };
    let p = PathPolicy::new(rules, None, PathBuf::from("/tmp")).unwrap();
    assert_eq!(verdict(&p, "/tmp/x"), "allow /tmp/x by temp dir /tmp");
    assert_eq!(
        verdict(&p, "/var/x"),
        "deny: `/var/x` is outside the workspace roots (/work/app, /work/lib), the temp dir \
         /tmp and every allowed pattern; use a path inside a workspace root"
    );

    let bad = PathRules {
        deny: vec!["/a/[b".into()],
        ..PathRules::default()
    };
    let err = PathPolicy::new(bad, None, PathBuf::from("/tmp")).unwrap_err();
    assert!(
        err.to_string().starts_with("invalid path pattern `/a/[b`"),
        "{err}"
    );
}

#[test]
fn normalize_folds_dots_lexically() {
    let cwd = Path::new("/w");
    for (input, expected) in [
        ("a/./b/../c", "/w/a/c"),
        ("../../../..", "/"),
        ("/x/../../y", "/y"),
        (".", "/w"),
        ("/", "/"),
    ] {
        assert_eq!(
            normalize(Path::new(input), cwd),
            PathBuf::from(expected),
            "{input}"
        );
    }
    let deep = "../".repeat(1000) + "etc/passwd";
    assert_eq!(
        normalize(Path::new(&deep), cwd),
        PathBuf::from("/etc/passwd")
    );
}

//! Absent protected names (`.git`, `.mcp.json`, agent configurations, names
//! in a git dir) are kept from being created by stage 2 itself, with nothing
//! on the host: the attacks try every route to such a name, including a
//! thread that rewrites the path while the call is checked; the host must
//! see no trace of the masks while a command runs; and everything else a
//! command creates works as it would without the guard (errors included).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use pretty_assertions::assert_eq;
use toolgate_sandbox::runner::ExecOutcome;
use toolgate_sandbox::{Sandbox, SandboxCommand, SandboxOutcome, SandboxSpec};

use common::{git, names, sandbox};

const PROTECTED_AT_THE_TOP: &[&str] = &[
    ".vscode",
    ".mcp.json",
    "opencode.json",
    ".claude",
    ".gemini",
    ".codex",
    ".kiro",
    ".roo",
    ".zed",
    ".continue",
    ".cursor",
    ".aider.conf.yml",
    ".windsurf",
    ".idea",
    ".amazonq",
    ".devcontainer.json",
    ".clinerules",
    ".opencode",
];

async fn run(sb: &Sandbox, root: &Path, command: SandboxCommand) -> SandboxOutcome {
    sb.run(
        &SandboxSpec::for_root(root),
        command.timeout(Duration::from_secs(60)),
    )
    .await
    .unwrap()
}

/// Runs a Python script in the sandbox; it must exit cleanly.
async fn python(sb: &Sandbox, root: &Path, script: &str) -> ExecOutcome {
    let o = run(
        sb,
        root,
        SandboxCommand::new(["/usr/bin/python3", "-c", script]),
    )
    .await
    .outcome;
    assert_eq!(o.exit_code, 0, "{o:?}");
    o
}

/// Waits until the command in `root` has made `started` (it then waits for
/// the host).
async fn until_started(root: &Path) {
    let mut waited = 0;
    while !root.join("started").exists() {
        assert!(waited < 400, "the command never started");
        tokio::time::sleep(Duration::from_millis(25)).await;
        waited += 1;
    }
}

/// A repository root with `a.txt`, in a temp dir that also holds the state.
fn repo() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap().join("repo");
    std::fs::create_dir(&root).unwrap();
    git(&root, &["init", "-q"]);
    std::fs::write(root.join("a.txt"), "a\n").unwrap();
    (dir, root)
}

#[tokio::test]
async fn every_route_to_a_protected_name_is_refused() {
    let (dir, root) = repo();
    let sb = sandbox(&dir.path().join("state"));
    let git_dir_before = names(&root.join(".git"));
    let o = python(&sb, &root, include_str!("creation_guard/attacks.py")).await;
    let lines: Vec<&str> = o.stdout.lines().collect();
    // Every attempt the script makes reports, and every one was refused as
    // a permission matter (a race by never creating the name).
    assert_eq!(lines.len(), 23, "{o:?}");
    for line in &lines {
        assert!(
            line.ends_with(" refused EACCES") || line.ends_with(" refused race"),
            "{line}\n{o:?}"
        );
    }
    for name in PROTECTED_AT_THE_TOP {
        assert!(
            std::fs::symlink_metadata(root.join(name)).is_err(),
            "{name} exists on the host: {o:?}"
        );
    }
    assert_eq!(names(&root.join(".git")), git_dir_before);
    // The command is told why, once per name however often it tries.
    let told = |path: &str| {
        o.stderr
            .matches(&format!(
                "toolgate: refused to create {}: a protected name",
                root.join(path).display()
            ))
            .count()
    };
    assert_eq!(told(".mcp.json"), 1, "{}", o.stderr);
    assert_eq!(told(".opencode"), 1, "{}", o.stderr);
    assert_eq!(told(".git/worktrees"), 1, "{}", o.stderr);
}

/// The root is a subdirectory of a repository: host git, run while the
/// command runs, finds the repository above and shows only what the command
/// made; and a root of its own with no repository shows no `.git`.
#[tokio::test]
async fn the_host_sees_nothing_of_the_masks_while_a_command_runs() {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let repo = base.join("repo");
    let sub = repo.join("sub");
    let plain = base.join("plain");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::create_dir(&plain).unwrap();
    git(&repo, &["init", "-q"]);
    std::fs::write(sub.join("tracked.txt"), "x\n").unwrap();
    git(&repo, &["add", "."]);
    let status_before = git(&repo, &["status", "--porcelain"]);
    let sb = sandbox(&base.join("state"));
    // Each runs until the host has looked (a deadline would race a slow start).
    let script = "touch started; while [ ! -e done ]; do sleep 0.05; done; rm started done";
    let in_sub = run(&sb, &sub, SandboxCommand::shell(script));
    let in_plain = run(&sb, &plain, SandboxCommand::shell(script));
    let host = async {
        for root in [&sub, &plain] {
            let mut waited = 0;
            while !root.join("started").exists() {
                assert!(waited < 400, "{} never started", root.display());
                tokio::time::sleep(Duration::from_millis(25)).await;
                waited += 1;
            }
        }
        assert_eq!(names(&sub), ["started", "tracked.txt"]);
        assert_eq!(names(&plain), ["started"]);
        let top = git(&sub, &["rev-parse", "--show-toplevel"]);
        assert_eq!(top.trim(), repo.to_str().unwrap());
        let status = git(&sub, &["status", "--porcelain"]);
        assert_eq!(status, format!("{status_before}?? sub/started\n"));
        std::fs::write(sub.join("done"), "").unwrap();
        std::fs::write(plain.join("done"), "").unwrap();
    };
    let (in_sub, in_plain, ()) = tokio::join!(in_sub, in_plain, host);
    assert_eq!(in_sub.outcome.exit_code, 0, "{in_sub:?}");
    assert_eq!(in_plain.outcome.exit_code, 0, "{in_plain:?}");
    assert_eq!(names(&sub), ["tracked.txt"]);
    assert_eq!(names(&plain), Vec::<String>::new());
    assert_eq!(git(&repo, &["status", "--porcelain"]), status_before);
}

/// What the guard performs for the command comes out as the kernel would
/// have made it: modes under the command's umask, FIFOs that block for
/// their other end, links, renames, the standard streams by name, the
/// command's temp dir; and the same errors.
#[tokio::test]
async fn other_creations_work_as_without_the_guard() {
    let (dir, root) = repo();
    let sb = sandbox(&dir.path().join("state"));
    let script = r#"
        set -e
        umask 022
        mkdir -p a/b/c && echo x > a/f
        stat -c '%a %n' a/f a/b
        umask 077
        echo > g
        stat -c '%a %n' g
        mkfifo p
        cat p > fifo-out &
        echo through-the-fifo > p
        wait
        cat fifo-out
        ln -s f a/l && ln a/f a/h && mv a/h a/h2 && cat a/l
        echo to-stdout > /dev/stdout
        echo to-stderr > /dev/stderr
        echo > /dev/null
        echo tmp > /tmp/t && cat /tmp/t
        cd a/b && echo relative > ../r && cd ../.. && cat a/r
        python3 -c 'import os; os.close(os.open("x", os.O_CREAT | os.O_EXCL | os.O_WRONLY)); print("excl")'
        set +e
        mkdir a 2>&1
        mkdir /usr/toolgate-x 2>&1
        mkdir missing/x 2>&1
        touch a/f/under-a-file 2>&1
        python3 -c 'import os; os.open("x", os.O_CREAT | os.O_EXCL)' 2>&1 | tail -1
        git init -q nested && test -f nested/.git/HEAD && echo nested-repo
    "#;
    let o = run(&sb, &root, SandboxCommand::shell(script)).await.outcome;
    assert_eq!(
        o.stdout,
        "644 a/f\n755 a/b\n600 g\nthrough-the-fifo\nx\nto-stdout\ntmp\nrelative\nexcl\n\
         mkdir: cannot create directory ‘a’: File exists\n\
         mkdir: cannot create directory ‘/usr/toolgate-x’: Read-only file system\n\
         mkdir: cannot create directory ‘missing/x’: No such file or directory\n\
         touch: cannot touch 'a/f/under-a-file': Not a directory\n\
         FileExistsError: [Errno 17] File exists: 'x'\n\
         nested-repo\n",
        "{o:?}"
    );
    assert_eq!(o.stderr, "to-stderr\n", "{o:?}");
    assert_eq!(std::fs::read_to_string(root.join("a/h2")).unwrap(), "x\n");
    assert!(!Path::new("/usr/toolgate-x").exists());
}

/// Attack: the keeper opens what a held `open` names as itself, and a
/// process may open its own /proc entries where others may not. The command
/// asks for the keeper's memory (its parent's `mem`) with `O_CREAT`, by
/// name, through an `O_PATH` descriptor reopened via `/proc/self/fd`, a
/// directory descriptor, `/proc/self/root` and a working directory in the
/// keeper's /proc directory: every one refused, while its own descriptors
/// still reopen.
#[tokio::test]
async fn the_keeper_opens_nothing_of_its_own_for_the_command() {
    let (dir, root) = repo();
    let sb = sandbox(&dir.path().join("state"));
    let script = r#"
import os
keeper = os.getppid()
def attempt(route, action):
    try:
        fd = action()
        print(route, "OPENED", os.readlink(f"/proc/self/fd/{fd}"))
    except OSError as e:
        print(route, "refused", e.strerror)
W = os.O_RDONLY | os.O_CREAT
attempt("by-name", lambda: os.open(f"/proc/{keeper}/mem", W))
path_fd = os.open(f"/proc/{keeper}/mem", os.O_PATH)
attempt("o-path-reopened", lambda: os.open(f"/proc/self/fd/{path_fd}", W))
dir_fd = os.open(f"/proc/{keeper}", os.O_PATH | os.O_DIRECTORY)
attempt("dirfd", lambda: os.open("mem", W, dir_fd=dir_fd))
attempt("via-root", lambda: os.open(f"/proc/self/root/proc/{keeper}/mem", W))
attempt("environ", lambda: os.open(f"/proc/{keeper}/environ", W))
here = os.getcwd()
os.chdir(f"/proc/{keeper}")
attempt("cwd", lambda: os.open("mem", W))
os.chdir(here)
attempt("own-stdout", lambda: os.open("/proc/self/fd/1", os.O_WRONLY | os.O_CREAT))
"#;
    let o = python(&sb, &root, script).await;
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(lines.len(), 7, "{o:?}");
    for line in &lines[..6] {
        assert!(
            line.ends_with(" refused Permission denied"),
            "{line}\n{o:?}"
        );
    }
    assert!(lines[6].starts_with("own-stdout OPENED pipe:"), "{o:?}");
}

/// Attack: a protected name absent when the run started is made by a host
/// program while the command runs (an editor's `.vscode/`, a `.mcp.json`).
/// A placeholder's mount used to hide it; now the command waits for it and
/// writes it by every route: by name, appending, `r+`, a new file in it, a
/// directory, through a symlink, a hard link (by name and of a descriptor),
/// a descriptor reopened for writing, from a working directory inside it,
/// a rename into it. Nothing succeeds and the host's files are unchanged.
#[tokio::test]
async fn a_protected_name_a_host_program_makes_during_the_run_stays_out_of_reach() {
    let (dir, root) = repo();
    let sb = sandbox(&dir.path().join("state"));
    let script = include_str!("creation_guard/host_made.sh");
    let running = run(&sb, &root, SandboxCommand::new(["sh", "-c", script]));
    let host = async {
        until_started(&root).await;
        std::fs::create_dir(root.join(".vscode")).unwrap();
        std::fs::write(root.join(".vscode/tasks.json"), "{\"host\":1}").unwrap();
        std::fs::write(root.join(".mcp.json"), "{}").unwrap();
    };
    let (o, ()) = tokio::join!(running, host);
    let o = o.outcome;
    assert_eq!((o.exit_code, o.stdout.as_str()), (0, "done\n"), "{o:?}");
    assert_eq!(
        std::fs::read_to_string(root.join(".vscode/tasks.json")).unwrap(),
        "{\"host\":1}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join(".mcp.json")).unwrap(),
        "{}"
    );
    assert_eq!(names(&root.join(".vscode")), ["tasks.json"]);
    assert!(!root.join("hard").exists() && !root.join("hard2").exists());
    assert!(
        o.stderr.contains(&format!(
            "toolgate: refused to write in {}: a protected name a host program made during the run",
            root.join(".vscode").display()
        )),
        "{o:?}"
    );
}

/// Attack: the command waits until a host program replaces protected
/// entries that existed when it started (`git config` renames a new
/// `.git/config` over the old one; `.git/hooks` and `.vscode` are removed
/// and made again), which detaches their read-only mounts in every mount
/// namespace, then writes them by every route: appending, truncating,
/// `r+`, a descriptor reopened for writing, hard links (by name and of a
/// descriptor), renames over and away, a symlinked directory, new hooks (a
/// file, a directory, a symlink, from a working directory inside), a new
/// file in `.vscode`. Nothing succeeds and the host's entries are as the
/// host program left them.
#[tokio::test]
async fn a_protected_entry_a_host_program_replaces_during_the_run_stays_read_only() {
    let (dir, root) = repo();
    std::fs::create_dir(root.join(".vscode")).unwrap();
    std::fs::write(root.join(".vscode/settings.json"), "{}").unwrap();
    let sb = sandbox(&dir.path().join("state"));
    let script = include_str!("creation_guard/host_replaced.sh");
    let running = run(&sb, &root, SandboxCommand::new(["sh", "-c", script]));
    let host = async {
        until_started(&root).await;
        git(&root, &["config", "user.name", "host"]);
        std::fs::remove_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::create_dir(root.join(".git/hooks")).unwrap();
        std::fs::remove_dir_all(root.join(".vscode")).unwrap();
        std::fs::create_dir(root.join(".vscode")).unwrap();
        std::fs::write(root.join(".vscode/settings.json"), "{\"host\":2}").unwrap();
        let config = std::fs::read_to_string(root.join(".git/config")).unwrap();
        std::fs::write(root.join("replaced"), "").unwrap();
        config
    };
    let (o, config) = tokio::join!(running, host);
    let o = o.outcome;
    assert_eq!((o.exit_code, o.stdout.as_str()), (0, "done\n"), "{o:?}");
    assert_eq!(
        std::fs::read_to_string(root.join(".git/config")).unwrap(),
        config
    );
    assert!(config.contains("name = host"), "{config}");
    assert!(names(&root.join(".git/hooks")).is_empty());
    assert_eq!(names(&root.join(".vscode")), ["settings.json"]);
    assert_eq!(
        std::fs::read_to_string(root.join(".vscode/settings.json")).unwrap(),
        "{\"host\":2}"
    );
    for name in ["hard", "hard2", "moved", "v2"] {
        assert!(!root.join(name).exists(), "{name}");
    }
    assert!(o.stderr.contains("Read-only file system"), "{o:?}");
}

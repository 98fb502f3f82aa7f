//! Attack: two workspaces of one user (sibling roots `a` and `b`, one
//! state directory, the agent id `cli` every session shares). The agent
//! of B must not reach A's checkpoints: not see their ids, not compare
//! with one by id (which would list A's file names and confirm a guess of
//! A's contents), not inherit A's hashes; A's files stay as they were, and
//! A still compares with its own.

use std::collections::BTreeMap;

use pretty_assertions::assert_eq;

use super::*;

/// A user's two workspaces.
struct Two {
    s: Sandbox,
    a: PathBuf,
    b: PathBuf,
}

impl Two {
    fn new() -> Two {
        let s = Sandbox::new();
        let mut roots = ["a", "b"].map(|name| {
            let dir = s.dir.path().join(name);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::canonicalize(dir).unwrap()
        });
        let b = roots[1].clone();
        let a = std::mem::take(&mut roots[0]);
        Two { s, a, b }
    }

    /// `toolgate call snapshot ARGS --json` in `root` (the default root is
    /// the working directory): the exit code and the JSON body.
    fn snapshot(&self, root: &Path, args: Value) -> (Option<i32>, Value) {
        let o = self.s.run_in(
            root,
            &["call", "snapshot", &args.to_string(), "--json"],
            &[],
        );
        let body = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|_| panic!("no JSON: {}\n{}", stdout(&o), stderr(&o)));
        (o.status.code(), body)
    }

    /// A new checkpoint of `root`; its id and facts.
    fn checkpoint(&self, root: &Path) -> (String, Value) {
        let (code, body) = self.snapshot(root, json!({}));
        assert_eq!(code, Some(0), "{body:#}");
        let facts = body["structured"].clone();
        (facts["id"].as_str().unwrap().to_owned(), facts)
    }

    /// What B is told when it names `id`, with `id` itself blanked out, so
    /// that the answers for two ids can be compared whole.
    fn refusal(&self, root: &Path, id: &str) -> (Option<i32>, String) {
        let (code, body) = self.snapshot(root, json!({ "checkpoint": id }));
        let text = body.to_string().replace(id, "ID");
        (code, text)
    }

    /// The state directory both workspaces share.
    fn snapshots(&self) -> PathBuf {
        self.s
            .dir
            .path()
            .join("home/.local/state/toolgate/snapshots")
    }
}

/// Every file under `dir` and its bytes.
fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(next) = todo.pop() {
        for entry in std::fs::read_dir(&next).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                todo.push(path);
            } else {
                out.insert(path.clone(), std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

/// An id no workspace took: far in the future, in the id alphabet.
const NEVER: &str = "zzzzzzzzz";

#[test]
fn another_workspace_cannot_compare_with_a_checkpoint_or_confirm_a_guess() {
    let w = Two::new();
    std::fs::write(w.a.join("secret.env"), "TOKEN=hunter2\n").unwrap();
    std::fs::write(w.a.join("plan.md"), "acquire X in May\n").unwrap();
    let (a_id, _) = w.checkpoint(&w.a);
    let a_before = tree(&w.a);

    // B guesses A's secret: the same path, the guessed contents. Compared
    // with A's checkpoint, "secret.env unchanged" would confirm the guess
    // and "plan.md deleted" would name A's file.
    std::fs::write(w.b.join("secret.env"), "TOKEN=hunter2\n").unwrap();
    // Before B took any checkpoint, and after: A's id is answered exactly
    // like an id nobody took.
    assert_eq!(w.refusal(&w.b, &a_id), w.refusal(&w.b, NEVER));
    let (b_id, _) = w.checkpoint(&w.b);
    let (code, refused) = w.refusal(&w.b, &a_id);
    assert_eq!((code, refused.clone()), w.refusal(&w.b, NEVER));
    assert_eq!(code, Some(1), "{refused}");
    // The listing of known checkpoints is B's own.
    assert!(refused.contains(&b_id), "{refused}");
    for leak in ["plan.md", "secret.env", "hunter2", &a_id[..]] {
        assert!(!refused.contains(leak), "{leak}: {refused}");
    }
    let (_, body) = w.snapshot(&w.b, json!({ "checkpoint": a_id }));
    assert_eq!(
        body["error"],
        format!(
            "tool `snapshot` failed: unknown checkpoint `{a_id}`; known checkpoints (oldest \
             first): {b_id}"
        )
    );

    // Nothing of A changed, and A still compares with its own checkpoint.
    assert_eq!(tree(&w.a), a_before);
    std::fs::write(w.a.join("plan.md"), "acquire X in June\n").unwrap();
    let (code, body) = w.snapshot(&w.a, json!({ "checkpoint": a_id }));
    assert_eq!(code, Some(0), "{body:#}");
    let facts = &body["structured"];
    assert_eq!(
        (
            &facts["compared_with"],
            &facts["modified"],
            &facts["counts"]
        ),
        (
            &json!(a_id),
            &json!(["plan.md"]),
            &json!({"added": 0, "modified": 1, "deleted": 0})
        )
    );
    // And A's listing does not show B's.
    let (_, refused) = w.refusal(&w.a, NEVER);
    assert!(
        !refused.contains(&b_id) && refused.contains(&a_id),
        "{refused}"
    );
}

/// Attack: B takes its first checkpoint while A's is the newest one kept.
/// Reusing A's hash for B's file of the same name, size and mtime would
/// tell B that A has such a file (the count of files hashed), and record
/// A's hash for B's contents, so B's next comparison would be against A's.
#[test]
fn another_workspace_inherits_no_hashes() {
    let w = Two::new();
    let old = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_600_000_000);
    for (root, text) in [(&w.a, "abcd"), (&w.b, "ABCD")] {
        let file = std::fs::File::create(root.join("same.txt")).unwrap();
        std::io::Write::write_all(&mut &file, text.as_bytes()).unwrap();
        file.set_modified(old).unwrap();
    }
    let (_, a) = w.checkpoint(&w.a);
    assert_eq!((&a["files"], &a["hashed"]), (&json!(1), &json!(1)));
    let (_, b) = w.checkpoint(&w.b);
    assert_eq!((&b["files"], &b["hashed"]), (&json!(1), &json!(1)), "{b:#}");
    // Within one workspace the hashes are reused as before.
    let (_, again) = w.checkpoint(&w.b);
    assert_eq!(again["hashed"], 0, "{again:#}");
    // One directory of checkpoints per workspace.
    assert_eq!(
        std::fs::read_dir(w.snapshots().join("cli"))
            .unwrap()
            .count(),
        2
    );
}

/// A checkpoint taken before checkpoints were scoped (`snapshots/cli/<id>.json`,
/// as the earlier store wrote it): the workspace it records takes it over;
/// another workspace is told it is unknown, like an id nobody took.
#[test]
fn checkpoints_from_before_scoping_belong_to_the_roots_they_recorded() {
    let w = Two::new();
    std::fs::write(w.a.join("plan.md"), "acquire X in May\n").unwrap();
    let legacy = w.snapshots().join("cli");
    std::fs::create_dir_all(&legacy).unwrap();
    let id = "00000abcd";
    // Written in the field order of the earlier store (serde's, by declaration).
    let old = format!(
        r#"{{"id":"{id}","agent":"cli","taken_ns":1,"roots":[{root}],"files":{{"plan.md":{{"kind":"file","size":17,"mtime_ns":1,"sha256":"{sha}"}}}}}}"#,
        root = json!(w.a),
        sha = "0".repeat(64),
    );
    std::fs::write(legacy.join(format!("{id}.json")), old).unwrap();

    assert_eq!(w.refusal(&w.b, id), w.refusal(&w.b, NEVER));
    assert!(legacy.join(format!("{id}.json")).is_file());
    let (code, body) = w.snapshot(&w.a, json!({ "checkpoint": id }));
    assert_eq!(code, Some(0), "{body:#}");
    assert_eq!(body["structured"]["modified"], json!(["plan.md"]));
    // Moved into A's scope; B still does not see it.
    assert!(!legacy.join(format!("{id}.json")).exists());
    assert_eq!(w.refusal(&w.b, id), w.refusal(&w.b, NEVER));
}

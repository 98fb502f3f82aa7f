//! Attack: two MCP clients of one user, with the same client name, each
//! offering its own root inside the operator's project. The one working in
//! `b` must not compare with (and so read file names of, or confirm
//! guesses about) the checkpoint the one working in `a` took.

use std::path::Path;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::home_root::RootsClient;
use crate::{Project, file_uri, text};

/// `toolgate mcp` started in the project, with a client offering `root`.
fn client(p: &Project, root: &Path) -> RootsClient {
    let mut cmd = crate::common::toolgate(p.base(), p.root());
    cmd.arg("mcp");
    RootsClient::start(cmd, Some(vec![file_uri(root)]))
}

/// The answer to `snapshot {checkpoint: id}`, with `id` blanked out.
fn refusal(client: &mut RootsClient, id: &str) -> (Value, String) {
    let result = client.call("snapshot", json!({ "checkpoint": id }));
    (result["isError"].clone(), text(&result).replace(id, "ID"))
}

#[test]
fn a_client_in_another_root_cannot_use_a_checkpoint() {
    let p = Project::new();
    p.write("a/plan.md", "acquire X in May\n");
    p.write("a/secret.env", "TOKEN=hunter2\n");
    // B's guess of A's secret, at the same relative path.
    p.write("b/secret.env", "TOKEN=hunter2\n");
    let (a_root, b_root) = (p.root().join("a"), p.root().join("b"));

    let mut a = client(&p, &a_root);
    let taken = a.call("snapshot", json!({}));
    assert_eq!(taken["isError"], false, "{taken}");
    let a_id = taken["structuredContent"]["id"]
        .as_str()
        .unwrap()
        .to_owned();

    let mut b = client(&p, &b_root);
    let (is_error, refused) = refusal(&mut b, &a_id);
    assert_eq!(
        (is_error.clone(), refused.clone()),
        refusal(&mut b, "zzzzzzzzz")
    );
    assert_eq!(is_error, true, "{refused}");
    assert!(refused.contains("unknown checkpoint `ID`"), "{refused}");
    assert!(!refused.contains("plan.md"), "{refused}");

    // A's files are as they were, and A compares with its checkpoint.
    assert_eq!(
        std::fs::read_to_string(a_root.join("plan.md")).unwrap(),
        "acquire X in May\n"
    );
    let compared = a.call("snapshot", json!({ "checkpoint": a_id }));
    assert_eq!(
        compared["structuredContent"]["counts"],
        json!({"added": 0, "modified": 0, "deleted": 0}),
        "{compared}"
    );
}

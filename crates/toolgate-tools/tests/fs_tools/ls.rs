//! ls: trees, hidden entries, the entry cap, symlinks.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toolgate_core::ToolError;

use crate::common::{Fixture, facts, text};
use crate::tool_failure;

/// `text` with every `YYYY-MM-DD HH:MM` time spelled as that pattern, so
/// the expected listings keep their column alignment.
fn undated(text: &str) -> String {
    const SHAPE: &[u8] = b"0000-00-00 00:00";
    let bytes = text.as_bytes();
    let mut out = String::new();
    let mut i = 0;
    while i < bytes.len() {
        let dated = bytes.len() - i >= SHAPE.len()
            && bytes[i..i + SHAPE.len()].iter().zip(SHAPE).all(|(b, s)| {
                if *s == b'0' {
                    b.is_ascii_digit()
                } else {
                    b == s
                }
            });
        if dated {
            out.push_str("YYYY-MM-DD hh:mm");
            i += SHAPE.len();
        } else {
            out.push(char::from(bytes[i]));
            i += 1;
        }
    }
    out
}

/// The structured entries with `modified` checked (recent) and removed.
fn entries_without_times(facts: &Value) -> Value {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut entries = facts["entries"].clone();
    for entry in entries.as_array_mut().unwrap() {
        let modified = entry["modified"].as_u64().unwrap();
        assert!(modified + 3600 > now && modified <= now + 60, "{entry}");
        entry.as_object_mut().unwrap().remove("modified");
    }
    entries
}

fn lsize(f: &Fixture, rel: &str) -> u64 {
    std::fs::symlink_metadata(f.path(rel)).unwrap().len()
}

fn tree_fixture() -> Fixture {
    let f = Fixture::new();
    f.put("README.md", "# hi\n");
    f.put("src/main.rs", "fn main() {}\n");
    f.put("src/util/mod.rs", "");
    f.put(".env", "SECRET=1\n");
    f.put(".git/config", "[core]\n");
    f.put(".git/objects/ab/cdef", "blob");
    f
}

#[tokio::test]
async fn ls_draws_a_tree_to_the_requested_depth() {
    let f = tree_fixture();
    let out = f.ok("ls", json!({})).await;
    assert_eq!(
        undated(&text(&out)),
        "./\n\
         \x20 dir  YYYY-MM-DD hh:mm  src/\n\
         \x20 5 B  YYYY-MM-DD hh:mm  README.md\n"
    );
    assert_eq!(
        entries_without_times(&facts(&out)),
        json!([
            {"path": "src", "type": "dir", "size": lsize(&f, "src")},
            {"path": "README.md", "type": "file", "size": 5},
        ])
    );
    assert_eq!(
        (
            facts(&out)["count"].clone(),
            facts(&out)["truncated"].clone()
        ),
        (json!(2), json!(false))
    );

    let out = f.ok("ls", json!({"path": ".", "depth": 3})).await;
    assert_eq!(
        undated(&text(&out)),
        "./\n\
         \x20  dir  YYYY-MM-DD hh:mm  src/\n\
         \x20  dir  YYYY-MM-DD hh:mm    util/\n\
         \x20  0 B  YYYY-MM-DD hh:mm      mod.rs\n\
         \x20 13 B  YYYY-MM-DD hh:mm    main.rs\n\
         \x20  5 B  YYYY-MM-DD hh:mm  README.md\n"
    );
    assert_eq!(
        entries_without_times(&facts(&out)),
        json!([
            {"path": "src", "type": "dir", "size": lsize(&f, "src")},
            {"path": "src/util", "type": "dir", "size": lsize(&f, "src/util")},
            {"path": "src/util/mod.rs", "type": "file", "size": 0},
            {"path": "src/main.rs", "type": "file", "size": 13},
            {"path": "README.md", "type": "file", "size": 5},
        ])
    );
    // A subdirectory, depth 1.
    let out = f.ok("ls", json!({"path": "src"})).await;
    assert_eq!(
        undated(&text(&out)),
        "src/\n\
         \x20  dir  YYYY-MM-DD hh:mm  util/\n\
         \x20 13 B  YYYY-MM-DD hh:mm  main.rs\n"
    );
}

#[tokio::test]
async fn ls_shows_hidden_entries_only_on_request() {
    let f = tree_fixture();
    let out = f.ok("ls", json!({"depth": 3, "hidden": true})).await;
    // .git is listed but never descended into.
    assert_eq!(
        undated(&text(&out)),
        "./\n\
         \x20  dir  YYYY-MM-DD hh:mm  .git/\n\
         \x20  dir  YYYY-MM-DD hh:mm  src/\n\
         \x20  dir  YYYY-MM-DD hh:mm    util/\n\
         \x20  0 B  YYYY-MM-DD hh:mm      mod.rs\n\
         \x20 13 B  YYYY-MM-DD hh:mm    main.rs\n\
         \x20  9 B  YYYY-MM-DD hh:mm  .env\n\
         \x20  5 B  YYYY-MM-DD hh:mm  README.md\n"
    );
    let listed = facts(&out);
    let paths: Vec<&str> = listed["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        [
            ".git",
            "src",
            "src/util",
            "src/util/mod.rs",
            "src/main.rs",
            ".env",
            "README.md"
        ]
    );
    // An empty-looking directory says how to see hidden entries.
    f.put("only_hidden/.x", "x");
    let out = f.ok("ls", json!({"path": "only_hidden"})).await;
    assert_eq!(
        text(&out),
        "only_hidden/\n[no entries; hidden ones are shown with hidden=true]\n"
    );
}

#[tokio::test]
async fn ls_stops_at_the_entry_cap() {
    let f = Fixture::new();
    for i in 0..30 {
        f.put(&format!("f{i:02}.txt"), "x");
    }
    let out = f.ok("ls", json!({"limit": 10})).await;
    let mut expected = String::from("./\n");
    for i in 0..10 {
        expected.push_str(&format!("  1 B  YYYY-MM-DD hh:mm  f{i:02}.txt\n"));
    }
    expected
        .push_str("[stopped at 10 entries; list a subdirectory, lower depth, or raise limit]\n");
    assert_eq!(undated(&text(&out)), expected);
    let listed = facts(&out);
    assert_eq!(
        (&listed["count"], &listed["truncated"]),
        (&json!(10), &json!(true))
    );
    let paths: Vec<&str> = listed["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    let first_ten: Vec<String> = (0..10).map(|i| format!("f{i:02}.txt")).collect();
    assert_eq!(paths, first_ten);
    // The default cap (200) is not reached.
    let out = f.ok("ls", json!({})).await;
    assert_eq!(
        (
            facts(&out)["count"].clone(),
            facts(&out)["truncated"].clone()
        ),
        (json!(30), json!(false))
    );
}

#[tokio::test]
async fn ls_of_a_file_is_an_error() {
    let f = Fixture::new();
    f.put("README.md", "hi\n");
    let error = f
        .call("ls", json!({"path": "README.md"}))
        .await
        .unwrap_err();
    assert_eq!(
        tool_failure(&error),
        &ToolError::Failed(
            "`README.md` is not a directory; read it with read, or list its parent".into()
        )
    );
}

#[tokio::test]
async fn ls_lists_symlinks_as_symlinks_and_never_follows_them() {
    let f = Fixture::new();
    f.put("inside/file.txt", "x");
    f.symlink("out_dir", "../outside");
    f.symlink("out_file", f.outside.join("canary"));
    f.symlink("in_dir", "inside");
    let before = f.outside_snapshot();
    let out = f.ok("ls", json!({"depth": 5})).await;
    assert_eq!(
        undated(&text(&out)),
        "./\n\
         \x20     dir  YYYY-MM-DD hh:mm  inside/\n\
         \x20     1 B  YYYY-MM-DD hh:mm    file.txt\n\
         \x20 symlink  YYYY-MM-DD hh:mm  in_dir@\n\
         \x20 symlink  YYYY-MM-DD hh:mm  out_dir@\n\
         \x20 symlink  YYYY-MM-DD hh:mm  out_file@\n"
    );
    assert_eq!(
        entries_without_times(&facts(&out)),
        json!([
            {"path": "inside", "type": "dir", "size": lsize(&f, "inside")},
            {"path": "inside/file.txt", "type": "file", "size": 1},
            {"path": "in_dir", "type": "symlink", "size": lsize(&f, "in_dir")},
            {"path": "out_dir", "type": "symlink", "size": lsize(&f, "out_dir")},
            {"path": "out_file", "type": "symlink", "size": lsize(&f, "out_file")},
        ])
    );
    assert!(!text(&out).contains("canary"));
    assert_eq!(f.outside_snapshot(), before);
}

#[tokio::test]
async fn ls_aligns_its_columns_with_names_last() {
    let f = Fixture::new();
    f.put("a", "12345");
    f.put("a-much-longer-name.txt", "x".repeat(2048));
    f.put("dir/inner", "");
    let out = f.ok("ls", json!({})).await;
    assert_eq!(
        undated(&text(&out)),
        "./\n\
         \x20     dir  YYYY-MM-DD hh:mm  dir/\n\
         \x20     5 B  YYYY-MM-DD hh:mm  a\n\
         \x20 2.0 KiB  YYYY-MM-DD hh:mm  a-much-longer-name.txt\n"
    );
}

//! find on the generated tree: globs by name and by path, type and size
//! filters, newest-first order, depth, hidden and ignored entries, and
//! paging to the end. Expectations come from the tree's model; both the
//! text and the JSON are checked.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::{facts, text};
use crate::tree::{DEFAULT, Kind, Tree, Walk, leak};

/// Calls find; the pipeline must not have cut the output.
async fn find(t: &Tree, args: Value) -> (String, Value) {
    let shown = args.to_string();
    let result = t.f.call_result("find", args).await.unwrap_or_else(|e| {
        panic!("find {shown} failed: {e}");
    });
    assert!(!result.truncated, "the pipeline cut find {shown}");
    let out = text(&result.output);
    assert_eq!(leak(&out), None, "find {shown} leaked: {out}");
    (out, facts(&result.output))
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::File => "file",
        Kind::Dir => "dir",
        Kind::Symlink => "symlink",
    }
}

/// What find prints for these entries: directories end with `/`.
fn rendered(entries: &BTreeMap<String, Kind>) -> Vec<String> {
    entries
        .iter()
        .map(|(p, k)| match k {
            Kind::Dir => format!("{p}/"),
            _ => p.clone(),
        })
        .collect()
}

/// Checks a complete (untruncated) answer against `expected`.
fn assert_listing(out: &str, facts: &Value, expected: &BTreeMap<String, Kind>) {
    if expected.is_empty() {
        assert_eq!(out, "No entries found.");
    } else {
        assert_eq!(out, rendered(expected).join("\n"));
    }
    let got: BTreeMap<String, String> = facts["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let path = e["path"].as_str().unwrap().to_owned();
            (path, e["type"].as_str().unwrap().to_owned())
        })
        .collect();
    let want: BTreeMap<String, String> = expected
        .iter()
        .map(|(p, k)| (p.clone(), kind_name(*k).to_owned()))
        .collect();
    assert_eq!(got, want);
    assert_eq!(facts["total"], json!(expected.len()));
    assert_eq!(facts["truncated"], json!(false));
    assert_eq!(facts["next_offset"], Value::Null);
}

fn filtered(t: &Tree, walk: Walk, keep: impl Fn(&str, Kind) -> bool) -> BTreeMap<String, Kind> {
    t.entries(walk)
        .into_iter()
        .filter(|(p, k)| keep(p, *k))
        .collect()
}

#[tokio::test]
async fn find_lists_every_visible_entry_and_pages_to_the_exact_end() {
    let t = Tree::new();
    let all = t.entries(DEFAULT);
    assert!(all.len() > 250, "{}", all.len());
    let (out, facts) = find(&t, json!({"limit": 100_000})).await;
    assert_listing(&out, &facts, &all);
    // The default page is `Limits::results` (200) entries.
    let (_, facts) = find(&t, json!({})).await;
    assert_eq!(facts["entries"].as_array().unwrap().len(), 200);
    assert_eq!(facts["next_offset"], json!(200));
    // Page by 41 to the end.
    let want = rendered(&all);
    let total = want.len();
    let mut got = Vec::new();
    let mut offset = 0usize;
    loop {
        let (out, facts) = find(&t, json!({"offset": offset, "limit": 41})).await;
        assert_eq!(facts["total"], json!(total));
        let lines: Vec<&str> = out.lines().filter(|l| !l.starts_with('[')).collect();
        got.extend(lines.iter().map(|l| (*l).to_owned()));
        let next = offset + 41;
        if next < total {
            assert_eq!(lines.len(), 41);
            assert_eq!(facts["next_offset"], json!(next));
            assert_eq!(facts["truncated"], json!(true));
            let hint = format!(
                "[results {}-{next} of {total} entries; continue with offset={next}]",
                offset + 1
            );
            assert_eq!(out.lines().last(), Some(hint.as_str()));
            offset = next;
        } else {
            assert_eq!(lines.len(), total - offset);
            assert_eq!(facts["next_offset"], Value::Null);
            assert!(!out.contains("continue with"), "{out}");
            break;
        }
    }
    assert_eq!(got, want);
    assert_eq!(got.iter().collect::<BTreeSet<_>>().len(), total);
    let (out, _) = find(&t, json!({"offset": 100_000})).await;
    assert_eq!(
        out,
        format!("[no results at offset=100000; {total} entries in all]")
    );
}

#[tokio::test]
async fn find_globs_by_name_and_by_path() {
    let t = Tree::new();
    let direct = |p: &str, dir: &str, ext: &str| {
        p.strip_prefix(dir)
            .is_some_and(|rest| !rest.contains('/') && rest.ends_with(ext))
    };
    type Case<'a> = (Value, Box<dyn Fn(&str, Kind) -> bool + 'a>);
    let cases: Vec<Case<'_>> = vec![
        (
            json!({"pattern": "*.py"}),
            Box::new(|p, _| p.ends_with(".py")),
        ),
        (
            json!({"pattern": "src/mod_2/*.rs"}),
            Box::new(move |p, _| direct(p, "src/mod_2/", ".rs")),
        ),
        (
            json!({"pattern": "src/mod_2/**/*.md"}),
            Box::new(|p, _| p.starts_with("src/mod_2/") && p.ends_with(".md")),
        ),
        // Relative to the start directory as well as to the root.
        (
            json!({"pattern": "sub_1/*.txt", "path": "src/mod_4"}),
            Box::new(move |p, _| direct(p, "src/mod_4/sub_1/", ".txt")),
        ),
        (
            json!({"pattern": "sub_*"}),
            Box::new(|p, _| p.rsplit('/').next().unwrap().starts_with("sub_")),
        ),
        // The negation in src/mod_3/.gitignore brings file_10.md back, at
        // every depth below it.
        (
            json!({"pattern": "file_1*", "path": "src/mod_3"}),
            Box::new(|p, _| p.starts_with("src/mod_3/") && p.ends_with("/file_10.md")),
        ),
        // `/top_only.txt` is anchored at the root.
        (
            json!({"pattern": "top_only.txt"}),
            Box::new(|p, _| p == "src/top_only.txt"),
        ),
        (json!({"pattern": "no_such_*"}), Box::new(|_, _| false)),
    ];
    for (mut args, keep) in cases {
        args["limit"] = json!(100_000);
        let expected = filtered(&t, DEFAULT, keep);
        let (out, facts) = find(&t, args.clone()).await;
        assert_listing(&out, &facts, &expected);
    }
    let (out, _) = find(&t, json!({"pattern": "file_1*", "path": "src/mod_3"})).await;
    assert_eq!(
        out,
        "src/mod_3/file_10.md\nsrc/mod_3/sub_0/file_10.md\nsrc/mod_3/sub_1/file_10.md"
    );
}

#[tokio::test]
async fn find_filters_by_type_and_size() {
    let t = Tree::new();
    for (kind, name) in [
        (Kind::File, "file"),
        (Kind::Dir, "dir"),
        (Kind::Symlink, "symlink"),
    ] {
        let expected = filtered(&t, DEFAULT, |_, k| k == kind);
        let (out, facts) = find(&t, json!({"type": name, "limit": 100_000})).await;
        assert_listing(&out, &facts, &expected);
    }
    let (out, _) = find(&t, json!({"type": "symlink"})).await;
    assert_eq!(
        out,
        "link_file_outside\nlink_rel_outside\nlink_to_outside\nsrc/alias.rs\nsrc/mod_1/up"
    );
    let size = |p: &str| t.files.get(p).map(|b| b.len() as u64);
    for (min, max) in [
        (Some(1_000_000), None),
        (None, Some(0)),
        (Some(10), Some(1000)),
        (Some(50), Some(60)),
        (Some(100_000), Some(10)),
    ] {
        let expected = filtered(&t, DEFAULT, |p, k| {
            k == Kind::File
                && size(p).is_some_and(|s| min.is_none_or(|m| s >= m) && max.is_none_or(|m| s <= m))
        });
        let args = json!({"min_size": min, "max_size": max, "limit": 100_000});
        let (out, facts) = find(&t, args).await;
        assert_listing(&out, &facts, &expected);
        if let Some(entry) = facts["entries"].as_array().unwrap().first() {
            let path = entry["path"].as_str().unwrap();
            assert_eq!(entry["size"], json!(size(path).unwrap()));
        }
    }
    let (out, _) = find(&t, json!({"min_size": 1_000_000})).await;
    assert_eq!(out, "big/huge.txt");
    let (out, _) = find(
        &t,
        json!({"path": "sizes", "min_size": 10, "max_size": 1000}),
    )
    .await;
    assert_eq!(out, "sizes/s10.dat\nsizes/s100.dat\nsizes/s1000.dat");
}

#[tokio::test]
async fn find_sorts_newest_first_then_by_path() {
    let t = Tree::new();
    let base = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    for (name, age) in [
        ("s0", 50),
        ("s10", 10),
        ("s100", 50),
        ("s1000", 0),
        ("s10000", 900),
    ] {
        let file = std::fs::File::options()
            .write(true)
            .open(t.f.path(&format!("sizes/{name}.dat")))
            .unwrap();
        file.set_modified(base - Duration::from_secs(age)).unwrap();
    }
    let (out, facts) = find(&t, json!({"path": "sizes", "sort": "modified"})).await;
    assert_eq!(
        out,
        "sizes/s1000.dat\nsizes/s10.dat\nsizes/s0.dat\nsizes/s100.dat\nsizes/s10000.dat"
    );
    let times: Vec<u64> = facts["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["modified"].as_u64().unwrap())
        .collect();
    let secs = 1_700_000_000;
    assert_eq!(
        times,
        vec![secs, secs - 10, secs - 50, secs - 50, secs - 900]
    );
    // Paging keeps the order: the second page starts where the first ended.
    let args = json!({"path": "sizes", "sort": "modified", "offset": 2, "limit": 2});
    let (out, facts) = find(&t, args).await;
    assert_eq!(
        out,
        "sizes/s0.dat\nsizes/s100.dat\n[results 3-4 of 5 entries; continue with offset=4]"
    );
    assert_eq!(facts["next_offset"], json!(4));
}

#[tokio::test]
async fn find_max_depth_limits_the_walk() {
    let t = Tree::new();
    for depth in [1usize, 2] {
        let expected = filtered(&t, DEFAULT, |p, _| {
            p.strip_prefix("src/")
                .is_some_and(|rest| rest.matches('/').count() < depth)
        });
        let args = json!({"path": "src", "max_depth": depth, "limit": 100_000});
        let (out, facts) = find(&t, args).await;
        assert_listing(&out, &facts, &expected);
    }
    let (out, _) = find(&t, json!({"path": "src", "max_depth": 1})).await;
    let expected = "src/alias.rs\nsrc/mod_0/\nsrc/mod_1/\nsrc/mod_2/\nsrc/mod_3/\nsrc/mod_4/\n\
                    src/mod_5/\nsrc/top_only.txt";
    assert_eq!(out, expected);
    let error = t.f.call("find", json!({"max_depth": 0})).await.unwrap_err();
    assert_eq!(error.stage(), toolgate_policy::Stage::Validate, "{error}");
}

#[tokio::test]
async fn find_hidden_and_no_ignore_widen_the_walk_but_never_into_git() {
    let t = Tree::new();
    for (hidden, no_ignore) in [(true, false), (false, true), (true, true)] {
        let walk = Walk { hidden, no_ignore };
        let expected = t.entries(walk);
        let args = json!({"hidden": hidden, "no_ignore": no_ignore, "limit": 100_000});
        let (out, facts) = find(&t, args).await;
        assert_listing(&out, &facts, &expected);
        assert!(!out.contains(".git/") && !out.contains(".git\n"), "{out}");
        for (entry, present) in [
            ("src/.env", hidden),
            (".hidden/", hidden),
            (".gitignore", hidden),
            ("src/mod_1/.cache/x.rs", hidden),
            ("build/out.txt", no_ignore),
            ("logs/app.log", no_ignore),
            ("cache/x.tmp", no_ignore),
            ("\ntop_only.txt", no_ignore),
            ("src/mod_3/file_11.txt", no_ignore),
            ("src/mod_5/sub_1/file_2.md", no_ignore),
        ] {
            assert_eq!(out.contains(entry), present, "{entry} {hidden} {no_ignore}");
        }
    }
    // Asking for `.git` by name finds nothing, whatever the options.
    let args = json!({"pattern": ".git", "hidden": true, "no_ignore": true});
    let (out, facts) = find(&t, args).await;
    assert_eq!(out, "No entries found.");
    assert_eq!(facts["total"], json!(0));
}

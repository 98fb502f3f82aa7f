use std::path::Path;

use pretty_assertions::assert_eq;

use super::*;
use crate::search::walk::tests::{Tree, standard};

fn opts(pattern: &str) -> FindOptions {
    FindOptions {
        pattern: pattern.to_owned(),
        ..FindOptions::default()
    }
}

fn run(tree: &Tree, start: &str, o: &FindOptions) -> FindReport {
    find(&tree.jail, Path::new(start), o).unwrap()
}

fn listed(report: &FindReport) -> Vec<(&str, EntryType)> {
    report
        .entries
        .iter()
        .map(|e| (e.path.as_str(), e.kind))
        .collect()
}

#[test]
fn lists_everything_not_ignored_with_symlinks_unfollowed() {
    let tree = standard();
    let report = run(&tree, "", &opts(""));
    use EntryType::{Dir, File, Symlink};
    assert_eq!(
        listed(&report),
        [
            ("bin.dat", File),
            ("docs", Dir),
            ("docs/guide.md", File),
            ("link_in.rs", Symlink),
            ("link_out", Symlink),
            ("src", Dir),
            ("src/lib.rs", File),
            ("src/main.rs", File),
            ("src/nested", Dir),
            ("src/nested/ok.rs", File),
        ]
    );
    assert_eq!(
        report.render(),
        "bin.dat\ndocs/\ndocs/guide.md\nlink_in.rs\nlink_out\nsrc/\nsrc/lib.rs\nsrc/main.rs\nsrc/nested/\nsrc/nested/ok.rs"
    );
    let all = run(
        &tree,
        "",
        &FindOptions {
            hidden: true,
            no_ignore: true,
            ..opts("*.rs")
        },
    );
    assert_eq!(
        listed(&all).iter().map(|e| e.0).collect::<Vec<_>>(),
        [
            ".hidden/h.rs",
            "ignored/x.rs",
            "link_in.rs",
            "src/lib.rs",
            "src/main.rs",
            "src/nested/ok.rs",
            "src/nested/secret.rs"
        ]
    );
    assert!(!all.render().contains("outside") && !all.render().contains(".git/"));
}

#[test]
fn globs_kinds_sizes_and_depth() {
    let tree = standard();
    let names = |o: FindOptions, start: &str| {
        run(&tree, start, &o)
            .entries
            .into_iter()
            .map(|e| e.path)
            .collect::<Vec<_>>()
    };
    assert_eq!(names(opts("*.md"), ""), ["docs/guide.md"]);
    assert_eq!(names(opts("src/*.rs"), ""), ["src/lib.rs", "src/main.rs"]);
    assert_eq!(
        names(opts("src/**/*.rs"), ""),
        ["src/lib.rs", "src/main.rs", "src/nested/ok.rs"]
    );
    // A pattern with '/' also matches relative to the start.
    assert_eq!(names(opts("nested/*.rs"), "src"), ["src/nested/ok.rs"]);
    assert_eq!(
        names(
            FindOptions {
                kind: Some(EntryType::Dir),
                ..opts("")
            },
            ""
        ),
        ["docs", "src", "src/nested"]
    );
    assert_eq!(
        names(
            FindOptions {
                max_depth: Some(1),
                ..opts("")
            },
            "src"
        ),
        ["src/lib.rs", "src/main.rs", "src/nested"]
    );
    assert_eq!(
        names(
            FindOptions {
                min_size: Some(30),
                ..opts("")
            },
            ""
        ),
        ["src/lib.rs", "src/main.rs"]
    );
    assert_eq!(
        names(
            FindOptions {
                max_size: Some(12),
                ..opts("")
            },
            ""
        ),
        ["src/nested/ok.rs"]
    );
    let entry = &run(&tree, "src/nested/ok.rs", &opts("")).entries;
    assert_eq!(entry.len(), 1);
    assert_eq!(
        (entry[0].path.as_str(), entry[0].kind, entry[0].size),
        ("src/nested/ok.rs", EntryType::File, 10)
    );
    assert!(entry[0].modified.is_some_and(|m| m > 1_600_000_000));
    let err = find(&tree.jail, Path::new(""), &opts("a[")).unwrap_err();
    assert!(err.to_string().starts_with("invalid glob \"a[\""), "{err}");
    assert!(find(&tree.jail, Path::new("link_out"), &opts("")).is_err());
}

#[test]
fn pages_cover_everything_once_and_sort_by_modified() {
    let tree = Tree::new(&[]);
    for i in 0..45 {
        let path = tree.ws().join(format!("d{}/f{i:02}.txt", i % 3));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "x").unwrap();
        let time = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000 + i);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(time)
            .unwrap();
    }
    let all = run(
        &tree,
        "",
        &FindOptions {
            limit: 1000,
            ..opts("*.txt")
        },
    );
    assert_eq!(
        (all.total, all.truncated, all.next_offset),
        (45, false, None)
    );
    let mut paged = Vec::new();
    let mut offset = 0;
    loop {
        let page = run(
            &tree,
            "",
            &FindOptions {
                offset,
                limit: 10,
                ..opts("*.txt")
            },
        );
        assert_eq!(page.total, 45);
        paged.extend(page.entries.clone());
        match page.next_offset {
            Some(next) => {
                assert!(page.render().ends_with(&format!(
                    "[results {}-{} of 45 entries; continue with offset={next}]",
                    offset + 1,
                    offset + 10
                )));
                offset = next;
            }
            None => break,
        }
    }
    assert_eq!(paged, all.entries);
    let newest = run(
        &tree,
        "",
        &FindOptions {
            sort: SortBy::Modified,
            limit: 3,
            ..opts("*.txt")
        },
    );
    assert_eq!(
        newest
            .entries
            .iter()
            .map(|e| (e.path.as_str(), e.modified))
            .collect::<Vec<_>>(),
        [
            ("d2/f44.txt", Some(1_700_000_044)),
            ("d1/f43.txt", Some(1_700_000_043)),
            ("d0/f42.txt", Some(1_700_000_042))
        ]
    );
    assert_eq!(
        run(&tree, "", &opts("*.nothing")).render(),
        "No entries found."
    );
    assert_eq!(
        serde_json::to_value(run(
            &tree,
            "",
            &FindOptions {
                limit: 1,
                ..opts("f00.txt")
            }
        ))
        .unwrap(),
        serde_json::json!({"entries": [{"path": "d0/f00.txt", "type": "file", "size": 1, "modified": 1_700_000_000}], "total": 1, "truncated": false, "next_offset": null, "stopped": null})
    );
}

#[test]
fn entries_a_swapped_directory_would_show_from_outside_are_left_out() {
    // The walker reads directories by path. If `link_out` had been a real
    // directory when the walk listed it and a symlink to `outside` when the
    // walk read it, the walk would report `link_out/needle.txt`: an outside
    // name. The report is confirmed through the jail, which refuses that
    // path, and takes the facts of the entries that are there from the jail.
    let tree = standard();
    let entry = |path: &str| FindEntry {
        path: path.to_owned(),
        kind: EntryType::File,
        size: 999,
        modified: None,
    };
    let mut report = FindReport {
        entries: vec![
            entry("link_out/needle.txt"),
            entry("src/lib.rs"),
            entry("gone.rs"),
            entry("link_out"),
        ],
        total: 4,
        truncated: false,
        next_offset: None,
        stopped: None,
        stopped_note: None,
        offset: 0,
    };
    confirm(&tree.jail, &opts(""), &mut report);
    use EntryType::{File, Symlink};
    assert_eq!(
        listed(&report),
        [("src/lib.rs", File), ("link_out", Symlink)]
    );
    let lib = std::fs::metadata(tree.ws().join("src/lib.rs")).unwrap();
    assert_eq!(report.entries[0].size, lib.len());
    assert!(report.entries[0].modified.is_some());
}

#[test]
fn a_walk_past_its_time_limit_ends_partial_and_says_so() {
    let tree = Tree::new(&[]);
    for i in 0..100 {
        tree.write(&format!("d{}/f{i}.txt", i % 10), b"x");
    }
    let full = run(&tree, "", &opts("*.txt"));
    assert_eq!((full.total, full.stopped), (100, None));
    let expired = Stop::after(std::time::Duration::ZERO);
    let report = find_until(&tree.jail, Path::new(""), &opts("*.txt"), &expired).unwrap();
    assert_eq!(report.stopped, Some(Stopped::TimeLimit));
    assert!(report.total < 100, "{report:?}");
    assert_eq!(
        serde_json::to_value(&report).unwrap()["stopped"],
        "time_limit"
    );
    assert!(
        report
            .render()
            .ends_with("these results are partial; narrow it with path, include or types]"),
        "{}",
        report.render()
    );
}

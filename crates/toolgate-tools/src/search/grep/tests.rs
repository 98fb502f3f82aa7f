use std::path::Path;

use pretty_assertions::assert_eq;

use super::*;
use crate::search::walk::tests::{Tree, standard};

fn opts(pattern: &str) -> GrepOptions {
    GrepOptions {
        pattern: pattern.to_owned(),
        ..GrepOptions::default()
    }
}

fn files(mode: GrepMode, pattern: &str) -> GrepOptions {
    GrepOptions {
        mode,
        ..opts(pattern)
    }
}

fn run(tree: &Tree, start: &str, o: &GrepOptions) -> GrepReport {
    grep(&tree.jail, Path::new(start), o).unwrap()
}

fn paths(report: &GrepReport) -> Vec<&str> {
    report.results.iter().map(|r| r.path.as_str()).collect()
}

fn line(line: u64, text: &str, kind: LineKind) -> GrepLine {
    GrepLine {
        line,
        text: text.to_owned(),
        kind,
    }
}

#[test]
fn honours_ignore_files_hidden_binary_git_and_symlinks() {
    let tree = standard();
    let report = run(&tree, "", &files(GrepMode::Count, "needle"));
    let file = |path: &str, count| GrepFileResult {
        path: path.to_owned(),
        count,
        matches: vec![],
    };
    assert_eq!(
        report,
        GrepReport {
            mode: GrepMode::Count,
            results: vec![
                file("docs/guide.md", 1),
                file("src/lib.rs", 1),
                file("src/nested/ok.rs", 1)
            ],
            files_with_matches: 3,
            total_matches: 3,
            files_searched: 5,
            binary_files_skipped: 1,
            unreadable_files_skipped: 0,
            truncated: false,
            next_offset: None,
            stopped: None,
            stopped_note: None,
            context: false,
            offset: 0,
        }
    );
    assert_eq!(
        report.render(),
        "docs/guide.md:1\nsrc/lib.rs:1\nsrc/nested/ok.rs:1\n\
         [3 files with 3 matches; 5 files searched, 1 binary file skipped]"
    );
}

#[test]
fn hidden_and_no_ignore_widen_the_search_but_never_git_or_outside() {
    let tree = standard();
    let o = GrepOptions {
        hidden: true,
        no_ignore: true,
        ..files(GrepMode::FilesWithMatches, "needle")
    };
    let report = run(&tree, "", &o);
    assert_eq!(
        paths(&report),
        [
            ".env",
            ".gitignore",
            ".hidden/h.rs",
            "app.log",
            "docs/draft.md",
            "docs/guide.md",
            "ignored/x.rs",
            "src/lib.rs",
            "src/nested/ok.rs",
            "src/nested/secret.rs"
        ]
        .iter()
        .filter(|p| **p != ".gitignore")
        .copied()
        .collect::<Vec<_>>()
    );
    assert!(!report.render().contains("outside"));
}

#[test]
fn subdirectory_start_keeps_the_ignore_rules_of_its_parents() {
    let tree = standard();
    tree.write("ignored/deeper/y.rs", b"needle\n");
    tree.write("src/deep/app.log", b"needle\n");
    let report = run(&tree, "src", &files(GrepMode::FilesWithMatches, "needle"));
    assert_eq!(paths(&report), ["src/lib.rs", "src/nested/ok.rs"]);
    // An ignored directory asked for explicitly is searched.
    let report = run(
        &tree,
        "ignored",
        &files(GrepMode::FilesWithMatches, "needle"),
    );
    assert_eq!(paths(&report), ["ignored/deeper/y.rs", "ignored/x.rs"]);
}

#[test]
fn a_file_start_is_searched_alone_and_a_symlink_inside_is_followed() {
    let tree = standard();
    let report = run(&tree, "link_in.rs", &opts("needle"));
    assert_eq!(
        report.results[0].matches,
        vec![line(1, "// needle one", LineKind::Match)]
    );
    assert_eq!(
        report.render(),
        "link_in.rs:1:// needle one\n[1 match in 1 file; 1 file searched]"
    );
    let err = grep(&tree.jail, Path::new("link_out"), &opts("needle")).unwrap_err();
    assert!(matches!(err, SearchError::Jail(_)), "{err}");
    let err = grep(&tree.jail, Path::new("../outside"), &opts("needle")).unwrap_err();
    assert!(matches!(err, SearchError::Jail(_)), "{err}");
    let err = grep(&tree.jail, Path::new("missing"), &opts("needle")).unwrap_err();
    assert!(err.to_string().contains("does not exist"), "{err}");
}

#[test]
fn case_modes() {
    let tree = standard();
    let count = |case, pattern: &str| {
        let o = GrepOptions {
            case,
            ..files(GrepMode::Count, pattern)
        };
        run(&tree, "src/lib.rs", &o).total_matches
    };
    assert_eq!(count(CaseMode::Sensitive, "needle"), 1);
    assert_eq!(count(CaseMode::Insensitive, "needle"), 2);
    assert_eq!(count(CaseMode::Smart, "needle"), 2);
    assert_eq!(count(CaseMode::Smart, "Needle"), 1);
    assert_eq!(count(CaseMode::Insensitive, "NEEDLE"), 2);
}

#[test]
fn fixed_strings_word_and_invalid_regex() {
    let tree = Tree::new(&[("a.txt", b"call f(x[0]) now\nf(x0)\nneedles\nneedle\n")]);
    let o = GrepOptions {
        fixed_strings: true,
        ..opts("f(x[0])")
    };
    assert_eq!(
        run(&tree, "", &o).render(),
        "a.txt:1:call f(x[0]) now\n[1 match in 1 file; 1 file searched]"
    );
    let o = GrepOptions {
        word: true,
        ..opts("needle")
    };
    assert_eq!(
        run(&tree, "", &o).render(),
        "a.txt:4:needle\n[1 match in 1 file; 1 file searched]"
    );
    let err = grep(&tree.jail, Path::new(""), &opts("f(x[0]")).unwrap_err();
    let text = err.to_string();
    assert!(text.starts_with("invalid regex \"f(x[0]\": "), "{text}");
    assert!(text.ends_with("set fixed_strings: true"), "{text}");
    let err = grep(&tree.jail, Path::new(""), &opts("a\\nb")).unwrap_err();
    assert!(err.to_string().contains("multiline: true"), "{err}");
}

#[test]
fn multiline_matches_span_lines() {
    let tree = Tree::new(&[("a.rs", b"fn a(\n    x: u8,\n) {}\nfn b() {}\n")]);
    let o = GrepOptions {
        multiline: true,
        ..opts(r"fn a\(\n\s+x")
    };
    assert_eq!(
        run(&tree, "", &o).render(),
        "a.rs:1:fn a(\na.rs:2:    x: u8,\n[2 matches in 1 file; 1 file searched]"
    );
}

#[test]
fn context_lines_and_group_separators() {
    let text: String = (1..=20)
        .map(|i| {
            if i == 5 || i == 7 || i == 15 {
                format!("hit {i}\n")
            } else {
                format!("line {i}\n")
            }
        })
        .collect();
    let tree = Tree::new(&[("a.txt", text.as_bytes()), ("b.txt", b"x\nhit b\n")]);
    let o = GrepOptions {
        before: 1,
        after: 1,
        ..opts("hit")
    };
    let report = run(&tree, "", &o);
    assert_eq!(
        report.render(),
        "a.txt-4-line 4\na.txt:5:hit 5\na.txt-6-line 6\na.txt:7:hit 7\na.txt-8-line 8\n--\n\
         a.txt-14-line 14\na.txt:15:hit 15\na.txt-16-line 16\n--\nb.txt-1-x\nb.txt:2:hit b\n\
         [4 matches in 2 files; 2 files searched]"
    );
    assert_eq!(report.total_matches, 4);
    // Paging keeps each match's own context.
    let page = run(
        &tree,
        "",
        &GrepOptions {
            offset: 1,
            limit: 2,
            ..o.clone()
        },
    );
    assert_eq!(
        page.results[0].matches,
        vec![
            line(6, "line 6", LineKind::Context),
            line(7, "hit 7", LineKind::Match),
            line(8, "line 8", LineKind::Context),
            line(14, "line 14", LineKind::Context),
            line(15, "hit 15", LineKind::Match),
            line(16, "line 16", LineKind::Context),
        ]
    );
    assert_eq!(page.next_offset, Some(3));
    assert!(page.render().ends_with("--\na.txt-14-line 14\na.txt:15:hit 15\na.txt-16-line 16\n[results 2-3 of 4 matches in 2 files; 2 files searched; continue with offset=3]"), "{}", page.render());
}

#[test]
fn long_lines_are_cut_on_a_char_boundary() {
    let long = format!("needle {}\n", "é".repeat(100));
    let tree = Tree::new(&[("a.txt", long.as_bytes())]);
    let o = GrepOptions {
        max_line_chars: 10,
        ..opts("needle")
    };
    assert_eq!(
        run(&tree, "", &o).render(),
        "a.txt:1:needle ééé… [97 more chars]\n[1 match in 1 file; 1 file searched]"
    );
}

#[test]
fn huge_file_is_counted_exactly_with_bounded_storage() {
    let mut text = String::new();
    for i in 0..200_000 {
        text.push_str(if i % 2 == 0 {
            "needle here\n"
        } else {
            "nothing\n"
        });
    }
    let tree = Tree::new(&[("huge.txt", text.as_bytes())]);
    let o = GrepOptions {
        limit: 3,
        ..opts("needle")
    };
    let report = run(&tree, "", &o);
    assert_eq!(report.total_matches, 100_000);
    assert_eq!(report.results[0].count, 100_000);
    assert_eq!(report.results[0].matches.len(), 3);
    assert_eq!(
        report.render(),
        "huge.txt:1:needle here\nhuge.txt:3:needle here\nhuge.txt:5:needle here\n[results 1-3 of 100000 matches in 1 file; 1 file searched; continue with offset=3]"
    );
}

#[test]
fn offset_and_limit_pages_cover_everything_once() {
    let tree = Tree::new(&[]);
    for i in 0..60 {
        tree.write(
            &format!("d{}/f{i:02}.txt", i % 4),
            format!("needle {i}\nx\nneedle again {i}\n").as_bytes(),
        );
    }
    for mode in [
        GrepMode::Content,
        GrepMode::FilesWithMatches,
        GrepMode::Count,
    ] {
        let all = run(
            &tree,
            "",
            &GrepOptions {
                limit: 1000,
                ..files(mode, "needle")
            },
        );
        assert!(!all.truncated);
        let flat = |r: &GrepReport| -> Vec<String> {
            r.results
                .iter()
                .flat_map(|f| {
                    if f.matches.is_empty() {
                        vec![f.path.clone()]
                    } else {
                        f.matches
                            .iter()
                            .map(|m| format!("{}:{}", f.path, m.line))
                            .collect()
                    }
                })
                .collect()
        };
        let mut paged = Vec::new();
        let mut offset = 0;
        loop {
            let page = run(
                &tree,
                "",
                &GrepOptions {
                    offset,
                    limit: 7,
                    ..files(mode, "needle")
                },
            );
            assert_eq!(page.total_matches, 120);
            assert_eq!(page.files_with_matches, 60);
            paged.extend(flat(&page));
            match page.next_offset {
                Some(next) => offset = next,
                None => break,
            }
        }
        assert_eq!(paged, flat(&all), "{mode:?}");
        let expected = if mode == GrepMode::Content { 120 } else { 60 };
        assert_eq!(paged.len(), expected);
    }
}

#[test]
fn types_and_include_exclude_globs() {
    let tree = standard();
    let search = |o: GrepOptions| {
        paths(&run(&tree, "", &o))
            .iter()
            .map(|s| (*s).to_owned())
            .collect::<Vec<_>>()
    };
    let base = files(GrepMode::FilesWithMatches, "needle");
    assert_eq!(
        search(GrepOptions {
            types: vec!["rust".into()],
            ..base.clone()
        }),
        ["src/lib.rs", "src/nested/ok.rs"]
    );
    assert_eq!(
        search(GrepOptions {
            types: vec!["md".into()],
            ..base.clone()
        }),
        ["docs/guide.md"]
    );
    assert_eq!(
        search(GrepOptions {
            include: vec!["*.rs".into()],
            ..base.clone()
        }),
        ["src/lib.rs", "src/nested/ok.rs"]
    );
    assert_eq!(
        search(GrepOptions {
            include: vec!["src/*".into()],
            ..base.clone()
        }),
        ["src/lib.rs"]
    );
    assert_eq!(
        search(GrepOptions {
            include: vec!["src/**".into()],
            exclude: vec!["nested".into()],
            ..base.clone()
        }),
        ["src/lib.rs"]
    );
    assert_eq!(
        search(GrepOptions {
            exclude: vec!["*.md".into(), "lib.rs".into()],
            ..base.clone()
        }),
        ["src/nested/ok.rs"]
    );
    let err = grep(
        &tree.jail,
        Path::new(""),
        &GrepOptions {
            types: vec!["rusty".into()],
            ..base.clone()
        },
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("unknown file type \"rusty\"; valid types include: rust, py"),
        "{err}"
    );
    let err = grep(
        &tree.jail,
        Path::new(""),
        &GrepOptions {
            include: vec!["a[".into()],
            ..base
        },
    )
    .unwrap_err();
    assert!(err.to_string().starts_with("invalid glob \"a[\""), "{err}");
}

#[test]
fn no_matches_and_serialization() {
    let tree = standard();
    let report = run(&tree, "", &opts("absent"));
    assert_eq!(
        report.render(),
        "No matches. [5 files searched, 1 binary file skipped]"
    );
    let report = run(&tree, "src/lib.rs", &opts("needle"));
    assert_eq!(
        serde_json::to_value(&report).unwrap(),
        serde_json::json!({
            "mode": "content",
            "results": [{"path": "src/lib.rs", "count": 1, "matches": [{"line": 1, "text": "// needle one", "kind": "match"}]}],
            "files_with_matches": 1, "total_matches": 1, "files_searched": 1,
            "binary_files_skipped": 0, "unreadable_files_skipped": 0,
            "truncated": false, "next_offset": null, "stopped": null
        })
    );
}

#[test]
fn unreadable_files_are_skipped_and_counted() {
    let tree = Tree::new(&[("a.txt", b"needle\n")]);
    tree.symlink("/etc/hostname", "abs.txt");
    // The walker skips symlinks; a file start that is one is refused.
    assert_eq!(
        run(&tree, "", &opts("needle")).render(),
        "a.txt:1:needle\n[1 match in 1 file; 1 file searched]"
    );
    assert!(grep(&tree.jail, Path::new("abs.txt"), &opts("x")).is_err());
}

#[test]
fn a_path_swapped_for_an_escaping_symlink_is_refused_and_counted() {
    // What a worker sees when `f.txt` became `f.txt -> ../outside/needle.txt`
    // between the walk listing it and the open.
    let tree = Tree::new(&[]);
    tree.symlink("../outside/needle.txt", "f.txt");
    let matcher = build_matcher(&opts("needle")).unwrap();
    let collector = Mutex::new(Collector::new(true, 10));
    let silent = Progress::default();
    let stop = Stop::default();
    let job = Job::new(&tree.jail, &matcher, &collector, 10, 100, &silent, &stop);
    let mut worker = job.worker(&SearcherBuilder::new());
    let mut hits = FileHits::default();
    job.search(&mut worker, Path::new("f.txt"), "f.txt".into(), &mut hits);
    job.finish();
    let report = collector
        .into_inner()
        .unwrap()
        .report(&opts("needle"), false);
    assert_eq!(
        (report.unreadable_files_skipped, report.total_matches),
        (1, 0)
    );
    assert_eq!(
        report.render(),
        "No matches. [0 files searched, 1 unreadable or refused file skipped]"
    );
}

#[test]
fn a_long_search_reports_how_far_it_got() {
    let tree = Tree::new(&[]);
    for i in 0..2500 {
        tree.write(&format!("d{}/f{i}.txt", i % 10), b"nothing here\n");
    }
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = seen.clone();
    let progress = Progress::new(move |m: &str| sink.lock().unwrap().push(m.to_owned()));
    let report = grep_with_progress(
        &tree.jail,
        Path::new(""),
        &opts("needle"),
        &progress,
        &Stop::default(),
    )
    .unwrap();
    assert_eq!(report.files_searched, 2500);
    assert_eq!(
        *seen.lock().unwrap(),
        ["searched 1000 files", "searched 2000 files"]
    );
}

#[test]
fn a_search_past_its_time_limit_or_cancelled_ends_partial_and_says_so() {
    let tree = Tree::new(&[]);
    for i in 0..200 {
        tree.write(&format!("d{}/f{i}.txt", i % 10), b"needle\n");
    }
    let full = grep(&tree.jail, Path::new(""), &opts("needle")).unwrap();
    assert_eq!((full.files_searched, full.stopped), (200, None));
    assert!(!full.render().contains("partial"), "{}", full.render());
    assert_eq!(full.facts()["stopped"], serde_json::Value::Null);

    let expired = Stop::after(std::time::Duration::ZERO);
    let report = grep_with_progress(
        &tree.jail,
        Path::new(""),
        &opts("needle"),
        &Progress::default(),
        &expired,
    )
    .unwrap();
    assert_eq!(report.stopped, Some(Stopped::TimeLimit));
    assert!(report.files_searched < 200, "{report:?}");
    assert_eq!(report.unreadable_files_skipped, 0, "{report:?}");
    assert_eq!(report.facts()["stopped"], "time_limit");
    let text = report.render();
    assert!(
        text.ends_with(
            "[the search stopped after its time limit of 0 s, so these results are partial; \
             narrow it with path, include or types]"
        ),
        "{text}"
    );

    let cancelled = Stop::default();
    drop(cancelled.cancel_on_drop());
    let report = grep_with_progress(
        &tree.jail,
        Path::new("d1/f1.txt"),
        &opts("needle"),
        &Progress::default(),
        &cancelled,
    )
    .unwrap();
    assert_eq!(
        (report.stopped, report.total_matches),
        (Some(Stopped::Cancelled), 0)
    );
}

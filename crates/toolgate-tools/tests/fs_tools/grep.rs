//! grep on the generated tree: content, context, case, literal and word
//! matching, globs and types, hidden and ignored files, binary files, the
//! three modes and paging to the end. Every expectation comes from the
//! tree's model, and both the text and the JSON are checked.

use std::collections::BTreeSet;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toolgate_policy::Stage;

use crate::common::{facts, text};
use crate::tree::{DEFAULT, HUGE_NEEDLES, Tree, Walk, has_word, is_binary, leak};

/// Calls grep; the pipeline must not have cut the output.
async fn grep(t: &Tree, args: Value) -> (String, Value) {
    let shown = args.to_string();
    let result = t.f.call_result("grep", args).await.unwrap_or_else(|e| {
        panic!("grep {shown} failed: {e}");
    });
    assert!(!result.truncated, "the pipeline cut grep {shown}");
    let out = text(&result.output);
    assert_eq!(leak(&out), None, "grep {shown} leaked: {out}");
    (out, facts(&result.output))
}

/// The line numbers of a file's matches in the JSON.
fn match_lines(file: &Value) -> Vec<u64> {
    if let Some(lines) = file.get("lines") {
        return serde_json::from_value(lines.clone()).unwrap();
    }
    file.get("matches")
        .and_then(Value::as_array)
        .map(|lines| {
            lines
                .iter()
                .filter(|l| l["kind"] == "match")
                .map(|l| l["line"].as_u64().unwrap())
                .collect()
        })
        .unwrap_or_default()
}

/// The text's result lines, without a final `[...]` note.
fn body(out: &str) -> Vec<String> {
    out.lines()
        .filter(|l| !l.starts_with('['))
        .map(str::to_owned)
        .collect()
}

/// (path, matching lines) per file, in order, from `path:line:text` lines.
fn per_file(lines: &[String]) -> Vec<(String, Vec<u64>)> {
    let mut out: Vec<(String, Vec<u64>)> = Vec::new();
    for line in lines {
        let mut parts = line.splitn(3, ':');
        let (path, number) = (parts.next().unwrap(), parts.next().unwrap());
        let number = number.parse().unwrap();
        match out.last_mut() {
            Some((last, numbers)) if last == path => numbers.push(number),
            _ => out.push((path.to_owned(), vec![number])),
        }
    }
    out
}

/// `1 file`, `2 files`.
fn counted(n: &Value, one: &str, many: &str) -> String {
    let n = n.as_u64().unwrap();
    format!("{n} {}", if n == 1 { one } else { many })
}

/// What grep's summary line says matched, from its facts, in `mode`.
fn found(facts: &Value, mode: &str) -> String {
    let matches = counted(&facts["total_matches"], "match", "matches");
    let files = counted(&facts["files_with_matches"], "file", "files");
    match mode {
        "content" => format!("{matches} in {files}"),
        "files_with_matches" => counted(
            &facts["files_with_matches"],
            "file with matches",
            "files with matches",
        ),
        _ => format!("{files} with {matches}"),
    }
}

/// What grep's summary line says was searched, from its facts.
fn searched(facts: &Value) -> String {
    let mut text = format!(
        "{} searched",
        counted(&facts["files_searched"], "file", "files")
    );
    if facts["binary_files_skipped"] != json!(0) {
        let binary = counted(
            &facts["binary_files_skipped"],
            "binary file",
            "binary files",
        );
        text.push_str(&format!(", {binary} skipped"));
    }
    text
}

/// Checks a complete (untruncated) content-mode answer against `expected`.
fn assert_content(out: &str, facts: &Value, expected: &[String], searched: usize) {
    assert_eq!(body(out), expected);
    let summary = format!("[{}; {}]", found(facts, "content"), self::searched(facts));
    assert_eq!(out, format!("{}\n{summary}", expected.join("\n")));
    let files = per_file(expected);
    let got: Vec<(String, Vec<u64>)> = facts["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let lines = match_lines(f);
            assert_eq!(f["count"], json!(lines.len()), "{f}");
            (f["path"].as_str().unwrap().to_owned(), lines)
        })
        .collect();
    assert_eq!(got, files);
    assert_eq!(facts["total_matches"], json!(expected.len()));
    assert_eq!(facts["files_with_matches"], json!(files.len()));
    assert_eq!(facts["files_searched"], json!(searched), "{out}");
    assert_eq!(facts["truncated"], json!(false));
    assert_eq!(facts["next_offset"], Value::Null);
    assert_eq!(facts["unreadable_files_skipped"], json!(0));
}

fn everything(_: &str) -> bool {
    true
}

#[tokio::test]
async fn grep_content_lists_every_match_sorted_by_path() {
    let t = Tree::new();
    let (out, facts) = grep(&t, json!({"pattern": "needle", "limit": 100_000})).await;
    let expected = t.grep_lines(DEFAULT, everything, |l| l.contains("needle"));
    let searched = t.searched(DEFAULT, everything);
    assert_content(&out, &facts, &expected, searched.len());
    let binary = searched.iter().filter(|(_, b)| is_binary(b)).count();
    assert_eq!(binary, 3, "bin/blob.bin, bin/late.dat, src/mod_0/data.rs");
    assert_eq!(facts["binary_files_skipped"], json!(binary));
    // What the model implies, spelled out.
    for line in [
        "big/huge.txt:1:needle at line 1".to_owned(),
        "big/huge.txt:123457:needle at line 123457".to_owned(),
        "big/huge.txt:200000:needle at line 200000".to_owned(),
        "src/top_only.txt:1:needle not anchored".to_owned(),
        format!(
            "long/wide.txt:2:{}needle{}… [2500 more chars]",
            "x".repeat(100),
            "y".repeat(394)
        ),
        format!("long/wide.txt:3:{}… [106 more chars]", "é".repeat(500)),
    ] {
        assert!(expected.contains(&line), "{line}");
    }
    for absent in [
        "bin/", "data.rs", ".git", ".env", ".hidden", "build/", ".log", ".tmp", "alias.rs",
    ] {
        assert!(!out.contains(absent), "{absent} listed:\n{out}");
    }
    assert!(!out.contains("\ntop_only.txt") && !out.starts_with("top_only.txt"));
    // One file, searched alone.
    let (out, _) = grep(&t, json!({"pattern": "needle", "path": "big/huge.txt"})).await;
    let lines: Vec<String> = HUGE_NEEDLES
        .iter()
        .map(|i| format!("big/huge.txt:{i}:needle at line {i}"))
        .collect();
    let summary = format!("[{} matches in 1 file; 1 file searched]", lines.len());
    assert_eq!(out, format!("{}\n{summary}", lines.join("\n")));
}

#[tokio::test]
async fn grep_case_modes_fixed_strings_and_words() {
    let t = Tree::new();
    let lower = |l: &str| l.to_lowercase();
    let followed = |l: &str, s: &str| l.match_indices(s).any(|(i, _)| l.len() > i + s.len());
    type Case<'a> = (Value, Box<dyn Fn(&str) -> bool + 'a>);
    let cases: Vec<Case<'_>> = vec![
        (
            json!({"pattern": "needle"}),
            Box::new(|l| l.contains("needle")),
        ),
        (
            json!({"pattern": "needle", "case": "sensitive"}),
            Box::new(|l| l.contains("needle")),
        ),
        (
            json!({"pattern": "needle", "case": "insensitive"}),
            Box::new(move |l| lower(l).contains("needle")),
        ),
        (
            json!({"pattern": "NEEDLE", "case": "insensitive"}),
            Box::new(move |l| lower(l).contains("needle")),
        ),
        // Smart: all lower case is insensitive, an upper-case letter is not.
        (
            json!({"pattern": "needle", "case": "smart"}),
            Box::new(move |l| lower(l).contains("needle")),
        ),
        (
            json!({"pattern": "Needle", "case": "smart"}),
            Box::new(|l| l.contains("Needle")),
        ),
        // Metacharacters taken literally, and the same text as a regex.
        (
            json!({"pattern": "(needle).", "fixed_strings": true}),
            Box::new(|l| l.contains("(needle).")),
        ),
        (
            json!({"pattern": "(needle).", "fixed_strings": false}),
            Box::new(move |l| followed(l, "needle")),
        ),
        (
            json!({"pattern": "[needle]+?", "fixed_strings": true}),
            Box::new(|l| l.contains("[needle]+?")),
        ),
        // Whole words: not `needles`, `needle_x` or `xxxneedleyyy`.
        (
            json!({"pattern": "needle", "word": true}),
            Box::new(|l| has_word(l, "needle")),
        ),
        (
            json!({"pattern": "needle", "word": true, "case": "insensitive"}),
            Box::new(move |l| has_word(&lower(l), "needle")),
        ),
    ];
    let searched = t.searched(DEFAULT, everything).len();
    let mut sizes = BTreeSet::new();
    for (mut args, matches) in cases {
        args["limit"] = json!(100_000);
        let expected = t.grep_lines(DEFAULT, everything, matches);
        assert!(!expected.is_empty(), "{args}");
        sizes.insert(expected.len());
        let (out, facts) = grep(&t, args.clone()).await;
        assert_content(&out, &facts, &expected, searched);
    }
    // The cases select different lines, so the tree tells them apart.
    assert!(sizes.len() >= 6, "{sizes:?}");
}

#[tokio::test]
async fn grep_narrows_by_globs_and_types() {
    let t = Tree::new();
    let direct = |p: &str, dir: &str, ext: &str| {
        p.strip_prefix(dir)
            .is_some_and(|rest| !rest.contains('/') && rest.ends_with(ext))
    };
    type Case<'a> = (Value, Box<dyn Fn(&str) -> bool + 'a>);
    let cases: Vec<Case<'_>> = vec![
        (
            json!({"include": ["*.py"]}),
            Box::new(|p| p.ends_with(".py")),
        ),
        (
            json!({"include": ["src/mod_2/**"]}),
            Box::new(|p| p.starts_with("src/mod_2/")),
        ),
        (
            json!({"include": ["src/mod_2/*.rs"]}),
            Box::new(move |p| direct(p, "src/mod_2/", ".rs")),
        ),
        (
            json!({"include": ["*.md", "*.py"], "exclude": ["sub_0"]}),
            Box::new(|p| (p.ends_with(".md") || p.ends_with(".py")) && !p.contains("/sub_0/")),
        ),
        (
            json!({"exclude": ["mod_1", "*.md", "big"]}),
            Box::new(|p| !p.contains("/mod_1/") && !p.ends_with(".md") && !p.starts_with("big/")),
        ),
        (json!({"types": ["rust"]}), Box::new(|p| p.ends_with(".rs"))),
        (
            json!({"types": ["py", "md"]}),
            Box::new(|p| p.ends_with(".py") || p.ends_with(".md")),
        ),
        (
            json!({"types": ["rust"], "exclude": ["src/mod_0/**"]}),
            Box::new(|p| p.ends_with(".rs") && !p.starts_with("src/mod_0/")),
        ),
    ];
    for (mut args, keep) in cases {
        args["pattern"] = json!("needle");
        args["limit"] = json!(100_000);
        let searched = t.searched(DEFAULT, &keep);
        let binary = searched.iter().filter(|(_, b)| is_binary(b)).count();
        let expected = t.grep_lines(DEFAULT, &keep, |l| l.contains("needle"));
        assert!(!expected.is_empty(), "{args}");
        let (out, facts) = grep(&t, args.clone()).await;
        assert_content(&out, &facts, &expected, searched.len());
        assert_eq!(facts["binary_files_skipped"], json!(binary), "{args}");
    }
}

#[tokio::test]
async fn grep_hidden_and_no_ignore_widen_the_walk_but_never_into_git() {
    let t = Tree::new();
    for (hidden, no_ignore) in [(true, false), (false, true), (true, true)] {
        let walk = Walk { hidden, no_ignore };
        let args = json!({"pattern": "needle", "hidden": hidden, "no_ignore": no_ignore,
                          "limit": 100_000});
        let expected = t.grep_lines(walk, everything, |l| l.contains("needle"));
        let searched = t.searched(walk, everything).len();
        let (out, facts) = grep(&t, args).await;
        assert_content(&out, &facts, &expected, searched);
        assert!(!out.contains(".git/"), "{out}");
        for (wanted, present) in [
            ("src/.env:1:needle env", hidden),
            (".hidden/secret.txt:1:needle hidden dir", hidden),
            ("src/mod_1/.cache/x.rs:1:needle cached", hidden),
            ("build/out.txt:1:needle in build", no_ignore),
            ("src/build/gen.rs:1:needle generated", no_ignore),
            ("logs/app.log:1:needle log", no_ignore),
            ("cache/x.tmp:1:needle tmp", no_ignore),
            ("\ntop_only.txt:1:needle top only", no_ignore),
        ] {
            assert_eq!(
                out.contains(wanted),
                present,
                "{wanted} {hidden} {no_ignore}"
            );
        }
    }
}

#[tokio::test]
async fn grep_context_lines_and_group_separators() {
    let t = Tree::new();
    let args = json!({"pattern": "needle", "path": "ctx", "context": 1});
    let (out, facts) = grep(&t, args).await;
    let expected = "\
ctx/a.txt-2-a2
ctx/a.txt:3:a3 needle
ctx/a.txt-4-a4
ctx/a.txt:5:a5 needle
ctx/a.txt-6-a6
--
ctx/a.txt-9-a9
ctx/a.txt:10:a10 needle
ctx/a.txt-11-a11
--
ctx/b.txt:1:b1 needle
ctx/b.txt-2-b2
--
ctx/b.txt-11-b11
ctx/b.txt:12:b12 needle
[5 matches in 2 files; 2 files searched]";
    assert_eq!(out, expected);
    assert_eq!(match_lines(&facts["results"][0]), vec![3, 5, 10]);
    assert_eq!(match_lines(&facts["results"][1]), vec![1, 12]);
    assert_eq!(facts["total_matches"], json!(5));
    // before/after override context; a page keeps its own matches and their
    // context: line 3 (a match on the previous page) is not repeated.
    let args = json!({"pattern": "needle", "path": "ctx", "context": 5, "before": 2,
                      "after": 0, "offset": 1, "limit": 2});
    let (out, facts) = grep(&t, args).await;
    let expected = "\
ctx/a.txt-4-a4
ctx/a.txt:5:a5 needle
--
ctx/a.txt-8-a8
ctx/a.txt-9-a9
ctx/a.txt:10:a10 needle
[results 2-3 of 5 matches in 2 files; 2 files searched; continue with offset=3]";
    assert_eq!(out, expected);
    assert_eq!(match_lines(&facts["results"][0]), vec![5, 10]);
    assert_eq!(facts["next_offset"], json!(3));
}

/// Follows `next_offset` from 0 to the end; returns the pages' bodies and
/// checks each page's totals, hint and JSON.
async fn pages(t: &Tree, mut args: Value, limit: usize, total: usize, mode: &str) -> Vec<String> {
    let mut all = Vec::new();
    let mut offset = 0usize;
    let mut calls = 0;
    loop {
        calls += 1;
        assert!(calls <= total / limit + 2, "paging does not end");
        args["offset"] = json!(offset);
        args["limit"] = json!(limit);
        let (out, facts) = grep(t, args.clone()).await;
        let lines = body(&out);
        let shown = lines.len();
        let key = if mode == "content" {
            "total_matches"
        } else {
            "files_with_matches"
        };
        assert_eq!(facts[key], json!(total), "offset {offset}");
        all.extend(lines);
        let next = offset + limit;
        if next < total {
            assert_eq!(shown, limit);
            assert_eq!(facts["next_offset"], json!(next));
            assert_eq!(facts["truncated"], json!(true));
            let hint = format!(
                "[results {}-{next} of {}; {}; continue with offset={next}]",
                offset + 1,
                found(&facts, mode),
                searched(&facts)
            );
            assert_eq!(out.lines().last(), Some(hint.as_str()));
            offset = next;
        } else {
            assert_eq!(shown, total - offset);
            assert_eq!(facts["next_offset"], Value::Null);
            assert_eq!(facts["truncated"], json!(false));
            assert!(!out.contains("continue with"), "{out}");
            let summary = format!("[{}; {}]", found(&facts, mode), searched(&facts));
            assert_eq!(out.lines().last(), Some(summary.as_str()));
            return all;
        }
    }
}

#[tokio::test]
async fn grep_pages_follow_next_offset_to_the_exact_end() {
    let t = Tree::new();
    let expected = t.grep_lines(DEFAULT, everything, |l| l.contains("needle"));
    assert!(expected.len() > 200, "{}", expected.len());
    let got = pages(
        &t,
        json!({"pattern": "needle"}),
        37,
        expected.len(),
        "content",
    )
    .await;
    assert_eq!(got, expected);
    assert_eq!(got.iter().collect::<BTreeSet<_>>().len(), got.len());
    let files = per_file(&expected);
    let paths: Vec<String> = files.iter().map(|(p, _)| p.clone()).collect();
    let args = json!({"pattern": "needle", "mode": "files_with_matches"});
    let got = pages(&t, args, 13, files.len(), "files_with_matches").await;
    assert_eq!(got, paths);
    let counts: Vec<String> = files
        .iter()
        .map(|(p, l)| format!("{p}:{}", l.len()))
        .collect();
    let args = json!({"pattern": "needle", "mode": "count"});
    assert_eq!(pages(&t, args, 13, files.len(), "count").await, counts);
    // A page past the end says how many there are.
    let args = json!({"pattern": "needle", "mode": "count", "offset": 100_000});
    let (out, facts) = grep(&t, args).await;
    assert_eq!(
        out,
        format!(
            "[no results at offset=100000; {} in all; {}]",
            found(&facts, "count"),
            searched(&facts)
        )
    );
    assert_eq!(facts["results"], json!([]));
}

#[tokio::test]
async fn grep_modes_report_files_and_counts() {
    let t = Tree::new();
    let expected = t.grep_lines(DEFAULT, everything, |l| l.contains("needle"));
    let files = per_file(&expected);
    let args = json!({"pattern": "needle", "mode": "files_with_matches", "limit": 100_000});
    let (out, facts) = grep(&t, args).await;
    let paths: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
    let summary = format!(
        "[{}; {}]",
        found(&facts, "files_with_matches"),
        searched(&facts)
    );
    assert_eq!(out, format!("{}\n{summary}", paths.join("\n")));
    let got: Vec<&str> = facts["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(got, paths);
    let args = json!({"pattern": "needle", "mode": "count", "limit": 100_000});
    let (out, facts) = grep(&t, args).await;
    let counts: Vec<String> = files
        .iter()
        .map(|(p, l)| format!("{p}:{}", l.len()))
        .collect();
    let summary = format!("[{}; {}]", found(&facts, "count"), searched(&facts));
    assert_eq!(out, format!("{}\n{summary}", counts.join("\n")));
    let got: Vec<String> = facts["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| format!("{}:{}", f["path"].as_str().unwrap(), f["count"]))
        .collect();
    assert_eq!(got, counts);
    assert_eq!(facts["total_matches"], json!(expected.len()));
}

#[tokio::test]
async fn grep_skips_and_counts_binary_files_even_after_early_matches() {
    let t = Tree::new();
    let (out, facts) = grep(&t, json!({"pattern": "needle", "path": "bin"})).await;
    assert_eq!(
        out,
        "No matches. [2 files searched, 2 binary files skipped]"
    );
    assert_eq!(facts["binary_files_skipped"], json!(2));
    assert_eq!(facts["files_searched"], json!(2));
    assert_eq!(facts["total_matches"], json!(0));
    // The NUL comes after 8,000 lines with 80 matches: none is shown.
    let args = json!({"pattern": "needle", "path": "bin/late.dat", "mode": "count"});
    let (out, facts) = grep(&t, args).await;
    assert_eq!(out, "No matches. [1 file searched, 1 binary file skipped]");
    assert_eq!(facts["binary_files_skipped"], json!(1));
}

#[tokio::test]
async fn grep_refuses_bad_patterns_and_types_with_a_clear_message() {
    let t = Tree::new();
    for (args, wanted) in [
        (
            json!({"pattern": "needle("}),
            vec!["invalid regex", "fixed_strings: true"],
        ),
        (
            json!({"pattern": "a\\nb"}),
            vec!["invalid regex", "multiline: true"],
        ),
        (
            json!({"pattern": "needle", "types": ["rustacean"]}),
            vec!["unknown file type \"rustacean\"", "rust, py, js"],
        ),
        (
            json!({"pattern": "needle", "include": ["src/[x"]}),
            vec!["invalid glob", "src/[x"],
        ),
    ] {
        let error = t.f.call("grep", args.clone()).await.unwrap_err();
        assert_eq!(error.stage(), Stage::Run, "{args}: {error}");
        let message = error.to_string();
        for part in wanted {
            assert!(message.contains(part), "{args}: {message}");
        }
    }
    // A missing path is an error too, not "No matches".
    let error =
        t.f.err("grep", json!({"pattern": "x", "path": "nope"}))
            .await;
    assert!(error.contains("nope"), "{error}");
}

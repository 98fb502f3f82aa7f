#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::parse_range;
use crate::patch::{FileMode, FileOp, HunkLine, PatchFormat, apply_hunks, parse};
use pretty_assertions::assert_eq;

fn ops(text: &str) -> Vec<FileOp> {
    let p = parse(text).unwrap();
    assert_eq!(p.format, PatchFormat::Unified);
    p.ops
}

#[test]
fn range_headers() {
    let r = parse_range("@@ -1,3 +1,4 @@ fn main() {").unwrap();
    assert_eq!(
        (r.old_start, r.old_count, r.new_start, r.new_count),
        (1, 3, 1, 4)
    );
    assert_eq!(r.section, "fn main() {");
    let r = parse_range("@@ -5 +0,0 @@").unwrap();
    assert_eq!((r.old_start, r.old_count, r.new_count), (5, 1, 0));
    assert!(parse_range("@@ -x +1 @@").is_none());
}

#[test]
fn git_diff_single_file() {
    let text = "diff --git a/src/x.rs b/src/x.rs
index 123..456 100644
--- a/src/x.rs
+++ b/src/x.rs
@@ -2,3 +2,3 @@ fn f()
 a
-b
+B
 c
";
    let got = ops(text);
    let FileOp::Update {
        path,
        move_to,
        hunks,
        ..
    } = &got[0]
    else {
        panic!()
    };
    assert_eq!((path.as_str(), move_to), ("src/x.rs", &None));
    assert_eq!(hunks[0].line_hint, Some(2));
    assert!(
        hunks[0].anchors.is_empty(),
        "the section text is not an anchor"
    );
    assert_eq!(
        hunks[0].lines,
        vec![
            HunkLine::Context("a".into()),
            HunkLine::Remove("b".into()),
            HunkLine::Add("B".into()),
            HunkLine::Context("c".into())
        ]
    );
}

#[test]
fn plain_paths_timestamps_and_multiple_files() {
    let text = "--- x.txt\t2024-01-01 00:00:00
+++ x.txt\t2024-01-02 00:00:00
@@ -1 +1 @@
-a
+b
--- a/y.txt
+++ b/y.txt
@@ -1 +1 @@
-c
+d
";
    let got = ops(text);
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].path(), "x.txt");
    assert_eq!(got[1].path(), "y.txt");
}

#[test]
fn new_and_deleted_files() {
    let text = "diff --git a/n.txt b/n.txt
new file mode 100644
--- /dev/null
+++ b/n.txt
@@ -0,0 +1,2 @@
+one
+two
\\ No newline at end of file
diff --git a/d.txt b/d.txt
deleted file mode 100644
--- a/d.txt
+++ /dev/null
@@ -1 +0,0 @@
-gone
diff --git a/empty b/empty
new file mode 100644
index 0000000..e69de29
diff --git a/olde b/olde
deleted file mode 100644
index e69de29..0000000
";
    assert_eq!(
        ops(text),
        vec![
            FileOp::Add {
                path: "n.txt".into(),
                content: "one\ntwo".into(),
                mode: Some(FileMode::Regular),
            },
            FileOp::Delete {
                path: "d.txt".into()
            },
            FileOp::Add {
                path: "empty".into(),
                content: String::new(),
                mode: Some(FileMode::Regular),
            },
            FileOp::Delete {
                path: "olde".into()
            },
        ]
    );
}

#[test]
fn git_renames() {
    let text = "diff --git a/old.txt b/new.txt
similarity index 100%
rename from old.txt
rename to new.txt
diff --git a/p.txt b/q.txt
similarity index 80%
rename from p.txt
rename to q.txt
--- a/p.txt
+++ b/q.txt
@@ -1 +1 @@
-x
+y
";
    let got = ops(text);
    assert_eq!(
        got[0],
        FileOp::Update {
            path: "old.txt".into(),
            move_to: Some("new.txt".into()),
            hunks: vec![],
            mode: None,
        }
    );
    let FileOp::Update {
        path,
        move_to,
        hunks,
        ..
    } = &got[1]
    else {
        panic!()
    };
    assert_eq!(
        (path.as_str(), move_to.as_deref(), hunks.len()),
        ("p.txt", Some("q.txt"), 1)
    );
}

#[test]
fn no_newline_markers() {
    let text = "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n";
    let got = ops(text);
    let FileOp::Update { hunks, .. } = &got[0] else {
        panic!()
    };
    assert!(hunks[0].old_no_newline && !hunks[0].new_no_newline && hunks[0].end_of_file);
    assert_eq!(apply_hunks("f", "a\nb", hunks).unwrap().text, "a\nc\n");
    let text = "--- a/f\n+++ b/f\n@@ -1 +1 @@\n x\n\\ No newline at end of file\n";
    let FileOp::Update { hunks, .. } = &ops(text)[0] else {
        panic!()
    };
    assert!(hunks[0].old_no_newline && hunks[0].new_no_newline);
}

#[test]
fn lenient_counts_and_preamble() {
    // commit message before, signature after, counts too high for hunk 1
    let text = "From abc Mon Sep 17 00:00:00 2001
Subject: [PATCH] fix

---
 f | 2 +-
diff --git a/f b/f
--- a/f
+++ b/f
@@ -1,9 +1,9 @@
-a
+b
@@ -5 +5 @@
-e
+E
-- 
2.40.0
";
    let got = ops(text);
    let FileOp::Update { hunks, .. } = &got[0] else {
        panic!()
    };
    assert_eq!(hunks.len(), 2);
    assert_eq!(hunks[1].lines.len(), 2);
}

#[test]
fn empty_line_in_hunk_is_context_until_counts_are_met() {
    let text = "--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n\n-b\n+c\n\nrandom trailer\n";
    let FileOp::Update { hunks, .. } = &ops(text)[0] else {
        panic!()
    };
    assert_eq!(hunks[0].old_lines(), vec!["a", "", "b"]);
}

#[test]
fn errors() {
    let e = parse("--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\nfoo\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("line 5: expected a hunk line starting with ' ', '-' or '+', got \"foo\""),
        "{e}"
    );
    let e = parse("--- a/f\n+++ b/f\n@@ bogus @@\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("line 3: malformed hunk header"), "{e}");
    let e = parse("--- /dev/null\n+++ b/../x\n@@ -0,0 +1 @@\n+x\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("use a path relative to the workspace root"),
        "{e}"
    );
    let e = parse("diff --git a/x b/x\nGIT binary patch\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("binary patches are not supported"), "{e}");
    // A section that changes nothing (only an `index` line) is no operation.
    let e = parse("diff --git a/x b/x\nindex 123..456 100644\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("no file operations"), "{e}");
}

#[test]
fn git_mode_changes_alone_with_hunks_and_with_renames() {
    let update = |path: &str, move_to: Option<&str>, hunks: usize, mode| {
        (path.to_owned(), move_to.map(str::to_owned), hunks, mode)
    };
    let summary = |text: &str| -> Vec<_> {
        ops(text)
            .into_iter()
            .map(|op| match op {
                FileOp::Update {
                    path,
                    move_to,
                    hunks,
                    mode,
                } => (path, move_to, hunks.len(), mode),
                FileOp::Add { path, mode, .. } => (path, Some("(added)".into()), 0, mode),
                other => panic!("{other:?}"),
            })
            .collect()
    };
    let text = "diff --git a/run.sh b/run.sh
old mode 100644
new mode 100755
diff --git a/lib.sh b/lib.sh
old mode 100755
new mode 100644
index 111..222
--- a/lib.sh
+++ b/lib.sh
@@ -1 +1 @@
-a
+b
diff --git a/old.sh b/bin/new.sh
old mode 100644
new mode 100755
similarity index 100%
rename from old.sh
rename to bin/new.sh
diff --git a/tool b/tool
new file mode 100755
index 0000000..333
--- /dev/null
+++ b/tool
@@ -0,0 +1 @@
+#!/bin/sh
";
    assert_eq!(
        summary(text),
        vec![
            update("run.sh", None, 0, Some(FileMode::Executable)),
            update("lib.sh", None, 1, Some(FileMode::Regular)),
            update("old.sh", Some("bin/new.sh"), 0, Some(FileMode::Executable)),
            update("tool", Some("(added)"), 0, Some(FileMode::Executable)),
        ]
    );
    // After a section's `---`/`+++` lines a line that reads like a mode
    // header is not one (it ends the hunk, as any trailer does).
    let text = "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\nnew mode 100755\n";
    assert_eq!(summary(text), vec![update("f", None, 1, None)]);
}

#[test]
fn modes_other_than_the_two_regular_ones_are_refused_by_line() {
    for (text, line, mode) in [
        (
            "diff --git a/l b/l\nold mode 100644\nnew mode 120000\n",
            3,
            "\"120000\" (a symbolic link)",
        ),
        (
            "diff --git a/l b/l\nnew file mode 120000\n--- /dev/null\n+++ b/l\n@@ -0,0 +1 @@\n+target\n",
            2,
            "\"120000\" (a symbolic link)",
        ),
        (
            "diff --git a/s b/s\ndeleted file mode 160000\n",
            2,
            "\"160000\" (a git submodule)",
        ),
        (
            "diff --git a/x b/x\nold mode 100644\nnew mode 104755\n",
            3,
            "\"104755\" is",
        ),
        (
            "diff --git a/x b/x\nold mode 100664\nnew mode 100644\n",
            2,
            "\"100664\" is",
        ),
    ] {
        let e = parse(text).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("apply_patch: line {line}: the mode {mode}")),
            "{text:?}: {e}"
        );
    }
}

#[test]
fn quoted_paths() {
    let text = "diff --git \"a/t\\303\\251st x\" \"b/t\\303\\251st x\"\n--- \"a/t\\303\\251st x\"\n+++ \"b/t\\303\\251st x\"\n@@ -1 +1 @@\n-a\n+b\n";
    assert_eq!(ops(text)[0].path(), "t\u{e9}st x");
}

#[test]
fn hint_picks_the_nearest_duplicate() {
    let text = "--- a/f\n+++ b/f\n@@ -5,2 +5,2 @@\n x\n-y\n+Y\n";
    let FileOp::Update { hunks, .. } = &ops(text)[0] else {
        panic!()
    };
    let out = apply_hunks("f", "x\ny\nq\nq\nx\ny\n", hunks).unwrap();
    assert_eq!(out.text, "x\ny\nq\nq\nx\nY\n");
}

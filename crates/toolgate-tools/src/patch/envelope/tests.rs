#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::patch::{FileOp, Hunk, HunkLine, PatchError, PatchFormat, parse};
use pretty_assertions::assert_eq;

fn ops(text: &str) -> Vec<FileOp> {
    let p = parse(text).unwrap();
    assert_eq!(p.format, PatchFormat::Envelope);
    p.ops
}

fn err(text: &str) -> String {
    parse(text).unwrap_err().to_string()
}

#[test]
fn full_example() {
    let text = "*** Begin Patch
*** Add File: path/new.txt
+line one
+line two
*** Delete File: path/old.txt
*** Update File: src/app.py
*** Move to: src/main.py
@@ def greet():
-    print(\"hi\")
+    print(\"hello\")
@@
 context
-old
+new
*** End of File
*** End Patch
";
    let got = ops(text);
    assert_eq!(got.len(), 3);
    assert_eq!(
        got[0],
        FileOp::Add {
            path: "path/new.txt".into(),
            content: "line one\nline two\n".into(),
            mode: None,
        }
    );
    assert_eq!(
        got[1],
        FileOp::Delete {
            path: "path/old.txt".into()
        }
    );
    let FileOp::Update {
        path,
        move_to,
        hunks,
        ..
    } = &got[2]
    else {
        panic!("not an update")
    };
    assert_eq!(path, "src/app.py");
    assert_eq!(move_to.as_deref(), Some("src/main.py"));
    assert_eq!(hunks.len(), 2);
    assert_eq!(hunks[0].anchors, vec!["def greet():".to_string()]);
    assert!(!hunks[0].end_of_file);
    assert_eq!(
        hunks[1],
        Hunk {
            lines: vec![
                HunkLine::Context("context".into()),
                HunkLine::Remove("old".into()),
                HunkLine::Add("new".into()),
            ],
            end_of_file: true,
            ..Hunk::default()
        }
    );
}

#[test]
fn first_hunk_may_omit_header_and_empty_line_is_context() {
    let got = ops("*** Begin Patch\n*** Update File: a\n a\n\n-b\n+c\n*** End Patch\n");
    let FileOp::Update { hunks, .. } = &got[0] else {
        panic!()
    };
    assert_eq!(hunks[0].old_lines(), vec!["a", "", "b"]);
    assert_eq!(hunks[0].new_lines(), vec!["a", "", "c"]);
}

#[test]
fn consecutive_anchors_accumulate() {
    let got =
        ops("*** Begin Patch\n*** Update File: a\n@@ class A\n@@ def f\n-x\n+y\n*** End Patch");
    let FileOp::Update { hunks, .. } = &got[0] else {
        panic!()
    };
    assert_eq!(
        hunks[0].anchors,
        vec!["class A".to_string(), "def f".to_string()]
    );
}

#[test]
fn lenient_wrapping() {
    let base = "*** Begin Patch\n*** Delete File: x\n*** End Patch";
    let expected = vec![FileOp::Delete { path: "x".into() }];
    assert_eq!(ops(&format!("\n\n  {base}  \n\n")), expected);
    assert_eq!(
        ops(&format!("apply_patch <<'EOF'\n{base}\nEOF\n")),
        expected
    );
    assert_eq!(ops(&format!("cat <<EOF\n{base}\nEOF")), expected);
    assert_eq!(ops("*** Begin Patch\n*** Delete File: x\n"), expected);
    assert_eq!(ops(&format!("```\n{base}\n```\n")), expected);
    assert_eq!(ops(&base.replace('\n', "\r\n")), expected);
}

#[test]
fn text_after_end_is_an_error() {
    let e = err("*** Begin Patch\n*** Delete File: x\n*** End Patch\nmore\n");
    assert!(
        e.contains("line 4: unexpected text after `*** End Patch`"),
        "{e}"
    );
}

#[test]
fn bad_hunk_line() {
    let e = err("*** Begin Patch\n*** Update File: a\n@@\n x\nfoo\n*** End Patch\n");
    assert_eq!(
        e,
        "apply_patch: line 5: expected a hunk line starting with ' ', '-' or '+', got \"foo\"; prefix unchanged lines with a space"
    );
}

#[test]
fn update_without_hunks() {
    let e = err("*** Begin Patch\n*** Update File: x\n*** End Patch\n");
    assert!(e.contains("`*** Update File: x` has no hunks"), "{e}");
    // a pure move is fine
    let got = ops("*** Begin Patch\n*** Update File: x\n*** Move to: y\n*** End Patch\n");
    assert_eq!(
        got,
        vec![FileOp::Update {
            path: "x".into(),
            move_to: Some("y".into()),
            hunks: vec![],
            mode: None,
        }]
    );
}

#[test]
fn empty_envelope() {
    assert_eq!(
        parse("*** Begin Patch\n*** End Patch\n"),
        Err(PatchError::Empty)
    );
    assert!(err("*** Begin Patch\n*** End Patch").contains("no file operations"));
}

#[test]
fn add_file_rules() {
    let got =
        ops("*** Begin Patch\n*** Add File: e.txt\n*** Add File: b.txt\n+a\n\n+b\n\n*** End Patch");
    assert_eq!(
        got,
        vec![
            FileOp::Add {
                path: "e.txt".into(),
                content: String::new(),
                mode: None,
            },
            FileOp::Add {
                path: "b.txt".into(),
                content: "a\n\nb\n".into(),
                mode: None,
            },
        ]
    );
    let e = err("*** Begin Patch\n*** Add File: a\nno plus\n*** End Patch");
    assert!(
        e.contains("line 3: expected a line starting with '+'"),
        "{e}"
    );
}

#[test]
fn unknown_header() {
    let e = err("*** Begin Patch\n*** Frobnicate File: a\n*** End Patch");
    assert!(e.contains("line 2: expected `*** Add File: path`"), "{e}");
    let e = err("*** Begin Patch\n*** Update File: a\n-x\n*** Bogus\n*** End Patch");
    assert!(
        e.contains("line 4: unexpected \"*** Bogus\" inside a hunk"),
        "{e}"
    );
}

#[test]
fn header_without_lines() {
    let e = err("*** Begin Patch\n*** Update File: a\n-x\n+y\n@@ foo\n*** End Patch");
    assert!(
        e.contains("line 5: the hunk starting with \"@@ foo\" has no lines"),
        "{e}"
    );
}

#[test]
fn eof_marker_without_lines() {
    let e = err("*** Begin Patch\n*** Update File: a\n*** End of File\n*** End Patch");
    assert!(e.contains("line 3: `*** End of File` must follow"), "{e}");
}

#[test]
fn unified_style_header_inside_envelope() {
    let got = ops(
        "*** Begin Patch\n*** Update File: a\n@@ -10,2 +10,2 @@ fn main\n-x\n+y\n*** End Patch",
    );
    let FileOp::Update { hunks, .. } = &got[0] else {
        panic!()
    };
    assert_eq!(hunks[0].line_hint, Some(10));
    assert_eq!(hunks[0].anchors, vec!["fn main".to_string()]);
}

#[test]
fn paths_are_checked_and_normalised() {
    assert_eq!(
        ops("*** Begin Patch\n*** Delete File: ./a//b\n*** End Patch"),
        vec![FileOp::Delete { path: "a/b".into() }]
    );
    for bad in ["../x", "/etc/passwd", "a/../../b", "", "C:\\x", "~/x"] {
        let e = err(&format!(
            "*** Begin Patch\n*** Delete File: {bad}\n*** End Patch"
        ));
        assert!(
            e.contains("use a path relative to the workspace root"),
            "{bad}: {e}"
        );
    }
    let e = err("*** Begin Patch\n*** Update File: a\n*** Move to: ../b\n*** End Patch");
    assert!(e.contains("\"../b\""), "{e}");
}

#[test]
fn file_headers_may_be_indented_and_padded() {
    let plain = "*** Begin Patch\n*** Update File: foo.txt\n*** Move to: bar.txt\n@@\n-a\n+b\n\
                 *** Add File: new.txt\n+n\n*** Delete File: old.txt\n\
                 *** Add File: last.txt\n+l\n*** End Patch";
    let padded = "*** Begin Patch\n  *** Update File: foo.txt  \n\t*** Move to: bar.txt \n@@\n-a\n+b\n\
                  *** Add File: new.txt\n+n\n   *** Delete File: old.txt\n\
                  \t*** Add File: last.txt \n+l\n*** End Patch";
    let expected = ops(plain);
    assert_eq!(expected.len(), 4);
    assert_eq!(ops(padded), expected);
    // In an Update body a line starting with a space is context, also when
    // it reads like a header.
    let context =
        ops("*** Begin Patch\n*** Update File: a\n@@\n *** Add File: b\n-x\n*** End Patch");
    let [FileOp::Update { hunks, .. }] = context.as_slice() else {
        panic!("{context:?}");
    };
    assert_eq!(
        hunks[0].lines[0],
        HunkLine::Context("*** Add File: b".into())
    );
}

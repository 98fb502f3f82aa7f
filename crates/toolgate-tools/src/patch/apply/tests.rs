#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::patch::{Hunk, HunkLine, PatchError};
use pretty_assertions::assert_eq;

fn ctx(s: &str) -> HunkLine {
    HunkLine::Context(s.to_string())
}
fn del(s: &str) -> HunkLine {
    HunkLine::Remove(s.to_string())
}
fn add(s: &str) -> HunkLine {
    HunkLine::Add(s.to_string())
}
fn hunk(lines: Vec<HunkLine>) -> Hunk {
    Hunk {
        lines,
        ..Hunk::default()
    }
}

#[test]
fn simple_replacement() {
    let h = hunk(vec![ctx("a"), del("b"), add("B"), ctx("c")]);
    let out = apply_hunks("f", "a\nb\nc\n", &[h]).unwrap();
    assert_eq!(out.text, "a\nB\nc\n");
    assert_eq!(out.passes, vec![MatchPass::Exact]);
}

#[test]
fn keeps_missing_final_newline() {
    let h = hunk(vec![del("c"), add("C")]);
    assert_eq!(apply_hunks("f", "a\nc", &[h]).unwrap().text, "a\nC");
}

#[test]
fn crlf_is_preserved() {
    let h = hunk(vec![ctx("a"), del("b"), add("B"), add("B2")]);
    let out = apply_hunks("f", "a\r\nb\r\nc\r\n", &[h]).unwrap();
    assert_eq!(out.text, "a\r\nB\r\nB2\r\nc\r\n");
    assert_eq!(out.passes, vec![MatchPass::Exact]);
}

#[test]
fn crlf_without_final_newline() {
    let h = hunk(vec![ctx("a"), add("x")]);
    let out = apply_hunks("f", "a\r\nb", &[h]).unwrap();
    assert_eq!(out.text, "a\r\nx\r\nb");
}

#[test]
fn bom_is_kept_and_not_matched() {
    let h = hunk(vec![del("first"), add("FIRST")]);
    let out = apply_hunks("f", "\u{feff}first\nsecond\n", &[h]).unwrap();
    assert_eq!(out.text, "\u{feff}FIRST\nsecond\n");
}

#[test]
fn context_lines_keep_file_text_on_fuzzy_match() {
    let h = hunk(vec![ctx("keep"), del("old"), add("new")]);
    let out = apply_hunks("f", "  keep  \n old \n", &[h]).unwrap();
    assert_eq!(out.text, "  keep  \nnew\n");
    assert_eq!(out.passes, vec![MatchPass::Trimmed]);
}

#[test]
fn each_pass_is_reported() {
    let cases = [
        ("x\n", MatchPass::Exact),
        ("x  \n", MatchPass::TrailingWhitespace),
        ("  x\n", MatchPass::Trimmed),
    ];
    for (text, pass) in cases {
        let out = apply_hunks("f", text, &[hunk(vec![del("x"), add("y")])]).unwrap();
        assert_eq!(out.text, "y\n");
        assert_eq!(out.passes, vec![pass]);
    }
    let out = apply_hunks("f", "a \u{2014} b\n", &[hunk(vec![del("a - b"), add("c")])]).unwrap();
    assert_eq!(
        (out.text.as_str(), out.passes[0]),
        ("c\n", MatchPass::UnicodeFolded)
    );
}

#[test]
fn end_of_file_hunk_prefers_the_end() {
    let h = Hunk {
        end_of_file: true,
        ..hunk(vec![del("x"), add("y")])
    };
    assert_eq!(
        apply_hunks("f", "x\na\nx\n", &[h]).unwrap().text,
        "x\na\ny\n"
    );
}

#[test]
fn pure_insertion_goes_to_end_or_after_anchor() {
    let h = hunk(vec![add("z")]);
    assert_eq!(apply_hunks("f", "a\nb\n", &[h]).unwrap().text, "a\nb\nz\n");
    let h = Hunk {
        anchors: vec!["a".into()],
        ..hunk(vec![add("z")])
    };
    assert_eq!(apply_hunks("f", "a\nb\n", &[h]).unwrap().text, "a\nz\nb\n");
    let h = Hunk {
        line_hint: Some(0),
        ..hunk(vec![add("z")])
    };
    assert_eq!(apply_hunks("f", "a\nb\n", &[h]).unwrap().text, "z\na\nb\n");
    assert_eq!(
        apply_hunks("f", "", &[hunk(vec![add("z")])]).unwrap().text,
        "z\n"
    );
}

#[test]
fn anchor_selects_second_occurrence() {
    let text = "def a():\n    x = 1\ndef b():\n    x = 1\n";
    let h = Hunk {
        anchors: vec!["def b():".into()],
        ..hunk(vec![del("    x = 1"), add("    x = 2")])
    };
    let out = apply_hunks("f", text, &[h]).unwrap();
    assert_eq!(out.text, "def a():\n    x = 1\ndef b():\n    x = 2\n");
}

#[test]
fn nested_anchors_narrow_successively() {
    let text =
        "class A:\n  def f():\n    pass\nclass B:\n  def g():\n    pass\n  def f():\n    pass\n";
    let h = Hunk {
        anchors: vec!["class B:".into(), "def f():".into()],
        ..hunk(vec![del("    pass"), add("    return 1")])
    };
    let out = apply_hunks("f", text, &[h]).unwrap();
    assert!(
        out.text.ends_with("  def f():\n    return 1\n"),
        "{}",
        out.text
    );
    assert!(out.text.starts_with("class A:\n  def f():\n    pass\n"));
}

#[test]
fn hunks_apply_in_order_from_cursor() {
    let h1 = hunk(vec![del("x"), add("1")]);
    let h2 = hunk(vec![del("x"), add("2")]);
    let out = apply_hunks("f", "x\nx\n", &[h1, h2]).unwrap();
    assert_eq!(out.text, "1\n2\n");
}

#[test]
fn hint_selects_nearest_occurrence() {
    let h = Hunk {
        line_hint: Some(3),
        ..hunk(vec![del("x"), add("y")])
    };
    assert_eq!(
        apply_hunks("f", "x\na\nx\n", &[h]).unwrap().text,
        "x\na\ny\n"
    );
}

#[test]
fn no_match_error_names_everything() {
    let h1 = hunk(vec![del("a"), add("A")]);
    let h2 = Hunk {
        anchors: vec!["def greet():".into()],
        ..hunk(vec![del("    print(\"hi\")"), add("x")])
    };
    let err = apply_hunks("src/app.py", "a\nb\n", &[h1, h2]).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with("src/app.py: hunk 2 did not match: expected these lines (after line 1):\n  @@ def greet():\n  -    print(\"hi\")"),
        "{msg}"
    );
}

#[test]
fn insertion_before_cursor_is_overlap() {
    let h1 = hunk(vec![del("b"), add("B")]);
    let h2 = Hunk {
        line_hint: Some(0),
        ..hunk(vec![add("z")])
    };
    let err = apply_hunks("f", "a\nb\n", &[h1, h2]).unwrap_err();
    assert!(matches!(err, PatchError::Overlap { hunk: 2, .. }), "{err}");
}

#[test]
fn no_newline_markers_change_the_end() {
    let h = Hunk {
        new_no_newline: true,
        end_of_file: true,
        ..hunk(vec![del("a"), add("b")])
    };
    assert_eq!(apply_hunks("f", "a\n", &[h]).unwrap().text, "b");
    let h = Hunk {
        old_no_newline: true,
        end_of_file: true,
        ..hunk(vec![del("a"), add("b")])
    };
    assert_eq!(apply_hunks("f", "a", &[h]).unwrap().text, "b\n");
}

#[test]
fn deleting_everything_gives_empty_text() {
    let h = hunk(vec![del("a"), del("b")]);
    assert_eq!(apply_hunks("f", "a\nb\n", &[h]).unwrap().text, "");
}

#[test]
fn mixed_endings_keep_each_line() {
    let h = hunk(vec![ctx("b"), add("n")]);
    let out = apply_hunks("f", "a\r\nb\nc\r\n", &[h]).unwrap();
    assert_eq!(out.text, "a\r\nb\nn\r\nc\r\n");
}

#[test]
fn hunks_out_of_order_are_reported_as_overlap() {
    let h1 = hunk(vec![del("c"), add("C")]);
    let h2 = hunk(vec![del("a"), add("A")]);
    let err = apply_hunks("f.txt", "a\nb\nc\n", &[h1, h2]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "f.txt: hunk 2 overlaps or comes before hunk 1 (it would apply at line 1, but hunk 1 ended at line 3); order hunks by position and do not let them overlap"
    );
}

#[test]
fn anchor_repeated_as_first_context_line() {
    let h = Hunk {
        anchors: vec!["def f():".into()],
        ..hunk(vec![ctx("def f():"), del("    pass"), add("    return 1")])
    };
    let out = apply_hunks("f", "x\ndef f():\n    pass\n", &[h]).unwrap();
    assert_eq!(out.text, "x\ndef f():\n    return 1\n");
}

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use pretty_assertions::assert_eq;
use proptest::prelude::*;

#[test]
fn detects_formats() {
    let env = parse("*** Begin Patch\n*** Delete File: a\n*** End Patch\n").unwrap();
    assert_eq!(env.format, PatchFormat::Envelope);
    let uni = parse("--- a/a\n+++ b/a\n@@ -1 +1 @@\n-x\n+y\n").unwrap();
    assert_eq!(uni.format, PatchFormat::Unified);
    let heredoc =
        parse("apply_patch <<'EOF'\n--- a/a\n+++ b/a\n@@ -1 +1 @@\n-x\n+y\nEOF\n").unwrap();
    assert_eq!(heredoc.ops, uni.ops);
}

#[test]
fn unknown_format_explains_both() {
    let e = parse("please change foo to bar").unwrap_err().to_string();
    assert!(e.contains("two formats are accepted"), "{e}");
    assert!(
        e.contains("*** Begin Patch") && e.contains("+++ b/path/to/file"),
        "{e}"
    );
}

#[test]
fn empty_patch() {
    assert_eq!(parse(""), Err(PatchError::Empty));
    assert_eq!(parse("  \n\n"), Err(PatchError::Empty));
    assert_eq!(parse("<<'EOF'\nEOF\n"), Err(PatchError::Empty));
}

#[test]
fn normalize_paths() {
    assert_eq!(normalize_path("./a").unwrap(), "a");
    assert_eq!(normalize_path("a/./b/").unwrap(), "a/b");
    assert!(
        normalize_path("a\0b")
            .unwrap_err()
            .to_string()
            .contains("NUL")
    );
    assert!(
        normalize_path("/etc/passwd")
            .unwrap_err()
            .to_string()
            .contains("absolute")
    );
    assert!(
        normalize_path("a/../b")
            .unwrap_err()
            .to_string()
            .contains("..")
    );
    assert!(normalize_path(".").is_err());
    assert!(normalize_path("  ").is_err());
}

#[test]
fn hunk_accessors() {
    let h = Hunk {
        lines: vec![
            HunkLine::Context("c".into()),
            HunkLine::Remove("r".into()),
            HunkLine::Add("a".into()),
        ],
        ..Hunk::default()
    };
    assert_eq!(h.old_lines(), vec!["c", "r"]);
    assert_eq!(h.new_lines(), vec!["c", "a"]);
    assert!(!h.is_context_only());
}

// ---- property tests -------------------------------------------------------

/// A text made of lines from a small alphabet, sometimes without a final
/// newline, sometimes empty.
fn text() -> impl Strategy<Value = String> {
    let line = prop::sample::select(vec!["a", "b", "c", "d", "", "  e", "f "]);
    (prop::collection::vec(line, 0..12), any::<bool>()).prop_map(|(lines, newline)| {
        let mut t = lines.join("\n");
        if newline && !lines.is_empty() {
            t.push('\n');
        }
        t
    })
}

fn unified(a: &str, b: &str) -> String {
    similar::TextDiff::from_lines(a, b)
        .unified_diff()
        .context_radius(3)
        .header("a/f", "b/f")
        .to_string()
}

/// Renders `a` → `b` as an envelope patch (context radius 3), using
/// `*** End of File` for hunks that reach the end.
fn envelope(a: &str, b: &str) -> String {
    let diff = similar::TextDiff::from_lines(a, b);
    let old_len = a.lines().count();
    let mut out = String::from("*** Begin Patch\n*** Update File: f\n");
    for group in diff.grouped_ops(3) {
        out.push_str("@@\n");
        let mut end = 0;
        for op in &group {
            for change in diff.iter_changes(op) {
                let sign = match change.tag() {
                    similar::ChangeTag::Equal => ' ',
                    similar::ChangeTag::Delete => '-',
                    similar::ChangeTag::Insert => '+',
                };
                let value = change.value();
                out.push(sign);
                out.push_str(value.strip_suffix('\n').unwrap_or(value));
                out.push('\n');
            }
            end = op.old_range().end;
        }
        if end == old_len {
            out.push_str("*** End of File\n");
        }
    }
    out.push_str("*** End Patch\n");
    out
}

fn update_hunks(patch: &Patch) -> Vec<Hunk> {
    match patch.ops.as_slice() {
        [
            FileOp::Update {
                path,
                move_to: None,
                hunks,
                mode: None,
            },
        ] if path == "f" => hunks.clone(),
        other => panic!("expected one update of f, got {other:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn unified_roundtrip(a in text(), b in text()) {
        prop_assume!(a != b);
        let diff = unified(&a, &b);
        let patch = parse(&diff).map_err(|e| TestCaseError::fail(format!("{e}\n{diff}")))?;
        let applied = apply_hunks("f", &a, &update_hunks(&patch))
            .map_err(|e| TestCaseError::fail(format!("{e}\n{diff}")))?;
        prop_assert_eq!(&applied.text, &b, "diff:\n{}", diff);
        prop_assert!(applied.passes.iter().all(|p| *p == MatchPass::Exact));
    }

    #[test]
    fn unified_roundtrip_crlf(a in text(), b in text()) {
        prop_assume!(a != b);
        let diff = unified(&a, &b);
        let patch = parse(&diff).map_err(|e| TestCaseError::fail(format!("{e}\n{diff}")))?;
        let crlf = |s: &str| s.replace('\n', "\r\n");
        let applied = apply_hunks("f", &crlf(&a), &update_hunks(&patch))
            .map_err(|e| TestCaseError::fail(format!("{e}\n{diff}")))?;
        // new lines take the file's first line ending; a file whose only
        // line has no ending has no CRLF to copy
        if a.contains('\n') {
            prop_assert_eq!(&applied.text, &crlf(&b), "diff:\n{}", diff);
        } else {
            prop_assert_eq!(applied.text.replace("\r\n", "\n"), b);
        }
    }

    #[test]
    fn envelope_roundtrip(a in text(), b in text()) {
        // the envelope format cannot express a change of the final newline
        prop_assume!(a != b);
        let keeps_end = a.is_empty() || b.is_empty() || a.ends_with('\n') == b.ends_with('\n');
        let from_empty_ok = !a.is_empty() || b.ends_with('\n') || b.is_empty();
        prop_assume!(keeps_end && from_empty_ok);
        let patch_text = envelope(&a, &b);
        let patch = parse(&patch_text).map_err(|e| TestCaseError::fail(format!("{e}\n{patch_text}")))?;
        let applied = apply_hunks("f", &a, &update_hunks(&patch))
            .map_err(|e| TestCaseError::fail(format!("{e}\n{patch_text}")))?;
        prop_assert_eq!(&applied.text, &b, "patch:\n{}", patch_text);
    }
}

#[test]
fn line_numbers_count_the_heredoc_line() {
    let e = parse(
        "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: a\n@@\nfoo\n*** End Patch\nEOF\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with("apply_patch: line 5: expected a hunk line"),
        "{e}"
    );
}

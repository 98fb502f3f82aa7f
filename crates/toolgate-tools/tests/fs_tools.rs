#![allow(clippy::unwrap_used, clippy::expect_used)]

//! The file tools (read, write, edit, ls) end to end, through the real
//! `Executor`: schema validation, the path policy, the tool and its jail.
//! Every check looks at both the text the model gets and the structured facts.

mod common;

use std::os::unix::fs::PermissionsExt;

use base64::Engine;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toolgate_core::{Content, ToolError};
use toolgate_policy::{CallError, Stage};
use toolgate_tools::Limits;

use common::{CANARY, Fixture, facts, sha256, text};

/// `count` distinct short lines (so that 2000 of them fit the byte budget).
fn numbered_lines(count: usize) -> Vec<String> {
    (1..=count).map(|i| format!("line {i}")).collect()
}

fn joined(lines: &[String]) -> String {
    lines.iter().map(|l| format!("{l}\n")).collect()
}

/// The file lines of a `read` text (`{n:>6}\t{line}`), as (number, line).
fn shown_lines(text: &str) -> Vec<(u64, String)> {
    text.lines()
        .filter_map(|l| {
            let (number, rest) = l.split_once('\t')?;
            Some((number.trim_start().parse().ok()?, rest.to_owned()))
        })
        .collect()
}

/// The tool's own message, when the tool (not the pipeline) failed.
fn tool_failure(error: &CallError) -> &ToolError {
    match error {
        CallError::Tool { source, .. } => source,
        other => panic!("expected the tool to fail, the pipeline refused: {other:?}"),
    }
}

fn names_in(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn mode_of(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

// ---------------------------------------------------------------- read

#[tokio::test]
async fn read_numbers_lines_and_reports_the_real_hash() {
    let f = Fixture::new();
    let content = "alpha\n\tbeta\n\ngamma";
    f.put("notes.txt", content);
    let out = f.ok("read", json!({"path": "notes.txt"})).await;
    assert_eq!(
        text(&out),
        "     1\talpha\n     2\t\tbeta\n     3\t\n     4\tgamma\n"
    );
    assert_eq!(
        facts(&out),
        json!({
            "path": "notes.txt", "kind": "text", "size": content.len(),
            "start_line": 1, "end_line": 4, "total_lines": 4,
            "truncated": false, "next_offset": null,
            "line_endings": "lf", "bom": false, "lines_cut": 0,
            "sha256": sha256(content.as_bytes()),
        })
    );
}

#[tokio::test]
async fn read_numbers_wide_line_numbers_right_aligned() {
    let f = Fixture::new();
    let lines = numbered_lines(123_456);
    f.put("big.txt", joined(&lines));
    let out = f
        .ok("read", json!({"path": "big.txt", "offset": 123_456}))
        .await;
    assert_eq!(text(&out), format!("123456\t{}\n", lines[123_455]));
    let out = f
        .ok(
            "read",
            json!({"path": "big.txt", "offset": 99_999, "limit": 2}),
        )
        .await;
    assert_eq!(
        text(&out),
        format!(
            " 99999\t{}\n100000\t{}\n[showing lines 99999-100000 of 123456; continue with offset=100001]\n",
            lines[99_998], lines[99_999]
        )
    );
}

#[tokio::test]
async fn read_pages_through_a_5000_line_file_following_its_hints() {
    let f = Fixture::new();
    let lines = numbered_lines(5000);
    let content = joined(&lines);
    f.put("log.txt", &content);

    // A page is the default line count, which leaves room for the notes
    // within the pipeline's 2000-line cap.
    let page = Limits::default().read_lines as u64;
    assert!((1900..=2000).contains(&page), "page of {page} lines");
    let first = f
        .call_result("read", json!({"path": "log.txt"}))
        .await
        .unwrap();
    let first_text = text(&first.output);
    assert!(
        first_text.ends_with(&format!(
            "[showing lines 1-{page} of 5000; continue with offset={}]\n",
            page + 1
        )),
        "{}",
        &first_text[first_text.len().saturating_sub(300)..]
    );
    assert_eq!(
        facts(&first.output),
        json!({
            "path": "log.txt", "kind": "text", "size": content.len(),
            "start_line": 1, "end_line": page, "total_lines": 5000,
            "truncated": true, "next_offset": page + 1,
            "line_endings": "lf", "bom": false, "lines_cut": 0,
            "sha256": sha256(content.as_bytes()),
        })
    );

    // Following the hints shows every line exactly once, in order, and the
    // pipeline never has to cut a page (that would lose lines silently).
    let mut seen: Vec<(u64, String)> = Vec::new();
    // What the pipeline's ResourcePolicy cut, per page: (page, its marker).
    let mut cut: Vec<(usize, String)> = Vec::new();
    let mut offset: Option<u64> = None;
    let mut pages = 0;
    loop {
        let mut args = json!({"path": "log.txt"});
        if let Some(offset) = offset {
            args["offset"] = json!(offset);
        }
        let result = f.call_result("read", args).await.unwrap();
        pages += 1;
        let shown = text(&result.output);
        if result.truncated {
            let marker = shown.lines().find(|l| l.starts_with("[... ")).unwrap_or("");
            cut.push((pages, marker.to_owned()));
        }
        seen.extend(shown_lines(&shown));
        match facts(&result.output)["next_offset"].as_u64() {
            Some(next) => offset = Some(next),
            None => break,
        }
        assert!(pages < 10, "the hints never end");
    }
    let missing: Vec<u64> = (1..=5000u64)
        .filter(|n| !seen.iter().any(|(m, _)| m == n))
        .collect();
    assert_eq!(
        (cut, missing),
        (vec![], vec![]),
        "pages the pipeline cut, and the lines the model never saw"
    );
    assert_eq!(pages, 5000u64.div_ceil(page) as usize);
    let expected: Vec<(u64, String)> = (1u64..).zip(lines).collect();
    assert_eq!(seen, expected);
}

#[tokio::test]
async fn read_offset_and_limit_select_a_window() {
    let f = Fixture::new();
    let lines = numbered_lines(50);
    f.put("w.txt", joined(&lines));
    let out = f
        .ok("read", json!({"path": "w.txt", "offset": 10, "limit": 3}))
        .await;
    assert_eq!(
        text(&out),
        format!(
            "    10\t{}\n    11\t{}\n    12\t{}\n[showing lines 10-12 of 50; continue with offset=13]\n",
            lines[9], lines[10], lines[11]
        )
    );
    let window = facts(&out);
    assert_eq!(
        (
            &window["start_line"],
            &window["end_line"],
            &window["next_offset"],
            &window["truncated"]
        ),
        (&json!(10), &json!(12), &json!(13), &json!(true))
    );
    // The last page has no hint.
    let out = f
        .ok("read", json!({"path": "w.txt", "offset": 49, "limit": 5}))
        .await;
    assert_eq!(
        text(&out),
        format!("    49\t{}\n    50\t{}\n", lines[48], lines[49])
    );
    assert_eq!(facts(&out)["next_offset"], Value::Null);
}

#[tokio::test]
async fn read_stops_at_the_byte_budget_with_a_hint() {
    let f = Fixture::new();
    // 100 lines of 1000 chars: 1008 bytes each as shown. A page holds the
    // whole rows that fit the byte budget, and never more.
    let lines: Vec<String> = (0..100)
        .map(|i| format!("{i:04}{}", "x".repeat(996)))
        .collect();
    let content = joined(&lines);
    f.put("wide.txt", &content);
    let fit = Limits::default().read_bytes / 1008;
    assert!((40..100).contains(&fit), "{fit} rows per page");
    let result = f
        .call_result("read", json!({"path": "wide.txt"}))
        .await
        .unwrap();
    assert!(!result.truncated, "the pipeline cut the page");
    let shown = text(&result.output);
    assert!(
        shown.ends_with(&format!(
            "[showing lines 1-{fit} of 100; continue with offset={}]\n",
            fit + 1
        )),
        "{}",
        &shown[shown.len() - 200..]
    );
    assert_eq!(
        facts(&result.output),
        json!({
            "path": "wide.txt", "kind": "text", "size": content.len(),
            "start_line": 1, "end_line": fit, "total_lines": 100,
            "truncated": true, "next_offset": fit + 1,
            "line_endings": "lf", "bom": false, "lines_cut": 0,
            "sha256": sha256(content.as_bytes()),
        })
    );
    let expected: Vec<(u64, String)> = (1u64..).zip(lines[..fit].iter().cloned()).collect();
    assert_eq!(shown_lines(&shown), expected);
}

#[tokio::test]
async fn read_cuts_a_long_line_with_a_note() {
    let f = Fixture::new();
    let long = "a".repeat(2500);
    f.put("min.js", format!("{long}\nshort\n"));
    let out = f.ok("read", json!({"path": "min.js"})).await;
    assert_eq!(
        text(&out),
        format!(
            "     1\t{}… [500 more chars]\n     2\tshort\n\
             [1 long line(s) cut; grep the file or read it with bash to see them whole]\n",
            "a".repeat(2000)
        )
    );
    assert_eq!(facts(&out)["lines_cut"], json!(1));
    assert_eq!(facts(&out)["truncated"], json!(false));
}

#[tokio::test]
async fn read_refuses_a_directory_and_points_to_ls() {
    let f = Fixture::new();
    f.put("src/main.rs", "fn main() {}\n");
    let error = f.call("read", json!({"path": "src"})).await.unwrap_err();
    assert_eq!(
        tool_failure(&error),
        &ToolError::Failed(
            "`src` is a directory; list it with ls, or read a file inside it".into()
        )
    );
}

#[tokio::test]
async fn read_describes_a_binary_file_without_dumping_it() {
    let f = Fixture::new();
    let mut bytes = b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0".to_vec();
    bytes.extend((0u8..=255).cycle().take(4000));
    f.put("tool.bin", &bytes);
    let out = f.ok("read", json!({"path": "tool.bin"})).await;
    assert_eq!(out.content.len(), 1);
    let shown = text(&out);
    assert_eq!(
        shown,
        format!(
            "`tool.bin` is a binary file ({} bytes); its contents are not shown. Use bash with \
             a tool that understands the format (file, xxd, unzip -l, ...) to inspect it.",
            bytes.len()
        )
    );
    assert!(
        !shown.contains(['\0', '\u{7f}', '\u{fffd}']),
        "raw bytes leaked"
    );
    assert_eq!(
        facts(&out),
        json!({"path": "tool.bin", "kind": "binary", "size": bytes.len()})
    );
}

#[tokio::test]
async fn read_returns_images_as_image_content() {
    let f = Fixture::new();
    let tail: Vec<u8> = (0u8..=255).cycle().take(600).collect();
    let cases: [(&str, &[u8], &str); 5] = [
        ("pic.png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR", "image/png"),
        ("photo.jpg", b"\xff\xd8\xff\xe0\0\x10JFIF\0", "image/jpeg"),
        ("anim.gif", b"GIF89a\x01\0\x01\0\x80\0\0", "image/gif"),
        (
            "still.webp",
            b"RIFF\x24\0\0\0WEBPVP8 \x18\0\0\0",
            "image/webp",
        ),
        // Recognised by its bytes, not its name.
        ("not-an-image.txt", b"GIF87a\x01\0\x01\0\0\0", "image/gif"),
    ];
    for (name, head, mime) in cases {
        let bytes = [head, &tail].concat();
        f.put(name, &bytes);
        let out = f.ok("read", json!({"path": name})).await;
        let Some(Content::Image { data, mime_type }) = out.content.first() else {
            panic!("{name}: no image content: {out:?}");
        };
        assert_eq!(mime_type, mime, "{name}");
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(data)
            .unwrap();
        assert_eq!(decoded, bytes, "{name}: base64 round trip");
        assert_eq!(
            text(&out),
            format!("`{name}`: {mime} image, {} bytes", bytes.len())
        );
        assert_eq!(
            facts(&out),
            json!({
                "path": name, "kind": "image", "mime_type": mime,
                "size": bytes.len(), "sha256": sha256(&bytes),
            }),
            "{name}"
        );
    }
}

#[tokio::test]
async fn read_refuses_an_oversized_image() {
    let mut limits = Limits::default();
    limits.max_image_bytes = 1024;
    let f = Fixture::with_limits(limits);
    let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
    bytes.resize(2048, 7);
    f.put("huge.png", &bytes);
    let error = f
        .call("read", json!({"path": "huge.png"}))
        .await
        .unwrap_err();
    let ToolError::Failed(message) = tool_failure(&error) else {
        panic!("{error:?}");
    };
    assert!(
        message.starts_with(
            "`huge.png` is a image/png image of 2048 bytes, over the limit of 1024 bytes for images"
        ),
        "{message}"
    );
    // Exactly at the limit is fine.
    bytes.truncate(1024);
    f.put("ok.png", &bytes);
    f.ok("read", json!({"path": "ok.png"})).await;
}

#[tokio::test]
async fn read_reports_crlf_and_bom_without_showing_them() {
    let f = Fixture::new();
    let content = "\u{feff}one\r\ntwo\r\n";
    f.put("win.txt", content);
    let out = f.ok("read", json!({"path": "win.txt"})).await;
    assert_eq!(
        text(&out),
        "     1\tone\n     2\ttwo\n\
         [the file starts with a UTF-8 byte-order mark (not shown; edits keep it)]\n\
         [the file uses CRLF line endings (shown without \\r; edits keep them)]\n"
    );
    assert_eq!(
        facts(&out),
        json!({
            "path": "win.txt", "kind": "text", "size": content.len(),
            "start_line": 1, "end_line": 2, "total_lines": 2,
            "truncated": false, "next_offset": null,
            "line_endings": "crlf", "bom": true, "lines_cut": 0,
            "sha256": sha256(content.as_bytes()),
        })
    );
    // Mixed endings are reported as such.
    f.put("mixed.txt", "a\r\nb\nc\n");
    let out = f.ok("read", json!({"path": "mixed.txt"})).await;
    assert!(!text(&out).contains('\r'));
    assert!(text(&out).contains("[the file mixes line endings: 1 CRLF, 2 LF (shown without \\r)]"));
    assert_eq!(facts(&out)["line_endings"], json!("mixed"));
}

#[tokio::test]
async fn read_refuses_an_offset_past_the_end() {
    let f = Fixture::new();
    f.put("short.txt", "1\n2\n3\n");
    let error = f
        .call("read", json!({"path": "short.txt", "offset": 10}))
        .await
        .unwrap_err();
    assert_eq!(
        tool_failure(&error),
        &ToolError::InvalidArguments(
            "offset 10 is past the end of `short.txt`, which has 3 lines".into()
        )
    );
    // Offset 0 is refused by the schema (lines count from 1).
    let error = f
        .call("read", json!({"path": "short.txt", "offset": 0}))
        .await
        .unwrap_err();
    assert!(matches!(error, CallError::InvalidArguments(_)), "{error:?}");
}

#[tokio::test]
async fn read_of_an_empty_file_says_so() {
    let f = Fixture::new();
    f.put("empty.txt", "");
    let out = f.ok("read", json!({"path": "empty.txt"})).await;
    assert_eq!(text(&out), "[the file is empty]\n");
    assert_eq!(
        facts(&out),
        json!({
            "path": "empty.txt", "kind": "text", "size": 0,
            "start_line": 1, "end_line": 0, "total_lines": 0,
            "truncated": false, "next_offset": null,
            "line_endings": "none", "bom": false, "lines_cut": 0,
            "sha256": sha256(b""),
        })
    );
}

#[tokio::test]
async fn read_of_a_missing_file_is_an_error() {
    let f = Fixture::new();
    let error = f.err("read", json!({"path": "nope.txt"})).await;
    assert!(error.contains("nope.txt"), "{error}");
}

// ---------------------------------------------------------------- write

#[tokio::test]
async fn write_creates_missing_parents() {
    let f = Fixture::new();
    let content = "hello\nworld\n";
    let out = f
        .ok("write", json!({"path": "a/b/c.txt", "content": content}))
        .await;
    assert_eq!(text(&out), "Created `a/b/c.txt` (2 lines, 12 bytes).");
    assert_eq!(
        facts(&out),
        json!({
            "path": "a/b/c.txt", "created": true, "bytes": 12, "lines": 2,
            "sha256": sha256(content.as_bytes()), "previous_sha256": null,
        })
    );
    assert_eq!(f.bytes("a/b/c.txt"), content.as_bytes());
    assert_eq!(names_in(&f.path("a/b")), ["c.txt"]);
}

#[tokio::test]
async fn write_replaces_atomically_and_keeps_the_mode() {
    let f = Fixture::new();
    for (name, mode) in [("secret.env", 0o600), ("run.sh", 0o755), ("odd", 0o640)] {
        let old = format!("old {name}\n");
        let path = f.put(name, &old);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        let new = format!("new {name}\nsecond line\n");
        let out = f.ok("write", json!({"path": name, "content": new})).await;
        assert_eq!(
            text(&out),
            format!("Replaced `{name}` (2 lines, {} bytes).", new.len())
        );
        assert_eq!(
            facts(&out),
            json!({
                "path": name, "created": false, "bytes": new.len(), "lines": 2,
                "sha256": sha256(new.as_bytes()),
                "previous_sha256": sha256(old.as_bytes()),
            })
        );
        assert_eq!(f.bytes(name), new.as_bytes());
        assert_eq!(mode_of(&path), mode, "{name} lost its mode");
    }
    // No temp file is left next to the targets.
    assert_eq!(names_in(&f.root), ["odd", "run.sh", "secret.env"]);
}

#[tokio::test]
async fn write_create_only_refuses_an_existing_file() {
    let f = Fixture::new();
    f.put("keep.txt", "precious\n");
    let error = f
        .call(
            "write",
            json!({"path": "keep.txt", "content": "gone", "create_only": true}),
        )
        .await
        .unwrap_err();
    let ToolError::Failed(message) = tool_failure(&error) else {
        panic!("{error:?}");
    };
    assert!(
        message.starts_with("`keep.txt` already exists and create_only refuses to replace it"),
        "{message}"
    );
    assert_eq!(f.bytes("keep.txt"), b"precious\n");
    assert_eq!(names_in(&f.root), ["keep.txt"]);
    // On a new path it creates.
    let out = f
        .ok(
            "write",
            json!({"path": "fresh.txt", "content": "x", "create_only": true}),
        )
        .await;
    assert_eq!(facts(&out)["created"], json!(true));
}

#[tokio::test]
async fn write_checks_expected_sha256() {
    let f = Fixture::new();
    let old = "version 1\n";
    f.put("doc.txt", old);
    let stale = sha256(b"version 0\n");
    let error = f
        .call(
            "write",
            json!({"path": "doc.txt", "content": "version 2\n", "expected_sha256": stale}),
        )
        .await
        .unwrap_err();
    assert_eq!(
        tool_failure(&error),
        &ToolError::Failed(format!(
            "`doc.txt` changed since it was read: its sha256 is now {}, not {stale}; read it \
             again and redo the change on the current content",
            sha256(old.as_bytes())
        ))
    );
    assert_eq!(f.bytes("doc.txt"), old.as_bytes());

    // The hash read returns is the one write accepts (in either case).
    let read = f.ok("read", json!({"path": "doc.txt"})).await;
    let current = facts(&read)["sha256"].as_str().unwrap().to_uppercase();
    let out = f
        .ok(
            "write",
            json!({"path": "doc.txt", "content": "version 2\n", "expected_sha256": current}),
        )
        .await;
    assert_eq!(f.bytes("doc.txt"), b"version 2\n");
    assert_eq!(
        facts(&out)["previous_sha256"],
        json!(sha256(old.as_bytes()))
    );

    // A hash for a file that does not exist is refused, nothing is created.
    let error = f
        .err(
            "write",
            json!({"path": "ghost.txt", "content": "x", "expected_sha256": stale}),
        )
        .await;
    assert!(error.contains("does not exist"), "{error}");
    assert!(!f.path("ghost.txt").exists());
}

#[tokio::test]
async fn write_refuses_a_malformed_hash_at_validation() {
    let f = Fixture::new();
    f.put("doc.txt", "v1\n");
    for bad in ["abc", "zz".repeat(32).as_str(), &"a".repeat(65)] {
        let error = f
            .call(
                "write",
                json!({"path": "doc.txt", "content": "v2\n", "expected_sha256": bad}),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(&error, CallError::InvalidArguments(e) if e.pointer == "/expected_sha256"),
            "{bad}: {error:?}"
        );
        assert_eq!(error.stage(), Stage::Validate);
    }
    assert_eq!(f.bytes("doc.txt"), b"v1\n");
}

#[tokio::test]
async fn write_refuses_content_over_max_file_bytes() {
    let f = Fixture::with_limits(Limits::default().max_file_bytes(16));
    f.put("small.txt", "small\n");
    let error = f
        .call(
            "write",
            json!({"path": "small.txt", "content": "x".repeat(17)}),
        )
        .await
        .unwrap_err();
    assert_eq!(
        tool_failure(&error),
        &ToolError::InvalidArguments(
            "the content is 17 bytes, over the limit of 16 bytes per file".into()
        )
    );
    let error = f
        .err(
            "write",
            json!({"path": "new.txt", "content": "x".repeat(17)}),
        )
        .await;
    assert!(error.contains("over the limit"), "{error}");
    assert_eq!(names_in(&f.root), ["small.txt"]);
    assert_eq!(f.bytes("small.txt"), b"small\n");
    // Exactly at the limit is fine.
    f.ok(
        "write",
        json!({"path": "new.txt", "content": "x".repeat(16)}),
    )
    .await;
}

// ---------------------------------------------------------------- edit

#[tokio::test]
async fn edit_replaces_once_and_returns_the_diff() {
    let f = Fixture::new();
    let old = "one\ntwo\nthree\n";
    f.put("f.txt", old);
    let out = f
        .ok(
            "edit",
            json!({"path": "f.txt", "old_text": "two", "new_text": "TWO"}),
        )
        .await;
    let diff = "--- a/f.txt\n+++ b/f.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n";
    assert_eq!(
        text(&out),
        format!("Edited `f.txt`: 1 replacement(s), +1 -1 lines.\n{diff}")
    );
    let new = "one\nTWO\nthree\n";
    assert_eq!(
        facts(&out),
        json!({
            "path": "f.txt", "dry_run": false,
            "edits": [{"pass": "exact", "replacements": 1, "lines": [2]}],
            "replacements": 1, "lines_added": 1, "lines_removed": 1,
            "diff": diff, "line_endings": "lf", "bom": false,
            "previous_sha256": sha256(old.as_bytes()), "sha256": sha256(new.as_bytes()),
        })
    );
    assert_eq!(f.bytes("f.txt"), new.as_bytes());
}

#[tokio::test]
async fn edit_without_a_match_shows_the_closest_region_and_changes_nothing() {
    let f = Fixture::new();
    let old = "fn one() {}\nfn two() {}\nfn three() {\n    let x = 1;\n    x + 1\n}\nfn four() {}\nfn five() {}\n";
    f.put("lib.rs", old);
    let error = f
        .call(
            "edit",
            json!({"path": "lib.rs", "old_text": "fn three() {\n    let x = 2;\n    x + 1", "new_text": "gone"}),
        )
        .await
        .unwrap_err();
    assert_eq!(
        tool_failure(&error),
        &ToolError::Failed(
            "old_text was not found in `lib.rs`, not even ignoring whitespace; nothing was \
             changed. Read the file again and copy old_text from it exactly.\n\
             The closest region is lines 3-5:\n\
             \x20    1\tfn one() {}\n\
             \x20    2\tfn two() {}\n\
             \x20    3\tfn three() {\n\
             \x20    4\t    let x = 1;\n\
             \x20    5\t    x + 1\n\
             \x20    6\t}\n\
             \x20    7\tfn four() {}\n"
                .into()
        )
    );
    assert_eq!(f.bytes("lib.rs"), old.as_bytes());
}

#[tokio::test]
async fn edit_refuses_an_ambiguous_match_listing_the_lines() {
    let f = Fixture::new();
    let old = "x = 1\ny = 2\nx = 1\nz = 3\nx = 1\n";
    f.put("v.py", old);
    let error = f
        .call(
            "edit",
            json!({"path": "v.py", "old_text": "x = 1", "new_text": "x = 9"}),
        )
        .await
        .unwrap_err();
    assert_eq!(
        tool_failure(&error),
        &ToolError::Failed(
            "old_text occurs 3 times in `v.py` (exact match), at lines 1, 3, 5; include more \
             surrounding lines to make it unique, or set replace_all to change every one"
                .into()
        )
    );
    assert_eq!(f.bytes("v.py"), old.as_bytes());

    // replace_all changes every one.
    let out = f
        .ok(
            "edit",
            json!({"path": "v.py", "old_text": "x = 1", "new_text": "x = 9", "replace_all": true}),
        )
        .await;
    assert_eq!(f.bytes("v.py"), b"x = 9\ny = 2\nx = 9\nz = 3\nx = 9\n");
    assert_eq!(
        facts(&out)["edits"],
        json!([{"pass": "exact", "replacements": 3, "lines": [1, 3, 5]}])
    );
    assert_eq!(facts(&out)["replacements"], json!(3));
    assert!(text(&out).starts_with("Edited `v.py`: 3 replacement(s), +3 -3 lines.\n"));
}

#[tokio::test]
async fn edit_keeps_crlf_line_endings_byte_exactly() {
    let f = Fixture::new();
    f.put("win.txt", "one\r\ntwo\r\nthree\r\n");
    let out = f
        .ok(
            "edit",
            json!({"path": "win.txt", "old_text": "two\n", "new_text": "2\nand more\n"}),
        )
        .await;
    assert_eq!(f.bytes("win.txt"), b"one\r\n2\r\nand more\r\nthree\r\n");
    assert!(
        text(&out).contains("[CRLF line endings kept]\n"),
        "{}",
        text(&out)
    );
    assert_eq!(facts(&out)["line_endings"], json!("crlf"));
    // old_text copied with CRLF from the file matches too.
    f.ok(
        "edit",
        json!({"path": "win.txt", "old_text": "one\r\n2\r\n", "new_text": "1\r\n"}),
    )
    .await;
    assert_eq!(f.bytes("win.txt"), b"1\r\nand more\r\nthree\r\n");
}

#[tokio::test]
async fn edit_keeps_the_bom() {
    let f = Fixture::new();
    f.put("bom.txt", "\u{feff}hello\nworld\n");
    let out = f
        .ok(
            "edit",
            json!({"path": "bom.txt", "old_text": "world", "new_text": "there"}),
        )
        .await;
    assert_eq!(f.bytes("bom.txt"), "\u{feff}hello\nthere\n".as_bytes());
    assert_eq!(facts(&out)["bom"], json!(true));
    // The diff shows text, not the mark.
    assert!(!facts(&out)["diff"].as_str().unwrap().contains('\u{feff}'));
}

#[tokio::test]
async fn edit_falls_back_to_ignoring_trailing_whitespace_and_says_so() {
    let f = Fixture::new();
    f.put("main.rs", "fn main() {   \n    go();\t\n}\n");
    let out = f
        .ok(
            "edit",
            json!({"path": "main.rs", "old_text": "fn main() {\n    go();", "new_text": "fn main() {\n    run();"}),
        )
        .await;
    assert_eq!(f.bytes("main.rs"), b"fn main() {\n    run();\n}\n");
    assert!(
        text(&out).contains("[old_text matched after ignoring trailing whitespace]\n"),
        "{}",
        text(&out)
    );
    assert_eq!(
        facts(&out)["edits"],
        json!([{"pass": "trailing-whitespace", "replacements": 1, "lines": [1]}])
    );
}

#[tokio::test]
async fn edit_falls_back_to_ignoring_indentation_and_reindents() {
    let f = Fixture::new();
    f.put(
        "a.rs",
        "impl A {\n        fn f() {\n            old();\n        }\n}\n",
    );
    let out = f
        .ok(
            "edit",
            json!({
                "path": "a.rs",
                "old_text": "fn f() {\n    old();\n}",
                "new_text": "fn f() {\n    new();\n    more();\n}",
            }),
        )
        .await;
    assert_eq!(
        f.bytes("a.rs"),
        b"impl A {\n        fn f() {\n            new();\n            more();\n        }\n}\n"
    );
    assert!(
        text(&out).contains(
            "[old_text matched after ignoring indentation; new_text was re-indented to match the file]\n"
        ),
        "{}",
        text(&out)
    );
    assert_eq!(
        facts(&out)["edits"],
        json!([{"pass": "indentation", "replacements": 1, "lines": [2]}])
    );
}

#[tokio::test]
async fn edit_with_several_edits_is_all_or_nothing() {
    let f = Fixture::new();
    let old = "alpha\nbeta\ngamma\n";
    f.put("abc.txt", old);
    let error = f
        .call(
            "edit",
            json!({"path": "abc.txt", "edits": [
                {"old_text": "alpha", "new_text": "ALPHA"},
                {"old_text": "beta", "new_text": "BETA"},
                {"old_text": "delta", "new_text": "DELTA"},
            ]}),
        )
        .await
        .unwrap_err();
    let ToolError::Failed(message) = tool_failure(&error) else {
        panic!("{error:?}");
    };
    assert!(
        message.starts_with("edit 3 of 3: old_text was not found in `abc.txt`"),
        "{message}"
    );
    assert_eq!(f.bytes("abc.txt"), old.as_bytes());
    assert_eq!(names_in(&f.root), ["abc.txt"]);
}

#[tokio::test]
async fn edit_applies_edits_in_order() {
    let f = Fixture::new();
    f.put("seq.txt", "alpha gamma\nomega\n");
    let out = f
        .ok(
            "edit",
            json!({"path": "seq.txt", "edits": [
                {"old_text": "alpha", "new_text": "beta"},
                // Only exists once edit 1 has been applied.
                {"old_text": "beta gamma", "new_text": "delta"},
            ]}),
        )
        .await;
    assert_eq!(f.bytes("seq.txt"), b"delta\nomega\n");
    assert_eq!(
        facts(&out)["edits"],
        json!([
            {"pass": "exact", "replacements": 1, "lines": [1]},
            {"pass": "exact", "replacements": 1, "lines": [1]},
        ])
    );
    assert_eq!(facts(&out)["replacements"], json!(2));
}

#[tokio::test]
async fn edit_dry_run_returns_the_diff_and_writes_nothing() {
    let f = Fixture::new();
    let old = "keep\nchange me\n";
    let path = f.put("d.txt", old);
    let before = std::fs::metadata(&path).unwrap().modified().unwrap();
    let out = f
        .ok(
            "edit",
            json!({"path": "d.txt", "old_text": "change me", "new_text": "changed", "dry_run": true}),
        )
        .await;
    let diff = "--- a/d.txt\n+++ b/d.txt\n@@ -1,2 +1,2 @@\n keep\n-change me\n+changed\n";
    assert_eq!(
        text(&out),
        format!("Would edit `d.txt`: 1 replacement(s), +1 -1 lines.\n{diff}")
    );
    assert_eq!(
        facts(&out),
        json!({
            "path": "d.txt", "dry_run": true,
            "edits": [{"pass": "exact", "replacements": 1, "lines": [2]}],
            "replacements": 1, "lines_added": 1, "lines_removed": 1,
            "diff": diff, "line_endings": "lf", "bom": false,
            "previous_sha256": sha256(old.as_bytes()),
            "sha256": sha256(b"keep\nchanged\n"),
        })
    );
    assert_eq!(f.bytes("d.txt"), old.as_bytes());
    assert_eq!(
        std::fs::metadata(&path).unwrap().modified().unwrap(),
        before
    );
    assert_eq!(names_in(&f.root), ["d.txt"]);
}

#[tokio::test]
async fn edit_checks_expected_sha256() {
    let f = Fixture::new();
    let old = "value = 1\n";
    f.put("cfg.toml", old);
    let stale = sha256(b"value = 0\n");
    let error = f
        .call(
            "edit",
            json!({"path": "cfg.toml", "old_text": "1", "new_text": "2", "expected_sha256": stale}),
        )
        .await
        .unwrap_err();
    let ToolError::Failed(message) = tool_failure(&error) else {
        panic!("{error:?}");
    };
    assert!(
        message.starts_with("`cfg.toml` changed since it was read"),
        "{message}"
    );
    assert_eq!(f.bytes("cfg.toml"), old.as_bytes());
    let out = f
        .ok(
            "edit",
            json!({"path": "cfg.toml", "old_text": "1", "new_text": "2", "expected_sha256": sha256(old.as_bytes())}),
        )
        .await;
    assert_eq!(f.bytes("cfg.toml"), b"value = 2\n");
    assert_eq!(
        facts(&out)["previous_sha256"],
        json!(sha256(old.as_bytes()))
    );
    // A malformed hash never reaches the tool.
    let error = f
        .call(
            "edit",
            json!({"path": "cfg.toml", "old_text": "2", "new_text": "3", "expected_sha256": "nothex"}),
        )
        .await
        .unwrap_err();
    assert!(matches!(error, CallError::InvalidArguments(_)), "{error:?}");
    assert_eq!(f.bytes("cfg.toml"), b"value = 2\n");
}

#[tokio::test]
async fn edit_refuses_binary_and_non_utf8_files() {
    let f = Fixture::new();
    let binary = b"head\0tail text\n".to_vec();
    let latin1 = b"caf\xe9 text\n".to_vec();
    f.put("blob.bin", &binary);
    f.put("latin1.txt", &latin1);
    let error = f
        .call(
            "edit",
            json!({"path": "blob.bin", "old_text": "tail", "new_text": "TAIL"}),
        )
        .await
        .unwrap_err();
    assert_eq!(
        tool_failure(&error),
        &ToolError::Failed("`blob.bin` is a binary file; edit changes text files only".into())
    );
    let error = f
        .call(
            "edit",
            json!({"path": "latin1.txt", "old_text": "text", "new_text": "TEXT"}),
        )
        .await
        .unwrap_err();
    let ToolError::Failed(message) = tool_failure(&error) else {
        panic!("{error:?}");
    };
    assert!(
        message.starts_with(
            "`latin1.txt` is not valid UTF-8 (first bad byte at offset 3); edit changes UTF-8 text only"
        ),
        "{message}"
    );
    assert_eq!(f.bytes("blob.bin"), binary);
    assert_eq!(f.bytes("latin1.txt"), latin1);
}

// ---------------------------------------------------------------- ls

/// `line` without a trailing `  YYYY-MM-DD HH:MM`.
fn undated(text: &str) -> String {
    const SHAPE: &[u8] = b"  0000-00-00 00:00";
    text.lines()
        .map(|line| {
            let bytes = line.as_bytes();
            let dated = bytes.len() >= SHAPE.len()
                && bytes[bytes.len() - SHAPE.len()..]
                    .iter()
                    .zip(SHAPE)
                    .all(|(b, s)| {
                        if *s == b'0' {
                            b.is_ascii_digit()
                        } else {
                            b == s
                        }
                    });
            let line = if dated {
                &line[..line.len() - SHAPE.len()]
            } else {
                line
            };
            format!("{line}\n")
        })
        .collect()
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
    assert_eq!(undated(&text(&out)), "./\n  src/\n  README.md  5 B\n");
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
        "./\n  src/\n    util/\n      mod.rs  0 B\n    main.rs  13 B\n  README.md  5 B\n"
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
    assert_eq!(undated(&text(&out)), "src/\n  util/\n  main.rs  13 B\n");
}

#[tokio::test]
async fn ls_shows_hidden_entries_only_on_request() {
    let f = tree_fixture();
    let out = f.ok("ls", json!({"depth": 3, "hidden": true})).await;
    // .git is listed but never descended into.
    assert_eq!(
        undated(&text(&out)),
        "./\n  .git/\n  src/\n    util/\n      mod.rs  0 B\n    main.rs  13 B\n  .env  9 B\n  README.md  5 B\n"
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
        expected.push_str(&format!("  f{i:02}.txt  1 B\n"));
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
        "./\n  inside/\n    file.txt  1 B\n  in_dir@  symlink\n  out_dir@  symlink\n  out_file@  symlink\n"
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

// ---------------------------------------------------------------- attacks

/// The hostile paths every path-taking tool must refuse. File paths for
/// read/write/edit, directory paths for ls.
fn hostile_paths(f: &Fixture, dirs: bool) -> Vec<String> {
    let outside = f.outside.display().to_string();
    let canary = if dirs { "dir" } else { "dir/canary" };
    vec![
        format!("../outside/{canary}"),
        format!("{outside}/{canary}"),
        // Symlinks inside the root to the outside dir, relative and absolute.
        format!("link/{canary}"),
        format!("abs_link/{canary}"),
        // A symlink to the outside file (or dir, for ls).
        if dirs {
            "dir_link".into()
        } else {
            "file_link".into()
        },
        // `..` after a symlinked dir: lexically inside the root
        // (`root/outside/...`), physically `outside/../outside/...`.
        format!("link/../outside/{canary}"),
        format!("sub/../link/../outside/{canary}"),
        // Lexical escape through a real subdirectory.
        format!("sub/../../outside/{canary}"),
        // NUL: what is checked would not be what is opened.
        format!("ok\0/../../outside/{canary}"),
        if dirs {
            "~/.ssh".into()
        } else {
            "~/.ssh/id_rsa".into()
        },
        // The root's parent.
        "..".into(),
    ]
}

fn plant_links(f: &Fixture) {
    f.put("sub/keep.txt", "keep\n");
    f.symlink("link", "../outside");
    f.symlink("abs_link", &f.outside);
    f.symlink("file_link", f.outside.join("dir/canary"));
    f.symlink("dir_link", f.outside.join("dir"));
}

async fn assert_all_refused(f: &Fixture, tool: &str, args_for: impl Fn(&str) -> Value, dirs: bool) {
    for path in hostile_paths(f, dirs) {
        let outside = f.outside_snapshot();
        let root = f.root_snapshot();
        let args = args_for(&path);
        match f.call(tool, args).await {
            Ok(out) => panic!("{tool} `{}` succeeded: {out:#?}", path.escape_debug()),
            Err(e) => {
                let message = e.to_string();
                assert!(
                    !message.contains("must never change"),
                    "{tool} `{path:?}` leaked the canary: {message}"
                );
            }
        }
        assert_eq!(
            f.outside_snapshot(),
            outside,
            "{tool} `{path:?}` changed outside"
        );
        assert_eq!(
            f.root_snapshot(),
            root,
            "{tool} `{path:?}` changed the root"
        );
    }
    // The canaries are intact.
    assert_eq!(
        std::fs::read_to_string(f.outside.join("canary")).unwrap(),
        CANARY
    );
    assert_eq!(
        std::fs::read_to_string(f.outside.join("dir/canary")).unwrap(),
        CANARY
    );
    assert_eq!(
        std::fs::read_to_string(f.home.join(".ssh/id_rsa")).unwrap(),
        CANARY
    );
}

#[tokio::test]
async fn read_refuses_every_escape() {
    let f = Fixture::new();
    plant_links(&f);
    assert_all_refused(&f, "read", |p| json!({"path": p}), false).await;
}

#[tokio::test]
async fn write_refuses_every_escape() {
    let f = Fixture::new();
    plant_links(&f);
    assert_all_refused(
        &f,
        "write",
        |p| json!({"path": p, "content": "pwned\n"}),
        false,
    )
    .await;
    // Creating a new file out there is refused as well.
    assert_all_refused(
        &f,
        "write",
        |p| json!({"path": p.replace("canary", "planted"), "content": "pwned\n"}),
        false,
    )
    .await;
}

#[tokio::test]
async fn write_never_follows_a_dangling_link_out() {
    let f = Fixture::new();
    f.symlink("dangling", "../outside/planted");
    f.symlink("dangling_abs", f.outside.join("planted2"));
    let outside = f.outside_snapshot();
    for path in ["dangling", "dangling_abs"] {
        for create_only in [false, true] {
            let error = f
                .err(
                    "write",
                    json!({"path": path, "content": "pwned", "create_only": create_only}),
                )
                .await;
            assert!(!error.is_empty());
        }
    }
    assert_eq!(f.outside_snapshot(), outside);
}

#[tokio::test]
async fn edit_refuses_every_escape() {
    let f = Fixture::new();
    plant_links(&f);
    assert_all_refused(
        &f,
        "edit",
        |p| json!({"path": p, "old_text": "canary", "new_text": "pwned"}),
        false,
    )
    .await;
}

#[tokio::test]
async fn ls_refuses_every_escape() {
    let f = Fixture::new();
    plant_links(&f);
    assert_all_refused(&f, "ls", |p| json!({"path": p, "depth": 3}), true).await;
}

#[tokio::test]
async fn the_path_policy_stops_nul_and_home_secrets_before_the_tool() {
    let f = Fixture::new();
    for (tool, args) in [
        ("read", json!({"path": "~/.ssh/id_rsa"})),
        ("write", json!({"path": "~/.ssh/id_rsa", "content": "x"})),
        (
            "edit",
            json!({"path": "~/.ssh/id_rsa", "old_text": "canary", "new_text": "x"}),
        ),
        ("ls", json!({"path": "~/.ssh"})),
        ("read", json!({"path": "a\0b"})),
        ("write", json!({"path": "a\0b", "content": "x"})),
        (
            "edit",
            json!({"path": "a\0b", "old_text": "a", "new_text": "b"}),
        ),
        ("ls", json!({"path": "a\0b"})),
    ] {
        let error = f.call(tool, args.clone()).await.unwrap_err();
        assert_eq!(error.stage(), Stage::Paths, "{tool} {args}: {error}");
    }
    assert!(!f.path("~").exists());
}

// ---------------------------------------------------------------- protected entries

#[tokio::test]
async fn protected_entries_cannot_be_written_or_edited() {
    let f = Fixture::new();
    f.put(".git/config", "[core]\n\tbare = false\n");
    f.put(".git/hooks/pre-commit", "#!/bin/sh\nexit 0\n");
    f.put(".bashrc", "alias ll='ls -l'\n");
    f.put("nested/repo/.git/config", "[core]\n");
    f.symlink("innocent", ".git/config");
    f.symlink("hooks_link", ".git/hooks");
    let targets = [
        (".git/config", "bare"),
        (".git/hooks/pre-commit", "exit 0"),
        (".bashrc", "alias"),
        ("nested/repo/.git/config", "core"),
        ("innocent", "bare"),
        ("hooks_link/pre-commit", "exit 0"),
        ("./.git/../.git/config", "bare"),
    ];
    for (path, present) in targets {
        let outside = f.outside_snapshot();
        let root = f.root_snapshot();
        let write = f
            .err("write", json!({"path": path, "content": "pwned\n"}))
            .await;
        assert!(write.contains("is protected"), "write {path}: {write}");
        let edit = f
            .err(
                "edit",
                json!({"path": path, "old_text": present, "new_text": "pwned"}),
            )
            .await;
        assert!(edit.contains("is protected"), "edit {path}: {edit}");
        assert_eq!(f.root_snapshot(), root, "{path} changed");
        assert_eq!(f.outside_snapshot(), outside);
    }
    // New protected entries are refused too, leaving no directories behind.
    let root = f.root_snapshot();
    for path in [
        ".git/hooks/post-checkout",
        "other/.git",
        ".git/modules/sub/config",
    ] {
        let error = f.err("write", json!({"path": path, "content": "x"})).await;
        assert!(error.contains("is protected"), "write {path}: {error}");
    }
    assert_eq!(f.root_snapshot(), root);
    // Reading them is fine.
    let out = f.ok("read", json!({"path": "innocent"})).await;
    assert_eq!(text(&out), "     1\t[core]\n     2\t\tbare = false\n");
}

// ---------------------------------------------------------------- further edges

#[tokio::test]
async fn read_pages_of_long_multibyte_lines_fit_the_pipeline() {
    let f = Fixture::new();
    // Long lines of 4-byte chars are cut to 2000 chars (8000 bytes). The
    // byte budget (45,000) is checked before a line is added, so a page may
    // end with one such line past it: it must still fit the pipeline's
    // 50,000 bytes, or the pipeline cuts the middle of the page.
    let wide = "😀".repeat(2100);
    let narrow = "a".repeat(1900);
    let mut lines = vec![wide.clone(); 5];
    lines.extend([narrow.clone(), narrow]);
    lines.extend(vec![wide; 5]);
    f.put("emoji.txt", joined(&lines));
    let mut offset = 1u64;
    let mut cut = Vec::new();
    loop {
        let result = f
            .call_result("read", json!({"path": "emoji.txt", "offset": offset}))
            .await
            .unwrap();
        if result.truncated {
            cut.push((offset, text(&result.output).len()));
        }
        match facts(&result.output)["next_offset"].as_u64() {
            Some(next) => offset = next,
            None => break,
        }
    }
    assert_eq!(cut, vec![], "(offset, bytes) of pages the pipeline cut");
}

#[tokio::test]
async fn a_fifo_is_refused_without_blocking() {
    let f = Fixture::new();
    let status = std::process::Command::new("mkfifo")
        .arg(f.path("pipe"))
        .status()
        .unwrap();
    assert!(status.success());
    let read = f.err("read", json!({"path": "pipe"})).await;
    let edit = f
        .err(
            "edit",
            json!({"path": "pipe", "old_text": "a", "new_text": "b"}),
        )
        .await;
    let write = f
        .err("write", json!({"path": "pipe", "content": "x"}))
        .await;
    for message in [read, edit, write] {
        assert!(message.contains("pipe"), "{message}");
    }
}

#[tokio::test]
async fn symlinks_inside_the_root_are_followed_and_kept() {
    let f = Fixture::new();
    f.put("real/target.txt", "one\n");
    f.symlink("alias.txt", "real/target.txt");
    let out = f.ok("read", json!({"path": "alias.txt"})).await;
    assert_eq!(text(&out), "     1\tone\n");
    f.ok(
        "edit",
        json!({"path": "alias.txt", "old_text": "one", "new_text": "two"}),
    )
    .await;
    f.ok("write", json!({"path": "alias.txt", "content": "three\n"}))
        .await;
    assert_eq!(f.bytes("real/target.txt"), b"three\n");
    assert!(
        std::fs::symlink_metadata(f.path("alias.txt"))
            .unwrap()
            .is_symlink(),
        "the link was replaced by a file"
    );
    // A dangling link inside the root: writing it creates its target, as
    // Jail::write documents, and never blames an option that was not given.
    f.symlink("later.txt", "real/later.txt");
    let out = f
        .ok("write", json!({"path": "later.txt", "content": "new\n"}))
        .await;
    assert_eq!(text(&out), "Created `later.txt` (1 lines, 4 bytes).");
    assert_eq!(facts(&out)["created"], json!(true));
    assert_eq!(f.bytes("real/later.txt"), b"new\n");
    assert!(
        std::fs::symlink_metadata(f.path("later.txt"))
            .unwrap()
            .is_symlink()
    );
    // create_only refuses: something (the link) is already there.
    f.symlink("later2.txt", "real/later2.txt");
    let error = f
        .err(
            "write",
            json!({"path": "later2.txt", "content": "x", "create_only": true}),
        )
        .await;
    assert!(error.contains("already exists"), "{error}");
    assert!(!f.path("real/later2.txt").exists());
}

#[tokio::test]
async fn edit_keeps_the_mode_and_respects_max_file_bytes() {
    let f = Fixture::with_limits(Limits::default().max_file_bytes(64));
    let path = f.put("run.sh", "#!/bin/sh\necho hi\n");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o750)).unwrap();
    f.ok(
        "edit",
        json!({"path": "run.sh", "old_text": "hi", "new_text": "hello"}),
    )
    .await;
    assert_eq!(f.bytes("run.sh"), b"#!/bin/sh\necho hello\n");
    assert_eq!(mode_of(&path), 0o750);
    // A file over the limit is not edited.
    f.put("big.txt", "y".repeat(65));
    let error = f
        .err(
            "edit",
            json!({"path": "big.txt", "old_text": "yy", "new_text": "z", "replace_all": true}),
        )
        .await;
    assert!(error.contains("64"), "{error}");
    assert_eq!(f.bytes("big.txt"), "y".repeat(65).as_bytes());
    // Nor is a file made larger than the limit (write refuses that too).
    f.put("grow.txt", "x\n");
    let error = f
        .call(
            "edit",
            json!({"path": "grow.txt", "old_text": "x", "new_text": "x".repeat(100)}),
        )
        .await;
    let Err(error) = error else {
        panic!(
            "edit wrote {} bytes over max_file_bytes = 64",
            f.bytes("grow.txt").len()
        );
    };
    assert!(
        error.to_string().contains("over the limit of 64 bytes"),
        "{error}"
    );
    assert_eq!(f.bytes("grow.txt"), b"x\n");
}

//! read: numbered lines, paging, byte budgets, binary and image files.

use base64::Engine;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toolgate_core::{Content, ToolError};
use toolgate_policy::CallError;
use toolgate_tools::Limits;

use crate::common::{Fixture, facts, sha256, text};
use crate::{joined, numbered_lines, shown_lines, tool_failure};

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

//! What a file's bytes are: text (with which line endings and whether it
//! starts with a byte-order mark), an image, or other binary data. Editing
//! tools work on the text with `\n` line endings and put the file's own
//! endings and BOM back when they write, so an edit never changes them.

use serde::Serialize;
use sha2::{Digest, Sha256};

/// The UTF-8 byte-order mark.
pub const BOM: &str = "\u{feff}";

/// How many leading bytes decide whether a file is binary (like git and grep).
pub(crate) const SNIFF_BYTES: usize = 8192;

/// The line endings of a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LineEndings {
    /// `\n` only.
    Lf,
    /// `\r\n` only.
    Crlf,
    /// Both; edits keep every line's own ending.
    Mixed,
    /// No line break at all.
    None,
}

impl LineEndings {
    /// Detects the endings of `text`.
    pub fn of(text: &str) -> LineEndings {
        let bytes = text.as_bytes();
        let mut crlf = 0usize;
        let mut lf = 0usize;
        for (i, b) in bytes.iter().enumerate() {
            if *b == b'\n' {
                if i > 0 && bytes[i - 1] == b'\r' {
                    crlf += 1;
                } else {
                    lf += 1;
                }
            }
        }
        match (crlf, lf) {
            (0, 0) => LineEndings::None,
            (0, _) => LineEndings::Lf,
            (_, 0) => LineEndings::Crlf,
            _ => LineEndings::Mixed,
        }
    }

    /// The word used in messages and structured output.
    pub fn as_str(self) -> &'static str {
        match self {
            LineEndings::Lf => "lf",
            LineEndings::Crlf => "crlf",
            LineEndings::Mixed => "mixed",
            LineEndings::None => "none",
        }
    }
}

/// An image format the model can look at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageKind {
    Png,
    Jpeg,
    Gif,
    Webp,
}

impl ImageKind {
    /// Recognises an image by its magic bytes (never by the file name).
    pub fn sniff(bytes: &[u8]) -> Option<ImageKind> {
        if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
            Some(ImageKind::Png)
        } else if bytes.starts_with(&[0xff, 0xd8, 0xff]) {
            Some(ImageKind::Jpeg)
        } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
            Some(ImageKind::Gif)
        } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
            Some(ImageKind::Webp)
        } else {
            None
        }
    }

    /// The MIME type.
    pub fn mime_type(self) -> &'static str {
        match self {
            ImageKind::Png => "image/png",
            ImageKind::Jpeg => "image/jpeg",
            ImageKind::Gif => "image/gif",
            ImageKind::Webp => "image/webp",
        }
    }
}

/// Whether the leading bytes look binary: a NUL byte, as git and grep decide.
pub fn looks_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(SNIFF_BYTES)].contains(&0)
}

/// A text file prepared for editing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    /// The text without the BOM; `\r\n` turned into `\n` when the file uses
    /// CRLF throughout (a mixed file is left as it is).
    pub text: String,
    /// Whether the file started with a BOM.
    pub bom: bool,
    /// The file's line endings.
    pub endings: LineEndings,
}

/// Why bytes are not editable text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotText {
    /// NUL bytes: a binary file.
    Binary,
    /// Not valid UTF-8; the byte offset of the first bad sequence.
    Encoding(usize),
}

impl Decoded {
    /// Decodes a file's bytes for editing.
    pub fn new(bytes: &[u8]) -> Result<Decoded, NotText> {
        if looks_binary(bytes) {
            return Err(NotText::Binary);
        }
        let text = std::str::from_utf8(bytes).map_err(|e| NotText::Encoding(e.valid_up_to()))?;
        let (bom, text) = match text.strip_prefix(BOM) {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let endings = LineEndings::of(text);
        let text = if endings == LineEndings::Crlf {
            text.replace("\r\n", "\n")
        } else {
            text.to_owned()
        };
        Ok(Decoded { text, bom, endings })
    }

    /// The bytes to write for `text` (with `\n` endings when the file is
    /// CRLF): the file's BOM and line endings put back.
    pub fn encode(&self, text: &str) -> Vec<u8> {
        let mut out = String::with_capacity(text.len() + 3);
        if self.bom {
            out.push_str(BOM);
        }
        if self.endings == LineEndings::Crlf {
            out.push_str(&text.replace("\r\n", "\n").replace('\n', "\r\n"));
        } else {
            out.push_str(text);
        }
        out.into_bytes()
    }
}

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

pub use toolgate_core::text::hex;

/// The unified diff of `old` and `new` for `path`, 3 lines of context,
/// `--- a/path` / `+++ b/path` headers; empty when they are equal.
pub fn unified_diff(path: &str, old: &str, new: &str) -> String {
    if old == new {
        return String::new();
    }
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string()
}

/// Added and removed line counts of a unified diff.
pub fn diff_stat(diff: &str) -> (usize, usize) {
    let mut added = 0;
    let mut removed = 0;
    for line in diff.lines() {
        if line.starts_with("+++") || line.starts_with("---") {
            continue;
        }
        if line.starts_with('+') {
            added += 1;
        } else if line.starts_with('-') {
            removed += 1;
        }
    }
    (added, removed)
}

/// Cuts `line` to at most `max` chars (on a char boundary), saying how many
/// were left out.
pub fn cut_line(line: &str, max: usize) -> std::borrow::Cow<'_, str> {
    // A line of at most `max` bytes has at most `max` characters: most
    // lines are, and need no walk over their characters.
    if line.len() <= max {
        return std::borrow::Cow::Borrowed(line);
    }
    match line.char_indices().nth(max) {
        None => std::borrow::Cow::Borrowed(line),
        Some((at, _)) => {
            let rest = line[at..].chars().count();
            std::borrow::Cow::Owned(format!("{}… [{rest} more chars]", &line[..at]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn line_endings_are_detected() {
        assert_eq!(LineEndings::of("a\nb\n"), LineEndings::Lf);
        assert_eq!(LineEndings::of("a\r\nb\r\n"), LineEndings::Crlf);
        assert_eq!(LineEndings::of("a\r\nb\n"), LineEndings::Mixed);
        assert_eq!(LineEndings::of("abc"), LineEndings::None);
    }

    #[test]
    fn crlf_and_bom_round_trip() {
        let bytes = "\u{feff}one\r\ntwo\r\n".as_bytes();
        let decoded = Decoded::new(bytes).unwrap();
        assert_eq!(decoded.text, "one\ntwo\n");
        assert!(decoded.bom);
        assert_eq!(decoded.endings, LineEndings::Crlf);
        assert_eq!(decoded.encode(&decoded.text), bytes);
        assert_eq!(
            decoded.encode("one\nthree\n"),
            "\u{feff}one\r\nthree\r\n".as_bytes()
        );
    }

    #[test]
    fn mixed_files_are_left_alone() {
        let decoded = Decoded::new(b"a\r\nb\n").unwrap();
        assert_eq!(decoded.text, "a\r\nb\n");
        assert_eq!(decoded.encode("a\r\nc\n"), b"a\r\nc\n");
    }

    #[test]
    fn binary_and_bad_encodings_are_not_text() {
        assert_eq!(Decoded::new(b"a\0b"), Err(NotText::Binary));
        assert_eq!(Decoded::new(b"ok \xff\xfe"), Err(NotText::Encoding(3)));
    }

    #[test]
    fn images_are_sniffed_by_magic_bytes() {
        assert_eq!(
            ImageKind::sniff(b"\x89PNG\r\n\x1a\nrest"),
            Some(ImageKind::Png)
        );
        assert_eq!(
            ImageKind::sniff(&[0xff, 0xd8, 0xff, 0xe0]),
            Some(ImageKind::Jpeg)
        );
        assert_eq!(ImageKind::sniff(b"GIF89a..."), Some(ImageKind::Gif));
        assert_eq!(
            ImageKind::sniff(b"RIFF\0\0\0\0WEBPVP8 "),
            Some(ImageKind::Webp)
        );
        assert_eq!(ImageKind::sniff(b"PNG but not really"), None);
    }

    #[test]
    fn long_lines_are_cut_on_char_boundaries() {
        assert_eq!(cut_line("short", 10), "short");
        assert_eq!(cut_line("ééééé", 2), "éé… [3 more chars]");
    }

    #[test]
    fn diffs_and_their_stats() {
        let diff = unified_diff("f.txt", "a\nb\n", "a\nc\n");
        assert_eq!(
            diff,
            "--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n"
        );
        assert_eq!(diff_stat(&diff), (1, 1));
        assert_eq!(unified_diff("f", "same", "same"), "");
    }
}

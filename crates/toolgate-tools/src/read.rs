//! `read`: a file's text with line numbers, a page at a time; images as
//! image content; binary files described, never dumped.

use std::io::{BufRead, BufReader, Read as _, Seek as _, SeekFrom};
use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use base64::Engine;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use toolgate_core::{
    CallContext, Content, EffectClass, ToolError, ToolOutput, ToolSpec, TypedTool,
};
use toolgate_sandbox::JailError;

use crate::facts_schema;
use crate::fs::{Fs, Located, blocking_short, jail_error};
use crate::text::{self, ImageKind, LineEndings};

mod facts;

use facts::{CACHE_MIN_BYTES, Facts, FactsCache, FileKey, MARK_EVERY};

/// Files larger than this are shown a page at a time without a total line
/// count or hash, so a huge log does not have to be read to its end.
const FULL_SCAN_BYTES: u64 = 256 * 1024 * 1024;

/// Arguments of `read`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    /// The file, relative to the workspace (or absolute inside it).
    pub path: String,
    /// First line to show, counting from 1 (default 1).
    #[schemars(range(min = 1))]
    pub offset: Option<u64>,
    /// How many lines to show (default and most: about 2000, what fits one result).
    #[schemars(range(min = 1))]
    pub limit: Option<u64>,
}

/// The `read` tool.
pub struct ReadTool {
    fs: Arc<Fs>,
    /// Whole-file facts of large files, so later pages need not rescan.
    facts: Arc<FactsCache>,
}

impl ReadTool {
    /// `read` over `fs`.
    pub fn new(fs: Arc<Fs>) -> ReadTool {
        ReadTool {
            fs,
            facts: Arc::default(),
        }
    }
}

#[async_trait]
impl TypedTool for ReadTool {
    type Args = ReadArgs;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "read",
            "Read a file in the workspace: text with line numbers (up to 2000 lines per call; \
             use offset/limit to page through longer files, as the result says), images \
             (png, jpeg, gif, webp) as images. Binary files are described, not dumped. The \
             result's sha256 can be passed to write/edit as expected_sha256. Use grep to find \
             where something is and ls to list a directory; do not read a directory.",
            EffectClass::Read,
        )
        .group("group:fs")
        .parallel_safe(true)
        .path_arg("/path")
        .output_schema(facts_schema())
    }

    async fn run(&self, args: ReadArgs, _ctx: &CallContext) -> Result<ToolOutput, ToolError> {
        let place = self.fs.locate(&args.path)?;
        let limits = *self.fs.limits();
        let facts = self.facts.clone();
        blocking_short(move || read(&place, &args, &limits, &facts)).await
    }
}

fn read(
    place: &Located,
    args: &ReadArgs,
    limits: &crate::fs::Limits,
    cache: &FactsCache,
) -> Result<ToolOutput, ToolError> {
    let (file, stat) = place.jail.open_file(&place.rel).map_err(|e| match e {
        JailError::IsADirectory { .. } => ToolError::Failed(format!(
            "`{}` is a directory; list it with ls, or read a file inside it",
            place.shown
        )),
        other => jail_error(other),
    })?;
    let key = (CACHE_MIN_BYTES..=FULL_SCAN_BYTES)
        .contains(&stat.size)
        .then(|| file.metadata().ok().map(|meta| FileKey::of(&meta)))
        .flatten();
    // A small file in one read, into a buffer its size: no 64 KiB buffer
    // for a 2 KiB file. Never under what the binary sniff looks at.
    let capacity = usize::try_from(stat.size)
        .map_or(READ_BUFFER, |size| size.saturating_add(1))
        .clamp(text::SNIFF_BYTES, READ_BUFFER);
    let mut reader = BufReader::with_capacity(capacity, file);
    let (image_kind, binary) = {
        let head = reader.fill_buf().map_err(|e| io_error(&place.shown, &e))?;
        (ImageKind::sniff(head), text::looks_binary(head))
    };
    if let Some(kind) = image_kind {
        return image(place, reader, kind, stat.size, limits.max_image_bytes);
    }
    if binary {
        let text = format!(
            "`{}` is a binary file ({} bytes); its contents are not shown. Use bash with a \
             tool that understands the format (file, xxd, unzip -l, ...) to inspect it.",
            place.shown, stat.size
        );
        return Ok(ToolOutput::text(text).with_structured(json!({
            "path": place.shown, "kind": "binary", "size": stat.size,
        })));
    }
    let offset = args.offset.unwrap_or(1).max(1);
    let limit = args
        .limit
        .unwrap_or(limits.read_lines as u64)
        .clamp(1, limits.read_lines as u64);
    let known = key.as_ref().and_then(|key| cache.get(key));
    let page = match known {
        // Straight to the noted line start before the page.
        Some(facts) => {
            let (line, at) = facts.mark_before(offset);
            let mut page = reader
                .seek(SeekFrom::Start(at))
                .and_then(|_| Page::collect(reader, line, false, offset, limit, limits))
                .map_err(|e| io_error(&place.shown, &e))?
                .0;
            page.take(&facts);
            page
        }
        None => {
            let began = SystemTime::now();
            let whole = stat.size <= FULL_SCAN_BYTES;
            let (page, facts) = Page::collect(reader, 1, whole, offset, limit, limits)
                .map_err(|e| io_error(&place.shown, &e))?;
            if let (Some(key), Some(facts)) = (key, facts)
                && key.settled(began)
            {
                cache.put(key, facts);
            }
            page
        }
    };
    page.render(place, offset, stat.size)
}

/// Most bytes one read of a file takes.
const READ_BUFFER: usize = 64 * 1024;

fn image(
    place: &Located,
    mut reader: BufReader<std::fs::File>,
    kind: ImageKind,
    size: u64,
    max: u64,
) -> Result<ToolOutput, ToolError> {
    if size > max {
        return Err(ToolError::Failed(format!(
            "`{}` is a {} image of {size} bytes, over the limit of {max} bytes for images; \
             make a smaller copy with bash (e.g. ImageMagick's convert -resize) and read that",
            place.shown,
            kind.mime_type()
        )));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    // A file that grows past the check is still cut at the limit.
    (&mut reader)
        .take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_error(&place.shown, &e))?;
    if bytes.len() as u64 > max {
        return Err(ToolError::Failed(format!(
            "`{}` grew past the image limit of {max} bytes while it was read",
            place.shown
        )));
    }
    let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
    Ok(ToolOutput::new(vec![
        Content::Image {
            data,
            mime_type: kind.mime_type().to_owned(),
        },
        Content::Text {
            text: format!(
                "`{}`: {} image, {} bytes",
                place.shown,
                kind.mime_type(),
                bytes.len()
            ),
        },
    ])
    .with_structured(json!({
        "path": place.shown, "kind": "image", "mime_type": kind.mime_type(),
        "size": bytes.len(), "sha256": text::sha256_hex(&bytes),
    })))
}

/// The lines of one `read` call and what was learned about the whole file.
struct Page {
    shown: String,
    first: u64,
    last: u64,
    /// The first line not shown because of `limit` or the byte budget.
    next: Option<u64>,
    /// Lines in the file; `None` when the file was too large to count.
    total: Option<u64>,
    sha256: Option<String>,
    bom: bool,
    crlf: u64,
    lf: u64,
    cut: u64,
    invalid_utf8: bool,
}

impl Page {
    /// The page of `limit` lines from `offset`, reading from line
    /// `first_line` on. With `whole`, the rest of the file is read too, for
    /// the facts about all of it.
    fn collect(
        mut reader: impl BufRead,
        first_line: u64,
        whole: bool,
        offset: u64,
        limit: u64,
        limits: &crate::fs::Limits,
    ) -> std::io::Result<(Page, Option<Facts>)> {
        let mut hasher = Sha256::new();
        let mut at = 0u64;
        let mut marks = vec![0];
        let mut page = Page {
            shown: String::new(),
            first: offset,
            last: offset.saturating_sub(1),
            next: None,
            total: None,
            sha256: None,
            bom: false,
            crlf: 0,
            lf: 0,
            cut: 0,
            invalid_utf8: false,
        };
        let mut line = Vec::new();
        let mut number = first_line.saturating_sub(1);
        loop {
            line.clear();
            if reader.read_until(b'\n', &mut line)? == 0 {
                break;
            }
            number += 1;
            if whole {
                hasher.update(&line);
                at += line.len() as u64;
                if number.is_multiple_of(MARK_EVERY) {
                    marks.push(at);
                }
            }
            let mut body: &[u8] = &line;
            if let Some(rest) = body.strip_suffix(b"\n") {
                body = rest;
                match body.strip_suffix(b"\r") {
                    Some(rest) => {
                        page.crlf += 1;
                        body = rest;
                    }
                    None => page.lf += 1,
                }
            }
            if number == 1
                && let Some(rest) = body.strip_prefix(text::BOM.as_bytes())
            {
                page.bom = true;
                body = rest;
            }
            if number < offset || page.next.is_some() {
                if !whole && page.next.is_some() {
                    break;
                }
                continue;
            }
            let decoded = String::from_utf8_lossy(body);
            let shown = text::cut_line(&decoded, limits.line_chars);
            // The row is `{number:>6}\t{shown}\n`, written straight into the
            // page once it is known to fit.
            let digits = number.checked_ilog10().map_or(1, |d| d as usize + 1);
            let row_len = digits.max(6) + 1 + shown.len() + 1;
            // The whole row must fit the byte budget (one row at least, so
            // paging always advances).
            let over_lines = number >= offset + limit;
            let over_bytes = page.last >= offset && page.shown.len() + row_len > limits.read_bytes;
            if over_lines || over_bytes {
                page.next = Some(number);
                if !whole {
                    break;
                }
                continue;
            }
            page.invalid_utf8 |= matches!(decoded, std::borrow::Cow::Owned(_));
            page.cut += u64::from(matches!(shown, std::borrow::Cow::Owned(_)));
            // `{number:>6}\t{shown}\n`, without the formatting machinery
            // for every line of a page.
            page.shown.reserve(row_len);
            page.shown
                .extend(std::iter::repeat_n(' ', 6usize.saturating_sub(digits)));
            let mut buffer = [0; 20];
            page.shown.push_str(crate::fs::decimal(number, &mut buffer));
            page.shown.push('\t');
            page.shown.push_str(&shown);
            page.shown.push('\n');
            page.last = number;
        }
        if !whole {
            return Ok((page, None));
        }
        let facts = Facts {
            total: number,
            sha256: text::hex(&hasher.finalize()),
            bom: page.bom,
            crlf: page.crlf,
            lf: page.lf,
            marks,
        };
        page.take(&facts);
        Ok((page, Some(facts)))
    }

    /// The whole file's facts, learned now or by an earlier scan.
    fn take(&mut self, facts: &Facts) {
        self.total = Some(facts.total);
        self.sha256 = Some(facts.sha256.clone());
        self.bom = facts.bom;
        self.crlf = facts.crlf;
        self.lf = facts.lf;
    }

    fn render(self, place: &Located, offset: u64, size: u64) -> Result<ToolOutput, ToolError> {
        if let Some(total) = self.total
            && offset > total.max(1)
        {
            return Err(ToolError::InvalidArguments(format!(
                "offset {offset} is past the end of `{}`, which has {total} lines",
                place.shown
            )));
        }
        let endings = match (self.crlf, self.lf) {
            (0, 0) => LineEndings::None,
            (0, _) => LineEndings::Lf,
            (_, 0) => LineEndings::Crlf,
            _ => LineEndings::Mixed,
        };
        let mut text = self.shown;
        let mut notes = Vec::new();
        if size == 0 {
            notes.push("the file is empty".to_owned());
        }
        if self.bom {
            notes.push(
                "the file starts with a UTF-8 byte-order mark (not shown; edits keep it)"
                    .to_owned(),
            );
        }
        match endings {
            LineEndings::Crlf => notes.push(
                "the file uses CRLF line endings (shown without \\r; edits keep them)".to_owned(),
            ),
            LineEndings::Mixed => notes.push(format!(
                "the file mixes line endings: {} CRLF, {} LF (shown without \\r)",
                self.crlf, self.lf
            )),
            LineEndings::Lf | LineEndings::None => {}
        }
        if self.invalid_utf8 {
            notes.push(
                "the file is not valid UTF-8; invalid bytes are shown as \u{fffd}".to_owned(),
            );
        }
        if self.cut > 0 {
            notes.push(format!(
                "{} long line(s) cut; grep the file or read it with bash to see them whole",
                self.cut
            ));
        }
        if let Some(next) = self.next {
            let of = self.total.map_or(String::new(), |t| format!(" of {t}"));
            notes.push(format!(
                "showing lines {}-{}{of}; continue with offset={next}",
                self.first, self.last
            ));
        }
        for note in &notes {
            text.push_str(&format!("[{note}]\n"));
        }
        Ok(ToolOutput::text(text).with_structured(json!({
            "path": place.shown,
            "kind": "text",
            "size": size,
            "start_line": self.first,
            "end_line": self.last,
            "total_lines": self.total,
            "truncated": self.next.is_some(),
            "next_offset": self.next,
            "line_endings": endings.as_str(),
            "bom": self.bom,
            "lines_cut": self.cut,
            "sha256": self.sha256,
        })))
    }
}

/// The facts of the three kinds of result: text ([`Page::render`]), image
/// ([`image`]) and binary ([`read`]).
fn facts_schema() -> Value {
    let mut schema = facts_schema::object(
        json!({
            "path": {"type": "string", "description": "The file, as the workspace shows it."},
            "kind": {
                "enum": ["text", "image", "binary"],
                "description": "text: lines were shown; image: the image is in the content; \
                                binary: nothing was shown (inspect it with bash).",
            },
            "size": {"type": "integer", "description": "The file's size in bytes."},
            "start_line": {"type": "integer", "description": "text: the first line shown (from 1)."},
            "end_line": {
                "type": "integer",
                "description": "text: the last line shown (start_line - 1 when none was: the \
                                file is empty).",
            },
            "total_lines": {
                "type": ["integer", "null"],
                "description": "text: lines in the whole file; null when it is too large \
                                (over 256 MiB) to count.",
            },
            "truncated": {
                "type": "boolean",
                "description": "text: lines after end_line were not shown; read again with \
                                offset=next_offset for them.",
            },
            "next_offset": {
                "type": ["integer", "null"],
                "description": "text: the offset that continues after this page; null when \
                                the page reaches the end of the file.",
            },
            "line_endings": {
                "enum": ["lf", "crlf", "mixed", "none"],
                "description": "text: the file's line endings (lines are shown without \\r; \
                                edits keep them).",
            },
            "bom": {
                "type": "boolean",
                "description": "text: the file starts with a UTF-8 byte-order mark (not shown; \
                                edits keep it).",
            },
            "lines_cut": {
                "type": "integer",
                "description": "text: lines of this page shown cut because they are very long; \
                                grep the file or use bash to see them whole.",
            },
            "sha256": {
                "type": ["string", "null"],
                "description": "SHA-256 (hex) of the whole file, to pass to write or edit as \
                                expected_sha256; null for a text file too large to hash.",
            },
            "mime_type": {
                "enum": ["image/png", "image/jpeg", "image/gif", "image/webp"],
                "description": "image: the image's format.",
            },
        }),
        &["path", "kind", "size"],
    );
    schema["oneOf"] = json!([
        {
            "properties": {"kind": {"const": "text"}},
            "required": [
                "start_line", "end_line", "total_lines", "truncated", "next_offset",
                "line_endings", "bom", "lines_cut", "sha256",
            ],
        },
        {"properties": {"kind": {"const": "image"}}, "required": ["mime_type", "sha256"]},
        {"properties": {"kind": {"const": "binary"}}},
    ]);
    schema
}

fn io_error(shown: &str, e: &std::io::Error) -> ToolError {
    ToolError::Failed(format!("could not read `{shown}`: {e}"))
}

#[cfg(test)]
mod tests;

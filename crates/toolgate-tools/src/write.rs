//! `write`: a whole file, atomically, through the jail.

use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use toolgate_core::{
    CallContext, EffectClass, Idempotency, ToolError, ToolOutput, ToolSpec, TypedTool,
};
use toolgate_sandbox::JailError;

use crate::facts_schema;
use crate::fs::{Fs, Located, blocking, jail_error};
use crate::text;

/// Arguments of `write`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteArgs {
    /// The file, relative to the workspace (or absolute inside it). Missing
    /// parent directories are created.
    pub path: String,
    /// The whole new content of the file.
    pub content: String,
    /// Refuse unless the file's current SHA-256 (hex, from read) is this:
    /// protects a change made by someone else since you read the file.
    #[schemars(regex(pattern = r"^[0-9a-fA-F]{64}$"))]
    pub expected_sha256: Option<String>,
    /// Refuse if the file already exists.
    #[serde(default)]
    pub create_only: bool,
}

/// The `write` tool.
pub struct WriteTool {
    fs: Arc<Fs>,
}

impl WriteTool {
    /// `write` over `fs`.
    pub fn new(fs: Arc<Fs>) -> WriteTool {
        WriteTool { fs }
    }
}

#[async_trait]
impl TypedTool for WriteTool {
    type Args = WriteArgs;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "write",
            "Create a file or replace its whole content, atomically (the old content or the \
             new, never half of each; the file's mode is kept). Use it for new files and \
             complete rewrites; to change part of an existing file use edit (or apply_patch \
             for several files), which sends only the change. Pass expected_sha256 from read \
             to refuse if the file changed meanwhile, create_only to refuse replacing one.",
            EffectClass::MutateReversible,
        )
        .idempotency(Idempotency::CheckBeforeAct)
        .group("group:fs")
        .path_arg("/path")
        .output_schema(facts_schema())
    }

    async fn run(&self, args: WriteArgs, _ctx: &CallContext) -> Result<ToolOutput, ToolError> {
        let place = self.fs.locate(&args.path)?;
        let max = self.fs.limits().max_file_bytes;
        blocking(move || write(&place, &args, max)).await
    }
}

fn write(place: &Located, args: &WriteArgs, max: u64) -> Result<ToolOutput, ToolError> {
    let size = args.content.len() as u64;
    if size > max {
        return Err(ToolError::InvalidArguments(format!(
            "the content is {size} bytes, over the limit of {max} bytes per file"
        )));
    }
    let previous = current_sha256(place)?;
    if let Some(expected) = &args.expected_sha256 {
        check_expected(place, previous.as_deref(), expected)?;
    }
    let bytes = args.content.as_bytes();
    if args.create_only {
        place
            .jail
            .create_new(&place.rel, bytes)
            .map_err(|e| match e {
                JailError::AlreadyExists { .. } => ToolError::Failed(format!(
                    "`{}` already exists and create_only refuses to replace it; read it and \
                     use edit, or write without create_only",
                    place.shown
                )),
                other => jail_error(other),
            })?;
    } else {
        // Also through a symlink inside the root whose target is missing.
        place.jail.write(&place.rel, bytes).map_err(jail_error)?;
    }
    let created = previous.is_none();
    let lines = args.content.lines().count();
    let verb = if created { "Created" } else { "Replaced" };
    Ok(ToolOutput::text(format!(
        "{verb} `{}` ({lines} lines, {size} bytes).",
        place.shown
    ))
    .with_structured(json!({
        "path": place.shown,
        "created": created,
        "bytes": size,
        "lines": lines,
        "sha256": text::sha256_hex(bytes),
        "previous_sha256": previous,
    })))
}

/// The facts of [`write`].
fn facts_schema() -> Value {
    facts_schema::object(
        json!({
            "path": {"type": "string", "description": "The file, as the workspace shows it."},
            "created": {
                "type": "boolean",
                "description": "The file did not exist before; false: its content was replaced.",
            },
            "bytes": {"type": "integer", "description": "Bytes written (the file's new size)."},
            "lines": {"type": "integer", "description": "Lines in the new content."},
            "sha256": {
                "type": "string",
                "description": "SHA-256 (hex) of the new content, the expected_sha256 of a \
                                later write or edit.",
            },
            "previous_sha256": {
                "type": ["string", "null"],
                "description": "SHA-256 (hex) of the content before; null when the file was \
                                created.",
            },
        }),
        &[
            "path",
            "created",
            "bytes",
            "lines",
            "sha256",
            "previous_sha256",
        ],
    )
}

/// The SHA-256 of the file at `place`, streamed; `None` when nothing is there.
pub(crate) fn current_sha256(place: &Located) -> Result<Option<String>, ToolError> {
    use sha2::{Digest, Sha256};
    let mut file = match place.jail.open_file(&place.rel) {
        Ok((file, _)) => file,
        Err(JailError::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(jail_error(e)),
    };
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher)
        .map_err(|e| ToolError::Failed(format!("could not read `{}`: {e}", place.shown)))?;
    Ok(Some(text::hex(&hasher.finalize())))
}

/// Check-before-act: refuses when the file is not the one the caller read.
pub(crate) fn check_expected(
    place: &Located,
    current: Option<&str>,
    expected: &str,
) -> Result<(), ToolError> {
    match current {
        None => Err(ToolError::Failed(format!(
            "expected_sha256 was given but `{}` does not exist (any more); drop \
             expected_sha256 to create it",
            place.shown
        ))),
        Some(current) if !current.eq_ignore_ascii_case(expected) => {
            Err(ToolError::Failed(format!(
                "`{}` changed since it was read: its sha256 is now {current}, not {expected}; \
                 read it again and redo the change on the current content",
                place.shown
            )))
        }
        Some(_) => Ok(()),
    }
}

//! `grep`: search file contents across the workspace.

use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use toolgate_core::{CallContext, EffectClass, ToolError, ToolOutput, ToolSpec, TypedTool};

use crate::fs::{Fs, blocking};
use crate::search::grep::{CaseMode, GrepMode, GrepOptions, GrepReport, grep_with_progress};
use crate::search::limits;
use crate::search::stop::Stop;
use crate::search::walk::SearchError;

/// Longest file type name the schema accepts (the real ones are short).
const MAX_TYPE_NAME_CHARS: usize = 64;

/// Arguments of `grep`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrepArgs {
    /// A regular expression (Rust regex syntax, like ripgrep), or a literal
    /// with fixed_strings=true. At most 4096 characters.
    #[schemars(length(max = limits::MAX_PATTERN_CHARS))]
    pub pattern: String,
    /// File or directory to search (default: the workspace's working directory).
    #[serde(default)]
    pub path: String,
    /// Take the pattern literally (no regex metacharacters).
    #[serde(default)]
    pub fixed_strings: bool,
    /// sensitive (default), insensitive, or smart (insensitive unless the
    /// pattern has an uppercase letter).
    #[serde(default)]
    pub case: CaseMode,
    /// Match whole words only.
    #[serde(default)]
    pub word: bool,
    /// Let a match span lines (`\n` in the pattern).
    #[serde(default)]
    pub multiline: bool,
    /// Only files matching one of these globs: "*.rs", "src/**/*.ts". A
    /// glob without `/` matches the file name at any depth.
    #[serde(default)]
    #[schemars(length(max = limits::MAX_GLOBS), inner(length(max = limits::MAX_GLOB_CHARS)))]
    pub include: Vec<String>,
    /// Skip files and directories matching one of these globs.
    #[serde(default)]
    #[schemars(length(max = limits::MAX_GLOBS), inner(length(max = limits::MAX_GLOB_CHARS)))]
    pub exclude: Vec<String>,
    /// Only files of these types: "rust", "py", "js", "ts", "go", "md", ...
    #[serde(default)]
    #[schemars(length(max = limits::MAX_TYPES), inner(length(max = MAX_TYPE_NAME_CHARS)))]
    pub types: Vec<String>,
    /// Also search hidden files and directories (`.git` never).
    #[serde(default)]
    pub hidden: bool,
    /// Also search files that .gitignore / .ignore exclude.
    #[serde(default)]
    pub no_ignore: bool,
    /// Lines of context before and after each match (content mode).
    pub context: Option<usize>,
    /// Lines of context before each match (overrides context).
    pub before: Option<usize>,
    /// Lines of context after each match (overrides context).
    pub after: Option<usize>,
    /// content (matching lines with numbers, default), files_with_matches
    /// (paths only), or count (matching lines per file).
    #[serde(default)]
    pub mode: GrepMode,
    /// Results to skip: matching lines in content mode, files otherwise.
    #[serde(default)]
    pub offset: usize,
    /// Results to return (default 100).
    #[schemars(range(min = 1))]
    pub limit: Option<usize>,
}

/// The `grep` tool.
pub struct GrepTool {
    fs: Arc<Fs>,
}

impl GrepTool {
    /// `grep` over `fs`.
    pub fn new(fs: Arc<Fs>) -> GrepTool {
        GrepTool { fs }
    }
}

#[async_trait]
impl TypedTool for GrepTool {
    type Args = GrepArgs;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "grep",
            "Search file contents in the workspace with a regular expression (ripgrep's \
             engine): respects .gitignore, skips hidden and binary files, searches in \
             parallel. Narrow with include globs or types; mode=files_with_matches or count \
             for an overview, context for surrounding lines. Results are sorted by path and \
             capped; the result says which offset continues. Use find to search file names, \
             read to see a whole file.",
            EffectClass::Read,
        )
        .group("group:search")
        .parallel_safe(true)
        .path_arg("/path")
        .output_schema(GrepReport::facts_schema())
    }

    async fn run(&self, args: GrepArgs, ctx: &CallContext) -> Result<ToolOutput, ToolError> {
        let place = self.fs.locate(&args.path)?;
        let limits = *self.fs.limits();
        let context = args.context.unwrap_or(0);
        let options = GrepOptions {
            pattern: args.pattern,
            fixed_strings: args.fixed_strings,
            case: args.case,
            include: args.include,
            exclude: args.exclude,
            types: args.types,
            hidden: args.hidden,
            no_ignore: args.no_ignore,
            before: args.before.unwrap_or(context),
            after: args.after.unwrap_or(context),
            mode: args.mode,
            offset: args.offset,
            limit: args.limit.unwrap_or(100).max(1),
            max_line_chars: limits.line_chars.min(500),
            multiline: args.multiline,
            word: args.word,
        };
        let progress = ctx.progress.clone();
        let stop = Stop::default();
        // A cancelled call drops this future, and with it the guard: the
        // search on the blocking thread ends at its next file or read.
        let _cancel = stop.cancel_on_drop();
        blocking(move || {
            let report = grep_with_progress(&place.jail, &place.rel, &options, &progress, &stop)
                .map_err(search_error)?;
            Ok(ToolOutput::text(report.render()).with_structured(report.facts()))
        })
        .await
    }
}

pub(crate) fn search_error(e: SearchError) -> ToolError {
    match e {
        SearchError::Jail(e) => crate::fs::jail_error(e),
        other => ToolError::InvalidArguments(other.to_string()),
    }
}

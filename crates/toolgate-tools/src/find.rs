//! `find`: search file names across the workspace.

use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use toolgate_core::{CallContext, EffectClass, ToolError, ToolOutput, ToolSpec, TypedTool};

use crate::fs::{Fs, blocking};
use crate::grep::search_error;
use crate::search::find::{EntryType, FindOptions, FindReport, SortBy, find_until};
use crate::search::stop::Stop;

/// Arguments of `find`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FindArgs {
    /// A glob: "*.rs" (a name at any depth), "src/**/*.ts" (a path), "Cargo.toml".
    /// `*` stays within one directory, `**` crosses them. Empty: every entry.
    #[serde(default)]
    #[schemars(length(max = crate::search::limits::MAX_GLOB_CHARS))]
    pub pattern: String,
    /// Directory to search (default: the workspace's working directory).
    #[serde(default)]
    pub path: String,
    /// Only entries of this type: file, dir or symlink.
    #[serde(rename = "type")]
    pub kind: Option<EntryType>,
    /// Only files of at least this many bytes.
    pub min_size: Option<u64>,
    /// Only files of at most this many bytes.
    pub max_size: Option<u64>,
    /// How deep below `path` to look (1: its direct entries).
    #[schemars(range(min = 1))]
    pub max_depth: Option<usize>,
    /// Also list hidden entries (`.git` never).
    #[serde(default)]
    pub hidden: bool,
    /// Also list what .gitignore / .ignore exclude.
    #[serde(default)]
    pub no_ignore: bool,
    /// path (default) or modified (newest first).
    #[serde(default)]
    pub sort: SortBy,
    /// Entries to skip.
    #[serde(default)]
    pub offset: usize,
    /// Entries to return (default 200).
    #[schemars(range(min = 1))]
    pub limit: Option<usize>,
}

/// The `find` tool.
pub struct FindTool {
    fs: Arc<Fs>,
}

impl FindTool {
    /// `find` over `fs`.
    pub fn new(fs: Arc<Fs>) -> FindTool {
        FindTool { fs }
    }
}

#[async_trait]
impl TypedTool for FindTool {
    type Args = FindArgs;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "find",
            "Find files and directories in the workspace by glob (\"*.rs\", \"src/**/test_*.py\"), \
             respecting .gitignore and skipping hidden entries; filter by type and size, sort \
             by path or newest first. Results are capped; the result says which offset \
             continues. Use grep to search contents, ls to see one directory with details.",
            EffectClass::Read,
        )
        .group("group:search")
        .parallel_safe(true)
        .path_arg("/path")
        .output_schema(FindReport::facts_schema())
    }

    async fn run(&self, args: FindArgs, _ctx: &CallContext) -> Result<ToolOutput, ToolError> {
        let place = self.fs.locate(&args.path)?;
        let options = FindOptions {
            pattern: args.pattern,
            kind: args.kind,
            min_size: args.min_size,
            max_size: args.max_size,
            hidden: args.hidden,
            no_ignore: args.no_ignore,
            sort: args.sort,
            offset: args.offset,
            limit: args.limit.unwrap_or(self.fs.limits().results).max(1),
            max_depth: args.max_depth,
        };
        let stop = Stop::default();
        // A cancelled call drops this future and the guard with it: the walk
        // on the blocking thread ends at its next entry.
        let _cancel = stop.cancel_on_drop();
        blocking(move || {
            let report =
                find_until(&place.jail, &place.rel, &options, &stop).map_err(search_error)?;
            let facts = serde_json::to_value(&report)
                .map_err(|e| ToolError::Failed(format!("internal error: {e}")))?;
            Ok(ToolOutput::text(report.render()).with_structured(facts))
        })
        .await
    }
}

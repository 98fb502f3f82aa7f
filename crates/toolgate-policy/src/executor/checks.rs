//! The stages that look into the arguments: paths and shell scripts.

use std::borrow::Cow;

use serde_json::Value;
use toolgate_core::{CallContext, RegisteredTool, ToolSpec};

use super::{CallError, Executor, Stage, StageOutcome};
use crate::command::{CommandVerdict, ParseFallback};
use crate::path::PathVerdict;

impl Executor {
    pub(super) fn check_paths(
        &self,
        tool: &RegisteredTool,
        args: &Value,
        ctx: &CallContext,
    ) -> Result<(StageOutcome, String), CallError> {
        let denied = |reason| CallError::Denied {
            stage: Stage::Paths,
            reason,
        };
        let mut paths: Vec<Cow<'_, str>> =
            strings_at(args, &tool.spec().path_args, "a path string")
                .map_err(denied)?
                .into_iter()
                .map(Cow::Borrowed)
                .collect();
        // Paths inside other arguments (a patch's file headers) are checked
        // the same way; the tool knows where they are.
        let embedded = tool.handler().embedded_paths(args).map_err(denied)?;
        paths.extend(embedded.into_iter().map(Cow::Owned));
        if paths.is_empty() {
            return Ok((StageOutcome::Skip, "no path arguments".to_owned()));
        }
        let mut allowed = Vec::new();
        for raw in paths {
            match self
                .policy
                .paths
                .check(std::path::Path::new(raw.as_ref()), &ctx.cwd, &ctx.roots)
            {
                PathVerdict::Allowed { path, by } => {
                    allowed.push(format!("{} ({by})", path.display()));
                }
                PathVerdict::Denied { reason, .. } => {
                    return Err(CallError::Denied {
                        stage: Stage::Paths,
                        reason,
                    });
                }
            }
        }
        Ok((
            StageOutcome::Pass,
            format!("allowed: {}", allowed.join(", ")),
        ))
    }

    pub(super) fn check_commands(
        &self,
        spec: &ToolSpec,
        args: &Value,
    ) -> Result<(StageOutcome, String), CallError> {
        let scripts =
            strings_at(args, &spec.command_args, "a shell script string").map_err(|reason| {
                CallError::Denied {
                    stage: Stage::Commands,
                    reason,
                }
            })?;
        if scripts.is_empty() {
            return Ok((StageOutcome::Skip, "no shell scripts".to_owned()));
        }
        let mut found = Vec::new();
        let mut notes = Vec::new();
        for script in scripts {
            match self.policy.commands.check(script) {
                CommandVerdict::Allowed { commands } => found.extend(commands),
                CommandVerdict::Denied { command, reason } => {
                    return Err(CallError::Denied {
                        stage: Stage::Commands,
                        reason: format!("{reason} (in `{command}`)"),
                    });
                }
                CommandVerdict::Unanalysable { reason } => {
                    match self.policy.commands.parse_fallback() {
                        ParseFallback::Deny => {
                            return Err(CallError::Denied {
                                stage: Stage::Commands,
                                reason: format!(
                                    "the script cannot be analysed ({reason}) and this policy refuses what it cannot analyse"
                                ),
                            });
                        }
                        ParseFallback::Sandbox => notes.push(format!(
                            "the script cannot be analysed ({reason}); the sandbox is the boundary"
                        )),
                    }
                }
            }
        }
        let mut detail = format!("commands: {}", found.join(", "));
        for note in notes {
            detail.push_str("; ");
            detail.push_str(&note);
        }
        Ok((StageOutcome::Pass, detail))
    }
}

/// The string values at `pointers`; an array contributes its strings. Any
/// other value at a declared pointer is refused: a path hidden in an object
/// or a nested array would otherwise reach the tool unchecked (tools with an
/// external schema get their arguments unvalidated).
pub(super) fn strings_at<'v>(
    args: &'v Value,
    pointers: &[String],
    what: &str,
) -> Result<Vec<&'v str>, String> {
    let mut out = Vec::new();
    for pointer in pointers {
        let bad = || format!("argument {pointer} must be {what} or an array of them");
        match args.pointer(pointer) {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => out.push(s.as_str()),
            Some(Value::Array(items)) => {
                for item in items {
                    out.push(item.as_str().ok_or_else(bad)?);
                }
            }
            Some(_) => return Err(bad()),
        }
    }
    Ok(out)
}

#![allow(clippy::unwrap_used, clippy::expect_used)]

//! The file tools (read, write, edit, apply_patch, grep, find, ls) end to end,
//! through the real `Executor`: schema validation, the path policy, the tool
//! and its jail. Every check looks at both the text the model gets and the
//! structured facts. One test binary; a module per topic.

#[path = "../common/mod.rs"]
mod common;

mod attacks;
mod edit;
mod find;
mod grep;
mod ls;
mod patch;
mod read;
mod tree;
mod write;

use std::os::unix::fs::PermissionsExt;

use toolgate_core::ToolError;
use toolgate_policy::CallError;

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

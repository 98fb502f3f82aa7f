//! `elevated`: a shell script run as `bash -c` directly on the host,
//! outside the sandbox.
//!
//! This is the one tool that is not confined: it exists for the work the
//! sandbox cannot do (a system package, a host service). It is off unless
//! the operator enables it, destructive (so inactive under every policy cap
//! below destructive) and the default permission rules ask before every
//! call. What it still guarantees: a working directory resolved through the
//! jail, an environment of PATH, HOME, LANG and allowlisted host variables
//! only, a timeout that kills the whole process group, and bash's bounded,
//! structured result.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use toolgate_core::{
    CallContext, EffectClass, Idempotency, ToolError, ToolOutput, ToolSpec, TypedTool,
};
use toolgate_sandbox::EntryKind;
use toolgate_sandbox::runner::{self, ExecRequest, Stream};

use crate::bash::{
    FullOutput, RuntimeConfig, check_command_env, command_facts_schema, command_result,
};
use crate::fs::{Fs, jail_error};

/// Host variables every elevated command sees (when the host has them).
/// Attack: toolgate's own environment holds tokens and proxy credentials;
/// a host command must not inherit them, so nothing else is passed
/// unless the operator allowlists it and the call names it.
const BASE_VARS: [&str; 3] = ["PATH", "HOME", "LANG"];

/// Arguments of `elevated`: those of `bash` (the tool's description says
/// the difference: the script runs on the host, outside the sandbox).
pub type ElevatedArgs = crate::bash::BashArgs;

/// The `elevated` tool.
pub struct ElevatedTool {
    fs: Arc<Fs>,
    config: RuntimeConfig,
    /// The host variables a command may get: the base ones and the
    /// operator's allowlist, captured once; nothing else is kept.
    host_env: BTreeMap<OsString, OsString>,
}

impl ElevatedTool {
    /// `elevated` over `fs`, with host variables from this process's
    /// environment.
    pub fn new(fs: Arc<Fs>, config: RuntimeConfig) -> ElevatedTool {
        ElevatedTool::with_host_env(fs, config, std::env::vars_os())
    }

    /// `elevated` over `fs`, with host variables taken from `vars` instead
    /// of this process's environment.
    pub fn with_host_env(
        fs: Arc<Fs>,
        config: RuntimeConfig,
        vars: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> ElevatedTool {
        let host_env = vars
            .into_iter()
            .filter(|(name, _)| {
                BASE_VARS.iter().any(|base| name == base)
                    || config
                        .pass_env
                        .iter()
                        .any(|allowed| name == allowed.as_str())
            })
            .collect();
        ElevatedTool {
            fs,
            config,
            host_env,
        }
    }

    /// The working directory: the workspace's, or `cwd` resolved through
    /// the jail (a `..` or symlink escape is refused). The command itself
    /// is not confined to it; this only keeps relative paths predictable.
    async fn working_dir(&self, cwd: Option<&str>) -> Result<PathBuf, ToolError> {
        let Some(cwd) = cwd else {
            return Ok(self.fs.workspace().cwd().to_owned());
        };
        let place = self.fs.locate(cwd)?;
        let jail = place.jail.clone();
        let rel = place.rel.clone();
        let kind = crate::fs::blocking(move || jail.stat(&rel).map_err(jail_error)).await?;
        if kind.kind != EntryKind::Dir {
            return Err(ToolError::InvalidArguments(format!(
                "cwd `{}` is not a directory; give a directory inside the workspace",
                place.shown
            )));
        }
        Ok(place.jail.root().join(&place.rel))
    }
}

const DESCRIPTION: &str = "UNSANDBOXED. Runs a shell script (`bash -c`) directly ON THE HOST, \
outside the sandbox, with every right of the user running toolgate: it can read and change any \
file that user can, reach the network and other processes, and nothing it does can be undone. \
A person must approve every call. Use it only for a task the sandbox cannot do and the user \
asked for (installing a system package, talking to a host service, changing a file outside the \
workspace). Do NOT use it for building, testing or editing files (use bash, read, edit), to get \
around a refusal of another tool, or when unsure: ask the user instead. The environment holds \
only PATH, HOME, LANG and host variables the operator allows; the whole process group is killed \
at the timeout (default 120 s). Returns what bash returns: stdout, stderr, the exit code, the \
signal, whether it timed out, and the whole of a long output saved to a file.";

#[async_trait]
impl TypedTool for ElevatedTool {
    type Args = ElevatedArgs;

    fn spec(&self) -> ToolSpec {
        // No group: enabling a group (`group:runtime`) must never enable it.
        ToolSpec::new("elevated", DESCRIPTION, EffectClass::Destructive)
            .idempotency(Idempotency::AtMostOnce)
            .command_arg("/command")
            .path_arg("/cwd")
            .output_schema(facts_schema())
    }

    async fn run(&self, args: ElevatedArgs, ctx: &CallContext) -> Result<ToolOutput, ToolError> {
        let timeout = self.config.timeout(args.timeout)?;
        let cwd = self.working_dir(args.cwd.as_deref()).await?;
        let mut request = ExecRequest::new("bash")
            .arg("-c")
            .arg(&args.command)
            .cwd(cwd)
            .timeout(timeout);
        for base in BASE_VARS {
            if let Some(value) = self.host_env.get(&OsString::from(base)) {
                request = request.env(base, value.clone());
            }
        }
        // On the host too: `LD_PRELOAD` or `BASH_ENV` would run code the
        // approver never saw in the command.
        check_command_env(&self.config, &args.env, &args.pass_env)?;
        for name in &args.pass_env {
            if let Some(value) = self.host_env.get(&OsString::from(name)) {
                request = request.env(name.clone(), value.clone());
            }
        }
        for (name, value) in &args.env {
            request = request.env(name.clone(), value.clone());
        }
        if let Some(stdin) = args.stdin {
            request = request.stdin(stdin.into_bytes());
        }
        let mut full = FullOutput::default();
        let progress = &ctx.progress;
        let run = runner::run_streaming(request, |stream: Stream, line: &str| {
            full.push(stream, line);
            progress.report(line);
        })
        .await
        .map_err(|e| ToolError::Failed(e.to_string()))?;
        let (mut text, mut structured) = command_result(
            &self.fs,
            &self.config.output_dir,
            "elevated",
            &ctx.call_id_for_file(),
            &run,
            full,
            timeout,
        )
        .await?;
        let _ = writeln!(text, "[ran on the host, outside the sandbox]");
        structured["backend"] = json!("host");
        structured["sandboxed"] = json!(false);
        Ok(ToolOutput::text(text).with_structured(structured))
    }
}

/// The facts of `bash` with `backend` always `host` and `sandboxed` false,
/// as [`ElevatedTool::run`] sets them.
fn facts_schema() -> Value {
    let mut schema = command_facts_schema(json!({
        "const": "host",
        "description": "The command ran on the host, outside any sandbox.",
    }));
    schema["properties"]["sandboxed"] = json!({
        "const": false,
        "description": "Always false: nothing confined the command.",
    });
    if let Some(required) = schema["required"].as_array_mut() {
        required.push(json!("sandboxed"));
    }
    schema
}

//! `bash`: a shell script run as `bash -c` inside the sandbox.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use toolgate_core::command_env;
use toolgate_core::{
    CallContext, EffectClass, EgressNote, Idempotency, Progress, ToolError, ToolOutput, ToolSpec,
    TypedTool,
};
use toolgate_policy::ResourcePolicy;
use toolgate_sandbox::SandboxCommand;
use toolgate_sandbox::runner::{Attach, ExecOutcome, Stream};

use crate::facts_schema;
use crate::fs::{Fs, workspace_error};

mod saved;

pub(crate) use saved::FullOutput;

/// How the runtime tools run commands.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RuntimeConfig {
    /// Timeout when a call gives none.
    pub default_timeout: Duration,
    /// Longest timeout a call may ask for.
    pub max_timeout: Duration,
    /// Where full outputs are kept: relative to the first workspace root,
    /// so the agent can read and grep them.
    pub output_dir: String,
    /// Host variables a call may ask for by name (`pass_env`); the operator's
    /// allowlist, empty by default: no host variable reaches a command unless
    /// it is listed here and asked for.
    pub pass_env: Vec<String>,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            default_timeout: Duration::from_secs(120),
            max_timeout: Duration::from_secs(600),
            output_dir: ".toolgate/output".to_owned(),
            pass_env: Vec::new(),
        }
    }
}

impl RuntimeConfig {
    /// The timeout of a call that asked for `secs` (or nothing: the default,
    /// never above the maximum); over the maximum is an error.
    pub(crate) fn timeout(&self, secs: Option<u64>) -> Result<Duration, ToolError> {
        let Some(secs) = secs else {
            return Ok(self.default_timeout.min(self.max_timeout));
        };
        if Duration::from_secs(secs) > self.max_timeout {
            return Err(ToolError::InvalidArguments(format!(
                "timeout {secs} s is over the limit of {} s; use process_start for longer work",
                self.max_timeout.as_secs()
            )));
        }
        Ok(Duration::from_secs(secs))
    }
}

/// Arguments of `bash`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BashArgs {
    /// The script, run as `bash -c` (pipes, `&&`, loops and heredocs work).
    pub command: String,
    /// Working directory, relative to the workspace (default: its working directory).
    pub cwd: Option<String>,
    /// Seconds before the command's whole process group is killed (default 120).
    #[schemars(range(min = 1))]
    pub timeout: Option<u64>,
    /// Text fed to the command's standard input.
    pub stdin: Option<String>,
    /// Environment variables to set for this command: {"NAME": "value"}.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Host environment variables to pass through, by name; only those the
    /// operator allows (`[tools] pass_env`).
    #[serde(default)]
    pub pass_env: Vec<String>,
}

/// The `bash` tool.
pub struct BashTool {
    fs: Arc<Fs>,
    config: RuntimeConfig,
}

impl BashTool {
    /// `bash` over `fs`.
    pub fn new(fs: Arc<Fs>, config: RuntimeConfig) -> BashTool {
        BashTool { fs, config }
    }
}

const DESCRIPTION: &str = "Run a shell script (`bash -c`) in the sandbox: writes are confined to \
the workspace, the network is off unless the policy opens it, and the whole process group is \
killed at the timeout (default 120 s). Use it to build, test, run programs and use tools that \
have no dedicated tool. Returns stdout, stderr, the exit code (a non-zero exit is a normal \
result), the signal and whether it timed out; a long output keeps its head and tail and is \
saved to a file whose path is given (up to 8 MiB of its start and 8 MiB of its end; the result \
says which lines the file holds). Prefer read, grep, find, ls and edit for \
files; use process_start for servers and watchers that keep running.";

#[async_trait]
impl TypedTool for BashTool {
    type Args = BashArgs;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new("bash", DESCRIPTION, EffectClass::MutateReversible)
            .idempotency(Idempotency::AtMostOnce)
            .group("group:runtime")
            .command_arg("/command")
            .path_arg("/cwd")
            .output_schema(command_facts_schema(json!({
                "enum": ["bwrap", "landlock", "none"],
                "description": "The sandbox that ran the command (none: unsandboxed, \
                                development only).",
            })))
    }

    async fn run(&self, args: BashArgs, ctx: &CallContext) -> Result<ToolOutput, ToolError> {
        let timeout = self.config.timeout(args.timeout)?;
        let mut command = SandboxCommand::shell(&args.command).timeout(timeout);
        check_command_env(&self.config, &args.env, &args.pass_env)?;
        for name in &args.pass_env {
            command = command.pass_env(name.clone());
        }
        for (name, value) in &args.env {
            command = command.set_env(name.clone(), value.clone());
        }
        if let Some(stdin) = args.stdin {
            command = command.stdin(stdin.into_bytes());
        }
        let mut full = FullOutput::default();
        let progress = &ctx.progress;
        let mut on_line = |stream: Stream, line: &str| {
            full.push(stream, line);
            progress.report(line);
        };
        let outcome = self
            .fs
            .workspace()
            .exec_attached(
                command,
                args.cwd.as_deref().map(Path::new),
                egress_to(&ctx.progress),
                &mut on_line,
            )
            .await
            .map_err(workspace_error)?;
        let (mut text, mut structured) = command_result(
            &self.fs,
            &self.config.output_dir,
            "bash",
            &ctx.call_id_for_file(),
            &outcome.outcome,
            full,
            timeout,
        )
        .await?;
        for warning in outcome.weakened.iter().chain(&outcome.warnings) {
            let _ = writeln!(text, "[{}]", crate::process::warnings::one_line(warning));
        }
        structured["backend"] = json!(outcome.backend);
        Ok(ToolOutput::text(text).with_structured(structured))
    }
}

/// The text and the structured facts of a finished command, shared by the
/// command tools: stdout then stderr, bounded to the read limits (head and
/// tail) with the output saved as `{output_dir}/{prefix}-{call}.log` when
/// anything was cut (all of it, or its first and last lines: the text and
/// the facts say which), and a status line that never loses the exit status.
pub(crate) async fn command_result(
    fs: &Fs,
    output_dir: &str,
    prefix: &str,
    call_id: &str,
    run: &ExecOutcome,
    full: FullOutput,
    timeout: Duration,
) -> Result<(String, Value), ToolError> {
    let mut text = String::new();
    text.push_str(&run.stdout);
    if !run.stderr.is_empty() {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        let _ = writeln!(text, "[stderr]");
        text.push_str(&run.stderr);
    }
    let limits = fs.limits();
    let caps = ResourcePolicy {
        max_output_bytes: limits.read_bytes,
        max_output_lines: limits.read_lines,
        ..ResourcePolicy::default()
    };
    let bounded = caps.bound(&text);
    let cut = bounded.truncated() || run.stdout_truncated || run.stderr_truncated;
    let mut text = bounded.text;
    let (stdout_bytes, stderr_bytes) = (full.stdout_bytes, full.stderr_bytes);
    let keeps = full.keeps();
    let saved = if cut {
        Some(save_output(fs, output_dir, prefix, call_id, full).await?)
    } else {
        None
    };
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    if let Some(path) = &saved {
        let _ = writeln!(text, "[output cut; {}]", keeps.describe(path));
    }
    let status = if run.timed_out {
        format!(
            "timed out after {} s; the process group was killed",
            timeout.as_secs()
        )
    } else if let Some(signal) = run.signal {
        format!("killed by signal {signal}")
    } else {
        format!("exit code {}", run.exit_code)
    };
    let _ = writeln!(text, "[{status}; {:.1} s]", run.duration_ms as f64 / 1000.0);
    let structured = json!({
        "exit_code": run.exit_code,
        "signal": run.signal,
        "timed_out": run.timed_out,
        "duration_ms": run.duration_ms,
        "stdout_bytes": stdout_bytes,
        "stderr_bytes": stderr_bytes,
        "truncated": cut,
        "output_file": saved,
        "output_file_keeps": saved.as_ref().map(|_| keeps.json()),
    });
    Ok((text, structured))
}

/// The facts of [`command_result`] plus `backend`, whose schema is given:
/// what ran the command.
pub(crate) fn command_facts_schema(backend: Value) -> Value {
    facts_schema::object(
        json!({
            "exit_code": {
                "type": "integer",
                "description": "The exit status; 128 + n when killed by signal n. A non-zero \
                                exit is a normal result, not a failure of the call.",
            },
            "signal": {
                "type": ["integer", "null"],
                "description": "The signal that killed the command, when toolgate killed it (at \
                                the timeout); a command killed inside the sandbox shows only as \
                                exit_code 128 + n.",
            },
            "timed_out": {
                "type": "boolean",
                "description": "The timeout expired and the whole process group was killed.",
            },
            "duration_ms": {"type": "integer", "description": "From start to exit."},
            "stdout_bytes": {
                "type": "integer",
                "description": "Bytes of standard output, counting one newline per line.",
            },
            "stderr_bytes": {
                "type": "integer",
                "description": "Bytes of standard error, counting one newline per line.",
            },
            "truncated": {
                "type": "boolean",
                "description": "The output shown was cut (head and tail kept); the output is \
                                in output_file (all of it, or what output_file_keeps says).",
            },
            "output_file": {
                "type": ["string", "null"],
                "description": "When truncated: the workspace file holding the output, to \
                                read or grep; else null.",
            },
            "output_file_keeps": output_file_keeps_schema(),
            "backend": backend,
        }),
        &[
            "exit_code",
            "signal",
            "timed_out",
            "duration_ms",
            "stdout_bytes",
            "stderr_bytes",
            "truncated",
            "output_file",
            "output_file_keeps",
            "backend",
        ],
    )
}

/// The `output_file_keeps` fact: what the output file holds.
fn output_file_keeps_schema() -> Value {
    let mut keeps = facts_schema::object(
        json!({
            "complete": {
                "type": "boolean",
                "description": "The file holds every line of the output.",
            },
            "lines": {"type": "integer", "description": "Lines of output in all."},
            "bytes": {"type": "integer", "description": "Bytes of output in all."},
            "kept_lines": {
                "type": "array",
                "items": {"type": "array", "items": {"type": "integer"}},
                "description": "The ranges of line numbers the file holds, [first, last], \
                                1-based; between two ranges the file has one marker line.",
            },
            "kept_bytes": {"type": "integer", "description": "Bytes of output the file holds."},
        }),
        &["complete", "lines", "bytes", "kept_lines", "kept_bytes"],
    );
    keeps["type"] = json!(["object", "null"]);
    keeps["description"] = json!(
        "When truncated: what output_file holds of the combined output (stdout and stderr \
         lines in arrival order, each line cut to its first 64 KiB): all of it, or whole \
         lines of its first and last 8 MiB; else null."
    );
    keeps
}

/// Saves the kept output in the output directory; returns its path as the
/// model should use it.
async fn save_output(
    fs: &Fs,
    output_dir: &str,
    prefix: &str,
    call_id: &str,
    full: FullOutput,
) -> Result<String, ToolError> {
    let path = format!("{output_dir}/{prefix}-{call_id}.log");
    let place = fs.locate(&path)?;
    let bytes = full.into_file();
    let jail = place.jail.clone();
    let rel = place.rel.clone();
    crate::fs::blocking(move || {
        jail.write(&rel, &bytes).map_err(crate::fs::jail_error)?;
        ignore_own_dir(&jail, &rel);
        Ok(())
    })
    .await?;
    Ok(place.shown)
}

/// toolgate's own directory in a workspace, `.toolgate/`, is kept out of
/// `git status` (and `git add -A`) by a `.gitignore` of `*` inside it, made
/// when output is first saved there. Through the jail: `create_new` never
/// follows a symlink planted at the name and never replaces a file the user
/// put there; a directory that leads out of the root is refused like any
/// path. Best effort: the output itself is already saved.
fn ignore_own_dir(jail: &toolgate_sandbox::Jail, saved: &Path) {
    let mut own = std::path::PathBuf::new();
    for component in saved.components() {
        own.push(component);
        if component.as_os_str() == ".toolgate" {
            let _ = jail.create_new(&own.join(".gitignore"), b"*\n");
            return;
        }
    }
}

/// An [`Attach`] that reports the run's connections through the egress
/// proxy as the call's egress notes (they become `Egress` events).
pub(crate) fn egress_to(progress: &Progress) -> Attach {
    let progress = progress.clone();
    let records: toolgate_sandbox::proxy::EventSink = Arc::new(move |record| {
        let mut note = EgressNote::new(record.host, record.port, record.allowed, record.reason);
        note.protocol = record.protocol.as_str().to_owned();
        note.bytes_up = record.bytes_up;
        note.bytes_down = record.bytes_down;
        progress.report_egress(&note);
    });
    Attach {
        egress_records: Some(records),
        ..Attach::default()
    }
}

/// Checks the variables a call sets (`env`) and asks for from the host
/// (`pass_env`): every name a shell accepts, none that changes which program
/// runs (`BASH_ENV`, `LD_PRELOAD`, `GIT_CONFIG_*` ... all named in one
/// error; see [`toolgate_core::command_env`]), and only host variables the
/// operator allows.
pub(crate) fn check_command_env(
    config: &RuntimeConfig,
    env: &BTreeMap<String, String>,
    pass_env: &[String],
) -> Result<(), ToolError> {
    let names = env.keys().chain(pass_env).map(String::as_str);
    let refused = command_env::refused_variables(names);
    if !refused.is_empty() {
        return Err(ToolError::InvalidArguments(format!(
            "refused environment variables: {}. They change which program runs, so toolgate \
             never sets them for a command; leave them out of `env` and `pass_env`",
            command_env::describe_refused(&refused)
        )));
    }
    for name in env.keys() {
        check_env_name(name)?;
    }
    for name in pass_env {
        check_pass_env(config, name)?;
    }
    Ok(())
}

/// Refuses a host variable the operator did not allow (`pass_env`): a call
/// cannot read toolgate's own environment (tokens, credentials) by naming it.
pub(crate) fn check_pass_env(config: &RuntimeConfig, name: &str) -> Result<(), ToolError> {
    if config.pass_env.iter().any(|allowed| allowed == name) {
        return Ok(());
    }
    Err(ToolError::InvalidArguments(format!(
        "the host variable `{name}` is not one a command may see; the operator allows: {}",
        if config.pass_env.is_empty() {
            "none".to_owned()
        } else {
            config.pass_env.join(", ")
        }
    )))
}

/// A variable name a shell accepts: `[A-Za-z_][A-Za-z0-9_]*`.
pub(crate) fn check_env_name(name: &str) -> Result<(), ToolError> {
    let mut chars = name.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(ToolError::InvalidArguments(format!(
            "environment variable name {name:?} is not valid; use letters, digits and _ (not first)"
        )))
    }
}

//! The demonstration toolset (`--demo`): one tool per effect class that
//! touches nothing. They let people try a policy (and tests drive the real
//! binary) before the built-in tools are installed: every check of the
//! pipeline runs, and each tool only reports what it was asked.

use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use toolgate_core::{
    CallContext, EffectClass, Idempotency, Registry, ToolError, ToolOutput, ToolRegistrationError,
    ToolSpec, Typed, TypedTool,
};

/// Registers every demo tool.
pub fn register(registry: &mut Registry) -> Result<(), ToolRegistrationError> {
    registry.register(Arc::new(Typed::new(Echo)))?;
    registry.register(Arc::new(Typed::new(Touch)))?;
    registry.register(Arc::new(Typed::new(Shell)))?;
    registry.register(Arc::new(Typed::new(Wipe)))?;
    registry.register(Arc::new(Typed::new(Flood)))?;
    Ok(())
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct EchoArgs {
    /// Text to return.
    text: String,
    /// How many times.
    #[serde(default)]
    times: Option<u32>,
}

struct Echo;

#[async_trait]
impl TypedTool for Echo {
    type Args = EchoArgs;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "demo_echo",
            "Returns `text`, `times` times. Demonstration tool: touches nothing.",
            EffectClass::Read,
        )
        .group("group:demo")
        .parallel_safe(true)
    }

    async fn run(&self, args: EchoArgs, _ctx: &CallContext) -> Result<ToolOutput, ToolError> {
        let times = args.times.unwrap_or(1);
        let text = vec![args.text.as_str(); times as usize].join("\n");
        Ok(ToolOutput::text(text).with_structured(json!({"times": times})))
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TouchArgs {
    /// File to (pretend to) update.
    path: String,
}

struct Touch;

#[async_trait]
impl TypedTool for Touch {
    type Args = TouchArgs;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "demo_touch",
            "Reports the path it would update; the path policy checks `path`. Demonstration tool: writes nothing.",
            EffectClass::MutateReversible,
        )
        .idempotency(Idempotency::CheckBeforeAct)
        .group("group:demo")
        .path_arg("/path")
    }

    async fn run(&self, args: TouchArgs, ctx: &CallContext) -> Result<ToolOutput, ToolError> {
        let path = toolgate_policy::path::normalize(args.path.as_ref(), &ctx.cwd);
        Ok(ToolOutput::text(format!("would touch {}", path.display()))
            .with_structured(json!({"path": path})))
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ShellArgs {
    /// A bash script; the command policy checks every command in it.
    command: String,
    /// Seconds (unused; shows integer coercion).
    #[serde(default)]
    timeout: Option<u64>,
}

struct Shell;

#[async_trait]
impl TypedTool for Shell {
    type Args = ShellArgs;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "demo_shell",
            "Reports the script it would run; the command policy checks every command in it. Demonstration tool: runs nothing.",
            EffectClass::MutateIrreversible,
        )
        .idempotency(Idempotency::AtMostOnce)
        .group("group:demo")
        .command_arg("/command")
    }

    async fn run(&self, args: ShellArgs, _ctx: &CallContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(format!("would run: {}", args.command))
            .with_structured(json!({"command": args.command, "timeout": args.timeout})))
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WipeArgs {
    /// What to (pretend to) destroy.
    target: String,
}

struct Wipe;

#[async_trait]
impl TypedTool for Wipe {
    type Args = WipeArgs;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "demo_wipe",
            "Reports what it would destroy. Demonstration tool of the destructive class: destroys nothing.",
            EffectClass::Destructive,
        )
        .idempotency(Idempotency::AtMostOnce)
        .group("group:demo")
    }

    async fn run(&self, args: WipeArgs, _ctx: &CallContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(format!("would wipe {}", args.target)))
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct FloodArgs {
    /// Number of lines to produce (at most 1,000,000).
    lines: u32,
}

struct Flood;

#[async_trait]
impl TypedTool for Flood {
    type Args = FloodArgs;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "demo_flood",
            "Produces `lines` numbered lines, to see the resource policy cut long output. Demonstration tool.",
            EffectClass::Read,
        )
        .group("group:demo")
    }

    async fn run(&self, args: FloodArgs, _ctx: &CallContext) -> Result<ToolOutput, ToolError> {
        if args.lines > 1_000_000 {
            return Err(ToolError::InvalidArguments(
                "lines must be at most 1000000".to_owned(),
            ));
        }
        let text: String = (1..=args.lines).map(|i| format!("line {i}\n")).collect();
        Ok(ToolOutput::text(text))
    }
}

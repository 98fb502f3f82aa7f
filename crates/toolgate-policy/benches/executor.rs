//! One Executor call of a no-op tool: validation plus every policy layer,
//! and with an audit sink, what the audit record adds.
//! The pipeline should cost microseconds, so that it never matters next to
//! the tool it guards.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use toolgate_core::{
    CallContext, EffectClass, Idempotency, Registry, Tool, ToolError, ToolHandler, ToolOutput,
    ToolSpec, async_trait,
};
use toolgate_policy::{AuditRecord, AuditSink, Executor, Policy};

struct Noop(ToolSpec);

#[async_trait]
impl ToolHandler for Noop {
    async fn call(&self, _args: Value, _ctx: &CallContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::default())
    }
}

impl Tool for Noop {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
}

/// Takes every record and keeps none: what the audit hook itself costs.
struct Discard;

#[async_trait]
impl AuditSink for Discard {
    async fn record(&self, record: &AuditRecord) -> Result<(), String> {
        black_box(record);
        Ok(())
    }
}

fn executor(audit: bool) -> Executor {
    let mut registry = Registry::new();
    let spec = ToolSpec::new("noop", "Does nothing.", EffectClass::MutateReversible)
        .idempotency(Idempotency::CheckBeforeAct)
        .group("group:fs")
        .path_arg("/path")
        .command_arg("/command")
        .input_schema(json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "command": {"type": "string"},
                "limit": {"type": "integer"}
            }
        }));
    registry.register(Arc::new(Noop(spec))).unwrap();
    let builder = Executor::builder(registry).policy(Policy::standard());
    match audit {
        true => builder.audit(Arc::new(Discard)).build(),
        false => builder.build(),
    }
}

fn bench(c: &mut Criterion) {
    let exec = executor(false);
    let audited = executor(true);
    let ctx = CallContext::new("bench", "bench", PathBuf::from("/work/app"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let cases = [
        ("noop/no-arguments", json!({})),
        ("noop/coerced-integer", json!({"limit": "5"})),
        ("noop/path", json!({"path": "src/main.rs"})),
        (
            "noop/path+script",
            json!({"path": "src/main.rs", "command": "cargo build 2>&1 | tail -n 20"}),
        ),
    ];
    for (name, args) in cases {
        c.bench_function(name, |b| {
            b.iter(|| {
                let result = runtime.block_on(exec.call("noop", black_box(args.clone()), &ctx));
                black_box(result.unwrap())
            })
        });
    }
    let script = json!({"path": "src/main.rs", "command": "cargo build 2>&1 | tail -n 20"});
    c.bench_function("noop/path+script+audit", |b| {
        b.iter(|| {
            let result = runtime.block_on(audited.call("noop", black_box(script.clone()), &ctx));
            black_box(result.unwrap())
        })
    });
    c.bench_function("noop/explain", |b| {
        b.iter(|| black_box(exec.explain("noop", json!({"path": "a"}), &ctx)))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);

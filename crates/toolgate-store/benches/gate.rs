//! What a grant adds to a call: one Executor call of a no-op tool without
//! rules, beside the same call under a rule that asks, answered by an
//! unlimited tool-wide grant on SQLite (the gate's spend: one conditional
//! UPDATE and its spend row), and that call with its audit record appended
//! to the SQLite chain as well. Criterion's median is the p50.
//!
//! `cargo bench -p toolgate-store --bench gate`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use toolgate_core::{
    CallContext, EffectClass, Idempotency, Registry, Tool, ToolError, ToolHandler, ToolOutput,
    ToolSpec, async_trait,
};
use toolgate_policy::{
    ApprovalScope, Executor, PermissionRule, PermissionRules, Policy, RuleAction, ScopeKey,
};
use toolgate_store::{
    Answer, ApprovalSettings, Backend, Decided, NewRequest, Store, StoreApprovals, StoreAudit,
    Tenant,
};

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

fn registry() -> Registry {
    let mut registry = Registry::new();
    let spec = ToolSpec::new("noop", "Does nothing.", EffectClass::MutateReversible)
        .idempotency(Idempotency::CheckBeforeAct)
        .path_arg("/path")
        .input_schema(json!({"type": "object", "properties": {"path": {"type": "string"}}}));
    registry.register(Arc::new(Noop(spec))).unwrap();
    registry
}

/// An unlimited grant of every call of `noop` for `tenant`.
async fn grant_noop(store: &Arc<dyn Store>, tenant: &Tenant, arguments: &Value) {
    let exact = ScopeKey::exact("noop", arguments);
    let new = NewRequest {
        tool: "noop".into(),
        arguments: arguments.clone(),
        reason: "bench".into(),
        agent: "bench".into(),
        call_id: "bench".into(),
        effect_class: None,
        scope: ApprovalScope::Tool,
        exact: exact.clone(),
        covering: vec![exact, ScopeKey::tool("noop")],
        suggested_prefix: Vec::new(),
        ttl: Duration::from_secs(3600),
    };
    let id = store.file_or_reuse(tenant, &new).await.unwrap().request.id;
    let answer = Answer::Approve {
        uses: None,
        ttl: Duration::from_secs(86_400),
        scope: ApprovalScope::Tool,
        prefix: Vec::new(),
    };
    let decided = store.decide(tenant, &id, &answer, "bench").await.unwrap();
    assert!(matches!(decided, Decided::Granted(_)));
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = rt
        .block_on(toolgate_store::open(Backend::Sqlite(
            dir.path().join("gate.db"),
        )))
        .unwrap();
    let tenant = Tenant::default_local();
    let args = json!({"path": "src/main.rs"});
    rt.block_on(grant_noop(&store, &tenant, &args));
    let asking = Policy::standard().with_rules(PermissionRules::new(vec![
        PermissionRule::new("noop", RuleAction::Ask).approval_scope(ApprovalScope::Tool),
    ]));
    let gate = || {
        Arc::new(StoreApprovals::new(
            store.clone(),
            tenant.clone(),
            ApprovalSettings::default(),
        ))
    };
    let plain = Executor::builder(registry())
        .policy(Policy::standard())
        .build();
    let granted = Executor::builder(registry())
        .policy(asking.clone())
        .approvals(gate())
        .build();
    let audited = Executor::builder(registry())
        .policy(asking)
        .approvals(gate())
        .audit(Arc::new(StoreAudit::new(store.clone(), tenant.clone())))
        .build();
    let ctx = CallContext::new("bench", "bench", PathBuf::from("/work/app"));
    let mut group = c.benchmark_group("a call of a no-op tool");
    group.sample_size(50);
    for (name, exec) in [
        ("no rules", &plain),
        ("rule asks, SQLite grant spent", &granted),
        ("rule asks, SQLite grant spent, audit appended", &audited),
    ] {
        group.bench_function(name, |b| {
            b.to_async(&rt).iter(|| async {
                let result = exec.call("noop", black_box(args.clone()), &ctx).await;
                black_box(result.unwrap())
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

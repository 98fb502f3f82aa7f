//! The audit hook and the approval request, through `Executor::call`: one
//! record for every way a call can end, and the keys a person's answer may
//! cover.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toolgate_core::{
    CallContext, EffectClass, EgressNote, Idempotency, Registry, Tool, ToolError, ToolHandler,
    ToolOutput, ToolSpec, async_trait,
};
use toolgate_policy::{
    AccessPolicy, ApprovalChannel, ApprovalOutcome, ApprovalRequest, ApprovalScope, AuditRecord,
    AuditSink, Executor, PermissionRule, PermissionRules, Policy, PolicyPreset, RuleAction,
    ScopeKey, Stage, scope_digest,
};

/// Runs nothing real: counts its runs and answers as told by its arguments.
struct Counted {
    spec: ToolSpec,
    runs: Arc<AtomicUsize>,
}

#[async_trait]
impl ToolHandler for Counted {
    async fn call(&self, args: Value, ctx: &CallContext) -> Result<ToolOutput, ToolError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        match self.spec.name.as_str() {
            "broken" => Err(ToolError::Failed("disk on fire".into())),
            "shell" => {
                let script = args["command"].as_str().unwrap_or_default();
                ctx.progress
                    .report_egress(&EgressNote::new("crates.io", 443, true, "allowed"));
                let code = if script.contains("false") { 1 } else { 0 };
                let mut out = ToolOutput::text(format!("ran {script}"))
                    .with_structured(json!({"exit_code": code, "timed_out": false}));
                out.is_error = code != 0;
                Ok(out)
            }
            _ => Ok(ToolOutput::text(args.to_string())),
        }
    }
}

impl Tool for Counted {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
}

/// Keeps every record, in order.
#[derive(Default)]
struct Log(Mutex<Vec<AuditRecord>>);

#[async_trait]
impl AuditSink for Log {
    async fn record(&self, record: &AuditRecord) -> Result<(), String> {
        self.0.lock().unwrap().push(record.clone());
        Ok(())
    }
}

/// A sink that cannot write: the call's result must not change.
struct Full;

#[async_trait]
impl AuditSink for Full {
    async fn record(&self, _record: &AuditRecord) -> Result<(), String> {
        Err("disk full".into())
    }
}

/// Approves a call when one of its covering keys was granted, else answers
/// as configured; remembers every request.
struct Grants {
    granted: Mutex<BTreeSet<String>>,
    otherwise: ApprovalOutcome,
    seen: Mutex<Vec<ApprovalRequest>>,
}

impl Grants {
    fn answering(otherwise: ApprovalOutcome) -> Arc<Grants> {
        Arc::new(Grants {
            granted: Mutex::default(),
            otherwise,
            seen: Mutex::default(),
        })
    }

    fn grant(&self, key: &ScopeKey) {
        self.granted.lock().unwrap().insert(key.digest.clone());
    }

    fn last(&self) -> ApprovalRequest {
        self.seen.lock().unwrap().last().cloned().unwrap()
    }
}

#[async_trait]
impl ApprovalChannel for Grants {
    async fn request(&self, request: &ApprovalRequest) -> ApprovalOutcome {
        self.seen.lock().unwrap().push(request.clone());
        let granted = self.granted.lock().unwrap();
        match request
            .covering
            .iter()
            .find(|k| granted.contains(&k.digest))
        {
            Some(key) => ApprovalOutcome::Approved {
                grant: Some(format!("grt_{}", &key.digest[..6])),
            },
            None => self.otherwise.clone(),
        }
    }
}

/// Never answers: the caller gives up.
struct Silent;

#[async_trait]
impl ApprovalChannel for Silent {
    async fn request(&self, _request: &ApprovalRequest) -> ApprovalOutcome {
        std::future::pending().await
    }
}

struct Fixture {
    registry: Registry,
    runs: Arc<AtomicUsize>,
}

fn fixture() -> Fixture {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut registry = Registry::new();
    let specs = [
        ToolSpec::new("echo", "Echoes.", EffectClass::Read)
            .group("group:fs")
            .input_schema(json!({
                "type": "object",
                "properties": {
                    "n": {"type": "integer"},
                    "api_token": {"type": "string"},
                    "body": {"type": "string"}
                }
            })),
        ToolSpec::new("put", "Writes.", EffectClass::MutateReversible)
            .idempotency(Idempotency::CheckBeforeAct)
            .path_arg("/path")
            .input_schema(json!({
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"]
            })),
        ToolSpec::new("shell", "Runs a script.", EffectClass::MutateIrreversible)
            .idempotency(Idempotency::AtMostOnce)
            .group("group:runtime")
            .command_arg("/command")
            .input_schema(json!({
                "type": "object",
                "properties": {"command": {"type": "string"}},
                "required": ["command"]
            })),
        ToolSpec::new("broken", "Fails.", EffectClass::Read),
    ];
    for spec in specs {
        let tool = Counted {
            spec,
            runs: runs.clone(),
        };
        registry.register(Arc::new(tool)).unwrap();
    }
    Fixture { registry, runs }
}

fn ctx() -> CallContext {
    CallContext::new("call-1", "agent-7", PathBuf::from("/work/app"))
}

fn rules(list: Vec<PermissionRule>) -> Policy {
    Policy::preset(PolicyPreset::Standard, None).with_rules(PermissionRules::new(list))
}

/// The record without what changes from run to run (time, duration).
fn stable(mut record: AuditRecord) -> AuditRecord {
    assert!(
        record.time.len() == 24 && record.time.ends_with('Z'),
        "{}",
        record.time
    );
    record.time = String::new();
    record.duration_ms = 0;
    record
}

fn expected(tool: &str, args: Value) -> AuditRecord {
    AuditRecord {
        time: String::new(),
        call_id: "call-1".into(),
        agent: "agent-7".into(),
        tool: tool.into(),
        effect_class: None,
        idempotency: None,
        decision: "deny".into(),
        layer: "lookup".into(),
        approval_id: None,
        grant_id: None,
        args_digest: scope_digest(ApprovalScope::Exact, tool, &args),
        arguments: args,
        status: String::new(),
        exit_code: None,
        duration_ms: 0,
        egress: Vec::new(),
        error: None,
    }
}

/// One call through an executor with a log; its result as text and the
/// log's records.
async fn call_logged(
    f: &Fixture,
    policy: Policy,
    approvals: Option<Arc<dyn ApprovalChannel>>,
    tool: &str,
    args: Value,
) -> (Result<String, String>, Vec<AuditRecord>) {
    let log = Arc::new(Log::default());
    let mut builder = Executor::builder(f.registry.clone())
        .policy(policy)
        .audit(log.clone());
    if let Some(channel) = approvals {
        builder = builder.approvals(channel);
    }
    let result = builder
        .build()
        .call(tool, args, &ctx())
        .await
        .map(|r| r.output.content.len().to_string())
        .map_err(|e| e.to_string());
    let records = log.0.lock().unwrap().drain(..).map(stable).collect();
    (result, records)
}

#[tokio::test]
async fn every_way_a_call_ends_leaves_exactly_one_record() {
    let f = fixture();
    let standard = || rules(vec![]);
    let echo = |r: AuditRecord| AuditRecord {
        effect_class: Some("read".into()),
        ..r
    };
    let shell = |r: AuditRecord| AuditRecord {
        effect_class: Some("mutate-irreversible".into()),
        idempotency: Some("at-most-once".into()),
        ..r
    };
    let ask = || rules(vec![PermissionRule::new("shell", RuleAction::Ask)]);
    let pending = Grants::answering(ApprovalOutcome::Pending { id: "apr_1".into() });
    let refused = Grants::answering(ApprovalOutcome::Refused {
        reason: "not on a Friday".into(),
        id: Some("ref_1".into()),
    });
    let unavailable = Grants::answering(ApprovalOutcome::Unavailable {
        reason: "the approval store is unreachable: connection refused".into(),
    });
    let approved = Grants::answering(ApprovalOutcome::Pending { id: "apr_2".into() });
    approved.grant(&ScopeKey::tool("shell"));
    let ok_script = json!({"command": "cargo test"});
    let grant_id = format!("grt_{}", &ScopeKey::tool("shell").digest[..6]);
    let egress = vec![EgressNote::new("crates.io", 443, true, "allowed")];

    type Case = (
        &'static str,
        Policy,
        Option<Arc<dyn ApprovalChannel>>,
        &'static str,
        Value,
        AuditRecord,
    );
    let cases: Vec<Case> = vec![
        ("unknown tool", standard(), None, "ehco", json!({"n": 1}), AuditRecord {
            status: "unknown-tool".into(),
            error: Some("unknown tool `ehco`; did you mean `echo`?".into()),
            ..expected("ehco", json!({"n": 1}))
        }),
        ("invalid arguments", standard(), None, "echo", json!({"n": "five"}), echo(AuditRecord {
            layer: "validate".into(),
            status: "invalid".into(),
            error: Some("invalid arguments at /n: expected integer".into()),
            ..expected("echo", json!({"n": "five"}))
        })),
        ("inactive", standard().with_access(AccessPolicy { cap: Some(EffectClass::Read), ..AccessPolicy::default() }),
            None, "shell", ok_script.clone(), shell(AuditRecord {
            layer: "access".into(),
            status: "denied".into(),
            error: Some("tool `shell` is inactive: effect class mutate-irreversible exceeds the policy cap read".into()),
            ..expected("shell", ok_script.clone())
        })),
        ("paths", standard(), None, "put", json!({"path": "/etc/shadow"}), AuditRecord {
            effect_class: Some("mutate-reversible".into()),
            idempotency: Some("check-before-act".into()),
            layer: "paths".into(),
            status: "denied".into(),
            error: Some("denied by the paths policy: `/etc/shadow` matches the denied pattern `/etc/shadow`".into()),
            ..expected("put", json!({"path": "/etc/shadow"}))
        }),
        ("commands", standard(), None, "shell", json!({"command": "shutdown now"}), shell(AuditRecord {
            layer: "commands".into(),
            status: "denied".into(),
            error: Some("denied by the commands policy: `shutdown` is a denied command (in `shutdown now`)".into()),
            ..expected("shell", json!({"command": "shutdown now"}))
        })),
        ("rules", rules(vec![PermissionRule::new("class:mutate-irreversible", RuleAction::Deny)]),
            None, "shell", ok_script.clone(), shell(AuditRecord {
            layer: "rules".into(),
            status: "denied".into(),
            error: Some("denied by the rules policy: rule `class:mutate-irreversible` -> deny".into()),
            ..expected("shell", ok_script.clone())
        })),
        ("ask without a channel", ask(), None, "shell", ok_script.clone(), shell(AuditRecord {
            decision: "ask".into(),
            layer: "approval".into(),
            status: "denied".into(),
            error: Some("approval required: rule `shell` -> ask".into()),
            ..expected("shell", ok_script.clone())
        })),
        ("pending", ask(), Some(pending), "shell", ok_script.clone(), shell(AuditRecord {
            decision: "ask".into(),
            layer: "approval".into(),
            approval_id: Some("apr_1".into()),
            status: "pending".into(),
            error: Some("approval apr_1 is pending; approve it with `toolgate approvals approve apr_1` and the same call will then go through".into()),
            ..expected("shell", ok_script.clone())
        })),
        ("refused", ask(), Some(refused), "shell", ok_script.clone(), shell(AuditRecord {
            decision: "ask".into(),
            layer: "approval".into(),
            approval_id: Some("ref_1".into()),
            status: "refused".into(),
            error: Some("approval refused: not on a Friday".into()),
            ..expected("shell", ok_script.clone())
        })),
        ("store unreachable", ask(), Some(unavailable), "shell", ok_script.clone(), shell(AuditRecord {
            decision: "ask".into(),
            layer: "approval".into(),
            status: "error".into(),
            error: Some("the approval store is unreachable: connection refused".into()),
            ..expected("shell", ok_script.clone())
        })),
        ("approved", ask(), Some(approved), "shell", ok_script.clone(), shell(AuditRecord {
            decision: "ask".into(),
            layer: "approval".into(),
            grant_id: Some(grant_id),
            status: "ok".into(),
            exit_code: Some(0),
            egress: egress.clone(),
            ..expected("shell", ok_script.clone())
        })),
        ("tool error", standard(), None, "broken", json!({}), echo(AuditRecord {
            decision: "allow".into(),
            layer: "rules".into(),
            status: "error".into(),
            error: Some("tool `broken` failed: disk on fire".into()),
            ..expected("broken", json!({}))
        })),
        ("command failed", standard(), None, "shell", json!({"command": "false"}), shell(AuditRecord {
            decision: "allow".into(),
            layer: "rules".into(),
            status: "error".into(),
            exit_code: Some(1),
            egress: egress.clone(),
            ..expected("shell", json!({"command": "false"}))
        })),
        ("success", standard(), None, "shell", ok_script.clone(), shell(AuditRecord {
            decision: "allow".into(),
            layer: "rules".into(),
            status: "ok".into(),
            exit_code: Some(0),
            egress,
            ..expected("shell", ok_script.clone())
        })),
    ];
    for (what, policy, approvals, tool, args, record) in cases {
        let (_, records) = call_logged(&f, policy, approvals, tool, args).await;
        assert_eq!(records, vec![record], "{what}");
    }
}

#[tokio::test]
async fn the_record_has_the_validated_arguments_digest_and_redacts_secrets() {
    let f = fixture();
    let args = json!({"n": "5", "api_token": "ghp_secret", "body": "x".repeat(20_000)});
    let (result, records) = call_logged(&f, rules(vec![]), None, "echo", args).await;
    assert_eq!(result, Ok("1".to_owned()));
    let [record] = records.as_slice() else {
        panic!("{records:?}")
    };
    // The digest is the one approvals are stored under: of the arguments
    // as validated (`"5"` coerced to 5), secrets and all.
    let validated = json!({"n": 5, "api_token": "ghp_secret", "body": "x".repeat(20_000)});
    assert_eq!(
        record.args_digest,
        scope_digest(ApprovalScope::Exact, "echo", &validated)
    );
    assert_eq!(record.arguments["n"], json!(5));
    assert_eq!(record.arguments["api_token"], json!("[redacted]"));
    let body = record.arguments["body"].as_str().unwrap();
    assert!(body.ends_with("… [20000 bytes in all]"), "{body}");
    let text = serde_json::to_string(record).unwrap();
    assert!(!text.contains("ghp_secret"), "{text}");
    assert!(text.len() < 10_000, "{}", text.len());
}

#[tokio::test]
async fn a_sink_that_fails_does_not_change_the_result() {
    let f = fixture();
    let exec = Executor::builder(f.registry.clone())
        .policy(rules(vec![]))
        .audit(Arc::new(Full))
        .build();
    let result = exec.call("echo", json!({"n": 1}), &ctx()).await;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(f.runs.load(Ordering::SeqCst), 1);
}

/// A client that cancels while its call waits for approval: the call's
/// future is dropped, and its record still arrives.
#[tokio::test]
async fn a_call_given_up_while_it_waits_is_recorded_as_cancelled() {
    let f = fixture();
    let log = Arc::new(Log::default());
    let exec = Executor::builder(f.registry.clone())
        .policy(rules(vec![PermissionRule::new("shell", RuleAction::Ask)]))
        .approvals(Arc::new(Silent))
        .audit(log.clone())
        .build();
    let ctx = ctx();
    let call = exec.call("shell", json!({"command": "cargo test"}), &ctx);
    let given_up = tokio::time::timeout(Duration::from_millis(20), call).await;
    assert!(given_up.is_err(), "the silent channel cannot answer");
    // The record is written from a task of its own; let it run.
    for _ in 0..1000 {
        if !log.0.lock().unwrap().is_empty() {
            break;
        }
        tokio::task::yield_now().await;
    }
    let records: Vec<(String, String, String)> = log
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|r| (r.status.clone(), r.decision.clone(), r.tool.clone()))
        .collect();
    assert_eq!(
        records,
        vec![("cancelled".into(), "ask".into(), "shell".into())]
    );
    assert_eq!(f.runs.load(Ordering::SeqCst), 0);
}

/// The keys a call carries, by script: what a grant for `cargo test`
/// covers.
#[tokio::test]
async fn a_request_carries_its_scope_and_every_covering_key() {
    let f = fixture();
    let channel = Grants::answering(ApprovalOutcome::Pending { id: "apr_9".into() });
    let exec = Executor::builder(f.registry.clone())
        .policy(rules(vec![
            PermissionRule::new("shell", RuleAction::Ask)
                .approval_scope(ApprovalScope::CommandPrefix),
            PermissionRule::new("echo", RuleAction::Ask).approval_scope(ApprovalScope::Tool),
        ]))
        .approvals(channel.clone())
        .build();
    let words = |s: &str| -> Vec<String> { s.split(' ').map(str::to_owned).collect() };
    let args = json!({"command": "cargo test -p x"});
    let _ = exec.call("shell", args.clone(), &ctx()).await;
    let request = channel.last();
    let exact = ScopeKey::exact("shell", &args);
    assert_eq!(
        (
            request.scope,
            &request.exact,
            request.suggested_prefix.clone()
        ),
        (ApprovalScope::CommandPrefix, &exact, words("cargo test"))
    );
    assert_eq!(
        request.covering,
        vec![
            exact,
            ScopeKey::tool("shell"),
            ScopeKey::command_prefix("shell", words("cargo")),
            ScopeKey::command_prefix("shell", words("cargo test")),
            ScopeKey::command_prefix("shell", words("cargo test -p")),
            ScopeKey::command_prefix("shell", words("cargo test -p x")),
        ]
    );
    assert_eq!(
        (
            request.effect_class,
            request.group.as_deref(),
            request.caller.as_str()
        ),
        (
            EffectClass::MutateIrreversible,
            Some("group:runtime"),
            "agent-7"
        )
    );
    // A script no prefix can stand for: the exact and tool keys only, and
    // a plain approve grants the exact call.
    let args = json!({"command": "cargo test; rm -rf /"});
    let _ = exec.call("shell", args.clone(), &ctx()).await;
    let request = channel.last();
    assert_eq!(
        (request.scope, request.covering, request.suggested_prefix),
        (
            ApprovalScope::Exact,
            vec![ScopeKey::exact("shell", &args), ScopeKey::tool("shell")],
            Vec::<String>::new()
        )
    );
    // `explain` says what approving grants.
    let explained = exec.explain("shell", json!({"command": "cargo test"}), &ctx());
    let rules = explained.stages.iter().find(|s| s.stage == Stage::Rules);
    assert_eq!(
        rules.map(|s| s.detail.as_str()),
        Some("ask: rule `shell` -> ask (approving grants the command-prefix scope)")
    );
    // A tool without scripts: the rule's scope, no prefixes.
    let _ = exec.call("echo", json!({"n": 1}), &ctx()).await;
    let request = channel.last();
    assert_eq!(
        (request.scope, request.covering.len()),
        (ApprovalScope::Tool, 2)
    );
}

/// Attack: an agent granted `cargo test` by prefix tries to run something
/// else under that grant. Every disguise is refused (left pending) and
/// nothing runs.
#[tokio::test]
async fn a_grant_for_cargo_test_covers_cargo_test_and_nothing_else() {
    let f = fixture();
    let channel = Grants::answering(ApprovalOutcome::Pending { id: "apr_3".into() });
    let words = |s: &str| -> Vec<String> { s.split(' ').map(str::to_owned).collect() };
    channel.grant(&ScopeKey::command_prefix("shell", words("cargo test")));
    let exec = Executor::builder(f.registry.clone())
        .policy(rules(vec![
            PermissionRule::new("shell", RuleAction::Ask)
                .approval_scope(ApprovalScope::CommandPrefix),
        ]))
        .approvals(channel.clone())
        .build();
    let run = |script: &'static str| {
        let exec = &exec;
        async move {
            exec.call("shell", json!({ "command": script }), &ctx())
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
    };
    for covered in [
        "cargo test",
        "cargo test -p x",
        "cargo  'test' --release",
        "cargo test 2>&1 >/dev/null",
        "cargo test -p a && cargo test -p b",
    ] {
        assert_eq!(run(covered).await, Ok(()), "{covered}");
    }
    assert_eq!(f.runs.load(Ordering::SeqCst), 5);
    let pending = Err("approval apr_3 is pending; approve it with `toolgate approvals approve apr_3` and the same call will then go through".to_owned());
    let attacks = [
        "cargo testx",
        "cargo test; rm -rf /",
        "cargo test && rm -rf ~",
        "cargo test | sh",
        "cargo test $(rm -rf ~)",
        "cargo 'test; rm -rf ~'",
        "'cargo test'",
        "./cargo test",
        "LD_PRELOAD=/tmp/x.so cargo test",
        "cargo() { rm -rf ~; }; cargo test",
        "cargo test > Cargo.toml",
        "$C test",
        "eval cargo test",
        "sudo cargo test",
        "cargo test 'unterminated",
    ];
    let mut covered = Vec::new();
    for attack in attacks {
        if run(attack).await != pending {
            covered.push(attack);
        }
    }
    assert_eq!(covered, Vec::<&str>::new(), "covered by the grant");
    assert_eq!(f.runs.load(Ordering::SeqCst), 5, "no attack ran");
}

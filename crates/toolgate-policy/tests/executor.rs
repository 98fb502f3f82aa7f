//! The call pipeline end to end: stage order, events, approvals, bounding.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use pretty_assertions::assert_eq;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use toolgate_core::{
    CallContext, Decision, EffectClass, Idempotency, InputMode, Registry, Tool, ToolError,
    ToolEvent, ToolEventKind, ToolHandler, ToolOutput, ToolPreset, ToolSpec, Typed, TypedTool,
    async_trait,
};
use toolgate_policy::{
    AccessPolicy, ApprovalChannel, ApprovalOutcome, ApprovalRequest, Executor, PermissionRule,
    PermissionRules, Policy, PolicyPreset, ResourcePolicy, RuleAction, Stage, StageOutcome,
};

/// Records what it was called with, answers with its arguments.
struct Probe {
    spec: ToolSpec,
    calls: Arc<Mutex<Vec<Value>>>,
    reply: fn(&Value) -> Result<ToolOutput, ToolError>,
}

#[async_trait]
impl ToolHandler for Probe {
    async fn call(&self, args: Value, _ctx: &CallContext) -> Result<ToolOutput, ToolError> {
        self.calls.lock().unwrap().push(args.clone());
        (self.reply)(&args)
    }
}

impl Tool for Probe {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ShellArgs {
    command: String,
    #[serde(default)]
    timeout: Option<u64>,
}

struct Shell(Arc<AtomicUsize>);

#[async_trait]
impl TypedTool for Shell {
    type Args = ShellArgs;
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("shell", "Runs a script.", EffectClass::MutateIrreversible)
            .idempotency(Idempotency::AtMostOnce)
            .group("group:runtime")
            .command_arg("/command")
    }
    async fn run(&self, args: ShellArgs, _ctx: &CallContext) -> Result<ToolOutput, ToolError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(ToolOutput::text(format!(
            "ran {} (timeout {:?})",
            args.command, args.timeout
        )))
    }
}

struct Fixture {
    calls: Arc<Mutex<Vec<Value>>>,
    shell_runs: Arc<AtomicUsize>,
    events: Arc<Mutex<Vec<ToolEvent>>>,
    registry: Registry,
}

fn echo(args: &Value) -> Result<ToolOutput, ToolError> {
    Ok(ToolOutput::text(args.to_string()).with_structured(args.clone()))
}

fn fixture() -> Fixture {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let shell_runs = Arc::new(AtomicUsize::new(0));
    let mut registry = Registry::new();
    let probe = |spec: ToolSpec, reply| -> Arc<dyn Tool> {
        Arc::new(Probe {
            spec,
            calls: calls.clone(),
            reply,
        })
    };
    let tools = [
        probe(
            ToolSpec::new("echo", "Echoes.", EffectClass::Read)
                .group("group:fs")
                .input_schema(json!({
                    "type": "object",
                    "properties": {"n": {"type": "integer"}, "note": {"type": "string"}}
                })),
            echo,
        ),
        probe(
            ToolSpec::new("put", "Writes.", EffectClass::MutateReversible)
                .idempotency(Idempotency::CheckBeforeAct)
                .group("group:fs")
                .path_arg("/path")
                .path_arg("/also")
                .command_arg("/hook")
                .input_schema(json!({
                    "type": "object",
                    "properties": {
                        "path": {"type": "string"},
                        "also": {"type": "array", "items": {"type": "string"}},
                        "hook": {"type": "string"}
                    },
                    "required": ["path"]
                })),
            echo,
        ),
        probe(
            ToolSpec::new("wipe", "Wipes.", EffectClass::Destructive)
                .idempotency(Idempotency::AtMostOnce),
            echo,
        ),
        probe(
            ToolSpec::new("big", "Says a lot.", EffectClass::Read),
            |_| {
                Ok(ToolOutput::text(
                    (1..=5000)
                        .map(|i| format!("line {i}\n"))
                        .collect::<String>(),
                ))
            },
        ),
        probe(ToolSpec::new("broken", "Fails.", EffectClass::Read), |_| {
            Err(ToolError::Failed("disk on fire".into()))
        }),
    ];
    for tool in tools {
        registry.register(tool).unwrap();
    }
    registry
        .register(Arc::new(Typed::new(Shell(shell_runs.clone()))))
        .unwrap();
    registry
        .register_deferred(probe(ToolSpec::new("lazy", "", EffectClass::Read), echo))
        .unwrap();
    Fixture {
        calls,
        shell_runs,
        events: Arc::new(Mutex::new(Vec::new())),
        registry,
    }
}

impl Fixture {
    fn executor(&self, policy: Policy) -> Executor {
        let events = self.events.clone();
        Executor::builder(self.registry.clone())
            .policy(policy)
            .subscribe(Arc::new(move |e: &ToolEvent| {
                events.lock().unwrap().push(e.clone())
            }))
            .build()
    }

    fn phases(&self) -> Vec<String> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .map(|e| match &e.kind {
                ToolEventKind::Start => format!("start {}", e.tool),
                ToolEventKind::End { is_error } => format!("end {} error={is_error}", e.tool),
                ToolEventKind::Error { message } => format!("error {}: {message}", e.tool),
                _ => "other".into(),
            })
            .collect()
    }

    fn runs(&self) -> usize {
        self.calls.lock().unwrap().len() + self.shell_runs.load(Ordering::SeqCst)
    }
}

fn ctx() -> CallContext {
    CallContext::new("call-1", "tester", PathBuf::from("/work/app"))
}

fn policy_with_rules(rules: Vec<PermissionRule>) -> Policy {
    Policy::preset(PolicyPreset::Standard, None).with_rules(PermissionRules::new(rules))
}

#[tokio::test]
async fn each_stage_refuses_in_pipeline_order_and_nothing_runs() {
    let f = fixture();
    // Every stage from `validate` on is made to fail for `put`; the error
    // reported must always be the earliest failing stage.
    let deny_put = PermissionRule::new("put", RuleAction::Deny);
    let inactive = AccessPolicy {
        deny: vec!["put".into()],
        ..AccessPolicy::default()
    };
    let all_bad = json!({"path": "/etc/shadow", "hook": "shutdown -h now", "also": 7});
    let cases: Vec<(Policy, Value, Stage, &str)> = vec![
        (
            policy_with_rules(vec![deny_put.clone()]).with_access(inactive.clone()),
            all_bad.clone(),
            Stage::Validate,
            "invalid arguments at /also: expected array",
        ),
        (
            policy_with_rules(vec![deny_put.clone()]).with_access(inactive),
            json!({"path": "/etc/shadow", "hook": "shutdown"}),
            Stage::Access,
            "tool `put` is inactive: denied by the access policy entry `put`",
        ),
        (
            policy_with_rules(vec![deny_put.clone()]),
            json!({"path": "/etc/shadow", "hook": "shutdown"}),
            Stage::Paths,
            "denied by the paths policy: `/etc/shadow` matches the denied pattern `/etc/shadow`",
        ),
        (
            policy_with_rules(vec![deny_put.clone()]),
            json!({"path": "ok.txt", "also": ["a", "/proc/1/mem"]}),
            Stage::Paths,
            "denied by the paths policy: `/proc/1/mem` matches the denied pattern `/proc/**`",
        ),
        (
            policy_with_rules(vec![deny_put.clone()]),
            json!({"path": "ok.txt", "hook": "ls | shutdown"}),
            Stage::Commands,
            "denied by the commands policy",
        ),
        (
            policy_with_rules(vec![deny_put]),
            json!({"path": "ok.txt", "hook": "ls"}),
            Stage::Rules,
            "denied by the rules policy: rule `put` -> deny",
        ),
    ];
    for (policy, args, stage, message) in cases {
        let exec = f.executor(policy);
        let err = exec.call("put", args.clone(), &ctx()).await.unwrap_err();
        assert_eq!(err.stage(), stage, "{args}: {err}");
        assert!(err.to_string().starts_with(message), "{args}: `{err}`");
    }
    let exec = f.executor(Policy::default());
    let err = exec.call("pot", json!({}), &ctx()).await.unwrap_err();
    assert_eq!(err.to_string(), "unknown tool `pot`; did you mean `put`?");
    let err = exec.call("lazy", json!({}), &ctx()).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown tool `lazy`: it is deferred; activate it with mcp_find_tools first"
    );
    assert_eq!(f.runs(), 0, "a refused call ran");
    assert!(
        f.phases().iter().all(|p| p.starts_with("error ")),
        "{:?}",
        f.phases()
    );
}

#[tokio::test]
async fn explain_reports_every_layer_in_order() {
    let f = fixture();
    let exec = f.executor(policy_with_rules(vec![PermissionRule::new(
        "put",
        RuleAction::Ask,
    )]));
    let args = json!({"path": "../../etc/shadow", "hook": "cd src && make | tee log"});
    let explanation = exec.explain("put", args, &ctx());
    let stages: Vec<(Stage, StageOutcome)> = explanation
        .stages
        .iter()
        .map(|s| (s.stage, s.outcome))
        .collect();
    assert_eq!(
        stages,
        vec![
            (Stage::Lookup, StageOutcome::Pass),
            (Stage::Validate, StageOutcome::Pass),
            (Stage::Access, StageOutcome::Pass),
            (Stage::Paths, StageOutcome::Fail),
            (Stage::Commands, StageOutcome::Pass),
            (Stage::Rules, StageOutcome::Ask),
        ]
    );
    assert_eq!(
        explanation.decision,
        Decision::Deny {
            reason:
                "denied by the paths policy: `/etc/shadow` matches the denied pattern `/etc/shadow`"
                    .into()
        }
    );
    assert_eq!(f.runs(), 0, "explain ran the tool");

    let fine = exec.explain("echo", json!({"n": "3"}), &ctx());
    assert_eq!(fine.decision, Decision::Allow);
    assert_eq!(
        fine.stages[1].detail,
        "arguments fit the schema after coercion"
    );
    assert_eq!(fine.stages[3].outcome, StageOutcome::Skip);
}

#[tokio::test]
async fn events_carry_class_idempotency_and_decision_to_every_subscriber() {
    let f = fixture();
    let second = Arc::new(Mutex::new(Vec::<ToolEvent>::new()));
    let sink = second.clone();
    let events = f.events.clone();
    let exec = Executor::builder(f.registry.clone())
        .subscribe(Arc::new(move |e: &ToolEvent| {
            events.lock().unwrap().push(e.clone())
        }))
        .subscribe(Arc::new(move |e: &ToolEvent| {
            sink.lock().unwrap().push(e.clone())
        }))
        .build();

    let result = exec
        .call(
            "shell",
            json!({"command": "ls -la", "timeout": "30"}),
            &ctx(),
        )
        .await
        .unwrap();
    assert_eq!(result.output.joined_text(), "ran ls -la (timeout Some(30))");
    assert_eq!(result.decision, Decision::Allow);
    exec.call("broken", json!({}), &ctx()).await.unwrap_err();
    exec.call("wipe", json!({}), &ctx()).await.unwrap_err();

    assert_eq!(
        f.phases(),
        vec![
            "start shell",
            "end shell error=false",
            "start broken",
            "error broken: tool `broken` failed: disk on fire",
            "error wipe: tool `wipe` is inactive: effect class destructive exceeds the policy cap mutate-irreversible",
        ]
    );
    let events = f.events.lock().unwrap().clone();
    assert_eq!(events, *second.lock().unwrap());
    let start = &events[0];
    assert_eq!(start.effect_class, Some(EffectClass::MutateIrreversible));
    assert_eq!(start.idempotency, Some(Idempotency::AtMostOnce));
    assert_eq!(start.call_id, "call-1");
    assert_eq!(start.caller, "tester");
    assert_eq!(start.decision, Some(Decision::Allow));
    assert!(events[1].duration >= start.duration);
    assert!(matches!(events[4].decision, Some(Decision::Deny { .. })));
}

struct Approver {
    answer: ApprovalOutcome,
    seen: Mutex<Vec<ApprovalRequest>>,
}

#[async_trait]
impl ApprovalChannel for Approver {
    async fn request(&self, request: &ApprovalRequest) -> ApprovalOutcome {
        self.seen.lock().unwrap().push(request.clone());
        self.answer.clone()
    }
}

#[tokio::test]
async fn ask_needs_an_approval_channel() {
    let f = fixture();
    let ask = || {
        policy_with_rules(vec![
            PermissionRule::new("*", RuleAction::Ask).reason("everything is reviewed"),
        ])
    };
    let err = f
        .executor(ask())
        .call("echo", json!({}), &ctx())
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "approval required: everything is reviewed");
    assert_eq!(f.runs(), 0);

    for (answer, expected) in [
        (ApprovalOutcome::Refused { reason: "not today".into(), id: None }, Err("approval refused: not today".to_owned())),
        (ApprovalOutcome::Pending { id: "apr-7".into() }, Err("approval apr-7 is pending; approve it with `toolgate approvals approve apr-7` and the same call will then go through".to_owned())),
        (ApprovalOutcome::Approved { grant: None }, Ok("{\"n\":5}".to_owned())),
    ] {
        let approver = Arc::new(Approver { answer, seen: Mutex::new(Vec::new()) });
        let exec = Executor::builder(f.registry.clone())
            .policy(ask())
            .approvals(approver.clone())
            .build();
        let got = exec
            .call("echo", json!({"n": "5"}), &ctx())
            .await
            .map(|r| r.output.joined_text())
            .map_err(|e| e.to_string());
        assert_eq!(got, expected);
        let seen = approver.seen.lock().unwrap();
        assert_eq!(seen.len(), 1);
        // The approver sees the arguments as the tool would get them.
        assert_eq!(seen[0].arguments, json!({"n": 5}));
        assert_eq!(seen[0].reason, "everything is reviewed");
    }
    assert_eq!(f.runs(), 1, "only the approved call ran");
}

#[tokio::test]
async fn strict_mode_refuses_coercion_and_presets_filter_tools() {
    let f = fixture();
    let strict = Executor::builder(f.registry.clone())
        .input_mode(InputMode::Strict)
        .build();
    let err = strict
        .call("echo", json!({"n": "5"}), &ctx())
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "invalid arguments at /n: expected integer");
    let ok = strict
        .call("echo", json!({"n": 5, "note": null}), &ctx())
        .await
        .unwrap();
    assert_eq!(ok.output.structured, Some(json!({"n": 5})));

    let coding = Executor::builder(f.registry.clone())
        .tool_preset(ToolPreset::Coding)
        .build();
    let err = coding.call("echo", json!({}), &ctx()).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "tool `echo` is inactive: not in the coding tool preset"
    );
}

#[tokio::test]
async fn long_output_is_bounded_and_kept_whole_in_a_file() {
    let f = fixture();
    let dir = std::env::temp_dir().join(format!("toolgate-exec-test-{}", std::process::id()));
    let policy = Policy::default().with_resources(ResourcePolicy {
        max_output_lines: 10,
        ..ResourcePolicy::default()
    });
    let exec = Executor::builder(f.registry.clone())
        .policy(policy)
        .output_dir(dir.clone())
        .build();
    let hostile = CallContext::new("../../escape/id", "tester", PathBuf::from("/work/app"));
    let result = exec.call("big", json!({}), &hostile).await.unwrap();
    assert!(result.truncated);
    let text = result.output.joined_text();
    assert!(
        text.starts_with(
            "line 1\nline 2\nline 3\nline 4\nline 5\n[... 4991 lines omitted ...]\nline 4997\n"
        ),
        "{text}"
    );
    let saved = result.full_output.unwrap();
    assert_eq!(saved, dir.join("toolgate-output-______escape_id.txt"));
    assert!(text.ends_with(&format!("[full output saved to {}]", saved.display())));
    let full = std::fs::read_to_string(&saved).unwrap();
    assert_eq!(full.lines().count(), 5000);
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn unparseable_scripts_are_refused_by_strict_policies_and_left_to_the_sandbox_otherwise() {
    let f = fixture();
    let script = json!({"command": "echo $("});
    for (preset, outcome) in [
        (PolicyPreset::Permissive, StageOutcome::Pass),
        (PolicyPreset::Standard, StageOutcome::Pass),
        (PolicyPreset::Strict, StageOutcome::Fail),
        (PolicyPreset::Readonly, StageOutcome::Fail),
    ] {
        // An exact-name allow keeps the shell tool active under every cap.
        let policy = Policy::preset(preset, None).with_access(AccessPolicy {
            allow: vec!["shell".into()],
            ..AccessPolicy::default()
        });
        let explanation = f.executor(policy).explain("shell", script.clone(), &ctx());
        let commands = &explanation.stages[4];
        assert_eq!(commands.stage, Stage::Commands);
        assert_eq!(commands.outcome, outcome, "{preset}: {}", commands.detail);
        assert!(
            commands.detail.contains("cannot be analysed"),
            "{}",
            commands.detail
        );
    }
}

#[tokio::test]
async fn path_arguments_hidden_in_other_shapes_are_refused() {
    let f = fixture();
    let mut registry = f.registry.clone();
    let mcp = ToolSpec::new("gh_read", "", EffectClass::Read)
        .passthrough_schema(json!({"type": "object"}))
        .path_arg("/path")
        .mcp("github");
    registry
        .register(Arc::new(Probe {
            spec: mcp,
            calls: f.calls.clone(),
            reply: echo,
        }))
        .unwrap();
    let exec = Executor::builder(registry).build();
    for args in [
        json!({"path": {"p": "/etc/shadow"}}),
        json!({"path": [["/etc/shadow"]]}),
        json!({"path": ["ok.txt", {"p": "/etc/shadow"}]}),
        json!({"path": 7}),
    ] {
        let err = exec
            .call("gh_read", args.clone(), &ctx())
            .await
            .unwrap_err();
        assert_eq!(err.stage(), Stage::Paths, "{args}: {err}");
        assert!(
            err.to_string()
                .contains("argument /path must be a path string or an array of them"),
            "{err}"
        );
    }
    assert!(
        exec.call("gh_read", json!({"path": ["a", "b"]}), &ctx())
            .await
            .is_ok()
    );
    assert!(exec.call("gh_read", json!({}), &ctx()).await.is_ok());
    assert_eq!(f.runs(), 2);
}

/// Reports three steps of progress, then finishes.
struct Stepper(ToolSpec);

#[async_trait]
impl ToolHandler for Stepper {
    async fn call(&self, _args: Value, ctx: &CallContext) -> Result<ToolOutput, ToolError> {
        for step in ["one", "two", "three"] {
            ctx.progress.report(step);
        }
        Ok(ToolOutput::text("done"))
    }
}

impl Tool for Stepper {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
}

#[tokio::test]
async fn progress_reaches_every_sink_and_the_callers_listener_in_order() {
    let mut registry = Registry::new();
    let spec = ToolSpec::new("stepper", "Reports progress.", EffectClass::Read);
    registry.register(Arc::new(Stepper(spec))).unwrap();
    let events = Arc::new(Mutex::new(Vec::<ToolEvent>::new()));
    let sink = events.clone();
    let executor = Executor::builder(registry)
        .subscribe(Arc::new(move |e: &ToolEvent| {
            sink.lock().unwrap().push(e.clone())
        }))
        .build();
    let heard = Arc::new(Mutex::new(Vec::<String>::new()));
    let listener = heard.clone();
    let ctx = ctx().with_progress(toolgate_core::Progress::new(move |m: &str| {
        listener.lock().unwrap().push(m.to_owned())
    }));
    executor.call("stepper", json!({}), &ctx).await.unwrap();
    let phases: Vec<String> = events
        .lock()
        .unwrap()
        .iter()
        .map(|e| match &e.kind {
            ToolEventKind::Progress { message } => format!("progress {message}"),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        phases,
        [
            "Start",
            "progress one",
            "progress two",
            "progress three",
            "End { is_error: false }"
        ]
    );
    assert_eq!(*heard.lock().unwrap(), ["one", "two", "three"]);
}

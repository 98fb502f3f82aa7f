//! Deferred tools through `Executor`: `mcp_find_tools` finds and activates
//! them (ranked, at most 8 a search, only what the access layer admits,
//! sticky), and an activated tool goes through every stage like any other.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toolgate_core::{
    CallContext, EffectClass, Idempotency, Registry, Tool, ToolError, ToolHandler, ToolOutput,
    ToolPreset, ToolSpec, async_trait,
};
use toolgate_policy::{
    Access, AccessPolicy, ApprovalChannel, ApprovalOutcome, ApprovalRequest, AuditRecord,
    AuditSink, CallError, Executor, FIND_TOOLS, FIND_TOOLS_LIMIT, PermissionRule, PermissionRules,
    Policy, RuleAction, Stage, StageOutcome,
};

/// An external tool as the gateway makes them: passthrough schema, origin
/// `mcp`, answering with its arguments.
struct External {
    spec: ToolSpec,
    calls: Arc<Mutex<Vec<Value>>>,
}

#[async_trait]
impl ToolHandler for External {
    async fn call(&self, args: Value, _ctx: &CallContext) -> Result<ToolOutput, ToolError> {
        self.calls.lock().unwrap().push(args.clone());
        Ok(ToolOutput::text(format!("{} ran", self.spec.name)))
    }
}

impl Tool for External {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
}

/// `mcp__<server>__<tool>` of `class` (mutate-irreversible, the gateway's
/// default, unless the operator said otherwise).
fn external(server: &str, tool: &str, description: &str, class: EffectClass) -> ToolSpec {
    let mut spec = ToolSpec::new(format!("mcp__{server}__{tool}"), description, class)
        .group("group:mcp")
        .passthrough_schema(json!({"type": "object", "properties": {"q": {"type": "string"}}}))
        .mcp(server);
    if class > EffectClass::Read {
        spec = spec.idempotency(Idempotency::AtMostOnce);
    }
    spec
}

struct Fixture {
    registry: Registry,
    calls: Arc<Mutex<Vec<Value>>>,
}

fn fixture(specs: Vec<ToolSpec>) -> Fixture {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let mut registry = Registry::new();
    registry
        .register(Arc::new(External {
            spec: ToolSpec::new("read", "Reads a file.", EffectClass::Read),
            calls: calls.clone(),
        }))
        .unwrap();
    for spec in specs {
        registry
            .register_deferred(Arc::new(External {
                spec,
                calls: calls.clone(),
            }))
            .unwrap();
    }
    Fixture { registry, calls }
}

/// A small inventory of two servers, all read-class except `delete_repo`.
fn github_and_weather() -> Vec<ToolSpec> {
    let read = EffectClass::Read;
    vec![
        external(
            "github",
            "create_issue",
            "Creates an issue in a repository.",
            read,
        ),
        external(
            "github",
            "list_issues",
            "Lists the issues of a repository.",
            read,
        ),
        external("github", "get_file", "Reads a file of a repository.", read),
        external(
            "github",
            "search_code",
            "Searches code across repositories.",
            read,
        ),
        external(
            "github",
            "delete_repo",
            "Deletes a repository and every issue in it.",
            EffectClass::MutateIrreversible,
        ),
        external(
            "weather",
            "forecast",
            "The weather forecast for a city.",
            read,
        ),
    ]
}

fn ctx() -> CallContext {
    CallContext::new("call-1", "tester", PathBuf::from("/work"))
}

fn read_cap() -> Policy {
    Policy::default().with_access(AccessPolicy::capped(EffectClass::Read))
}

async fn find(executor: &Executor, args: Value) -> Value {
    let result = executor.call(FIND_TOOLS, args, &ctx()).await.unwrap();
    result.output.structured.unwrap()
}

fn found(structured: &Value) -> Vec<(String, bool)> {
    structured["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_owned(),
                t["newly_activated"].as_bool().unwrap(),
            )
        })
        .collect()
}

fn visible(executor: &Executor) -> Vec<&str> {
    executor.visible_names().collect()
}

#[tokio::test]
async fn a_search_ranks_by_name_and_description_and_activates_the_best() {
    let f = fixture(github_and_weather());
    let exec = Executor::builder(f.registry.clone())
        .policy(read_cap())
        .build();
    assert_eq!(visible(&exec), vec![FIND_TOOLS, "read"]);
    let generation = exec.tool_generation();

    let result = find(&exec, json!({"query": "create issue", "limit": 2})).await;
    assert_eq!(
        found(&result),
        vec![
            ("mcp__github__create_issue".to_owned(), true),
            ("mcp__github__list_issues".to_owned(), true),
        ]
    );
    assert_eq!(result["matched"], 2);
    assert_ne!(exec.tool_generation(), generation);
    assert_eq!(
        visible(&exec),
        vec![
            FIND_TOOLS,
            "read",
            "mcp__github__create_issue",
            "mcp__github__list_issues"
        ]
    );
    assert_eq!(
        exec.activated(),
        vec!["mcp__github__create_issue", "mcp__github__list_issues"]
    );
}

#[tokio::test]
async fn a_search_activates_at_most_eight_tools() {
    let specs = (0..30)
        .map(|i| {
            external(
                "srv",
                &format!("tool_{i:02}"),
                "Fetches a record.",
                EffectClass::Read,
            )
        })
        .collect();
    let f = fixture(specs);
    let exec = Executor::builder(f.registry.clone()).build();
    let result = find(&exec, json!({"query": "fetch record"})).await;
    assert_eq!(result["matched"], 30);
    assert_eq!(found(&result).len(), FIND_TOOLS_LIMIT);
    assert_eq!(exec.activated().len(), FIND_TOOLS_LIMIT);
    // The schema caps `limit`; the tool caps it too.
    let err = exec
        .call(FIND_TOOLS, json!({"query": "fetch", "limit": 9}), &ctx())
        .await
        .unwrap_err();
    assert_eq!(err.stage(), Stage::Validate, "{err}");
    // `*` lists every tool and activates none.
    let listing = find(&exec, json!({"query": "*"})).await;
    assert_eq!(listing["matched"], 30);
    assert_eq!(found(&listing).len(), 30);
    assert!(found(&listing).iter().all(|(_, newly)| !newly));
    assert_eq!(exec.activated().len(), FIND_TOOLS_LIMIT);
}

#[tokio::test]
async fn a_tool_the_cap_refuses_is_never_listed_found_or_activated() {
    let f = fixture(github_and_weather());
    let exec = Executor::builder(f.registry.clone())
        .policy(read_cap())
        .build();
    let description = &exec
        .visible_tools()
        .find(|s| s.name == FIND_TOOLS)
        .unwrap()
        .description;
    assert!(
        description.contains("5 tools are kept out of your tool list until needed: github (4 tools), weather (1 tool)."),
        "{description}"
    );
    let searches = [
        json!({"query": "*"}),
        json!({"query": "delete repository"}),
        json!({"query": "mcp__github__delete_repo"}),
    ];
    for args in searches {
        let result = find(&exec, args.clone()).await;
        assert!(
            found(&result)
                .iter()
                .all(|(name, _)| name != "mcp__github__delete_repo"),
            "{args}: {result}"
        );
    }
    assert!(
        !exec
            .activated()
            .contains(&"mcp__github__delete_repo".to_owned())
    );
    assert!(exec.activate(["mcp__github__delete_repo"]).is_empty());
    // Calling it by name: as unknown as a tool that does not exist.
    let err = exec
        .call("mcp__github__delete_repo", json!({}), &ctx())
        .await
        .unwrap_err();
    assert_eq!(err.stage(), Stage::Lookup);
    assert!(!err.to_string().contains("deferred"), "{err}");
    // `toolgate tools` still tells the operator why.
    let status = exec
        .tools()
        .into_iter()
        .find(|s| s.spec.name == "mcp__github__delete_repo")
        .unwrap();
    assert!(status.deferred);
    assert!(matches!(status.access, Access::Inactive { .. }));
    assert!(f.calls.lock().unwrap().is_empty());
}

#[tokio::test]
async fn the_finder_is_there_exactly_when_a_deferred_tool_is_reachable() {
    let irreversible = vec![external(
        "github",
        "delete_repo",
        "Deletes a repository.",
        EffectClass::MutateIrreversible,
    )];
    let cases: Vec<(&str, Registry, Executor)> = {
        let none = fixture(Vec::new()).registry;
        let capped = fixture(irreversible.clone()).registry;
        let fine = fixture(github_and_weather()).registry;
        vec![
            (
                "no deferred tools",
                none.clone(),
                Executor::builder(none).build(),
            ),
            (
                "every deferred tool above the cap",
                capped.clone(),
                Executor::builder(capped).policy(read_cap()).build(),
            ),
            (
                "--tools names no external tool",
                fine.clone(),
                Executor::builder(fine.clone())
                    .only_tools(vec!["read".into()])
                    .build(),
            ),
            (
                "denied by name",
                fine.clone(),
                Executor::builder(fine.clone())
                    .policy(Policy::default().with_access(AccessPolicy {
                        deny: vec![FIND_TOOLS.into()],
                        ..AccessPolicy::default()
                    }))
                    .try_build()
                    .unwrap(),
            ),
        ]
    };
    for (case, _, exec) in &cases {
        assert_eq!(visible(exec), vec!["read"], "{case}");
        let err = exec
            .call(FIND_TOOLS, json!({"query": "*"}), &ctx())
            .await
            .unwrap_err();
        assert!(
            matches!(err.stage(), Stage::Lookup | Stage::Access),
            "{case}: {err}"
        );
    }
    // A preset selects built-ins; the finder follows the external tools,
    // which presets do not select.
    let f = fixture(github_and_weather());
    let exec = Executor::builder(f.registry.clone())
        .tool_preset(ToolPreset::Readonly)
        .build();
    assert_eq!(visible(&exec), vec![FIND_TOOLS, "read"]);
    // So does a list that names the external tools by group.
    let exec = Executor::builder(f.registry.clone())
        .only_tools(vec!["read".into(), "group:mcp".into()])
        .build();
    assert_eq!(visible(&exec), vec![FIND_TOOLS, "read"]);
}

#[tokio::test]
async fn activation_is_sticky_and_belongs_to_one_executor() {
    let f = fixture(github_and_weather());
    let session = Executor::builder(f.registry.clone()).build();
    let other = Executor::builder(f.registry.clone()).build();
    find(&session, json!({"query": "forecast"})).await;
    let result = find(&session, json!({"query": "no such words here"})).await;
    assert_eq!(found(&result), vec![]);
    let result = find(&session, json!({"query": "weather forecast"})).await;
    assert_eq!(
        found(&result),
        vec![("mcp__weather__forecast".to_owned(), false)]
    );
    assert_eq!(session.activated(), vec!["mcp__weather__forecast"]);
    let status = session
        .tools()
        .into_iter()
        .find(|s| s.spec.name == "mcp__weather__forecast")
        .unwrap();
    assert!(!status.deferred);
    // Another session's executor over the same registry saw none of it.
    assert!(other.activated().is_empty());
    assert_eq!(other.tool_generation(), 0);
    let err = other
        .call("mcp__weather__forecast", json!({}), &ctx())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown tool `mcp__weather__forecast`: it is deferred; activate it with mcp_find_tools first"
    );
    // What one session found can be carried to its next executor.
    assert_eq!(
        other.activate(session.activated().iter().map(String::as_str)),
        vec!["mcp__weather__forecast"]
    );
    assert_eq!(other.tool_generation(), 1);
}

/// Keeps every record.
#[derive(Default)]
struct Log(Mutex<Vec<AuditRecord>>);

#[async_trait]
impl AuditSink for Log {
    async fn record(&self, record: &AuditRecord) -> Result<(), String> {
        self.0.lock().unwrap().push(record.clone());
        Ok(())
    }
}

/// Approves every request, counting them.
#[derive(Default)]
struct Yes(Mutex<Vec<String>>);

#[async_trait]
impl ApprovalChannel for Yes {
    async fn request(&self, request: &ApprovalRequest) -> ApprovalOutcome {
        self.0.lock().unwrap().push(request.tool.clone());
        ApprovalOutcome::Approved { grant: None }
    }
}

#[tokio::test]
async fn an_activated_tool_goes_through_every_stage_like_an_active_one() {
    let f = fixture(github_and_weather());
    let log = Arc::new(Log::default());
    let yes = Arc::new(Yes::default());
    let rules = PermissionRules::new(vec![
        PermissionRule::new("group:mcp", RuleAction::Ask),
        PermissionRule::new("mcp__github__search_code", RuleAction::Deny),
    ]);
    let exec = Executor::builder(f.registry.clone())
        .policy(Policy::default().with_rules(rules))
        .audit(log.clone())
        .approvals(yes.clone())
        .build();
    // An `ask` rule on group:mcp does not make finding tools ask.
    find(&exec, json!({"query": "issue code"})).await;
    assert!(yes.0.lock().unwrap().is_empty());

    let explained = exec.explain("mcp__github__create_issue", json!({"q": "x"}), &ctx());
    let stages: Vec<(Stage, StageOutcome, &str)> = explained
        .stages
        .iter()
        .map(|s| (s.stage, s.outcome, s.detail.as_str()))
        .collect();
    assert_eq!(
        stages[..2],
        [
            (
                Stage::Lookup,
                StageOutcome::Pass,
                "deferred tool activated by mcp_find_tools, read"
            ),
            (
                Stage::Validate,
                StageOutcome::Pass,
                "external schema: passed through unchanged"
            ),
        ]
    );
    assert_eq!(stages.last().unwrap().1, StageOutcome::Ask);

    let result = exec
        .call("mcp__github__create_issue", json!({"q": "x"}), &ctx())
        .await
        .unwrap();
    assert_eq!(result.output.joined_text(), "mcp__github__create_issue ran");
    assert_eq!(*yes.0.lock().unwrap(), vec!["mcp__github__create_issue"]);
    let err = exec
        .call("mcp__github__search_code", json!({}), &ctx())
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            CallError::Denied {
                stage: Stage::Rules,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(*f.calls.lock().unwrap(), vec![json!({"q": "x"})]);

    let records: Vec<(String, Option<String>, String)> = log
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|r| (r.tool.clone(), r.effect_class.clone(), r.status.clone()))
        .collect();
    assert_eq!(
        records,
        vec![
            (
                FIND_TOOLS.to_owned(),
                Some("read".to_owned()),
                "ok".to_owned()
            ),
            (
                "mcp__github__create_issue".to_owned(),
                Some("read".to_owned()),
                "ok".to_owned()
            ),
            (
                "mcp__github__search_code".to_owned(),
                Some("read".to_owned()),
                "denied".to_owned()
            ),
        ]
    );
}

#[tokio::test]
async fn a_watcher_wakes_on_activation() {
    let f = fixture(github_and_weather());
    let exec = Arc::new(Executor::builder(f.registry.clone()).build());
    let seen = exec.tool_generation();
    let watcher = {
        let exec = exec.clone();
        tokio::spawn(async move { exec.tools_changed(seen).await })
    };
    find(&exec, json!({"query": "forecast"})).await;
    let changed = tokio::time::timeout(std::time::Duration::from_secs(5), watcher)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(changed, exec.tool_generation());
    assert_ne!(changed, seen);
}

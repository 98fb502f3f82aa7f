//! Every tool and group a configuration names must exist. A typo in a list
//! of tools is not a harmless no-op: `--tools raed,grep` quietly exposes
//! less than meant, `[access] deny = ["bsah"]` quietly denies nothing, and
//! a rule for `bash(git push*)` never matches. They are errors, with the
//! name that was probably meant.
//!
//! Tools of external MCP servers (`mcp__*`, `group:mcp`) are only known once
//! the servers answer, so names of theirs are taken on trust. Deferred tools
//! and tools that are registered but inactive are known names.

use std::collections::BTreeSet;

use toolgate_core::suggest::did_you_mean;
use toolgate_core::{EffectClass, Registry, ToolSpec};

use crate::access::{CATALOG_GROUP, MCP_GROUP};
use crate::approval::ApprovalScope;
use crate::policy::Policy;
use crate::rules::{CLASS_PREFIX, PermissionRule, RULE_PATTERN_SYNTAX};

/// A name in the configuration that no tool answers to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExecutorBuildError {
    /// `origin` says where the name came from: `--tools`, `[access] allow`, ...
    #[error("unknown tool `{name}` in {origin}{hint}")]
    UnknownTool {
        name: String,
        origin: String,
        hint: String,
    },
    #[error("unknown group `{name}` in {origin}{hint}")]
    UnknownGroup {
        name: String,
        origin: String,
        hint: String,
    },
    #[error("invalid rule pattern `{pattern}` in [[rules]]: {problem}; {RULE_PATTERN_SYNTAX}")]
    InvalidRulePattern { pattern: String, problem: String },
    #[error("unknown effect class `{name}` in {origin}{hint}")]
    UnknownEffectClass {
        name: String,
        origin: String,
        hint: String,
    },
    /// A grant by command prefix only means something for a tool that runs
    /// shell scripts.
    #[error(
        "the [[rules]] entry for `{pattern}` has approval_scope = \"command-prefix\", but it matches no tool that runs a shell script ({scripted}); use \"exact\" or \"tool\", or a pattern that names a shell tool"
    )]
    PrefixScopeWithoutScripts { pattern: String, scripted: String },
}

/// The tool names and groups a registry answers to.
pub(super) struct KnownNames {
    names: BTreeSet<String>,
    groups: BTreeSet<String>,
    /// Names given on trust (`also`): tools this program has whose specs
    /// are not here.
    unregistered: BTreeSet<String>,
    /// The registered tools that take a shell script (`command_args`).
    scripted: Vec<ToolSpec>,
}

impl KnownNames {
    /// The registry's tools, active and deferred, plus `also` (tools this
    /// program has that are switched off, such as `elevated`).
    pub(super) fn of(registry: &Registry, also: &[String]) -> KnownNames {
        let specs = registry
            .active()
            .chain(registry.deferred())
            .map(|tool| tool.spec());
        let mut names: BTreeSet<String> = also.iter().cloned().collect();
        let mut groups = BTreeSet::from([MCP_GROUP.to_string(), CATALOG_GROUP.to_string()]);
        let mut scripted = Vec::new();
        let mut registered = BTreeSet::new();
        for spec in specs {
            names.insert(spec.name.clone());
            registered.insert(spec.name.clone());
            groups.extend(spec.group.clone());
            if !spec.command_args.is_empty() {
                scripted.push(spec.clone());
            }
        }
        let unregistered = names.difference(&registered).cloned().collect();
        KnownNames {
            names,
            groups,
            unregistered,
            scripted,
        }
    }

    /// Checks one entry of a list of tools and groups.
    pub(super) fn check(&self, origin: &str, entry: &str) -> Result<(), ExecutorBuildError> {
        // External and catalogue tools come and go with their servers and
        // installs: a list may name them ahead of time.
        if entry.starts_with("mcp__")
            || entry.starts_with("catalog__")
            || self.names.contains(entry)
            || self.groups.contains(entry)
        {
            return Ok(());
        }
        if entry.starts_with("group:") {
            let mut hint = did_you_mean(entry, self.groups.iter().map(String::as_str));
            let all: Vec<&str> = self.groups.iter().map(String::as_str).collect();
            hint.push_str(&format!(" (the groups are: {})", all.join(", ")));
            return Err(ExecutorBuildError::UnknownGroup {
                name: entry.to_string(),
                origin: origin.to_string(),
                hint,
            });
        }
        let candidates = self.names.iter().chain(&self.groups).map(String::as_str);
        let mut hint = did_you_mean(entry, candidates);
        if hint.is_empty() {
            hint = "; `toolgate tools` lists the tools".to_string();
        }
        Err(ExecutorBuildError::UnknownTool {
            name: entry.to_string(),
            origin: origin.to_string(),
            hint,
        })
    }

    /// The access lists and the rules of `policy`.
    pub(super) fn check_policy(&self, policy: &Policy) -> Result<(), ExecutorBuildError> {
        for entry in &policy.access.allow {
            self.check("[access] allow", entry)?;
        }
        for entry in &policy.access.deny {
            self.check("[access] deny", entry)?;
        }
        for rule in policy.rules.rules() {
            if let Some(problem) = rule.syntax_problem() {
                return Err(ExecutorBuildError::InvalidRulePattern {
                    pattern: rule.pattern.clone(),
                    problem,
                });
            }
            if let Some(Err(class)) = rule.effect_class() {
                let candidates: Vec<String> = EffectClass::NAMES
                    .iter()
                    .map(|n| format!("{CLASS_PREFIX}{n}"))
                    .collect();
                let mut hint = did_you_mean(
                    &format!("{CLASS_PREFIX}{class}"),
                    candidates.iter().map(String::as_str),
                );
                hint.push_str(&format!(" (the classes are: {})", candidates.join(", ")));
                return Err(ExecutorBuildError::UnknownEffectClass {
                    name: rule.pattern.clone(),
                    origin: "the pattern of a [[rules]] entry".to_string(),
                    hint,
                });
            }
            // A glob may name tools of MCP servers that are not here yet.
            if !rule.pattern.contains('*') && rule.effect_class().is_none() {
                self.check("the pattern of a [[rules]] entry", &rule.pattern)?;
            }
            if rule.approval_scope == Some(ApprovalScope::CommandPrefix) {
                self.check_prefix_scope(rule)?;
            }
        }
        Ok(())
    }

    /// A rule whose approvals go by command prefix must match a tool that
    /// runs shell scripts (or a tool this program has that is not
    /// registered now, such as `elevated` switched off).
    fn check_prefix_scope(&self, rule: &PermissionRule) -> Result<(), ExecutorBuildError> {
        let scripted = self.scripted.iter().any(|spec| rule.applies_to(spec));
        let on_trust = self.unregistered.iter().any(|name| rule.matches(name));
        if scripted || on_trust {
            return Ok(());
        }
        let names: Vec<&str> = self.scripted.iter().map(|s| s.name.as_str()).collect();
        let scripted = match names.is_empty() {
            true => "there is none here".to_string(),
            false => format!("those are: {}", names.join(", ")),
        };
        Err(ExecutorBuildError::PrefixScopeWithoutScripts {
            pattern: rule.pattern.clone(),
            scripted,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use pretty_assertions::assert_eq;
    use serde_json::Value;
    use toolgate_core::{
        CallContext, EffectClass, Idempotency, Registry, Tool, ToolError, ToolHandler, ToolOutput,
        ToolSpec, async_trait,
    };

    use crate::rules::{PermissionRule, PermissionRules, RuleAction};
    use crate::{AccessPolicy, ApprovalScope, Executor, Policy};

    struct Named(ToolSpec);

    #[async_trait]
    impl ToolHandler for Named {
        async fn call(&self, _args: Value, _ctx: &CallContext) -> Result<ToolOutput, ToolError> {
            Ok(ToolOutput::text(""))
        }
    }

    impl Tool for Named {
        fn spec(&self) -> &ToolSpec {
            &self.0
        }
    }

    /// read and grep (active), write (inactive under a read cap), and
    /// web_fetch (deferred).
    fn registry() -> Result<Registry, String> {
        let tool = |name: &str, group: &str, class| {
            let spec = ToolSpec::new(name, "t", class).group(group);
            let spec = match class {
                EffectClass::Read => spec,
                _ => spec.idempotency(Idempotency::CheckBeforeAct),
            };
            Arc::new(Named(spec))
        };
        let mut registry = Registry::new();
        let e = |e: toolgate_core::ToolRegistrationError| e.to_string();
        registry
            .register(tool("read", "group:fs", EffectClass::Read))
            .map_err(e)?;
        registry
            .register(tool("grep", "group:search", EffectClass::Read))
            .map_err(e)?;
        registry
            .register(tool("write", "group:fs", EffectClass::MutateReversible))
            .map_err(e)?;
        registry
            .register_deferred(tool("web_fetch", "group:web", EffectClass::Read))
            .map_err(e)?;
        Ok(registry)
    }

    fn error(
        build: impl FnOnce(Registry) -> Result<Executor, super::ExecutorBuildError>,
    ) -> String {
        match registry().map(build) {
            Ok(Ok(_)) => String::new(),
            Ok(Err(e)) => e.to_string(),
            Err(e) => e,
        }
    }

    fn with_policy(
        policy: Policy,
    ) -> impl FnOnce(Registry) -> Result<Executor, super::ExecutorBuildError> {
        move |r| Executor::builder(r).policy(policy).try_build()
    }

    fn access(allow: &[&str], deny: &[&str]) -> Policy {
        Policy::standard().with_access(AccessPolicy {
            allow: allow.iter().map(|s| s.to_string()).collect(),
            deny: deny.iter().map(|s| s.to_string()).collect(),
            cap: Some(EffectClass::Read),
        })
    }

    fn rules(patterns: &[&str]) -> Policy {
        let mut rules = PermissionRules::standard();
        for p in patterns {
            rules.push(PermissionRule::new(*p, RuleAction::Deny));
        }
        Policy::standard().with_rules(rules)
    }

    #[test]
    fn typos_in_tool_lists_access_and_rules_are_errors_that_say_where() {
        let tools = |list: &[&str]| {
            let list: Vec<String> = list.iter().map(|s| s.to_string()).collect();
            move |r| {
                Executor::builder(r)
                    .only_tools_from("--tools", list)
                    .try_build()
            }
        };
        let cases: Vec<(String, &str)> = vec![
            (
                error(tools(&["raed", "grep"])),
                "unknown tool `raed` in --tools; did you mean `read`?",
            ),
            (
                error(tools(&["group:fss"])),
                "unknown group `group:fss` in --tools; did you mean `group:fs`? (the groups are: group:catalog, group:fs, group:mcp, group:search, group:web)",
            ),
            (
                error(tools(&["kubectl"])),
                "unknown tool `kubectl` in --tools; `toolgate tools` lists the tools",
            ),
            (
                error(with_policy(access(&["grpe"], &[]))),
                "unknown tool `grpe` in [access] allow; did you mean `grep`?",
            ),
            (
                error(with_policy(access(&[], &["group:serch"]))),
                "unknown group `group:serch` in [access] deny; did you mean `group:search`? (the groups are: group:catalog, group:fs, group:mcp, group:search, group:web)",
            ),
            (
                error(with_policy(rules(&["wirte"]))),
                "unknown tool `wirte` in the pattern of a [[rules]] entry; did you mean `write`?",
            ),
            (
                error(with_policy(rules(&["bash(git push*)"]))),
                "invalid rule pattern `bash(git push*)` in [[rules]]: it has parentheses, but a rule matches tools, not arguments (write `bash`; to refuse some commands, use [commands] deny_patterns such as `^git push`); a rule's pattern is a tool name (`bash`), a glob of tool names with `*` (`process_*`, `mcp__github__*`), a group (`group:fs`) or an effect class (`class:mutate-irreversible`)",
            ),
        ];
        for (got, expected) in cases {
            assert_eq!(got, expected);
        }
    }

    #[test]
    fn unknown_effect_classes_in_rules_are_errors_with_the_class_meant() {
        assert_eq!(
            error(with_policy(rules(&["class:destrutive"]))),
            "unknown effect class `class:destrutive` in the pattern of a [[rules]] entry; did you mean `class:destructive`? (the classes are: class:read, class:mutate-reversible, class:mutate-irreversible, class:destructive)"
        );
        assert_eq!(
            error(with_policy(rules(&["class:network"]))),
            "unknown effect class `class:network` in the pattern of a [[rules]] entry (the classes are: class:read, class:mutate-reversible, class:mutate-irreversible, class:destructive)"
        );
        assert_eq!(
            error(with_policy(rules(&["class:read", "class:destructive"]))),
            ""
        );
    }

    #[test]
    fn command_prefix_scope_needs_a_rule_that_matches_a_shell_tool() {
        let with_rule = |rule: PermissionRule| {
            let mut rules = PermissionRules::standard();
            rules.push(rule);
            move |mut r: Registry| {
                let shell = ToolSpec::new("shell", "s", EffectClass::MutateIrreversible)
                    .idempotency(Idempotency::AtMostOnce)
                    .group("group:runtime")
                    .command_arg("/command");
                r.register(Arc::new(Named(shell))).map_err(|e| {
                    super::ExecutorBuildError::InvalidRulePattern {
                        pattern: e.to_string(),
                        problem: String::new(),
                    }
                })?;
                Executor::builder(r)
                    .policy(Policy::standard().with_rules(rules))
                    .try_build()
            }
        };
        let prefix = |p: &str| {
            PermissionRule::new(p, RuleAction::Ask).approval_scope(ApprovalScope::CommandPrefix)
        };
        for good in [
            "shell",
            "group:runtime",
            "class:mutate-irreversible",
            "sh*",
            "elevated",
        ] {
            assert_eq!(error(with_rule(prefix(good))), "", "{good}");
        }
        assert_eq!(
            error(with_rule(prefix("write"))),
            "the [[rules]] entry for `write` has approval_scope = \"command-prefix\", but it matches no tool that runs a shell script (those are: shell); use \"exact\" or \"tool\", or a pattern that names a shell tool"
        );
        assert_eq!(
            error(with_rule(prefix("group:fs"))),
            "the [[rules]] entry for `group:fs` has approval_scope = \"command-prefix\", but it matches no tool that runs a shell script (those are: shell); use \"exact\" or \"tool\", or a pattern that names a shell tool"
        );
        assert_eq!(
            error(with_policy(
                Policy::standard().with_rules(PermissionRules::new(vec![prefix("read")]))
            )),
            "the [[rules]] entry for `read` has approval_scope = \"command-prefix\", but it matches no tool that runs a shell script (there is none here); use \"exact\" or \"tool\", or a pattern that names a shell tool"
        );
        // Other scopes go anywhere.
        let tool =
            PermissionRule::new("write", RuleAction::Ask).approval_scope(ApprovalScope::Tool);
        assert_eq!(error(with_rule(tool)), "");
    }

    #[test]
    fn deferred_inactive_switched_off_and_mcp_names_are_known() {
        let tools: Vec<String> = [
            "read",
            "write",
            "web_fetch",
            "group:web",
            "group:mcp",
            "mcp__github__create_issue",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let ok = error(move |r| {
            Executor::builder(r)
                .only_tools_from("--tools", tools)
                .try_build()
        });
        assert_eq!(ok, "");
        // `elevated` is named by the standard rules though not registered.
        assert_eq!(error(with_policy(access(&["elevated"], &["write"]))), "");
        assert_eq!(
            error(with_policy(rules(&[
                "mcp__*",
                "process_*",
                "group:fs",
                "mcp__x__y"
            ]))),
            ""
        );
        let known = |r| {
            Executor::builder(r)
                .also_known(["memory_read".to_string()])
                .policy(access(&["memory_read"], &[]))
                .try_build()
        };
        assert_eq!(error(known), "");
        // build() itself does not check.
        assert!(registry().is_ok_and(|r| {
            Executor::builder(r).only_tools(vec!["raed".into()]).build();
            true
        }));
    }
}

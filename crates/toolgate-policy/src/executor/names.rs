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

use toolgate_core::Registry;
use toolgate_core::suggest::did_you_mean;

use crate::access::MCP_GROUP;
use crate::policy::Policy;
use crate::rules::RULE_PATTERN_SYNTAX;

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
}

/// The tool names and groups a registry answers to.
pub(super) struct KnownNames {
    names: BTreeSet<String>,
    groups: BTreeSet<String>,
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
        let mut groups = BTreeSet::from([MCP_GROUP.to_string()]);
        for spec in specs {
            names.insert(spec.name.clone());
            groups.extend(spec.group.clone());
        }
        KnownNames { names, groups }
    }

    /// Checks one entry of a list of tools and groups.
    pub(super) fn check(&self, origin: &str, entry: &str) -> Result<(), ExecutorBuildError> {
        if entry.starts_with("mcp__") || self.names.contains(entry) || self.groups.contains(entry) {
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
            // A glob may name tools of MCP servers that are not here yet.
            if !rule.pattern.contains('*') {
                self.check("the pattern of a [[rules]] entry", &rule.pattern)?;
            }
        }
        Ok(())
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
    use crate::{AccessPolicy, Executor, Policy};

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
                "unknown group `group:fss` in --tools; did you mean `group:fs`? (the groups are: group:fs, group:mcp, group:search, group:web)",
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
                "unknown group `group:serch` in [access] deny; did you mean `group:search`? (the groups are: group:fs, group:mcp, group:search, group:web)",
            ),
            (
                error(with_policy(rules(&["wirte"]))),
                "unknown tool `wirte` in the pattern of a [[rules]] entry; did you mean `write`?",
            ),
            (
                error(with_policy(rules(&["bash(git push*)"]))),
                "invalid rule pattern `bash(git push*)` in [[rules]]: it has parentheses, but a rule matches tools, not arguments (write `bash`; to refuse some commands, use [commands] deny_patterns such as `^git push`); a rule's pattern is a tool name (`bash`), a glob of tool names with `*` (`process_*`, `mcp__github__*`) or a group (`group:fs`)",
            ),
        ];
        for (got, expected) in cases {
            assert_eq!(got, expected);
        }
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

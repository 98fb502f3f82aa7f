//! PermissionRules: the last word on a call, by tool name, group or effect
//! class.
//!
//! A rule names tools, never arguments: its pattern is a tool name (`bash`),
//! a glob of tool names with `*` (`process_*`, `mcp__github__*`), a group
//! (`group:fs`) or an effect class (`class:mutate-irreversible`). Anything
//! else (`bash(git push*)`, a regex) is refused, not silently never matched.
//!
//! An ordered list of `pattern -> allow | ask | deny`. The last matching rule
//! wins, except that any matching `deny` is final: a later `allow` cannot
//! reopen what a deny closed (so appending a broad allow can never undo a
//! specific deny). No matching rule means allow; the other layers have
//! already had their say.

use serde::{Deserialize, Deserializer, Serialize};
use toolgate_core::{Decision, EffectClass, ToolSpec};

use crate::access::MCP_GROUP;
use crate::approval::ApprovalScope;

/// What a rule pattern may be, for error messages.
pub const RULE_PATTERN_SYNTAX: &str = "a rule's pattern is a tool name (`bash`), a glob of tool names with `*` (`process_*`, `mcp__github__*`), a group (`group:fs`) or an effect class (`class:mutate-irreversible`)";

/// How a pattern names an effect class: `class:destructive`.
pub const CLASS_PREFIX: &str = "class:";

/// What a rule does to a call it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RuleAction {
    /// Run it.
    Allow,
    /// Run it after approval.
    Ask,
    /// Refuse it.
    Deny,
}

/// One rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PermissionRule {
    /// Tool-name pattern: `*`, `prefix*`, `server.*`, an exact name, a
    /// group (`group:fs`) or an effect class (`class:destructive`); `*`
    /// matches any run of characters.
    #[serde(deserialize_with = "rule_pattern")]
    pub pattern: String,
    /// What to do.
    pub action: RuleAction,
    /// Shown to the approver or the caller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What a plain approve of a call this rule asks about grants (default
    /// `exact`); `command-prefix` only on rules that match shell tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_scope: Option<ApprovalScope>,
}

impl PermissionRule {
    /// A rule without a reason.
    pub fn new(pattern: impl Into<String>, action: RuleAction) -> Self {
        PermissionRule {
            pattern: pattern.into(),
            action,
            reason: None,
            approval_scope: None,
        }
    }

    /// Sets what a plain approve of a call this rule asks about grants.
    pub fn approval_scope(mut self, scope: ApprovalScope) -> Self {
        self.approval_scope = Some(scope);
        self
    }

    /// Adds the reason shown to approvers and callers.
    pub fn reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }

    /// Whether the rule applies to the tool `name` (by name alone: a group
    /// or class pattern needs the tool's spec, see
    /// [`PermissionRule::applies_to`]).
    pub fn matches(&self, name: &str) -> bool {
        !self.pattern.starts_with("group:")
            && !self.pattern.starts_with(CLASS_PREFIX)
            && wildcard_match(&self.pattern, name)
    }

    /// Whether the rule applies to the tool `spec`: by name, by group or by
    /// effect class.
    pub fn applies_to(&self, spec: &ToolSpec) -> bool {
        if let Some(class) = self.pattern.strip_prefix(CLASS_PREFIX) {
            // An unknown class matches nothing; `try_build` refuses it.
            return class == spec.effect_class.as_str();
        }
        match self.pattern.starts_with("group:") {
            true => {
                spec.group.as_deref() == Some(self.pattern.as_str())
                    || (spec.is_mcp() && self.pattern == MCP_GROUP)
            }
            false => wildcard_match(&self.pattern, &spec.name),
        }
    }

    /// The effect class a `class:` pattern names, if the pattern is one;
    /// `Some(Err(name))` for a class that does not exist.
    pub fn effect_class(&self) -> Option<Result<EffectClass, &str>> {
        let name = self.pattern.strip_prefix(CLASS_PREFIX)?;
        Some(name.parse().map_err(|_| name))
    }

    /// Why the pattern is not a tool name, a glob of tool names or a group,
    /// if it is not.
    pub fn syntax_problem(&self) -> Option<String> {
        pattern_problem(&self.pattern)
    }

    fn explain(&self) -> String {
        match &self.reason {
            Some(reason) => reason.clone(),
            None => format!("rule `{}` -> {:?}", self.pattern, self.action).to_lowercase(),
        }
    }
}

/// The ordered rule list.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PermissionRules {
    rules: Vec<PermissionRule>,
}

impl PermissionRules {
    /// Rules in order.
    pub fn new(rules: Vec<PermissionRule>) -> Self {
        PermissionRules { rules }
    }

    /// The default rules: ask before every call of `elevated`, which runs on
    /// the host outside the sandbox.
    pub fn standard() -> Self {
        PermissionRules::new(vec![
            PermissionRule::new("elevated", RuleAction::Ask)
                .reason("`elevated` runs a command on the host, outside the sandbox"),
        ])
    }

    /// The rules in order.
    pub fn rules(&self) -> &[PermissionRule] {
        &self.rules
    }

    /// Appends a rule (it wins over earlier ones, unless they deny).
    pub fn push(&mut self, rule: PermissionRule) {
        self.rules.push(rule);
    }

    /// The decision for the tool `name`, by name alone (group patterns
    /// need the spec: [`PermissionRules::decide_for`]).
    pub fn decide(&self, name: &str) -> Decision {
        self.decide_by(|rule| rule.matches(name))
    }

    /// The decision for the tool `spec`, by its name and its group.
    pub fn decide_for(&self, spec: &ToolSpec) -> Decision {
        self.decide_by(|rule| rule.applies_to(spec))
    }

    /// The decision for the tool `spec`, and for `ask` the winning rule's
    /// approval scope (default [`ApprovalScope::Exact`]).
    pub fn decide_with_scope(&self, spec: &ToolSpec) -> (Decision, ApprovalScope) {
        self.decide_by_with_scope(|rule| rule.applies_to(spec))
    }

    fn decide_by(&self, applies: impl Fn(&PermissionRule) -> bool) -> Decision {
        self.decide_by_with_scope(applies).0
    }

    fn decide_by_with_scope(
        &self,
        applies: impl Fn(&PermissionRule) -> bool,
    ) -> (Decision, ApprovalScope) {
        let mut last = None;
        for rule in self.rules.iter().filter(|r| applies(r)) {
            if rule.action == RuleAction::Deny {
                let reason = rule.explain();
                return (Decision::Deny { reason }, ApprovalScope::Exact);
            }
            last = Some(rule);
        }
        match last {
            Some(rule) if rule.action == RuleAction::Ask => (
                Decision::Ask {
                    reason: rule.explain(),
                },
                rule.approval_scope.unwrap_or_default(),
            ),
            _ => (Decision::Allow, ApprovalScope::Exact),
        }
    }
}

/// Why `pattern` is not a tool name, a glob of them or a group.
fn pattern_problem(pattern: &str) -> Option<String> {
    if pattern.is_empty() {
        return Some("it is empty".to_string());
    }
    if let Some(group) = pattern.strip_prefix("group:")
        && (group.is_empty() || group.contains('*'))
    {
        return Some("a group is named exactly, such as `group:fs`".to_string());
    }
    if let Some(class) = pattern.strip_prefix(CLASS_PREFIX)
        && (class.is_empty() || class.contains('*'))
    {
        return Some(format!(
            "an effect class is named exactly, such as `class:destructive` (the classes are: {})",
            EffectClass::NAMES.join(", ")
        ));
    }
    // Tool names are letters, digits, `_`, `-`, `.` and `:` (MCP servers'
    // tools: `mcp__server__tool`, `server.tool`).
    let odd = pattern
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "_-.:*".contains(*c)))?;
    Some(match odd {
        '(' | ')' => "it has parentheses, but a rule matches tools, not arguments (write `bash`; to refuse some commands, use [commands] deny_patterns such as `^git push`)".to_string(),
        c if c.is_whitespace() => "it has a space, but a tool name has none".to_string(),
        c => format!("`{c}` cannot appear in a tool name, and `*` is the only wildcard"),
    })
}

fn rule_pattern<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    let pattern = String::deserialize(deserializer)?;
    match pattern_problem(&pattern) {
        Some(problem) => Err(serde::de::Error::custom(format!(
            "invalid rule pattern `{pattern}`: {problem}; {RULE_PATTERN_SYNTAX}"
        ))),
        None => Ok(pattern),
    }
}

/// Glob with `*` as the only wildcard, over the whole name.
fn wildcard_match(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let Some(first) = parts.next() else {
        return false;
    };
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        // No `*` at all: the pattern is an exact name.
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use RuleAction::{Allow, Ask, Deny};
    use pretty_assertions::assert_eq;

    #[test]
    fn patterns() {
        let table = [
            ("*", "anything", true),
            ("*", "", true),
            ("read", "read", true),
            ("read", "read_more", false),
            ("process_*", "process_start", true),
            ("process_*", "process_", true),
            ("process_*", "proc", false),
            ("github.*", "github.create_issue", true),
            ("github.*", "githubx.create_issue", false),
            ("*_read", "memory_read", true),
            ("*_read", "memory_readx", false),
            ("a*b*c", "aXbYc", true),
            ("a*b*c", "acb", false),
            ("ab*ba", "aba", false),
        ];
        for (pattern, name, expected) in table {
            assert_eq!(
                PermissionRule::new(pattern, Allow).matches(name),
                expected,
                "{pattern} ~ {name}"
            );
        }
    }

    #[test]
    fn last_match_wins_and_deny_is_terminal() {
        let rules = |list: &[(&str, RuleAction)]| {
            PermissionRules::new(
                list.iter()
                    .map(|(p, a)| PermissionRule::new(*p, *a))
                    .collect(),
            )
        };
        type Case<'a> = (Vec<(&'a str, RuleAction)>, &'a str, &'a str);
        let table: Vec<Case> = vec![
            (vec![], "bash", "allow"),
            (vec![("*", Ask)], "bash", "ask"),
            (vec![("*", Ask), ("bash", Allow)], "bash", "allow"),
            (vec![("bash", Allow), ("*", Ask)], "bash", "ask"),
            (vec![("bash", Deny), ("*", Allow)], "bash", "deny"),
            (
                vec![("*", Allow), ("bash", Deny), ("bash", Allow)],
                "bash",
                "deny",
            ),
            (vec![("*", Deny), ("read", Allow)], "read", "deny"),
            (
                vec![("github.*", Ask), ("github.get_*", Allow)],
                "github.get_issue",
                "allow",
            ),
            (
                vec![("github.*", Ask), ("github.get_*", Allow)],
                "github.delete_repo",
                "ask",
            ),
            (vec![("other", Deny)], "bash", "allow"),
        ];
        for (list, tool, expected) in table {
            assert_eq!(
                rules(&list).decide(tool).as_str(),
                expected,
                "{list:?} on {tool}"
            );
        }
    }

    #[test]
    fn reasons_are_carried_into_the_decision() {
        assert_eq!(
            PermissionRules::standard().decide("elevated"),
            Decision::Ask {
                reason: "`elevated` runs a command on the host, outside the sandbox".into()
            }
        );
        let rules = PermissionRules::new(vec![PermissionRule::new("net_*", Deny)]);
        assert_eq!(
            rules.decide("net_fetch"),
            Decision::Deny {
                reason: "rule `net_*` -> deny".into()
            }
        );
    }

    #[test]
    fn group_patterns_match_by_the_tools_group() {
        let fs = ToolSpec::new("read", "r", toolgate_core::EffectClass::Read).group("group:fs");
        let mcp = ToolSpec::new("mcp__gh__issue", "i", toolgate_core::EffectClass::Read).mcp("gh");
        let rule = |p: &str| PermissionRule::new(p, Deny);
        assert!(rule("group:fs").applies_to(&fs));
        assert!(
            !rule("group:fs").matches("group:fs"),
            "a name is not a group"
        );
        assert!(!rule("group:search").applies_to(&fs));
        assert!(rule("group:mcp").applies_to(&mcp));
        assert!(rule("re*").applies_to(&fs));
        let rules = PermissionRules::new(vec![rule("group:fs")]);
        assert_eq!(rules.decide_for(&fs).as_str(), "deny");
    }

    /// `bash(git push*)` was accepted and never matched anything.
    #[test]
    fn patterns_that_are_not_tool_names_are_refused_when_read() {
        #[derive(Debug, Deserialize)]
        struct File {
            #[allow(dead_code)]
            rules: Vec<PermissionRule>,
        }
        let read = |pattern: &str| {
            let json = format!(r#"{{"rules": [{{"pattern": {pattern:?}, "action": "deny"}}]}}"#);
            serde_json::from_str::<File>(&json).map_err(|e| e.to_string())
        };
        for good in [
            "bash",
            "process_*",
            "mcp__github__*",
            "group:fs",
            "github.get_issue",
            "*",
        ] {
            assert!(read(good).is_ok(), "{good}");
        }
        let cases = [
            (
                "bash(git push*)",
                "it has parentheses, but a rule matches tools, not arguments",
            ),
            ("git push", "it has a space"),
            ("read|write", "`|` cannot appear in a tool name"),
            ("group:f*", "a group is named exactly"),
            ("", "it is empty"),
        ];
        for (bad, why) in cases {
            let error = read(bad).err().unwrap_or_default();
            assert!(
                error.starts_with(&format!("invalid rule pattern `{bad}`: {why}")),
                "{error}"
            );
            assert!(
                error.contains("a rule's pattern is a tool name (`bash`)"),
                "{error}"
            );
        }
    }

    #[test]
    fn class_patterns_match_by_the_tools_effect_class() {
        use toolgate_core::EffectClass::{Destructive, MutateIrreversible, Read};
        let spec = |name: &str, class| ToolSpec::new(name, "t", class).group("group:runtime");
        let (bash, read, wipe) = (
            spec("bash", MutateIrreversible),
            spec("read", Read),
            spec("wipe", Destructive),
        );
        let rule = |p: &str| PermissionRule::new(p, Ask);
        assert!(rule("class:mutate-irreversible").applies_to(&bash));
        assert!(!rule("class:mutate-irreversible").applies_to(&read));
        assert!(!rule("class:mutate-irreversible").matches("class:mutate-irreversible"));
        assert!(
            !rule("class:destrutive").applies_to(&wipe),
            "a typo matches nothing"
        );
        // Last match wins, deny is terminal, across names, groups and classes.
        let rules = PermissionRules::new(vec![
            PermissionRule::new("group:runtime", Allow),
            PermissionRule::new("class:mutate-irreversible", Ask),
            PermissionRule::new("class:destructive", Deny),
            PermissionRule::new("wipe", Allow),
        ]);
        let decided: Vec<&str> = [&bash, &read, &wipe]
            .map(|s| rules.decide_for(s).as_str())
            .to_vec();
        assert_eq!(decided, ["ask", "allow", "deny"]);
    }

    #[test]
    fn the_winning_ask_rule_gives_the_approval_scope() {
        let bash = ToolSpec::new("bash", "t", toolgate_core::EffectClass::MutateIrreversible)
            .command_arg("/command");
        let scoped = |list: Vec<PermissionRule>| {
            let (decision, scope) = PermissionRules::new(list).decide_with_scope(&bash);
            (decision.as_str(), scope)
        };
        let prefix = ApprovalScope::CommandPrefix;
        assert_eq!(scoped(vec![]), ("allow", ApprovalScope::Exact));
        assert_eq!(
            scoped(vec![PermissionRule::new("bash", Ask)]),
            ("ask", ApprovalScope::Exact)
        );
        assert_eq!(
            scoped(vec![
                PermissionRule::new("bash", Ask).approval_scope(prefix)
            ]),
            ("ask", prefix)
        );
        // The last matching rule's scope, not the first's.
        assert_eq!(
            scoped(vec![
                PermissionRule::new("bash", Ask).approval_scope(prefix),
                PermissionRule::new("*", Ask).approval_scope(ApprovalScope::Tool),
            ]),
            ("ask", ApprovalScope::Tool)
        );
        assert_eq!(
            scoped(vec![
                PermissionRule::new("bash", Ask).approval_scope(prefix),
                PermissionRule::new("*", Ask),
            ]),
            ("ask", ApprovalScope::Exact)
        );
        assert_eq!(
            scoped(vec![
                PermissionRule::new("bash", Ask).approval_scope(prefix),
                PermissionRule::new("bash", Allow),
            ]),
            ("allow", ApprovalScope::Exact)
        );
    }

    #[test]
    fn rules_read_their_approval_scope() {
        let read =
            |json: &str| serde_json::from_str::<PermissionRule>(json).map_err(|e| e.to_string());
        assert_eq!(
            read(r#"{"pattern": "bash", "action": "ask", "approval_scope": "command-prefix"}"#),
            Ok(PermissionRule::new("bash", Ask).approval_scope(ApprovalScope::CommandPrefix))
        );
        assert_eq!(
            read(r#"{"pattern": "class:destructive", "action": "ask"}"#),
            Ok(PermissionRule::new("class:destructive", Ask))
        );
        let error = read(r#"{"pattern": "bash", "action": "ask", "approval_scope": "prefix"}"#)
            .err()
            .unwrap_or_default();
        assert!(
            error.contains(
                "unknown variant `prefix`, expected one of `exact`, `tool`, `command-prefix`"
            ),
            "{error}"
        );
        let error = read(r#"{"pattern": "class:*", "action": "ask"}"#)
            .err()
            .unwrap_or_default();
        assert!(
            error.contains("an effect class is named exactly, such as `class:destructive` (the classes are: read, mutate-reversible, mutate-irreversible, destructive)"),
            "{error}"
        );
    }
}

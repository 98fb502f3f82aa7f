//! PermissionRules: the last word on a call, by tool name.
//!
//! An ordered list of `pattern -> allow | ask | deny`. The last matching rule
//! wins, except that any matching `deny` is final: a later `allow` cannot
//! reopen what a deny closed (so appending a broad allow can never undo a
//! specific deny). No matching rule means allow; the other layers have
//! already had their say.

use serde::{Deserialize, Serialize};
use toolgate_core::Decision;

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
    /// Tool-name pattern: `*`, `prefix*`, `server.*`, or an exact name; `*`
    /// matches any run of characters.
    pub pattern: String,
    /// What to do.
    pub action: RuleAction,
    /// Shown to the approver or the caller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl PermissionRule {
    /// A rule without a reason.
    pub fn new(pattern: impl Into<String>, action: RuleAction) -> Self {
        PermissionRule {
            pattern: pattern.into(),
            action,
            reason: None,
        }
    }

    /// Adds the reason shown to approvers and callers.
    pub fn reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }

    /// Whether the rule applies to the tool `name`.
    pub fn matches(&self, name: &str) -> bool {
        wildcard_match(&self.pattern, name)
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

    /// The decision for the tool `name`.
    pub fn decide(&self, name: &str) -> Decision {
        let mut last = None;
        for rule in self.rules.iter().filter(|r| r.matches(name)) {
            if rule.action == RuleAction::Deny {
                return Decision::Deny {
                    reason: rule.explain(),
                };
            }
            last = Some(rule);
        }
        match last {
            Some(rule) if rule.action == RuleAction::Ask => Decision::Ask {
                reason: rule.explain(),
            },
            _ => Decision::Allow,
        }
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
}

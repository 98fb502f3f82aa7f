//! The install gate and the execute gate: two policies per tenant, and
//! what a person's yes to one of them covers.
//!
//! Approving an install never implies execution: the two gates file
//! requests under different tool names, so no grant of one covers the
//! other.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolgate_policy::{ApprovalScope, ScopeKey};

use crate::manifest::{Manifest, RunScope};

/// What a gate does with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GatePolicy {
    /// Never.
    Deny,
    /// Always ask a person.
    Approval,
    /// Let safe requests through (a low-risk tool that runs without
    /// network), ask about the rest. An install always needs the network,
    /// so this never lets an install through.
    AllowSafe,
    /// Let everything through.
    AllowAll,
}

toolgate_core::wire_enum!(GatePolicy, "gate policy", {
    Deny => "deny",
    Approval => "approval",
    AllowSafe => "allow_safe",
    AllowAll => "allow_all",
});

/// Which gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Fetching (or verifying) a tool's files.
    Install,
    /// Running one of its bins.
    Execute,
}

toolgate_core::wire_enum!(Action, "gate", {
    Install => "install",
    Execute => "execute",
});

/// The two policies of a tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GatePolicies {
    /// The install gate (default `approval`).
    pub install: GatePolicy,
    /// The execute gate (default `allow_safe`).
    pub execute: GatePolicy,
}

impl Default for GatePolicies {
    fn default() -> Self {
        GatePolicies {
            install: GatePolicy::Approval,
            execute: GatePolicy::AllowSafe,
        }
    }
}

impl GatePolicies {
    /// The policy of `action`'s gate.
    pub fn of(&self, action: Action) -> GatePolicy {
        match action {
            Action::Install => self.install,
            Action::Execute => self.execute,
        }
    }
}

/// A gate's verdict before any person is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Go ahead.
    Allow,
    /// Ask a person, for this reason.
    Ask(String),
    /// No, for this reason.
    Deny(String),
}

/// What `policy` says about `action` on `manifest`.
pub fn decide(policy: GatePolicy, action: Action, manifest: &Manifest) -> Verdict {
    let id = &manifest.id;
    match (policy, action) {
        (GatePolicy::Deny, _) => Verdict::Deny(format!(
            "the catalogue's {action} gate is `deny` for this tenant: no tool is {}",
            match action {
                Action::Install => "installed",
                Action::Execute => "run",
            }
        )),
        (GatePolicy::AllowAll, _) => Verdict::Allow,
        (GatePolicy::AllowSafe, Action::Execute) if manifest.is_safe() => Verdict::Allow,
        (GatePolicy::AllowSafe, Action::Execute) => Verdict::Ask(format!(
            "`{id}` is not safe to run unasked ({}; allow_safe covers low-risk tools without network)",
            if manifest.network.is_none() {
                format!("risk {}", manifest.risk)
            } else {
                "it uses the network".to_owned()
            }
        )),
        (GatePolicy::AllowSafe, Action::Install) => Verdict::Ask(format!(
            "installing `{id}` needs the network, which allow_safe never covers"
        )),
        (GatePolicy::Approval, _) => Verdict::Ask(format!(
            "the catalogue's {action} gate asks a person about every {action}"
        )),
    }
}

/// The tool name under which the install gate files its requests.
pub const INSTALL_TOOL: &str = "catalog_install";

/// The agent tool of a catalogue tool, and the name its execute requests
/// are filed under.
pub fn run_tool_name(id: &str) -> String {
    format!("catalog__{id}")
}

/// The arguments a person is shown for an install, digested into the
/// exact scope: the tool, its source and the exact pin.
pub fn install_arguments(manifest: &Manifest) -> Value {
    json!({
        "id": manifest.id,
        "source_kind": manifest.source_kind.as_str(),
        "package": manifest.package.as_ref().map(|p| &p.name),
        "version": manifest.package.as_ref().map(|p| &p.version),
        "pin": manifest.pin_digest(),
    })
}

/// The arguments of a run, digested into the exact scope: the tool's pin,
/// the bin and the argv. The working directory and stdin are not part of
/// the question (they are shown with it).
pub fn run_arguments(manifest: &Manifest, bin: &str, argv: &[String]) -> Value {
    json!({
        "id": manifest.id,
        "version": manifest.package.as_ref().map(|p| &p.version),
        "pin": manifest.pin_digest(),
        "bin": bin,
        "argv": argv,
    })
}

/// The scope of a run under the `command` approval scope: the pinned tool
/// and the bin, any arguments. Filed as the request's tool scope, so that
/// `toolgate approvals approve` grants it.
pub fn command_key(manifest: &Manifest, bin: &str) -> ScopeKey {
    let payload = json!({ "pin": manifest.pin_digest(), "bin": bin });
    ScopeKey {
        kind: ApprovalScope::Tool,
        digest: toolgate_policy::scope_digest(
            ApprovalScope::Tool,
            &run_tool_name(&manifest.id),
            &payload,
        ),
        prefix: Vec::new(),
    }
}

/// The keys whose grants or refusals cover a run, and the scope a plain
/// approve grants.
pub fn run_keys(
    manifest: &Manifest,
    bin: &str,
    argv: &[String],
) -> (ScopeKey, Vec<ScopeKey>, ApprovalScope) {
    let tool = run_tool_name(&manifest.id);
    let exact = ScopeKey::exact(&tool, &run_arguments(manifest, bin, argv));
    let command = command_key(manifest, bin);
    let scope = match manifest.approval_scope {
        RunScope::Exact => ApprovalScope::Exact,
        RunScope::Command => ApprovalScope::Tool,
    };
    (exact.clone(), vec![exact, command], scope)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::parse_document;

    fn manifest(risk: &str, network: Value) -> Manifest {
        parse_document(
            "t",
            json!({"id": "t", "description": "d", "source_kind": "npm-package",
                "package_name": "p", "package_version": "1.0.0", "risk": risk,
                "network": network, "bins": [{"name": "t"}]}),
        )
        .unwrap()
        .remove(0)
    }

    #[test]
    fn the_gates_table() {
        let safe = manifest("low", json!("none"));
        let risky = manifest("high", json!("none"));
        let online = manifest("low", json!({"allow": ["api.example.com"]}));
        use GatePolicy::*;
        let allow = |p, a, m: &Manifest| decide(p, a, m) == Verdict::Allow;
        let ask = |p, a, m: &Manifest| matches!(decide(p, a, m), Verdict::Ask(_));
        let deny = |p, a, m: &Manifest| matches!(decide(p, a, m), Verdict::Deny(_));
        for m in [&safe, &risky, &online] {
            for a in [Action::Install, Action::Execute] {
                assert!(deny(Deny, a, m));
                assert!(ask(Approval, a, m));
                assert!(allow(AllowAll, a, m));
            }
            // An install always needs the network.
            assert!(ask(AllowSafe, Action::Install, m));
        }
        assert!(allow(AllowSafe, Action::Execute, &safe));
        assert!(ask(AllowSafe, Action::Execute, &risky));
        assert!(ask(AllowSafe, Action::Execute, &online));
    }

    #[test]
    fn the_exact_scope_is_the_argv_and_the_command_scope_is_the_bin() {
        let m = manifest("low", json!("none"));
        let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let (a, _, _) = run_keys(&m, "t", &argv(&["-x", "1"]));
        let (b, _, _) = run_keys(&m, "t", &argv(&["-x", "2"]));
        let (c, _, _) = run_keys(&m, "t", &argv(&["-x", "1"]));
        assert_ne!(a.digest, b.digest);
        assert_eq!(a.digest, c.digest);
        assert_eq!(command_key(&m, "t"), command_key(&m, "t"));
        assert_ne!(command_key(&m, "t").digest, command_key(&m, "u").digest);
        // An install's question is never a run's.
        let install = ScopeKey::exact(INSTALL_TOOL, &install_arguments(&m));
        assert_ne!(install.digest, a.digest);
    }

    #[test]
    fn the_scope_digest_does_not_depend_on_the_locale() {
        // Keys are sorted by bytes, never by a collation: the same
        // question under any LC_ALL gives the same digest.
        let m = manifest("low", json!("none"));
        let argv = vec!["é".to_owned(), "B".to_owned(), "a".to_owned()];
        let (expected, _, _) = run_keys(&m, "t", &argv);
        let text = toolgate_policy::canonical_json(&run_arguments(&m, "t", &argv));
        let keys: Vec<&str> = ["\"argv\"", "\"bin\"", "\"id\"", "\"pin\"", "\"version\""].to_vec();
        let mut at = 0;
        for key in keys {
            let found = text[at..].find(key).map(|i| i + at);
            assert!(found.is_some(), "{key} out of byte order in {text}");
            at = found.unwrap_or(at);
        }
        let (again, _, _) = run_keys(&m, "t", &argv);
        assert_eq!(expected, again);
    }
}

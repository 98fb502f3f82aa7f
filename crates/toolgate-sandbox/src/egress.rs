//! Policy for controlled network egress: which hosts a sandboxed command
//! may reach through toolgate's proxy.
//!
//! [`EgressRules`] holds an allowlist and a denylist parsed from entries
//! such as `example.com`, `*.example.com` (subdomains only), `host:443`,
//! `10.0.0.5` or `[::1]:443`; malformed or overly broad entries are refused
//! when the configuration loads. [`EgressRules::decide`] judges a connection
//! by name before DNS and [`EgressRules::check_resolved`] judges the
//! addresses after it, so a public name cannot lead to internal services.
//! Rules come from toolgate.toml ([`NetworkPolicy`]) or from an Anthropic
//! sandbox-runtime settings file ([`SandboxRuntimeSettings`]).
//!
//! This module decides; it opens no sockets. The proxy enforces.

mod address;
mod policy;
mod rule;
mod rules;
mod settings;

pub use policy::{EgressMode, NetworkModeName, NetworkPolicy, NetworkPolicyError};
pub use rule::{EgressRule, EgressRuleError, RuleList, RuleProblem};
pub use rules::{EgressDecision, EgressRules};
pub use settings::{SandboxRuntimeSettings, SettingsError};

/// The proxy asks the rules: by name before DNS, by address after it.
impl crate::proxy::EgressPolicy for EgressRules {
    fn decide(&self, host: &str, port: u16) -> crate::proxy::Verdict {
        let decision = EgressRules::decide(self, host, port);
        if decision.allowed {
            crate::proxy::Verdict::allow(decision.reason)
        } else {
            crate::proxy::Verdict::deny(decision.reason)
        }
    }

    fn check_resolved(&self, host: &str, addrs: &[std::net::IpAddr]) -> Result<(), String> {
        EgressRules::check_resolved(self, host, addrs)
    }
}

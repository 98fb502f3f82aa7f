//! The allow and deny lists and the decision for one connection.

use std::net::IpAddr;

use serde::Serialize;

use super::address::internal_range;
use super::rule::{EgressRule, EgressRuleError, RuleList, Target};

/// Where a sandboxed command may connect: the denylist wins, then the
/// allowlist; anything else is refused. The default (empty) allows nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EgressRules {
    allowed: Vec<EgressRule>,
    denied: Vec<EgressRule>,
}

/// The verdict on one connection, for the proxy and the audit record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct EgressDecision {
    /// Whether the connection may proceed.
    pub allowed: bool,
    /// Why, in words a user can act on.
    pub reason: String,
    /// The rule that decided, normalised; `None` when no rule matched.
    pub rule: Option<String>,
}

impl EgressDecision {
    fn refuse(reason: String, rule: Option<&EgressRule>) -> Self {
        EgressDecision {
            allowed: false,
            reason,
            rule: rule.map(ToString::to_string),
        }
    }
}

impl EgressRules {
    /// Parses both lists; the first malformed entry is the error.
    pub fn new<S: AsRef<str>>(allowed: &[S], denied: &[S]) -> Result<Self, EgressRuleError> {
        let parse = |list: RuleList, entries: &[S]| {
            entries
                .iter()
                .map(|entry| {
                    let entry = entry.as_ref();
                    EgressRule::parse(entry).map_err(|problem| EgressRuleError {
                        list,
                        entry: entry.to_owned(),
                        problem,
                    })
                })
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(EgressRules {
            allowed: parse(RuleList::Allow, allowed)?,
            denied: parse(RuleList::Deny, denied)?,
        })
    }

    /// Both lists of `self` followed by those of `other`.
    pub fn merge(mut self, other: EgressRules) -> Self {
        self.allowed.extend(other.allowed);
        self.denied.extend(other.denied);
        self
    }

    /// The allowlist, normalised.
    pub fn allowed(&self) -> &[EgressRule] {
        &self.allowed
    }

    /// The denylist, normalised.
    pub fn denied(&self) -> &[EgressRule] {
        &self.denied
    }

    /// Whether an allow rule covers `host` on some port (for a name: by its
    /// exact name or a wildcard; for an address: the address itself).
    pub fn allows_host(&self, host: &str) -> bool {
        Target::parse(host).is_ok_and(|target| self.allowed.iter().any(|r| r.matches_host(&target)))
    }

    /// Decides a connection to `host` (a name, an IPv4 address or an IPv6
    /// address with or without brackets) on `port`, before any DNS lookup.
    pub fn decide(&self, host: &str, port: u16) -> EgressDecision {
        let target = match Target::parse(host) {
            Ok(target) => target,
            Err(why) => {
                return EgressDecision::refuse(
                    format!("{host:?} is not a valid host: {why}"),
                    None,
                );
            }
        };
        if port == 0 {
            return EgressDecision::refuse("port 0 is not a valid destination".into(), None);
        }
        if let Some(rule) = self.denied.iter().find(|r| r.matches(&target, port)) {
            let reason = format!("{target}:{port} is denied by rule `{rule}`");
            return EgressDecision::refuse(reason, Some(rule));
        }
        if self.allowed.is_empty() {
            return EgressDecision::refuse(
                "no network allowed: the allowlist is empty".into(),
                None,
            );
        }
        if let Some(rule) = self.allowed.iter().find(|r| r.matches(&target, port)) {
            return EgressDecision {
                allowed: true,
                reason: format!("{target}:{port} is allowed by rule `{rule}`"),
                rule: Some(rule.to_string()),
            };
        }
        let reason = if self.allowed.iter().any(|r| r.matches_host(&target)) {
            format!("port {port} of {target} is not in the allowlist; only other ports are listed")
        } else if let Target::Ip(_) = target {
            format!(
                "{target} is not in the allowlist: raw IP addresses are allowed only when listed explicitly"
            )
        } else {
            format!("{target} is not in the allowlist")
        };
        EgressDecision::refuse(reason, None)
    }

    /// Checks what `host` resolved to, after [`decide`](Self::decide) allowed
    /// it and before connecting.
    ///
    /// Refuses internal addresses (loopback, link-local, private, CGNAT,
    /// unspecified, multicast, also inside IPv6): otherwise an allowed public
    /// name, or any name under an allowed wildcard, could be pointed at the
    /// host's own services or the cloud metadata endpoint (DNS rebinding).
    /// A host listed by its exact name, or an address listed itself, is
    /// trusted to point where it points. A denied address is always refused.
    pub fn check_resolved(&self, host: &str, addrs: &[IpAddr]) -> Result<(), String> {
        let target =
            Target::parse(host).map_err(|why| format!("{host:?} is not a valid host: {why}"))?;
        if addrs.is_empty() {
            return Err(format!("{target} resolved to no addresses"));
        }
        for addr in addrs {
            if let Some(rule) = self.denied.iter().find(|r| r.names_ip(*addr)) {
                return Err(format!(
                    "{target} resolved to {}, which is denied by rule `{rule}`",
                    addr.to_canonical()
                ));
            }
        }
        if let Target::Name(name) = &target
            && self.allowed.iter().any(|r| r.names_exactly(name))
        {
            return Ok(());
        }
        for addr in addrs {
            let Some(range) = internal_range(*addr) else {
                continue;
            };
            if !self.allowed.iter().any(|r| r.names_ip(*addr)) {
                let addr = addr.to_canonical();
                return Err(format!(
                    "{target} resolved to {addr}, a {range} address; refused so that no name can \
                     lead to internal services (DNS rebinding); list {target} by its exact name \
                     or list {addr} to allow it"
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use proptest::prelude::*;

    fn rules(allowed: &[&str], denied: &[&str]) -> EgressRules {
        EgressRules::new(allowed, denied).unwrap()
    }

    fn decision(allowed: bool, reason: &str, rule: Option<&str>) -> EgressDecision {
        EgressDecision {
            allowed,
            reason: reason.to_owned(),
            rule: rule.map(str::to_owned),
        }
    }

    #[test]
    fn decide_table() {
        let r = rules(
            &[
                "example.com",
                "*.example.com",
                "*.corp.test",
                "api.ports.test:443",
                "*.svc.test:8443",
                "10.0.0.5",
                "[2001:db8::1]:443",
                "BIG.Example.ORG.",
            ],
            &["evil.example.com", "*.bad.corp.test", "api.example.com:22"],
        );
        let allow = |host: &str, rule: &str, port: u16| {
            let reason = format!("{host}:{port} is allowed by rule `{rule}`");
            decision(true, &reason, Some(rule))
        };
        let not_listed =
            |what: &str| decision(false, &format!("{what} is not in the allowlist"), None);
        let raw_ip = |ip: &str| {
            let reason = format!(
                "{ip} is not in the allowlist: raw IP addresses are allowed only when listed explicitly"
            );
            decision(false, &reason, None)
        };
        let other_port = |host: &str, port: u16| {
            let reason = format!(
                "port {port} of {host} is not in the allowlist; only other ports are listed"
            );
            decision(false, &reason, None)
        };
        let cases: Vec<(&str, u16, EgressDecision)> = vec![
            // Apex and subdomains are separate rules.
            ("example.com", 443, allow("example.com", "example.com", 443)),
            (
                "www.example.com",
                80,
                allow("www.example.com", "*.example.com", 80),
            ),
            (
                "a.b.example.com",
                443,
                allow("a.b.example.com", "*.example.com", 443),
            ),
            ("corp.test", 443, not_listed("corp.test")),
            ("x.corp.test", 443, allow("x.corp.test", "*.corp.test", 443)),
            ("notexample.com", 443, not_listed("notexample.com")),
            (
                "example.com.evil.test",
                443,
                not_listed("example.com.evil.test"),
            ),
            // Case and trailing dot.
            (
                "WWW.Example.COM.",
                443,
                allow("www.example.com", "*.example.com", 443),
            ),
            (
                "big.example.org",
                443,
                allow("big.example.org", "big.example.org", 443),
            ),
            // Ports.
            (
                "api.ports.test",
                443,
                allow("api.ports.test", "api.ports.test:443", 443),
            ),
            ("api.ports.test", 80, other_port("api.ports.test", 80)),
            (
                "a.svc.test",
                8443,
                allow("a.svc.test", "*.svc.test:8443", 8443),
            ),
            ("a.svc.test", 443, other_port("a.svc.test", 443)),
            // Deny first, on every port unless it names one.
            (
                "evil.example.com",
                8080,
                decision(
                    false,
                    "evil.example.com:8080 is denied by rule `evil.example.com`",
                    Some("evil.example.com"),
                ),
            ),
            (
                "x.bad.corp.test",
                443,
                decision(
                    false,
                    "x.bad.corp.test:443 is denied by rule `*.bad.corp.test`",
                    Some("*.bad.corp.test"),
                ),
            ),
            (
                "bad.corp.test",
                443,
                allow("bad.corp.test", "*.corp.test", 443),
            ),
            (
                "api.example.com",
                22,
                decision(
                    false,
                    "api.example.com:22 is denied by rule `api.example.com:22`",
                    Some("api.example.com:22"),
                ),
            ),
            (
                "api.example.com",
                443,
                allow("api.example.com", "*.example.com", 443),
            ),
            // Raw IPs only when listed.
            ("10.0.0.5", 22, allow("10.0.0.5", "10.0.0.5", 22)),
            ("[::ffff:10.0.0.5]", 22, allow("10.0.0.5", "10.0.0.5", 22)),
            ("10.0.0.6", 443, raw_ip("10.0.0.6")),
            ("127.0.0.1", 443, raw_ip("127.0.0.1")),
            ("93.184.216.34", 443, raw_ip("93.184.216.34")),
            (
                "[2001:db8::1]",
                443,
                allow("[2001:db8::1]", "[2001:db8::1]:443", 443),
            ),
            (
                "2001:DB8::1",
                443,
                allow("[2001:db8::1]", "[2001:db8::1]:443", 443),
            ),
            ("[2001:db8::1]", 80, other_port("[2001:db8::1]", 80)),
            ("[::1]", 443, raw_ip("[::1]")),
            // Names that resolvers would read as IPs, and junk.
            (
                "2130706433",
                443,
                decision(
                    false,
                    "\"2130706433\" is not a valid host: its last label is numeric, which \
                     resolvers read as an IP address",
                    None,
                ),
            ),
            (
                "",
                443,
                decision(false, "\"\" is not a valid host: it is empty", None),
            ),
            (
                "example.com",
                0,
                decision(false, "port 0 is not a valid destination", None),
            ),
        ];
        for (host, port, want) in cases {
            assert_eq!(r.decide(host, port), want, "{host}:{port}");
        }
    }

    #[test]
    fn empty_allowlist_refuses_everything() {
        let want = decision(false, "no network allowed: the allowlist is empty", None);
        for r in [EgressRules::default(), rules(&[], &["evil.test"])] {
            for host in ["example.com", "127.0.0.1", "[::1]", "localhost"] {
                assert_eq!(r.decide(host, 443), want, "{host}");
            }
        }
    }

    #[test]
    fn new_reports_the_first_bad_entry_with_its_list() {
        let err = EgressRules::new(&["ok.test", "https://x.test"], &[]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid allow entry \"https://x.test\": it has a scheme; write only the host, \
             e.g. `example.com`, not `https://example.com`"
        );
        let err = EgressRules::new(&["ok.test"], &["*"]).unwrap_err();
        assert_eq!(err.list, RuleList::Deny);
        assert_eq!(err.entry, "*");
    }

    #[test]
    fn check_resolved_table() {
        let r = rules(
            &[
                "*.example.com",
                "public.test",
                "intranet.test",
                "10.9.9.9",
                "[fd00::7]",
            ],
            &["203.0.113.66"],
        );
        let ip = |s: &str| -> IpAddr { s.parse().unwrap() };
        let rebinding = |host: &str, addr: &str, range: &str| {
            Err(format!(
                "{host} resolved to {addr}, a {range} address; refused so that no name can lead \
                 to internal services (DNS rebinding); list {host} by its exact name or list \
                 {addr} to allow it"
            ))
        };
        let cases: Vec<(&str, Vec<IpAddr>, Result<(), String>)> = vec![
            ("www.example.com", vec![ip("93.184.216.34")], Ok(())),
            (
                "www.example.com",
                vec![ip("93.184.216.34"), ip("127.0.0.1")],
                rebinding("www.example.com", "127.0.0.1", "loopback (127.0.0.0/8)"),
            ),
            (
                "www.example.com",
                vec![ip("10.1.1.1")],
                rebinding("www.example.com", "10.1.1.1", "private (RFC 1918)"),
            ),
            (
                "www.example.com",
                vec![ip("172.20.0.1")],
                rebinding("www.example.com", "172.20.0.1", "private (RFC 1918)"),
            ),
            (
                "www.example.com",
                vec![ip("192.168.0.10")],
                rebinding("www.example.com", "192.168.0.10", "private (RFC 1918)"),
            ),
            (
                "www.example.com",
                vec![ip("169.254.169.254")],
                rebinding(
                    "www.example.com",
                    "169.254.169.254",
                    "link-local (169.254.0.0/16)",
                ),
            ),
            (
                "www.example.com",
                vec![ip("100.100.100.200")],
                rebinding(
                    "www.example.com",
                    "100.100.100.200",
                    "shared CGNAT (100.64.0.0/10)",
                ),
            ),
            (
                "www.example.com",
                vec![ip("0.0.0.0")],
                rebinding("www.example.com", "0.0.0.0", "unspecified (0.0.0.0/8)"),
            ),
            (
                "www.example.com",
                vec![ip("239.1.1.1")],
                rebinding("www.example.com", "239.1.1.1", "multicast (224.0.0.0/4)"),
            ),
            (
                "www.example.com",
                vec![ip("::1")],
                rebinding("www.example.com", "::1", "loopback (::1)"),
            ),
            (
                "www.example.com",
                vec![ip("fe80::1")],
                rebinding("www.example.com", "fe80::1", "link-local (fe80::/10)"),
            ),
            (
                "www.example.com",
                vec![ip("fd12::1")],
                rebinding("www.example.com", "fd12::1", "unique local (fc00::/7)"),
            ),
            (
                "www.example.com",
                vec![ip("::ffff:127.0.0.1")],
                rebinding("www.example.com", "127.0.0.1", "loopback (127.0.0.0/8)"),
            ),
            (
                "www.example.com",
                vec![ip("::ffff:192.168.1.1")],
                rebinding("www.example.com", "192.168.1.1", "private (RFC 1918)"),
            ),
            (
                "public.test",
                vec![ip("127.0.0.1")],
                Ok(()), // listed by exact name: the user said so
            ),
            ("PUBLIC.test.", vec![ip("10.0.0.1")], Ok(())),
            ("intranet.test", vec![ip("192.168.1.20")], Ok(())),
            // The listed IP itself, also mapped.
            ("db.example.com", vec![ip("10.9.9.9")], Ok(())),
            ("db.example.com", vec![ip("::ffff:10.9.9.9")], Ok(())),
            ("v6.example.com", vec![ip("fd00::7")], Ok(())),
            ("10.9.9.9", vec![ip("10.9.9.9")], Ok(())),
            (
                "10.9.9.8",
                vec![ip("10.9.9.8")],
                rebinding("10.9.9.8", "10.9.9.8", "private (RFC 1918)"),
            ),
            // A denied address is refused even for an exact name.
            (
                "public.test",
                vec![ip("203.0.113.66")],
                Err(
                    "public.test resolved to 203.0.113.66, which is denied by rule `203.0.113.66`"
                        .into(),
                ),
            ),
            (
                "www.example.com",
                vec![],
                Err("www.example.com resolved to no addresses".into()),
            ),
        ];
        for (host, addrs, want) in cases {
            assert_eq!(r.check_resolved(host, &addrs), want, "{host} -> {addrs:?}");
        }
    }

    fn label() -> impl Strategy<Value = String> {
        "[a-z][a-z0-9-]{0,10}[a-z0-9]"
    }

    proptest! {
        #[test]
        fn wildcard_never_matches_its_apex(
            sub in label(),
            name in label(),
            tld in "[a-z]{2,6}",
            port in 1u16..,
            upper in any::<bool>(),
        ) {
            let domain = format!("{name}.{tld}");
            let r = EgressRules::new(&[format!("*.{domain}")], &[]);
            // A random `name.tld` may be one of the built-in public suffixes.
            prop_assume!(r.is_ok());
            let r = r.unwrap();
            let spell = |h: String| if upper { h.to_ascii_uppercase() + "." } else { h };
            let apex = spell(domain.clone());
            let child = spell(format!("{sub}.{domain}"));
            let grandchild = spell(format!("{sub}.{sub}.{domain}"));
            let glued = format!("{sub}{domain}");
            prop_assert!(!r.decide(&apex, port).allowed, "apex {}", apex);
            prop_assert!(r.decide(&child, port).allowed, "child {}", child);
            prop_assert!(r.decide(&grandchild, port).allowed, "grandchild {}", grandchild);
            prop_assert!(!r.decide(&glued, port).allowed, "glued {}", glued);
        }

        #[test]
        fn parsing_and_deciding_never_panic(entry in "\\PC{0,40}", host in "\\PC{0,40}", port: u16) {
            let r = EgressRules::new(&[entry.as_str()], &[]);
            if let Ok(r) = r {
                let shown = r.allowed()[0].to_string();
                let again = EgressRules::new(&[shown.as_str()], &[]).unwrap();
                prop_assert_eq!(&again, &r, "normalised form re-parses to the same rule");
                let _ = r.decide(&host, port);
            }
        }
    }
}

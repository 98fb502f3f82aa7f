//! One allow or deny entry (`host`, `*.domain`, an IP, each with an optional
//! `:port`) and the destination it is matched against.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Two-level public suffixes under which a wildcard would cover every
/// registrant (`*.co.uk` is as broad as `*.com`). Not the whole Public
/// Suffix List: the common ones, so that the obvious mistakes fail at load.
const TWO_LEVEL_PUBLIC_SUFFIXES: &[&str] = &[
    "ac.jp", "ac.uk", "co.id", "co.il", "co.in", "co.jp", "co.kr", "co.nz", "co.th", "co.uk",
    "co.za", "com.ar", "com.au", "com.br", "com.cn", "com.co", "com.eg", "com.hk", "com.mx",
    "com.my", "com.ng", "com.pk", "com.ph", "com.sa", "com.sg", "com.tr", "com.tw", "com.ua",
    "com.vn", "edu.au", "edu.cn", "gov.au", "gov.cn", "gov.uk", "ltd.uk", "me.uk", "ne.jp",
    "net.au", "net.br", "net.cn", "net.in", "net.uk", "or.jp", "or.kr", "org.au", "org.br",
    "org.cn", "org.in", "org.nz", "org.uk", "plc.uk",
];

/// Which list an entry came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleList {
    /// The allowlist.
    Allow,
    /// The denylist.
    Deny,
}

impl fmt::Display for RuleList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RuleList::Allow => "allow",
            RuleList::Deny => "deny",
        })
    }
}

/// An entry that cannot be a rule, rejected when the configuration loads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {list} entry {entry:?}: {problem}")]
#[non_exhaustive]
pub struct EgressRuleError {
    /// The list holding the entry.
    pub list: RuleList,
    /// The entry as written.
    pub entry: String,
    /// What is wrong with it.
    pub problem: RuleProblem,
}

/// What is wrong with an entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RuleProblem {
    #[error("it is empty; write a host such as `example.com`")]
    Empty,
    #[error("it contains whitespace; write one host per entry")]
    Whitespace,
    #[error("it has a scheme; write only the host, e.g. `example.com`, not `https://example.com`")]
    Scheme,
    #[error("it has a path, query or backslash; write only the host and an optional `:port`")]
    Path,
    #[error("it has user information (`user@`); write only the host, never credentials")]
    Userinfo,
    #[error("`*` alone would allow every host; list the domains the command needs")]
    BareWildcard,
    #[error(
        "`*.{suffix}` covers a whole public suffix; name a domain under it, e.g. `*.example.{suffix}`"
    )]
    PublicSuffixWildcard { suffix: String },
    #[error("only a leading `*.` wildcard is supported, e.g. `*.example.com`")]
    MisplacedWildcard,
    #[error(
        "it looks like an IPv6 address without brackets; write `[{address}]` or `[{address}]:443`"
    )]
    UnbracketedIpv6 { address: String },
    #[error("`{text}` in brackets is not an IPv6 address")]
    InvalidIpv6 { text: String },
    #[error("`{port}` is not a valid port; write e.g. `example.com:443`")]
    InvalidPort { port: String },
    #[error("the port {port} is out of range; use 1 to 65535")]
    PortOutOfRange { port: String },
    #[error("`{host}` is not a valid host name: {why}")]
    InvalidHost { host: String, why: &'static str },
}

/// What a rule matches, before its port.
#[derive(Debug, Clone, PartialEq, Eq)]
enum HostPattern {
    /// Exactly this name.
    Exact(String),
    /// Every name strictly below this domain, never the domain itself.
    Subdomains(String),
    /// This address (canonical: IPv4-mapped IPv6 is stored as IPv4).
    Ip(IpAddr),
}

/// One parsed, normalised allow or deny entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressRule {
    pattern: HostPattern,
    port: Option<u16>,
}

impl EgressRule {
    /// Parses one entry; the caller wraps the problem with the entry and list.
    pub(crate) fn parse(entry: &str) -> Result<EgressRule, RuleProblem> {
        if entry.is_empty() {
            return Err(RuleProblem::Empty);
        }
        if entry.chars().any(char::is_whitespace) {
            return Err(RuleProblem::Whitespace);
        }
        if entry.contains("://") {
            return Err(RuleProblem::Scheme);
        }
        if entry.contains('@') {
            return Err(RuleProblem::Userinfo);
        }
        if entry.contains(['/', '?', '#', '\\']) {
            return Err(RuleProblem::Path);
        }
        if let Some(rest) = entry.strip_prefix('[') {
            return parse_bracketed(rest);
        }
        if entry.matches(':').count() > 1 {
            return Err(RuleProblem::UnbracketedIpv6 {
                address: entry.to_owned(),
            });
        }
        let (host, port) = match entry.split_once(':') {
            Some((host, port)) => (host, Some(parse_port(port)?)),
            None => (entry, None),
        };
        let host = normalise_name(host);
        Ok(EgressRule {
            pattern: parse_host_pattern(&host)?,
            port,
        })
    }

    /// The port this rule is limited to, if any.
    pub fn port(&self) -> Option<u16> {
        self.port
    }

    /// Whether the rule covers this destination on this port.
    pub(crate) fn matches(&self, target: &Target, port: u16) -> bool {
        self.matches_host(target) && self.port.is_none_or(|p| p == port)
    }

    /// Whether the rule covers this destination on some port.
    pub(crate) fn matches_host(&self, target: &Target) -> bool {
        match (&self.pattern, target) {
            (HostPattern::Exact(name), Target::Name(host)) => name == host,
            (HostPattern::Subdomains(domain), Target::Name(host)) => host
                .strip_suffix(domain.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            (HostPattern::Ip(ip), Target::Ip(addr)) => ip == addr,
            _ => false,
        }
    }

    /// Whether the rule names exactly this host (not through a wildcard).
    pub(crate) fn names_exactly(&self, host: &str) -> bool {
        matches!(&self.pattern, HostPattern::Exact(name) if name == host)
    }

    /// Whether the rule names exactly this address.
    pub(crate) fn names_ip(&self, addr: IpAddr) -> bool {
        matches!(self.pattern, HostPattern::Ip(ip) if ip == addr.to_canonical())
    }
}

impl fmt::Display for EgressRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.pattern {
            HostPattern::Exact(name) => f.write_str(name)?,
            HostPattern::Subdomains(domain) => write!(f, "*.{domain}")?,
            HostPattern::Ip(ip) => write!(f, "{}", Target::Ip(*ip))?,
        }
        match self.port {
            Some(port) => write!(f, ":{port}"),
            None => Ok(()),
        }
    }
}

fn parse_bracketed(rest: &str) -> Result<EgressRule, RuleProblem> {
    let Some((inside, after)) = rest.split_once(']') else {
        return Err(RuleProblem::InvalidIpv6 {
            text: rest.to_owned(),
        });
    };
    let ip: Ipv6Addr = inside.parse().map_err(|_| RuleProblem::InvalidIpv6 {
        text: inside.to_owned(),
    })?;
    let port = match after {
        "" => None,
        _ => match after.strip_prefix(':') {
            Some(port) => Some(parse_port(port)?),
            None => {
                return Err(RuleProblem::InvalidPort {
                    port: after.to_owned(),
                });
            }
        },
    };
    Ok(EgressRule {
        pattern: HostPattern::Ip(IpAddr::V6(ip).to_canonical()),
        port,
    })
}

fn parse_port(text: &str) -> Result<u16, RuleProblem> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(RuleProblem::InvalidPort {
            port: text.to_owned(),
        });
    }
    text.parse::<u16>()
        .ok()
        .filter(|port| *port != 0)
        .ok_or_else(|| RuleProblem::PortOutOfRange {
            port: text.to_owned(),
        })
}

fn parse_host_pattern(host: &str) -> Result<HostPattern, RuleProblem> {
    if let Ok(ip) = host.parse::<Ipv4Addr>() {
        return Ok(HostPattern::Ip(IpAddr::V4(ip)));
    }
    if host == "*" {
        return Err(RuleProblem::BareWildcard);
    }
    let (domain, wildcard) = match host.strip_prefix("*.") {
        Some(domain) => (domain, true),
        None => (host, false),
    };
    if domain.contains('*') {
        return Err(RuleProblem::MisplacedWildcard);
    }
    if let Some(why) = host_name_problem(domain) {
        return Err(RuleProblem::InvalidHost {
            host: domain.to_owned(),
            why,
        });
    }
    if !wildcard {
        return Ok(HostPattern::Exact(domain.to_owned()));
    }
    // `*.com` or `*.co.uk` would let the command reach any site registered
    // there, which is most of the internet: an allowlist in name only.
    if !domain.contains('.') || TWO_LEVEL_PUBLIC_SUFFIXES.contains(&domain) {
        return Err(RuleProblem::PublicSuffixWildcard {
            suffix: domain.to_owned(),
        });
    }
    Ok(HostPattern::Subdomains(domain.to_owned()))
}

/// Lowercases and drops one trailing dot: `Example.COM.` and `example.com`
/// are the same host, and a rule must not be dodged by spelling it otherwise.
fn normalise_name(host: &str) -> String {
    let lower = host.to_ascii_lowercase();
    match lower.strip_suffix('.') {
        Some(stripped) => stripped.to_owned(),
        None => lower,
    }
}

/// Why `name` (already lowercase) is not a DNS host name, if it is not.
fn host_name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("it is empty");
    }
    if name.len() > 253 {
        return Some("it is longer than 253 characters");
    }
    if !name.is_ascii() {
        // Lookalike letters (homographs) could pass for a listed name.
        return Some("it is not ASCII; write internationalised names in their `xn--` form");
    }
    for label in name.split('.') {
        if label.is_empty() {
            return Some("it has an empty label (`..` or a leading dot)");
        }
        if label.len() > 63 {
            return Some("a label is longer than 63 characters");
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Some("only letters, digits, `-`, `_` and dots are allowed");
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Some("a label starts or ends with `-`");
        }
    }
    // Resolvers read `127.1`, `2130706433` or `0x7f.0.0.1` as IPv4 addresses
    // (inet_aton), which would smuggle a raw IP past the name rules.
    let last = name.rsplit('.').next().unwrap_or(name);
    let numeric = last.bytes().all(|b| b.is_ascii_digit())
        || last
            .strip_prefix("0x")
            .is_some_and(|hex| hex.bytes().all(|b| b.is_ascii_hexdigit()));
    if numeric {
        return Some("its last label is numeric, which resolvers read as an IP address");
    }
    None
}

/// A destination host as the proxy saw it, normalised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    Name(String),
    Ip(IpAddr),
}

impl Target {
    /// Normalises a host from a request: lowercase, no trailing dot, IPv6
    /// with or without brackets, IPv4-mapped IPv6 as IPv4.
    pub(crate) fn parse(host: &str) -> Result<Target, &'static str> {
        let lower = host.to_ascii_lowercase();
        if let Some(inside) = lower.strip_prefix('[') {
            return inside
                .strip_suffix(']')
                .and_then(|ip| ip.parse::<Ipv6Addr>().ok())
                .map(|ip| Target::Ip(IpAddr::V6(ip).to_canonical()))
                .ok_or("it is not an IPv6 address in brackets");
        }
        if let Ok(ip) = lower.parse::<IpAddr>() {
            return Ok(Target::Ip(ip.to_canonical()));
        }
        let name = normalise_name(&lower);
        if let Ok(ip) = name.parse::<Ipv4Addr>() {
            return Ok(Target::Ip(IpAddr::V4(ip)));
        }
        match host_name_problem(&name) {
            Some(why) => Err(why),
            None => Ok(Target::Name(name)),
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Name(name) => f.write_str(name),
            Target::Ip(IpAddr::V4(ip)) => write!(f, "{ip}"),
            Target::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn malformed_entries_are_rejected_with_the_reason() {
        let host = |host: &str, why: &'static str| RuleProblem::InvalidHost {
            host: host.to_owned(),
            why,
        };
        let cases: Vec<(&str, RuleProblem, &str)> = vec![
            ("", RuleProblem::Empty, "it is empty"),
            (" example.com", RuleProblem::Whitespace, "whitespace"),
            ("exa mple.com", RuleProblem::Whitespace, "whitespace"),
            ("example.com\t", RuleProblem::Whitespace, "whitespace"),
            ("https://example.com", RuleProblem::Scheme, "scheme"),
            ("https://user@example.com/x", RuleProblem::Scheme, "scheme"),
            ("example.com/path", RuleProblem::Path, "path"),
            ("example.com?q", RuleProblem::Path, "path"),
            (
                "user:pw@example.com",
                RuleProblem::Userinfo,
                "user information",
            ),
            ("*", RuleProblem::BareWildcard, "every host"),
            ("*:443", RuleProblem::BareWildcard, "every host"),
            (
                "*.com",
                RuleProblem::PublicSuffixWildcard {
                    suffix: "com".into(),
                },
                "`*.com` covers a whole public suffix",
            ),
            (
                "*.IO.",
                RuleProblem::PublicSuffixWildcard {
                    suffix: "io".into(),
                },
                "`*.example.io`",
            ),
            (
                "*.co.uk",
                RuleProblem::PublicSuffixWildcard {
                    suffix: "co.uk".into(),
                },
                "public suffix",
            ),
            (
                "*.*.example.com",
                RuleProblem::MisplacedWildcard,
                "leading `*.`",
            ),
            (
                "foo*.example.com",
                RuleProblem::MisplacedWildcard,
                "leading",
            ),
            (
                "api.*.example.com",
                RuleProblem::MisplacedWildcard,
                "leading",
            ),
            (
                "::1",
                RuleProblem::UnbracketedIpv6 {
                    address: "::1".into(),
                },
                "write `[::1]` or `[::1]:443`",
            ),
            (
                "2001:db8::1",
                RuleProblem::UnbracketedIpv6 {
                    address: "2001:db8::1".into(),
                },
                "without brackets",
            ),
            (
                "[example.com]",
                RuleProblem::InvalidIpv6 {
                    text: "example.com".into(),
                },
                "not an IPv6 address",
            ),
            (
                "[::1",
                RuleProblem::InvalidIpv6 { text: "::1".into() },
                "not an IPv6",
            ),
            (
                "[::1]443",
                RuleProblem::InvalidPort { port: "443".into() },
                "not a valid port",
            ),
            (
                "example.com:",
                RuleProblem::InvalidPort { port: "".into() },
                "not a valid port",
            ),
            (
                "example.com:https",
                RuleProblem::InvalidPort {
                    port: "https".into(),
                },
                "not a valid port",
            ),
            (
                "example.com:0",
                RuleProblem::PortOutOfRange { port: "0".into() },
                "use 1 to 65535",
            ),
            (
                "example.com:65536",
                RuleProblem::PortOutOfRange {
                    port: "65536".into(),
                },
                "out of range",
            ),
            (
                "[::1]:99999999999999999999",
                RuleProblem::PortOutOfRange {
                    port: "99999999999999999999".into(),
                },
                "out of range",
            ),
            (":443", host("", "it is empty"), "is not a valid host name"),
            (
                "a..b",
                host("a..b", "it has an empty label (`..` or a leading dot)"),
                "empty label",
            ),
            (
                "exa$mple.com",
                host(
                    "exa$mple.com",
                    "only letters, digits, `-`, `_` and dots are allowed",
                ),
                "only letters",
            ),
            (
                "-bad.example.com",
                host("-bad.example.com", "a label starts or ends with `-`"),
                "starts or ends",
            ),
            (
                "exämple.com",
                host(
                    "exämple.com",
                    "it is not ASCII; write internationalised names in their `xn--` form",
                ),
                "xn--",
            ),
            (
                "127.1",
                host(
                    "127.1",
                    "its last label is numeric, which resolvers read as an IP address",
                ),
                "numeric",
            ),
            (
                "0x7f.0.0.0x1",
                host(
                    "0x7f.0.0.0x1",
                    "its last label is numeric, which resolvers read as an IP address",
                ),
                "numeric",
            ),
        ];
        for (entry, problem, message) in cases {
            let got = EgressRule::parse(entry);
            assert_eq!(got, Err(problem), "entry {entry:?}");
            let Err(problem) = got else { continue };
            let text = problem.to_string();
            assert!(text.contains(message), "{entry:?}: {text}");
        }
    }

    #[test]
    fn good_entries_normalise() {
        let cases = [
            ("example.com", "example.com"),
            ("Example.COM.", "example.com"),
            ("*.Example.com", "*.example.com"),
            ("*.example.co.uk", "*.example.co.uk"),
            ("api.example.com:443", "api.example.com:443"),
            ("*.example.com:8080", "*.example.com:8080"),
            ("localhost", "localhost"),
            ("my_host.internal", "my_host.internal"),
            ("10.0.0.1", "10.0.0.1"),
            ("10.0.0.1:22", "10.0.0.1:22"),
            ("[::1]", "[::1]"),
            ("[2001:DB8::1]:443", "[2001:db8::1]:443"),
            ("[::ffff:10.0.0.1]", "10.0.0.1"),
            ("example.com:065535", "example.com:65535"),
        ];
        for (entry, normalised) in cases {
            let rule = EgressRule::parse(entry).map(|r| r.to_string());
            assert_eq!(rule, Ok(normalised.to_owned()), "entry {entry:?}");
        }
    }

    #[test]
    fn error_names_the_list_and_entry() {
        let err = EgressRuleError {
            list: RuleList::Deny,
            entry: "*.com".into(),
            problem: RuleProblem::PublicSuffixWildcard {
                suffix: "com".into(),
            },
        };
        assert_eq!(
            err.to_string(),
            "invalid deny entry \"*.com\": `*.com` covers a whole public suffix; \
             name a domain under it, e.g. `*.example.com`"
        );
    }

    #[test]
    fn targets_normalise() {
        let ip = |s: &str| Ok(Target::Ip(s.parse().unwrap()));
        let cases: Vec<(&str, Result<Target, &'static str>)> = vec![
            ("Example.COM.", Ok(Target::Name("example.com".into()))),
            ("127.0.0.1", ip("127.0.0.1")),
            ("127.0.0.1.", ip("127.0.0.1")),
            ("[::1]", ip("::1")),
            ("::1", ip("::1")),
            ("[::FFFF:127.0.0.1]", ip("127.0.0.1")),
            ("[::1", Err("it is not an IPv6 address in brackets")),
            ("", Err("it is empty")),
            (
                "2130706433",
                Err("its last label is numeric, which resolvers read as an IP address"),
            ),
            (
                "fe80::1%eth0",
                Err("only letters, digits, `-`, `_` and dots are allowed"),
            ),
        ];
        for (host, want) in cases {
            assert_eq!(Target::parse(host), want, "host {host:?}");
        }
    }
}

//! `[store]`, `[approvals]` and `[identity]`: where approvals, grants and
//! the audit log live, how long a call waits for a person and what a yes or
//! a no is worth by default, and who the agent is.
//!
//! ```toml
//! [store]
//! url = "postgres://toolgate@db/toolgate"  # default: SQLite in the data dir
//!
//! [approvals]
//! wait = "90s"          # how long a call that needs a yes waits for one
//! pending_ttl = "24h"   # how long an unanswered request stays answerable
//! grant_ttl = "8h"      # how long a yes lasts (a person's answer may say otherwise)
//! refusal_ttl = "1h"    # how long a no lasts
//! uses = 1              # calls one yes covers, or "unlimited"
//! reviewer = ["review-bot", "--strict"]  # asked first; abstains on any failure
//!
//! [identity]
//! agent = "claude"      # the agent's name in requests and the audit log
//! ```
//!
//! Durations are a number with a unit (`ms`, `s`, `m`, `h`, `d`): `"90s"`,
//! `"8h"`. An unknown key is an error that names the key meant. An
//! untrusted project file may only tighten ([`restrict`]): a shorter wait
//! and shorter lives, fewer uses; never another store, a reviewer or an
//! agent name.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

const STORE_KEYS: [&str; 1] = ["url"];
const APPROVALS_KEYS: [&str; 6] = [
    "wait",
    "pending_ttl",
    "grant_ttl",
    "refusal_ttl",
    "uses",
    "reviewer",
];
const IDENTITY_KEYS: [&str; 1] = ["agent"];

/// `[store]` as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(try_from = "BTreeMap<String, toml::Value>")]
pub struct StoreSection {
    /// `postgres://…`, `sqlite:PATH` (relative to the file's directory).
    pub url: Option<String>,
}

/// `[approvals]` as written; `None` keeps the default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(try_from = "BTreeMap<String, toml::Value>")]
pub struct ApprovalsSection {
    pub wait: Option<Duration>,
    pub pending_ttl: Option<Duration>,
    pub grant_ttl: Option<Duration>,
    pub refusal_ttl: Option<Duration>,
    pub uses: Option<Uses>,
    pub reviewer: Option<Vec<String>>,
}

/// `[identity]` as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(try_from = "BTreeMap<String, toml::Value>")]
pub struct IdentitySection {
    pub agent: Option<String>,
}

/// How many calls one yes covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Uses {
    /// At most this many.
    At(u32),
    /// Until the grant expires.
    Unlimited,
}

impl Uses {
    /// As a count, `None` for unlimited.
    pub fn count(self) -> Option<u32> {
        match self {
            Uses::At(n) => Some(n),
            Uses::Unlimited => None,
        }
    }

    fn rank(self) -> u64 {
        match self {
            Uses::At(n) => u64::from(n),
            Uses::Unlimited => u64::MAX,
        }
    }
}

impl std::fmt::Display for Uses {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Uses::At(n) => write!(f, "{n}"),
            Uses::Unlimited => f.write_str("\"unlimited\""),
        }
    }
}

pub(super) fn unknown(section: &str, key: &str, keys: &[&str]) -> String {
    let hint = toolgate_core::suggest::did_you_mean(key, keys.iter().copied());
    format!(
        "unknown key `{key}` in [{section}]{hint} (the keys are: {})",
        keys.join(", ")
    )
}

fn string(section: &str, key: &str, value: &toml::Value) -> Result<String, String> {
    value
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("[{section}] {key}: expected a string, got {value}"))
}

impl TryFrom<BTreeMap<String, toml::Value>> for StoreSection {
    type Error = String;

    fn try_from(table: BTreeMap<String, toml::Value>) -> Result<Self, String> {
        let mut section = StoreSection::default();
        for (key, value) in table {
            match key.as_str() {
                "url" => {
                    let url = string("store", &key, &value)?;
                    StoreUrl::parse(&url, Path::new("."))
                        .map_err(|e| format!("[store] url: {e}"))?;
                    section.url = Some(url);
                }
                other => return Err(unknown("store", other, &STORE_KEYS)),
            }
        }
        Ok(section)
    }
}

impl TryFrom<BTreeMap<String, toml::Value>> for ApprovalsSection {
    type Error = String;

    fn try_from(table: BTreeMap<String, toml::Value>) -> Result<Self, String> {
        let mut section = ApprovalsSection::default();
        for (key, value) in table {
            let duration = || {
                let text = string("approvals", &key, &value)?;
                parse_duration(&text)
                    .map(Some)
                    .map_err(|e| format!("[approvals] {key}: {e}"))
            };
            match key.as_str() {
                "wait" => section.wait = duration()?,
                "pending_ttl" => section.pending_ttl = duration()?,
                "grant_ttl" => section.grant_ttl = duration()?,
                "refusal_ttl" => section.refusal_ttl = duration()?,
                "uses" => section.uses = Some(parse_uses(&value)?),
                "reviewer" => {
                    let argv = value
                        .as_array()
                        .and_then(|items| {
                            items
                                .iter()
                                .map(|v| v.as_str().map(str::to_owned))
                                .collect::<Option<Vec<_>>>()
                        })
                        .filter(|argv| !argv.is_empty())
                        .ok_or_else(|| {
                            format!(
                                "[approvals] reviewer: expected the command and its arguments as \
                                 a list of strings, such as [\"review-bot\", \"--strict\"]; got {value}"
                            )
                        })?;
                    section.reviewer = Some(argv);
                }
                other => return Err(unknown("approvals", other, &APPROVALS_KEYS)),
            }
        }
        Ok(section)
    }
}

impl TryFrom<BTreeMap<String, toml::Value>> for IdentitySection {
    type Error = String;

    fn try_from(table: BTreeMap<String, toml::Value>) -> Result<Self, String> {
        let mut section = IdentitySection::default();
        for (key, value) in table {
            match key.as_str() {
                "agent" => {
                    let agent = string("identity", &key, &value)?;
                    check_agent(&agent).map_err(|e| format!("[identity] agent: {e}"))?;
                    section.agent = Some(agent);
                }
                other => return Err(unknown("identity", other, &IDENTITY_KEYS)),
            }
        }
        Ok(section)
    }
}

fn parse_uses(value: &toml::Value) -> Result<Uses, String> {
    match value {
        toml::Value::Integer(n) if *n > 0 => u32::try_from(*n)
            .map(Uses::At)
            .map_err(|_| format!("[approvals] uses: {n} is too large")),
        toml::Value::String(s) if s == "unlimited" => Ok(Uses::Unlimited),
        _ => Err(format!(
            "[approvals] uses: expected a positive integer or \"unlimited\", got {value}"
        )),
    }
}

/// An agent's name: what requests and audit records say, so printable and short.
pub fn check_agent(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 128 || name.chars().any(char::is_control) {
        return Err(format!(
            "{name:?} is not a usable agent name (1 to 128 characters, no control characters)"
        ));
    }
    Ok(())
}

/// `"90s"`, `"8h"`, `"500ms"`, `"2d"`, `"1h30m"`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || {
        format!(
            "expected a duration such as \"90s\", \"30m\", \"8h\" or \"2d\" (units ms, s, m, h, d), \
             got {text:?}"
        )
    };
    let mut total = Duration::ZERO;
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
        if digits == 0 {
            return Err(bad());
        }
        let number: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let millis_per = match &rest[..unit_len] {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            _ => return Err(bad()),
        };
        rest = &rest[unit_len..];
        let millis = number.checked_mul(millis_per).ok_or_else(bad)?;
        total = total
            .checked_add(Duration::from_millis(millis))
            .ok_or_else(bad)?;
    }
    Ok(total)
}

/// A duration as the config writes it: `90s`, `8h`, `1h30m`.
pub fn format_duration(duration: Duration) -> String {
    let millis = duration.as_millis();
    if millis == 0 {
        return "0s".to_owned();
    }
    if !millis.is_multiple_of(1000) {
        return format!("{millis}ms");
    }
    let mut secs = duration.as_secs();
    let mut out = String::new();
    for (unit, size) in [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)] {
        if secs >= size {
            out.push_str(&format!("{}{unit}", secs / size));
            secs %= size;
        }
    }
    out
}

/// Where the store is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreUrl {
    /// An SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL connection URL.
    Postgres(String),
}

impl StoreUrl {
    /// Parses `postgres://…`, `postgresql://…`, `sqlite:PATH` or
    /// `sqlite://PATH`; a relative SQLite path is taken from `base`.
    pub fn parse(url: &str, base: &Path) -> Result<StoreUrl, String> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return Ok(StoreUrl::Postgres(url.to_owned()));
        }
        if let Some(path) = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
        {
            let path = path.split('?').next().unwrap_or(path);
            if path.is_empty() {
                return Err(format!("`{url}` names no file"));
            }
            return Ok(StoreUrl::Sqlite(base.join(path)));
        }
        Err(format!(
            "`{}` is not a store URL: use postgres://USER@HOST/DB for a shared PostgreSQL, \
             or sqlite:PATH for an SQLite file (the default is one in the data directory)",
            shown_url(url)
        ))
    }

    /// For messages: the URL without a password.
    pub fn shown(&self) -> String {
        match self {
            StoreUrl::Sqlite(path) => format!("SQLite {}", path.display()),
            StoreUrl::Postgres(url) => format!("PostgreSQL {}", shown_url(url)),
        }
    }
}

/// `scheme://user:secret@host` → `scheme://user:***@host`: passwords never
/// reach logs, errors or `doctor`.
pub fn shown_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}{path}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

/// `text` with the password of every URL in it hidden (see [`shown_url`]).
pub fn hide_passwords(text: &str) -> String {
    text.split(' ')
        .map(|word| {
            if word.contains("://") {
                shown_url(word)
            } else {
                word.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// What the approval gate runs with, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalDefaults {
    pub wait: Duration,
    pub pending_ttl: Duration,
    pub grant_ttl: Duration,
    pub refusal_ttl: Duration,
    pub uses: Uses,
    pub reviewer: Option<Vec<String>>,
}

impl Default for ApprovalDefaults {
    fn default() -> Self {
        ApprovalDefaults {
            wait: Duration::from_secs(90),
            pending_ttl: Duration::from_secs(24 * 3600),
            grant_ttl: Duration::from_secs(8 * 3600),
            refusal_ttl: Duration::from_secs(3600),
            uses: Uses::At(1),
            reviewer: None,
        }
    }
}

impl ApprovalDefaults {
    /// The defaults with `section` over them.
    pub fn from_section(section: Option<&ApprovalsSection>) -> Self {
        let mut out = ApprovalDefaults::default();
        if let Some(s) = section {
            out.wait = s.wait.unwrap_or(out.wait);
            out.pending_ttl = s.pending_ttl.unwrap_or(out.pending_ttl);
            out.grant_ttl = s.grant_ttl.unwrap_or(out.grant_ttl);
            out.refusal_ttl = s.refusal_ttl.unwrap_or(out.refusal_ttl);
            out.uses = s.uses.unwrap_or(out.uses);
            out.reviewer.clone_from(&s.reviewer);
        }
        out
    }
}

/// The project's `[approvals]` over the user's where it tightens: each
/// duration and the uses no higher than the user's (or the defaults); the
/// reviewer stays the user's, since a reviewer's yes runs calls.
pub fn restrict_approvals(
    project: ApprovalsSection,
    base: Option<&ApprovalsSection>,
    ignored: &mut Vec<String>,
) -> ApprovalsSection {
    let own = ApprovalDefaults::from_section(base);
    let mut section = base.cloned().unwrap_or_default();
    let mut shorter = |name: &str, theirs: Option<Duration>, ours: Duration| {
        let theirs = theirs?;
        if theirs > ours {
            ignored.push(format!(
                "[approvals] {name} = \"{}\" (longer than \"{}\")",
                format_duration(theirs),
                format_duration(ours)
            ));
            return Some(ours);
        }
        Some(theirs)
    };
    if let Some(d) = shorter("wait", project.wait, own.wait) {
        section.wait = Some(d);
    }
    if let Some(d) = shorter("pending_ttl", project.pending_ttl, own.pending_ttl) {
        section.pending_ttl = Some(d);
    }
    if let Some(d) = shorter("grant_ttl", project.grant_ttl, own.grant_ttl) {
        section.grant_ttl = Some(d);
    }
    if let Some(d) = shorter("refusal_ttl", project.refusal_ttl, own.refusal_ttl) {
        section.refusal_ttl = Some(d);
    }
    if let Some(uses) = project.uses {
        if uses.rank() > own.uses.rank() {
            ignored.push(format!(
                "[approvals] uses = {uses} (more than {})",
                own.uses
            ));
        } else {
            section.uses = Some(uses);
        }
    }
    if project.reviewer.is_some() && project.reviewer != section.reviewer {
        ignored.push("[approvals] reviewer (a reviewer's yes runs calls)".to_owned());
    }
    section
}

/// What an untrusted project file may not say at all.
pub fn restrict_store_and_identity(
    store: Option<StoreSection>,
    identity: Option<IdentitySection>,
    ignored: &mut Vec<String>,
) {
    if store.is_some_and(|s| s.url.is_some()) {
        ignored.push(
            "[store] url (it would send approvals and the audit log to another store)".to_owned(),
        );
    }
    if identity.is_some_and(|i| i.agent.is_some()) {
        ignored.push(
            "[identity] agent (the agent's name in the audit log is the user's to give)".to_owned(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn section<T: for<'de> Deserialize<'de>>(text: &str) -> Result<T, String> {
        toml::from_str::<T>(text).map_err(|e| e.message().to_owned())
    }

    #[test]
    fn durations_parse_with_units_and_print_back() {
        for (text, secs, shown) in [
            ("90s", 90, "1m30s"),
            ("8h", 8 * 3600, "8h"),
            ("30m", 1800, "30m"),
            ("2d", 2 * 86_400, "2d"),
            ("1h30m", 5400, "1h30m"),
        ] {
            let d = parse_duration(text).unwrap();
            assert_eq!(d, Duration::from_secs(secs), "{text}");
            assert_eq!(format_duration(d), shown, "{text}");
        }
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        for bad in [
            "",
            "90",
            "s",
            "8 hours",
            "-1s",
            "1.5h",
            "1w",
            "99999999999999999999d",
        ] {
            let e = parse_duration(bad).unwrap_err();
            assert!(
                e.contains("expected a duration such as \"90s\""),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn unknown_keys_are_errors_with_the_key_meant() {
        let e = section::<ApprovalsSection>("wiat = \"9s\"\n").unwrap_err();
        assert_eq!(
            e,
            "unknown key `wiat` in [approvals]; did you mean `wait`? (the keys are: wait, \
             pending_ttl, grant_ttl, refusal_ttl, uses, reviewer)"
        );
        let e = section::<StoreSection>("ulr = \"sqlite:x\"\n").unwrap_err();
        assert!(
            e.starts_with("unknown key `ulr` in [store]; did you mean `url`?"),
            "{e}"
        );
        let e = section::<IdentitySection>("agnet = \"x\"\n").unwrap_err();
        assert!(
            e.starts_with("unknown key `agnet` in [identity]; did you mean `agent`?"),
            "{e}"
        );
        let e = section::<ApprovalsSection>("uses = 0\n").unwrap_err();
        assert_eq!(
            e,
            "[approvals] uses: expected a positive integer or \"unlimited\", got 0"
        );
        let e = section::<ApprovalsSection>("reviewer = \"bot\"\n").unwrap_err();
        assert!(
            e.starts_with("[approvals] reviewer: expected the command"),
            "{e}"
        );
        let e = section::<StoreSection>("url = \"mysql://db\"\n").unwrap_err();
        assert!(
            e.starts_with("[store] url: `mysql://db` is not a store URL"),
            "{e}"
        );
    }

    #[test]
    fn store_urls_and_passwords_in_messages() {
        assert_eq!(
            StoreUrl::parse("sqlite:state/tg.db", Path::new("/p")),
            Ok(StoreUrl::Sqlite(PathBuf::from("/p/state/tg.db")))
        );
        assert_eq!(
            StoreUrl::parse("sqlite:///abs/tg.db", Path::new("/p")),
            Ok(StoreUrl::Sqlite(PathBuf::from("/abs/tg.db")))
        );
        let pg = StoreUrl::parse("postgres://tg:hunter2@db:5432/tg", Path::new("/p")).unwrap();
        assert_eq!(pg.shown(), "PostgreSQL postgres://tg:***@db:5432/tg");
        let e = StoreUrl::parse("pg://tg:hunter2@db/tg", Path::new("/p")).unwrap_err();
        assert!(!e.contains("hunter2"), "{e}");
        assert_eq!(
            hide_passwords("cannot reach postgres://tg:hunter2@db/tg: refused"),
            "cannot reach postgres://tg:***@db/tg: refused"
        );
    }

    #[test]
    fn an_untrusted_file_only_shortens_and_lowers() {
        let user = ApprovalsSection {
            wait: Some(Duration::from_secs(60)),
            reviewer: Some(vec!["bot".to_owned()]),
            ..ApprovalsSection::default()
        };
        let project = ApprovalsSection {
            wait: Some(Duration::from_secs(600)),
            grant_ttl: Some(Duration::from_secs(60)),
            refusal_ttl: Some(Duration::from_secs(7 * 86_400)),
            uses: Some(Uses::Unlimited),
            reviewer: Some(vec!["yes-bot".to_owned()]),
            ..ApprovalsSection::default()
        };
        let mut ignored = Vec::new();
        let kept = restrict_approvals(project, Some(&user), &mut ignored);
        assert_eq!(
            kept,
            ApprovalsSection {
                wait: Some(Duration::from_secs(60)),
                grant_ttl: Some(Duration::from_secs(60)),
                refusal_ttl: Some(Duration::from_secs(3600)),
                reviewer: Some(vec!["bot".to_owned()]),
                ..ApprovalsSection::default()
            }
        );
        assert_eq!(
            ignored,
            [
                "[approvals] wait = \"10m\" (longer than \"1m\")",
                "[approvals] refusal_ttl = \"7d\" (longer than \"1h\")",
                "[approvals] uses = \"unlimited\" (more than 1)",
                "[approvals] reviewer (a reviewer's yes runs calls)",
            ]
        );
        let mut ignored = Vec::new();
        let fewer = ApprovalsSection {
            uses: Some(Uses::At(1)),
            pending_ttl: Some(Duration::from_secs(5)),
            ..ApprovalsSection::default()
        };
        let kept = restrict_approvals(fewer.clone(), None, &mut ignored);
        assert_eq!((kept, ignored), (fewer, Vec::<String>::new()));
    }
}

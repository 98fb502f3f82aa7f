//! What a tool does to the world (its effect class) and what happens when the
//! same call is made twice (its idempotency contract).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// How much a tool can change, ordered from harmless to dangerous.
///
/// The order is what policy caps compare against: a cap of
/// `MutateReversible` admits `Read` and `MutateReversible` tools only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EffectClass {
    /// Observes, never changes anything.
    Read,
    /// Changes state in a way that can be undone (a file edit).
    MutateReversible,
    /// Changes state in a way that cannot be undone (sending a message).
    MutateIrreversible,
    /// Destroys state or acts outside the sandbox.
    Destructive,
}

impl EffectClass {
    /// Every class, in order.
    pub const ALL: [EffectClass; 4] = [
        EffectClass::Read,
        EffectClass::MutateReversible,
        EffectClass::MutateIrreversible,
        EffectClass::Destructive,
    ];

    /// The wire name (`read`, `mutate-reversible`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            EffectClass::Read => "read",
            EffectClass::MutateReversible => "mutate-reversible",
            EffectClass::MutateIrreversible => "mutate-irreversible",
            EffectClass::Destructive => "destructive",
        }
    }
}

impl fmt::Display for EffectClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that names no effect class or idempotency contract.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} `{value}`, expected one of: {expected}")]
pub struct ParseEnumError {
    kind: &'static str,
    value: String,
    expected: &'static str,
}

impl FromStr for EffectClass {
    type Err = ParseEnumError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        EffectClass::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| ParseEnumError {
                kind: "effect class",
                value: s.to_owned(),
                expected: "read, mutate-reversible, mutate-irreversible, destructive",
            })
    }
}

/// What a caller may assume when a call above `read` is repeated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Idempotency {
    /// The provider itself deduplicates (an idempotency key, a PUT).
    ProviderNative,
    /// The tool checks the current state before acting (expected hash, exact match).
    CheckBeforeAct,
    /// No guarantee: a retry may act twice, so the caller must not retry blindly.
    AtMostOnce,
}

impl Idempotency {
    /// Every contract.
    pub const ALL: [Idempotency; 3] = [
        Idempotency::ProviderNative,
        Idempotency::CheckBeforeAct,
        Idempotency::AtMostOnce,
    ];

    /// The wire name (`provider-native`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Idempotency::ProviderNative => "provider-native",
            Idempotency::CheckBeforeAct => "check-before-act",
            Idempotency::AtMostOnce => "at-most-once",
        }
    }
}

impl fmt::Display for Idempotency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Idempotency {
    type Err = ParseEnumError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Idempotency::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| ParseEnumError {
                kind: "idempotency",
                value: s.to_owned(),
                expected: "provider-native, check-before-act, at-most-once",
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn classes_are_ordered_from_read_to_destructive() {
        let mut shuffled = vec![
            EffectClass::Destructive,
            EffectClass::Read,
            EffectClass::MutateIrreversible,
            EffectClass::MutateReversible,
        ];
        shuffled.sort();
        assert_eq!(shuffled, EffectClass::ALL.to_vec());
    }

    #[test]
    fn wire_names_round_trip_through_serde_and_from_str() {
        for class in EffectClass::ALL {
            let json = serde_json::to_string(&class).unwrap();
            assert_eq!(json, format!("\"{}\"", class.as_str()));
            assert_eq!(class.as_str().parse::<EffectClass>().unwrap(), class);
        }
        for idem in Idempotency::ALL {
            let json = serde_json::to_string(&idem).unwrap();
            assert_eq!(json, format!("\"{}\"", idem.as_str()));
            assert_eq!(idem.as_str().parse::<Idempotency>().unwrap(), idem);
        }
    }

    #[test]
    fn unknown_names_are_rejected_with_the_choices() {
        let err = "Read".parse::<EffectClass>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown effect class `Read`, expected one of: read, mutate-reversible, mutate-irreversible, destructive"
        );
        assert!("once".parse::<Idempotency>().is_err());
        assert!(serde_json::from_str::<EffectClass>("\"mutate_reversible\"").is_err());
    }
}

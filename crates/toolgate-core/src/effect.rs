//! What a tool does to the world (its effect class) and what happens when the
//! same call is made twice (its idempotency contract).

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

crate::wire_enum!(EffectClass, "effect class", {
    Read => "read",
    MutateReversible => "mutate-reversible",
    MutateIrreversible => "mutate-irreversible",
    Destructive => "destructive",
});

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

crate::wire_enum!(Idempotency, "idempotency", {
    ProviderNative => "provider-native",
    CheckBeforeAct => "check-before-act",
    AtMostOnce => "at-most-once",
});

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

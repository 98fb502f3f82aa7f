//! Enums that travel as kebab-case words (config files, JSON, flags).

/// A word that names no variant of a wire enum.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} `{value}`, expected one of: {}", expected.join(", "))]
pub struct ParseEnumError {
    kind: &'static str,
    value: String,
    expected: &'static [&'static str],
}

impl ParseEnumError {
    /// `value` is not a `kind`; `expected` lists the words that are.
    pub fn new(kind: &'static str, value: &str, expected: &'static [&'static str]) -> Self {
        ParseEnumError {
            kind,
            value: value.to_owned(),
            expected,
        }
    }
}

/// Gives a fieldless enum its wire names: `ALL`, `NAMES`, `as_str`,
/// `Display` and `FromStr` (errors are [`ParseEnumError`] naming `kind`).
/// Serde names are declared on the enum itself and must agree (tests check).
#[macro_export]
macro_rules! wire_enum {
    ($ty:ident, $kind:literal, { $($variant:ident => $name:literal),+ $(,)? }) => {
        impl $ty {
            /// Every variant, in declaration order.
            pub const ALL: [$ty; [$($name),+].len()] = [$($ty::$variant),+];
            /// The wire names, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$($name),+];

            /// The wire name.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $name),+
                }
            }
        }

        impl ::std::fmt::Display for $ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::std::str::FromStr for $ty {
            type Err = $crate::ParseEnumError;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::ALL
                    .into_iter()
                    .find(|v| v.as_str() == s)
                    .ok_or_else(|| $crate::ParseEnumError::new($kind, s, Self::NAMES))
            }
        }
    };
}

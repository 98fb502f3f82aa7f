//! The four layers and the rules, together, and the named presets.

use std::path::Path;

use serde::{Deserialize, Serialize};
use toolgate_core::EffectClass;

use crate::access::AccessPolicy;
use crate::command::{CommandPolicy, ParseFallback};
use crate::path::PathPolicy;
use crate::resource::ResourcePolicy;
use crate::rules::PermissionRules;

/// A named policy: the same layers, different effect-class caps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyPreset {
    /// Everything up to destructive.
    Permissive,
    /// Up to mutate-irreversible (the default).
    Standard,
    /// Up to mutate-reversible; unparseable scripts are refused.
    Strict,
    /// Read only; unparseable scripts are refused.
    Readonly,
}

impl PolicyPreset {
    /// The effect-class cap of the preset.
    pub fn cap(self) -> EffectClass {
        match self {
            PolicyPreset::Permissive => EffectClass::Destructive,
            PolicyPreset::Standard => EffectClass::MutateIrreversible,
            PolicyPreset::Strict => EffectClass::MutateReversible,
            PolicyPreset::Readonly => EffectClass::Read,
        }
    }

    /// What happens to a script the command layer cannot analyse.
    pub fn parse_fallback(self) -> ParseFallback {
        match self {
            PolicyPreset::Permissive | PolicyPreset::Standard => ParseFallback::Sandbox,
            PolicyPreset::Strict | PolicyPreset::Readonly => ParseFallback::Deny,
        }
    }
}

toolgate_core::wire_enum!(PolicyPreset, "policy", {
    Permissive => "permissive",
    Standard => "standard",
    Strict => "strict",
    Readonly => "readonly",
});

/// Every layer of a policy. Replace one layer with the `with_*` methods; the
/// others keep what they had.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Policy {
    /// Where the defaults came from, for display.
    pub preset: Option<PolicyPreset>,
    /// Path arguments.
    pub paths: PathPolicy,
    /// Commands inside shell scripts.
    pub commands: CommandPolicy,
    /// Output and file caps.
    pub resources: ResourcePolicy,
    /// Which tools are active.
    pub access: AccessPolicy,
    /// Allow / ask / deny by tool name.
    pub rules: PermissionRules,
}

impl Policy {
    /// The layers of `preset`, with `~` in path patterns taken from `home`.
    pub fn preset(preset: PolicyPreset, home: Option<&Path>) -> Self {
        Policy {
            preset: Some(preset),
            paths: PathPolicy::standard(home),
            commands: CommandPolicy::standard().with_parse_fallback(preset.parse_fallback()),
            resources: ResourcePolicy::default(),
            access: AccessPolicy::capped(preset.cap()),
            rules: PermissionRules::standard(),
        }
    }

    /// The standard preset for the current user (`$HOME`).
    pub fn standard() -> Self {
        let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
        Policy::preset(PolicyPreset::Standard, home.as_deref())
    }

    /// Replaces the path layer.
    pub fn with_paths(mut self, paths: PathPolicy) -> Self {
        self.paths = paths;
        self
    }

    /// Replaces the command layer.
    pub fn with_commands(mut self, commands: CommandPolicy) -> Self {
        self.commands = commands;
        self
    }

    /// Replaces the resource layer.
    pub fn with_resources(mut self, resources: ResourcePolicy) -> Self {
        self.resources = resources;
        self
    }

    /// Replaces the access layer (its cap included: a custom access policy
    /// without a cap has none).
    pub fn with_access(mut self, access: AccessPolicy) -> Self {
        self.access = access;
        self
    }

    /// Replaces the permission rules.
    pub fn with_rules(mut self, rules: PermissionRules) -> Self {
        self.rules = rules;
        self
    }
}

impl Default for Policy {
    fn default() -> Self {
        Policy::standard()
    }
}

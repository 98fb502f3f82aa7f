//! Named selections of built-in tools.

use serde::{Deserialize, Serialize};

/// Every built-in tool, by name.
pub const BUILTIN_TOOLS: &[&str] = &[
    "read",
    "write",
    "edit",
    "apply_patch",
    "grep",
    "find",
    "ls",
    "bash",
    "process_start",
    "process_list",
    "process_read",
    "process_write",
    "process_kill",
    "memory_append",
    "memory_replace",
    "memory_search",
    "memory_read",
    "neuron_status",
    "neuron_disk",
    "neuron_memory",
    "neuron_packages",
    "neuron_env",
    "snapshot",
    "elevated",
];

/// A named selection of built-in tools. Tools of external MCP servers are not
/// selected by presets (their names are not known in advance).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ToolPreset {
    /// read, write, edit, bash.
    Coding,
    /// read, grep, find, ls.
    Readonly,
    /// read, bash.
    Minimal,
    /// Every built-in except `elevated`.
    Admin,
}

impl ToolPreset {
    /// The tool names in the preset.
    pub fn tools(self) -> &'static [&'static str] {
        match self {
            ToolPreset::Coding => &["read", "write", "edit", "bash"],
            ToolPreset::Readonly => &["read", "grep", "find", "ls"],
            ToolPreset::Minimal => &["read", "bash"],
            // `elevated` is last in BUILTIN_TOOLS: it runs on the host
            // outside the sandbox and is in no preset.
            ToolPreset::Admin => &BUILTIN_TOOLS[..BUILTIN_TOOLS.len() - 1],
        }
    }

    /// Whether the preset selects the tool `name`.
    pub fn contains(self, name: &str) -> bool {
        self.tools().contains(&name)
    }
}

crate::wire_enum!(ToolPreset, "tool preset", {
    Coding => "coding",
    Readonly => "readonly",
    Minimal => "minimal",
    Admin => "admin",
});

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn presets_select_their_tools() {
        assert_eq!(
            ToolPreset::Coding.tools(),
            ["read", "write", "edit", "bash"]
        );
        assert_eq!(ToolPreset::Readonly.tools(), ["read", "grep", "find", "ls"]);
        assert_eq!(ToolPreset::Minimal.tools(), ["read", "bash"]);
        let admin = ToolPreset::Admin.tools();
        assert_eq!(admin.len(), BUILTIN_TOOLS.len() - 1);
        assert!(!ToolPreset::Admin.contains("elevated"));
        assert_eq!(BUILTIN_TOOLS.last(), Some(&"elevated"));
        assert!(ToolPreset::Admin.contains("process_write"));
        for preset in ToolPreset::ALL {
            assert!(preset.tools().iter().all(|t| BUILTIN_TOOLS.contains(t)));
            assert!(!preset.contains("elevated"), "{preset} selects elevated");
            assert_eq!(preset.as_str().parse::<ToolPreset>(), Ok(preset));
            assert_eq!(serde_json::to_value(preset).unwrap(), preset.as_str());
        }
        assert!("everything".parse::<ToolPreset>().is_err());
    }
}

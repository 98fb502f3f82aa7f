//! Whose checkpoints a call sees: the workspace's canonical roots (in
//! order) and its agent id.
//!
//! Attack: every session of a user shares one state directory and (from
//! the command line and over MCP alike) the agent id `cli`. Keyed by agent
//! alone, the agent of workspace B could pass workspace A's checkpoint id
//! and read A's file names from the diff ("deleted"), confirm a guess of
//! A's file contents by writing the guess at the same path ("modified" or
//! not), or inherit A's hashes for files of the same name, size and mtime.
//! A checkpoint belongs to one scope, and a call reaches only its own.

use std::path::PathBuf;

use sha2::{Digest, Sha256};

use super::manifest::Manifest;

/// Hex characters of the scope digest in a directory name (128 bits: no
/// two scopes of one state directory collide by chance; a collision would
/// still be refused by [`Scope::owns`]).
const DIR_NAME_HEX: usize = 32;

/// What the digest of a scope starts with, so it can never equal a digest
/// of anything else toolgate hashes.
const DOMAIN: &[u8] = b"toolgate snapshot scope v1\0";

/// The owner of a set of checkpoints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    agent: String,
    roots: Vec<PathBuf>,
}

impl Scope {
    /// The scope of `agent` working in `roots`, which must be canonical
    /// (the workspace's, as its jails opened them): another spelling of
    /// the same directory is another scope, never a way into this one.
    pub fn new(agent: &str, roots: &[PathBuf]) -> Scope {
        Scope {
            agent: agent.to_owned(),
            roots: roots.to_vec(),
        }
    }

    pub fn agent(&self) -> &str {
        &self.agent
    }

    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// The directory name of the scope's checkpoints: a digest of the
    /// agent and the roots. Each part is length-prefixed, so `["/a", "/b"]`
    /// and `["/a\0/b"]` (or agent `x` with root `y` and agent `xy`) differ.
    pub fn dir_name(&self) -> String {
        let mut hasher = Sha256::new();
        hasher.update(DOMAIN);
        let mut part = |bytes: &[u8]| {
            hasher.update((bytes.len() as u64).to_le_bytes());
            hasher.update(bytes);
        };
        part(self.agent.as_bytes());
        part(&(self.roots.len() as u64).to_le_bytes());
        for root in &self.roots {
            part(root.as_os_str().as_encoded_bytes());
        }
        let digest = hasher.finalize();
        let hex = toolgate_core::text::hex(&digest);
        hex[..DIR_NAME_HEX].to_owned()
    }

    /// Whether `manifest` was taken in this scope, by what it records.
    /// Checked on every load besides the directory it was found in, so a
    /// manifest that lands in the wrong directory (a digest collision, a
    /// copy by hand) is still not shown to another workspace.
    pub fn owns(&self, manifest: &Manifest) -> bool {
        manifest.agent == self.agent && manifest.roots == self.roots
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn scope(agent: &str, roots: &[&str]) -> Scope {
        let roots: Vec<PathBuf> = roots.iter().map(PathBuf::from).collect();
        Scope::new(agent, &roots)
    }

    #[test]
    fn different_roots_order_or_agent_are_different_directories() {
        let cases = [
            scope("cli", &["/w/a"]),
            scope("cli", &["/w/b"]),
            scope("cli", &["/w/a", "/w/b"]),
            scope("cli", &["/w/b", "/w/a"]),
            scope("cli", &["/w/a\0/w/b"]),
            scope("cli", &[]),
            scope("mcp", &["/w/a"]),
            // Agent and first root must not run together.
            scope("cli/w/a", &[]),
            scope("", &["cli", "/w/a"]),
        ];
        let names: Vec<String> = cases.iter().map(Scope::dir_name).collect();
        for (i, name) in names.iter().enumerate() {
            assert_eq!(name.len(), DIR_NAME_HEX);
            assert!(name.bytes().all(|b| b.is_ascii_hexdigit()), "{name}");
            for (j, other) in names.iter().enumerate().skip(i + 1) {
                assert_ne!(name, other, "{:?} vs {:?}", cases[i], cases[j]);
            }
        }
        // Stable: the same scope finds its directory again in the next process.
        assert_eq!(scope("cli", &["/w/a"]).dir_name(), names[0]);
    }

    #[test]
    fn a_scope_owns_only_manifests_of_its_agent_and_roots() {
        let manifest = |agent: &str, roots: &[&str]| Manifest {
            id: "x".into(),
            agent: agent.into(),
            taken_ns: 0,
            roots: roots.iter().map(PathBuf::from).collect(),
            files: BTreeMap::new(),
        };
        let a = scope("cli", &["/w/a", "/w/c"]);
        assert!(a.owns(&manifest("cli", &["/w/a", "/w/c"])));
        for (agent, roots) in [
            ("cli", &["/w/b"][..]),
            ("cli", &["/w/a"]),
            ("cli", &["/w/c", "/w/a"]),
            ("cli", &["/w/a", "/w/c", "/w/d"]),
            ("mcp", &["/w/a", "/w/c"]),
        ] {
            assert!(!a.owns(&manifest(agent, roots)), "{agent} {roots:?}");
        }
    }
}

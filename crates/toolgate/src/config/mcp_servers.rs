//! `[[mcp_servers]]`: the external MCP servers whose tools toolgate governs.
//!
//! Servers come from the user's file and a trusted project file (in that
//! order), or from `TOOLGATE_MCP_SERVERS`, a JSON array of the same objects,
//! which replaces them all. An untrusted project file cannot add one: a
//! server is a program toolgate starts or a host it sends requests to.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use toolgate_mcp::gateway::{ServerConfig, check_servers};

use super::{ConfigError, Environment};

/// Default of `mcp_defer_threshold`: above this many external tools, they
/// are found through `mcp_find_tools` instead of listed.
pub const DEFAULT_DEFER_THRESHOLD: usize = 10;

/// A file that holds a secret (a token, a header value, a client secret,
/// an environment value) must not be readable by other users.
pub fn check_secret_mode(servers: &[ServerConfig], path: &Path) -> Result<(), ConfigError> {
    let Some(server) = servers.iter().find(|s| s.has_secret()) else {
        return Ok(());
    };
    let mode = std::fs::metadata(path)
        .map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?
        .mode();
    if mode & 0o077 != 0 {
        return Err(ConfigError::Policy {
            origin: path.to_owned(),
            message: format!(
                "MCP server `{}` has a secret (a token, header, client secret or env value) but \
                 this file is readable by other users (mode {:o}); run `chmod 600 {}`",
                server.name,
                mode & 0o777,
                path.display()
            ),
        });
    }
    Ok(())
}

/// The servers in force: `TOOLGATE_MCP_SERVERS` when set, else the files'.
pub fn resolve(
    from_files: Vec<ServerConfig>,
    env: &Environment,
    origin: &Path,
) -> Result<Vec<ServerConfig>, ConfigError> {
    let (servers, origin) = match env.var("TOOLGATE_MCP_SERVERS") {
        Some(json) => {
            let servers: Vec<ServerConfig> =
                serde_json::from_str(json).map_err(|e| ConfigError::Env {
                    name: "TOOLGATE_MCP_SERVERS",
                    // The value may hold tokens: never echoed.
                    value: "<redacted>".to_owned(),
                    message: format!(
                        "expected a JSON array of MCP server objects such as \
                         [{{\"name\": \"git\", \"kind\": \"stdio\", \"command\": \"mcp-server-git\"}}]: {e}"
                    ),
                })?;
            (servers, Path::new("TOOLGATE_MCP_SERVERS"))
        }
        None => (from_files, origin),
    };
    check_servers(&servers).map_err(|e| ConfigError::Policy {
        origin: origin.to_owned(),
        message: e.to_string(),
    })?;
    Ok(servers)
}

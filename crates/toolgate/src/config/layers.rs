//! The layers built from a configuration: the workspace roots, the policy
//! and the filesystem rules of a sandbox-runtime settings file.

use std::path::{Path, PathBuf};

use toolgate_policy::command::CommandPolicy;
use toolgate_policy::{AccessPolicy, PathPolicy, PathRules, PermissionRules, Policy, PolicyPreset};
use toolgate_sandbox::egress::SandboxRuntimeSettings;
use toolgate_sandbox::{FilesystemRules, RootError, RootMap};

use super::{CommandsSection, ConfigError, ConfigFile, Environment, Overrides};

/// The filesystem lists of a sandbox-runtime settings file as absolute
/// paths (`~/` is the home directory, relative paths start at the
/// configuration's directory), and what of the file is not applied.
pub(super) fn filesystem_rules(
    settings: &SandboxRuntimeSettings,
    base_dir: &Path,
    home: Option<&Path>,
) -> (FilesystemRules, Vec<String>) {
    let resolve = |entries: &[String]| -> Vec<PathBuf> {
        entries
            .iter()
            .filter_map(|entry| match (entry.strip_prefix("~/"), home) {
                (Some(rest), Some(home)) => Some(home.join(rest)),
                (Some(_), None) => None,
                (None, _) => Some(base_dir.join(entry)),
            })
            .collect()
    };
    let mut notes: Vec<String> = settings
        .warnings
        .iter()
        .map(|w| format!("{}: {w}", settings.path.display()))
        .collect();
    if !settings.allow_read.is_empty() {
        notes.push(format!(
            "{}: filesystem.allowRead is not applied: toolgate reads are confined to the roots, \
             and denyRead entries are masked whole",
            settings.path.display()
        ));
    }
    let rules = FilesystemRules::new(
        resolve(&settings.deny_read),
        resolve(&settings.deny_write),
        resolve(&settings.allow_write),
    );
    (rules, notes)
}

/// The workspace roots (`--root` hints over the file's `roots`, default
/// the working directory) and the alias map they were resolved with.
pub(super) fn resolve_roots(
    file: &ConfigFile,
    overrides: &Overrides,
    env: &Environment,
    base_dir: &Path,
    origin: &Path,
) -> Result<(Vec<PathBuf>, RootMap), ConfigError> {
    let roots_error = |e: RootError| ConfigError::Policy {
        origin: origin.to_owned(),
        message: e.to_string(),
    };
    let mut map = RootMap::new();
    for (name, path) in file.root_aliases.iter().flatten() {
        map.insert(name, path.clone()).map_err(roots_error)?;
    }
    for definition in &overrides.root_aliases {
        map.insert_definition(definition)
            .map_err(|e| ConfigError::Flag {
                flag: "--root-alias",
                message: e.to_string(),
            })?;
    }
    // `--root name=/abs/path` defines the alias and selects it.
    let mut hints = Vec::with_capacity(overrides.roots.len());
    for hint in &overrides.roots {
        match hint.split_once('=') {
            Some((name, _)) => {
                map.insert_definition(hint).map_err(|e| ConfigError::Flag {
                    flag: "--root",
                    message: e.to_string(),
                })?;
                hints.push(name.to_owned());
            }
            None => hints.push(hint.clone()),
        }
    }
    let roots = if !hints.is_empty() {
        map.resolve_all(&hints, &env.cwd)
            .map_err(|e| ConfigError::Flag {
                flag: "--root",
                message: e.to_string(),
            })?
    } else {
        match &file.roots {
            Some(hints) => map.resolve_all(hints, base_dir).map_err(roots_error)?,
            None => vec![std::fs::canonicalize(&env.cwd).unwrap_or_else(|_| env.cwd.clone())],
        }
    };
    Ok((roots, map))
}

/// The policy of `preset` with the file's sections over it.
pub(super) fn build_policy(
    file: &ConfigFile,
    preset: PolicyPreset,
    home: Option<&Path>,
) -> Result<Policy, String> {
    let mut policy = Policy::preset(preset, home);
    if let Some(access) = &file.access {
        policy = policy.with_access(AccessPolicy {
            allow: access.allow.clone(),
            deny: access.deny.clone(),
            cap: access.cap,
        });
    }
    if let Some(paths) = &file.paths {
        let mut rules = if paths.defaults {
            PathRules::default()
        } else {
            PathRules {
                deny: Vec::new(),
                ..PathRules::default()
            }
        };
        rules.allow.extend(paths.allow.iter().cloned());
        rules.deny.extend(paths.deny.iter().cloned());
        rules.workspace_roots = paths.workspace_roots;
        rules.temp_dir = paths.temp_dir;
        let layer =
            PathPolicy::new(rules, home, std::env::temp_dir()).map_err(|e| e.to_string())?;
        policy = policy.with_paths(layer);
    }
    if let Some(commands) = &file.commands {
        policy = policy.with_commands(command_layer(commands, preset)?);
    }
    if let Some(resources) = file.resources {
        policy = policy.with_resources(resources);
    }
    if !file.rules.is_empty() {
        let mut rules = PermissionRules::standard();
        for rule in &file.rules {
            rules.push(rule.clone());
        }
        policy = policy.with_rules(rules);
    }
    Ok(policy)
}

/// The command layer of `[commands]`.
fn command_layer(section: &CommandsSection, preset: PolicyPreset) -> Result<CommandPolicy, String> {
    let fallback = section.on_parse_error.unwrap_or(preset.parse_fallback());
    let mut layer = if section.defaults {
        CommandPolicy::standard().with_parse_fallback(fallback)
    } else {
        CommandPolicy::new(&[], &[], fallback).map_err(|e| e.to_string())?
    };
    for binary in &section.deny {
        layer = layer.deny_binary(binary).map_err(|e| e.to_string())?;
    }
    for pattern in &section.deny_patterns {
        layer = layer.deny_pattern(pattern).map_err(|e| e.to_string())?;
    }
    Ok(layer)
}

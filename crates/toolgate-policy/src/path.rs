//! PathPolicy: glob allow/deny over every path argument of a call.
//!
//! Paths are made absolute against the caller's cwd and normalised lexically
//! (`.` and `..` folded) before matching, so `src/../../etc/shadow` is checked
//! as `/etc/shadow`. This layer sees strings: a symlink inside an allowed root
//! that points elsewhere is stopped by the file jail and the sandbox, which are
//! the boundary. Deny always beats allow.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};

use crate::PolicyError;

/// The path layer as configured: patterns plus the two implicit allowances.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PathRules {
    /// Globs of allowed paths (`~/` is the home directory).
    pub allow: Vec<String>,
    /// Globs of denied paths; checked first.
    pub deny: Vec<String>,
    /// Allow everything under the workspace roots.
    pub workspace_roots: bool,
    /// Allow everything under the temp dir. Off by default: the file tools
    /// reach only inside the workspace roots (the jail) and commands get a
    /// private /tmp of their own, so allowing the host's temp dir here would
    /// only make this layer say "allow" for calls the jail then refuses.
    pub temp_dir: bool,
}

impl Default for PathRules {
    fn default() -> Self {
        PathRules {
            allow: Vec::new(),
            // Kernel interfaces (process memory, devices) and the usual
            // credential stores: reading them leaks secrets, writing them
            // takes over the host or the user's accounts.
            deny: [
                "/proc/**",
                "/sys/**",
                "/dev/**",
                "/etc/shadow",
                "/etc/gshadow",
                "~/.ssh/**",
                "~/.aws/**",
                "~/.gnupg/**",
                "~/.config/gcloud/**",
                "~/.kube/**",
            ]
            .map(str::to_owned)
            .to_vec(),
            workspace_roots: true,
            temp_dir: false,
        }
    }
}

/// Compiled path rules.
#[derive(Debug, Clone)]
pub struct PathPolicy {
    rules: PathRules,
    home: Option<PathBuf>,
    temp_dir: PathBuf,
    allow: CompiledGlobs,
    deny: CompiledGlobs,
}

/// The path layer's verdict on one path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathVerdict {
    /// Allowed; says by what.
    Allowed {
        /// The normalised path.
        path: PathBuf,
        /// The root, temp dir or pattern that allowed it.
        by: String,
    },
    /// Refused; says why.
    Denied {
        /// The normalised path.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

impl PathPolicy {
    /// The default rules, with `~` taken from `home` and the system temp dir.
    pub fn standard(home: Option<&Path>) -> Self {
        // The default patterns are literals known to compile.
        match PathPolicy::new(PathRules::default(), home, std::env::temp_dir()) {
            Ok(policy) => policy,
            Err(_) => PathPolicy {
                rules: PathRules::default(),
                home: home.map(Path::to_owned),
                temp_dir: std::env::temp_dir(),
                allow: CompiledGlobs::default(),
                deny: CompiledGlobs::deny_everything(),
            },
        }
    }

    /// Compiles `rules`; `~/` in a pattern is `home` (patterns with `~` are
    /// dropped when there is no home directory).
    pub fn new(
        rules: PathRules,
        home: Option<&Path>,
        temp_dir: PathBuf,
    ) -> Result<Self, PolicyError> {
        Ok(PathPolicy {
            home: home.map(Path::to_owned),
            allow: CompiledGlobs::new(&rules.allow, home)?,
            deny: CompiledGlobs::new(&rules.deny, home)?,
            temp_dir,
            rules,
        })
    }

    /// The rules this policy was built from.
    pub fn rules(&self) -> &PathRules {
        &self.rules
    }

    /// Checks `path` (absolute, or relative to `cwd`) for a caller whose
    /// workspace roots are `roots`.
    pub fn check(&self, path: &Path, cwd: &Path, roots: &[PathBuf]) -> PathVerdict {
        if path.as_os_str().as_encoded_bytes().contains(&0) {
            // A NUL truncates the path in every syscall: what is checked
            // would not be what is opened.
            return PathVerdict::Denied {
                path: path.to_owned(),
                reason: "the path contains a NUL byte".to_owned(),
            };
        }
        let path = match self.expand_home(path) {
            Ok(expanded) => normalize(&expanded, cwd),
            Err(reason) => {
                return PathVerdict::Denied {
                    path: path.to_owned(),
                    reason,
                };
            }
        };
        if let Some(pattern) = self.deny.first_match(&path) {
            return PathVerdict::Denied {
                reason: format!(
                    "`{}` matches the denied pattern `{pattern}`",
                    path.display()
                ),
                path,
            };
        }
        let by = if let Some(root) = roots
            .iter()
            .find(|r| self.rules.workspace_roots && path.starts_with(normalize(r, cwd)))
        {
            format!("workspace root {}", root.display())
        } else if self.rules.temp_dir && path.starts_with(&self.temp_dir) {
            format!("temp dir {}", self.temp_dir.display())
        } else if let Some(pattern) = self.allow.first_match(&path) {
            format!("pattern `{pattern}`")
        } else {
            return PathVerdict::Denied {
                reason: self.outside(&path, roots),
                path,
            };
        };
        PathVerdict::Allowed { path, by }
    }
}

impl PathPolicy {
    /// Why `path` is allowed by nothing: it names the places that are.
    fn outside(&self, path: &Path, roots: &[PathBuf]) -> String {
        let mut places = Vec::new();
        if self.rules.workspace_roots {
            let list: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
            places.push(if list.is_empty() {
                "the workspace roots (none is set)".to_owned()
            } else {
                format!("the workspace roots ({})", list.join(", "))
            });
        }
        if self.rules.temp_dir {
            places.push(format!("the temp dir {}", self.temp_dir.display()));
        }
        places.push("every allowed pattern".to_owned());
        let last = places.pop().unwrap_or_default();
        let places = if places.is_empty() {
            last
        } else {
            format!("{} and {last}", places.join(", "))
        };
        format!(
            "`{}` is outside {places}; use a path inside a workspace root",
            path.display()
        )
    }

    /// `~` and `~/x` as the home directory, as a tool that expands them
    /// would open them; `~user` is refused rather than guessed.
    fn expand_home(&self, path: &Path) -> Result<PathBuf, String> {
        let bytes = path.as_os_str().as_encoded_bytes();
        if bytes.first() != Some(&b'~') {
            return Ok(path.to_owned());
        }
        let rest = &bytes[1..];
        match (&self.home, rest.first()) {
            (Some(home), None) => Ok(home.clone()),
            (Some(home), Some(b'/')) => {
                let rest = std::ffi::OsStr::from_bytes(&rest[1..]);
                Ok(home.join(rest))
            }
            _ => Err(format!(
                "`{}` starts with `~`, which names a home directory this policy cannot resolve; use an absolute or relative path",
                path.display()
            )),
        }
    }
}

pub use toolgate_core::normalize_path as normalize;

#[derive(Debug, Clone, Default)]
struct CompiledGlobs {
    patterns: Vec<String>,
    set: GlobSet,
}

impl CompiledGlobs {
    fn new(patterns: &[String], home: Option<&Path>) -> Result<Self, PolicyError> {
        let mut builder = GlobSetBuilder::new();
        let mut kept = Vec::new();
        for pattern in patterns {
            let expanded = match (pattern.strip_prefix("~/"), home) {
                (Some(rest), Some(home)) => format!("{}/{rest}", home.display()),
                (Some(_), None) => continue,
                (None, _) => pattern.clone(),
            };
            builder.add(compile(pattern, &expanded)?);
            // `dir/**` also covers `dir` itself: denying ~/.ssh/** must deny
            // listing ~/.ssh too.
            if let Some(dir) = expanded.strip_suffix("/**") {
                builder.add(compile(pattern, dir)?);
                kept.push(pattern.clone());
            }
            kept.push(pattern.clone());
        }
        let set = builder.build().map_err(|e| PolicyError::InvalidPattern {
            pattern: patterns.join(", "),
            message: e.to_string(),
        })?;
        Ok(CompiledGlobs {
            patterns: kept,
            set,
        })
    }

    fn deny_everything() -> Self {
        let mut builder = GlobSetBuilder::new();
        if let Ok(glob) = Glob::new("**") {
            builder.add(glob);
        }
        CompiledGlobs {
            patterns: vec!["**".to_owned()],
            set: builder.build().unwrap_or_default(),
        }
    }

    fn first_match(&self, path: &Path) -> Option<&str> {
        let index = self.set.matches(path).into_iter().min()?;
        self.patterns.get(index).map(String::as_str)
    }
}

fn compile(original: &str, expanded: &str) -> Result<Glob, PolicyError> {
    GlobBuilder::new(expanded)
        // `*` stays inside one path component; `**` crosses them.
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| PolicyError::InvalidPattern {
            pattern: original.to_owned(),
            message: e.to_string(),
        })
}

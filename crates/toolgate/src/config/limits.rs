//! `[limits]`: the resource limits of every sandboxed command.
//!
//! ```toml
//! [limits]
//! memory = "4GiB"        # the whole command (cgroup), or per process (RLIMIT_DATA)
//! processes = 1024       # processes and threads of the whole command
//! file_size = "4GiB"     # largest file a command may write
//! cpu_seconds = 14400    # CPU time of each process
//! cpu_percent = 200      # CPU share of the whole command, in percent of one CPU
//! open_files = 8192      # descriptors of each process
//! cgroups = true         # false: rlimits and the pid-namespace cap only
//! ```
//!
//! Sizes are bytes, or a string with a unit (`"512MiB"`, `"4GiB"`, `"1.5G"`); any
//! limit may be `"unlimited"`. A key left out keeps its default
//! ([`ResourceLimits::recommended`]). An unknown key is an error that names the key
//! meant. An untrusted project file may only lower limits ([`restrict`]).

use std::collections::BTreeMap;

use serde::Deserialize;
use toolgate_sandbox::runner::ResourceLimits;

/// The keys of `[limits]`, for messages.
const KEYS: [&str; 7] = [
    "memory",
    "processes",
    "file_size",
    "cpu_seconds",
    "cpu_percent",
    "open_files",
    "cgroups",
];

/// One limit as written: a number, or `"unlimited"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// At most this much.
    At(u64),
    /// No limit.
    Unlimited,
}

impl Limit {
    fn value(self) -> Option<u64> {
        match self {
            Limit::At(value) => Some(value),
            Limit::Unlimited => None,
        }
    }
}

/// `[limits]` as written; `None` keeps the default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(try_from = "BTreeMap<String, toml::Value>")]
pub struct LimitsSection {
    pub memory: Option<Limit>,
    pub processes: Option<Limit>,
    pub file_size: Option<Limit>,
    pub cpu_seconds: Option<Limit>,
    pub cpu_percent: Option<Limit>,
    pub open_files: Option<Limit>,
    pub cgroups: Option<bool>,
}

impl TryFrom<BTreeMap<String, toml::Value>> for LimitsSection {
    type Error = String;

    fn try_from(table: BTreeMap<String, toml::Value>) -> Result<Self, String> {
        let mut section = LimitsSection::default();
        for (key, value) in table {
            let size = || parse_size(&key, &value).map(Some);
            let count = || parse_count(&key, &value).map(Some);
            match key.as_str() {
                "memory" => section.memory = size()?,
                "file_size" => section.file_size = size()?,
                "processes" => section.processes = count()?,
                "cpu_seconds" => section.cpu_seconds = count()?,
                "cpu_percent" => section.cpu_percent = count()?,
                "open_files" => section.open_files = count()?,
                "cgroups" => {
                    section.cgroups = Some(value.as_bool().ok_or_else(|| {
                        format!("[limits] cgroups: expected true or false, got {value}")
                    })?);
                }
                other => {
                    let hint = toolgate_core::suggest::did_you_mean(other, KEYS);
                    return Err(format!(
                        "unknown key `{other}` in [limits]{hint} (the keys are: {})",
                        KEYS.join(", ")
                    ));
                }
            }
        }
        Ok(section)
    }
}

fn parse_count(key: &str, value: &toml::Value) -> Result<Limit, String> {
    match value {
        toml::Value::Integer(n) if *n > 0 => Ok(Limit::At(n.unsigned_abs())),
        toml::Value::String(s) if s == "unlimited" => Ok(Limit::Unlimited),
        _ => Err(format!(
            "[limits] {key}: expected a positive integer or \"unlimited\", got {value}"
        )),
    }
}

fn parse_size(key: &str, value: &toml::Value) -> Result<Limit, String> {
    let bad = || {
        format!(
            "[limits] {key}: expected bytes (an integer) or a size like \"512MiB\" or \
             \"4GiB\", or \"unlimited\"; got {value}"
        )
    };
    match value {
        toml::Value::Integer(n) if *n > 0 => Ok(Limit::At(n.unsigned_abs())),
        toml::Value::String(s) if s == "unlimited" => Ok(Limit::Unlimited),
        toml::Value::String(s) => size_in_bytes(s).map(Limit::At).ok_or_else(bad),
        _ => Err(bad()),
    }
}

/// `"512MiB"`, `"4GiB"`, `"1.5G"`, `"100k"`: binary units (K, M, G, T with or without
/// `iB`/`B`, any case), a plain number is bytes.
fn size_in_bytes(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return None,
    };
    let bytes = number * (1u64 << shift) as f64;
    (bytes >= 1.0 && bytes < u64::MAX as f64).then_some(bytes as u64)
}

/// Human form of a byte count: `4 GiB`, `512 MiB`, `1048576 bytes`.
pub fn show_bytes(bytes: u64) -> String {
    for (shift, unit) in [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{} {unit}", bytes >> shift);
        }
    }
    format!("{bytes} bytes")
}

impl LimitsSection {
    /// The limits of commands: the defaults with this section's values on top.
    pub fn resolve(&self) -> ResourceLimits {
        let mut limits = ResourceLimits::recommended();
        let apply = |slot: &mut Option<u64>, limit: Option<Limit>| {
            if let Some(limit) = limit {
                *slot = limit.value();
            }
        };
        apply(&mut limits.memory_bytes, self.memory);
        apply(&mut limits.processes, self.processes);
        apply(&mut limits.file_size_bytes, self.file_size);
        apply(&mut limits.cpu_seconds, self.cpu_seconds);
        apply(&mut limits.cpu_percent, self.cpu_percent);
        apply(&mut limits.open_files, self.open_files);
        limits.skip_cgroups = self.cgroups == Some(false);
        limits
    }
}

/// What of an untrusted project's `[limits]` is kept over the user's (`base`, or the
/// defaults): each limit at most the user's, and cgroups never turned off. Attack: a
/// cloned repository whose `toolgate.toml` says `processes = "unlimited"` or
/// `cgroups = false`, so that a fork bomb in its build script takes the machine down.
pub fn restrict(
    project: LimitsSection,
    base: Option<&LimitsSection>,
    ignored: &mut Vec<String>,
) -> LimitsSection {
    let own = base.cloned().unwrap_or_default();
    let effective = own.resolve();
    let mut section = own.clone();
    let mut lower = |name: &str,
                     theirs: Option<Limit>,
                     ours: Option<u64>,
                     slot: &mut Option<Limit>,
                     bytes: bool| {
        let Some(theirs) = theirs else {
            return;
        };
        let show = |v: u64| if bytes { show_bytes(v) } else { v.to_string() };
        match (theirs, ours) {
            (Limit::At(t), Some(o)) if t > o => {
                ignored.push(format!("[limits] {name} = {} (above {})", show(t), show(o)));
            }
            (Limit::Unlimited, Some(o)) => {
                ignored.push(format!(
                    "[limits] {name} = \"unlimited\" (above {})",
                    show(o)
                ));
            }
            _ => *slot = Some(theirs),
        }
    };
    lower(
        "memory",
        project.memory,
        effective.memory_bytes,
        &mut section.memory,
        true,
    );
    lower(
        "processes",
        project.processes,
        effective.processes,
        &mut section.processes,
        false,
    );
    lower(
        "file_size",
        project.file_size,
        effective.file_size_bytes,
        &mut section.file_size,
        true,
    );
    lower(
        "cpu_seconds",
        project.cpu_seconds,
        effective.cpu_seconds,
        &mut section.cpu_seconds,
        false,
    );
    lower(
        "cpu_percent",
        project.cpu_percent,
        effective.cpu_percent,
        &mut section.cpu_percent,
        false,
    );
    lower(
        "open_files",
        project.open_files,
        effective.open_files,
        &mut section.open_files,
        false,
    );
    match project.cgroups {
        Some(false) if !effective.skip_cgroups => {
            ignored
                .push("[limits] cgroups = false (the limits would hold per process only)".into());
        }
        Some(cgroups) => section.cgroups = Some(cgroups),
        None => {}
    }
    section
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn section(text: &str) -> Result<LimitsSection, String> {
        #[derive(Deserialize)]
        struct File {
            limits: LimitsSection,
        }
        toml::from_str::<File>(text)
            .map(|f| f.limits)
            .map_err(|e| e.message().to_owned())
    }

    #[test]
    fn sizes_counts_and_unlimited_parse_and_typos_name_the_key_meant() {
        assert_eq!(
            section(
                "[limits]\nmemory = \"512MiB\"\nprocesses = 64\nfile_size = 4096\ncpu_seconds = \"unlimited\"\ncgroups = false\n"
            ),
            Ok(LimitsSection {
                memory: Some(Limit::At(512 << 20)),
                processes: Some(Limit::At(64)),
                file_size: Some(Limit::At(4096)),
                cpu_seconds: Some(Limit::Unlimited),
                cgroups: Some(false),
                ..LimitsSection::default()
            })
        );
        for (text, bytes) in [
            ("4GiB", 4 << 30),
            ("1.5G", 3 << 29),
            ("100k", 102_400),
            ("7", 7),
            ("2 MB", 2 << 20),
        ] {
            assert_eq!(size_in_bytes(text), Some(bytes), "{text}");
        }
        for text in ["", "GiB", "-1G", "4 parsecs", "0"] {
            assert_eq!(size_in_bytes(text), None, "{text}");
        }
        let error = section("[limits]\nmemroy = \"1GiB\"\n").unwrap_err();
        assert!(
            error.starts_with("unknown key `memroy` in [limits]; did you mean `memory`?"),
            "{error}"
        );
        let error = section("[limits]\nprocesses = -5\n").unwrap_err();
        assert!(error.contains("expected a positive integer"), "{error}");
        let error = section("[limits]\nmemory = \"lots\"\n").unwrap_err();
        assert!(error.contains("a size like \"512MiB\""), "{error}");
    }

    #[test]
    fn the_section_overrides_the_defaults_key_by_key() {
        let limits = section("[limits]\nprocesses = 64\nopen_files = \"unlimited\"\n")
            .unwrap()
            .resolve();
        let defaults = ResourceLimits::recommended();
        assert_eq!(
            limits,
            ResourceLimits {
                processes: Some(64),
                open_files: None,
                ..defaults
            }
        );
    }

    #[test]
    fn an_untrusted_file_only_lowers_limits() {
        let project = section(
            "[limits]\nmemory = \"1TiB\"\nprocesses = 32\nfile_size = \"unlimited\"\ncpu_percent = 50\ncgroups = false\n",
        )
        .unwrap();
        let mut ignored = Vec::new();
        let kept = restrict(project, None, &mut ignored);
        assert_eq!(
            kept,
            LimitsSection {
                processes: Some(Limit::At(32)),
                cpu_percent: Some(Limit::At(50)),
                ..LimitsSection::default()
            }
        );
        let memory = show_bytes(ResourceLimits::recommended().memory_bytes.unwrap());
        assert_eq!(
            ignored,
            [
                format!("[limits] memory = 1 TiB (above {memory})"),
                "[limits] file_size = \"unlimited\" (above 4 GiB)".to_owned(),
                "[limits] cgroups = false (the limits would hold per process only)".to_owned(),
            ]
        );
        // Against a user who raised a limit, the project may go up to the user's.
        let base = section("[limits]\nprocesses = 4096\n").unwrap();
        let project = section("[limits]\nprocesses = 2048\n").unwrap();
        let mut ignored = Vec::new();
        let kept = restrict(project, Some(&base), &mut ignored);
        assert_eq!(
            (kept.processes, ignored),
            (Some(Limit::At(2048)), Vec::<String>::new())
        );
    }
}

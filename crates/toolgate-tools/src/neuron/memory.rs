//! `neuron_memory`: memory of the host and the cgroup limit of this process.
//!
//! The limit that kills a command is usually the cgroup's, not the host's:
//! a container on a large host may have little. Both are shown. cgroup v2 is
//! read first (`memory.max`); on hosts where the memory controller is still
//! on v1 (hybrid setups), `memory.limit_in_bytes` is read instead.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use toolgate_core::{CallContext, EffectClass, ToolError, ToolOutput, ToolSpec, TypedTool};

use super::GROUP;
use crate::facts_schema;
use crate::fs::{blocking, human_bytes};

/// cgroup v1 reports "no limit" as a huge page-aligned number; anything at
/// or above this is treated as unlimited.
const V1_UNLIMITED: u64 = 1 << 60;

/// Arguments of `neuron_memory` (none).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryArgs {}

/// The `neuron_memory` tool.
#[derive(Debug, Default)]
pub struct MemoryTool;

impl MemoryTool {
    /// `neuron_memory`, reading this machine's /proc and /sys.
    pub fn new() -> MemoryTool {
        MemoryTool
    }
}

/// From /proc/meminfo, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MemInfo {
    pub total: u64,
    pub available: u64,
}

/// The memory controller of this process's cgroup, in bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CgroupMemory {
    pub version: u8,
    /// The cgroup as /proc/self/cgroup names it.
    pub path: String,
    /// The tightest limit of the cgroup and its ancestors; `None`: unlimited.
    pub limit: Option<u64>,
    /// What the cgroup uses now, when the kernel says.
    pub current: Option<u64>,
}

#[async_trait]
impl TypedTool for MemoryTool {
    type Args = MemoryArgs;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "neuron_memory",
            "Show the host's total and available memory and the memory limit of the cgroup \
             this runtime (and its commands) live in, if one is set. Use it before memory-heavy \
             work (large builds, test suites, data loading) or when a command was killed \
             (exit 137 / SIGKILL) to check whether it hit the limit.",
            EffectClass::Read,
        )
        .group(GROUP)
        .parallel_safe(true)
        .output_schema(facts_schema())
    }

    async fn run(&self, _args: MemoryArgs, _ctx: &CallContext) -> Result<ToolOutput, ToolError> {
        blocking(|| {
            let meminfo = std::fs::read_to_string("/proc/meminfo")
                .map_err(|e| ToolError::Failed(format!("cannot read /proc/meminfo: {e}")))?;
            let info = parse_meminfo(&meminfo).ok_or_else(|| {
                ToolError::Failed("/proc/meminfo has no MemTotal/MemAvailable lines".into())
            })?;
            let cgroup = std::fs::read_to_string("/proc/self/cgroup")
                .ok()
                .and_then(|text| cgroup_memory(&text, Path::new("/sys/fs/cgroup")));
            Ok(render(info, cgroup.as_ref()))
        })
        .await
    }
}

fn render(info: MemInfo, cgroup: Option<&CgroupMemory>) -> ToolOutput {
    let mut text = format!(
        "host: {} available of {}\n",
        human_bytes(info.available),
        human_bytes(info.total)
    );
    match cgroup {
        Some(cg) => {
            let limit = cg.limit.map_or("no limit".to_owned(), |l| {
                format!("limit {}", human_bytes(l))
            });
            text.push_str(&format!("cgroup v{} {}: {limit}", cg.version, cg.path));
            if let Some(current) = cg.current {
                text.push_str(&format!(", using {}", human_bytes(current)));
            }
            text.push('\n');
        }
        None => text.push_str("cgroup: no memory controller found\n"),
    }
    // What a command can really get: the smaller of the two.
    let effective = match cgroup.and_then(|cg| cg.limit.map(|l| (l, cg.current.unwrap_or(0)))) {
        Some((limit, current)) => info.available.min(limit.saturating_sub(current)),
        None => info.available,
    };
    text.push_str(&format!("usable now: about {}\n", human_bytes(effective)));
    ToolOutput::text(text).with_structured(json!({
        "mem_total_bytes": info.total,
        "mem_available_bytes": info.available,
        "cgroup": cgroup.map(|cg| json!({
            "version": cg.version,
            "path": cg.path,
            "limit_bytes": cg.limit,
            "current_bytes": cg.current,
        })),
        "usable_bytes": effective,
    }))
}

/// The facts of [`render`].
fn facts_schema() -> Value {
    let mut cgroup = facts_schema::object(
        json!({
            "version": {"enum": [1, 2], "description": "cgroup v1 or v2."},
            "path": {"type": "string", "description": "The cgroup, as /proc/self/cgroup names it."},
            "limit_bytes": {
                "type": ["integer", "null"],
                "description": "The tightest limit of the cgroup and its ancestors; null: none.",
            },
            "current_bytes": {
                "type": ["integer", "null"],
                "description": "What the cgroup uses now; null when the kernel does not say.",
            },
        }),
        &["version", "path", "limit_bytes", "current_bytes"],
    );
    cgroup["type"] = json!(["object", "null"]);
    cgroup["description"] = json!(
        "The memory controller of the cgroup this runtime and its commands live in; null when \
         none was found."
    );
    facts_schema::object(
        json!({
            "mem_total_bytes": {"type": "integer", "description": "The host's memory."},
            "mem_available_bytes": {
                "type": "integer",
                "description": "The host's available memory (MemAvailable).",
            },
            "cgroup": cgroup,
            "usable_bytes": {
                "type": "integer",
                "description": "About what a command can still use: the smaller of the host's \
                                available memory and what the cgroup limit leaves.",
            },
        }),
        &[
            "mem_total_bytes",
            "mem_available_bytes",
            "cgroup",
            "usable_bytes",
        ],
    )
}

/// MemTotal and MemAvailable of /proc/meminfo (given in kB), in bytes.
pub(crate) fn parse_meminfo(text: &str) -> Option<MemInfo> {
    let field = |name: &str| {
        text.lines().find_map(|line| {
            let rest = line.strip_prefix(name)?.strip_prefix(':')?;
            let kib: u64 = rest.split_whitespace().next()?.parse().ok()?;
            Some(kib.saturating_mul(1024))
        })
    };
    Some(MemInfo {
        total: field("MemTotal")?,
        available: field("MemAvailable")?,
    })
}

/// The memory controller of the cgroup that `proc_cgroup` (the text of
/// /proc/self/cgroup) names, read below `sys` (normally /sys/fs/cgroup).
pub(crate) fn cgroup_memory(proc_cgroup: &str, sys: &Path) -> Option<CgroupMemory> {
    let v2 = proc_cgroup
        .lines()
        .find_map(|line| line.strip_prefix("0::"))
        .and_then(|path| {
            // Pure v2 mounts at /sys/fs/cgroup; hybrid setups at .../unified.
            [sys.to_owned(), sys.join("unified")]
                .into_iter()
                .filter(|base| base.join("cgroup.controllers").exists())
                .find_map(|base| read_controller(2, path, &base, "memory.max", "memory.current"))
        });
    v2.or_else(|| {
        let path = proc_cgroup.lines().find_map(|line| {
            let mut parts = line.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            controllers
                .split(',')
                .any(|c| c == "memory")
                .then_some(path)
        })?;
        read_controller(
            1,
            path,
            &sys.join("memory"),
            "memory.limit_in_bytes",
            "memory.usage_in_bytes",
        )
    })
}

fn read_controller(
    version: u8,
    path: &str,
    base: &Path,
    limit_file: &str,
    current_file: &str,
) -> Option<CgroupMemory> {
    let mut dir = base.join(path.trim_start_matches('/'));
    // In a cgroup namespace the path may not match the mount: then the
    // mount's root is this process's cgroup.
    if !dir.is_dir() {
        dir = base.to_owned();
    }
    let read = |file: PathBuf| -> Option<String> {
        Some(std::fs::read_to_string(file).ok()?.trim().to_owned())
    };
    let mut found = false;
    let mut limit: Option<u64> = None;
    let mut at: Option<&Path> = Some(&dir);
    while let Some(current_dir) = at.filter(|d| d.starts_with(base)) {
        if let Some(value) = read(current_dir.join(limit_file)) {
            found = true;
            let parsed = value.parse::<u64>().ok().filter(|v| *v < V1_UNLIMITED);
            // "max" (v2) or a huge number (v1): this level sets no limit.
            if let Some(v) = parsed {
                limit = Some(limit.map_or(v, |l| l.min(v)));
            }
        }
        at = current_dir.parent();
    }
    let current = read(dir.join(current_file)).and_then(|v| v.parse().ok());
    (found || current.is_some()).then(|| CgroupMemory {
        version,
        path: path.to_owned(),
        limit,
        current,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_is_parsed_in_bytes() {
        let text = "MemTotal:       24683584 kB\nMemFree:        18854800 kB\n\
                    MemAvailable:   24049624 kB\n";
        assert_eq!(
            parse_meminfo(text),
            Some(MemInfo {
                total: 24_683_584 * 1024,
                available: 24_049_624 * 1024
            })
        );
        assert_eq!(parse_meminfo("MemTotal: 1 kB\n"), None);
    }

    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (rel, text) in files {
            let path = dir.path().join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    #[test]
    fn cgroups_are_read_by_version_and_tightest_limit() {
        struct Case {
            name: &'static str,
            proc: &'static str,
            files: &'static [(&'static str, &'static str)],
            want: Option<(u8, Option<u64>, Option<u64>)>,
        }
        let cases = [
            Case {
                name: "v2 limit on the process's own cgroup",
                proc: "0::/agent.slice/run\n",
                files: &[
                    ("cgroup.controllers", "memory\n"),
                    ("agent.slice/run/memory.max", "1073741824\n"),
                    ("agent.slice/run/memory.current", "4096\n"),
                ],
                want: Some((2, Some(1 << 30), Some(4096))),
            },
            Case {
                name: "v2 tighter limit on an ancestor",
                proc: "0::/a/b\n",
                files: &[
                    ("cgroup.controllers", ""),
                    ("a/memory.max", "2048\n"),
                    ("a/b/memory.max", "max\n"),
                ],
                want: Some((2, Some(2048), None)),
            },
            Case {
                name: "v2 unlimited",
                proc: "0::/a\n",
                files: &[("cgroup.controllers", ""), ("a/memory.max", "max\n")],
                want: Some((2, None, None)),
            },
            Case {
                name: "v2 in a namespace: path missing, mount root used",
                proc: "0::/elsewhere\n",
                files: &[("cgroup.controllers", ""), ("memory.max", "512\n")],
                want: Some((2, Some(512), None)),
            },
            Case {
                name: "hybrid: no memory in unified, v1 memory controller",
                proc: "4:memory:/api/x\n0::/\n",
                files: &[
                    ("unified/cgroup.controllers", ""),
                    (
                        "memory/api/x/memory.limit_in_bytes",
                        "9223372036854771712\n",
                    ),
                    ("memory/api/memory.limit_in_bytes", "8192\n"),
                    ("memory/api/x/memory.usage_in_bytes", "100\n"),
                ],
                want: Some((1, Some(8192), Some(100))),
            },
            Case {
                name: "nothing mounted",
                proc: "0::/\n",
                files: &[],
                want: None,
            },
        ];
        for case in cases {
            let dir = tree(case.files);
            let got = cgroup_memory(case.proc, dir.path()).map(|c| (c.version, c.limit, c.current));
            assert_eq!(got, case.want, "{}", case.name);
        }
    }

    #[test]
    fn usable_memory_is_the_smaller_of_host_and_cgroup() {
        let info = MemInfo {
            total: 10 << 30,
            available: 8 << 30,
        };
        let cg = CgroupMemory {
            version: 2,
            path: "/x".into(),
            limit: Some(2 << 30),
            current: Some(1 << 30),
        };
        let out = render(info, Some(&cg)).structured.unwrap();
        assert_eq!(out["usable_bytes"], 1u64 << 30);
        let out = render(info, None).structured.unwrap();
        assert_eq!(out["usable_bytes"], 8u64 << 30);
    }
}

//! Which cgroup controllers this toolgate can give its commands, and where.
//!
//! Found once per process from `/proc/self/mountinfo` and `/proc/self/cgroup`:
//!
//! - cgroup v1 (a hierarchy per controller, as on hybrid systems): a controller is usable
//!   where its hierarchy is mounted, toolgate's cgroup in it is visible, and the directory
//!   is writable (root, or a delegated subtree). Command cgroups go right under it.
//! - cgroup v2: a controller must be available to toolgate's cgroup (listed in its
//!   `cgroup.controllers`) and toolgate must be able to enable it for a subtree. A
//!   cgroup that holds processes may not hand controllers to children ("no internal
//!   processes"), so toolgate moves itself into `<own>/toolgate-self` and enables them for
//!   `<own>/toolgate`, which holds the command cgroups. It does this only when it is
//!   alone in its cgroup (started as a systemd unit or scope with `Delegate=yes`, a
//!   container's init): it never moves a process that is not its own. In the v2 root
//!   cgroup (a container with its own cgroup namespace) no move is needed.
//!
//! What could not be used is kept with the reason, for `toolgate doctor`.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::Serialize;

use crate::mountinfo::unescape;

/// A cgroup controller toolgate sets limits with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Controller {
    /// `pids.max`: processes and threads.
    Pids,
    /// `memory.max` / `memory.limit_in_bytes`.
    Memory,
    /// `cpu.max` / `cpu.cfs_quota_us`.
    Cpu,
}

impl Controller {
    const ALL: [Controller; 3] = [Controller::Pids, Controller::Memory, Controller::Cpu];

    /// The kernel's name of the controller.
    pub fn as_str(self) -> &'static str {
        match self {
            Controller::Pids => "pids",
            Controller::Memory => "memory",
            Controller::Cpu => "cpu",
        }
    }
}

/// cgroup v1 (one hierarchy per controller) or v2 (the unified hierarchy).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Version {
    /// A v1 hierarchy.
    #[serde(rename = "cgroup v1")]
    V1,
    /// The unified hierarchy.
    #[serde(rename = "cgroup v2")]
    V2,
}

impl Version {
    /// `cgroup v1` or `cgroup v2`.
    pub fn as_str(self) -> &'static str {
        match self {
            Version::V1 => "cgroup v1",
            Version::V2 => "cgroup v2",
        }
    }
}

/// Where a controller's command cgroups are made, or why it cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    /// The controller.
    pub controller: Controller,
    /// The parent directory of command cgroups and its version, or the reason none.
    pub place: Result<(PathBuf, Version), String>,
}

/// The controllers this toolgate can use for its commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupHost {
    slots: Vec<Slot>,
}

impl CgroupHost {
    /// This process's cgroups, found (and delegated, on v2) at first use; cgroups that a
    /// dead toolgate left behind under them are swept then.
    pub fn get() -> &'static CgroupHost {
        static HOST: OnceLock<CgroupHost> = OnceLock::new();
        HOST.get_or_init(|| {
            let read = |path: &str| fs::read_to_string(path).unwrap_or_default();
            let host =
                CgroupHost::prepare(&read("/proc/self/mountinfo"), &read("/proc/self/cgroup"));
            for slot in &host.slots {
                if let Ok((parent, version)) = &slot.place {
                    super::sweep(parent, *version);
                }
            }
            host
        })
    }

    /// A host on which no controller can be used (`why` for each).
    pub fn unavailable(why: &str) -> CgroupHost {
        CgroupHost {
            slots: Controller::ALL
                .iter()
                .map(|&controller| Slot {
                    controller,
                    place: Err(why.to_owned()),
                })
                .collect(),
        }
    }

    fn prepare(mountinfo: &str, self_cgroup: &str) -> CgroupHost {
        let found = locate(mountinfo, self_cgroup);
        let mut v2_wanted = Vec::new();
        let mut slots = Vec::new();
        for controller in Controller::ALL {
            let place = match found.v1.get(&controller) {
                Some(Ok(dir)) => writable(dir).map(|()| (dir.clone(), Version::V1)),
                Some(Err(why)) => Err(why.clone()),
                None => {
                    v2_wanted.push(controller);
                    continue;
                }
            };
            slots.push(Slot { controller, place });
        }
        if !v2_wanted.is_empty() {
            let delegated = match &found.v2 {
                Some(own) => delegate(own, &v2_wanted),
                None => Err("no cgroup v2 mount".to_owned()),
            };
            for controller in v2_wanted {
                let place = match &delegated {
                    Ok((parent, enabled)) if enabled.contains(&controller) => {
                        Ok((parent.clone(), Version::V2))
                    }
                    Ok(_) => Err(format!(
                        "the {} controller is neither a mounted cgroup v1 hierarchy nor \
                         available to toolgate's cgroup v2",
                        controller.as_str()
                    )),
                    Err(why) => Err(why.clone()),
                };
                slots.push(Slot { controller, place });
            }
        }
        slots.sort_by_key(|slot| slot.controller);
        CgroupHost { slots }
    }

    /// Each controller and where its command cgroups go (or why nowhere).
    pub fn slots(&self) -> &[Slot] {
        &self.slots
    }

    /// Where `controller`'s command cgroups go, or why nowhere.
    pub fn place(&self, controller: Controller) -> Result<(&Path, Version), &str> {
        match self.slots.iter().find(|s| s.controller == controller) {
            Some(Slot {
                place: Ok((dir, version)),
                ..
            }) => Ok((dir, *version)),
            Some(Slot {
                place: Err(why), ..
            }) => Err(why),
            None => Err("not looked for"),
        }
    }

    /// The parent directories that hold `wanted`, each with its version and the wanted
    /// controllers it holds (on v2 one directory holds them all).
    pub(crate) fn parents_for(
        &self,
        wanted: &[Controller],
    ) -> Vec<(PathBuf, Version, Vec<Controller>)> {
        let mut parents: Vec<(PathBuf, Version, Vec<Controller>)> = Vec::new();
        for &controller in wanted {
            let Ok((dir, version)) = self.place(controller) else {
                continue;
            };
            match parents.iter_mut().find(|(d, _, _)| d == dir) {
                Some((_, _, held)) => held.push(controller),
                None => parents.push((dir.to_owned(), version, vec![controller])),
            }
        }
        parents
    }
}

/// What the mount table and `/proc/self/cgroup` say, before anything is written.
#[derive(Debug, Default, PartialEq, Eq)]
struct Located {
    /// v1: toolgate's own cgroup directory per mounted controller, or why not visible.
    v1: BTreeMap<Controller, Result<PathBuf, String>>,
    /// v2: the mount point and toolgate's own cgroup directory under it.
    v2: Option<OwnCgroup>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct OwnCgroup {
    mount: PathBuf,
    dir: PathBuf,
}

fn locate(mountinfo: &str, self_cgroup: &str) -> Located {
    let mut located = Located::default();
    let mut v1_paths: BTreeMap<&str, &str> = BTreeMap::new();
    let mut v2_path = None;
    for line in self_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if controllers.is_empty() {
            v2_path = Some(path);
        } else {
            for controller in controllers.split(',') {
                v1_paths.insert(controller, path);
            }
        }
    }
    for line in mountinfo.lines() {
        let Some((before, after)) = line.split_once(" - ") else {
            continue;
        };
        let fields: Vec<&str> = before.split(' ').collect();
        let rest: Vec<&str> = after.split(' ').collect();
        let (Some(root), Some(mount), Some(fstype)) = (fields.get(3), fields.get(4), rest.first())
        else {
            continue;
        };
        let (root, mount) = (unescape(root.as_bytes()), unescape(mount.as_bytes()));
        match *fstype {
            "cgroup" => {
                let options = rest.get(2).copied().unwrap_or_default();
                for controller in Controller::ALL {
                    if located.v1.contains_key(&controller)
                        || !options.split(',').any(|o| o == controller.as_str())
                    {
                        continue;
                    }
                    let dir = v1_paths
                        .get(controller.as_str())
                        .and_then(|own| under_mount(&mount, &root, own))
                        .ok_or_else(|| {
                            format!(
                                "toolgate's {} cgroup is not visible under {}",
                                controller.as_str(),
                                mount.display()
                            )
                        });
                    located.v1.insert(controller, dir);
                }
            }
            "cgroup2" if located.v2.is_none() => {
                if let Some(dir) = v2_path.and_then(|own| under_mount(&mount, &root, own)) {
                    located.v2 = Some(OwnCgroup { mount, dir });
                }
            }
            _ => {}
        }
    }
    located
}

/// `own` (a cgroup path) as a directory of the mount of hierarchy path `root` at `mount`.
fn under_mount(mount: &Path, root: &Path, own: &str) -> Option<PathBuf> {
    let relative = Path::new(own).strip_prefix(root).ok()?;
    if relative.as_os_str().is_empty() {
        return Some(mount.to_owned());
    }
    Some(mount.join(relative))
}

fn writable(dir: &Path) -> Result<(), String> {
    rustix::fs::access(dir, rustix::fs::Access::WRITE_OK)
        .map_err(|e| format!("cannot create cgroups in {}: {e}", dir.display()))
}

/// Makes `<own>/toolgate` a parent of command cgroups with as many of `wanted` enabled as
/// toolgate's cgroup offers (see the module doc); the parent and what it has enabled.
fn delegate(own: &OwnCgroup, wanted: &[Controller]) -> Result<(PathBuf, Vec<Controller>), String> {
    let failed = |what: &str, path: &Path, e: std::io::Error| {
        format!("cgroup v2: cannot {what} {}: {e}", path.display())
    };
    let available = fs::read_to_string(own.dir.join("cgroup.controllers"))
        .map_err(|e| failed("read", &own.dir.join("cgroup.controllers"), e))?;
    let enabled: Vec<Controller> = wanted
        .iter()
        .copied()
        .filter(|c| available.split_whitespace().any(|a| a == c.as_str()))
        .collect();
    if enabled.is_empty() {
        return Err(format!(
            "cgroup v2: toolgate's cgroup {} offers none of {}",
            own.dir.display(),
            names(wanted)
        ));
    }
    if own.dir != own.mount {
        let procs = fs::read_to_string(own.dir.join("cgroup.procs"))
            .map_err(|e| failed("read", &own.dir.join("cgroup.procs"), e))?;
        let me = std::process::id().to_string();
        if procs.lines().any(|pid| pid.trim() != me) {
            return Err(format!(
                "cgroup v2: toolgate's cgroup {} holds other processes too, so it cannot hand \
                 controllers to command cgroups; start toolgate in a cgroup of its own with \
                 them delegated (e.g. `systemd-run --user --scope -p Delegate=yes toolgate ...`)",
                own.dir.display()
            ));
        }
        let own_leaf = own.dir.join("toolgate-self");
        create_dir(&own_leaf).map_err(|e| failed("create", &own_leaf, e))?;
        fs::write(own_leaf.join("cgroup.procs"), &me)
            .map_err(|e| failed("move toolgate into", &own_leaf, e))?;
    }
    let enable: String = enabled
        .iter()
        .map(|c| format!("+{} ", c.as_str()))
        .collect();
    let control = own.dir.join("cgroup.subtree_control");
    fs::write(&control, enable.trim()).map_err(|e| failed("write", &control, e))?;
    let parent = own.dir.join("toolgate");
    create_dir(&parent).map_err(|e| failed("create", &parent, e))?;
    let control = parent.join("cgroup.subtree_control");
    fs::write(&control, enable.trim()).map_err(|e| failed("write", &control, e))?;
    Ok((parent, enabled))
}

fn create_dir(dir: &Path) -> std::io::Result<()> {
    match fs::create_dir(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(e),
        _ => Ok(()),
    }
}

fn names(controllers: &[Controller]) -> String {
    let names: Vec<&str> = controllers.iter().map(|c| c.as_str()).collect();
    names.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    /// A hybrid host like the CI machine's: v1 hierarchies, a v2 mount without them.
    const HYBRID_MOUNTS: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
38 31 0:35 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn v1_hierarchies_give_each_controller_toolgates_own_cgroup() {
        let cgroup = "8:pids:/\n4:memory:/jobs/a b\n1:cpu,cpuacct:/\n0::/\n";
        let located = locate(HYBRID_MOUNTS, cgroup);
        assert_eq!(
            located.v1,
            BTreeMap::from([
                (Controller::Pids, Ok(PathBuf::from("/sys/fs/cgroup/pids"))),
                (
                    Controller::Memory,
                    Ok(PathBuf::from("/sys/fs/cgroup/memory/jobs/a b"))
                ),
                (
                    Controller::Cpu,
                    Ok(PathBuf::from("/sys/fs/cgroup/cpu,cpuacct"))
                ),
            ])
        );
        assert_eq!(
            located.v2,
            Some(OwnCgroup {
                mount: "/sys/fs/cgroup/unified".into(),
                dir: "/sys/fs/cgroup/unified".into()
            })
        );
    }

    #[test]
    fn a_pure_v2_host_and_a_container_mount_root() {
        let mounts = "27 22 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n";
        let cgroup = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/t.scope\n";
        let located = locate(mounts, cgroup);
        assert!(located.v1.is_empty());
        assert_eq!(
            located.v2.map(|o| o.dir),
            Some(PathBuf::from(
                "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice/t.scope"
            ))
        );
        // A mount of a subtree (a container's view): paths are relative to its root;
        // a cgroup outside the mounted subtree is not visible.
        let mounts = "40 31 0:35 /docker/abc /sys/fs/cgroup/pids ro - cgroup cgroup rw,pids\n";
        let located = locate(mounts, "5:pids:/docker/abc/inner\n");
        assert_eq!(
            located.v1.get(&Controller::Pids),
            Some(&Ok(PathBuf::from("/sys/fs/cgroup/pids/inner")))
        );
        let located = locate(mounts, "5:pids:/elsewhere\n");
        assert!(matches!(located.v1.get(&Controller::Pids), Some(Err(_))));
    }

    #[test]
    fn mountinfo_escapes_are_undone() {}

    #[test]
    fn parents_group_the_controllers_of_one_directory() {
        let host = CgroupHost {
            slots: vec![
                Slot {
                    controller: Controller::Cpu,
                    place: Err("no".into()),
                },
                Slot {
                    controller: Controller::Memory,
                    place: Ok(("/v2/toolgate".into(), Version::V2)),
                },
                Slot {
                    controller: Controller::Pids,
                    place: Ok(("/v2/toolgate".into(), Version::V2)),
                },
            ],
        };
        assert_eq!(
            host.parents_for(&[Controller::Pids, Controller::Memory, Controller::Cpu]),
            vec![(
                PathBuf::from("/v2/toolgate"),
                Version::V2,
                vec![Controller::Pids, Controller::Memory]
            )]
        );
        assert_eq!(host.place(Controller::Cpu), Err("no"));
    }
}

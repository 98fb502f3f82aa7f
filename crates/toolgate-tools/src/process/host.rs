//! What the host's /proc says about a background process and its tree.

use std::collections::BTreeMap;

use rustix::process::{Pid, Signal};

/// `(pid, parent pid, start time in clock ticks since boot)` from
/// `/proc/<pid>/stat`. The command name (field 2) may hold spaces and
/// parentheses, so the fields are counted from its closing `)`.
fn stat(pid: u32) -> Option<(u32, u32, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // fields[0] is field 3 (state): ppid is field 4, starttime field 22.
    let ppid = fields.get(1)?.parse().ok()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((pid, ppid, start))
}

/// When `pid` started (clock ticks since boot); `None` once it is gone.
pub(crate) fn start_ticks(pid: u32) -> Option<u64> {
    stat(pid).map(|(_, _, start)| start)
}

/// `pid` and every process below it, parents before children.
pub(crate) fn tree(pid: u32) -> Vec<u32> {
    let mut children: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(p) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
                continue;
            };
            if let Some((p, parent, _)) = stat(p) {
                children.entry(parent).or_default().push(p);
            }
        }
    }
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        if let Some(kids) = children.get(&out[i]) {
            out.extend(kids);
        }
        i += 1;
    }
    out
}

/// Sends `signal` to every process of the tree under `pid`, and to its group.
///
/// The sandboxed command runs in a session of its own inside bubblewrap's
/// pid namespace, so the group of `pid` (bubblewrap) does not reach it:
/// each process of the tree gets the signal itself, so that a server sees
/// its TERM and can shut down cleanly. Killing bubblewrap then takes the
/// whole namespace with it.
pub(crate) fn signal_tree(pid: u32, signal: Signal) {
    for p in tree(pid).into_iter().rev() {
        if let Some(p) = i32::try_from(p).ok().and_then(Pid::from_raw) {
            let _ = rustix::process::kill_process(p, signal);
        }
    }
    if let Some(group) = i32::try_from(pid).ok().and_then(Pid::from_raw) {
        let _ = rustix::process::kill_process_group(group, signal);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_a_start_time_and_is_the_root_of_its_tree() {
        let me = std::process::id();
        assert!(start_ticks(me).is_some());
        assert_eq!(tree(me)[0], me);
        assert_eq!(start_ticks(u32::MAX), None);
    }
}

//! The doctor's lines on resource limits: each limit, its value, and what holds it on
//! this machine, with a loud line for a limit nothing can hold.

use toolgate_sandbox::runner::{LimitMechanism, ResourceLimits};

use crate::config::limits::show_bytes;

/// One row per limit that is set: `[label, "value: mechanism (note)"]`, the label
/// `limits` on the first.
pub fn rows(limits: &ResourceLimits) -> Vec<[String; 2]> {
    let mechanisms = limits.mechanisms();
    if mechanisms.is_empty() {
        return vec![[
            "limits".to_owned(),
            "none: commands get the host's limits".to_owned(),
        ]];
    }
    mechanisms
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let label = if i == 0 { "limits" } else { "" };
            [label.to_owned(), line(m)]
        })
        .collect()
}

fn line(m: &LimitMechanism) -> String {
    let value = match (m.limit, m.value) {
        (_, None) => "unlimited".to_owned(),
        ("memory" | "file_size" | "address_space", Some(bytes)) => show_bytes(bytes),
        ("cpu_seconds", Some(seconds)) => format!("{seconds} s"),
        ("cpu_percent", Some(percent)) => format!("{percent}% of one CPU"),
        (_, Some(n)) => n.to_string(),
    };
    let note = m
        .note
        .as_deref()
        .map_or_else(String::new, |n| format!(" ({n})"));
    if m.enforced {
        format!("{} {value}: {}{note}", m.limit, m.mechanism)
    } else {
        format!("{} {value}: NOT ENFORCED on this machine{note}", m.limit)
    }
}

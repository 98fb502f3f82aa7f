//! The access layer and every preset's cap, table-driven.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use pretty_assertions::assert_eq;
use toolgate_core::{EffectClass, Idempotency, ToolSpec};
use toolgate_policy::{Access, AccessPolicy, Policy, PolicyPreset};

fn spec(name: &str, class: EffectClass, group: &str) -> ToolSpec {
    let spec = ToolSpec::new(name, "", class).group(group);
    if class == EffectClass::Read {
        spec
    } else {
        spec.idempotency(Idempotency::AtMostOnce)
    }
}

fn native() -> Vec<ToolSpec> {
    vec![
        spec("read", EffectClass::Read, "group:fs"),
        spec("edit", EffectClass::MutateReversible, "group:fs"),
        spec("send", EffectClass::MutateIrreversible, "group:runtime"),
        spec("wipe", EffectClass::Destructive, "group:runtime"),
    ]
}

fn mcp(class: EffectClass) -> ToolSpec {
    spec(
        &format!("gh_{}", class.as_str().replace('-', "_")),
        class,
        "group:mcp",
    )
    .mcp("github")
}

fn verdict(policy: &AccessPolicy, spec: &ToolSpec) -> String {
    match policy.check(spec) {
        Access::Active => "active".to_owned(),
        Access::Inactive { reason } => reason,
    }
}

#[test]
fn every_preset_caps_its_effect_classes() {
    // (preset, highest active class)
    let table = [
        (PolicyPreset::Permissive, EffectClass::Destructive),
        (PolicyPreset::Standard, EffectClass::MutateIrreversible),
        (PolicyPreset::Strict, EffectClass::MutateReversible),
        (PolicyPreset::Readonly, EffectClass::Read),
    ];
    for (preset, highest) in table {
        let access = Policy::preset(preset, None).access;
        for tool in native().iter().chain(EffectClass::ALL.map(mcp).iter()) {
            let expected = if tool.effect_class <= highest {
                "active".to_owned()
            } else {
                format!(
                    "effect class {} exceeds the policy cap {highest}",
                    tool.effect_class
                )
            };
            assert_eq!(verdict(&access, tool), expected, "{preset}: {}", tool.name);
        }
    }
}

#[test]
fn a_policy_without_a_policy_carries_the_standard_cap() {
    assert_eq!(
        Policy::default().access.cap,
        Some(EffectClass::MutateIrreversible)
    );
    assert_eq!(
        verdict(&Policy::default().access, &native()[3]),
        "effect class destructive exceeds the policy cap mutate-irreversible"
    );
}

#[test]
fn lists_groups_exact_names_and_the_mcp_group() {
    let readonly = Some(EffectClass::Read);
    let p = |allow: &[&str], deny: &[&str], cap: Option<EffectClass>| AccessPolicy {
        allow: allow.iter().map(|s| s.to_string()).collect(),
        deny: deny.iter().map(|s| s.to_string()).collect(),
        cap,
    };
    let [read, edit, send, wipe] = native().try_into().unwrap();
    let mcp_read = mcp(EffectClass::Read);
    let mcp_wipe = mcp(EffectClass::Destructive);
    let cap_msg = |c: &str| format!("effect class {c} exceeds the policy cap read");
    let not_listed = "not in the access policy's allow list".to_owned();
    let table: Vec<(AccessPolicy, &ToolSpec, String)> = vec![
        // A custom access policy without a cap has none.
        (p(&[], &[], None), &wipe, "active".into()),
        // Allow lists by name and by group.
        (p(&["read"], &[], None), &read, "active".into()),
        (p(&["read"], &[], None), &edit, not_listed.clone()),
        (p(&["group:fs"], &[], None), &edit, "active".into()),
        (p(&["group:fs"], &[], None), &send, not_listed.clone()),
        // Deny by name or group beats every allow.
        (
            p(&["read"], &["read"], None),
            &read,
            "denied by the access policy entry `read`".into(),
        ),
        (
            p(&["group:fs"], &["edit"], None),
            &edit,
            "denied by the access policy entry `edit`".into(),
        ),
        (
            p(&["edit"], &["group:fs"], None),
            &edit,
            "denied by the access policy entry `group:fs`".into(),
        ),
        // The cap: an exact-name allow passes it, a group allow does not.
        (p(&[], &[], readonly), &edit, cap_msg("mutate-reversible")),
        (p(&["edit"], &[], readonly), &edit, "active".into()),
        (
            p(&["group:fs"], &[], readonly),
            &edit,
            cap_msg("mutate-reversible"),
        ),
        (p(&["wipe"], &[], readonly), &wipe, "active".into()),
        // ... and a deny still beats that exact allow.
        (
            p(&["wipe"], &["wipe"], readonly),
            &wipe,
            "denied by the access policy entry `wipe`".into(),
        ),
        (
            p(&["wipe"], &["group:runtime"], readonly),
            &wipe,
            "denied by the access policy entry `group:runtime`".into(),
        ),
        // An allow list names MCP tools like any other: by exact name or
        // group:mcp; one that names none leaves them out.
        (
            p(&["read"], &[], None),
            &mcp_wipe,
            "not in the access policy's allow list".into(),
        ),
        (
            p(&["read", "group:mcp"], &[], None),
            &mcp_wipe,
            "active".into(),
        ),
        (p(&["group:mcp"], &[], readonly), &mcp_read, "active".into()),
        (
            p(&["read"], &[], readonly),
            &mcp_wipe,
            cap_msg("destructive"),
        ),
        (p(&[], &[], readonly), &mcp_wipe, cap_msg("destructive")),
        // Naming an MCP tool exactly is the operator's choice: it passes the cap.
        (
            p(&["gh_destructive"], &[], readonly),
            &mcp_wipe,
            "active".into(),
        ),
        // The MCP group can be denied as a whole.
        (
            p(&[], &["group:mcp"], None),
            &mcp_read,
            "denied by the access policy entry `group:mcp`".into(),
        ),
    ];
    for (policy, tool, expected) in table {
        assert_eq!(
            verdict(&policy, tool),
            expected,
            "{policy:?} on {}",
            tool.name
        );
    }
}

#[test]
fn replacing_one_layer_keeps_the_others() {
    let strict = Policy::preset(PolicyPreset::Strict, None);
    let custom = strict.clone().with_access(AccessPolicy::default());
    assert_eq!(custom.access.cap, None);
    assert_eq!(
        custom.commands.parse_fallback(),
        strict.commands.parse_fallback()
    );
    assert_eq!(custom.resources, strict.resources);
    assert_eq!(custom.rules, strict.rules);
    assert_eq!(custom.paths.rules(), strict.paths.rules());
}

#[test]
fn policy_preset_wire_names_agree_with_serde() {
    for preset in PolicyPreset::ALL {
        assert_eq!(serde_json::to_value(preset).unwrap(), preset.as_str());
        assert_eq!(preset.as_str().parse::<PolicyPreset>(), Ok(preset));
    }
}

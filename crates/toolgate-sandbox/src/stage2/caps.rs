//! Dropping every capability, also when toolgate runs as root.

use rustix::thread::{
    CapabilitiesSecureBits, CapabilitySet, CapabilitySets, capabilities,
    capability_is_in_bounding_set, clear_ambient_capability_set,
    remove_capability_from_bounding_set, set_capabilities, set_capabilities_secure_bits,
};

use super::Stage2Error;

/// Empties the bounding, ambient, inheritable, permitted and effective
/// sets, then checks that nothing is left that an exec could turn back into
/// a capability.
pub(super) fn drop_all() -> Result<(), Stage2Error> {
    // Bounding set first: as root, exec grants the bounding set again
    // (file capabilities of uid 0), so an empty one is what keeps the
    // command at zero after the exec. Needs CAP_SETPCAP, which we hold
    // only when we have capabilities at all (landlock backend as root);
    // under bwrap `--cap-drop ALL` has already emptied it.
    for bit in 0..64u32 {
        let Some(cap) = CapabilitySet::from_bits(1u64 << bit) else {
            continue;
        };
        if capability_is_in_bounding_set(cap).unwrap_or(false) {
            // A failure is judged by the check at the end.
            let _ = remove_capability_from_bounding_set(cap);
        }
    }
    // Ambient capabilities survive exec for non-setuid programs.
    let _ = clear_ambient_capability_set();
    // Root's uid must not regain capabilities on exec either way.
    let _ = set_capabilities_secure_bits(
        CapabilitiesSecureBits::NO_ROOT | CapabilitiesSecureBits::NO_ROOT_LOCKED,
    );
    set_capabilities(
        None,
        CapabilitySets {
            effective: CapabilitySet::empty(),
            permitted: CapabilitySet::empty(),
            inheritable: CapabilitySet::empty(),
        },
    )
    .map_err(|e| Stage2Error::Setup(format!("cannot drop capabilities: {e}")))?;
    verify()
}

fn verify() -> Result<(), Stage2Error> {
    let sets = capabilities(None)
        .map_err(|e| Stage2Error::Setup(format!("cannot read capabilities: {e}")))?;
    if !sets.effective.is_empty() || !sets.permitted.is_empty() || !sets.inheritable.is_empty() {
        return Err(Stage2Error::Setup(format!(
            "capabilities remain after dropping them: {sets:?}"
        )));
    }
    let uid_zero = rustix::process::geteuid().is_root() || rustix::process::getuid().is_root();
    let bounding_empty = (0..64u32)
        .filter_map(|bit| CapabilitySet::from_bits(1u64 << bit))
        .all(|cap| !capability_is_in_bounding_set(cap).unwrap_or(false));
    let no_root = rustix::thread::capabilities_secure_bits()
        .map(|b| b.contains(CapabilitiesSecureBits::NO_ROOT))
        .unwrap_or(false);
    if uid_zero && !bounding_empty && !no_root {
        // Fail closed: as uid 0 the exec would hand the capabilities back.
        return Err(Stage2Error::Setup(
            "running as uid 0 with a non-empty bounding set and without SECBIT_NOROOT; refusing to exec"
                .into(),
        ));
    }
    Ok(())
}

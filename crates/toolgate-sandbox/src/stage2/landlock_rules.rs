//! Landlock: the filesystem (and, for network `none`, TCP) rules applied to
//! the command where the kernel supports them, and the scopes (ABI 6) that
//! keep its signals and abstract unix sockets inside the sandbox.

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};

use super::{Stage2Args, Stage2Error};
use crate::spec::NetworkMode;

/// The newest ABI this build knows; older kernels get the subset they have.
const ABI_TARGET: ABI = ABI::V6;

pub(super) fn restrict(args: &Stage2Args) -> Result<(), Stage2Error> {
    // A rule needs an open descriptor; paths this machine lacks (/lib32,
    // /dev/shm) simply grant nothing.
    let existing = |paths: &[std::path::PathBuf]| -> Vec<std::path::PathBuf> {
        paths.iter().filter(|p| p.exists()).cloned().collect()
    };
    let (read, write) = (existing(&args.read), existing(&args.write));
    let setup = |e: &dyn std::fmt::Display| Stage2Error::Setup(format!("landlock: {e}"));
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(ABI_TARGET))
        .map_err(|e| setup(&e))?
        // Signals only to processes of this Landlock domain: with the
        // landlock backend the command runs as the caller's uid (often
        // root) beside the host's processes, and would otherwise kill or
        // stop any of them, toolgate itself included. Abstract unix sockets
        // only to listeners of this domain: they have no path for the
        // filesystem rules to deny, so a command could otherwise reach
        // host daemons listening on one (X11, some session buses, container
        // shims). Kernels before ABI 6 lack both (best effort).
        .scope(Scope::from_all(ABI_TARGET))
        .map_err(|e| setup(&e))?;
    if args.network == NetworkMode::None && !args.in_network_namespace {
        // Handled with no rule that allows anything: no TCP bind or connect.
        // Inside bubblewrap's empty network namespace TCP reaches nothing
        // but the namespace's own loopback, where a dev server and its
        // tests talk to each other, so it stays allowed there.
        ruleset = ruleset
            .handle_access(AccessNet::from_all(ABI_TARGET))
            .map_err(|e| setup(&e))?;
    }
    let status = ruleset
        .create()
        .map_err(|e| setup(&e))?
        .add_rules(path_beneath_rules(&read, AccessFs::from_read(ABI_TARGET)))
        .map_err(|e| setup(&e))?
        .add_rules(path_beneath_rules(&write, AccessFs::from_all(ABI_TARGET)))
        .map_err(|e| setup(&e))?
        .restrict_self()
        .map_err(|e| setup(&e))?;
    if status.ruleset == RulesetStatus::NotEnforced && args.in_network_namespace {
        // Under bubblewrap the mount namespace is the filesystem boundary;
        // Landlock is an extra layer that old kernels lack.
        return Ok(());
    }
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err(Stage2Error::Setup(
            "the kernel does not enforce Landlock, and the landlock backend needs it".into(),
        ));
    }
    Ok(())
}

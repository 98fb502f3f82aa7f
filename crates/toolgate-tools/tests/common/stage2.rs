//! Where the tests that run real sandboxed commands find stage 2.

use std::path::{Path, PathBuf};

/// The stage-2 binary next to this test's target dir:
/// `<target>/debug/deps/<test>-<hash>` -> `<target>/debug/toolgate-stage2`.
pub fn stage2() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe
        .parent()
        .and_then(Path::parent)
        .map(|dir| dir.join("toolgate-stage2"))
        .unwrap();
    assert!(
        path.is_file(),
        "the stage-2 binary is missing at {}: build it into the same target dir first with \
         `cargo build -p toolgate --bin toolgate-stage2` (same CARGO_TARGET_DIR)",
        path.display()
    );
    path
}

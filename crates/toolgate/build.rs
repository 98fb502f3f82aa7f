//! Link-time settings of the `toolgate` binary.

use std::path::Path;

fn main() {
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let target_env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    let target_arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let profile = std::env::var("PROFILE").unwrap_or_default();
    // Relative relocations packed (DT_RELR: binutils 2.38 and glibc 2.36 or
    // later; an older linker ignores the option with a warning, and ld adds
    // DT_RELR only when the glibc it links against can load it): the
    // dynamic loader reads a table of about 10 KiB instead of almost 1 MiB
    // at every start, and `toolgate mcp` stays about 3 MB smaller in memory.
    if target_os == "linux" && target_env == "gnu" {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    // The functions a session runs, linked next to each other at the start
    // of the code (the list: toolgate.order, from scripts/orderfile). The
    // kernel maps a page fault's whole neighbourhood of a file (64 KiB of
    // fault-around, whole large folios), so code that runs spread over the
    // 23 MB of machine code keeps most of it resident; packed together it
    // fills a few megabytes and the rest is never mapped in. Only where the
    // toolchain links with its own LLD (x86_64 Linux since Rust 1.90) and
    // no other linker was chosen (GNU ld has no such option), and only in
    // optimised builds, whose symbol names the list holds; a name the build
    // lacks is skipped without a warning, as is a function the list lacks.
    let order = Path::new(env!("CARGO_MANIFEST_DIR")).join("toolgate.order");
    let rustflags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let other_linker = std::env::var_os("RUSTC_LINKER").is_some()
        || ["linker", "fuse-ld", "link-self-contained"]
            .iter()
            .any(|flag| rustflags.contains(flag));
    if target_os == "linux"
        && target_env == "gnu"
        && target_arch == "x86_64"
        && profile == "release"
        && !other_linker
    {
        // -Xlinker passes each argument whole: a path with a comma stays one.
        for arg in [
            format!("--symbol-ordering-file={}", order.display()),
            "--no-warn-symbol-ordering".to_owned(),
        ] {
            println!("cargo:rustc-link-arg-bins=-Xlinker");
            println!("cargo:rustc-link-arg-bins={arg}");
        }
    }
    println!("cargo:rerun-if-changed=toolgate.order");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    println!("cargo:rerun-if-changed=build.rs");
}

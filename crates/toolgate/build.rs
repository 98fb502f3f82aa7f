//! Link-time settings of the `toolgate` binary.

use std::path::Path;

fn main() {
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let target_env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
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
    // fills a few megabytes and the rest is never mapped in. Only in
    // optimised builds, whose symbol names the list holds, and only when the
    // linker takes LLD's options (Rust's own LLD links x86_64 Linux since
    // 1.90; GNU ld has no such option). A name the build lacks is skipped
    // without a warning, as is a function the list lacks.
    let order = Path::new(env!("CARGO_MANIFEST_DIR")).join("toolgate.order");
    if target_os == "linux" && target_env == "gnu" && profile == "release" && links_with_lld() {
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

/// Whether the linker this build uses takes LLD's options: an empty program
/// linked by the same rustc, for the same target, with the same flags and
/// linker, and one of them (a fraction of a second, once per build of this
/// script's inputs).
fn links_with_lld() -> bool {
    let (Some(rustc), Some(target), Some(out)) = (
        std::env::var_os("RUSTC"),
        std::env::var_os("TARGET"),
        std::env::var_os("OUT_DIR"),
    ) else {
        return false;
    };
    let out = Path::new(&out);
    let source = out.join("lld_probe.rs");
    if std::fs::write(&source, "fn main() {}\n").is_err() {
        return false;
    }
    let mut probe = std::process::Command::new(rustc);
    probe
        .arg("--target")
        .arg(target)
        .args([
            "-C",
            "link-arg=-Xlinker",
            "-C",
            "link-arg=--no-warn-symbol-ordering",
        ])
        .arg("-o")
        .arg(out.join("lld_probe"))
        .arg(&source);
    if let Ok(flags) = std::env::var("CARGO_ENCODED_RUSTFLAGS") {
        probe.args(flags.split('\x1f').filter(|flag| !flag.is_empty()));
    }
    if let Some(linker) = std::env::var_os("RUSTC_LINKER") {
        probe
            .arg("-C")
            .arg(format!("linker={}", linker.to_string_lossy()));
    }
    probe
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

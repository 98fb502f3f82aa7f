//! Link-time settings of the `toolgate` binary.

fn main() {
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let target_env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    // Relative relocations packed (DT_RELR: binutils 2.38 and glibc 2.36 or
    // later; an older linker ignores the option with a warning, and ld adds
    // DT_RELR only when the glibc it links against can load it): the
    // dynamic loader reads a table of about 10 KiB instead of almost 1 MiB
    // at every start, and `toolgate mcp` stays about 3 MB smaller in memory.
    if target_os == "linux" && target_env == "gnu" {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    println!("cargo:rerun-if-changed=build.rs");
}

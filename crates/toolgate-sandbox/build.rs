//! The build mark of stage 2 (see `stage2::build_mark`): a digest of this
//! crate's sources and version, the same in every binary built from them. A
//! stand-alone stage-2 binary whose mark differs from the caller's was built
//! from other sources, and is not used.

use std::hash::Hasher;
use std::path::{Path, PathBuf};

fn main() {
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let mut files = Vec::new();
    collect(&root.join("src"), &mut files);
    files.push(root.join("Cargo.toml"));
    files.sort();
    // FNV-1a, 64 bits, twice with different offsets: a mark, not a secret
    // (whoever can write the binary needs no collision).
    let mut a = Fnv(0xcbf2_9ce4_8422_2325);
    let mut b = Fnv(0x6c62_272e_07bb_0142);
    for file in &files {
        let relative = file.strip_prefix(&root).unwrap_or(file);
        let bytes = std::fs::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for h in [&mut a, &mut b] {
            h.write(relative.to_string_lossy().as_bytes());
            h.write(&[0]);
            h.write(&(bytes.len() as u64).to_le_bytes());
            h.write(&bytes);
        }
    }
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    println!(
        "cargo:rustc-env=TOOLGATE_STAGE2_BUILD={version}-{:016x}{:016x}",
        a.finish(),
        b.finish()
    );
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=Cargo.toml");
    println!("cargo:rerun-if-changed=build.rs");
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .path();
        if path.is_dir() {
            collect(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            // Source only: test snapshots pending review do not count.
            files.push(path);
        }
    }
}

struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = (self.0 ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

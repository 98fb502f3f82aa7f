//! Which build a stand-alone stage-2 binary comes from.
//!
//! `toolgate-stage2` holds stage 2 alone: under a megabyte to map and
//! relocate against the tens of megabytes of the whole toolgate binary, so
//! it starts in less than half the time, at every sandboxed command. It is
//! used in place of the caller's own binary only when it comes from the
//! very sources the caller was built from: the two sides of stage 2's
//! arguments and hand-out must agree, and a binary left over from an older
//! build (`cargo build --bin toolgate` rebuilds only toolgate) might not.
//! Every binary that links this crate carries the digest of its sources
//! (build.rs) in a section of its own, read here without running the binary.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Room for the mark: the version and a 128-bit digest, zero-padded.
const LEN: usize = 64;

const MARK: &str = env!("TOOLGATE_STAGE2_BUILD");

/// The section's name, as in the attribute below.
const SECTION: &[u8] = b".toolgate_stage2_build";

#[used]
#[unsafe(link_section = ".toolgate_stage2_build")]
static BUILD: [u8; LEN] = padded(MARK);

const fn padded(mark: &str) -> [u8; LEN] {
    let bytes = mark.as_bytes();
    assert!(bytes.len() <= LEN, "the build mark does not fit");
    let mut out = [0u8; LEN];
    let mut i = 0;
    while i < bytes.len() {
        out[i] = bytes[i];
        i += 1;
    }
    out
}

/// Keeps the section in a binary that runs stage 2: a linker drops what
/// nothing refers to.
pub(super) fn keep() {
    std::hint::black_box(&BUILD);
}

/// Whether `binary` is an ELF file built from the same sources as this one
/// (its build mark equals ours). Anything unreadable or malformed: no.
pub fn same_build(binary: &Path) -> bool {
    File::open(binary)
        .ok()
        .and_then(|file| section(&file, SECTION))
        .is_some_and(|(_, found)| found == std::hint::black_box(&BUILD)[..])
}

/// Where in a 64-bit little-endian ELF file its section `name` lies and its
/// bytes, if it has one of [`LEN`] bytes.
fn section(file: &File, name: &[u8]) -> Option<(u64, Vec<u8>)> {
    let read = |offset: u64, len: usize| {
        let mut bytes = vec![0u8; len];
        file.read_exact_at(&mut bytes, offset).ok().map(|()| bytes)
    };
    let header = read(0, 64)?;
    // Magic, 64-bit, little-endian.
    if header[..6] != *b"\x7fELF\x02\x01" {
        return None;
    }
    let (table_at, entry_len) = (u64_at(&header, 0x28)?, u16_at(&header, 0x3a)?);
    let (count, names_index) = (u16_at(&header, 0x3c)?, u16_at(&header, 0x3e)?);
    if entry_len != 64 || names_index >= count {
        return None;
    }
    let table = read(table_at, usize::from(count) * 64)?;
    let entry = |i: usize| &table[i * 64..(i + 1) * 64];
    // sh_name at 0, sh_offset at 0x18, sh_size at 0x20.
    let names_entry = entry(usize::from(names_index));
    let names_len = usize::try_from(u64_at(names_entry, 0x20)?).ok()?;
    if names_len > 1 << 20 {
        return None;
    }
    let names = read(u64_at(names_entry, 0x18)?, names_len)?;
    (0..usize::from(count)).find_map(|i| {
        let entry = entry(i);
        let start = usize::try_from(u32::from_le_bytes(entry[..4].try_into().ok()?)).ok()?;
        let rest = names.get(start..)?;
        let this = &rest[..rest.iter().position(|&c| c == 0)?];
        if this != name || u64_at(entry, 0x20)? != LEN as u64 {
            return None;
        }
        let at = u64_at(entry, 0x18)?;
        Some((at, read(at, LEN)?))
    })
}

fn u16_at(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
}

fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binary_of_this_build_carries_its_mark() {
        // The test executable links this crate: it carries the mark.
        let exe = std::env::current_exe().unwrap();
        assert!(same_build(&exe), "{} lacks the build mark", exe.display());
    }

    #[test]
    fn another_build_or_no_elf_is_not_the_same_build() {
        let dir = tempfile::tempdir().unwrap();
        let exe = std::env::current_exe().unwrap();
        let (at, mark) = section(&File::open(&exe).unwrap(), SECTION).unwrap();
        assert_eq!(mark, BUILD);
        // The same binary with one byte of its mark changed.
        let mut other = std::fs::read(&exe).unwrap();
        other[usize::try_from(at).unwrap() + 3] ^= 1;
        let changed = dir.path().join("other");
        std::fs::write(&changed, &other).unwrap();
        assert!(!same_build(&changed));
        // A script, an empty file, a missing file.
        for (name, bytes) in [("script", &b"#!/bin/sh\n"[..]), ("empty", &b""[..])] {
            std::fs::write(dir.path().join(name), bytes).unwrap();
            assert!(!same_build(&dir.path().join(name)));
        }
        assert!(!same_build(&dir.path().join("missing")));
        // /bin/sh: an ELF file without the section.
        assert!(!same_build(Path::new("/bin/sh")));
    }
}

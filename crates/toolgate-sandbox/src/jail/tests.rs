#![allow(clippy::unwrap_used, clippy::expect_used)]

//! Unit tests of the jail's pieces; the escape attempts live in
//! `tests/jail_attacks.rs`.

use std::ffi::OsStr;
use std::fs;
use std::io;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use super::atomic::{NEW_FILE_MODE, temp_name};
use super::error::is_escape;
use super::{EntryKind, Jail, JailError};

fn setup() -> (tempfile::TempDir, Jail) {
    let tmp = tempfile::tempdir().unwrap();
    fs::create_dir(tmp.path().join("w")).unwrap();
    let jail = Jail::open(&tmp.path().join("w")).unwrap();
    (tmp, jail)
}

#[test]
fn relative_accepts_inside_paths() {
    let (_tmp, jail) = setup();
    let root = jail.root().to_path_buf();
    assert_eq!(jail.relative(Path::new("a/b")).unwrap(), Path::new("a/b"));
    assert_eq!(
        jail.relative(Path::new("./a/./b/")).unwrap(),
        Path::new("a/b")
    );
    assert_eq!(
        jail.relative(Path::new("a/../b")).unwrap(),
        Path::new("a/../b")
    );
    assert_eq!(jail.relative(&root.join("x/y")).unwrap(), Path::new("x/y"));
    assert_eq!(jail.relative(&root).unwrap(), Path::new(""));
    assert_eq!(jail.relative(Path::new(".")).unwrap(), Path::new(""));
}

#[test]
fn relative_refuses_outside_paths() {
    let (_tmp, jail) = setup();
    let root = jail.root().to_path_buf();
    let sibling = PathBuf::from(format!("{}2/f", root.display()));
    for path in [
        Path::new(".."),
        Path::new("../w/x"),
        Path::new("a/../../x"),
        Path::new("/etc/passwd"),
        &root.join("../x"),
        &sibling,
    ] {
        let err = jail.relative(path).unwrap_err();
        assert!(matches!(err, JailError::Escape { .. }), "{path:?}: {err}");
    }
    let err = jail.relative(Path::new("a\0b")).unwrap_err();
    assert!(matches!(err, JailError::NulByte { .. }));
}

#[test]
fn open_requires_an_existing_directory() {
    let (tmp, _jail) = setup();
    let missing = Jail::open(&tmp.path().join("nope")).unwrap_err();
    assert!(matches!(missing, JailError::NotFound { .. }), "{missing}");
    fs::write(tmp.path().join("file"), b"x").unwrap();
    let file = Jail::open(&tmp.path().join("file")).unwrap_err();
    assert!(matches!(file, JailError::NotADirectory { .. }), "{file}");
}

#[test]
fn messages_name_the_path_and_say_what_to_do() {
    let (_tmp, jail) = setup();
    let escape = jail.relative(Path::new("../x")).unwrap_err().to_string();
    assert_eq!(
        escape,
        format!(
            "`../x` is outside the workspace root {}; use a path inside it",
            jail.root().display()
        )
    );
    let missing = jail.read(Path::new("nope"), 10).unwrap_err().to_string();
    assert!(missing.starts_with("`nope` does not exist"), "{missing}");
    let root_dir = jail.write(Path::new("."), b"").unwrap_err().to_string();
    assert!(root_dir.starts_with("`.` is a directory"), "{root_dir}");
}

#[test]
fn temp_names_are_hidden_distinct_and_bounded() {
    let a = temp_name(OsStr::new("f.txt"));
    let b = temp_name(OsStr::new("f.txt"));
    assert_ne!(a, b);
    let a = a.to_string_lossy().into_owned();
    assert!(a.starts_with(".f.txt.toolgate-"), "{a}");
    assert!(a.ends_with(".tmp"), "{a}");
    assert!(a.contains(&format!("-{}-", std::process::id())), "{a}");
    let long = "x".repeat(255);
    assert!(temp_name(OsStr::new(&long)).len() < 200);
}

#[test]
fn escape_detection_needs_capstd_error_not_real_eacces() {
    let custom = io::Error::new(io::ErrorKind::PermissionDenied, "a path led outside");
    assert!(is_escape(&custom));
    assert!(!is_escape(&io::Error::from_raw_os_error(13)));
    assert!(!is_escape(&io::Error::from(io::ErrorKind::NotFound)));
}

#[test]
fn basic_round_trip() {
    let (_tmp, jail) = setup();
    jail.write(Path::new("d/e/f.txt"), b"hello").unwrap();
    assert_eq!(jail.read(Path::new("d/e/f.txt"), 5).unwrap(), b"hello");
    let stat = jail.stat(Path::new("d/e/f.txt")).unwrap();
    assert_eq!((stat.kind, stat.size), (EntryKind::File, 5));
    assert!(stat.modified.is_some());
    assert_eq!(stat.mode & 0o777, NEW_FILE_MODE & !current_umask());
    assert!(jail.exists(Path::new("d/e")).unwrap());
    assert!(!jail.exists(Path::new("d/x")).unwrap());
    assert!(!jail.exists(Path::new("d/e/f.txt/x")).unwrap());
    let names: Vec<_> = jail
        .list(Path::new("d"))
        .unwrap()
        .into_iter()
        .map(|e| (e.name, e.kind))
        .collect();
    assert_eq!(names, vec![("e".to_string(), EntryKind::Dir)]);
}

/// The umask as seen by a file this test creates (never changes it).
fn current_umask() -> u32 {
    let tmp = tempfile::tempdir().unwrap();
    let probe = tmp.path().join("probe");
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .unwrap();
    0o666 & !fs::metadata(&probe).unwrap().permissions().mode()
}

#[test]
fn read_refuses_directories_and_fifos() {
    let (tmp, jail) = setup();
    jail.mkdir_all(Path::new("d")).unwrap();
    let err = jail.read(Path::new("d"), 10).unwrap_err();
    assert!(matches!(err, JailError::IsADirectory { .. }), "{err}");
    let fifo = tmp.path().join("w/fifo");
    rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, rustix::fs::Mode::from(0o644)).unwrap();
    let err = jail.read(Path::new("fifo"), 10).unwrap_err();
    assert!(matches!(err, JailError::Io { .. }), "{err}");
    let err = jail.write(Path::new("fifo"), b"x").unwrap_err();
    assert!(matches!(err, JailError::Io { .. }), "{err}");
}

#[test]
fn write_follows_inside_symlinks_and_stops_loops() {
    let (tmp, jail) = setup();
    let w = tmp.path().join("w");
    fs::create_dir_all(w.join("x/y")).unwrap();
    // `d -> x/y` and `d/f -> ../z`: the target is resolved physically (x/z).
    symlink("x/y", w.join("d")).unwrap();
    symlink("../z", w.join("x/y/f")).unwrap();
    jail.write(Path::new("d/f"), b"through").unwrap();
    assert_eq!(fs::read(w.join("x/z")).unwrap(), b"through");
    assert!(fs::symlink_metadata(w.join("x/y/f")).unwrap().is_symlink());
    symlink("loop2", w.join("loop1")).unwrap();
    symlink("loop1", w.join("loop2")).unwrap();
    let err = jail.write(Path::new("loop1"), b"x").unwrap_err();
    assert!(err.to_string().contains("symbolic links"), "{err}");
}

#[test]
fn mkdir_all_and_remove() {
    let (_tmp, jail) = setup();
    jail.mkdir_all(Path::new("a/b/c")).unwrap();
    jail.mkdir_all(Path::new("a/b/c")).unwrap();
    jail.mkdir_all(Path::new("a/b/../b2")).unwrap();
    assert!(jail.exists(Path::new("a/b2")).unwrap());
    jail.write(Path::new("a/file"), b"x").unwrap();
    let err = jail.mkdir_all(Path::new("a/file/sub")).unwrap_err();
    assert!(matches!(err, JailError::NotADirectory { .. }), "{err}");
    let err = jail.remove(Path::new("a")).unwrap_err();
    assert!(matches!(err, JailError::Io { .. }), "{err}");
    jail.remove(Path::new("a/b/c")).unwrap();
    assert!(!jail.exists(Path::new("a/b/c")).unwrap());
    let err = jail.remove(Path::new("")).unwrap_err();
    assert!(matches!(err, JailError::IsADirectory { .. }), "{err}");
}

#[test]
fn create_new_and_rename() {
    let (_tmp, jail) = setup();
    jail.create_new(Path::new("n/new"), b"1").unwrap();
    let err = jail.create_new(Path::new("n/new"), b"2").unwrap_err();
    assert!(matches!(err, JailError::AlreadyExists { .. }), "{err}");
    assert_eq!(jail.read(Path::new("n/new"), 10).unwrap(), b"1");
    jail.rename(Path::new("n/new"), Path::new("m/moved"))
        .unwrap();
    assert!(!jail.exists(Path::new("n/new")).unwrap());
    let err = jail
        .rename(Path::new("n/new"), Path::new("m/x"))
        .unwrap_err();
    assert!(matches!(err, JailError::NotFound { .. }), "{err}");
    jail.rename(Path::new("m"), Path::new("n/m")).unwrap();
    assert_eq!(jail.read(Path::new("n/m/moved"), 10).unwrap(), b"1");
    let err = jail.rename(Path::new("n"), Path::new("n/m/n")).unwrap_err();
    assert!(matches!(err, JailError::Io { .. }), "{err}");
    assert_eq!(jail.read(Path::new("n/m/moved"), 10).unwrap(), b"1");
    assert!(!jail.exists(Path::new("n/m/n")).unwrap());
}

#[test]
fn lstat_describes_a_final_symlink_and_refuses_a_way_outside() {
    let (tmp, jail) = setup();
    let w = tmp.path().join("w");
    fs::create_dir(tmp.path().join("outside")).unwrap();
    fs::write(tmp.path().join("outside/secret"), "s").unwrap();
    fs::write(w.join("f"), "four").unwrap();
    symlink("f", w.join("in")).unwrap();
    symlink("../outside", w.join("out")).unwrap();
    assert_eq!(
        jail.lstat(Path::new("in")).unwrap().kind,
        EntryKind::Symlink
    );
    assert_eq!(jail.stat(Path::new("in")).unwrap().size, 4);
    // The link itself is inside; what lies behind it is not.
    assert_eq!(
        jail.lstat(Path::new("out")).unwrap().kind,
        EntryKind::Symlink
    );
    let err = jail.lstat(Path::new("out/secret")).unwrap_err();
    assert!(matches!(err, JailError::Escape { .. }), "{err:?}");
}

#[test]
fn list_reads_a_directory_larger_than_one_getdents_buffer() {
    let (_tmp, jail) = setup();
    let root = jail.root().to_path_buf();
    fs::create_dir(root.join("big")).unwrap();
    // 400 names of ~60 bytes: well over the 8 KiB read per getdents64.
    let mut expected: Vec<String> = (0..400)
        .map(|i| format!("entry-{i:03}-with-a-name-long-enough-to-fill-the-buffer.txt"))
        .collect();
    for (i, name) in expected.iter().enumerate() {
        fs::write(root.join("big").join(name), vec![b'x'; i]).unwrap();
    }
    symlink("../../outside", root.join("big/zz-link")).unwrap();
    expected.push("zz-link".to_owned());
    let listing = jail.list(Path::new("big")).unwrap();
    let names: Vec<_> = listing.iter().map(|e| e.name.clone()).collect();
    assert_eq!(names, expected);
    for entry in &listing {
        let meta = fs::symlink_metadata(root.join("big").join(&entry.name)).unwrap();
        assert_eq!(entry.size, meta.len(), "{}", entry.name);
        assert_eq!(
            entry.modified,
            Some(meta.modified().unwrap()),
            "{}",
            entry.name
        );
        assert_eq!(entry.mode, meta.permissions().mode(), "{}", entry.name);
    }
    // The dangling link out of the root is described, not followed.
    assert_eq!(listing.last().unwrap().kind, EntryKind::Symlink);
}

#[test]
fn list_of_a_file_or_fifo_is_not_a_directory() {
    let (_tmp, jail) = setup();
    let root = jail.root().to_path_buf();
    fs::write(root.join("f"), "x").unwrap();
    // A FIFO must fail at once, never block the open.
    rustix::fs::mknodat(
        rustix::fs::CWD,
        root.join("pipe").as_path(),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    for path in ["f", "pipe"] {
        assert!(
            matches!(
                jail.list(Path::new(path)),
                Err(JailError::NotADirectory { .. })
            ),
            "{path}"
        );
    }
}

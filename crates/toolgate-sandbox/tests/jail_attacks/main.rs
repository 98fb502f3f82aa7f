#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Escape attempts against the file jail, through its public API only.
//!
//! Every test builds a temp dir holding `root/` (the jail) and a sibling
//! `outside/` with a canary file, tries an escape, and then checks both the
//! error and that nothing outside `root/` changed (same entries, bytes,
//! modes and inodes; nothing new).

use toolgate_sandbox::jail::{EntryKind, Jail, JailError};

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

use proptest::prelude::*;
use rustix::fs::RenameFlags;

const CANARY: &[u8] = b"CANARY: outside the workspace, must never be read or changed";

/// One entry outside the root: kind, contents (or link target), mode, inode.
type Snapshot = BTreeMap<PathBuf, (char, Vec<u8>, u32, u64)>;

struct Fixture {
    tmp: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
    jail: Jail,
    before: Snapshot,
}

impl Fixture {
    fn new() -> Fixture {
        Fixture::with(|_| {})
    }

    /// `setup` runs before the snapshot, with the temp dir's path.
    fn with(setup: impl FnOnce(&Path)) -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        let outside = tmp.path().join("outside");
        fs::create_dir(&root).unwrap();
        fs::create_dir_all(outside.join("sub")).unwrap();
        fs::write(outside.join("canary"), CANARY).unwrap();
        fs::write(outside.join("sub/inner"), CANARY).unwrap();
        setup(tmp.path());
        let before = snapshot_outside(tmp.path());
        let jail = Jail::open(&root).unwrap();
        Fixture {
            tmp,
            root,
            outside,
            jail,
            before,
        }
    }

    fn link(&self, target: &str, at: &str) {
        let at = self.root.join(at);
        if let Some(parent) = at.parent() {
            fs::create_dir_all(parent).unwrap();
        }
        symlink(target, at).unwrap();
    }

    #[track_caller]
    fn assert_outside_untouched(&self) {
        let after = snapshot_outside(self.tmp.path());
        assert_eq!(after, self.before, "something outside root/ changed");
        assert_eq!(fs::read(self.outside.join("canary")).unwrap(), CANARY);
    }
}

/// Everything under `tmp` except `root/`, without following symlinks.
fn snapshot_outside(tmp: &Path) -> Snapshot {
    let mut out = Snapshot::new();
    let mut stack = vec![tmp.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path == tmp.join("root") {
                continue;
            }
            let meta = fs::symlink_metadata(&path).unwrap();
            let (kind, bytes) = if meta.is_symlink() {
                let target = fs::read_link(&path).unwrap();
                ('l', target.into_os_string().into_encoded_bytes())
            } else if meta.is_dir() {
                stack.push(path.clone());
                ('d', Vec::new())
            } else {
                ('f', fs::read(&path).unwrap())
            };
            let key = path.strip_prefix(tmp).unwrap().to_path_buf();
            out.insert(key, (kind, bytes, meta.mode(), meta.ino()));
        }
    }
    out
}

fn p(path: &str) -> &Path {
    Path::new(path)
}

/// The variant name of a result, for compact assertions.
fn kind<T>(result: &Result<T, JailError>) -> &'static str {
    match result {
        Ok(_) => "Ok",
        Err(JailError::Escape { .. }) => "Escape",
        Err(JailError::NulByte { .. }) => "NulByte",
        Err(JailError::NotFound { .. }) => "NotFound",
        Err(JailError::AlreadyExists { .. }) => "AlreadyExists",
        Err(JailError::NotADirectory { .. }) => "NotADirectory",
        Err(JailError::IsADirectory { .. }) => "IsADirectory",
        Err(JailError::TooLarge { .. }) => "TooLarge",
        Err(JailError::Io { .. }) => "Io",
        Err(JailError::Protected { .. }) => "Protected",
        Err(JailError::Concealed { .. }) => "Concealed",
    }
}

#[track_caller]
fn assert_kind<T: Debug>(result: Result<T, JailError>, expected: &str) {
    assert_eq!(kind(&result), expected, "{result:?}");
}

/// Tries every operation on `path` (as read, write, create, list, ...) and
/// requires each to fail with Escape.
#[track_caller]
fn assert_every_op_escapes(fx: &Fixture, path: &Path) {
    let jail = &fx.jail;
    assert_kind(jail.read(path, 1 << 20), "Escape");
    assert_kind(jail.write(path, b"pwned"), "Escape");
    assert_kind(jail.stat(path), "Escape");
    assert_kind(jail.exists(path), "Escape");
    assert_kind(jail.list(path), "Escape");
    assert_kind(jail.mkdir_all(&path.join("newdir")), "Escape");
    assert_kind(jail.create_new(&path.join("newfile"), b"pwned"), "Escape");
    assert_kind(jail.write(&path.join("newfile"), b"pwned"), "Escape");
    assert_kind(jail.remove(&path.join("inner")), "Escape");
    fs::write(fx.root.join("mine"), b"mine").unwrap();
    assert_kind(jail.rename(p("mine"), &path.join("stolen")), "Escape");
    assert_kind(jail.rename(&path.join("inner"), p("stolen")), "Escape");
    fx.assert_outside_untouched();
}

#[test]
fn reads_and_writes_inside_succeed() {
    let fx = Fixture::new();
    fx.jail.write(p("notes/todo.txt"), b"inside").unwrap();
    assert_eq!(fs::read(fx.root.join("notes/todo.txt")).unwrap(), b"inside");
    assert_eq!(fx.jail.read(p("notes/todo.txt"), 100).unwrap(), b"inside");
    let abs = fx.jail.root().join("notes/todo.txt");
    assert_eq!(fx.jail.read(&abs, 100).unwrap(), b"inside");
    fx.jail.write(&abs, b"again").unwrap();
    assert_eq!(fx.jail.read(p("notes/todo.txt"), 100).unwrap(), b"again");
    fx.assert_outside_untouched();
}

#[test]
fn absolute_path_elsewhere_is_refused() {
    let fx = Fixture::new();
    assert_every_op_escapes(&fx, &fx.outside);
    assert_every_op_escapes(&fx, &fx.outside.join("sub"));
    assert_kind(fx.jail.read(&fx.outside.join("canary"), 1 << 20), "Escape");
    assert_kind(fx.jail.write(&fx.outside.join("canary"), b"x"), "Escape");
    assert_kind(fx.jail.read(p("/etc/passwd"), 1 << 20), "Escape");
    fx.assert_outside_untouched();
}

#[test]
fn dotdot_to_outside_is_refused() {
    let fx = Fixture::new();
    assert_every_op_escapes(&fx, p("../outside"));
    assert_every_op_escapes(&fx, p("../outside/sub"));
    assert_kind(fx.jail.write(p("../outside/canary"), b"x"), "Escape");
    assert_kind(fx.jail.write(p("../outside/x"), b"x"), "Escape");
    assert_kind(fx.jail.remove(p("../outside/canary")), "Escape");
    assert_kind(fx.jail.remove(p("..")), "Escape");
    // The jail's own root given through its parent is still "outside" text.
    assert_kind(fx.jail.write(p("../root/ok"), b"x"), "Escape");
    fx.assert_outside_untouched();
}

#[test]
fn symlink_to_outside_file_is_refused() {
    let fx = Fixture::new();
    fx.link("../outside/canary", "link");
    fx.link(fx.outside.join("canary").to_str().unwrap(), "abs_link");
    for link in ["link", "abs_link"] {
        assert_kind(fx.jail.read(p(link), 1 << 20), "Escape");
        assert_kind(fx.jail.write(p(link), b"pwned"), "Escape");
        assert_kind(fx.jail.stat(p(link)), "Escape");
        assert_kind(fx.jail.exists(p(link)), "Escape");
        assert_kind(fx.jail.create_new(p(link), b"pwned"), "AlreadyExists");
        assert_kind(fx.jail.mkdir_all(p(link)), "Escape");
    }
    fx.assert_outside_untouched();
}

#[test]
fn symlink_to_outside_directory_is_refused() {
    let fx = Fixture::new();
    fx.link("../outside", "dirlink");
    fx.link(fx.outside.to_str().unwrap(), "abs_dirlink");
    fx.link("../../outside/sub", "nested/deeper");
    assert_every_op_escapes(&fx, p("dirlink"));
    assert_every_op_escapes(&fx, p("dirlink/sub"));
    assert_every_op_escapes(&fx, p("abs_dirlink"));
    assert_every_op_escapes(&fx, p("nested/deeper"));
}

#[test]
fn symlinked_directory_component_is_refused() {
    let fx = Fixture::new();
    fx.link("../outside", "link");
    assert_kind(fx.jail.write(p("link/new"), b"pwned"), "Escape");
    assert_kind(fx.jail.write(p("link/sub/new"), b"pwned"), "Escape");
    assert_kind(fx.jail.write(p("link/canary"), b"pwned"), "Escape");
    assert_kind(fx.jail.create_new(p("link/new"), b"pwned"), "Escape");
    assert_kind(fx.jail.mkdir_all(p("link/newdir/x")), "Escape");
    assert!(!fx.outside.join("new").exists());
    fx.assert_outside_untouched();
}

#[test]
fn three_hop_symlink_chain_ending_outside_is_refused() {
    let fx = Fixture::new();
    fs::create_dir(fx.root.join("sub")).unwrap();
    fx.link("hop2", "hop1");
    fx.link("sub/hop3", "hop2");
    fx.link("../../outside/canary", "sub/hop3");
    assert_kind(fx.jail.read(p("hop1"), 1 << 20), "Escape");
    assert_kind(fx.jail.write(p("hop1"), b"pwned"), "Escape");
    assert_kind(fx.jail.stat(p("hop1")), "Escape");
    // The same with directories: d1 -> d2 -> sub/d3 -> ../../outside.
    fx.link("d2", "d1");
    fx.link("sub/d3", "d2");
    fx.link("../../outside", "sub/d3");
    assert_every_op_escapes(&fx, p("d1"));
    assert_every_op_escapes(&fx, p("d1/sub"));
}

#[test]
fn dangling_symlink_to_outside_creates_nothing() {
    let fx = Fixture::new();
    fx.link("../outside/created_by_write", "dangling");
    fx.link(
        fx.outside.join("created_abs").to_str().unwrap(),
        "dangling_abs",
    );
    fx.link("../outside/newdir/x", "dangling_deep");
    for link in ["dangling", "dangling_abs", "dangling_deep"] {
        assert_kind(fx.jail.write(p(link), b"pwned"), "Escape");
        let created = fx.jail.create_new(p(link), b"pwned");
        assert!(
            matches!(kind(&created), "AlreadyExists" | "Escape"),
            "{created:?}"
        );
        assert_kind(fx.jail.read(p(link), 1 << 20), "Escape");
        assert_kind(fx.jail.mkdir_all(p(link)), "Escape");
    }
    fx.assert_outside_untouched();
}

#[test]
fn symlinks_staying_inside_work() {
    let fx = Fixture::new();
    fx.jail.write(p("sub/real.txt"), b"real").unwrap();
    fx.link("sub/real.txt", "alias");
    fx.link("sub", "dirlink");
    fx.link("../sub/real.txt", "other/updown");
    assert_eq!(fx.jail.read(p("alias"), 100).unwrap(), b"real");
    assert_eq!(fx.jail.read(p("dirlink/real.txt"), 100).unwrap(), b"real");
    assert_eq!(fx.jail.read(p("other/updown"), 100).unwrap(), b"real");
    assert_eq!(fx.jail.stat(p("alias")).unwrap().kind, EntryKind::File);
    // Writing through the link updates the target; the link stays a link.
    fx.jail.write(p("alias"), b"updated").unwrap();
    assert_eq!(fs::read(fx.root.join("sub/real.txt")).unwrap(), b"updated");
    assert!(
        fs::symlink_metadata(fx.root.join("alias"))
            .unwrap()
            .is_symlink()
    );
    // An inside dangling link: write creates its (inside) target.
    fx.link("sub/later.txt", "pending");
    fx.jail.write(p("pending"), b"later").unwrap();
    assert_eq!(fs::read(fx.root.join("sub/later.txt")).unwrap(), b"later");
    let listing = fx.jail.list(p("")).unwrap();
    let alias = listing.iter().find(|e| e.name == "alias").unwrap();
    assert_eq!(alias.kind, EntryKind::Symlink);
    let names: Vec<_> = listing.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["alias", "dirlink", "other", "pending", "sub"]);
    fx.assert_outside_untouched();
}

#[test]
fn absolute_symlinks_inside_the_root_work() {
    let fx = Fixture::new();
    let root = fx.jail.root().to_path_buf();
    let abs = |rel: &str| root.join(rel).to_str().unwrap().to_owned();
    fx.jail.write(p("sub/real.txt"), b"real").unwrap();
    fx.link(&abs("sub/real.txt"), "alias");
    fx.link(&abs("sub"), "dirlink");
    fx.link(&abs(""), "nested/to_root");
    // Through the root as given (not canonical) too, and a chain of both kinds.
    fx.link(fx.root.join("sub").to_str().unwrap(), "given_dirlink");
    fx.link(&abs("alias"), "chain");
    assert_eq!(fx.jail.read(p("alias"), 100).unwrap(), b"real");
    assert_eq!(fx.jail.read(p("dirlink/real.txt"), 100).unwrap(), b"real");
    assert_eq!(
        fx.jail.read(p("given_dirlink/real.txt"), 100).unwrap(),
        b"real"
    );
    assert_eq!(fx.jail.read(p("chain"), 100).unwrap(), b"real");
    assert_eq!(
        fx.jail.read(p("nested/to_root/sub/real.txt"), 100).unwrap(),
        b"real"
    );
    assert_eq!(fx.jail.stat(p("alias")).unwrap().kind, EntryKind::File);
    assert_eq!(fx.jail.lstat(p("alias")).unwrap().kind, EntryKind::Symlink);
    assert_eq!(fx.jail.stat(p("dirlink")).unwrap().kind, EntryKind::Dir);
    let names: Vec<_> = fx.jail.list(p("dirlink")).unwrap();
    assert_eq!(names.len(), 1);
    assert_eq!(names[0].name, "real.txt");
    // Writing through the link changes the target; the link stays a link.
    fx.jail.write(p("alias"), b"updated").unwrap();
    assert_eq!(fs::read(fx.root.join("sub/real.txt")).unwrap(), b"updated");
    assert!(
        fs::symlink_metadata(fx.root.join("alias"))
            .unwrap()
            .is_symlink()
    );
    fx.jail.write(p("dirlink/new/deep.txt"), b"deep").unwrap();
    assert_eq!(fs::read(fx.root.join("sub/new/deep.txt")).unwrap(), b"deep");
    fx.jail.create_new(p("dirlink/created.txt"), b"c").unwrap();
    fx.jail.mkdir_all(p("dirlink/made/here")).unwrap();
    assert!(fx.root.join("sub/made/here").is_dir());
    fx.jail
        .rename(p("dirlink/created.txt"), p("dirlink/moved.txt"))
        .unwrap();
    assert_eq!(fs::read(fx.root.join("sub/moved.txt")).unwrap(), b"c");
    fx.jail.remove(p("dirlink/moved.txt")).unwrap();
    assert!(!fx.root.join("sub/moved.txt").exists());
    // A dangling absolute link inside the root: write creates its target.
    fx.link(&abs("sub/later.txt"), "pending");
    fx.jail.write(p("pending"), b"later").unwrap();
    assert_eq!(fs::read(fx.root.join("sub/later.txt")).unwrap(), b"later");
    fx.assert_outside_untouched();
}

#[test]
fn absolute_symlinks_that_leave_the_root_are_refused_by_name() {
    let fx = Fixture::with(|tmp| {
        fs::create_dir(tmp.join("root2")).unwrap();
        fs::write(tmp.join("root2/f"), CANARY).unwrap();
    });
    let root = fx.jail.root().to_path_buf();
    let sibling = format!("{}2", root.display());
    // A prefix sibling of the root, `..` out of it, /etc, and a loop.
    fx.link(&sibling, "sibling");
    fx.link(&format!("{}/../outside", root.display()), "updown");
    fx.link("/etc", "etc");
    fx.link(root.join("loop_b").to_str().unwrap(), "loop_a");
    fx.link(root.join("loop_a").to_str().unwrap(), "loop_b");
    for link in ["sibling", "updown"] {
        assert_every_op_escapes(&fx, p(link));
        assert_kind(fx.jail.write(&p(link).join("f"), b"pwned"), "Escape");
    }
    assert_kind(fx.jail.write(p("etc/toolgate-pwned"), b"pwned"), "Escape");
    assert_kind(fx.jail.read(p("etc/hostname"), 1 << 20), "Escape");
    assert!(!Path::new("/etc/toolgate-pwned").exists());
    let err = fx.jail.read(p("sibling/f"), 1 << 20).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "`sibling/f` is outside the workspace root {}: the symlink `sibling` leads outside \
             the root; the file tools reach only what lies inside it, so use a path inside it",
            root.display()
        )
    );
    let err = fx.jail.write(p("etc"), b"pwned").unwrap_err().to_string();
    assert!(
        err.contains("the symlink `etc` leads outside the root"),
        "{err}"
    );
    // A relative link out is named the same way.
    fx.link("../outside", "rel_out");
    let err = fx
        .jail
        .read(p("rel_out/canary"), 1 << 20)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("the symlink `rel_out` leads outside the root"),
        "{err}"
    );
    let looped = fx.jail.read(p("loop_a"), 1 << 20).unwrap_err().to_string();
    assert!(
        looped.contains("too many levels of symbolic links"),
        "{looped}"
    );
    fx.assert_outside_untouched();
    assert_eq!(fs::read(fx.tmp.path().join("root2/f")).unwrap(), CANARY);
}

#[test]
fn prefix_siblings_given_as_absolute_paths_are_refused() {
    let fx = Fixture::with(|tmp| {
        for sibling in ["root2", "root_backup", "root.bak"] {
            fs::create_dir(tmp.join(sibling)).unwrap();
            fs::write(tmp.join(sibling).join("f"), CANARY).unwrap();
        }
    });
    let parent = fx.jail.root().parent().unwrap().to_path_buf();
    for sibling in ["root2", "root_backup", "root.bak"] {
        let file = parent.join(sibling).join("f");
        assert_kind(fx.jail.read(&file, 1 << 20), "Escape");
        assert_kind(fx.jail.write(&file, b"pwned"), "Escape");
        assert_kind(fx.jail.remove(&file), "Escape");
        assert_kind(
            fx.jail.write(&parent.join(sibling).join("new"), b"x"),
            "Escape",
        );
        assert_every_op_escapes(&fx, &parent.join(sibling));
        let sneaky = fx.jail.root().join("..").join(sibling).join("f");
        assert_kind(fx.jail.write(&sneaky, b"pwned"), "Escape");
    }
    fx.assert_outside_untouched();
}

#[test]
fn dotdot_traversal_is_refused_and_inner_dotdot_works() {
    let fx = Fixture::new();
    let deep = format!("{}etc/passwd", "../".repeat(1000));
    assert_kind(fx.jail.read(p(&deep), 1 << 20), "Escape");
    assert_kind(fx.jail.write(p(&deep), b"pwned"), "Escape");
    assert_kind(fx.jail.read(p("../outside/canary"), 1 << 20), "Escape");
    assert_kind(fx.jail.read(p("a/../../outside/canary"), 1 << 20), "Escape");
    assert_kind(fx.jail.write(p("a/b/../../../outside/new"), b"x"), "Escape");
    // `a/up -> ..` looks inside on paper (a/up/../outside) but climbs out
    // physically: the kernel-side check catches what the lexical one cannot.
    fx.link("..", "a/up");
    assert_kind(fx.jail.read(p("a/up/../outside/canary"), 1 << 20), "Escape");
    assert_kind(fx.jail.write(p("a/up/../outside/new"), b"x"), "Escape");
    assert_kind(fx.jail.list(p("a/up/..")), "Escape");
    // Inside the root, `..` is fine.
    fx.jail.write(p("a/../b"), b"bee").unwrap();
    assert_eq!(fs::read(fx.root.join("b")).unwrap(), b"bee");
    assert_eq!(fx.jail.read(p("a/up/b"), 100).unwrap(), b"bee");
    fx.assert_outside_untouched();
}

#[test]
fn nul_bytes_are_refused() {
    let fx = Fixture::new();
    fs::write(fx.root.join("a"), b"a").unwrap();
    for path in ["a\0", "a\0/../../outside/canary", "\0", "../outside\0"] {
        let path = p(path);
        assert_kind(fx.jail.read(path, 100), "NulByte");
        assert_kind(fx.jail.write(path, b"x"), "NulByte");
        assert_kind(fx.jail.create_new(path, b"x"), "NulByte");
        assert_kind(fx.jail.stat(path), "NulByte");
        assert_kind(fx.jail.list(path), "NulByte");
        assert_kind(fx.jail.mkdir_all(path), "NulByte");
        assert_kind(fx.jail.remove(path), "NulByte");
        assert_kind(fx.jail.rename(p("a"), path), "NulByte");
        assert_kind(fx.jail.rename(path, p("b")), "NulByte");
    }
    assert_eq!(fs::read(fx.root.join("a")).unwrap(), b"a");
    fx.assert_outside_untouched();
}

#[test]
fn file_swapped_for_symlink_never_reaches_outside() {
    let fx = Fixture::new();
    let root = fx.root.clone();
    fs::write(root.join("f"), b"inside").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    symlink("../outside/canary", root.join(".staged")).unwrap();
    let swapper = {
        let stop = Arc::clone(&stop);
        // One renameat2(RENAME_EXCHANGE) per flip: `f` is always there, as
        // a regular file or as a symlink to the canary, and flips fast
        // enough to land between any check and use.
        thread::spawn(move || {
            let (f, staged) = (root.join("f"), root.join(".staged"));
            let mut swaps = 0u64;
            let is_link = |p: &Path| fs::symlink_metadata(p).is_ok_and(|m| m.is_symlink());
            while !stop.load(Ordering::Relaxed) {
                // A successful jail write renames a regular file over the
                // link when it catches `f` as the link: plant a new one.
                if !is_link(&f) && !is_link(&staged) {
                    fs::remove_file(&staged).unwrap();
                    symlink("../outside/canary", &staged).unwrap();
                }
                let cwd = rustix::fs::CWD;
                rustix::fs::renameat_with(cwd, &f, cwd, &staged, RenameFlags::EXCHANGE).unwrap();
                swaps += 1;
            }
            swaps
        })
    };
    let (mut written, mut refused, mut read) = (0, 0, 0);
    for i in 0..2000 {
        let data = format!("write {i}");
        match fx.jail.write(p("f"), data.as_bytes()) {
            Ok(()) => written += 1,
            Err(_) => refused += 1,
        }
        if let Ok(bytes) = fx.jail.read(p("f"), 1 << 20) {
            assert_ne!(bytes, CANARY, "read through the swapped symlink");
            assert!(bytes == b"inside" || bytes.starts_with(b"write "));
            read += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    eprintln!("swaps {swaps}, writes ok {written}, refused {refused}, reads ok {read}");
    assert!(swaps > 0 && written > 0);
    fx.assert_outside_untouched();
    let leftovers: Vec<_> = fx
        .jail
        .list(p(""))
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert!(
        leftovers.iter().all(|n| !n.contains(".toolgate-")),
        "temp files left: {leftovers:?}"
    );
}

#[test]
fn rename_refuses_to_overwrite_and_to_leave() {
    let fx = Fixture::new();
    fx.link("../outside", "dirlink");
    fx.link("../outside/nothing", "dangling");
    fs::write(fx.root.join("a"), b"a").unwrap();
    fs::write(fx.root.join("b"), b"b").unwrap();
    assert_kind(fx.jail.rename(p("a"), p("b")), "AlreadyExists");
    assert_kind(fx.jail.rename(p("a"), p("dangling")), "AlreadyExists");
    assert_eq!(fs::read(fx.root.join("a")).unwrap(), b"a");
    assert_eq!(fs::read(fx.root.join("b")).unwrap(), b"b");
    assert_kind(fx.jail.rename(p("a"), p("../outside/a")), "Escape");
    assert_kind(fx.jail.rename(p("a"), &fx.outside.join("a")), "Escape");
    assert_kind(fx.jail.rename(p("a"), p("dirlink/a")), "Escape");
    assert_kind(fx.jail.rename(p("a"), p("dirlink/sub/a")), "Escape");
    assert_kind(fx.jail.rename(p("dirlink/canary"), p("stolen")), "Escape");
    assert_kind(
        fx.jail.rename(p("../outside/canary"), p("stolen")),
        "Escape",
    );
    assert_eq!(fs::read(fx.root.join("a")).unwrap(), b"a");
    assert!(!fx.root.join("stolen").exists());
    // A symlink is moved as a link: it still points out, still refused.
    fx.jail.rename(p("dirlink"), p("moved_link")).unwrap();
    assert!(
        fs::symlink_metadata(fx.root.join("moved_link"))
            .unwrap()
            .is_symlink()
    );
    assert_kind(fx.jail.write(p("moved_link/x"), b"x"), "Escape");
    fx.assert_outside_untouched();
}

#[test]
fn remove_of_a_link_removes_the_link_not_the_target() {
    let fx = Fixture::new();
    fx.link("../outside/canary", "link");
    fx.link("../outside", "dirlink");
    fx.jail.remove(p("link")).unwrap();
    fx.jail.remove(p("dirlink")).unwrap();
    assert!(fs::symlink_metadata(fx.root.join("link")).is_err());
    assert!(fs::symlink_metadata(fx.root.join("dirlink")).is_err());
    assert_kind(fx.jail.remove(p("link")), "NotFound");
    fx.assert_outside_untouched();
}

#[test]
fn write_keeps_the_mode() {
    let fx = Fixture::new();
    for mode in [0o600, 0o755, 0o640] {
        fx.jail.write(p("f"), b"one").unwrap();
        fs::set_permissions(fx.root.join("f"), fs::Permissions::from_mode(mode)).unwrap();
        fx.jail.write(p("f"), b"two").unwrap();
        let meta = fs::metadata(fx.root.join("f")).unwrap();
        assert_eq!(meta.permissions().mode() & 0o7777, mode);
        assert_eq!(fx.jail.stat(p("f")).unwrap().mode & 0o7777, mode);
        assert_eq!(fs::read(fx.root.join("f")).unwrap(), b"two");
    }
    fx.assert_outside_untouched();
}

#[test]
fn failed_write_changes_nothing() {
    let fx = Fixture::new();
    fx.jail.write(p("dir/keep"), b"keep").unwrap();
    fx.jail.write(p("file"), b"original").unwrap();
    let before = fx.jail.list(p("")).unwrap();
    assert_kind(fx.jail.write(p("dir"), b"x"), "IsADirectory");
    assert_kind(fx.jail.write(p("file/x"), b"x"), "NotADirectory");
    assert_kind(fx.jail.write(p(""), b"x"), "IsADirectory");
    assert_kind(fx.jail.create_new(p("file"), b"x"), "AlreadyExists");
    assert_eq!(fx.jail.list(p("")).unwrap(), before);
    assert_eq!(fx.jail.list(p("dir")).unwrap().len(), 1);
    assert_eq!(fs::read(fx.root.join("file")).unwrap(), b"original");
    fx.assert_outside_untouched();
}

#[test]
fn write_replaces_a_hard_link_instead_of_writing_through_it() {
    let fx = Fixture::new();
    // Someone else hard-linked an outside file into the root (same fs).
    fs::hard_link(fx.outside.join("canary"), fx.root.join("hard")).unwrap();
    fx.jail.write(p("hard"), b"mine").unwrap();
    assert_eq!(fs::read(fx.root.join("hard")).unwrap(), b"mine");
    assert_eq!(fs::read(fx.outside.join("canary")).unwrap(), CANARY);
}

#[test]
fn read_limit_is_enforced() {
    let fx = Fixture::new();
    fx.jail.write(p("big"), &[7u8; 100]).unwrap();
    assert_eq!(fx.jail.read(p("big"), 100).unwrap().len(), 100);
    let err = fx.jail.read(p("big"), 99).unwrap_err();
    match &err {
        JailError::TooLarge { size, limit, .. } => assert_eq!((*size, *limit), (100, 99)),
        other => panic!("expected TooLarge, got {other:?}"),
    }
    let message = err.to_string();
    assert!(message.contains("`big`") && message.contains("100") && message.contains("99"));
    assert_kind(fx.jail.read(p("big"), 0), "TooLarge");
    fx.assert_outside_untouched();
}

mod property;

//! Test fixtures (real trees in temp dirs) and the walker's tests.

use std::fs;
use std::path::{Path, PathBuf};

use tempfile::TempDir;
use toolgate_sandbox::Jail;

use super::PathGlobs;

/// A workspace (`ws/`) and a directory outside it (`outside/`), side by side.
pub struct Tree {
    pub dir: TempDir,
    pub jail: Jail,
}

impl Tree {
    pub fn new(files: &[(&str, &[u8])]) -> Tree {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        fs::create_dir_all(&ws).unwrap();
        fs::create_dir_all(dir.path().join("outside")).unwrap();
        fs::write(dir.path().join("outside/needle.txt"), "needle outside\n").unwrap();
        for (path, data) in files {
            write(&ws.join(path), data);
        }
        let jail = Jail::open(&ws).unwrap();
        Tree { dir, jail }
    }

    pub fn ws(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    pub fn write(&self, path: &str, data: &[u8]) {
        write(&self.ws().join(path), data);
    }

    pub fn symlink(&self, target: &str, link: &str) {
        std::os::unix::fs::symlink(target, self.ws().join(link)).unwrap();
    }
}

fn write(path: &Path, data: &[u8]) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, data).unwrap();
}

/// The standard tree: ignore rules at several levels, hidden files, a binary,
/// `.git`, a symlink to a file inside and one to a directory outside.
pub fn standard() -> Tree {
    let tree = Tree::new(&[
        (".gitignore", b"ignored/\n*.log\n"),
        ("src/main.rs", b"fn main() {\n    println!(\"hello\");\n}\n"),
        (
            "src/lib.rs",
            b"// needle one\nfn a() {}\nlet x = \"Needle\";\n",
        ),
        ("src/nested/.gitignore", b"secret.rs\n"),
        ("src/nested/secret.rs", b"needle secret\n"),
        ("src/nested/ok.rs", b"needle ok\n"),
        ("docs/.ignore", b"draft.md\n"),
        ("docs/draft.md", b"needle draft\n"),
        ("docs/guide.md", b"a needle in the guide\n"),
        ("ignored/x.rs", b"needle ignored\n"),
        ("app.log", b"needle log\n"),
        (".hidden/h.rs", b"needle hidden\n"),
        (".env", b"needle=1\n"),
        ("bin.dat", b"needle\0\x01\x02needle\n"),
        (".git/config", b"needle git\n"),
    ]);
    tree.symlink("src/lib.rs", "link_in.rs");
    tree.symlink("../outside", "link_out");
    tree
}

#[test]
fn path_globs_match_names_anywhere_and_paths_from_root_or_start() {
    let globs = PathGlobs::new(
        "include",
        &["*.rs".into(), "docs/**/*.md".into(), "./sub/x".into()],
    )
    .unwrap();
    let root = Path::new("/w");
    let start = Path::new("/w/a");
    assert!(globs.is_match(Path::new("/w/a/b/c.rs"), root, start));
    assert!(!globs.is_match(Path::new("/w/a/b/c.rsx"), root, start));
    assert!(globs.is_match(Path::new("/w/docs/x/y.md"), root, start));
    assert!(!globs.is_match(Path::new("/w/a/docs.md"), root, start));
    assert!(globs.is_match(Path::new("/w/a/sub/x"), root, start));
    assert!(globs.is_match(Path::new("/w/sub/x"), root, start));
    assert!(PathGlobs::new("include", &[]).unwrap().is_empty());
    let err = PathGlobs::new("include", &["{a".into()]).unwrap_err();
    assert!(err.to_string().starts_with("invalid glob \"{a\""), "{err}");
}

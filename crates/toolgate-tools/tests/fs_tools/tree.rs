//! The generated tree `grep` and `find` run on, and a model of it.
//!
//! About 280 files in nested directories: ignore rules at three levels
//! (anchored, negated, directory-only) and a `.ignore`, hidden files, `.git`
//! directories, binary files holding the pattern, a 200,000-line file, lines
//! too wide to show, and symlinks inside and out. The model says, without the
//! engines, which entries a walk shows and which lines match, so every
//! expectation is computed rather than copied from the output.

use std::collections::{BTreeMap, BTreeSet};

use crate::common::Fixture;

/// Text only the files outside the root hold.
pub const OUTSIDE_SECRET: &str = "OUTSIDE_SECRET_7f3a";

/// Longest line `grep` shows (`Limits::line_chars` capped at 500).
pub const LINE_CHARS: usize = 500;

/// Lines of `big/huge.txt`, and the ones that hold `needle`.
pub const HUGE_LINES: usize = 200_000;
pub const HUGE_NEEDLES: [usize; 6] = [1, 777, 50_000, 123_457, 199_999, 200_000];

const EXTS: [&str; 4] = ["rs", "py", "md", "txt"];

/// What a generated line says; most hold some form of `needle`.
const TEMPLATES: [&str; 12] = [
    "alpha {n}",
    "the needle in file {n}",
    "Needle capital {n}",
    "beta {n}",
    "needles plural {n}",
    "snake needle_x {n}",
    "gamma {n}",
    "lit [needle]+? {n}",
    "(needle). {n}",
    "NEEDLE loud {n}",
    "delta {n}",
    "epsilon nEEdle {n}",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    File,
    Dir,
    Symlink,
}

/// The walk options both tools share.
#[derive(Debug, Clone, Copy, Default)]
pub struct Walk {
    pub hidden: bool,
    pub no_ignore: bool,
}

pub const DEFAULT: Walk = Walk {
    hidden: false,
    no_ignore: false,
};

pub struct Tree {
    pub f: Fixture,
    /// Regular files (relative path -> bytes).
    pub files: BTreeMap<String, Vec<u8>>,
    pub dirs: BTreeSet<String>,
    pub links: BTreeSet<String>,
}

impl Tree {
    pub fn new() -> Tree {
        let mut tree = Tree {
            f: Fixture::new(),
            files: BTreeMap::new(),
            dirs: BTreeSet::new(),
            links: BTreeSet::new(),
        };
        tree.generate();
        tree.extras();
        tree.plant_outside();
        tree
    }

    fn put(&mut self, rel: &str, bytes: impl Into<Vec<u8>>) {
        let bytes = bytes.into();
        self.f.put(rel, &bytes);
        self.add_parents(rel);
        self.files.insert(rel.to_owned(), bytes);
    }

    fn link(&mut self, rel: &str, target: impl AsRef<std::path::Path>) {
        self.f.symlink(rel, target);
        self.add_parents(rel);
        self.links.insert(rel.to_owned());
    }

    fn add_parents(&mut self, rel: &str) {
        let mut at = 0;
        while let Some(i) = rel[at..].find('/') {
            self.dirs.insert(rel[..at + i].to_owned());
            at += i + 1;
        }
    }

    /// 6 modules x (the module dir and two subdirs) x 14 files.
    fn generate(&mut self) {
        let mut n = 0usize;
        for d in 0..6 {
            for sub in ["", "/sub_0", "/sub_1"] {
                for i in 0..14 {
                    let path = format!("src/mod_{d}{sub}/file_{i}.{}", EXTS[i % 4]);
                    let lines = 2 + n % 4;
                    let mut text = String::new();
                    for k in 0..lines {
                        let template = TEMPLATES[(n * 5 + k * 7) % TEMPLATES.len()];
                        text.push_str(&template.replace("{n}", &format!("{n}.{k}")));
                        text.push('\n');
                    }
                    self.put(&path, text);
                    n += 1;
                }
            }
        }
    }

    fn extras(&mut self) {
        self.put(".gitignore", "*.log\nbuild/\n/top_only.txt\n");
        self.put(".ignore", "*.tmp\n");
        self.put("src/mod_3/.gitignore", "file_1*\n!file_10.md\n");
        self.put("src/mod_5/sub_1/.gitignore", "*.md\n!file_6.md\n");
        for (path, text) in [
            ("build/out.txt", "needle in build\n"),
            ("src/build/gen.rs", "needle generated\n"),
            ("logs/app.log", "needle log\n"),
            ("src/mod_4/trace.log", "needle trace\n"),
            ("cache/x.tmp", "needle tmp\n"),
            ("top_only.txt", "needle top only\n"),
            ("src/top_only.txt", "needle not anchored\n"),
            (".hidden/secret.txt", "needle hidden dir\n"),
            ("src/.env", "needle env\n"),
            ("src/mod_1/.cache/x.rs", "needle cached\n"),
            (".git/config", "needle git config\n"),
            (".git/objects/ab/cdef", "needle git object\n"),
            ("src/mod_2/.git/info", "needle nested git\n"),
        ] {
            self.put(path, text);
        }
        // Binary: a NUL up front, and one after 200 KB of matching text.
        self.put("bin/blob.bin", b"needle\0\x01\x02needle\n".to_vec());
        self.put("src/mod_0/data.rs", b"fn x() {} // needle\n\0\0".to_vec());
        let mut late = String::new();
        for i in 0..8000 {
            late.push_str(&format!(
                "late line {i}{}\n",
                if i % 100 == 0 { " needle" } else { "" }
            ));
        }
        late.push('\0');
        self.put("bin/late.dat", late);
        let mut huge = String::with_capacity(HUGE_LINES * 16);
        for i in 1..=HUGE_LINES {
            if HUGE_NEEDLES.contains(&i) {
                huge.push_str(&format!("needle at line {i}\n"));
            } else {
                huge.push_str(&format!("filler {i}\n"));
            }
        }
        self.put("big/huge.txt", huge);
        let wide = format!(
            "short needle\n{}needle{}\n{}needle\n",
            "x".repeat(100),
            "y".repeat(2894),
            "é".repeat(600)
        );
        self.put("long/wide.txt", wide);
        let ctx = |needles: &[usize], tag: &str| {
            (1..=12)
                .map(|i| {
                    let hit = if needles.contains(&i) { " needle" } else { "" };
                    format!("{tag}{i}{hit}\n")
                })
                .collect::<String>()
        };
        self.put("ctx/a.txt", ctx(&[3, 5, 10], "a"));
        self.put("ctx/b.txt", ctx(&[1, 12], "b"));
        for size in [0usize, 10, 100, 1000, 10_000] {
            self.put(&format!("sizes/s{size}.dat"), "z".repeat(size));
        }
        self.link("src/alias.rs", "mod_0/file_0.rs");
        let outside = self.f.outside.clone();
        self.link("link_to_outside", &outside);
        self.link("link_rel_outside", "../outside");
        self.link("link_file_outside", outside.join("outside_secret.txt"));
        self.link("src/mod_1/up", "../../../outside");
    }

    /// Files outside the root that hold the pattern.
    fn plant_outside(&self) {
        let secret = format!("needle {OUTSIDE_SECRET}\n");
        std::fs::write(self.f.outside.join("outside_secret.txt"), &secret).unwrap();
        std::fs::write(self.f.outside.join("dir/needle.rs"), &secret).unwrap();
    }

    /// Whether the walk shows `rel` (its ancestors included).
    pub fn shows(&self, rel: &str, walk: Walk) -> bool {
        let parts: Vec<&str> = rel.split('/').collect();
        for (i, name) in parts.iter().enumerate() {
            let path = parts[..=i].join("/");
            let is_dir = i + 1 < parts.len() || self.dirs.contains(&path);
            if *name == ".git"
                || (!walk.hidden && name.starts_with('.'))
                || (!walk.no_ignore && ignored(&path, name, is_dir))
            {
                return false;
            }
        }
        true
    }

    /// Every entry the walk shows, with its kind, by path.
    pub fn entries(&self, walk: Walk) -> BTreeMap<String, Kind> {
        let files = self.files.keys().map(|p| (p, Kind::File));
        let dirs = self.dirs.iter().map(|p| (p, Kind::Dir));
        let links = self.links.iter().map(|p| (p, Kind::Symlink));
        files
            .chain(dirs)
            .chain(links)
            .filter(|(p, _)| self.shows(p, walk))
            .map(|(p, k)| (p.clone(), k))
            .collect()
    }

    /// The regular files `grep` opens under `walk`, restricted by `keep`.
    pub fn searched(&self, walk: Walk, keep: impl Fn(&str) -> bool) -> Vec<(&str, &[u8])> {
        self.files
            .iter()
            .filter(|(p, _)| self.shows(p, walk) && keep(p))
            .map(|(p, b)| (p.as_str(), b.as_slice()))
            .collect()
    }

    /// `path:line:text` for every matching line of the text files `grep`
    /// searches, by path then line: what content mode must list.
    pub fn grep_lines(
        &self,
        walk: Walk,
        keep: impl Fn(&str) -> bool,
        matches: impl Fn(&str) -> bool,
    ) -> Vec<String> {
        let mut out = Vec::new();
        for (path, bytes) in self.searched(walk, keep) {
            if is_binary(bytes) {
                continue;
            }
            let text = std::str::from_utf8(bytes).unwrap();
            for (i, line) in text.lines().enumerate() {
                if matches(line) {
                    out.push(format!("{path}:{}:{}", i + 1, shown(line)));
                }
            }
        }
        out
    }
}

/// The ignore rules of the generated tree, written out by hand.
fn ignored(path: &str, name: &str, is_dir: bool) -> bool {
    // /.gitignore: `*.log`, `build/`, `/top_only.txt`; /.ignore: `*.tmp`.
    name.ends_with(".log")
        || (is_dir && name == "build")
        || path == "top_only.txt"
        || name.ends_with(".tmp")
        // src/mod_3/.gitignore: `file_1*`, `!file_10.md`.
        || (path.starts_with("src/mod_3/") && name.starts_with("file_1") && name != "file_10.md")
        // src/mod_5/sub_1/.gitignore: `*.md`, `!file_6.md`.
        || (path.starts_with("src/mod_5/sub_1/") && name.ends_with(".md") && name != "file_6.md")
}

pub fn is_binary(bytes: &[u8]) -> bool {
    bytes.contains(&0)
}

/// A line as `grep` shows it: cut after `LINE_CHARS` chars.
pub fn shown(line: &str) -> String {
    let chars = line.chars().count();
    if chars <= LINE_CHARS {
        return line.to_owned();
    }
    let head: String = line.chars().take(LINE_CHARS).collect();
    format!("{head}… [{} more chars]", chars - LINE_CHARS)
}

/// `needle` as a whole word (Unicode word characters around it end it).
pub fn has_word(line: &str, word: &str) -> bool {
    let is_word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    line.match_indices(word).any(|(i, _)| {
        !is_word(line[..i].chars().next_back()) && !is_word(line[i + word.len()..].chars().next())
    })
}

/// The strings no output may contain: what lies outside the root (names and
/// contents; an error may echo a path it was given, so no given path is here).
pub fn leak(text: &str) -> Option<&'static str> {
    [
        OUTSIDE_SECRET,
        "outside_secret",
        "must never change",
        "canary",
        "needle.rs",
    ]
    .into_iter()
    .find(|s| text.contains(s))
}

#![allow(clippy::unwrap_used, clippy::expect_used)]

//! Black-box tests of the memory tools: real files in a temp dir, calls
//! through the real `Executor` (validation, policy, tool).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toolgate_core::{CallContext, Content, Registry, ToolOutput};
use toolgate_policy::{Executor, Policy, PolicyPreset};
use toolgate_sandbox::{LocalWorkspace, Sandbox, SandboxConfig};
use toolgate_tools::memory::{MemoryConfig, register_memory_tools};
use toolgate_tools::{Fs, Limits};

const CANARY: &str = "canary: must never change\n";

/// A temp dir with `root/` (the workspace) and `outside/` (a canary that no
/// call may touch). Outlives the runtimes built over it.
struct Base {
    _dir: tempfile::TempDir,
    base: PathBuf,
    root: PathBuf,
    outside: PathBuf,
}

impl Base {
    fn new() -> Base {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let root = base.join("root");
        let outside = base.join("outside");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(outside.join("home")).unwrap();
        std::fs::write(outside.join("secret.md"), CANARY).unwrap();
        Base {
            _dir: dir,
            base,
            root,
            outside,
        }
    }

    fn put(&self, rel: &str, text: &str) {
        let path = self.root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn text(&self, rel: &str) -> String {
        std::fs::read_to_string(self.root.join(rel)).unwrap()
    }
}

/// One "process": sandbox, workspace, registry and executor over a base.
struct Runtime {
    executor: Executor,
    ctx: CallContext,
}

impl Runtime {
    fn new(base: &Base, config: MemoryConfig) -> Runtime {
        let sandbox = Sandbox::new(SandboxConfig::new(
            // The memory tools never spawn a command.
            PathBuf::from("/nonexistent/stage2"),
            base.base.join("state"),
        ))
        .unwrap();
        let workspace =
            LocalWorkspace::new("test", vec![base.root.clone()], base.root.clone(), sandbox)
                .unwrap();
        let fs = Arc::new(Fs::new(Arc::new(workspace), Limits::default()));
        let mut registry = Registry::new();
        register_memory_tools(&mut registry, fs, config).unwrap();
        let policy = Policy::preset(PolicyPreset::Standard, Some(&base.outside.join("home")));
        let executor = Executor::builder(registry).policy(policy).build();
        let ctx = CallContext::new("test-call", "test", base.root.clone())
            .with_roots(vec![base.root.clone()]);
        Runtime { executor, ctx }
    }

    async fn ok(&self, name: &str, args: Value) -> ToolOutput {
        match self.executor.call(name, args.clone(), &self.ctx).await {
            Ok(result) => result.output,
            Err(e) => panic!("{name} {args} failed: {e}"),
        }
    }

    async fn err(&self, name: &str, args: Value) -> String {
        match self.executor.call(name, args.clone(), &self.ctx).await {
            Ok(result) => panic!("{name} {args} succeeded: {:#?}", result.output),
            Err(e) => e.to_string(),
        }
    }
}

fn text(output: &ToolOutput) -> String {
    output
        .content
        .iter()
        .filter_map(|c| match c {
            Content::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn facts(output: &ToolOutput) -> Value {
    output.structured.clone().unwrap()
}

/// Every entry under `dir` (files with their bytes, symlinks with their
/// targets), never following links.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(next) = todo.pop() {
        for entry in std::fs::read_dir(&next).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let rel = path.strip_prefix(dir).unwrap().to_owned();
            let what = if meta.is_symlink() {
                format!("-> {}", std::fs::read_link(&path).unwrap().display())
            } else if meta.is_dir() {
                todo.push(path);
                "dir".to_owned()
            } else {
                String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned()
            };
            out.insert(rel, what);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn specs_declare_class_group_and_schema() {
    let base = Base::new();
    let fs = Arc::new(Fs::new(
        Arc::new(
            LocalWorkspace::new(
                "test",
                vec![base.root.clone()],
                base.root.clone(),
                Sandbox::new(SandboxConfig::new(
                    PathBuf::from("/nonexistent/stage2"),
                    base.base.join("state"),
                ))
                .unwrap(),
            )
            .unwrap(),
        ),
        Limits::default(),
    ));
    let mut registry = Registry::new();
    register_memory_tools(&mut registry, fs, MemoryConfig::default()).unwrap();
    let described: Vec<Value> = [
        "memory_append",
        "memory_replace",
        "memory_search",
        "memory_read",
    ]
    .iter()
    .map(|name| {
        let spec = registry.get(name).unwrap().spec();
        let schema = &spec.input_schema;
        let mut properties: Vec<&String> =
            schema["properties"].as_object().unwrap().keys().collect();
        properties.sort();
        json!({
            "name": spec.name,
            "effect_class": spec.effect_class,
            "idempotency": spec.idempotency,
            "group": spec.group,
            "properties": properties,
            "required": schema.get("required").cloned().unwrap_or(json!([])),
            "additionalProperties": schema["additionalProperties"],
            "path_args": spec.path_args,
        })
    })
    .collect();
    let expected = json!([
        {"name": "memory_append", "effect_class": "mutate-reversible",
         "idempotency": "check-before-act", "group": "group:memory",
         "properties": ["file", "section", "text"], "required": ["text"],
         "additionalProperties": false, "path_args": []},
        {"name": "memory_replace", "effect_class": "mutate-reversible",
         "idempotency": "check-before-act", "group": "group:memory",
         "properties": ["expected_sha256", "file", "new_text", "old_text"],
         "required": ["old_text", "new_text"], "additionalProperties": false, "path_args": []},
        {"name": "memory_search", "effect_class": "read", "idempotency": null,
         "group": "group:memory", "properties": ["file", "limit", "query"],
         "required": ["query"], "additionalProperties": false, "path_args": []},
        {"name": "memory_read", "effect_class": "read", "idempotency": null,
         "group": "group:memory", "properties": ["file", "offset"], "required": [],
         "additionalProperties": false, "path_args": []},
    ]);
    assert_eq!(Value::Array(described), expected);
    for name in [
        "memory_append",
        "memory_replace",
        "memory_search",
        "memory_read",
    ] {
        let description = &registry.get(name).unwrap().spec().description;
        assert!(
            description.contains("Use") || description.contains("use"),
            "{name}: {description}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn memory_persists_across_a_restart() {
    let base = Base::new();
    let first = Runtime::new(&base, MemoryConfig::default());
    let created = first
        .ok("memory_append", json!({"text": "The user prefers tabs."}))
        .await;
    assert_eq!(facts(&created)["line"], 1);
    assert_eq!(facts(&created)["created"], true);
    let appended = first
        .ok(
            "memory_append",
            json!({"section": "Deploy", "text": "Deploy with `make release`.\n"}),
        )
        .await;
    assert_eq!(facts(&appended)["line"], 3);
    let notes = first
        .ok(
            "memory_append",
            json!({"file": "NOTES.md", "section": "Build", "text": "cargo build -j1"}),
        )
        .await;
    assert_eq!(facts(&notes)["line"], 1);
    let expected = "The user prefers tabs.\n\n## Deploy\n\nDeploy with `make release`.\n";
    assert_eq!(base.text("memory/MEMORY.md"), expected);
    assert_eq!(
        facts(&appended)["sha256"],
        json!(sha256(expected.as_bytes()))
    );
    drop(first);

    let second = Runtime::new(&base, MemoryConfig::default());
    let read = second.ok("memory_read", json!({})).await;
    let names: Vec<(Value, Value)> = facts(&read)["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["name"].clone(), f["sections"].clone()))
        .collect();
    assert_eq!(
        names,
        vec![
            (json!("MEMORY.md"), json!(2)),
            (json!("NOTES.md"), json!(1))
        ]
    );
    let shown = second.ok("memory_read", json!({"file": "MEMORY.md"})).await;
    assert_eq!(
        text(&shown),
        "     1\tThe user prefers tabs.\n     2\t\n     3\t## Deploy\n     4\t\n     5\tDeploy \
         with `make release`.\n"
    );
    assert_eq!(facts(&shown)["sha256"], json!(sha256(expected.as_bytes())));
    let sha = facts(&shown)["sha256"].as_str().unwrap().to_owned();
    second
        .ok(
            "memory_replace",
            json!({"old_text": "tabs", "new_text": "spaces", "expected_sha256": sha}),
        )
        .await;
    drop(second);

    let third = Runtime::new(&base, MemoryConfig::default());
    let found = third.ok("memory_search", json!({"query": "spaces"})).await;
    assert_eq!(facts(&found)["hits"][0]["file"], "MEMORY.md");
    assert_eq!(facts(&found)["hits"][0]["line_start"], 1);
    assert_eq!(
        base.text("memory/MEMORY.md"),
        "The user prefers spaces.\n\n## Deploy\n\nDeploy with `make release`.\n"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_retried_append_does_not_duplicate() {
    let base = Base::new();
    let rt = Runtime::new(&base, MemoryConfig::default());
    let args = json!({"section": "Deploy", "text": "Deploy with make."});
    rt.ok("memory_append", args.clone()).await;
    let before = base.text("memory/MEMORY.md");
    let again = rt.ok("memory_append", args).await;
    assert_eq!(facts(&again)["appended"], false);
    assert_eq!(facts(&again)["line"], 1);
    assert_eq!(base.text("memory/MEMORY.md"), before);
}

#[tokio::test(flavor = "multi_thread")]
async fn failed_replacements_change_nothing() {
    let base = Base::new();
    let original = "# Facts\n\nport 8080\nhost a\nport 8080\n";
    base.put("memory/MEMORY.md", original);
    let rt = Runtime::new(&base, MemoryConfig::default());

    let several = rt
        .err(
            "memory_replace",
            json!({"old_text": "port 8080", "new_text": "port 9090"}),
        )
        .await;
    assert!(several.contains("occurs 2 times"), "{several}");
    assert!(several.contains("at lines 3, 5"), "{several}");
    assert_eq!(base.text("memory/MEMORY.md"), original);

    let none = rt
        .err(
            "memory_replace",
            json!({"old_text": "port 7070", "new_text": "port 9090"}),
        )
        .await;
    assert!(none.contains("was not found"), "{none}");
    assert_eq!(base.text("memory/MEMORY.md"), original);

    let stale = rt
        .err(
            "memory_replace",
            json!({"old_text": "host a", "new_text": "host b", "expected_sha256": "0".repeat(64)}),
        )
        .await;
    assert!(stale.contains("changed since it was read"), "{stale}");
    assert_eq!(base.text("memory/MEMORY.md"), original);

    let missing = rt
        .err(
            "memory_replace",
            json!({"file": "OTHER.md", "old_text": "x", "new_text": "y"}),
        )
        .await;
    assert!(missing.contains("does not exist"), "{missing}");
    assert!(!base.root.join("memory/OTHER.md").exists());

    // The unique one works, and deleting with an empty new_text too.
    rt.ok(
        "memory_replace",
        json!({"old_text": "host a\n", "new_text": ""}),
    )
    .await;
    assert_eq!(
        base.text("memory/MEMORY.md"),
        "# Facts\n\nport 8080\nport 8080\n"
    );
}

fn search_corpus(base: &Base) {
    base.put(
        "memory/DEPLOY.md",
        "# Deploy\n\
         Production deploys run `make release` on the build host.\n\
         \n\
         ## Staging\n\
         Staging deploys happen on every merge to main.\n\
         \n\
         ## Rollback\n\
         To rollback a release run `make rollback`. A rollback needs approval from on-call.\n",
    );
    base.put(
        "memory/PREFS.md",
        "# Style\n\
         The user prefers tabs and short commit messages.\n\
         \n\
         ## Testing\n\
         Run tests with cargo nextest. Snapshot tests must be reviewed.\n\
         \n\
         ## Editor\n\
         The user edits in neovim.\n",
    );
    base.put(
        "memory/MEMORY.md",
        "Database: PostgreSQL 16 on db.internal.\n\
         \n\
         ## Database backups\n\
         Database backups run nightly and are kept 30 days.\n\
         \n\
         ## Secrets\n\
         Secrets live in Vault; never commit them.\n",
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn search_ranks_sections_by_relevance() {
    let base = Base::new();
    search_corpus(&base);
    let rt = Runtime::new(&base, MemoryConfig::default());
    let top3 = |output: &ToolOutput| -> Vec<String> {
        facts(output)["hits"]
            .as_array()
            .unwrap()
            .iter()
            .take(3)
            .map(|h| {
                format!(
                    "{}#{}",
                    h["file"].as_str().unwrap(),
                    h["heading"].as_str().unwrap_or("-")
                )
            })
            .collect()
    };
    let cases = [
        (
            "how do I rollback a release",
            vec!["DEPLOY.md#Rollback", "DEPLOY.md#Deploy"],
        ),
        (
            "database backups",
            vec!["MEMORY.md#Database backups", "MEMORY.md#-"],
        ),
        (
            "user tests",
            vec!["PREFS.md#Testing", "PREFS.md#Editor", "PREFS.md#Style"],
        ),
    ];
    for (query, expected) in cases {
        let found = rt.ok("memory_search", json!({"query": query})).await;
        assert_eq!(top3(&found), expected, "{query}\n{}", text(&found));
    }
    // Snippet, line range and the bounded limit.
    let found = rt
        .ok("memory_search", json!({"query": "rollback", "limit": 1}))
        .await;
    let hits = &facts(&found)["hits"];
    assert_eq!(hits.as_array().unwrap().len(), 1);
    assert_eq!(
        (hits[0]["line_start"].clone(), hits[0]["line_end"].clone()),
        (json!(7), json!(8))
    );
    assert_eq!(
        hits[0]["snippet"],
        json!([
            {"line": 7, "text": "## Rollback"},
            {"line": 8, "text": "To rollback a release run `make rollback`. A rollback needs approval from on-call."},
        ])
    );
    // Restricted to one file, and a query of stopwords only.
    let only = rt
        .ok(
            "memory_search",
            json!({"query": "tests user", "file": "MEMORY.md"}),
        )
        .await;
    assert_eq!(facts(&only)["hits"], json!([]));
    let empty = rt.err("memory_search", json!({"query": "the of a"})).await;
    assert!(empty.contains("no words to search for"), "{empty}");
}

#[tokio::test(flavor = "multi_thread")]
async fn names_that_escape_are_refused_and_nothing_outside_changes() {
    let base = Base::new();
    base.put("memory/MEMORY.md", "fact\n");
    std::os::unix::fs::symlink("../../outside/secret.md", base.root.join("memory/LINK.md"))
        .unwrap();
    let rt = Runtime::new(&base, MemoryConfig::default());
    let outside = snapshot(&base.outside);
    let root = snapshot(&base.root);
    for name in [
        "../x.md",
        "/etc/passwd",
        "a/b.md",
        ".hidden.md",
        "x.txt",
        "a\0.md",
    ] {
        let calls = [
            ("memory_append", json!({"file": name, "text": "pwned"})),
            (
                "memory_replace",
                json!({"file": name, "old_text": "canary", "new_text": "pwned"}),
            ),
            ("memory_read", json!({"file": name})),
            ("memory_search", json!({"file": name, "query": "canary"})),
        ];
        for (tool, args) in calls {
            let error = rt.err(tool, args).await;
            // The path layer sees the memory file as a path and may refuse
            // first (a NUL byte); otherwise the tool's name rule does.
            assert!(
                error.contains("memory file names are plain names like NOTES.md")
                    || error.contains("denied by the paths policy"),
                "{tool} {name:?}: {error}"
            );
        }
    }
    let calls = [
        ("memory_append", json!({"file": "LINK.md", "text": "pwned"})),
        (
            "memory_replace",
            json!({"file": "LINK.md", "old_text": "canary", "new_text": "pwned"}),
        ),
        ("memory_read", json!({"file": "LINK.md"})),
        (
            "memory_search",
            json!({"file": "LINK.md", "query": "canary"}),
        ),
    ];
    for (tool, args) in calls {
        let error = rt.err(tool, args).await;
        assert!(error.contains("symbolic link"), "{tool}: {error}");
        assert!(!error.contains(CANARY.trim()), "{tool}: {error}");
    }
    // The link is not listed as a memory file nor searched.
    let listed = rt.ok("memory_read", json!({})).await;
    assert_eq!(facts(&listed)["ignored"], json!(["LINK.md"]));
    let found = rt.ok("memory_search", json!({"query": "canary"})).await;
    assert_eq!(facts(&found)["hits"], json!([]));
    assert_eq!(snapshot(&base.outside), outside);
    assert_eq!(snapshot(&base.root), root);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_memory_dir_linked_outside_is_refused() {
    let base = Base::new();
    std::os::unix::fs::symlink("../outside", base.root.join("memory")).unwrap();
    let rt = Runtime::new(&base, MemoryConfig::default());
    let outside = snapshot(&base.outside);
    let calls = [
        (
            "memory_append",
            json!({"file": "secret.md", "text": "pwned"}),
        ),
        (
            "memory_replace",
            json!({"file": "secret.md", "old_text": "canary", "new_text": "pwned"}),
        ),
        ("memory_read", json!({"file": "secret.md"})),
        ("memory_read", json!({})),
        ("memory_search", json!({"query": "canary"})),
    ];
    for (tool, args) in calls {
        let error = rt.err(tool, args).await;
        assert!(error.contains("outside the workspace"), "{tool}: {error}");
    }
    assert_eq!(snapshot(&base.outside), outside);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_configured_directory_and_default_file_are_used() {
    let base = Base::new();
    let config = MemoryConfig::default()
        .dir(".agent/memory")
        .default_file("FACTS.md");
    let rt = Runtime::new(&base, config);
    rt.ok("memory_append", json!({"text": "kept"})).await;
    assert_eq!(base.text(".agent/memory/FACTS.md"), "kept\n");
    let read = rt.ok("memory_read", json!({})).await;
    assert_eq!(facts(&read)["dir"], ".agent/memory");
}

fn sha256(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

//! The scenarios each tool runs in: enough to reach every kind of result
//! it has, in an order where later calls build on earlier ones (a write
//! then an edit, a process started then read and killed).

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::Runtime;

/// `read` (text, paged, empty, CRLF with BOM, mixed endings, a long line,
/// invalid UTF-8, an image, a binary file, a file too large to count),
/// `write`, `edit` (each match pass, dry run, several edits, CRLF),
/// `apply_patch` (add, update, delete, move, dry run, unified diff, modes),
/// `grep` (each mode, paged, no match, one file), `find` and `ls`.
pub async fn file_tools(rt: &mut Runtime) {
    let lines: String = (1..=30).map(|i| format!("line {i}\n")).collect();
    rt.put("notes.txt", &lines);
    rt.put("empty.txt", "");
    rt.put("crlf.txt", "\u{feff}first\r\nsecond\r\n");
    rt.put("mixed.txt", "unix\nwindows\r\n");
    rt.put("long.txt", format!("{}\n", "x".repeat(10_000)));
    rt.put("latin1.txt", b"caf\xe9\n");
    rt.put(
        "image.png",
        b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01",
    );
    rt.put("blob.bin", b"\0\x01\x02\x03binary\0");
    rt.put("src/lib.rs", "pub fn answer() -> u32 {\n    42\n}\n");
    rt.put(".hidden/config", "hidden = true\n");
    std::fs::create_dir_all(rt.root.join("emptydir")).unwrap();
    std::os::unix::fs::symlink("notes.txt", rt.root.join("link.txt")).unwrap();
    // A socket: an entry that is neither file, directory nor symlink.
    drop(std::os::unix::net::UnixListener::bind(rt.root.join("sock")).unwrap());
    // Over 256 MiB, so read neither counts its lines nor hashes it: text
    // for longer than the 64 KiB read sniffs, then a sparse tail that costs
    // no disk.
    let head: String = (1..=10_000).map(|i| format!("log line {i}\n")).collect();
    let huge = std::fs::File::create(rt.root.join("huge.log")).unwrap();
    std::io::Write::write_all(&mut &huge, head.as_bytes()).unwrap();
    huge.set_len(300 << 20).unwrap();

    let reads = [
        json!({"path": "notes.txt"}),
        json!({"path": "notes.txt", "offset": 5, "limit": 3}),
        json!({"path": "empty.txt"}),
        json!({"path": "crlf.txt"}),
        json!({"path": "mixed.txt"}),
        json!({"path": "long.txt"}),
        json!({"path": "latin1.txt"}),
        json!({"path": "image.png"}),
        json!({"path": "blob.bin"}),
        json!({"path": "huge.log", "limit": 5}),
    ];
    for args in reads {
        rt.check("read", args).await;
    }
    let huge = rt.check("read", json!({"path": "huge.log"})).await;
    let facts: Vec<&Value> = ["kind", "total_lines", "sha256", "truncated"]
        .iter()
        .map(|fact| &huge[fact])
        .collect();
    assert_eq!(
        facts,
        [&json!("text"), &Value::Null, &Value::Null, &json!(true)],
        "the huge file's page: {huge}"
    );
    // The walks below need not read 300 MiB.
    std::fs::remove_file(rt.root.join("huge.log")).unwrap();

    let created = rt
        .check(
            "write",
            json!({"path": "out/new.txt", "content": "one\ntwo\n"}),
        )
        .await;
    rt.check(
        "write",
        json!({
            "path": "out/new.txt", "content": "three\n",
            "expected_sha256": created["sha256"],
        }),
    )
    .await;
    rt.check(
        "write",
        json!({"path": "out/other.txt", "content": "", "create_only": true}),
    )
    .await;

    rt.put(
        "edit/code.rs",
        "fn main() {\n    let x = 1;\n    let y = 2;\n}\n",
    );
    rt.put("edit/repeat.txt", "a\na\nb\n");
    rt.put("edit/trailing.txt", "x = 1   \ny = 2\n");
    rt.put("edit/indent.rs", "    if a {\n        b();\n    }\n");
    rt.put("edit/crlf.txt", "\u{feff}one\r\ntwo\r\n");
    let edits = [
        json!({"path": "edit/code.rs", "old_text": "let x = 1;", "new_text": "let x = 10;"}),
        json!({
            "path": "edit/code.rs", "old_text": "let y = 2;", "new_text": "let y = 20;",
            "dry_run": true,
        }),
        json!({"path": "edit/repeat.txt", "edits": [
            {"old_text": "a\n", "new_text": "c\n", "replace_all": true},
            {"old_text": "b", "new_text": "d"},
        ]}),
        json!({"path": "edit/trailing.txt", "old_text": "x = 1\ny = 2", "new_text": "x = 3\ny = 2"}),
        json!({"path": "edit/indent.rs", "old_text": "if a {\n    b();\n}", "new_text": "if a {\n    c();\n}"}),
        json!({"path": "edit/crlf.txt", "old_text": "two", "new_text": "deux"}),
    ];
    for args in edits {
        rt.check("edit", args).await;
    }

    rt.put("patch/old.txt", "alpha\nbeta\ngamma\n");
    rt.put("patch/gone.txt", "bye\n");
    rt.put("patch/move.txt", "keep\nold\n");
    rt.put("patch/spaces.txt", "one  \ntwo\nthree\n");
    let patches = [
        json!({"patch": "*** Begin Patch\n\
            *** Add File: patch/added.txt\n+hello\n\
            *** Update File: patch/old.txt\n@@\n alpha\n-beta\n+BETA\n gamma\n\
            *** Delete File: patch/gone.txt\n\
            *** Update File: patch/move.txt\n*** Move to: patch/moved.txt\n@@\n keep\n-old\n+new\n\
            *** End Patch\n"}),
        json!({"patch": "*** Begin Patch\n\
            *** Update File: patch/spaces.txt\n@@\n one\n-two\n+TWO\n three\n\
            *** End Patch\n", "dry_run": true}),
        json!({"patch": "--- a/patch/old.txt\n+++ b/patch/old.txt\n@@ -1,3 +1,3 @@\n alpha\n-BETA\n+beta\n gamma\n"}),
        // git modes: a file made executable, a new executable file.
        json!({"patch": "diff --git a/patch/old.txt b/patch/old.txt\nold mode 100644\nnew mode 100755\n\
            diff --git a/patch/run.sh b/patch/run.sh\nnew file mode 100755\n--- /dev/null\n\
            +++ b/patch/run.sh\n@@ -0,0 +1 @@\n+true\n"}),
    ];
    for args in patches {
        rt.check("apply_patch", args).await;
    }

    let searches = [
        json!({"pattern": "line 1", "context": 1}),
        json!({"pattern": "line", "mode": "files_with_matches"}),
        json!({"pattern": "line", "mode": "count"}),
        json!({"pattern": "line", "limit": 2}),
        json!({"pattern": "line", "mode": "count", "limit": 1}),
        json!({"pattern": "nowhere-to-be-found"}),
        json!({"pattern": "answer", "path": "src/lib.rs"}),
    ];
    for args in searches {
        rt.check("grep", args).await;
    }

    let finds = [
        json!({"pattern": "*.txt"}),
        json!({"type": "dir"}),
        json!({"pattern": "*", "limit": 1}),
        json!({"pattern": "nothing-*"}),
        json!({"sort": "modified", "max_depth": 1, "hidden": true}),
        json!({"pattern": "link.txt", "type": "symlink"}),
    ];
    for args in finds {
        rt.check("find", args).await;
    }

    let listings = [
        json!({}),
        json!({"depth": 3, "hidden": true}),
        json!({"limit": 1}),
        json!({"path": "emptydir"}),
    ];
    for args in listings {
        rt.check("ls", args).await;
    }
}

/// `bash` (exit codes, stderr, stdin, a cut output, a timeout, a signal),
/// `elevated`, and the `process_*` tools through a process's whole life.
pub async fn runtime_tools(rt: &mut Runtime) {
    let commands = [
        json!({"command": "echo hello"}),
        json!({"command": "echo oops >&2; exit 3"}),
        json!({"command": "cat", "stdin": "from stdin\n"}),
        // Over the line limit: cut, the whole of it saved to a file.
        json!({"command": "seq 1 5000"}),
        json!({"command": "sleep 10", "timeout": 1}),
        json!({"command": "kill -KILL $$"}),
    ];
    for args in commands {
        rt.check("bash", args).await;
    }
    let cut = rt.check("bash", json!({"command": "seq 1 5000"})).await;
    assert_eq!(cut["truncated"], json!(true), "{cut}");

    for args in [
        json!({"command": "echo host"}),
        json!({"command": "exit 2"}),
        json!({"command": "seq 1 5000"}),
    ] {
        rt.check("elevated", args).await;
    }

    // A REPL-like process: input, output, end of input, exit.
    let cat = rt.check("process_start", json!({"command": "cat"})).await["pid"].clone();
    rt.check("process_write", json!({"pid": cat, "text": "ping\n"}))
        .await;
    rt.check("process_read", json!({"pid": cat, "offset": 0, "wait": 5}))
        .await;
    rt.check("process_write", json!({"pid": cat, "close": true}))
        .await;
    let mut exited = false;
    for _ in 0..50 {
        let read = rt
            .check("process_read", json!({"pid": cat, "wait": 1}))
            .await;
        if read["status"]["state"] == json!("exited") {
            exited = true;
            break;
        }
    }
    assert!(exited, "cat did not exit after its stdin was closed");

    let sleeper = rt
        .check("process_start", json!({"command": "sleep 30"}))
        .await["pid"]
        .clone();
    rt.check("process_kill", json!({"pid": sleeper})).await;
    // Already ended: nothing to signal.
    rt.check("process_kill", json!({"pid": sleeper})).await;
    rt.check("process_list", json!({})).await;
}

/// The memory tools, from an empty memory directory to one with a file
/// that cannot be read and an entry that is not a memory file.
pub async fn memory_tools(rt: &mut Runtime) {
    rt.check("memory_read", json!({})).await;
    rt.check("memory_append", json!({"text": "Build with make."}))
        .await;
    let deploy = json!({"section": "Deploy", "text": "Deploy with make deploy."});
    rt.check("memory_append", deploy.clone()).await;
    // The same call again (a retry): nothing appended.
    let again = rt.check("memory_append", deploy).await;
    assert_eq!(again["appended"], json!(false), "{again}");
    rt.check(
        "memory_replace",
        json!({"old_text": "make deploy", "new_text": "make release"}),
    )
    .await;
    rt.put("memory/BROKEN.md", b"not \xff UTF-8\n");
    rt.put("memory/notes.txt", "not a memory file\n");
    rt.check("memory_search", json!({"query": "deploy release"}))
        .await;
    rt.check("memory_search", json!({"query": "kubernetes"}))
        .await;
    rt.check("memory_read", json!({})).await;
    rt.check("memory_read", json!({"file": "MEMORY.md"})).await;
    rt.check("memory_read", json!({"file": "MEMORY.md", "offset": 3}))
        .await;
}

/// The `neuron_*` tools, and `snapshot` without and with a checkpoint.
pub async fn neuron_tools(rt: &mut Runtime) {
    for tool in [
        "neuron_status",
        "neuron_disk",
        "neuron_memory",
        "neuron_packages",
        "neuron_env",
    ] {
        rt.check(tool, json!({})).await;
    }
    let first = rt.check("snapshot", json!({})).await;
    rt.put("notes.txt", "changed\n");
    rt.put("snapshot-new.txt", "new\n");
    std::fs::remove_file(rt.root.join("mixed.txt")).unwrap();
    rt.check("snapshot", json!({"checkpoint": first["id"]}))
        .await;
}

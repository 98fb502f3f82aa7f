//! `[store]`, `[approvals]`, `[identity]`, `toolgate approvals` and
//! `toolgate audit` through the real binary: a call that needs a yes
//! files a request, a person's answer from another process is what the
//! same call meets next, and every call leaves an audit record whose chain
//! `toolgate audit verify` checks.

use pretty_assertions::assert_eq;

use super::*;

const ASK_ECHO: &str =
    "[[rules]]\npattern = \"demo_echo\"\naction = \"ask\"\n\n[approvals]\nwait = \"1s\"\n";

fn user_config(s: &Sandbox, text: &str) {
    s.write("home/.config/toolgate/config.toml", text);
}

fn json_of(s: &Sandbox, args: &[&str]) -> Value {
    let o = s.run(args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}: {}", stdout(&o)))
}

/// The SQLite file of the sandbox's store (the default place).
fn database(s: &Sandbox) -> PathBuf {
    s.dir.path().join("home/.local/share/toolgate/toolgate.db")
}

#[test]
fn approvals_config_keys_are_checked_with_the_key_meant() {
    let s = Sandbox::new();
    for (text, expected) in [
        (
            "[approvals]\nwiat = \"9s\"\n",
            "unknown key `wiat` in [approvals]; did you mean `wait`?",
        ),
        (
            "[approvals]\ngrant_ttl = \"8 hours\"\n",
            "[approvals] grant_ttl: expected a duration such as \"90s\"",
        ),
        (
            "[approvals]\nuses = 0\n",
            "[approvals] uses: expected a positive integer or \"unlimited\"",
        ),
        (
            "[store]\nurl = \"mysql://db/x\"\n",
            "[store] url: `mysql://db/x` is not a store URL",
        ),
        (
            "[identity]\nagnet = \"me\"\n",
            "unknown key `agnet` in [identity]; did you mean `agent`?",
        ),
    ] {
        user_config(&s, text);
        let o = s.run(&["tools"]);
        assert_eq!(o.status.code(), Some(2), "{text}: {}", stderr(&o));
        assert!(stderr(&o).contains(expected), "{text}: {}", stderr(&o));
    }
    user_config(&s, "");
    let o = s.run_in(
        &s.project(),
        &["tools"],
        &[("TOOLGATE_STORE_URL", "redis://u:hunter2@h/0")],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("TOOLGATE_STORE_URL"), "{}", stderr(&o));
    // A password never reaches an error message.
    assert!(!stderr(&o).contains("hunter2"), "{}", stderr(&o));
}

#[test]
fn an_untrusted_project_file_may_shorten_the_wait_but_not_move_the_store() {
    let s = Sandbox::new();
    let elsewhere = s.dir.path().join("elsewhere.db");
    s.write(
        "project/toolgate.toml",
        &format!(
            "[store]\nurl = \"sqlite:{}\"\n\n[approvals]\nwait = \"10m\"\ngrant_ttl = \"1m\"\nreviewer = [\"/bin/true\"]\n\n[identity]\nagent = \"someone-else\"\n",
            elsewhere.display()
        ),
    );
    let o = s.run(&["doctor", "--json"]);
    let doctor: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        doctor["store"]["at"],
        format!("SQLite {}", database(&s).display()),
        "{}",
        stderr(&o)
    );
    assert_eq!(doctor["store"]["ok"], true, "{doctor}");
    let warning = stderr(&o);
    for ignored in [
        "[store] url",
        "[approvals] wait = \"10m\" (longer than \"1m30s\")",
        "[approvals] reviewer",
        "[identity] agent",
    ] {
        assert!(warning.contains(ignored), "{ignored}: {warning}");
    }
    assert!(!warning.contains("grant_ttl"), "{warning}");
    assert!(!elsewhere.exists(), "the untrusted file moved the store");
}

#[test]
fn an_unreachable_postgresql_stops_call_and_mcp_at_the_start() {
    let s = Sandbox::new();
    // Port 1 on loopback: nothing listens there.
    let url = [(
        "TOOLGATE_STORE_URL",
        "postgres://toolgate:hunter2@127.0.0.1:1/toolgate",
    )];
    for args in [
        vec!["--demo", "call", "demo_echo", r#"{"text": "hi"}"#],
        vec!["mcp"],
    ] {
        let o = s.run_in(&s.project(), &args, &url);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let said = stderr(&o);
        assert!(
            said.contains("cannot open the approval and audit store (PostgreSQL postgres://toolgate:***@127.0.0.1:1/toolgate)"),
            "{args:?}: {said}"
        );
        assert!(!said.contains("hunter2"), "{said}");
        assert_eq!(stdout(&o), "", "{args:?}");
    }
}

#[test]
fn a_cli_call_waits_then_goes_through_once_approved_and_a_no_holds() {
    let s = Sandbox::new();
    user_config(&s, ASK_ECHO);
    let call = [
        "--demo",
        "--agent",
        "tester",
        "call",
        "demo_echo",
        r#"{"text": "hello"}"#,
    ];
    let o = s.run(&call);
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    let listed = json_of(&s, &["approvals", "list", "--json"]);
    let id = listed[0]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        (&listed[0]["tool"], &listed[0]["agent"], &listed[0]["state"]),
        (&json!("demo_echo"), &json!("tester"), &json!("pending"))
    );
    assert!(
        stderr(&o).contains(&format!(
            "approval {id} is pending; approve it with `toolgate approvals approve {id}` and the same call will then go through"
        )),
        "{}",
        stderr(&o)
    );
    // Asked again before anyone answers: the same request, not a second one.
    let o = s.run(&call);
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    assert_eq!(
        json_of(&s, &["approvals", "list", "--json"])
            .as_array()
            .unwrap()
            .len(),
        1
    );

    let approved = json_of(
        &s,
        &[
            "approvals",
            "approve",
            &id,
            "--uses",
            "2",
            "--ttl",
            "30m",
            "--json",
        ],
    );
    assert_eq!(
        (&approved["grant"]["uses"], &approved["request"]),
        (&json!(2), &json!(id))
    );
    for _ in 0..2 {
        let o = s.run(&call);
        assert_eq!(
            (o.status.code(), stdout(&o)),
            (Some(0), "hello\n".to_owned()),
            "{}",
            stderr(&o)
        );
    }
    // Two uses, two calls: the third asks again.
    let o = s.run(&call);
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    let listed = json_of(&s, &["approvals", "list", "--json"]);
    let second = listed[0]["id"].as_str().unwrap().to_owned();
    assert_ne!(second, id);
    let o = s.run(&["approvals", "deny", &second, "--reason", "enough greetings"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = s.run(&call);
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    assert!(stderr(&o).contains("enough greetings"), "{}", stderr(&o));
    // Nothing to answer twice.
    let o = s.run(&["approvals", "approve", &second]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("`{second}` is denied, not pending")),
        "{}",
        stderr(&o)
    );
    let o = s.run(&["approvals", "show", "apr_nosuchthing"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("no approval request `apr_nosuchthing`"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn approvals_watch_prints_one_line_per_new_request() {
    let s = Sandbox::new();
    user_config(&s, ASK_ECHO);
    let mut watch = toolgate(s.dir.path(), &s.project());
    watch.args(["approvals", "watch", "--json"]);
    watch.stdout(std::process::Stdio::piped());
    let mut child = watch.spawn().unwrap();
    let lines = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()));
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            let _ = sender.send(line);
        }
    });
    for text in ["one", "two", "one"] {
        let args = format!(r#"{{"text": "{text}"}}"#);
        let o = s.run(&["--demo", "call", "demo_echo", &args]);
        assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    }
    let limit = std::time::Duration::from_secs(30);
    let first: Value = serde_json::from_str(&receiver.recv_timeout(limit).unwrap()).unwrap();
    let second: Value = serde_json::from_str(&receiver.recv_timeout(limit).unwrap()).unwrap();
    assert_eq!(
        (&first["arguments"]["text"], &second["arguments"]["text"]),
        (&json!("one"), &json!("two"))
    );
    // The third call reused the first request: no third line.
    assert!(
        receiver
            .recv_timeout(std::time::Duration::from_secs(2))
            .is_err()
    );
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn audit_lists_every_call_and_verify_finds_an_edited_record() {
    let s = Sandbox::new();
    user_config(&s, ASK_ECHO);
    let o = s.run(&["--demo", "call", "demo_flood", r#"{"lines": 1}"#]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = s.run(&[
        "--demo",
        "call",
        "demo_echo",
        r#"{"text": "hi", "token": "s3cret"}"#,
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = s.run(&["--demo", "call", "demo_echo", r#"{"text": "hi"}"#]);
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    let o = s.run(&["--demo", "call", "demo_wipe", r#"{"target": "/"}"#]);
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));

    let records = json_of(&s, &["audit", "--json"]);
    let seen: Vec<(String, String, String)> = records
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["tool"].as_str().unwrap().to_owned(),
                r["decision"].as_str().unwrap().to_owned(),
                r["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(seen.len(), 4, "{records}");
    assert_eq!(
        seen[0],
        ("demo_flood".to_owned(), "allow".to_owned(), "ok".to_owned()),
        "{records}"
    );
    assert_eq!(seen[1].2, "invalid", "{records}");
    // A secret-looking key's value never reaches the log.
    assert!(!records.to_string().contains("s3cret"), "{records}");
    assert_eq!(
        seen[2],
        (
            "demo_echo".to_owned(),
            "ask".to_owned(),
            "pending".to_owned()
        ),
        "{records}"
    );
    assert_eq!(
        (seen[3].0.as_str(), seen[3].1.as_str()),
        ("demo_wipe", "deny"),
        "{records}"
    );
    assert_eq!(records[2]["agent"], "cli");
    assert_eq!(records[3]["layer"], "access");
    assert!(
        records[2]["approval_id"]
            .as_str()
            .unwrap()
            .starts_with("apr_"),
        "{records}"
    );
    let filtered = json_of(
        &s,
        &[
            "audit",
            "--json",
            "--tool",
            "demo_wipe",
            "--decision",
            "deny",
            "--since",
            "1h",
        ],
    );
    assert_eq!(filtered.as_array().unwrap().len(), 1, "{filtered}");
    let table = stdout(&s.run(&["audit"]));
    assert!(table.starts_with("SEQ  TIME"), "{table}");

    let o = s.run(&["audit", "verify"]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert!(
        stdout(&o).starts_with("audit log intact: 4 records"),
        "{}",
        stdout(&o)
    );

    // Someone edits what the third call asked for, in the file itself.
    let edit = std::process::Command::new("sqlite3")
        .arg(database(&s))
        .arg("UPDATE audit SET record = replace(record, '\"text\":\"hi\"', '\"text\":\"ho\"') WHERE seq = 3;")
        .output()
        .unwrap();
    assert!(
        edit.status.success(),
        "{}",
        String::from_utf8_lossy(&edit.stderr)
    );
    let edited = json_of(&s, &["audit", "--json"]);
    assert_eq!(
        edited[2]["arguments"]["text"], "ho",
        "the edit did not land: {edited}"
    );
    let o = s.run(&["audit", "verify"]);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    assert!(
        stdout(&o).starts_with("audit log BROKEN at record 3"),
        "{}",
        stdout(&o)
    );
    let verdict = json_of_failing(&s, &["audit", "verify", "--json"]);
    assert_eq!(
        (&verdict["intact"], &verdict["seq"]),
        (&json!(false), &json!(3)),
        "{verdict}"
    );
}

fn json_of_failing(s: &Sandbox, args: &[&str]) -> Value {
    let o = s.run(args);
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}: {}", stderr(&o)))
}

/// Attack: the store holds the grants and the audit log. An agent whose
/// root contains the SQLite file (`[store] url` pointing into the project)
/// must not be able to write it (approving its own calls) or read it.
#[test]
fn a_store_file_inside_a_root_is_out_of_the_agents_reach() {
    let s = Sandbox::new();
    let db = s.project().join("state/tg.db");
    user_config(
        &s,
        &format!("{ASK_ECHO}\n[store]\nurl = \"sqlite:{}\"\n", db.display()),
    );
    // The first start creates the store; it is protected from that call on.
    assert!(!db.exists());
    for (tool, args) in [
        ("write", r#"{"path": "state/tg.db", "content": "granted"}"#),
        ("bash", r#"{"command": "echo granted > state/tg.db"}"#),
        ("bash", r#"{"command": "rm -f state/tg.db"}"#),
    ] {
        let o = s.run(&["--demo", "call", tool, args]);
        assert_ne!(o.status.code(), Some(0), "{tool} {args}: {}", stdout(&o));
        assert!(
            stderr(&o).contains("protected")
                || stderr(&o).contains("toolgate's own state")
                || stdout(&o).contains("ermission denied")
                || stdout(&o).contains("Read-only")
                || stdout(&o).contains("resource busy"),
            "{tool} {args}: {}{}",
            stdout(&o),
            stderr(&o)
        );
    }
    // Nor read: it holds every workspace's requests and audit records.
    let o = s.run(&["--demo", "call", "read", r#"{"path": "state/tg.db"}"#]);
    assert_ne!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("toolgate's own state"),
        "{}",
        stderr(&o)
    );
    let o = s.run(&[
        "--demo",
        "call",
        "bash",
        r#"{"command": "head -c 15 state/tg.db; echo; echo end"}"#,
    ]);
    assert!(stdout(&o).contains("end"), "{}{}", stdout(&o), stderr(&o));
    assert!(!stdout(&o).contains("SQLite format"), "{}", stdout(&o));
    // Still the store, with the request the agent wanted to approve itself.
    assert!(std::fs::read(&db).unwrap().starts_with(b"SQLite format 3"));
    let o = s.run(&["--demo", "call", "demo_echo", r#"{"text": "hi"}"#]);
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    let listed = json_of(&s, &["approvals", "list", "--json"]);
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    let o = s.run(&["audit", "verify"]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
}

/// A person approves a command prefix: it covers every script whose
/// commands all start with those words (decided on the parsed script), and
/// nothing else, not even a script that adds another command to them.
#[test]
fn a_command_prefix_grant_covers_the_parsed_commands_it_names_and_no_others() {
    let s = Sandbox::new();
    user_config(
        &s,
        "[[rules]]\npattern = \"bash\"\naction = \"ask\"\n\n[approvals]\nwait = \"0s\"\n",
    );
    let bash = |script: &str| {
        let args = json!({ "command": script }).to_string();
        s.run(&["call", "bash", &args])
    };
    let o = bash("echo one -n");
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    let listed = json_of(&s, &["approvals", "list", "--json"]);
    let id = listed[0]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        listed[0]["suggested_prefix"],
        json!(["echo", "one"]),
        "{listed}"
    );
    let o = s.run(&[
        "approvals",
        "approve",
        &id,
        "--prefix",
        "echo",
        "--uses",
        "unlimited",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o)
            .contains("covers scripts whose commands start with `echo` of `bash`, unlimited uses"),
        "{}",
        stdout(&o)
    );
    for covered in ["echo one -n", "echo two", "echo a && echo b | echo c"] {
        let o = bash(covered);
        assert_eq!(o.status.code(), Some(0), "{covered}: {}", stderr(&o));
    }
    let marker = s.project().join("marker");
    for not_covered in [
        format!("echo x; touch {}", marker.display()),
        format!("echox; touch {}", marker.display()),
        format!("touch {}", marker.display()),
    ] {
        let o = bash(&not_covered);
        assert_eq!(o.status.code(), Some(5), "{not_covered}: {}", stderr(&o));
        assert!(!marker.exists(), "{not_covered} ran");
    }
}

#[test]
fn audit_follow_prints_each_new_record_as_it_is_appended() {
    let s = Sandbox::new();
    let o = s.run(&["--demo", "call", "demo_echo", r#"{"text": "before"}"#]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut follow = toolgate(s.dir.path(), &s.project());
    follow.args(["audit", "--follow", "--json", "--tool", "demo_echo"]);
    follow.stdout(std::process::Stdio::piped());
    let mut child = follow.spawn().unwrap();
    let lines = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()));
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            let _ = sender.send(line);
        }
    });
    let limit = std::time::Duration::from_secs(30);
    let first: Value = serde_json::from_str(&receiver.recv_timeout(limit).unwrap()).unwrap();
    assert_eq!(first["arguments"]["text"], "before");
    for text in ["after", "ignored"] {
        let tool = if text == "after" {
            "demo_echo"
        } else {
            "demo_flood"
        };
        let args = if text == "after" {
            r#"{"text": "after"}"#
        } else {
            r#"{"lines": 1}"#
        };
        let o = s.run(&["--demo", "call", tool, args]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let second: Value = serde_json::from_str(&receiver.recv_timeout(limit).unwrap()).unwrap();
    assert_eq!(
        (&second["arguments"]["text"], &second["seq"]),
        (&json!("after"), &json!(2))
    );
    // The other tool's record is filtered out.
    assert!(
        receiver
            .recv_timeout(std::time::Duration::from_secs(2))
            .is_err()
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// A person's yes for five calls, and twelve separate `toolgate call`
/// processes asking the same question at once: exactly five run, on the
/// SQLite file and on PostgreSQL (`TOOLGATE_TEST_POSTGRES_URL`, which
/// scripts/test sets), whose spend is one conditional UPDATE.
#[test]
fn a_five_use_grant_runs_exactly_five_of_twelve_toolgate_processes() {
    let postgres = std::env::var("TOOLGATE_TEST_POSTGRES_URL").unwrap_or_else(|_| {
        panic!(
            "TOOLGATE_TEST_POSTGRES_URL is not set: run scripts/test, which starts a throwaway \
             PostgreSQL, or point it at a server of your own"
        )
    });
    for store in [None, Some(postgres.as_str())] {
        let s = Sandbox::new();
        user_config(
            &s,
            "[[rules]]\npattern = \"demo_echo\"\naction = \"ask\"\n\n[approvals]\nwait = \"0s\"\n",
        );
        let env: Vec<(&str, &str)> = store
            .map(|u| ("TOOLGATE_STORE_URL", u))
            .into_iter()
            .collect();
        // A question of this run only: the PostgreSQL store is shared.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let text = format!("spend-{}-{nanos}", std::process::id());
        let args = json!({ "text": text }).to_string();
        let call = ["--demo", "call", "demo_echo", args.as_str()];
        let o = s.run_in(&s.project(), &call, &env);
        assert_eq!(o.status.code(), Some(5), "{store:?}: {}", stderr(&o));
        let o = s.run_in(&s.project(), &["approvals", "list", "--json"], &env);
        assert!(o.status.success(), "{store:?}: {}", stderr(&o));
        let listed: Value = serde_json::from_slice(&o.stdout).unwrap();
        let id = listed
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["arguments"]["text"] == text.as_str())
            .and_then(|r| r["id"].as_str())
            .unwrap_or_else(|| panic!("{store:?}: no request for {text}: {listed}"))
            .to_owned();
        let o = s.run_in(
            &s.project(),
            &["approvals", "approve", &id, "--uses", "5"],
            &env,
        );
        assert!(o.status.success(), "{store:?}: {}", stderr(&o));
        let children: Vec<_> = (0..12)
            .map(|_| {
                let mut cmd = common::toolgate(s.dir.path(), &s.project());
                cmd.args(call).envs(env.iter().copied());
                cmd.stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let codes: Vec<Option<i32>> = children
            .into_iter()
            .map(|c| c.wait_with_output().unwrap().status.code())
            .collect();
        let ran = codes.iter().filter(|c| **c == Some(0)).count();
        let asked = codes.iter().filter(|c| **c == Some(5)).count();
        assert_eq!((ran, asked), (5, 7), "{store:?}: {codes:?}");
    }
}

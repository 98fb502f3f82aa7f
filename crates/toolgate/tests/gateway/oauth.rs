//! OAuth 2.1 client credentials against a real token endpoint and a
//! resource server that checks every bearer (`peers/oauth.py`, on the
//! Python MCP SDK): the token is fetched with `client_secret_basic`, the
//! scopes and the resource indicator, cached, refreshed before it expires
//! and once after a 401, and a refresh never reconnects the session.

use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::{Peer, Setup, python, python_peer, start_peer, stderr, stdout};

const CLIENT_SECRET: &str = "cl1ent:s3cret/+value";

struct Server {
    _peer: Peer,
    token_url: String,
    mcp_url: String,
    log: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(options: &[&str]) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("oauth.log");
        let mut cmd = Command::new(python());
        cmd.arg(python_peer("oauth.py"))
            .args([
                "--client-id",
                "toolgate-test",
                "--client-secret",
                CLIENT_SECRET,
            ])
            .args(options)
            .arg("--log")
            .arg(&log)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .current_dir(dir.path());
        let (peer, line) = start_peer(cmd, "listening http");
        let mcp_url = line.trim_start_matches("listening ").to_owned();
        let token_url = mcp_url.replace("/mcp", "/token");
        Server {
            _peer: peer,
            token_url,
            mcp_url,
            log,
            _dir: dir,
        }
    }

    fn config(&self, secret: &str) -> Value {
        json!([{
            "name": "secure",
            "kind": "http",
            "url": self.mcp_url,
            "auth": {
                "kind": "oauth-client-credentials",
                "token_url": self.token_url,
                "client_id": "toolgate-test",
                "client_secret": secret,
                "scopes": ["tools:read", "tools:call"],
                "resource": self.mcp_url,
            },
        }])
    }

    fn events(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn count(&self, event: &str) -> usize {
        self.events().iter().filter(|e| e["event"] == event).count()
    }
}

#[test]
fn the_token_is_fetched_with_basic_auth_scopes_and_resource_and_cached() {
    let server = Server::start(&["--expires-in", "3600"]);
    let s = Setup::new().with_servers(server.config(CLIENT_SECRET));
    let mut client = s.mcp();
    let (who, _) = client.call("mcp__secure__whoami", json!({}));
    let who: Value = serde_json::from_str(&who).unwrap();
    assert_eq!(
        (&who["client_id"], &who["scopes"], &who["resource"]),
        (
            &json!("toolgate-test"),
            &json!(["tools:read", "tools:call"]),
            &json!(server.mcp_url)
        )
    );
    for i in 0..3 {
        let (text, _) = client.call("mcp__secure__echo", json!({"message": format!("m{i}")}));
        assert_eq!(text, format!("m{i}"));
    }
    assert!(client.close());
    let tokens: Vec<Value> = server
        .events()
        .into_iter()
        .filter(|e| e["event"] == "token")
        .collect();
    assert_eq!(
        tokens.len(),
        1,
        "one token for the whole session: {tokens:?}"
    );
    assert_eq!(
        (
            &tokens[0]["basic_auth"],
            &tokens[0]["grant_type"],
            &tokens[0]["error"]
        ),
        (&json!(true), &json!("client_credentials"), &Value::Null)
    );
    assert!(
        server
            .events()
            .iter()
            .filter(|e| e["event"] == "mcp")
            .all(|e| e["auth"] == "ok"),
        "every request carried a valid bearer: {:?}",
        server.events()
    );
}

#[test]
fn a_revoked_token_is_replaced_once_and_the_session_survives() {
    // Every token dies after 3 requests: the gateway learns it from a 401.
    let server = Server::start(&["--expires-in", "3600", "--revoke-after", "3"]);
    let s = Setup::new().with_servers(server.config(CLIENT_SECRET));
    let mut client = s.mcp();
    for i in 0..8 {
        let (text, _) = client.call("mcp__secure__echo", json!({"message": format!("n{i}")}));
        assert_eq!(text, format!("n{i}"));
    }
    assert!(client.close());
    let events = server.events();
    assert!(server.count("token") >= 3, "{events:?}");
    assert!(
        events.iter().any(|e| e["auth"] == "revoked"),
        "no request was refused, so nothing was tested: {events:?}"
    );
    assert_eq!(
        server.count("initialize"),
        1,
        "a refresh reconnected: {events:?}"
    );
    let sessions: std::collections::BTreeSet<String> = events
        .iter()
        .filter_map(|e| e["session"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
}

#[test]
fn a_token_is_refreshed_before_it_expires() {
    // 62 s of life, refreshed 60 s before: due after 2 s.
    let server = Server::start(&["--expires-in", "62"]);
    let s = Setup::new().with_servers(server.config(CLIENT_SECRET));
    let mut client = s.mcp();
    client.call("mcp__secure__echo", json!({"message": "first"}));
    assert_eq!(server.count("token"), 1);
    std::thread::sleep(Duration::from_millis(2500));
    client.call("mcp__secure__echo", json!({"message": "second"}));
    assert!(client.close());
    let events = server.events();
    assert_eq!(server.count("token"), 2, "{events:?}");
    assert!(
        events
            .iter()
            .filter(|e| e["event"] == "mcp")
            .all(|e| e["auth"] == "ok"),
        "the old token was used past its refresh time: {events:?}"
    );
    assert_eq!(server.count("initialize"), 1);
}

#[test]
fn a_refused_client_secret_skips_the_server_without_showing_it() {
    let server = Server::start(&[]);
    let s = Setup::new().with_servers(server.config("the-wrong-s3cret"));
    let o = s.run(&["mcp-servers", "test", "secure"]);
    assert_eq!(o.status.code(), Some(1));
    let said = format!("{}{}", stdout(&o), stderr(&o));
    assert!(
        said.contains("refused the client credentials grant for client `toolgate-test`"),
        "{said}"
    );
    assert!(!said.contains("the-wrong-s3cret"), "{said}");
    let log = std::fs::read_to_string(&server.log).unwrap();
    assert!(!log.contains("the-wrong-s3cret") && !log.contains(CLIENT_SECRET));
}

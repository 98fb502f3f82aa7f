//! `toolgate serve`'s gate as an operator and an attacker see it: which
//! address it agrees to listen on, what a rejected client is told, what the
//! operator's log says about it, and a port that is taken.

use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;

use crate::Project;
use crate::common::Served;
use crate::http::{post, serve, stderr_with};

const TOKEN: &str = "gate-test-token-7d2e";

/// A port nothing listens on right now.
fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits for `child` to exit on its own. A server that is still running
/// after a generous while has started serving: it is killed and the test
/// fails with what it said.
fn exited(mut child: Child, port: u16) -> Output {
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let listening = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_ok();
            let _ = child.kill();
            let o = child.wait_with_output().unwrap();
            panic!(
                "toolgate serve kept running (listening on {port}: {listening}):\n{}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// Attack (on the user, by a habit): `--host 0.0.0.0` to "make it work"
/// puts every tool on the network, with the bearer token in clear over
/// plain HTTP. Without --allow-remote the server refuses before it binds
/// anything or makes a token, and listens nowhere.
#[test]
fn a_non_loopback_host_is_refused_without_allow_remote() {
    let p = Project::new();
    for host in ["0.0.0.0", "192.0.2.1", "::"] {
        let port = free_port();
        let child = p
            .toolgate(&["serve", "--host", host, "--port", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let o = exited(child, port);
        let said = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{host}: {said}");
        assert!(
            said.starts_with(&format!("toolgate: refusing to serve on {host}")),
            "{host}: {said}"
        );
        assert!(said.contains("pass --allow-remote"), "{host}: {said}");
        assert!(said.contains("TLS"), "{host}: {said}");
        // Refused before binding: 192.0.2.1 is no address of this machine,
        // and that is not what the error is about.
        assert!(!said.contains("cannot listen"), "{host}: {said}");
        assert!(!said.contains("serving MCP"), "{host}: {said}");
        assert!(
            TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err(),
            "{host}: something listens on {port}"
        );
    }
    assert!(
        !p.base()
            .join("home/.local/share/toolgate/serve-token")
            .exists(),
        "a refused start generated a token"
    );
}

/// With --allow-remote, or `[serve] allow_remote = true` in the user's
/// config, it serves, and says plainly what is missing in front of it.
#[test]
fn allow_remote_serves_every_interface_and_warns_about_plain_http() {
    let p = Project::new();
    let bearer = format!("Bearer {TOKEN}");
    let user_config = p.base().join("home/.config/toolgate/config.toml");
    std::fs::create_dir_all(user_config.parent().unwrap()).unwrap();
    for (args, config) in [
        (&["serve", "--host", "0.0.0.0", "--allow-remote"][..], ""),
        (
            &["serve", "--host", "0.0.0.0"][..],
            "[serve]\nallow_remote = true\n",
        ),
    ] {
        std::fs::write(&user_config, config).unwrap();
        let mut cmd = p.toolgate(args);
        cmd.args(["--port", "0"]).env("TOOLGATE_TOKEN", TOKEN);
        let served = Served::start(cmd).unwrap();
        let said = stderr_with(&served, "serving MCP at");
        assert!(
            said.contains(
                "toolgate: WARNING: serving on 0.0.0.0 (every interface of this machine) port"
            ),
            "{args:?}: {said}"
        );
        for needed in [
            "over plain HTTP",
            "the bearer token and every call travel in clear",
            "TLS-terminating reverse proxy",
        ] {
            assert!(said.contains(needed), "{args:?}: {said}");
        }
        let url = served.url.replace("0.0.0.0", "127.0.0.1");
        assert_eq!(post(&url, &[("Authorization", &bearer)]).0, 200, "{said}");
        // The token check is not relaxed for the wider reach.
        assert_eq!(post(&url, &[]).0, 401);
    }
    // --no-token stays loopback-only, --allow-remote or not.
    let o = p
        .toolgate(&["serve", "--host", "0.0.0.0", "--allow-remote", "--no-token"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{said}");
    assert!(said.contains("--no-token is refused on 0.0.0.0"), "{said}");
}

/// A client that is turned away learns what was wrong with its request;
/// the operator's log gets one line per rejection with method, path,
/// reason and peer. Neither ever shows a token, right or wrong, nor a
/// query string.
#[test]
fn a_rejected_request_is_told_why_and_logged_without_secrets() {
    let p = Project::new();
    let served = serve(&p, &[("TOOLGATE_TOKEN", TOKEN)]);
    let wrong = "Bearer guessed-token-55aa";
    let basic = "Basic dXNlcjpzZWNyZXQtcGFzc3dvcmQ=";
    let url_with_query = format!("{}?access_token=query-secret-99", served.url);
    // URL, headers, status, what the client is told, what the log says.
    type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, u16, &'a str, &'a str);
    let cases: [Case; 5] = [
        (
            &served.url,
            vec![],
            401,
            "a bearer token is required: send `Authorization: Bearer <token>`",
            "no Authorization header (401)",
        ),
        (
            &served.url,
            vec![("Authorization", basic)],
            401,
            "the Authorization header must use the Bearer scheme",
            "the Authorization header is not `Bearer <token>` (401)",
        ),
        (
            &url_with_query,
            vec![("Authorization", wrong)],
            401,
            "the bearer token is wrong",
            "wrong bearer token (401)",
        ),
        (
            &served.url,
            vec![("Authorization", "Bearer")],
            401,
            "a bearer token is required",
            "empty bearer token (401)",
        ),
        (
            &served.url,
            vec![("Host", "evil.example.com")],
            403,
            "forbidden: the Host header names a host this server does not serve",
            "Host \"evil.example.com\" is not a host this server serves (403)",
        ),
    ];
    for (url, headers, status, told, logged) in &cases {
        let (got, body) = post(url, headers);
        assert_eq!(got, *status, "{headers:?}: {body}");
        assert!(body.starts_with(told), "{headers:?}: {body}");
        let said = stderr_with(&served, logged);
        let line = said
            .lines()
            .find(|l| l.ends_with(logged))
            .unwrap_or_else(|| panic!("{headers:?}: no log line `{logged}` in\n{said}"));
        assert!(
            line.starts_with("toolgate: rejected POST /mcp from 127.0.0.1:"),
            "{line}"
        );
        for secret in [TOKEN, "guessed-token-55aa", "dXNlcjpz", "query-secret-99"] {
            assert!(!body.contains(secret), "{headers:?}: {body}");
        }
    }
    let said = served.stderr();
    assert_eq!(
        said.matches("toolgate: rejected ").count(),
        cases.len(),
        "{said}"
    );
    for secret in [TOKEN, "guessed-token-55aa", "dXNlcjpz", "query-secret-99"] {
        assert!(!said.contains(secret), "{said}");
    }
    // An accepted request is not logged as rejected.
    let (status, _) = post(
        &served.url,
        &[("Authorization", &format!("Bearer {TOKEN}"))],
    );
    assert_eq!(status, 200);
    assert_eq!(
        served.stderr().matches("toolgate: rejected ").count(),
        cases.len()
    );
}

/// A port that is taken gets one sentence: which address, and what to do.
#[test]
fn a_port_in_use_is_one_clear_sentence() {
    let p = Project::new();
    let taken = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = taken.local_addr().unwrap().port();
    let o = p
        .toolgate(&["serve", "--port", &port.to_string()])
        .env("TOOLGATE_TOKEN", TOKEN)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{said}");
    assert_eq!(
        said.lines().last().unwrap_or_default(),
        format!(
            "toolgate: cannot listen on 127.0.0.1:{port}: the port is already in use (another \
             `toolgate serve`?); pass another --port, or --port 0 to pick a free one"
        ),
        "{said}"
    );
    assert_eq!(said.matches("in use").count(), 1, "{said}");
    drop(taken);
}

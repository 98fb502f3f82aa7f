//! `toolgate serve`: the SDK over Streamable HTTP behind the bearer token,
//! and what a client without it, or a foreign page, gets.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::json;

use crate::calls::{call_config, call_files, check_calls};
use crate::common::Served;
use crate::{Mode, Project, scenario};

const TOKEN: &str = "e2e-test-token-3f1c";

/// `toolgate serve --port 0` in the project with `env` added.
pub(crate) fn serve(p: &Project, env: &[(&str, &str)]) -> Served {
    let mut cmd = p.toolgate(&["serve", "--port", "0"]);
    for (name, value) in env {
        cmd.env(name, value);
    }
    Served::start(cmd).unwrap()
}

/// The server's stderr once it contains `text`, or after a generous wait.
/// `Served::start` returns as soon as the serving line is read, which may be
/// before that line reaches `Served::stderr`.
pub(crate) fn stderr_with(served: &Served, text: &str) -> String {
    for _ in 0..200 {
        let said = served.stderr();
        if said.contains(text) {
            return said;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    served.stderr()
}

/// The scenario config for the SDK over HTTP.
pub(crate) fn http_config(served: &Served, mode: Mode, token: Option<&str>) -> serde_json::Value {
    json!({"mode": mode.name(), "http": {"url": served.url, "token": token}})
}

/// A plain `initialize` POST to `url` with `headers` (Host defaults to the
/// URL's address): the status and, unless it is 200 (an event stream that
/// may stay open), the body.
pub(crate) fn post(url: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let rest = url.strip_prefix("http://").unwrap();
    let (addr, path) = rest.split_at(rest.find('/').unwrap());
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "0"}}
    })
    .to_string();
    let mut request = format!("POST {path} HTTP/1.1\r\n");
    if !headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("host"))
    {
        request.push_str(&format!("Host: {addr}\r\n"));
    }
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str(&format!(
        "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ));
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = Vec::new();
    let mut buf = [0u8; 4096];
    while !response.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).unwrap();
        assert!(n > 0, "connection closed mid-headers: {response:?}");
        response.extend_from_slice(&buf[..n]);
    }
    let head = String::from_utf8_lossy(&response).into_owned();
    let status: u16 = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    if status != 200 {
        let _ = stream.read_to_end(&mut response);
    }
    let text = String::from_utf8_lossy(&response).into_owned();
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

fn sdk_over_http_with_the_token(mode: Mode) {
    let p = Project::new();
    call_files(&p);
    let served = serve(&p, &[("TOOLGATE_TOKEN", TOKEN)]);
    let said = stderr_with(&served, "token from TOOLGATE_TOKEN");
    assert!(said.contains("token from TOOLGATE_TOKEN"), "{said}");
    let mut config = http_config(&served, mode, Some(TOKEN));
    config["calls"] = call_config();
    let observed = scenario(p.base(), "calls", &config);
    assert_eq!(observed["protocol_version"], mode.protocol());
    check_calls(&observed);
}

#[test]
fn sdk_over_http_with_the_token_legacy() {
    sdk_over_http_with_the_token(Mode::Legacy);
}

#[test]
fn sdk_over_http_with_the_token_auto() {
    sdk_over_http_with_the_token(Mode::Auto);
}

/// Attack: another local process (or user) that does not have the token
/// calls the tools; a web page re-pointing its own name at 127.0.0.1 (DNS
/// rebinding) calls them from the user's browser.
#[test]
fn without_the_token_or_from_a_foreign_host_nothing_is_served() {
    let p = Project::new();
    let served = serve(&p, &[("TOOLGATE_TOKEN", TOKEN)]);
    let bearer = format!("Bearer {TOKEN}");

    let observed = scenario(
        p.base(),
        "unauthorized",
        &http_config(&served, Mode::Legacy, None),
    );
    assert_eq!(observed["raw_without_token"]["status"], 401, "{observed}");
    assert_eq!(observed["raw_wrong_token"]["status"], 401, "{observed}");
    assert_eq!(observed["sdk"], "raised", "{observed}");

    let (status, body) = post(&served.url, &[]);
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("Authorization: Bearer"), "{body}");
    let (status, _) = post(
        &served.url,
        &[("Authorization", "Bearer e2e-test-token-3f1")],
    );
    assert_eq!(status, 401);
    let (status, body) = post(
        &served.url,
        &[("Authorization", &bearer), ("Host", "evil.example.com")],
    );
    assert_eq!(status, 403, "{body}");
    let (status, body) = post(
        &served.url,
        &[
            ("Authorization", &bearer),
            ("Origin", "http://evil.example.com"),
        ],
    );
    assert_eq!(status, 403, "{body}");
    // The same request with the token and a loopback host is served.
    let (status, body) = post(&served.url, &[("Authorization", &bearer)]);
    assert_eq!(status, 200, "{body}");
}

/// Without TOOLGATE_TOKEN or `[serve] token`, the first start generates a
/// token only the user can read, and later starts keep it.
#[test]
fn a_generated_token_is_private_and_kept() {
    let p = Project::new();
    let data = p.base().join("data");
    let data_env = data.to_str().unwrap();
    let file = data.join("toolgate/serve-token");

    let first = serve(&p, &[("XDG_DATA_HOME", data_env)]);
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(format!("{mode:o}"), "600");
    let token = std::fs::read_to_string(&file).unwrap().trim().to_owned();
    assert!(token.len() >= 32, "{token:?}");
    let said = stderr_with(&first, "serving MCP at");
    assert!(said.contains("generated a bearer token"), "{said}");
    let bearer = format!("Bearer {token}");
    assert_eq!(post(&first.url, &[("Authorization", &bearer)]).0, 200);
    assert_eq!(post(&first.url, &[]).0, 401);
    let observed = scenario(
        p.base(),
        "tools",
        &http_config(&first, Mode::Auto, Some(&token)),
    );
    assert!(observed["tools"].get("read").is_some(), "{observed}");
    drop(first);

    let second = serve(&p, &[("XDG_DATA_HOME", data_env)]);
    assert_eq!(
        std::fs::read_to_string(&file).unwrap().trim(),
        token,
        "the token changed on restart"
    );
    let said = stderr_with(&second, "serving MCP at");
    assert!(!said.contains("generated"), "{said}");
    assert_eq!(post(&second.url, &[("Authorization", &bearer)]).0, 200);
}

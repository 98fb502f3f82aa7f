//! Network mode `proxy` with the clients agents actually run: git over dumb
//! HTTP and curl over TLS (CONNECT, certificate verified end to end), inside
//! real bubblewrap. Only loopback is reached: host servers on 127.0.0.1 and a
//! static resolver that maps the test names to them.
//!
//! Needs git, curl and openssl on the host; each test fails (never skips)
//! when one is missing.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Component, Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use toolgate_sandbox::proxy::Protocol;

use crate::world::{
    CURL_RECV_ERROR, TIMED_OUT, World, assert_bytes_flowed, free_port, host, host_env,
};

const README: &str = "fetched through the egress proxy\n";

/// A bare repository with one commit holding `README`, prepared for git's
/// dumb HTTP protocol, at `<base>/repo.git`.
fn bare_repo(base: &Path) {
    let work = base.join("work");
    std::fs::create_dir(&work).unwrap();
    host(
        "git",
        &["-c", "init.defaultBranch=main", "init", "-q"],
        &work,
    );
    std::fs::write(work.join("README"), README).unwrap();
    host("git", &["add", "README"], &work);
    host(
        "git",
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "commit.gpgsign=false",
            "commit",
            "-q",
            "-m",
            "one",
        ],
        &work,
    );
    host("git", &["clone", "-q", "--bare", "work", "repo.git"], base);
    // info/refs and objects/info/packs: what a dumb-HTTP client reads first.
    host("git", &["update-server-info"], &base.join("repo.git"));
}

/// A host HTTP/1.0 server on 127.0.0.1 serving the files under `dir`
/// (query strings ignored, 404 for anything else).
fn serve_dir(dir: PathBuf) -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let dir = dir.clone();
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head);
                // The proxy forwards in origin form; accept absolute form too.
                let target = head.split(' ').nth(1).unwrap_or("/");
                let target = target
                    .strip_prefix("http://")
                    .and_then(|t| t.find('/').map(|i| &t[i..]))
                    .unwrap_or(target);
                let path = target.split('?').next().unwrap_or("/");
                let relative = Path::new(path.trim_start_matches('/'));
                let body = relative
                    .components()
                    .all(|c| matches!(c, Component::Normal(_)))
                    .then(|| std::fs::read(dir.join(relative)).ok())
                    .flatten();
                let (status, body) = match body {
                    Some(body) => ("200 OK", body),
                    None => ("404 Not Found", b"not found\n".to_vec()),
                };
                let reply = format!(
                    "HTTP/1.0 {status}\r\nContent-Type: application/octet-stream\r\n\
                     Content-Length: {}\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(reply.as_bytes());
                let _ = stream.write_all(&body);
            });
        }
    });
    port
}

#[tokio::test]
async fn git_clones_over_http_from_an_allowed_host_only() {
    host("git", &["--version"], Path::new("/"));
    let served = tempfile::tempdir().unwrap();
    bare_repo(served.path());
    let port = serve_dir(served.path().to_owned());
    let w = World::new(
        &[format!("repo.test:{port}")],
        &[],
        &["repo.test", "other.test"],
        host_env(&[]),
    );

    let ok = w
        .sh(&format!(
            "timeout 20 git clone -q http://repo.test:{port}/repo.git clone"
        ))
        .await;
    assert_eq!(ok.outcome.exit_code, 0, "{ok:#?}");
    assert_eq!(
        std::fs::read_to_string(w.root().join("clone/README")).unwrap(),
        README
    );
    let records = w.take_records();
    assert!(!records.is_empty());
    for record in &records {
        assert_eq!(
            (
                record.host.as_str(),
                record.port,
                record.protocol,
                record.allowed
            ),
            ("repo.test", port, Protocol::HttpForward, true),
            "{record:?}"
        );
    }
    assert_bytes_flowed(&records);

    let refused = w
        .sh(&format!(
            "timeout 20 git clone -q http://other.test:{port}/repo.git refused"
        ))
        .await;
    assert_ne!(refused.outcome.exit_code, TIMED_OUT, "{refused:#?}");
    assert_ne!(refused.outcome.exit_code, 0, "{refused:#?}");
    assert!(refused.outcome.stderr.contains("403"), "{refused:#?}");
    let records = w.take_records();
    assert!(!records.is_empty());
    for record in &records {
        assert_eq!(
            (record.host.as_str(), record.port, record.allowed),
            ("other.test", port, false),
            "{record:?}"
        );
    }
    assert_bytes_flowed(&records);
}

/// `openssl s_server -www` on the host; killed when dropped.
struct TlsServer {
    child: Child,
    port: u16,
}

impl TlsServer {
    fn start(dir: &Path) -> TlsServer {
        // A free port for s_server, which cannot report the one it picked.
        let port = free_port();
        let child = Command::new("openssl")
            .args(["s_server", "-accept", &format!("127.0.0.1:{port}")])
            .args(["-cert", "c", "-key", "k", "-www"])
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("this test needs `openssl` on the host: {e}"));
        let mut server = TlsServer { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err() {
            if let Some(status) = server.child.try_wait().unwrap() {
                panic!("openssl s_server exited early: {status}");
            }
            assert!(Instant::now() < deadline, "openssl s_server never listened");
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn curl_verifies_tls_end_to_end_through_connect() {
    let certs = tempfile::tempdir().unwrap();
    host(
        "openssl",
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=secure.test",
            "-days",
            "1",
            "-keyout",
            "k",
            "-out",
            "c",
        ],
        certs.path(),
    );
    let server = TlsServer::start(certs.path());
    let port = server.port;
    let w = World::new(
        &[format!("secure.test:{port}")],
        &["denied.test".into()],
        &["secure.test", "denied.test"],
        host_env(&[]),
    );
    std::fs::copy(certs.path().join("c"), w.root().join("ca.pem")).unwrap();

    let ok = w
        .sh(&format!(
            "curl -sS --max-time 10 --cacert ca.pem https://secure.test:{port}/"
        ))
        .await;
    assert_eq!(
        (ok.outcome.exit_code, ok.outcome.stderr.as_str()),
        (0, ""),
        "{ok:#?}"
    );
    assert!(ok.outcome.stdout.contains("Ciphers supported"), "{ok:#?}");
    let refused = w
        .sh(&format!(
            "curl -sS --max-time 10 --cacert ca.pem https://denied.test:{port}/"
        ))
        .await;
    assert_eq!(refused.outcome.exit_code, CURL_RECV_ERROR, "{refused:#?}");
    assert!(refused.outcome.stderr.contains("403"), "{refused:#?}");

    let records = w.take_records();
    let summary: Vec<(String, u16, Protocol, bool)> = records
        .iter()
        .map(|r| (r.host.clone(), r.port, r.protocol, r.allowed))
        .collect();
    assert_eq!(
        summary,
        vec![
            ("secure.test".into(), port, Protocol::HttpConnect, true),
            ("denied.test".into(), port, Protocol::HttpConnect, false),
        ]
    );
    assert_bytes_flowed(&records);
    drop(server);
}

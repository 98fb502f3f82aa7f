//! Network mode `proxy` end to end: real bubblewrap, stage 2's forwarder,
//! the egress proxy, and curl inside the sandbox. Only loopback is reached:
//! a host HTTP server on 127.0.0.1 and a static resolver that maps
//! `allowed.test` and `denied.test` to it.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, TcpListener};
use std::sync::Arc;

use pretty_assertions::assert_eq;
use toolgate_sandbox::egress::EgressRules;
use toolgate_sandbox::proxy::{Protocol, StaticResolver};
use toolgate_sandbox::{
    BackendChoice, NetworkMode, Sandbox, SandboxCommand, SandboxConfig, SandboxError, SandboxSpec,
};

use crate::world::{CURL_RECV_ERROR, World, assert_openbsd_nc, host_env, openbsd_nc, stage2};

const PAGE: &str = "hello from the allowed host";
const CREDENTIALED: &str = "http://user:pa55@corp.example:8080";

/// curl's exit codes the tests tell apart (and [`CURL_RECV_ERROR`]).
const CURL_COULDNT_CONNECT: i32 = 7;
const CURL_PROXY_ERROR: i32 = 97;

/// A host HTTP server on 127.0.0.1 answering every request with [`PAGE`].
fn serve_page() -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                    head.push(byte[0]);
                }
                let reply = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{PAGE}",
                    PAGE.len()
                );
                let _ = stream.write_all(reply.as_bytes());
            });
        }
    });
    port
}

/// A [`World`] allowing `allowed.test` on the port of a fresh [`serve_page`]
/// server and denying `denied.test`, both resolving to loopback, whose host
/// environment holds credentialed proxy variables; and that port.
fn world() -> (World, u16) {
    let port = serve_page();
    let env = host_env(&[
        ("HOME", "/root"),
        ("HTTP_PROXY", CREDENTIALED),
        ("https_proxy", CREDENTIALED),
        ("ALL_PROXY", CREDENTIALED),
    ]);
    let w = World::new(
        &[format!("allowed.test:{port}")],
        &["denied.test".into()],
        &["allowed.test", "denied.test"],
        env,
    );
    (w, port)
}

/// Runs curl with `args` (plus `--max-time 10`, so a hang would show up
/// as exit 28) and returns its exit code, stdout and stderr.
async fn curl(w: &World, args: &str) -> (i32, String, String) {
    let o = w.sh(&format!("curl -sS --max-time 10 {args}")).await;
    (o.outcome.exit_code, o.outcome.stdout, o.outcome.stderr)
}

#[tokio::test]
async fn an_allowed_host_answers_through_http_connect_and_socks() {
    let (w, port) = world();
    let url = format!("http://allowed.test:{port}/");
    for (how, args) in [
        ("http", format!("-x http://127.0.0.1:3128 {url}")),
        (
            "connect",
            format!("-x http://127.0.0.1:3128 --proxytunnel {url}"),
        ),
        ("socks", format!("--socks5-hostname 127.0.0.1:1080 {url}")),
        // The environment alone routes curl through the proxy.
        ("environment", url.clone()),
    ] {
        assert_eq!(
            curl(&w, &args).await,
            (0, PAGE.into(), String::new()),
            "{how}"
        );
    }
    let records = w.take_records();
    let summary: Vec<(String, u16, Protocol, bool)> = records
        .iter()
        .map(|r| (r.host.clone(), r.port, r.protocol, r.allowed))
        .collect();
    let allowed = |protocol| ("allowed.test".to_owned(), port, protocol, true);
    assert_eq!(
        summary,
        vec![
            allowed(Protocol::HttpForward),
            allowed(Protocol::HttpConnect),
            allowed(Protocol::Socks5),
            allowed(Protocol::HttpForward),
        ]
    );
    for record in &records {
        assert!(record.bytes_up > 0, "{record:?}");
        assert!(record.bytes_down > PAGE.len() as u64, "{record:?}");
    }
}

#[tokio::test]
async fn refused_destinations_fail_at_once_with_a_proxy_error() {
    let (w, port) = world();
    let other_port = if port == 65535 { port - 1 } else { port + 1 };
    let refused = [
        ("denied.test", format!("denied.test:{port}")),
        ("unlisted.test", format!("unlisted.test:{port}")),
        ("allowed.test", format!("allowed.test:{other_port}")),
        ("127.0.0.1", format!("127.0.0.1:{port}")),
    ];
    for (host, target) in &refused {
        // `--noproxy ''`: NO_PROXY lists 127.0.0.1, which would make curl
        // skip the proxy for the raw-IP case instead of asking it.
        let plain = curl(
            &w,
            &format!(
                "--noproxy '' -o /dev/null -w '%{{http_code}}' -x http://127.0.0.1:3128 http://{target}/"
            ))
            .await;
        assert_eq!(
            (plain.0, plain.1.as_str()),
            (0, "403"),
            "{target}: {plain:?}"
        );
        let connect = curl(
            &w,
            &format!("--noproxy '' -x http://127.0.0.1:3128 --proxytunnel http://{target}/"),
        )
        .await;
        assert_eq!(connect.0, CURL_RECV_ERROR, "{target}: {connect:?}");
        assert!(connect.2.contains("403"), "{target}: {connect:?}");
        let socks = curl(
            &w,
            &format!("--noproxy '' --socks5-hostname 127.0.0.1:1080 http://{target}/"),
        )
        .await;
        assert_eq!(socks.0, CURL_PROXY_ERROR, "{target}: {socks:?}");
        let records = w.take_records();
        assert_eq!(records.len(), 3, "{target}: {records:?}");
        for record in records {
            assert_eq!(
                (record.host.as_str(), record.allowed, record.bytes_down),
                (*host, false, 0),
                "{record:?}"
            );
            assert!(!record.reason.is_empty());
        }
    }
}

#[tokio::test]
async fn the_command_has_no_way_around_the_proxy() {
    let (w, port) = world();
    // The host's loopback server is not in the sandbox's network namespace.
    let direct = curl(&w, &format!("--noproxy '*' http://127.0.0.1:{port}/")).await;
    assert_eq!(direct.0, CURL_COULDNT_CONNECT, "{direct:?}");
    // No unix socket: not the proxy's, not any other.
    let unix = w
        .sh("python3 -c 'import socket\n\
             try:\n    socket.socket(socket.AF_UNIX)\n\
             except OSError as e:\n    print(e.errno)'")
        .await;
    assert_eq!(
        unix.outcome.stdout.trim(),
        libc::EPERM.to_string(),
        "{unix:#?}"
    );
    let connect = w
        .sh(
            "python3 -c 'import socket; socket.socket(socket.AF_UNIX).connect(\"/run/toolgate/egress.sock\")'",
        )
        .await;
    assert_ne!(connect.outcome.exit_code, 0, "{connect:#?}");
    // Nor the proxy's ports for anything of its own.
    let bind = w
        .sh("python3 -c 'import socket; socket.socket().bind((\"127.0.0.1\", 3128))'")
        .await;
    assert!(
        bind.outcome.stderr.contains("Address already in use"),
        "{bind:#?}"
    );
    // No DNS: names resolve only through the proxy (getent: 2 = not found).
    for name in ["allowed.test", "unlisted.test", "example.com"] {
        let o = w.sh(&format!("getent hosts {name}")).await;
        assert_eq!(o.outcome.exit_code, 2, "{name}: {o:#?}");
    }
    // The forwarder's listeners are not inherited: the command holds no socket.
    let fds = w.sh("find /proc/self/fd/ -lname 'socket:*'").await;
    assert_eq!(fds.outcome.stdout, "", "{fds:#?}");
    assert_eq!(w.take_records(), Vec::new());
}

#[tokio::test]
async fn the_command_sees_the_proxy_variables_and_never_the_hosts() {
    let (w, _) = world();
    let mut command = SandboxCommand::new(["printenv"]);
    for name in ["HTTP_PROXY", "https_proxy", "ALL_PROXY"] {
        command = command.pass_env(name);
    }
    let o = w.sandbox.run(&w.spec(), command).await.unwrap();
    assert_eq!(o.outcome.exit_code, 0, "{o:#?}");
    let env: BTreeMap<&str, &str> = o
        .outcome
        .stdout
        .lines()
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| k.to_ascii_lowercase().contains("proxy") || k.starts_with("GIT_"))
        .collect();
    let mut expected = BTreeMap::from([
        ("ALL_PROXY", "socks5h://127.0.0.1:1080"),
        ("HTTPS_PROXY", "http://127.0.0.1:3128"),
        ("HTTP_PROXY", "http://127.0.0.1:3128"),
        ("NO_PROXY", "localhost,127.0.0.1,::1"),
        ("all_proxy", "socks5h://127.0.0.1:1080"),
        ("http_proxy", "http://127.0.0.1:3128"),
        ("https_proxy", "http://127.0.0.1:3128"),
        ("no_proxy", "localhost,127.0.0.1,::1"),
    ]);
    if openbsd_nc() {
        expected.insert(
            "GIT_SSH_COMMAND",
            "ssh -o ProxyCommand='nc -X 5 -x 127.0.0.1:1080 %h %p'",
        );
    }
    assert_eq!(env, expected);
    assert!(!o.outcome.stdout.contains("pa55"), "{}", o.outcome.stdout);
}

#[tokio::test]
async fn netcat_reaches_an_allowed_host_through_the_socks_port_as_git_ssh_would() {
    // GIT_SSH_COMMAND's ProxyCommand, with an HTTP request instead of ssh.
    assert_openbsd_nc();
    let (w, port) = world();
    let request = "GET / HTTP/1.0\\r\\nHost: x\\r\\n\\r\\n";
    let ok = w
        .sh(&format!(
            "printf '{request}' | nc -X 5 -x 127.0.0.1:1080 allowed.test {port}"
        ))
        .await;
    assert!(ok.outcome.stdout.ends_with(PAGE), "{ok:#?}");
    let refused = w
        .sh(&format!(
            "printf '{request}' | nc -X 5 -x 127.0.0.1:1080 unlisted.test {port}"
        ))
        .await;
    assert_ne!(refused.outcome.exit_code, 0, "{refused:#?}");
    assert_eq!(refused.outcome.stdout, "", "{refused:#?}");
    let records: Vec<(String, bool)> = w
        .take_records()
        .into_iter()
        .map(|r| (r.host, r.allowed))
        .collect();
    assert_eq!(
        records,
        vec![
            ("allowed.test".into(), true),
            ("unlisted.test".into(), false)
        ]
    );
}

#[tokio::test]
async fn an_empty_allowlist_refuses_everything() {
    let port = serve_page();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("root")).unwrap();
    let resolver = StaticResolver::new().with("allowed.test", [IpAddr::V4(Ipv4Addr::LOCALHOST)]);
    let config = SandboxConfig::new(stage2(), dir.path().join("state"))
        .backend(BackendChoice::Bwrap)
        .egress(EgressRules::default(), Arc::new(resolver), Arc::new(|_| {}));
    let sandbox = Sandbox::new(config).unwrap();
    let spec = SandboxSpec::for_root(dir.path().join("root")).network(NetworkMode::Proxy);
    let o = sandbox
        .run(
            &spec,
            SandboxCommand::shell(&format!(
                "curl -sS --max-time 10 -o /dev/null -w '%{{http_code}}' http://allowed.test:{port}/"
            )),
        )
        .await
        .unwrap();
    assert_eq!(
        (o.outcome.exit_code, o.outcome.stdout.as_str()),
        (0, "403"),
        "{o:#?}"
    );
}

#[tokio::test]
async fn proxy_mode_without_an_egress_setup_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let config =
        SandboxConfig::new(stage2(), dir.path().join("state")).backend(BackendChoice::Bwrap);
    let sandbox = Sandbox::new(config).unwrap();
    let spec = SandboxSpec::for_root(dir.path()).network(NetworkMode::Proxy);
    let err = sandbox
        .run(&spec, SandboxCommand::new(["true"]))
        .await
        .unwrap_err();
    assert!(matches!(err, SandboxError::Setup(_)), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("needs an egress allowlist"), "{message}");
    assert!(message.contains("SandboxConfig::egress"), "{message}");
}

#[tokio::test]
async fn no_proxy_socket_or_directory_is_left_behind() {
    let (w, _) = world();
    let o = w.sh("test -S /run/toolgate/egress.sock").await;
    assert_eq!(o.outcome.exit_code, 0, "{o:#?}");
    let leftovers: Vec<_> = std::fs::read_dir(w.dir.path().join("state"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("egress-"))
        .collect();
    assert_eq!(leftovers, Vec::<String>::new());
}

#[tokio::test]
async fn a_listed_loopback_address_is_reached_through_the_proxy_from_the_environment() {
    // The host's 127.0.0.1 is only reachable through the proxy; with
    // 127.0.0.1 in NO_PROXY curl would go to the sandbox's own loopback,
    // where nothing listens, and fail to connect.
    let port = serve_page();
    let w = World::new(
        &[format!("127.0.0.1:{port}")],
        &[],
        &[],
        host_env(&[("HOME", "/root")]),
    );
    let no_proxy = w.sh("printf %s \"$NO_PROXY\"").await;
    assert_eq!(no_proxy.outcome.stdout, "localhost,::1", "{no_proxy:#?}");
    assert_eq!(
        curl(&w, &format!("http://127.0.0.1:{port}/")).await,
        (0, PAGE.into(), String::new())
    );
    let records = w.take_records();
    assert_eq!(records.len(), 1, "{records:#?}");
    assert_eq!(
        (
            records[0].host.as_str(),
            records[0].port,
            records[0].allowed
        ),
        ("127.0.0.1", port, true)
    );
}

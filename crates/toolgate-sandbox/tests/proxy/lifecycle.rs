//! Binding, shutdown, and rules from configuration.

use pretty_assertions::assert_eq;

use super::*;

#[tokio::test]
async fn shutdown_removes_the_socket_and_ends_open_tunnels() {
    let mut fixture = Fixture::start().await;
    let echo = fixture.servers.echo;
    let (head, mut tunnel) = within(
        "CONNECT",
        http_connect(&fixture, &format!("allowed.test:{echo}")),
    )
    .await;
    assert_eq!(head, "HTTP/1.1 200 Connection established\r\n\r\n");
    tunnel.write_all(b"abc").await.unwrap();
    let mut back = [0u8; 3];
    within("echo", tunnel.read_exact(&mut back)).await.unwrap();

    within("shutdown", fixture.proxy.take().unwrap().shutdown()).await;
    assert!(!fixture.socket.exists(), "socket file left behind");
    assert!(UnixStream::connect(&fixture.socket).await.is_err());
    assert_eq!(within("tunnel close", read_rest(&mut tunnel)).await, "");
    let records = fixture.records(1).await;
    assert_eq!(
        records.iter().map(summary).collect::<Vec<_>>(),
        vec![(
            "allowed.test".into(),
            echo,
            Protocol::HttpConnect,
            true,
            3,
            3
        )]
    );
}

#[tokio::test]
async fn bind_makes_a_private_socket_and_never_reuses_a_path() {
    let fixture = Fixture::start().await;
    let mode = std::fs::metadata(&fixture.socket)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    // Only the socket: the staging directory is gone.
    let entries: Vec<_> = std::fs::read_dir(fixture.socket.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(entries, vec![std::ffi::OsString::from("egress.sock")]);

    let bind = |path: &Path| {
        EgressProxy::bind(
            path,
            Arc::new(Allowlist {
                allowed: vec![],
                denied: vec![],
                refuse_resolved: vec![],
            }),
            Arc::new(StaticResolver::new()),
            Arc::new(|_| {}),
        )
    };
    let err = bind(&fixture.socket).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists);
    assert!(err.to_string().contains("already exists"), "{err}");
    let file = fixture.socket.with_file_name("plain-file");
    std::fs::write(&file, "x").unwrap();
    assert_eq!(
        bind(&file).unwrap_err().kind(),
        std::io::ErrorKind::AlreadyExists
    );
    // The existing proxy still serves.
    let (head, _) = within(
        "CONNECT",
        http_connect(&fixture, &format!("allowed.test:{}", fixture.servers.echo)),
    )
    .await;
    assert_eq!(head, "HTTP/1.1 200 Connection established\r\n\r\n");
}

#[tokio::test]
async fn the_proxy_enforces_egress_rules_parsed_from_configuration() {
    // The real rules, not a test policy: deny first, wildcards for
    // subdomains only, and a name that resolves to loopback passes only
    // when it is listed by its exact name.
    use toolgate_sandbox::egress::EgressRules;
    let rules = EgressRules::new(&["allowed.test", "*.apex.test"], &["bad.apex.test"]).unwrap();
    let loopback = IpAddr::from([127, 0, 0, 1]);
    let port = echo_server(loopback).await;
    let mut resolver = StaticResolver::new();
    for name in [
        "allowed.test",
        "sub.apex.test",
        "bad.apex.test",
        "apex.test",
    ] {
        resolver = resolver.with(name, [loopback]);
    }
    let dir = tempfile::tempdir().unwrap();
    let proxy = EgressProxy::bind(
        dir.path().join("egress.sock"),
        Arc::new(rules),
        Arc::new(resolver),
        Arc::new(|_| {}),
    )
    .unwrap();
    let head = |host: &'static str| {
        let path = proxy.path().to_owned();
        async move {
            let mut stream = UnixStream::connect(&path).await.unwrap();
            let request = format!("CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}\r\n\r\n");
            stream.write_all(request.as_bytes()).await.unwrap();
            let head = read_head(&mut stream).await;
            head.lines().next().unwrap_or_default().to_owned()
        }
    };
    assert!(
        within("allowed", head("allowed.test"))
            .await
            .contains(" 200 ")
    );
    let refused = [
        ("bad.apex.test", "deny is checked first"),
        ("apex.test", "a wildcard never covers its apex"),
        (
            "sub.apex.test",
            "listed through a wildcard, resolving to loopback",
        ),
    ];
    for (host, why) in refused {
        let status = within(host, head(host)).await;
        assert!(status.contains(" 403 "), "{host} ({why}): {status}");
    }
}

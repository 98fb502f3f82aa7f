//! What the proxy refuses, it refuses at once, with an answer.

use pretty_assertions::assert_eq;

use super::*;

#[tokio::test]
async fn refusals_answer_at_once_on_every_protocol() {
    let fixture = Fixture::start().await;
    let (echo, http) = (fixture.servers.echo, fixture.servers.http);
    // (host asked, port, host recorded, reason the client must see)
    let cases = [
        (
            "denied.test",
            echo,
            "denied.test",
            "denied.test is on the deny list".to_string(),
        ),
        (
            "Denied.Test.",
            echo,
            "denied.test",
            "denied.test is on the deny list".to_string(),
        ),
        (
            "unlisted.test",
            echo,
            "unlisted.test",
            "unlisted.test is not on the allow list".to_string(),
        ),
        (
            "allowed.test",
            1,
            "allowed.test",
            "port 1 is not allowed for allowed.test".to_string(),
        ),
        (
            "internal.test",
            echo,
            "internal.test",
            "internal.test resolves to private address 127.0.0.1".to_string(),
        ),
        (
            "10.1.2.3",
            http,
            "10.1.2.3",
            "10.1.2.3 is not on the allow list".to_string(),
        ),
    ];
    let mut expected = Vec::new();
    for (asked, port, host, reason) in &cases {
        let port = *port;
        let body = format!("toolgate egress proxy refused {host}:{port}: {reason}\n");
        let (head, mut stream) =
            within(asked, http_connect(&fixture, &format!("{asked}:{port}"))).await;
        assert!(
            head.starts_with("HTTP/1.1 403 Forbidden\r\n"),
            "CONNECT {asked}: {head}"
        );
        assert_eq!(within(asked, read_rest(&mut stream)).await, body);

        let get = format!("GET http://{asked}:{port}/ HTTP/1.1\r\n\r\n");
        let response = within(asked, http_exchange(&fixture, get.as_bytes())).await;
        assert!(
            response.starts_with("HTTP/1.1 403 Forbidden\r\n"),
            "GET {asked}: {response}"
        );
        assert!(response.ends_with(&body), "GET {asked}: {response}");

        let (code, mut stream) = within(
            asked,
            socks_request(&fixture, 0x01, &socks_domain(asked), port),
        )
        .await;
        assert_eq!(code, 0x02, "SOCKS5 {asked}");
        assert_eq!(within(asked, read_rest(&mut stream)).await, "");

        for protocol in [
            Protocol::HttpConnect,
            Protocol::HttpForward,
            Protocol::Socks5,
        ] {
            expected.push((
                (host.to_string(), port, protocol, false, 0, 0),
                reason.clone(),
            ));
        }
    }
    let records = fixture.records(expected.len()).await;
    let got: Vec<_> = records
        .iter()
        .map(|r| (summary(r), r.reason.clone()))
        .collect();
    assert_eq!(got, expected);
    // Names the policy refused were never looked up: no DNS side channel.
    let asked = fixture.resolver.asked.lock().unwrap().clone();
    assert_eq!(asked, vec!["internal.test"; 3]);
}

#[tokio::test]
async fn unreachable_and_unresolvable_upstreams_fail_fast() {
    let fixture = Fixture::start().await;
    let closed = fixture.servers.closed;
    let echo = fixture.servers.echo;

    let (head, _) = within(
        "CONNECT",
        http_connect(&fixture, &format!("allowed.test:{closed}")),
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 502 Bad Gateway\r\n"), "{head}");
    let get = format!("GET http://nowhere.test:{echo}/ HTTP/1.1\r\n\r\n");
    let response = within("GET", http_exchange(&fixture, get.as_bytes())).await;
    assert!(
        response.starts_with("HTTP/1.1 502 Bad Gateway\r\n"),
        "{response}"
    );
    assert!(
        response.contains("cannot resolve nowhere.test"),
        "{response}"
    );

    let (code, _) = within(
        "SOCKS",
        socks_request(&fixture, 0x01, &socks_domain("allowed.test"), closed),
    )
    .await;
    assert_eq!(code, 0x05, "connection refused");
    let (code, _) = within(
        "SOCKS",
        socks_request(&fixture, 0x01, &socks_domain("nowhere.test"), echo),
    )
    .await;
    assert_eq!(code, 0x04, "host unreachable");

    let records = fixture.records(4).await;
    assert!(
        records.iter().all(|r| r.bytes_up == 0 && r.bytes_down == 0),
        "{records:#?}"
    );
    assert!(
        records[0]
            .reason
            .starts_with(&format!("cannot connect to allowed.test:{closed}")),
        "{records:#?}"
    );
}

#[tokio::test]
async fn malformed_http_requests_get_4xx() {
    let fixture = Fixture::start().await;
    let echo = fixture.servers.echo;
    let oversized = format!(
        "GET http://allowed.test/ HTTP/1.1\r\nX: {}\r\n\r\n",
        "a".repeat(20_000)
    );
    let cases: Vec<(String, &str)> = vec![
        ("HELLO\r\n\r\n".into(), "400 Bad Request"),
        (
            "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n".into(),
            "400 Bad Request",
        ),
        (
            "GET https://allowed.test/ HTTP/1.1\r\n\r\n".into(),
            "400 Bad Request",
        ),
        (
            "GET http://u:p@allowed.test/ HTTP/1.1\r\n\r\n".into(),
            "400 Bad Request",
        ),
        (
            "CONNECT allowed.test HTTP/1.1\r\n\r\n".into(),
            "400 Bad Request",
        ),
        (
            format!("CONNECT ::1:{echo} HTTP/1.1\r\n\r\n"),
            "400 Bad Request",
        ),
        (
            format!("CONNECT 127.1:{echo} HTTP/1.1\r\n\r\n"),
            "400 Bad Request",
        ),
        (
            format!("CONNECT 2130706433:{echo} HTTP/1.1\r\n\r\n"),
            "400 Bad Request",
        ),
        (
            format!("CONNECT allowed.test:{echo} HTTP/1.1\r\nBad Header: x\r\n\r\n"),
            "400 Bad Request",
        ),
        (oversized, "431 Request Header Fields Too Large"),
    ];
    for (request, status) in &cases {
        let response = within(request, http_exchange(&fixture, request.as_bytes())).await;
        assert!(
            response.starts_with(&format!("HTTP/1.1 {status}\r\n")),
            "{request:.60?} -> {response}"
        );
    }
    let records = fixture.records(cases.len()).await;
    assert!(records.iter().all(|r| !r.allowed), "{records:#?}");
}

#[tokio::test]
async fn socks5_refuses_other_commands_address_types_and_methods() {
    let fixture = Fixture::start().await;
    let echo = fixture.servers.echo;
    let cases: [(u8, Vec<u8>, u8); 4] = [
        (0x02, socks_domain("allowed.test"), 0x07), // BIND
        (0x03, socks_domain("allowed.test"), 0x07), // UDP ASSOCIATE
        (0x01, vec![0x09, 1, 2, 3, 4], 0x08),       // unknown address type
        (0x01, socks_domain("127.1"), 0x02), // numeric name getaddrinfo would read as loopback
    ];
    for (command, address, want) in &cases {
        let (code, _) = within("SOCKS", socks_request(&fixture, *command, address, echo)).await;
        assert_eq!(code, *want, "command {command} address {address:?}");
    }
    // Only username/password offered: no acceptable method.
    let mut stream = fixture.client().await;
    stream.write_all(&[0x05, 0x01, 0x02]).await.unwrap();
    let mut answer = Vec::new();
    within("SOCKS auth", stream.read_to_end(&mut answer))
        .await
        .unwrap();
    assert_eq!(answer, [0x05, 0xFF]);
    let records = fixture.records(cases.len() + 1).await;
    assert!(
        records
            .iter()
            .all(|r| !r.allowed && r.protocol == Protocol::Socks5),
        "{records:#?}"
    );
}

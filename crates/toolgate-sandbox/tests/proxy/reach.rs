//! What the proxy lets through arrives, and is recorded.

use pretty_assertions::assert_eq;

use super::*;

#[tokio::test]
async fn connect_tunnel_reaches_an_allowed_host_and_is_recorded() {
    let fixture = Fixture::start().await;
    let echo = fixture.servers.echo;
    within("CONNECT", async {
        let (head, mut stream) = http_connect(&fixture, &format!("allowed.test:{echo}")).await;
        assert_eq!(head, "HTTP/1.1 200 Connection established\r\n\r\n");
        echo_roundtrip(&mut stream, b"ping through connect").await;
    })
    .await;
    let records = fixture.records(1).await;
    assert_eq!(
        records.iter().map(summary).collect::<Vec<_>>(),
        vec![(
            "allowed.test".into(),
            echo,
            Protocol::HttpConnect,
            true,
            20,
            20
        )]
    );
    assert_eq!(
        records[0].reason,
        format!("allowed.test:{echo} is on the allow list")
    );
}

#[tokio::test]
async fn absolute_form_get_is_forwarded_in_origin_form_without_proxy_credentials() {
    let fixture = Fixture::start().await;
    let port = fixture.servers.http;
    let request = format!(
        "GET http://allowed.test:{port}/path?q=1 HTTP/1.1\r\nHost: evil.test\r\nProxy-Authorization: Basic dXNlcjpodW50ZXIy\r\nProxy-Connection: keep-alive\r\nConnection: keep-alive\r\nUser-Agent: test\r\n\r\n"
    );
    let response = within("GET", http_exchange(&fixture, request.as_bytes())).await;
    assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
    assert!(
        response.ends_with("\r\n\r\nhello from /path?q=1"),
        "{response}"
    );
    let forwarded = fixture.servers.http_requests.lock().unwrap().clone();
    assert_eq!(
        forwarded,
        vec![format!(
            "GET /path?q=1 HTTP/1.1\r\nHost: allowed.test:{port}\r\nUser-Agent: test\r\nConnection: close\r\n\r\n"
        )]
    );
    let records = fixture.records(1).await;
    let up = forwarded[0].len() as u64;
    let down = response.len() as u64;
    assert_eq!(
        records.iter().map(summary).collect::<Vec<_>>(),
        vec![(
            "allowed.test".into(),
            port,
            Protocol::HttpForward,
            true,
            up,
            down
        )]
    );
}

#[tokio::test]
async fn socks5_connects_by_domain_ipv4_and_ipv6() {
    let fixture = Fixture::start().await;
    let (echo, echo6) = (fixture.servers.echo, fixture.servers.echo6);
    let cases = [
        (socks_domain("allowed.test"), echo, "allowed.test"),
        (socks_ip(LOOPBACK), echo, "127.0.0.1"),
        (socks_ip(IpAddr::V6(Ipv6Addr::LOCALHOST)), echo6, "::1"),
    ];
    for (address, port, host) in &cases {
        within(host, async {
            let (code, mut stream) = socks_request(&fixture, 0x01, address, *port).await;
            assert_eq!(code, 0x00, "{host}");
            echo_roundtrip(&mut stream, b"socks!").await;
        })
        .await;
    }
    let records = fixture.records(cases.len()).await;
    let expected: Vec<_> = cases
        .iter()
        .map(|(_, port, host)| (host.to_string(), *port, Protocol::Socks5, true, 6, 6))
        .collect();
    assert_eq!(records.iter().map(summary).collect::<Vec<_>>(), expected);
}

#[tokio::test]
async fn fifty_megabytes_through_connect_arrive_intact() {
    let fixture = Fixture::start().await;
    let bulk = fixture.servers.bulk;
    let received = within("bulk transfer", async {
        let (head, mut stream) = http_connect(&fixture, &format!("allowed.test:{bulk}")).await;
        assert_eq!(head, "HTTP/1.1 200 Connection established\r\n\r\n");
        let mut buf = vec![0u8; 256 * 1024];
        let mut offset = 0u64;
        let mut expected = Vec::with_capacity(buf.len() + 8);
        loop {
            let n = stream.read(&mut buf).await.unwrap();
            if n == 0 {
                break offset;
            }
            // Compare against the generator at this offset, word-aligned.
            let first_word = offset / 8;
            let skip = (offset % 8) as usize;
            expected.clear();
            for word in first_word..=(offset + n as u64).div_ceil(8) {
                expected.extend_from_slice(&bulk_word(word));
            }
            assert!(
                buf[..n] == expected[skip..skip + n],
                "mismatch near byte {offset}"
            );
            offset += n as u64;
        }
    })
    .await;
    assert_eq!(received, BULK_BYTES);
    let records = fixture.records(1).await;
    assert_eq!(
        records.iter().map(summary).collect::<Vec<_>>(),
        vec![(
            "allowed.test".into(),
            bulk,
            Protocol::HttpConnect,
            true,
            0,
            BULK_BYTES
        )]
    );
}

//! Which resolved addresses are internal to the host or its network.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The internal range `ip` falls in, or `None` for a public address.
///
/// A public name may resolve to any of these (DNS rebinding), so a
/// connection to one needs the name or the address listed explicitly.
pub(crate) fn internal_range(ip: IpAddr) -> Option<&'static str> {
    match ip.to_canonical() {
        IpAddr::V4(v4) => internal_v4(v4),
        IpAddr::V6(v6) => internal_v6(v6),
    }
}

fn internal_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    Some(match () {
        // Linux routes 0.0.0.0 (and the rest of 0/8) to the local host.
        _ if a == 0 => "unspecified (0.0.0.0/8)",
        _ if ip.is_loopback() => "loopback (127.0.0.0/8)",
        _ if ip.is_private() => "private (RFC 1918)",
        // Cloud metadata services (169.254.169.254) hand out credentials.
        _ if ip.is_link_local() => "link-local (169.254.0.0/16)",
        _ if a == 100 && (b & 0xc0) == 64 => "shared CGNAT (100.64.0.0/10)",
        _ if ip.is_multicast() => "multicast (224.0.0.0/4)",
        _ if a >= 240 => "reserved (240.0.0.0/4)",
        _ => return None,
    })
}

fn internal_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let first = ip.segments()[0];
    if ip.is_unspecified() {
        return Some("unspecified (::)");
    }
    if ip.is_loopback() {
        return Some("loopback (::1)");
    }
    // IPv4-compatible `::a.b.c.d` and the NAT64 prefix 64:ff9b::/96 carry an
    // IPv4 address that a translator or the stack may deliver to.
    if let Some(v4) = ip.to_ipv4() {
        return internal_v4(v4);
    }
    if ip.segments()[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        let [.., a, b, c, d] = ip.octets();
        return internal_v4(Ipv4Addr::new(a, b, c, d));
    }
    Some(match () {
        _ if first & 0xffc0 == 0xfe80 => "link-local (fe80::/10)",
        _ if first & 0xffc0 == 0xfec0 => "site-local (fec0::/10)",
        _ if first & 0xfe00 == 0xfc00 => "unique local (fc00::/7)",
        _ if ip.is_multicast() => "multicast (ff00::/8)",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn internal_ranges_are_named() {
        let cases = [
            ("0.0.0.0", Some("unspecified (0.0.0.0/8)")),
            ("0.1.2.3", Some("unspecified (0.0.0.0/8)")),
            ("127.0.0.1", Some("loopback (127.0.0.0/8)")),
            ("127.255.0.9", Some("loopback (127.0.0.0/8)")),
            ("10.1.2.3", Some("private (RFC 1918)")),
            ("172.16.0.1", Some("private (RFC 1918)")),
            ("172.31.255.255", Some("private (RFC 1918)")),
            ("192.168.1.1", Some("private (RFC 1918)")),
            ("169.254.169.254", Some("link-local (169.254.0.0/16)")),
            ("100.64.0.1", Some("shared CGNAT (100.64.0.0/10)")),
            ("100.127.255.254", Some("shared CGNAT (100.64.0.0/10)")),
            ("224.0.0.1", Some("multicast (224.0.0.0/4)")),
            ("255.255.255.255", Some("reserved (240.0.0.0/4)")),
            ("::", Some("unspecified (::)")),
            ("::1", Some("loopback (::1)")),
            ("fe80::1", Some("link-local (fe80::/10)")),
            ("fec0::1", Some("site-local (fec0::/10)")),
            ("fc00::1", Some("unique local (fc00::/7)")),
            ("fd12:3456::1", Some("unique local (fc00::/7)")),
            ("ff02::1", Some("multicast (ff00::/8)")),
            ("::ffff:127.0.0.1", Some("loopback (127.0.0.0/8)")),
            ("::ffff:10.0.0.1", Some("private (RFC 1918)")),
            (
                "::ffff:169.254.169.254",
                Some("link-local (169.254.0.0/16)"),
            ),
            ("::ffff:100.64.0.1", Some("shared CGNAT (100.64.0.0/10)")),
            ("::127.0.0.1", Some("loopback (127.0.0.0/8)")),
            ("64:ff9b::a00:1", Some("private (RFC 1918)")),
            // Public neighbours of each range.
            ("1.1.1.1", None),
            ("100.63.255.255", None),
            ("100.128.0.0", None),
            ("172.15.255.255", None),
            ("172.32.0.0", None),
            ("192.169.0.1", None),
            ("223.255.255.255", None),
            ("2606:4700::1111", None),
            ("::ffff:1.1.1.1", None),
            ("64:ff9b::101:101", None),
        ];
        for (ip, want) in cases {
            let addr: IpAddr = ip.parse().unwrap();
            assert_eq!(internal_range(addr), want, "{ip}");
        }
    }
}

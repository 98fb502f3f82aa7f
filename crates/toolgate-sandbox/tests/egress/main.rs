//! Network mode `proxy` end to end, in one test binary: real bubblewrap,
//! stage 2's forwarder, the egress proxy, and the clients agents run inside
//! the sandbox (curl, git, ssh through netcat). Only loopback is reached:
//! host servers on 127.0.0.1 and a static resolver that maps the test names
//! to them.
//!
//! - [`modes`]: what proxy mode allows, refuses and hides.
//! - [`clients`]: git over dumb HTTP and curl over TLS.
//! - [`ssh`]: ssh through the SOCKS port, the way git reaches ssh remotes.
//!
//! Needs curl, git, openssl, sshd, ssh, ssh-keygen and OpenBSD netcat on the
//! host, and root to run sshd; a test fails (never skips) when one is missing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod world;

mod clients;
mod modes;
mod ssh;

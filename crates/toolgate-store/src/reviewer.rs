//! The external reviewer: a program that gets a request as JSON on stdin
//! and answers on stdout `{"decision": "approve" | "deny" | "abstain",
//! "reason": "…", "uses": N, "ttl_secs": N}` (all but `decision` optional).
//!
//! A reviewer that crashes, hangs past the timeout, prints something else
//! or cannot be started abstains: the request stays with the people. It can
//! never turn into an approve by failing.

use std::process::Stdio;
use std::time::Duration;

use serde::Deserialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::model::Request;

/// How long a reviewer may think.
pub const REVIEWER_TIMEOUT: Duration = Duration::from_secs(30);
/// The most of a reviewer's stdout read (an answer is a line of JSON).
const MAX_ANSWER: u64 = 64 * 1024;

/// What a reviewer said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Review {
    /// Yes, with optional uses and TTL (`None`: the settings' defaults).
    Approve {
        /// Uses.
        uses: Option<u32>,
        /// TTL.
        ttl: Option<Duration>,
    },
    /// No, with a reason.
    Deny {
        /// Why.
        reason: String,
    },
    /// No opinion (also: any failure), with why.
    Abstain(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Answer {
    decision: String,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    uses: Option<u32>,
    #[serde(default)]
    ttl_secs: Option<u64>,
}

/// Runs `command` on `request` (at most `timeout`).
pub async fn review(command: &[String], request: &Request, timeout: Duration) -> Review {
    let Some((program, args)) = command.split_first() else {
        return Review::Abstain("the reviewer command is empty".to_owned());
    };
    let input = match serde_json::to_vec(request) {
        Ok(v) => v,
        Err(e) => return Review::Abstain(format!("cannot encode the request: {e}")),
    };
    let mut child = match tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        // A reviewer past its timeout is killed, not left behind.
        .kill_on_drop(true)
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return Review::Abstain(format!("cannot start the reviewer `{program}`: {e}")),
    };
    let run = async {
        if let Some(mut stdin) = child.stdin.take() {
            // A reviewer that does not read its input is its own business.
            let _ = stdin.write_all(&input).await;
        }
        let mut out = Vec::new();
        if let Some(stdout) = child.stdout.take() {
            stdout
                .take(MAX_ANSWER)
                .read_to_end(&mut out)
                .await
                .map_err(|e| e.to_string())?;
        }
        let status = child.wait().await.map_err(|e| e.to_string())?;
        if !status.success() {
            return Err(format!("the reviewer exited with {status}"));
        }
        Ok(out)
    };
    let out = match tokio::time::timeout(timeout, run).await {
        Err(_) => {
            return Review::Abstain(format!(
                "the reviewer gave no answer within {} s",
                timeout.as_secs()
            ));
        }
        Ok(Err(e)) => return Review::Abstain(e),
        Ok(Ok(out)) => out,
    };
    match serde_json::from_slice::<Answer>(&out) {
        Err(e) => Review::Abstain(format!(
            "the reviewer's answer is not JSON of the expected shape: {e}"
        )),
        Ok(a) => match a.decision.as_str() {
            "approve" if a.uses != Some(0) => Review::Approve {
                uses: a.uses,
                ttl: a.ttl_secs.map(Duration::from_secs),
            },
            "deny" => Review::Deny {
                reason: a
                    .reason
                    .unwrap_or_else(|| "denied by the reviewer".to_owned()),
            },
            "abstain" => Review::Abstain(
                a.reason
                    .unwrap_or_else(|| "the reviewer abstained".to_owned()),
            ),
            other => Review::Abstain(format!(
                "the reviewer's decision `{other}` is none of approve, deny, abstain (or approves 0 uses)"
            )),
        },
    }
}

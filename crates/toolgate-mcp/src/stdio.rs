//! The stdio transport: one JSON-RPC message per line on stdin and stdout,
//! in place of rmcp's line transport, which drops what it cannot parse
//! without a reply (see [`crate::incoming`]).
//!
//! A line is read up to [`MAX_MESSAGE_BYTES`]: a client (or a runaway
//! producer) that never sends a newline cannot make toolgate buffer without
//! bound. The longer line gets a parse error as soon as it crosses the
//! limit; the rest of it is skipped and the next line is read as usual.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

use crate::incoming::{MAX_MESSAGE_BYTES, Refusal, Screened, screen};

/// Big enough that a message of a few MiB takes few reads.
const READ_BUFFER: usize = 64 * 1024;

/// A line buffer that grew past this is given back after its line, so one
/// big message does not keep 16 MiB for the rest of the session.
const KEPT_CAPACITY: usize = 1024 * 1024;

type Writing = Pin<Box<dyn Future<Output = io::Result<()>> + Send>>;

/// rmcp's [`Transport`] over a reader and a writer (stdin and stdout).
pub(crate) struct StdioTransport<R, W> {
    input: BufReader<R>,
    /// The line read so far, without the bytes already consumed: `receive`
    /// runs inside rmcp's `select!` and may be dropped at any await, so the
    /// partial line lives here and the next call goes on with it.
    line: Vec<u8>,
    /// Skipping the rest of a line that was too long.
    skipping: bool,
    /// `None` once closed. Every message goes out whole under the lock, so
    /// refusals and rmcp's messages never interleave.
    output: Arc<Mutex<Option<W>>>,
    /// A refusal on its way out, kept for the same reason as `line`: a
    /// cancelled `receive` must not leave half a line on stdout.
    refusing: Option<Writing>,
}

impl<R, W> StdioTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    pub(crate) fn new(input: R, output: W) -> Self {
        StdioTransport {
            input: BufReader::with_capacity(READ_BUFFER, input),
            line: Vec::new(),
            skipping: false,
            output: Arc::new(Mutex::new(Some(output))),
            refusing: None,
        }
    }

    /// Reads up to the next `\n` into `self.line`, never past the limit.
    /// There is no await between taking bytes from the buffer and
    /// consuming them, so a cancelled call loses nothing.
    async fn read_line(&mut self) -> Read {
        loop {
            let available = match self.input.fill_buf().await {
                Ok(available) => available,
                Err(e) => return Read::Failed(e),
            };
            if available.is_empty() {
                return Read::End;
            }
            let newline = available.iter().position(|&b| b == b'\n');
            let take = newline.map_or(available.len(), |i| i + 1);
            let content = self.line.len() + newline.unwrap_or(take);
            let outcome = if self.skipping {
                self.skipping = newline.is_none();
                None
            } else if content > MAX_MESSAGE_BYTES {
                self.line = Vec::new();
                self.skipping = newline.is_none();
                Some(Read::TooLong)
            } else {
                self.line.extend_from_slice(&available[..take]);
                newline.map(|_| Read::Line)
            };
            self.input.consume(take);
            if let Some(outcome) = outcome {
                return outcome;
            }
        }
    }

    /// The line just read, screened, and the buffer made ready for the next.
    fn take_line(&mut self) -> Screened {
        let line = self.line.strip_suffix(b"\n").unwrap_or(&self.line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let screened = screen(line);
        self.line.clear();
        if self.line.capacity() > KEPT_CAPACITY {
            self.line = Vec::new();
        }
        screened
    }

    fn refuse(&mut self, refusal: Refusal) {
        eprintln!("toolgate: refused a message on stdin: {}", refusal.reason);
        if refusal.answer {
            let mut bytes = refusal.reply.to_string().into_bytes();
            bytes.push(b'\n');
            self.refusing = Some(Box::pin(write_line(self.output.clone(), bytes)));
        }
    }
}

enum Read {
    /// A whole line is in `line`.
    Line,
    /// The line crossed the limit; it is dropped and the rest skipped.
    TooLong,
    /// The client closed stdin.
    End,
    Failed(io::Error),
}

async fn write_line<W: AsyncWrite + Unpin>(
    output: Arc<Mutex<Option<W>>>,
    bytes: Vec<u8>,
) -> io::Result<()> {
    let mut output = output.lock().await;
    let Some(output) = output.as_mut() else {
        return Err(io::Error::new(
            io::ErrorKind::NotConnected,
            "stdout is closed",
        ));
    };
    output.write_all(&bytes).await?;
    output.flush().await
}

impl<R, W> Transport<RoleServer> for StdioTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = io::Result<()>> + Send + 'static {
        let output = self.output.clone();
        let bytes = serde_json::to_vec(&item).map(|mut bytes| {
            bytes.push(b'\n');
            bytes
        });
        async move {
            let written = write_line(output, bytes.map_err(io::Error::from)?).await;
            // Freed once the line is out, not before: a large result (an
            // `ls` of a directory, its facts an object per entry) takes as
            // long to free as to write, and the client waits for the line.
            drop(item);
            written
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            if let Some(refusing) = self.refusing.as_mut() {
                let written = refusing.await;
                self.refusing = None;
                if let Err(e) = written {
                    eprintln!("toolgate: cannot write to stdout: {e}");
                    return None;
                }
            }
            match self.read_line().await {
                Read::Line => match self.take_line() {
                    Screened::Message(message) => return Some(message),
                    Screened::Blank => {}
                    Screened::Refused(refusal) => self.refuse(refusal),
                },
                Read::TooLong => self.refuse(Refusal::too_long()),
                Read::End => {
                    if !self.skipping && !self.line.trim_ascii().is_empty() {
                        eprintln!(
                            "toolgate: stdin ended inside a message ({} bytes without a \
                             newline); it was not read",
                            self.line.len()
                        );
                    }
                    return None;
                }
                Read::Failed(e) => {
                    eprintln!("toolgate: cannot read stdin: {e}");
                    return None;
                }
            }
        }
    }

    async fn close(&mut self) -> io::Result<()> {
        drop(self.output.lock().await.take());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::{Value, json};
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    use super::*;

    /// Feeds `input` to a transport; what `receive` yielded (as JSON) and
    /// every line the transport wrote.
    async fn run(input: Vec<u8>) -> (Vec<Value>, Vec<Value>) {
        let (client, server) = tokio::io::duplex(READ_BUFFER);
        let (server_read, server_write) = tokio::io::split(server);
        let (client_read, mut client_write) = tokio::io::split(client);
        let writer = tokio::spawn(async move {
            client_write.write_all(&input).await.unwrap();
            client_write.shutdown().await.unwrap();
        });
        let reader = tokio::spawn(async move {
            let mut lines = BufReader::new(client_read).lines();
            let mut replies = Vec::new();
            while let Some(line) = lines.next_line().await.unwrap() {
                replies.push(serde_json::from_str(&line).unwrap());
            }
            replies
        });
        let mut transport = StdioTransport::new(server_read, server_write);
        let mut received = Vec::new();
        while let Some(message) = transport.receive().await {
            received.push(serde_json::to_value(&message).unwrap());
        }
        transport.close().await.unwrap();
        drop(transport);
        writer.await.unwrap();
        (received, reader.await.unwrap())
    }

    fn ping(id: u64) -> String {
        format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"ping\"}}\n")
    }

    #[tokio::test]
    async fn a_line_past_the_limit_is_refused_and_the_next_one_read() {
        let mut input = ping(1).into_bytes();
        input.extend(std::iter::repeat_n(b'[', MAX_MESSAGE_BYTES + 10));
        input.push(b'\n');
        input.extend(ping(2).into_bytes());
        // Exactly at the limit is still read (and here refused as JSON).
        input.extend(std::iter::repeat_n(b' ', MAX_MESSAGE_BYTES - 1));
        input.extend(b"x\n");
        input.extend(ping(3).into_bytes());
        let (received, replies) = run(input).await;
        let ids: Vec<&Value> = received.iter().map(|m| &m["id"]).collect();
        assert_eq!(ids, [&json!(1), &json!(2), &json!(3)]);
        let codes: Vec<(&Value, &Value)> = replies
            .iter()
            .map(|r| (&r["id"], &r["error"]["code"]))
            .collect();
        assert_eq!(
            codes,
            [
                (&Value::Null, &json!(-32700)),
                (&Value::Null, &json!(-32700))
            ]
        );
        assert!(
            replies[0]["error"]["message"]
                .as_str()
                .unwrap()
                .contains("limit of 16 MiB"),
            "{}",
            replies[0]
        );
        assert!(
            replies[1]["error"]["message"]
                .as_str()
                .unwrap()
                .contains(&format!("column {MAX_MESSAGE_BYTES}")),
            "{}",
            replies[1]
        );
    }

    #[tokio::test]
    async fn a_line_past_the_limit_without_a_newline_is_refused_before_stdin_ends() {
        let (client, server) = tokio::io::duplex(READ_BUFFER);
        let (server_read, server_write) = tokio::io::split(server);
        let (client_read, mut client_write) = tokio::io::split(client);
        let mut transport = StdioTransport::new(server_read, server_write);
        let receiving = tokio::spawn(async move { transport.receive().await.is_none() });
        let chunk = vec![b'a'; 1024 * 1024];
        for _ in 0..17 {
            client_write.write_all(&chunk).await.unwrap();
        }
        // The refusal arrives while the line is still going on.
        let mut lines = BufReader::new(client_read).lines();
        let line = lines.next_line().await.unwrap().unwrap();
        let reply: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(reply["error"]["code"], -32700, "{reply}");
        client_write.shutdown().await.unwrap();
        assert!(receiving.await.unwrap());
    }

    #[tokio::test]
    async fn a_notification_that_does_not_parse_is_not_answered() {
        let mut input = br#"{"jsonrpc":"2.0","method":"notifications/custom","params":3}"#.to_vec();
        input.push(b'\n');
        input.extend(b"\n\r\n");
        input.extend(ping(4).into_bytes());
        let (received, replies) = run(input).await;
        assert_eq!(received.len(), 1);
        assert_eq!(replies, Vec::<Value>::new());
    }
}

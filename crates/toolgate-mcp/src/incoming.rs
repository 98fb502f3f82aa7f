//! What toolgate does with one incoming JSON-RPC message before rmcp sees it:
//! a message rmcp can take goes on; anything else gets the error JSON-RPC 2.0
//! prescribes, so a client never waits for an answer that does not come.
//!
//! rmcp drops a line that is not JSON without a word (to avoid an error
//! storm with a peer that echoes replies as more garbage) and answers JSON of
//! the wrong shape with an Invalid Request that carries no id, which leaves a
//! client waiting for its request's id forever. Here:
//!
//! - not UTF-8, not JSON (garbage, truncated, `1e400`, nesting deeper than
//!   serde_json's 128 levels) or longer than [`MAX_MESSAGE_BYTES`]: `-32700
//!   Parse error` with `"id": null`;
//! - JSON that is not a request: `-32600 Invalid Request`, with the id when
//!   one can be read;
//! - a request of a method toolgate serves whose params do not fit it:
//!   `-32602 Invalid params`, with its id and the field (rmcp would take it
//!   for an unknown method and answer "Method not found: tools/call");
//! - a batch (MCP removed JSON-RPC batching in 2025-06-18, rmcp never had
//!   it): an array with an Invalid Request for each request in it, so every
//!   id it carried gets its answer.
//!
//! A notification or a response is never answered, however broken (JSON-RPC
//! says so, and it is what stops the storm rmcp fears: every reply toolgate
//! sends is a response, so echoed back it is ignored, not answered again).
//! Over HTTP the status code says it instead. Every message names what was
//! wrong without echoing the input: a detail is cut at [`DETAIL_CHARS`].

use rmcp::RoleServer;
use rmcp::model::ErrorCode;
use rmcp::service::RxJsonRpcMessage;
use serde_json::{Map, Value, json};

mod tools_call;
use tools_call::tools_call;

/// The largest message toolgate reads: one line over stdio, one request
/// body over HTTP. rmcp's own stdio default, so a message that fits one
/// transport fits the other; `write` and `apply_patch` of a few MiB fit.
pub(crate) const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// How much of a parser's detail an error message keeps. serde's "invalid
/// type: string \"...\"" quotes the value, which may be megabytes.
pub(crate) const DETAIL_CHARS: usize = 200;

/// A message from the client, after screening.
// Made and unpacked at once, like rmcp's own `Option<message>`: a box would
// be an allocation per message for nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Screened {
    /// One rmcp can take.
    Message(RxJsonRpcMessage<RoleServer>),
    /// Nothing but whitespace: no message at all.
    Blank,
    /// Not a message rmcp can take.
    Refused(Refusal),
}

/// Why a message was refused, and the reply.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Refusal {
    /// One JSON-RPC error response, or an array of them for a batch.
    pub reply: Value,
    /// Whether JSON-RPC lets a server send `reply` at all: not for a
    /// notification or a response, which nobody waits on.
    pub answer: bool,
    /// What was wrong, for the server's log.
    pub reason: String,
}

impl Refusal {
    fn new(code: ErrorCode, id: Option<&Value>, message: String, answer: bool) -> Refusal {
        Refusal {
            reply: error_response(code, id, &message),
            answer,
            reason: message,
        }
    }

    /// A message longer than [`MAX_MESSAGE_BYTES`], which was not read.
    pub(crate) fn too_long() -> Refusal {
        Refusal::parse_error(&format!(
            "the message is longer than toolgate's limit of {} MiB and was not read",
            MAX_MESSAGE_BYTES / (1024 * 1024)
        ))
    }

    /// A message that is no JSON: `problem` says why.
    pub(crate) fn parse_error(problem: &str) -> Refusal {
        let message = format!("Parse error: {problem}");
        Refusal::new(ErrorCode::PARSE_ERROR, None, message, true)
    }
}

/// `{"jsonrpc":"2.0","id":ID,"error":{"code":CODE,"message":MESSAGE}}`; the
/// id is `null` when it could not be read (JSON-RPC 2.0 section 5).
fn error_response(code: ErrorCode, id: Option<&Value>, message: &str) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id.cloned().unwrap_or(Value::Null),
        "error": {"code": code.0, "message": message},
    })
}

/// Screens one message: a line without its `\n` (stdio) or a request body
/// (HTTP).
pub(crate) fn screen(bytes: &[u8]) -> Screened {
    // A UTF-8 byte order mark may precede JSON (RFC 8259 section 8.1);
    // rmcp's line transport skipped it too.
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            return Screened::Refused(Refusal::parse_error(&format!(
                "the message is not UTF-8 (invalid byte at offset {})",
                e.valid_up_to()
            )));
        }
    };
    if text.trim().is_empty() {
        return Screened::Blank;
    }
    if let Some(call) = tools_call(text) {
        return Screened::Message(call);
    }
    // The common case parses once, straight into rmcp's type.
    let typed = match serde_json::from_str::<RxJsonRpcMessage<RoleServer>>(text) {
        Ok(message) => {
            return match misfit_params(&message) {
                Some(refusal) => Screened::Refused(refusal),
                None => Screened::Message(message),
            };
        }
        Err(e) => e,
    };
    // serde_json stops at 128 levels of nesting, so neither parse can
    // overflow the stack however deep the input goes.
    match serde_json::from_str::<Value>(text) {
        Err(e) => Screened::Refused(Refusal::parse_error(&brief(&e.to_string()))),
        Ok(value) => Screened::Refused(not_a_message(&value, &typed)),
    }
}

/// Valid JSON that rmcp could not take (`typed` is why).
fn not_a_message(value: &Value, typed: &serde_json::Error) -> Refusal {
    match value {
        Value::Object(object) => {
            // rmcp says only "unrecognized JSON-RPC message" of any object it
            // cannot take, so the envelope is checked here to name the part.
            let problem = object_problem(object).unwrap_or_else(|| brief(&typed.to_string()));
            Refusal::new(
                ErrorCode::INVALID_REQUEST,
                readable_id(object),
                format!("Invalid Request: {problem}"),
                answerable(object),
            )
        }
        Value::Array(items) if items.is_empty() => Refusal::new(
            ErrorCode::INVALID_REQUEST,
            None,
            "Invalid Request: an empty batch".to_owned(),
            true,
        ),
        Value::Array(items) => batch(items),
        other => {
            let message = format!(
                "Invalid Request: a JSON-RPC message is an object, not {}",
                kind(other)
            );
            Refusal::new(ErrorCode::INVALID_REQUEST, None, message, true)
        }
    }
}

const BATCH: &str = "Invalid Request: JSON-RPC batches are not supported (MCP removed them in \
                     2025-06-18); send each message on its own";

/// An Invalid Request for every request of the batch (by its id) and every
/// element that is not a message (id `null`), as JSON-RPC 2.0 section 6
/// answers a batch; notifications and responses in it get none. A batch of
/// nothing else gets one error, so its sender learns they were not taken.
fn batch(items: &[Value]) -> Refusal {
    let replies: Vec<Value> = items
        .iter()
        .filter(|item| item.as_object().is_none_or(answerable))
        .map(|item| {
            let id = item.as_object().and_then(readable_id);
            error_response(ErrorCode::INVALID_REQUEST, id, BATCH)
        })
        .collect();
    let reply = if replies.is_empty() {
        error_response(ErrorCode::INVALID_REQUEST, None, BATCH)
    } else {
        Value::Array(replies)
    };
    Refusal {
        reply,
        answer: true,
        reason: format!("a batch of {} messages", items.len()),
    }
}

/// A request, or something that is no message at all: what JSON-RPC
/// answers. Not a notification (a `method` without an `id`) nor a response
/// (no `method`, but a `result` or `error`).
fn answerable(object: &Map<String, Value>) -> bool {
    let method = object.contains_key("method");
    let response = object.contains_key("result") || object.contains_key("error");
    if method {
        object.contains_key("id")
    } else {
        !response
    }
}

/// The id to answer with: MCP ids are strings or integers; any other id
/// cannot be correlated, so the reply carries `null`.
fn readable_id(object: &Map<String, Value>) -> Option<&Value> {
    object
        .get("id")
        .filter(|id| id.is_string() || id.is_i64() || id.is_u64())
}

/// What makes `object` no JSON-RPC message; `None` when its envelope looks
/// fine.
fn object_problem(object: &Map<String, Value>) -> Option<String> {
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Some(r#""jsonrpc" must be "2.0""#.to_owned());
    }
    if object
        .get("id")
        .is_some_and(|_| readable_id(object).is_none())
    {
        return Some(r#""id" must be a string or an integer"#.to_owned());
    }
    let response = object.contains_key("result") || object.contains_key("error");
    let Some(method) = object.get("method") else {
        if !response {
            return Some(r#"no "method": a request names the method it calls"#.to_owned());
        }
        if object.contains_key("result") && object.contains_key("error") {
            return Some(r#"a response has a "result" or an "error", not both"#.to_owned());
        }
        let error = object.get("error");
        if error.is_some_and(|e| !e["code"].is_i64() || !e["message"].is_string()) {
            return Some(
                r#""error" must be an object with an integer "code" and a string "message""#
                    .to_owned(),
            );
        }
        return None;
    };
    if !method.is_string() {
        return Some(format!(
            r#""method" must be a string, not {}"#,
            kind(method)
        ));
    }
    if response {
        return Some(r#"a message has a "method" or a "result"/"error", not both"#.to_owned());
    }
    if object.get("params").is_some_and(|p| !p.is_object()) {
        return Some(r#""params" must be an object"#.to_owned());
    }
    None
}

/// rmcp reads a request whose params do not fit its method as a custom
/// request of that name, then answers "Method not found". For the methods
/// toolgate serves, the params are parsed as that method's to name the
/// field that is wrong.
#[allow(deprecated)] // logging/setLevel: deprecated in 2026-07-28, served for older clients.
fn misfit_params(message: &RxJsonRpcMessage<RoleServer>) -> Option<Refusal> {
    use rmcp::model::{
        CallToolRequest, ClientRequest, DiscoverRequest, InitializeRequest, JsonRpcMessage,
        ListToolsRequest, SetLevelRequest,
    };
    let JsonRpcMessage::Request(request) = message else {
        return None;
    };
    let ClientRequest::CustomRequest(custom) = &request.request else {
        return None;
    };
    let method = custom.method.as_str();
    let whole = json!({"method": method, "params": custom.params});
    let misfit = match method {
        "initialize" => serde_json::from_value::<InitializeRequest>(whole).err(),
        "server/discover" => serde_json::from_value::<DiscoverRequest>(whole).err(),
        "tools/list" => serde_json::from_value::<ListToolsRequest>(whole).err(),
        "tools/call" => serde_json::from_value::<CallToolRequest>(whole).err(),
        "logging/setLevel" => serde_json::from_value::<SetLevelRequest>(whole).err(),
        _ => None,
    }?;
    let id = serde_json::to_value(&request.id).ok();
    let message = format!(
        "Invalid params for {method}: {}",
        brief(&misfit.to_string())
    );
    Some(Refusal::new(
        ErrorCode::INVALID_PARAMS,
        id.as_ref(),
        message,
        true,
    ))
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `text` cut to [`DETAIL_CHARS`] characters.
fn brief(text: &str) -> String {
    match text.char_indices().nth(DETAIL_CHARS) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use proptest::prelude::*;

    use super::*;

    /// The reply to `input`, or `"passed"` / `"blank"`.
    fn reply(input: &[u8]) -> Value {
        match screen(input) {
            Screened::Message(_) => json!("passed"),
            Screened::Blank => json!("blank"),
            Screened::Refused(r) if r.answer => r.reply,
            Screened::Refused(r) => json!({"unanswered": r.reply}),
        }
    }

    fn error(id: Value, code: i64, message: &str) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
    }

    #[test]
    fn each_malformed_message_gets_the_error_json_rpc_prescribes() {
        let deep = "[".repeat(100_000);
        let cases: Vec<(&[u8], Value)> = vec![
            (
                br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
                json!("passed"),
            ),
            (
                b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}",
                json!("passed"),
            ),
            (b" \t\r", json!("blank")),
            (
                b"hello",
                error(
                    Value::Null,
                    -32700,
                    "Parse error: expected value at line 1 column 1",
                ),
            ),
            (
                br#"{"jsonrpc":"2.0","id":1,"#,
                error(
                    Value::Null,
                    -32700,
                    "Parse error: EOF while parsing a value at line 1 column 24",
                ),
            ),
            (
                br#"{"x":1e400}"#,
                error(
                    Value::Null,
                    -32700,
                    "Parse error: number out of range at line 1 column 10",
                ),
            ),
            (
                deep.as_bytes(),
                error(
                    Value::Null,
                    -32700,
                    "Parse error: recursion limit exceeded at line 1 column 128",
                ),
            ),
            (
                b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\xFFng\"}",
                error(
                    Value::Null,
                    -32700,
                    "Parse error: the message is not UTF-8 (invalid byte at offset 35)",
                ),
            ),
            (
                b"42",
                error(
                    Value::Null,
                    -32600,
                    "Invalid Request: a JSON-RPC message is an object, not a number",
                ),
            ),
            (
                b"[]",
                error(Value::Null, -32600, "Invalid Request: an empty batch"),
            ),
            (
                br#"{"jsonrpc":"1.0","id":"a","method":"ping"}"#,
                error(
                    json!("a"),
                    -32600,
                    r#"Invalid Request: "jsonrpc" must be "2.0""#,
                ),
            ),
            (
                br#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
                error(
                    Value::Null,
                    -32600,
                    r#"Invalid Request: "id" must be a string or an integer"#,
                ),
            ),
            (
                br#"{"jsonrpc":"2.0","id":7}"#,
                error(
                    json!(7),
                    -32600,
                    r#"Invalid Request: no "method": a request names the method it calls"#,
                ),
            ),
            (
                br#"{"jsonrpc":"2.0","id":7,"method":["ping"]}"#,
                error(
                    json!(7),
                    -32600,
                    r#"Invalid Request: "method" must be a string, not an array"#,
                ),
            ),
            (
                br#"{"jsonrpc":"2.0","id":7,"method":"ping","params":[1]}"#,
                error(
                    json!(7),
                    -32600,
                    r#"Invalid Request: "params" must be an object"#,
                ),
            ),
            // A broken notification or response: JSON-RPC answers neither.
            (
                br#"{"jsonrpc":"2.0","method":7}"#,
                json!({"unanswered": error(
                    Value::Null,
                    -32600,
                    r#"Invalid Request: "method" must be a string, not a number"#,
                )}),
            ),
            // toolgate's own reply echoed back is a response rmcp takes
            // (and ignores): no storm.
            (
                br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#,
                json!("passed"),
            ),
            (
                br#"{"jsonrpc":"2.0","id":3,"error":{"code":"x"}}"#,
                json!({"unanswered": error(
                    json!(3),
                    -32600,
                    r#"Invalid Request: "error" must be an object with an integer "code" and a string "message""#,
                )}),
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(
                reply(input),
                expected,
                "{:.80}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn params_that_do_not_fit_a_served_method_are_invalid_params_with_the_id() {
        let cases: [(&[u8], &str); 3] = [
            (
                br#"{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":5}}"#,
                "Invalid params for tools/call: invalid type: integer `5`, expected a string",
            ),
            (
                br#"{"jsonrpc":"2.0","id":"c1","method":"tools/call"}"#,
                "Invalid params for tools/call: invalid type: null, expected struct",
            ),
            (
                br#"{"jsonrpc":"2.0","id":"c1","method":"logging/setLevel","params":{"level":"loud"}}"#,
                "Invalid params for logging/setLevel: unknown variant `loud`",
            ),
        ];
        for (input, start) in cases {
            let refused = reply(input);
            assert_eq!(
                (&refused["id"], &refused["error"]["code"]),
                (&json!("c1"), &json!(-32602))
            );
            let message = refused["error"]["message"].as_str().unwrap();
            assert!(message.starts_with(start), "{message}");
        }
        // A method toolgate does not serve is rmcp's: Method not found.
        let other = br#"{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":5}}"#;
        assert_eq!(reply(other), json!("passed"));
    }

    #[test]
    fn a_batch_gets_an_error_for_each_request_by_its_id() {
        let input = br#"[{"jsonrpc":"2.0","id":1,"method":"ping"},
                         {"jsonrpc":"2.0","method":"notifications/initialized"},
                         {"jsonrpc":"2.0","id":"two","method":"tools/list"},
                         5]"#;
        assert_eq!(
            reply(input),
            json!([
                error(json!(1), -32600, BATCH),
                error(json!("two"), -32600, BATCH),
                error(Value::Null, -32600, BATCH),
            ])
        );
        let only_notifications = br#"[{"jsonrpc":"2.0","method":"notifications/initialized"}]"#;
        assert_eq!(reply(only_notifications), error(Value::Null, -32600, BATCH));
    }

    #[test]
    fn a_huge_value_in_the_input_is_not_echoed() {
        let big = "x".repeat(1 << 20);
        for input in [
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{big}","params":3}}"#),
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":{{"{big}":1}}}}"#),
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{big}"#),
            format!(r#"{{"{big}":1e400}}"#),
        ] {
            let Screened::Refused(refused) = screen(input.as_bytes()) else {
                panic!("not refused: {input:.80}");
            };
            let reply = refused.reply.to_string();
            assert!(reply.len() < 1000, "{reply:.300}");
        }
    }

    #[test]
    fn the_limit_is_refused_as_a_parse_error() {
        let refused = Refusal::too_long();
        assert_eq!(
            refused.reply,
            error(
                Value::Null,
                -32700,
                "Parse error: the message is longer than toolgate's limit of 16 MiB and was not read"
            )
        );
    }

    proptest! {
        /// Whatever arrives, screening does not panic, and what it refuses
        /// gets one JSON-RPC error response (or an array of them) whose id
        /// is null, a string or an integer.
        #[test]
        fn every_refusal_is_a_json_rpc_error(input in proptest::collection::vec(any::<u8>(), 0..200)) {
            check_refusal(&input);
        }

        /// Envelopes of any mix of keys and values: the short way reads
        /// nothing rmcp would read otherwise.
        #[test]
        fn the_short_way_reads_only_what_rmcp_reads(
            fields in proptest::collection::vec(
                (
                    prop_oneof![
                        Just("jsonrpc"), Just("id"), Just("method"), Just("params"),
                        Just("result"), Just("error"), Just("x"),
                    ],
                    prop_oneof![
                        Just(r#""2.0""#), Just("1"), Just("-1"), Just("1.5"), Just("null"),
                        Just(r#""a""#), Just(r#""tools/call""#), Just("[]"),
                        Just(r#"{"name":"ls"}"#), Just(r#"{"name":"ls","arguments":{"p":1}}"#),
                        Just(r#"{"name":1}"#), Just(r#"{"name":"ls","_meta":{"progressToken":"t"}}"#),
                        Just("{}"),
                    ],
                ),
                0..8,
            )
        ) {
            let body: Vec<String> = fields.iter().map(|(k, v)| format!(r#""{k}":{v}"#)).collect();
            read_as_rmcp_does(&format!("{{{}}}", body.join(",")));
        }

        #[test]
        fn json_like_input_too(input in r#"[\[\]{}":,0-9a-z.eE+\- \\]{0,120}"#) {
            check_refusal(input.as_bytes());
            let framed = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{input}}}"#);
            check_refusal(framed.as_bytes());
            read_as_rmcp_does(&framed);
        }
    }

    /// What the short way reads is what rmcp reads; what it leaves is left
    /// to rmcp (`None`).
    fn read_as_rmcp_does(text: &str) -> bool {
        let Some(short) = tools_call(text) else {
            return false;
        };
        let rmcp = serde_json::from_str::<RxJsonRpcMessage<RoleServer>>(text)
            .expect("rmcp reads what the short way reads");
        assert_eq!(format!("{short:?}"), format!("{rmcp:?}"), "{text}");
        assert_eq!(
            serde_json::to_value(&short).unwrap(),
            serde_json::to_value(&rmcp).unwrap(),
            "{text}"
        );
        true
    }

    #[test]
    fn tools_calls_are_read_the_short_way_as_rmcp_reads_them() {
        let short = [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ls","arguments":{"path":"a"}}}"#,
            r#"{"method":"tools/call","params":{"name":"read"},"id":"x-1","jsonrpc":"2.0"}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools\/call","params":{"name":"ls","arguments":{},"_meta":{"progressToken":3}}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ls","task":{"ttl":5}},"x":[1,{"y":null}]}"#,
            r#" {"jsonrpc":"2.0","id":-3,"method":"tools/call","params":{"name":"a","arguments":{"n":1.5e3,"s":"é"}}} "#,
        ];
        for text in short {
            assert!(read_as_rmcp_does(text), "not read the short way: {text}");
        }
        // Left to rmcp: no plain tools/call envelope, or params that do not
        // fit (rmcp's reading, then `misfit_params`, name what is wrong).
        let left = [
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"ls"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ls"},"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ls"},"error":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"name":"ls"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"ping","params":{"name":"ls"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":3}}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"ls"}}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"ls"}}"#,
            r#"{"id":1,"method":"tools/call","params":{"name":"ls"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":["tools/call"],"params":{"name":"ls"}}"#,
        ];
        for text in left {
            assert!(!read_as_rmcp_does(text), "read the short way: {text}");
        }
    }

    fn check_refusal(input: &[u8]) {
        let Screened::Refused(refused) = screen(input) else {
            return;
        };
        let replies = match refused.reply {
            Value::Array(items) => items,
            single => vec![single],
        };
        assert!(!replies.is_empty());
        for r in replies {
            assert_eq!(r["jsonrpc"], "2.0", "{r}");
            let id = &r["id"];
            assert!(
                id.is_null() || id.is_string() || id.is_i64() || id.is_u64(),
                "{r}"
            );
            let code = r["error"]["code"].as_i64().unwrap();
            assert!([-32700, -32600, -32602].contains(&code), "{r}");
            assert!(r["error"]["message"].is_string(), "{r}");
        }
    }
}

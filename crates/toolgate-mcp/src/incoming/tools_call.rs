//! The short way in for the most common message, a `tools/call` request.

use rmcp::RoleServer;
use rmcp::service::RxJsonRpcMessage;

/// A `tools/call` request read straight into rmcp's type. rmcp's own parse
/// buffers the message and tries each request type it knows in turn (a
/// `tools/call` is the fourteenth; each miss formats an error and drops
/// it), which costs a small call more than reading its arguments. Only a
/// message whose envelope is plainly a `tools/call` request takes this way;
/// anything it does not parse goes rmcp's way, so what passes, and every
/// error, is what rmcp makes of it.
pub(super) fn tools_call(text: &str) -> Option<RxJsonRpcMessage<RoleServer>> {
    use rmcp::model::{CallToolRequest, ClientRequest, JsonRpcMessage, JsonRpcRequest};
    let envelope: Envelope = serde_json::from_str(text).ok()?;
    if !envelope.is_plain_tools_call() {
        return None;
    }
    let request: JsonRpcRequest<CallToolRequest> = serde_json::from_str(text).ok()?;
    Some(JsonRpcMessage::Request(JsonRpcRequest {
        jsonrpc: request.jsonrpc,
        id: request.id,
        request: ClientRequest::CallToolRequest(request.request),
    }))
}

/// How often each key of a message's envelope appears, and whether its
/// method is `tools/call`; values are skipped, not read.
#[derive(Default)]
struct Envelope {
    /// `jsonrpc`, `id`, `method`, `params`, `result`, `error`.
    counts: [u32; 6],
    tools_call: bool,
}

impl Envelope {
    const KEYS: [&str; 6] = ["jsonrpc", "id", "method", "params", "result", "error"];

    /// What rmcp takes for a request (a method and an id, no result or
    /// error), each key once (a repeated key is left to rmcp's reading),
    /// calling `tools/call`.
    fn is_plain_tools_call(&self) -> bool {
        self.tools_call && self.counts == [1, 1, 1, 1, 0, 0]
    }
}

impl<'de> serde::Deserialize<'de> for Envelope {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::{IgnoredAny, MapAccess, Visitor};

        /// A key, read without a String of its own.
        struct Key(Option<usize>);
        impl<'de> serde::Deserialize<'de> for Key {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                d.deserialize_str(KeyVisitor)
            }
        }
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<Key, E> {
                Ok(Key(Envelope::KEYS.iter().position(|k| *k == key)))
            }
        }

        /// Whether a method value is the string `tools/call`.
        struct IsToolsCall(bool);
        impl<'de> serde::Deserialize<'de> for IsToolsCall {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                d.deserialize_any(IsToolsCallVisitor)
            }
        }
        struct IsToolsCallVisitor;
        impl<'de> Visitor<'de> for IsToolsCallVisitor {
            type Value = IsToolsCall;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a method")
            }
            fn visit_str<E: serde::de::Error>(self, method: &str) -> Result<IsToolsCall, E> {
                Ok(IsToolsCall(method == "tools/call"))
            }
            // Anything else is no tools/call: skipped whole.
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<IsToolsCall, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(IsToolsCall(false))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<IsToolsCall, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(IsToolsCall(false))
            }
            fn visit_bool<E>(self, _: bool) -> Result<IsToolsCall, E> {
                Ok(IsToolsCall(false))
            }
            fn visit_i64<E>(self, _: i64) -> Result<IsToolsCall, E> {
                Ok(IsToolsCall(false))
            }
            fn visit_u64<E>(self, _: u64) -> Result<IsToolsCall, E> {
                Ok(IsToolsCall(false))
            }
            fn visit_f64<E>(self, _: f64) -> Result<IsToolsCall, E> {
                Ok(IsToolsCall(false))
            }
            fn visit_unit<E>(self) -> Result<IsToolsCall, E> {
                Ok(IsToolsCall(false))
            }
        }

        struct EnvelopeVisitor;
        impl<'de> Visitor<'de> for EnvelopeVisitor {
            type Value = Envelope;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON-RPC message")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Envelope, A::Error> {
                let mut envelope = Envelope::default();
                while let Some(Key(key)) = map.next_key()? {
                    match key {
                        Some(2) => envelope.tools_call = map.next_value::<IsToolsCall>()?.0,
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                    if let Some(i) = key {
                        envelope.counts[i] += 1;
                    }
                }
                Ok(envelope)
            }
        }

        deserializer.deserialize_map(EnvelopeVisitor)
    }
}

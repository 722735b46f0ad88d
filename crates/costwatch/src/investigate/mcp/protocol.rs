//! JSON-RPC envelopes and MCP results: picking the response to a request,
//! JSON-RPC errors and what they say about the server's protocol era,
//! mapping them onto [`InvestigateError`], the `_meta` of a 2026-07-28
//! request, result types, tool specs and tool results.

use super::super::{InvestigateError, ToolOutput, ToolSpec};
use super::{PROTOCOL_VERSION, SUPPORTED_VERSIONS};
use serde_json::{Value, json};

/// JSON-RPC: the server could not parse the message.
pub(super) const PARSE_ERROR: i64 = -32700;
/// JSON-RPC: no such method (2026-07-28 servers answer it with a 404).
pub(super) const METHOD_NOT_FOUND: i64 = -32601;
/// 2026-07-28: the request metadata headers do not match the body, or one
/// is missing (`HeaderMismatch`).
pub(super) const HEADER_MISMATCH: i64 = -32020;
/// 2026-07-28: the request needs a client capability costwatch did not
/// declare (`MissingRequiredClientCapability`).
pub(super) const MISSING_CLIENT_CAPABILITY: i64 = -32021;
/// 2026-07-28: the server does not speak the revision the request named
/// (`UnsupportedProtocolVersion`); `data.supported` lists those it speaks.
pub(super) const UNSUPPORTED_VERSION: i64 = -32022;

/// Most revisions of a server's `supported` list quoted in a message.
const QUOTED_VERSIONS: usize = 8;

/// A peer that broke the protocol.
pub(super) fn protocol(message: impl Into<String>) -> InvestigateError {
    InvestigateError::Protocol(message.into())
}

/// A request that will fail the same way until something changes.
pub(super) fn rejected(message: impl Into<String>) -> InvestigateError {
    InvestigateError::Rejected(message.into())
}

/// Whether `message` is the response (result or error) to request `id`.
pub(super) fn is_response_to(message: &Value, id: u64) -> bool {
    message.get("id").and_then(Value::as_u64) == Some(id)
        && message.get("method").is_none()
        && (message.get("result").is_some() || message.get("error").is_some())
}

/// The response with id `expect` in a JSON body (one message or a batch).
pub(super) fn pick_json_response(body: &[u8], expect: u64) -> Result<Value, String> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| format!("the answer is not JSON: {e}"))?;
    let found = match value {
        Value::Array(items) => items.into_iter().find(|m| is_response_to(m, expect)),
        m if is_response_to(&m, expect) => Some(m),
        _ => None,
    };
    found.ok_or_else(|| format!("the answer holds no response to request {expect}"))
}

/// A JSON-RPC error object the server answered with.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct RpcError {
    /// `error.code`; 0 when it is missing or not an integer.
    pub(super) code: i64,
    /// `error.message`.
    pub(super) message: String,
    /// `error.data`, if any.
    pub(super) data: Option<Value>,
}

impl RpcError {
    /// The `error` member of a JSON-RPC message, if it has one.
    pub(super) fn of(message: &Value) -> Option<RpcError> {
        let error = message.get("error")?;
        Some(RpcError {
            code: error
                .get("code")
                .and_then(Value::as_i64)
                .unwrap_or_default(),
            message: error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("no message")
                .to_owned(),
            data: error.get("data").cloned(),
        })
    }

    /// The revisions an `UnsupportedProtocolVersion` error says the server
    /// speaks (`data.supported`); `None` for another error, or when the list
    /// is missing or not a list of strings.
    pub(super) fn supported(&self) -> Option<Vec<String>> {
        if self.code != UNSUPPORTED_VERSION {
            return None;
        }
        self.data
            .as_ref()?
            .get("supported")?
            .as_array()?
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect()
    }

    /// `(the server speaks …; costwatch speaks …)` for an
    /// `UnsupportedProtocolVersion` error that names the server's revisions.
    pub(super) fn versions_note(&self) -> Option<String> {
        let supported = self.supported()?;
        Some(format!(
            " (the server speaks {}; costwatch speaks {})",
            quote_versions(&supported),
            SUPPORTED_VERSIONS.join(", ")
        ))
    }

    /// The error of a request for `method`: a parse error is the client and
    /// the server disagreeing on the protocol; anything else is `Rejected`.
    pub(super) fn to_error(&self, method: &str) -> InvestigateError {
        let mut what = format!(
            "{method}: json-rpc error {}: {}",
            self.code,
            crate::printable::printable(&self.message)
        );
        if let Some(note) = self.versions_note() {
            what.push_str(&note);
        }
        if self.code == PARSE_ERROR {
            protocol(what)
        } else {
            rejected(what)
        }
    }
}

/// A server's list of revisions for a message: printable, at most
/// [`QUOTED_VERSIONS`] of them, `none` when empty.
pub(super) fn quote_versions(versions: &[String]) -> String {
    if versions.is_empty() {
        return "none".to_owned();
    }
    let mut quoted: Vec<String> = versions
        .iter()
        .take(QUOTED_VERSIONS)
        .map(|v| crate::printable::printable(v).to_string())
        .collect();
    if versions.len() > QUOTED_VERSIONS {
        quoted.push("…".to_owned());
    }
    quoted.join(", ")
}

/// What a refused request says about the server's protocol era, read as
/// the 2026-07-28 versioning rules say ("Backward Compatibility").
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Verdict {
    /// `UnsupportedProtocolVersion`: a server of the 2026-07-28 era that
    /// does not speak the revision asked for, with the revisions it named
    /// (`None` when it named none).
    Unsupported(Option<Vec<String>>),
    /// Another error only servers of the 2026-07-28 era send
    /// (`HeaderMismatch`, `MissingRequiredClientCapability`, or method not
    /// found with a 404): the server speaks the revision and refused the
    /// request itself.
    Modern,
    /// Anything else: a server of the `initialize` era, which knows neither
    /// the request metadata nor these errors.
    Legacy,
}

/// The [`Verdict`] of an answer with HTTP `status` (2xx for a JSON-RPC
/// error in a successful answer) holding `error`, if it holds one.
pub(super) fn verdict(status: u16, error: Option<&RpcError>) -> Verdict {
    match error.map(|e| e.code) {
        Some(UNSUPPORTED_VERSION) => Verdict::Unsupported(error.and_then(RpcError::supported)),
        Some(HEADER_MISMATCH | MISSING_CLIENT_CAPABILITY) => Verdict::Modern,
        Some(METHOD_NOT_FOUND) if status == 404 => Verdict::Modern,
        _ => Verdict::Legacy,
    }
}

/// The `result` of a response, or its JSON-RPC `error`; `Err` when the
/// response has neither a result object nor an error.
pub(super) fn split_response(
    method: &str,
    mut message: Value,
) -> Result<Result<Value, RpcError>, InvestigateError> {
    if let Some(error) = RpcError::of(&message) {
        return Ok(Err(error));
    }
    match message.get_mut("result") {
        Some(result) if result.is_object() => Ok(Ok(result.take())),
        _ => Err(protocol(format!(
            "{method}: the response has no result object"
        ))),
    }
}

/// `result` if it is final: `resultType` absent (servers before
/// 2026-07-28) or `complete`. An `input_required` result asks for input
/// (sampling, elicitation, roots) costwatch declares no capability for.
pub(super) fn complete(method: &str, result: Value) -> Result<Value, InvestigateError> {
    match result.get("resultType") {
        None | Some(Value::Null) => Ok(result),
        Some(Value::String(t)) if t == "complete" => Ok(result),
        Some(Value::String(t)) if t == "input_required" => Err(rejected(format!(
            "{method}: the server asks for client input (resultType input_required), \
             which costwatch does not offer"
        ))),
        Some(other) => Err(protocol(format!(
            "{method}: unknown resultType {}",
            crate::printable::printable(&other.to_string())
        ))),
    }
}

/// `clientInfo`: who is asking.
pub(super) fn client_info() -> Value {
    json!({"name": "costwatch", "version": env!("CARGO_PKG_VERSION")})
}

/// `params` of a 2026-07-28 request: `params` with `_meta` naming the
/// revision, the client's capabilities (none: no sampling, elicitation or
/// roots) and the client. `params` must be an object (or null).
pub(super) fn with_meta(params: &Value) -> Value {
    let mut params = match params {
        Value::Object(map) => map.clone(),
        _ => serde_json::Map::new(),
    };
    params.insert(
        "_meta".to_owned(),
        json!({
            "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": client_info(),
        }),
    );
    Value::Object(params)
}

/// A `tools/list` entry.
pub(super) fn tool_spec(tool: &Value) -> Result<ToolSpec, String> {
    let name = tool
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or("no name")?;
    let description = tool
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let input_schema = match tool.get("inputSchema") {
        Some(schema @ Value::Object(_)) => schema.clone(),
        None | Some(Value::Null) => json!({"type": "object"}),
        Some(_) => return Err(format!("`{name}`: inputSchema is not an object")),
    };
    Ok(ToolSpec {
        name: name.to_owned(),
        description: description.to_owned(),
        input_schema,
    })
}

/// A `tools/call` result: text content joined with `\n`, and `isError`.
pub(super) fn tool_output(result: &Value) -> Result<ToolOutput, String> {
    let is_error = match result.get("isError") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err("isError is not a boolean".to_owned()),
    };
    let parts: Vec<String> = match result.get("content") {
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item.get("type").and_then(Value::as_str) {
                Some("text") => item
                    .get("text")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .ok_or_else(|| "a text item has no text".to_owned()),
                Some(other) => Ok(format!("[{other} content omitted]")),
                None => Err("a content item has no type".to_owned()),
            })
            .collect::<Result<_, _>>()?,
        None | Some(Value::Null) => match result.get("structuredContent") {
            Some(v) => vec![v.to_string()],
            None => return Err("the result has no content".to_owned()),
        },
        Some(_) => return Err("content is not an array".to_owned()),
    };
    Ok(ToolOutput {
        text: parts.join("\n"),
        is_error,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    /// The `result` of a response, or its `error` as an [`InvestigateError`].
    fn rpc_result(method: &str, message: Value) -> Result<Value, InvestigateError> {
        split_response(method, message)?.map_err(|e| e.to_error(method))
    }

    #[test]
    fn json_answers_pick_the_response_by_id() {
        let one = br#"{"jsonrpc":"2.0","id":7,"result":{"ok":true}}"#;
        assert_eq!(pick_json_response(one, 7).unwrap()["result"]["ok"], true);
        assert!(pick_json_response(one, 8).is_err());
        let batch = br#"[{"jsonrpc":"2.0","method":"notifications/message","params":{}},
                         {"jsonrpc":"2.0","id":3,"method":"ping"},
                         {"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"m"}}]"#;
        assert_eq!(pick_json_response(batch, 3).unwrap()["error"]["code"], -1);
        assert!(pick_json_response(b"<html>", 3).is_err());
    }

    #[test]
    fn results_and_errors_map_onto_investigate_errors() {
        let ok = json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": []}});
        assert_eq!(rpc_result("m", ok).unwrap(), json!({"tools": []}));
        let err = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "nope"}});
        assert_eq!(
            rpc_result("m", err).unwrap_err(),
            InvestigateError::Rejected("m: json-rpc error -32601: nope".into())
        );
        let parse = json!({"id": 1, "error": {"code": -32700, "message": "bad json"}});
        assert!(matches!(
            rpc_result("m", parse),
            Err(InvestigateError::Protocol(_))
        ));
        let neither = json!({"jsonrpc": "2.0", "id": 1});
        assert!(matches!(
            rpc_result("m", neither),
            Err(InvestigateError::Protocol(_))
        ));
    }

    #[test]
    fn errors_only_2026_07_28_servers_send_tell_the_era() {
        let error = |code: i64, data: Value| RpcError {
            code,
            message: "m".into(),
            data: Some(data),
        };
        let unsupported = error(
            -32022,
            json!({"supported": ["2025-11-25"], "requested": "x"}),
        );
        assert_eq!(
            verdict(400, Some(&unsupported)),
            Verdict::Unsupported(Some(vec!["2025-11-25".into()]))
        );
        assert_eq!(
            unsupported.to_error("tools/list"),
            InvestigateError::Rejected(
                "tools/list: json-rpc error -32022: m (the server speaks 2025-11-25; \
                 costwatch speaks 2026-07-28, 2025-11-25, 2025-06-18, 2025-03-26)"
                    .into()
            )
        );
        let no_list = error(-32022, json!({"supported": "2025-11-25"}));
        assert_eq!(verdict(400, Some(&no_list)), Verdict::Unsupported(None));
        assert_eq!(
            verdict(400, Some(&error(-32020, Value::Null))),
            Verdict::Modern
        );
        assert_eq!(
            verdict(400, Some(&error(-32021, Value::Null))),
            Verdict::Modern
        );
        assert_eq!(
            verdict(404, Some(&error(-32601, Value::Null))),
            Verdict::Modern
        );
        // What servers of the initialize era answer.
        assert_eq!(
            verdict(200, Some(&error(-32601, Value::Null))),
            Verdict::Legacy
        );
        assert_eq!(
            verdict(400, Some(&error(-32600, Value::Null))),
            Verdict::Legacy
        );
        assert_eq!(
            verdict(400, Some(&error(-32001, Value::Null))),
            Verdict::Legacy
        );
        assert_eq!(verdict(400, None), Verdict::Legacy);
        assert_eq!(verdict(405, None), Verdict::Legacy);
    }

    #[test]
    fn only_complete_results_are_taken() {
        let done = json!({"resultType": "complete", "tools": []});
        assert_eq!(complete("m", done.clone()).unwrap(), done);
        assert!(complete("m", json!({"tools": []})).is_ok());
        assert!(matches!(
            complete("m", json!({"resultType": "input_required"})),
            Err(InvestigateError::Rejected(_))
        ));
        assert!(matches!(
            complete("m", json!({"resultType": "later"})),
            Err(InvestigateError::Protocol(_))
        ));
    }

    #[test]
    fn the_meta_of_2026_07_28_is_added_to_the_params() {
        let params = with_meta(&json!({"name": "t", "arguments": {}}));
        assert_eq!(params["name"], "t");
        let meta = &params["_meta"];
        assert_eq!(
            meta["io.modelcontextprotocol/protocolVersion"],
            "2026-07-28"
        );
        assert_eq!(
            meta["io.modelcontextprotocol/clientCapabilities"],
            json!({})
        );
        assert_eq!(
            meta["io.modelcontextprotocol/clientInfo"]["name"],
            "costwatch"
        );
        assert_eq!(with_meta(&Value::Null)["_meta"], *meta);
    }

    #[test]
    fn tool_results_join_text_and_keep_is_error() {
        let r = json!({"content": [
            {"type": "text", "text": "one"},
            {"type": "image", "data": "...", "mimeType": "image/png"},
            {"type": "text", "text": "two"},
        ], "isError": true});
        assert_eq!(
            tool_output(&r).unwrap(),
            ToolOutput {
                text: "one\n[image content omitted]\ntwo".into(),
                is_error: true
            }
        );
        let structured = json!({"structuredContent": {"a": 1}});
        assert_eq!(tool_output(&structured).unwrap().text, r#"{"a":1}"#);
        assert!(!tool_output(&structured).unwrap().is_error);
        assert!(tool_output(&json!({})).is_err());
        assert!(tool_output(&json!({"content": [{"type": "text"}]})).is_err());
        assert!(tool_output(&json!({"content": [], "isError": "yes"})).is_err());
    }

    #[test]
    fn tool_specs_need_a_name_and_default_the_schema() {
        let t = tool_spec(&json!({"name": "x"})).unwrap();
        assert_eq!(
            (t.description.as_str(), t.input_schema),
            ("", json!({"type": "object"}))
        );
        assert!(tool_spec(&json!({"description": "no name"})).is_err());
        assert!(tool_spec(&json!({"name": "x", "inputSchema": "object"})).is_err());
    }
}

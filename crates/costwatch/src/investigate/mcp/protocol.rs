//! JSON-RPC envelopes and MCP results: picking the response to a request,
//! mapping JSON-RPC errors onto [`InvestigateError`], tool specs and tool
//! results.

use super::super::{InvestigateError, ToolOutput, ToolSpec};
use serde_json::{Value, json};

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

/// The `result` of a response, or its `error` as an [`InvestigateError`].
pub(super) fn rpc_result(method: &str, mut message: Value) -> Result<Value, InvestigateError> {
    if let Some(error) = message.get("error") {
        let code = error
            .get("code")
            .and_then(Value::as_i64)
            .unwrap_or_default();
        let text = error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("no message");
        let what = format!("{method}: json-rpc error {code}: {text}");
        return Err(if code == -32700 {
            protocol(what)
        } else {
            rejected(what)
        });
    }
    match message.get_mut("result") {
        Some(result) if result.is_object() => Ok(result.take()),
        _ => Err(protocol(format!(
            "{method}: the response has no result object"
        ))),
    }
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

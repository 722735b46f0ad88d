//! Messages on the wire: JSON-RPC 2.0 results and errors, the MCP tool
//! result `{"content": [{"type": "text", "text"}], "isError"}` (gateway-api.md
//! section 2), and the answer as `application/json` or as one
//! `text/event-stream` response.
//!
//! The SSE form is deliberately awkward, as real servers may be: CRLF line
//! ends, a comment, an empty priming event, a log notification before the
//! response, and the response's JSON split over several `data:` lines.

use super::McpMode;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// JSON-RPC: the body is not JSON.
pub(super) const PARSE_ERROR: i64 = -32700;
/// JSON-RPC: not a valid request object.
pub(super) const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC: no such method.
pub(super) const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC: bad parameters (also: unknown tool).
pub(super) const INVALID_PARAMS: i64 = -32602;
/// Server-defined: authentication failed.
pub(super) const UNAUTHORIZED: i64 = -32001;

/// A JSON-RPC result.
pub(super) fn rpc_result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// A JSON-RPC error.
pub(super) fn rpc_error(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// A tool result: one text block, flagged as an error or not.
pub(super) fn tool_result(text: String, is_error: bool) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": is_error})
}

/// An HTTP error carrying a JSON-RPC error without an id.
pub(super) fn transport_error(status: StatusCode, code: i64, message: &str) -> Response {
    let body = rpc_error(&Value::Null, code, message);
    (status, axum::Json(body)).into_response()
}

/// The response as JSON or as an event stream, with the session header on
/// `initialize`.
pub(super) fn answer(mode: McpMode, message: &Value, session: Option<&str>) -> Response {
    let mut res = match mode {
        McpMode::Json => (StatusCode::OK, axum::Json(message)).into_response(),
        McpMode::Sse => (
            StatusCode::OK,
            [
                (header::CONTENT_TYPE, "text/event-stream"),
                (header::CACHE_CONTROL, "no-cache"),
            ],
            sse_body(message),
        )
            .into_response(),
    };
    if let Some(id) = session
        && let Ok(v) = HeaderValue::from_str(id)
    {
        res.headers_mut().insert("mcp-session-id", v);
    }
    res
}

/// One event stream: a comment, an empty priming event, a log notification,
/// then the message pretty-printed over several `data:` lines; CRLF ends.
pub(super) fn sse_body(message: &Value) -> String {
    let mut out = String::from(": costwatch simulator\r\nid: 0\r\ndata:\r\n\r\n");
    let note = json!({
        "jsonrpc": "2.0",
        "method": "notifications/message",
        "params": {"level": "debug", "logger": "sim", "data": "handling the request"},
    });
    out.push_str(&format!("event: message\r\nid: 1\r\ndata: {note}\r\n\r\n"));
    let text = serde_json::to_string_pretty(message).unwrap_or_else(|_| message.to_string());
    out.push_str("id: 2\r\n");
    for line in text.lines() {
        out.push_str("data: ");
        out.push_str(line);
        out.push_str("\r\n");
    }
    out.push_str("\r\n");
    out
}

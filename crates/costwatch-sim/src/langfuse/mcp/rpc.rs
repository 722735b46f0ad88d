//! The Streamable HTTP side of a `POST` and the JSON-RPC messages, as the
//! route (`server/transport.ts`) and the SDK's stateless transport and
//! low-level `Server` answer them: `Accept`, `Content-Type` and
//! `MCP-Protocol-Version` checks, `initialize` without a session, `ping`,
//! `tools/list`, `tools/call`, and -32601 for the rest.

use super::{PROTOCOL_VERSIONS, tools};
use crate::langfuse::RouteState;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// JSON-RPC: not a valid request.
pub(super) const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC: no such method.
pub(super) const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC: bad parameters.
pub(super) const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC: the server failed (also: an unknown tool).
pub(super) const INTERNAL_ERROR: i64 = -32603;

/// The server's name and version (`server/mcpServer.ts`).
const SERVER_INFO: (&str, &str) = ("langfuse", "0.3.0-unstable");

/// `MCP_SERVER_INSTRUCTIONS`.
const INSTRUCTIONS: &str = "Use this server for project-scoped Langfuse data and actions such as prompts, datasets, scores, comments, metrics, observations etc.\n\
Inspect the available tools and their schemas dynamically; do not assume a fixed tool list.\n\
For conceptual Langfuse product guidance, SDK/API documentation, instrumentation help, or prompt-migration guidance, prefer the Langfuse docs MCP server or installed Langfuse agent skills when they are available.\n\
To send feedback about Langfuse skills, MCP tools, CLI, docs, or public API, ask the user for permission and show the exact feedback payload; if they want a reply, include only an email address they explicitly provide in the feedback text; exclude secrets, customer/project data, trace payloads, and unrelated context, then call submitFeedback.";

/// A JSON-RPC error answer.
pub(super) fn rpc_error(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// An HTTP error carrying a JSON-RPC error without an id.
fn transport_error(status: StatusCode, code: i64, message: &str) -> Response {
    (status, axum::Json(rpc_error(&Value::Null, code, message))).into_response()
}

/// A header's text.
fn header_str<'h>(headers: &'h HeaderMap, name: &str) -> &'h str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

/// The SDK's check of `MCP-Protocol-Version`, for every message but
/// `initialize`: absent, or a revision it knows.
pub(super) fn check_version(headers: &HeaderMap) -> Result<(), Box<Response>> {
    let Some(v) = headers.get("mcp-protocol-version") else {
        return Ok(());
    };
    let v = String::from_utf8_lossy(v.as_bytes());
    if PROTOCOL_VERSIONS.contains(&v.as_ref()) {
        return Ok(());
    }
    Err(Box::new(transport_error(
        StatusCode::BAD_REQUEST,
        -32000,
        &format!(
            "Bad Request: Unsupported protocol version: {v} (supported versions: {})",
            PROTOCOL_VERSIONS.join(", ")
        ),
    )))
}

/// The SDK's checks of a `GET`.
pub(super) fn check_get(headers: &HeaderMap) -> Result<(), Box<Response>> {
    if !header_str(headers, "accept").contains("text/event-stream") {
        return Err(Box::new(transport_error(
            StatusCode::NOT_ACCEPTABLE,
            -32000,
            "Not Acceptable: Client must accept text/event-stream",
        )));
    }
    check_version(headers)
}

/// Whether `value` is a JSON-RPC message (request, notification, result
/// or error) as the SDK's `JSONRPCMessageSchema` reads it.
fn is_message(value: &Value) -> bool {
    let Some(m) = value.as_object() else {
        return false;
    };
    let id_ok = |id: &Value| id.is_string() || id.is_i64() || id.is_u64();
    let params_ok = m.get("params").is_none_or(Value::is_object);
    m.get("jsonrpc") == Some(&json!("2.0"))
        && match (m.get("method"), m.get("id")) {
            (Some(method), id) => method.is_string() && params_ok && id.is_none_or(id_ok),
            (None, Some(id)) => {
                id_ok(id)
                    && (m.contains_key("result") || m.get("error").is_some_and(Value::is_object))
            }
            (None, None) => false,
        }
}

/// A `POST` past the Host, Origin and key checks.
pub(super) fn handle(
    st: &RouteState,
    headers: &HeaderMap,
    body: &[u8],
    parsed: Option<&Value>,
) -> Response {
    let accept = header_str(headers, "accept");
    // The route's own check, looser than the SDK's after it.
    if !accept.contains("application/json")
        && !accept.contains("text/event-stream")
        && !accept.contains("*/*")
    {
        return transport_error(
            StatusCode::NOT_ACCEPTABLE,
            INVALID_REQUEST,
            "Invalid Request: Accept header must include application/json or text/event-stream",
        );
    }
    if !(accept.contains("application/json") && accept.contains("text/event-stream")) {
        return transport_error(
            StatusCode::NOT_ACCEPTABLE,
            -32000,
            "Not Acceptable: Client must accept both application/json and text/event-stream",
        );
    }
    let media = header_str(headers, header::CONTENT_TYPE.as_str())
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    if media != "application/json" {
        return transport_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            -32000,
            "Unsupported Media Type: Content-Type must be application/json",
        );
    }
    let Some(parsed) = parsed.filter(|_| !body.is_empty()) else {
        return transport_error(StatusCode::BAD_REQUEST, -32700, "Parse error: Invalid JSON");
    };
    let messages: Vec<&Value> = match parsed {
        Value::Array(items) => items.iter().collect(),
        one => vec![one],
    };
    if messages.is_empty() || !messages.iter().all(|m| is_message(m)) {
        return transport_error(
            StatusCode::BAD_REQUEST,
            -32700,
            "Parse error: Invalid JSON-RPC message",
        );
    }
    let is_request = |m: &&Value| m.get("method").is_some() && m.get("id").is_some();
    let initializing = messages
        .iter()
        .any(|m| is_request(m) && m["method"] == "initialize");
    if initializing && messages.len() > 1 {
        return transport_error(
            StatusCode::BAD_REQUEST,
            INVALID_REQUEST,
            "Invalid Request: Only one initialization request is allowed",
        );
    }
    if !initializing && let Err(res) = check_version(headers) {
        return *res;
    }
    let requests: Vec<&Value> = messages.into_iter().filter(is_request).collect();
    if requests.is_empty() {
        return StatusCode::ACCEPTED.into_response();
    }
    let mut answers = Vec::with_capacity(requests.len());
    for r in requests {
        let method = r["method"].as_str().unwrap_or_default();
        let params = r.get("params").cloned().unwrap_or_else(|| json!({}));
        answers.push(answer(st, headers, method, &params, &r["id"]));
    }
    let body = match answers.len() {
        1 => answers.swap_remove(0),
        _ => Value::Array(answers),
    };
    (StatusCode::OK, axum::Json(body)).into_response()
}

/// The answer to one request.
fn answer(st: &RouteState, headers: &HeaderMap, method: &str, params: &Value, id: &Value) -> Value {
    let result = match method {
        "initialize" => initialize(params),
        "ping" => Ok(json!({})),
        "tools/list" => Ok(tools::list(&st.sim)),
        "tools/call" => tools::call(st, headers, params),
        _ => Err((METHOD_NOT_FOUND, "Method not found".to_owned())),
    };
    match result {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err((code, message)) => rpc_error(id, code, &message),
    }
}

/// `initialize`: the revision asked for when the SDK knows it, else its
/// newest; no session.
fn initialize(params: &Value) -> Result<Value, (i64, String)> {
    let Some(asked) = params.get("protocolVersion").and_then(Value::as_str) else {
        return Err((
            INTERNAL_ERROR,
            "initialize: params.protocolVersion must be a string".to_owned(),
        ));
    };
    let version = if PROTOCOL_VERSIONS.contains(&asked) {
        asked
    } else {
        PROTOCOL_VERSIONS[0]
    };
    Ok(json!({
        "protocolVersion": version,
        "capabilities": {"tools": {}},
        "serverInfo": {"name": SERVER_INFO.0, "version": SERVER_INFO.1},
        "instructions": INSTRUCTIONS,
    }))
}

//! The gateway's read-only tools (gateway-api.md section 2): their list
//! with input schemas (`tools/list`, paged with `crate::cursor` tokens as
//! `nextCursor`) and the tools themselves (`tools/call`), which answer with
//! the rows of the REST contract (section 1) as compact JSON text for a
//! model to read. Bad arguments give a result with `isError: true` and a
//! message the model can act on; an unknown tool is a JSON-RPC error.
//!
//! Without `logs` in `X-MCP-Toolsets` only the model catalogue tools exist.

use super::args::Args;
use super::wire::{INVALID_PARAMS, answer, rpc_error, rpc_result, tool_result};
use super::{MAX_LABELS, MAX_LIMIT, McpShared, TOOLS_PAGE_SIZE};
use crate::cursor;
use crate::dataset::{Dataset, SimRequest, Window};
use axum::response::Response;
use serde_json::{Map, Value, json};

/// What `tools/list` cursors are bound to.
const TOOLS_FINGERPRINT: u64 = 0x746f_6f6c_732f_6c73;

/// The request-log tools.
const LOG_TOOLS: [&str; 4] = [
    "list_sessions",
    "search_requests",
    "get_request",
    "list_traces",
];

/// Whether `name` is a request-log tool (hidden without the `logs` toolset).
fn is_log_tool(name: &str) -> bool {
    LOG_TOOLS.contains(&name)
}

/// One page of `tools/list`.
pub(super) fn list_tools(params: &Value, logs: bool) -> Result<Value, String> {
    let tools: Vec<Value> = tool_specs()
        .into_iter()
        .filter(|t| logs || !is_log_tool(t["name"].as_str().unwrap_or_default()))
        .collect();
    let from = match params.get("cursor") {
        None | Some(Value::Null) => 0,
        Some(Value::String(c)) => cursor::decode(c, TOOLS_FINGERPRINT)
            .filter(|&n| n <= tools.len())
            .ok_or_else(|| "cursor: not a cursor of tools/list".to_owned())?,
        Some(_) => return Err("cursor: expected a string".to_owned()),
    };
    let end = (from + TOOLS_PAGE_SIZE).min(tools.len());
    let mut result = json!({ "tools": tools[from..end] });
    if end < tools.len() {
        result["nextCursor"] = json!(cursor::encode(end, TOOLS_FINGERPRINT));
    }
    Ok(result)
}

/// `tools/call`: faults first, then the tool.
pub(super) async fn call_tool(sh: &McpShared, params: &Value, id: &Value, logs: bool) -> Response {
    let mode = sh.mode();
    let Some(name) = params.get("name").and_then(Value::as_str) else {
        return answer(
            mode,
            &rpc_error(id, INVALID_PARAMS, "params.name is required"),
            None,
        );
    };
    let known = tool_specs()
        .iter()
        .any(|t| t["name"] == name && (logs || !is_log_tool(name)));
    if !known {
        return answer(
            mode,
            &rpc_error(id, INVALID_PARAMS, &format!("unknown tool: {name}")),
            None,
        );
    }
    if let Some(res) = sh.faults.apply(name, mode, id).await {
        return res;
    }
    let empty = Map::new();
    let args = match params.get("arguments") {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(m)) => m,
        Some(_) => {
            let r = tool_result("error: arguments must be a JSON object".to_owned(), true);
            return answer(mode, &rpc_result(id, r), None);
        }
    };
    let result = match run_tool(&sh.dataset, name, args) {
        Ok(text) => tool_result(text, false),
        Err(message) => tool_result(format!("error: {message}"), true),
    };
    answer(mode, &rpc_result(id, result), None)
}

/// The gateway's tools with their input schemas, in the order listed.
pub fn tool_specs() -> Vec<Value> {
    let time = |what: &str| json!({"type": "string", "format": "date-time", "description": what});
    let labels = json!({
        "type": "object",
        "additionalProperties": {"type": "string"},
        "maxProperties": MAX_LABELS,
        "description": "Exact label matches, e.g. {\"feature\": \"checkout\"}.",
    });
    let limit =
        json!({"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": MAX_LIMIT});
    let cursor = json!({"type": "string", "description": "next_cursor of the previous page."});
    let model = json!({"type": "string", "description": "Model id, e.g. gpt-6-luna."});
    let object = |properties: Value, required: &[&str]| {
        json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false,
        })
    };
    // The arguments of the tools that list a window page by page.
    let window_listing = object(
        json!({
            "start": time("Inclusive start, RFC 3339 UTC."),
            "end": time("Exclusive end, RFC 3339 UTC."),
            "labels": labels, "limit": limit, "cursor": cursor,
        }),
        &["start", "end"],
    );
    vec![
        json!({
            "name": "list_sessions",
            "description": "Sessions with a request in [start, end): requests, errors, tokens, cost, models, labels. At most 50 rows a call; pass next_cursor for more.",
            "inputSchema": window_listing.clone(),
        }),
        json!({
            "name": "search_requests",
            "description": "Request rows (model, status, error_type, tokens, cost, latency) of one session or of [start, end), optionally by model, status and labels. No prompt text.",
            "inputSchema": object(json!({
                "start": time("Inclusive start, RFC 3339 UTC."),
                "end": time("Exclusive end, RFC 3339 UTC."),
                "session_id": {"type": "string"},
                "model": model,
                "status": {"type": "string", "enum": ["success", "error"]},
                "labels": labels, "limit": limit, "cursor": cursor,
            }), &[]),
        }),
        json!({
            "name": "get_request",
            "description": "One request row by request_id.",
            "inputSchema": object(json!({"request_id": {"type": "string"}}), &["request_id"]),
        }),
        json!({
            "name": "list_traces",
            "description": "Trace aggregates in [start, end).",
            "inputSchema": window_listing.clone(),
        }),
        json!({
            "name": "list_models",
            "description": "The model catalogue with prices per million tokens.",
            "inputSchema": object(json!({}), &[]),
        }),
        json!({
            "name": "get_model",
            "description": "One catalogue entry.",
            "inputSchema": object(json!({"model": model}), &["model"]),
        }),
        json!({
            "name": "get_pricing",
            "description": "Prices of one model in USD per million tokens: input, cached input, cache write, output.",
            "inputSchema": object(json!({"model": model}), &["model"]),
        }),
    ]
}

/// A tool's answer text, or the message of an `isError` result.
fn run_tool(dataset: &Dataset, name: &str, args: &Map<String, Value>) -> Result<String, String> {
    let a = Args(args);
    let value = match name {
        "list_sessions" => {
            a.only(&["start", "end", "labels", "limit", "cursor"])?;
            let (start, end) = a.window()?.ok_or("start and end are required")?;
            let labels = a.labels()?;
            let limit = a.limit()?;
            let fp = a.fingerprint(name);
            let from = a.position(fp)?;
            let w = Window {
                start,
                end,
                labels: &labels,
                now: None,
            };
            let page = dataset.sessions_page(&w, from, limit);
            cursor::page_body(page.rows, page.next, fp)
        }
        "search_requests" => {
            a.only(&[
                "start",
                "end",
                "session_id",
                "model",
                "status",
                "labels",
                "limit",
                "cursor",
            ])?;
            search_requests(dataset, &a, name)?
        }
        "get_request" => {
            a.only(&["request_id"])?;
            let id = a.required_str("request_id")?;
            let found = dataset
                .sessions
                .iter()
                .flat_map(|s| s.requests.iter())
                .find(|r| r.request_id == id);
            match found {
                Some(r) => r.to_row(),
                None => return Err(format!("no request with request_id `{id}`")),
            }
        }
        "list_traces" => {
            a.only(&["start", "end", "labels", "limit", "cursor"])?;
            a.window()?.ok_or("start and end are required")?;
            a.labels()?;
            a.limit()?;
            json!({"data": [], "next_cursor": null, "note": "this gateway records no traces"})
        }
        "list_models" => {
            a.only(&[])?;
            let rows: Vec<Value> = dataset.models.iter().map(|m| m.to_row()).collect();
            json!({ "data": rows })
        }
        "get_model" | "get_pricing" => {
            a.only(&["model"])?;
            let id = a.required_str("model")?;
            let Some(m) = dataset.models.iter().find(|m| m.id == id) else {
                let known: Vec<&str> = dataset.models.iter().map(|m| m.id.as_str()).collect();
                return Err(format!(
                    "unknown model `{id}`; known models: {}",
                    known.join(", ")
                ));
            };
            if name == "get_model" {
                m.to_row()
            } else {
                json!({
                    "model": m.id,
                    "usd_per_mtok": {
                        "input": m.input_usd_per_mtok,
                        "cached_input": m.cached_input_usd_per_mtok,
                        "cache_write": m.cache_write_usd_per_mtok,
                        "output": m.output_usd_per_mtok,
                    },
                })
            }
        }
        other => return Err(format!("unknown tool `{other}`")),
    };
    Ok(value.to_string())
}

/// `search_requests`: one session's or a window's calls, filtered.
fn search_requests(dataset: &Dataset, a: &Args<'_>, name: &str) -> Result<Value, String> {
    let window = a.window()?;
    let session_id = a.optional_str("session_id")?;
    let model = a.optional_str("model")?;
    let status = a.optional_str("status")?;
    if let Some(s) = status
        && s != "success"
        && s != "error"
    {
        return Err(format!("status: expected `success` or `error`, got `{s}`"));
    }
    let labels = a.labels()?;
    let limit = a.limit()?;
    let fp = a.fingerprint(name);
    let from = a.position(fp)?;
    let calls: Vec<&SimRequest> = match (session_id, window) {
        (Some(id), window) => dataset
            .requests_of(id)
            .unwrap_or_default()
            .iter()
            .filter(|r| window.is_none_or(|(s, e)| s <= r.created_at && r.created_at < e))
            .filter(|r| labels.iter().all(|(k, v)| r.labels.get(k) == Some(v)))
            .collect(),
        (None, Some((start, end))) => dataset.requests_in(start, end, &labels, None),
        (None, None) => return Err("give session_id, or start and end".to_owned()),
    };
    let matching: Vec<&SimRequest> = calls
        .into_iter()
        .filter(|r| model.is_none_or(|m| r.model == m))
        .filter(|r| status.is_none_or(|s| r.status == s))
        .collect();
    let rows: Vec<Value> = matching
        .iter()
        .skip(from)
        .take(limit)
        .map(|r| r.to_row())
        .collect();
    let next = (from + limit < matching.len()).then_some(from + limit);
    Ok(cursor::page_body(rows, next, fp))
}

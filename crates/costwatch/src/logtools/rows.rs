//! The rows the log tools return, in the reference gateway's REST shapes
//! (gateway-api.md section 1), and their JSON Schemas (`outputSchema`).
//! Never any prompt or reply text: the records hold none.

use crate::source::{LabelledCall, RequestStatus, SessionRecord};
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value, json};

/// An RFC 3339 time in UTC with milliseconds, as the gateway writes them.
pub fn time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// A session row.
pub fn session(s: &SessionRecord) -> Value {
    let by_model: Map<String, Value> = s
        .by_model
        .iter()
        .map(|m| {
            let figures = json!({
                "requests": m.requests,
                "input_tokens": m.input_tokens,
                "cached_tokens": m.cached_tokens,
                "output_tokens": m.output_tokens,
                "cost_usd": m.cost_usd,
            });
            (m.model.clone(), figures)
        })
        .collect();
    json!({
        "session_id": s.session_id,
        "first_request_at": time(s.first_request_at),
        "last_request_at": time(s.last_request_at),
        "requests": s.requests,
        "errors": s.errors,
        "input_tokens": s.input_tokens,
        "cached_tokens": s.cached_tokens,
        "cache_write_tokens": s.cache_write_tokens,
        "output_tokens": s.output_tokens,
        "cost_usd": s.cost_usd,
        "models": s.by_model.iter().map(|m| m.model.as_str()).collect::<Vec<_>>(),
        "by_model": by_model,
        "labels": s.labels,
    })
}

/// A call's status as rows spell it.
pub fn status(s: RequestStatus) -> &'static str {
    match s {
        RequestStatus::Success => "success",
        RequestStatus::Error => "error",
    }
}

/// A request row: `labels` are the call's where the source read them, and
/// empty for calls taken from what the last window kept (the session's
/// labels are on its `list_sessions` row).
pub fn request(c: &LabelledCall) -> Value {
    let r = &c.call;
    json!({
        "request_id": r.request_id,
        "session_id": r.session_id,
        "created_at": time(r.created_at),
        "model": r.model,
        "status": status(r.status),
        "http_status": r.http_status,
        "error_type": r.error_type,
        "input_tokens": r.input_tokens,
        "cached_tokens": r.cached_tokens,
        "cache_write_tokens": r.cache_write_tokens,
        "output_tokens": r.output_tokens,
        "cost_usd": r.cost_usd,
        "labels": c.labels,
    })
}

/// An object schema with these properties, all required.
pub fn object(properties: Value) -> Value {
    let required: Vec<String> = properties
        .as_object()
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    json!({"type": "object", "properties": properties, "required": required})
}

/// `{"data": [row...], "next_cursor": string|null}`.
pub fn page_schema(row: Value) -> Value {
    object(json!({
        "data": {"type": "array", "items": row},
        "next_cursor": {"type": ["string", "null"]},
    }))
}

fn labels_schema() -> Value {
    json!({"type": "object", "additionalProperties": {"type": "string"}})
}

/// The schema of [`session`].
pub fn session_schema() -> Value {
    let int = json!({"type": "integer", "minimum": 0});
    let usd = json!({"type": "number"});
    object(json!({
        "session_id": {"type": "string"},
        "first_request_at": {"type": "string", "format": "date-time"},
        "last_request_at": {"type": "string", "format": "date-time"},
        "requests": int, "errors": int,
        "input_tokens": int, "cached_tokens": int, "cache_write_tokens": int,
        "output_tokens": int, "cost_usd": usd,
        "models": {"type": "array", "items": {"type": "string"}},
        "by_model": {"type": "object", "additionalProperties": object(json!({
            "requests": int, "input_tokens": int, "cached_tokens": int,
            "output_tokens": int, "cost_usd": usd,
        }))},
        "labels": labels_schema(),
    }))
}

/// The schema of [`request`].
pub fn request_schema() -> Value {
    let int = json!({"type": "integer", "minimum": 0});
    object(json!({
        "request_id": {"type": "string"},
        "session_id": {"type": "string"},
        "created_at": {"type": "string", "format": "date-time"},
        "model": {"type": "string"},
        "status": {"type": "string", "enum": ["success", "error"]},
        "http_status": {"type": ["integer", "null"]},
        "error_type": {"type": ["string", "null"]},
        "input_tokens": int, "cached_tokens": int, "cache_write_tokens": int,
        "output_tokens": int,
        "cost_usd": {"type": "number"},
        "labels": labels_schema(),
    }))
}

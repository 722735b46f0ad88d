//! The endpoint: `POST /v1/chat/completions` in the OpenAI chat-completions
//! format (gateway-api.md section 3: `tools`, `tool_choice`, `max_tokens`
//! in; `choices[0].message` with `tool_calls` and `usage` out; errors as
//! `{"error": {"message", "type", "code"}}`), the record of each request,
//! and the faults served instead of an answer.
//!
//! Queued faults use the shared `crate::faults` queue; each is served to
//! the next request, whatever it asks.

use super::script::{decide, offered};
use super::usage::{cached_tokens, fit, prompt_text, tokens};
use super::{HANG_FOR, Shared, lock};
use crate::faults;
use crate::http::bearer;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// A failure served instead of the next answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelFault {
    /// This HTTP status with an OpenAI-style error body (`Retry-After: 1` on 429).
    Status(u16),
    /// No answer until released (shutdown) or [`HANG_FOR`].
    Hang,
    /// A 200 whose body is not JSON.
    Garbage,
    /// A normal answer without `usage`.
    NoUsage,
    /// A normal answer whose usage claims this many times the prompt tokens.
    OverReport(u64),
}

/// One request as it arrived.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// The `Authorization` header, verbatim.
    pub authorization: Option<String>,
    /// The `X-Client-Request-Id` header.
    pub client_request_id: Option<String>,
    /// The raw body.
    pub body: String,
    /// The body parsed (`null` if it was not JSON).
    pub json: Value,
    /// The prompt tokens counted for it.
    pub prompt_tokens: u64,
}

impl RecordedRequest {
    /// `tool_choice`, if sent.
    pub fn tool_choice(&self) -> Option<&str> {
        self.json.get("tool_choice").and_then(Value::as_str)
    }

    /// Names of the tools offered, in order.
    pub fn tools(&self) -> Vec<String> {
        offered(&self.json)
    }

    /// `max_tokens`, if sent.
    pub fn max_tokens(&self) -> Option<u64> {
        self.json.get("max_tokens").and_then(Value::as_u64)
    }

    /// Number of messages.
    pub fn messages(&self) -> usize {
        self.json
            .get("messages")
            .and_then(Value::as_array)
            .map_or(0, Vec::len)
    }
}

/// An OpenAI-style error (`Retry-After: 1` on a 429).
fn error(status: StatusCode, kind: &str, message: &str) -> Response {
    let body = json!({"error": {"message": message, "type": kind, "code": null}});
    let res = (status, axum::Json(body)).into_response();
    if status == StatusCode::TOO_MANY_REQUESTS {
        faults::retry_after(res, 1)
    } else {
        res
    }
}

/// `POST /chat/completions`.
pub(super) async fn completions(
    State(sh): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let authorization = header("authorization");
    let text = String::from_utf8_lossy(&body).into_owned();
    let parsed: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let prompt = prompt_text(&parsed);
    let counter = lock(&sh.counter).clone();
    let prompt_tokens = match counter {
        Some(count) => count(&parsed),
        None => tokens(prompt.len()),
    };
    lock(&sh.requests).push(RecordedRequest {
        authorization,
        client_request_id: header("x-client-request-id"),
        body: text,
        json: parsed.clone(),
        prompt_tokens,
    });
    if bearer(&headers) != Some(sh.key.as_str()) {
        return error(
            StatusCode::UNAUTHORIZED,
            "invalid_request_error",
            "invalid inference key",
        );
    }
    let Some(messages) = parsed.get("messages").and_then(Value::as_array) else {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "messages is required",
        );
    };
    let fault = sh.faults.take(|_| true);
    let mut over_report = 1;
    match fault {
        Some(ModelFault::Status(code)) => {
            return error(faults::status(code), "server_error", "simulated failure");
        }
        Some(ModelFault::Hang) => {
            sh.faults.hang(HANG_FOR).await;
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                "server_error",
                "the hung call was released",
            );
        }
        Some(ModelFault::Garbage) => {
            return (StatusCode::OK, "<html>upstream error</html>").into_response();
        }
        Some(ModelFault::OverReport(k)) => over_report = k.max(1),
        Some(ModelFault::NoUsage) | None => {}
    }
    let script = lock(&sh.script).clone();
    let turn = decide(&script, &parsed, messages);
    let max_tokens = parsed
        .get("max_tokens")
        .and_then(Value::as_u64)
        .unwrap_or(u64::MAX);
    let (turn, completion_tokens, finish) = fit(turn, max_tokens);
    let cached = {
        let mut prompts = lock(&sh.prompts);
        let c = cached_tokens(&prompt, &prompts).min(prompt_tokens);
        prompts.push(prompt);
        c
    };
    let n = sh.next_id.fetch_add(1, Ordering::Relaxed);
    let tool_calls: Vec<Value> = turn
        .calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            json!({"id": format!("call_{n}_{i}"), "type": "function",
                   "function": {"name": c.name, "arguments": c.arguments}})
        })
        .collect();
    let mut message = json!({"role": "assistant", "content": turn.text});
    if !tool_calls.is_empty() {
        message["tool_calls"] = Value::Array(tool_calls);
    }
    let mut answer = json!({
        "id": format!("chatcmpl-sim-{n}"),
        "object": "chat.completion",
        "model": parsed.get("model").cloned().unwrap_or(Value::Null),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": prompt_tokens * over_report,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens * over_report + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": cached},
        },
    });
    if fault == Some(ModelFault::NoUsage)
        && let Some(o) = answer.as_object_mut()
    {
        o.remove("usage");
    }
    (StatusCode::OK, axum::Json(answer)).into_response()
}

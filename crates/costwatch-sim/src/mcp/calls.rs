//! The record of what arrived at the MCP endpoint, for tests to inspect:
//! every HTTP request with its JSON-RPC method, the tool it called and its
//! headers (gateway-api.md section 2 fixes the headers a client must send),
//! the admin key never kept.

use super::McpShared;
use axum::http::{HeaderMap, header};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::PoisonError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpCall {
    /// `POST`, `GET` or `DELETE`.
    pub http_method: String,
    /// The JSON-RPC method (`initialize`, `tools/call`, ...); empty when the
    /// body was not a JSON-RPC message.
    pub method: String,
    /// The tool named by a `tools/call`.
    pub tool: Option<String>,
    /// Every header, names in lower case. The value of `authorization` is
    /// replaced by `Bearer [admin key]` when it was the right key and by
    /// `[wrong key]` otherwise.
    pub headers: BTreeMap<String, String>,
}

impl McpCall {
    /// The value of a header (`name` in lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
}

impl McpShared {
    /// Records one request; the admin key is replaced by a placeholder.
    pub(super) fn record(&self, http_method: &str, body: Option<&Value>, headers: &HeaderMap) {
        let authorized = self.authorized(headers);
        let headers = headers
            .iter()
            .map(|(name, value)| {
                let value = if name == header::AUTHORIZATION {
                    if authorized {
                        "Bearer [admin key]".to_owned()
                    } else {
                        "[wrong key]".to_owned()
                    }
                } else {
                    String::from_utf8_lossy(value.as_bytes()).into_owned()
                };
                (name.as_str().to_owned(), value)
            })
            .collect();
        let method = body
            .and_then(|b| b.get("method"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let tool = (method == "tools/call")
            .then(|| body.and_then(|b| b.pointer("/params/name")))
            .flatten()
            .and_then(Value::as_str)
            .map(str::to_owned);
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(McpCall {
                http_method: http_method.to_owned(),
                method,
                tool,
                headers,
            });
    }
}

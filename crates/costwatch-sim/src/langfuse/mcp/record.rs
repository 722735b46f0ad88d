//! The record of what arrived at the MCP endpoint, for tests: each HTTP
//! request with its JSON-RPC method, the tool and arguments of a call, the
//! kind of key it carried (never a secret) and the status it got.

use crate::langfuse::LangfuseSim;
use axum::http::{HeaderMap, Method, StatusCode, header};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;
use std::sync::PoisonError;

/// The `Authorization` a request carried, as Langfuse reads it
/// (`apiAuth.ts`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpAuth {
    /// No `Authorization` header.
    Missing,
    /// HTTP Basic: the user sent (a public key) and whether the password
    /// was the project's secret key. Langfuse finds the key by its secret:
    /// a right secret passes whatever the user.
    Basic {
        /// The user part (`atob(token).split(":")[0]`).
        user: String,
        /// Whether the password part was the project's secret key.
        secret_ok: bool,
    },
    /// A bearer token (never kept): whether it was the project's public key.
    Bearer {
        /// Whether the token was the public key.
        public_key: bool,
    },
    /// Another scheme, a value that is not text, or Basic that does not
    /// decode to `user:password`.
    Malformed,
}

impl McpAuth {
    /// What `headers` carry, checked against the project's keys.
    pub(super) fn of(headers: &HeaderMap, sim: &LangfuseSim) -> McpAuth {
        let Some(value) = headers.get(header::AUTHORIZATION) else {
            return McpAuth::Missing;
        };
        let Ok(value) = value.to_str() else {
            return McpAuth::Malformed;
        };
        if let Some(rest) = value.strip_prefix("Basic ") {
            // `authHeader.split(" ")[1]`, then `atob(...).split(":")`.
            let token = rest.split(' ').next().unwrap_or_default();
            let trimmed = token.trim_end_matches('=');
            let padded = format!("{trimmed}{}", "=".repeat((4 - trimmed.len() % 4) % 4));
            let Some(text) = STANDARD
                .decode(padded)
                .ok()
                .map(|b| b.iter().map(|&c| char::from(c)).collect::<String>())
            else {
                return McpAuth::Malformed;
            };
            let mut parts = text.split(':');
            let (user, password) = (parts.next().unwrap_or_default(), parts.next());
            return match password {
                Some(p) if !user.is_empty() && !p.is_empty() => McpAuth::Basic {
                    user: user.to_owned(),
                    secret_ok: p == sim.secret_key,
                },
                _ => McpAuth::Malformed,
            };
        }
        if let Some(token) = value.strip_prefix("Bearer ") {
            return McpAuth::Bearer {
                public_key: token == sim.public_key,
            };
        }
        McpAuth::Malformed
    }

    /// Whether these are the project's keys as Langfuse's MCP wants them:
    /// Basic, the public key as user and the secret key as password.
    pub fn is_project_key_pair(&self, public_key: &str) -> bool {
        matches!(self, McpAuth::Basic { user, secret_ok: true } if user == public_key)
    }
}

/// One HTTP request to the MCP endpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct LangfuseMcpCall {
    /// `POST`, `GET`, `DELETE` or `OPTIONS`.
    pub http_method: String,
    /// The JSON-RPC method of the body (the first message's of a batch);
    /// empty when there is none.
    pub method: String,
    /// The tool a `tools/call` named.
    pub tool: Option<String>,
    /// The arguments of a `tools/call`.
    pub arguments: Option<Value>,
    /// The key it carried.
    pub auth: McpAuth,
    /// Its `MCP-Protocol-Version` header.
    pub protocol_version: Option<String>,
    /// Its `Mcp-Session-Id` header (a stateless server never hands one out).
    pub session_id: Option<String>,
    /// The status it was answered with.
    pub status: u16,
}

impl LangfuseSim {
    /// Keeps one request.
    pub(super) fn record(
        &self,
        http_method: &Method,
        body: Option<&Value>,
        headers: &HeaderMap,
        auth: McpAuth,
        status: StatusCode,
    ) {
        let first = match body {
            Some(Value::Array(items)) => items.first(),
            other => other,
        };
        let method = first
            .and_then(|b| b.get("method"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let call = |pointer: &str| {
            (method == "tools/call")
                .then(|| first.and_then(|b| b.pointer(pointer)))
                .flatten()
        };
        let header = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let entry = LangfuseMcpCall {
            http_method: http_method.as_str().to_owned(),
            tool: call("/params/name")
                .and_then(Value::as_str)
                .map(str::to_owned),
            arguments: call("/params/arguments").cloned(),
            method,
            auth,
            protocol_version: header("mcp-protocol-version"),
            session_id: header("mcp-session-id"),
            status: status.as_u16(),
        };
        self.mcp
            .calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(entry);
    }
}

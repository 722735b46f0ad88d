//! The LiteLLM proxy's error answers.
//!
//! A `ProxyException` is answered as `{"error": {"message", "type",
//! "param", "code"}}` with `code` the status as text
//! (`proxy_server.py: openai_exception_handler`, `_types.py:
//! ProxyException.to_dict`); a failed FastAPI validation as a 422 with
//! `{"detail": [{"type", "loc", "msg"}]}`
//! (`otel_request_validation_exception_handler`, `public_validation_errors`).

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// An error answer of the proxy.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum LiteLlmError {
    /// A `ProxyException`.
    Proxy {
        /// The HTTP status.
        status: u16,
        /// `error.message`.
        message: String,
        /// `error.type`.
        kind: &'static str,
        /// `error.param`.
        param: Option<&'static str>,
        /// Seconds in `retry-after`, on a 429.
        retry_after: Option<u64>,
    },
    /// A failed FastAPI validation: the `detail` entries.
    Validation(Vec<Value>),
}

impl LiteLlmError {
    /// A 400 raised by the handler (`type` from the status:
    /// `invalid_request_error`).
    pub(super) fn bad_request(message: impl Into<String>, param: Option<&'static str>) -> Self {
        LiteLlmError::Proxy {
            status: 400,
            message: message.into(),
            kind: "invalid_request_error",
            param,
            retry_after: None,
        }
    }

    /// The 401 of `user_api_key_auth` for the key sent (`None`: no
    /// `Authorization` header).
    pub(super) fn unauthorized(sent: Option<&str>) -> Self {
        let (message, kind, param) = match sent {
            None => (
                "Authentication Error, No api key passed in.",
                "auth_error",
                None,
            ),
            Some("") => (
                "Authentication Error, Malformed API Key passed in. Ensure Key has `Bearer ` prefix.",
                "auth_error",
                None,
            ),
            // `KeyNotFoundError`: the message never quotes the key.
            Some(_) => (
                "Authentication Error, Invalid API key provided.",
                "token_not_found_in_db",
                Some("key"),
            ),
        };
        LiteLlmError::Proxy {
            status: 401,
            message: message.to_owned(),
            kind,
            param,
            retry_after: None,
        }
    }

    /// A 429 of the proxy's parallel-request limiter, with `retry-after`.
    pub(super) fn rate_limited(retry_after_secs: u64) -> Self {
        LiteLlmError::Proxy {
            status: 429,
            message: "Max parallel request limit reached. Hit limit for api_key: \
                      88dc28d0f030c55e. tpm_limit: 100, current_tpm: 101"
                .to_owned(),
            kind: "rate_limit_error",
            param: None,
            retry_after: Some(retry_after_secs),
        }
    }

    /// An error status (5xx expected) the way the proxy's catch-all
    /// answers it.
    pub(super) fn server_error(status: u16) -> Self {
        let message = match status {
            503 => "{'error': 'Spend logs took longer than 30s. Pick a shorter date range'}",
            _ => "Internal Server Error, simulated failure",
        };
        LiteLlmError::Proxy {
            status,
            message: message.to_owned(),
            kind: "internal_server_error",
            param: None,
            retry_after: None,
        }
    }

    /// The HTTP status.
    pub(super) fn status(&self) -> u16 {
        match self {
            LiteLlmError::Proxy { status, .. } => *status,
            LiteLlmError::Validation(_) => 422,
        }
    }

    /// The JSON body.
    pub(super) fn body(&self) -> Value {
        match self {
            LiteLlmError::Proxy {
                status,
                message,
                kind,
                param,
                ..
            } => json!({"error": {"message": message, "type": kind, "param": param,
                                  "code": status.to_string()}}),
            LiteLlmError::Validation(detail) => json!({ "detail": detail }),
        }
    }
}

impl IntoResponse for LiteLlmError {
    fn into_response(self) -> Response {
        let status =
            StatusCode::from_u16(self.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut res = (status, Json(self.body())).into_response();
        if let LiteLlmError::Proxy {
            retry_after: Some(secs),
            ..
        } = self
        {
            res.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        res
    }
}

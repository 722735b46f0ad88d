//! Error answers as the OTLP/HTTP specification wants them: the body of
//! every 4xx and 5xx is a `google.rpc.Status` in the request's encoding,
//! and the status code tells the exporter whether to retry (429, 502, 503
//! and 504 are retried, honouring `Retry-After`; everything else is not).
//! <https://opentelemetry.io/docs/specs/otlp/#failures-1>

use crate::source::otlp::Encoding;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// `google.rpc.Status` (google/rpc/status.proto) without its `details`,
/// which costwatch never sends.
#[derive(Clone, PartialEq, prost::Message)]
struct RpcStatus {
    /// A `google.rpc.Code`.
    #[prost(int32, tag = "1")]
    code: i32,
    /// What went wrong, for the exporter's log.
    #[prost(string, tag = "2")]
    message: String,
}

/// `google.rpc.Code` values used here.
const INVALID_ARGUMENT: i32 = 3;
const RESOURCE_EXHAUSTED: i32 = 8;
const UNAVAILABLE: i32 = 14;
const UNAUTHENTICATED: i32 = 16;

/// Why a request was refused, as its answer.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Refusal {
    /// 400: the body cannot be decoded; sending it again will not help.
    BadData(String),
    /// 401: no or the wrong bearer token.
    Unauthenticated,
    /// 413: the body is over `source.max_request_bytes`.
    TooLarge(usize),
    /// 415: neither protobuf nor JSON.
    UnsupportedMediaType(String),
    /// 429 with `Retry-After`: over `source.max_requests_per_second`.
    Throttled,
    /// 503 with `Retry-After`: the spans could not be stored now (database
    /// down, disk full, too many requests in flight); the exporter keeps
    /// them and sends them again.
    Unavailable(String),
}

/// Seconds an exporter is asked to wait before sending again.
const RETRY_AFTER_SECS: u32 = 1;
const UNAVAILABLE_RETRY_AFTER_SECS: u32 = 5;

impl Refusal {
    /// The HTTP status.
    pub(super) fn status(&self) -> StatusCode {
        match self {
            Refusal::BadData(_) => StatusCode::BAD_REQUEST,
            Refusal::Unauthenticated => StatusCode::UNAUTHORIZED,
            Refusal::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Refusal::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Refusal::Throttled => StatusCode::TOO_MANY_REQUESTS,
            Refusal::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The label it is counted under in `/metrics`.
    pub(super) fn outcome(&self) -> &'static str {
        match self {
            Refusal::BadData(_) => "bad_data",
            Refusal::Unauthenticated => "unauthenticated",
            Refusal::TooLarge(_) => "too_large",
            Refusal::UnsupportedMediaType(_) => "unsupported_media_type",
            Refusal::Throttled => "throttled",
            Refusal::Unavailable(_) => "unavailable",
        }
    }

    fn code(&self) -> i32 {
        match self {
            Refusal::BadData(_) | Refusal::TooLarge(_) | Refusal::UnsupportedMediaType(_) => {
                INVALID_ARGUMENT
            }
            Refusal::Unauthenticated => UNAUTHENTICATED,
            Refusal::Throttled => RESOURCE_EXHAUSTED,
            Refusal::Unavailable(_) => UNAVAILABLE,
        }
    }

    fn message(&self) -> String {
        match self {
            Refusal::BadData(m) => format!("cannot decode the export: {m}"),
            Refusal::Unauthenticated => "missing or wrong bearer token".to_owned(),
            Refusal::TooLarge(limit) => {
                format!("body over {limit} bytes (source.max_request_bytes)")
            }
            Refusal::UnsupportedMediaType(t) => format!(
                "content type `{t}` is not OTLP/HTTP: send application/x-protobuf or application/json"
            ),
            Refusal::Throttled => "too many requests; retry later".to_owned(),
            Refusal::Unavailable(m) => format!("{m}; retry later"),
        }
    }

    fn retry_after(&self) -> Option<u32> {
        match self {
            Refusal::Throttled => Some(RETRY_AFTER_SECS),
            Refusal::Unavailable(_) => Some(UNAVAILABLE_RETRY_AFTER_SECS),
            _ => None,
        }
    }

    /// The answer, its body in `encoding` (protobuf when the request's
    /// could not be told).
    pub(super) fn into_response(self, encoding: Encoding) -> Response {
        let status = RpcStatus {
            code: self.code(),
            message: self.message(),
        };
        let body = match encoding {
            Encoding::Protobuf => prost::Message::encode_to_vec(&status),
            Encoding::Json => serde_json::json!({"code": status.code, "message": status.message})
                .to_string()
                .into_bytes(),
        };
        let mut response = (self.status(), body).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(encoding.content_type()),
        );
        if let Some(secs) = self.retry_after() {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

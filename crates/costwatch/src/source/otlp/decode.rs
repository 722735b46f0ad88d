//! OTLP trace export bodies in and responses out: protobuf or OTLP/JSON,
//! plain or gzipped, the decoded size bounded.
//!
//! OTLP/JSON is read by `opentelemetry-proto`'s serde derives: ids as hex
//! (either case), 64-bit integers as decimal strings or as numbers,
//! lowerCamelCase keys, unknown fields ignored (the OTLP specification,
//! "JSON Protobuf Encoding"); `json_lenient.rs` fills in what they require
//! and the specification lets a sender leave out. They write
//! `rejectedSpans` as a JSON number where the specification asks for a
//! string, so the JSON response is written here.

use super::{attrs, json_lenient};
use flate2::read::MultiGzDecoder;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTracePartialSuccess, ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use prost::Message;
use std::borrow::Cow;
use std::io::Read;

/// How an OTLP/HTTP body is encoded (its `Content-Type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// Binary protobuf: `application/x-protobuf`.
    Protobuf,
    /// OTLP/JSON: `application/json`.
    Json,
}

impl Encoding {
    /// The encoding a `Content-Type` names: `application/x-protobuf` or
    /// `application/protobuf`, or `application/json`; parameters
    /// (`; charset=utf-8`) are ignored, case too. `None` for anything else.
    pub fn from_content_type(content_type: &str) -> Option<Encoding> {
        let mime = content_type
            .split_once(';')
            .map_or(content_type, |(mime, _)| mime)
            .trim();
        if mime.eq_ignore_ascii_case("application/x-protobuf")
            || mime.eq_ignore_ascii_case("application/protobuf")
        {
            Some(Encoding::Protobuf)
        } else if mime.eq_ignore_ascii_case("application/json") {
            Some(Encoding::Json)
        } else {
            None
        }
    }

    /// The `Content-Type` a body in this encoding is sent with.
    pub fn content_type(self) -> &'static str {
        match self {
            Encoding::Protobuf => "application/x-protobuf",
            Encoding::Json => "application/json",
        }
    }
}

/// Why a body could not be read as a trace export.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// The body, once decompressed, is larger than the limit.
    #[error("body is larger than {limit} bytes once decompressed")]
    TooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// The body is not valid gzip.
    #[error("body is not valid gzip: {0}")]
    Gzip(String),
    /// A `Content-Encoding` other than gzip or identity.
    #[error("content encoding `{0}` is not supported: use gzip or identity")]
    UnknownContentEncoding(String),
    /// Not a protobuf `ExportTraceServiceRequest`.
    #[error("not an OTLP protobuf trace export: {0}")]
    Protobuf(String),
    /// Not an OTLP/JSON trace export.
    #[error("not OTLP/JSON traces: {0}")]
    Json(String),
}

/// Decodes a body; `content_encoding` None/"identity"/"gzip"; the decoded
/// size is bounded by `max_decoded_bytes` (a gzip bomb fails with TooLarge
/// without allocating more than the limit).
pub fn decode_request(
    body: &[u8],
    encoding: Encoding,
    content_encoding: Option<&str>,
    max_decoded_bytes: usize,
) -> Result<ExportTraceServiceRequest, DecodeError> {
    let coding = content_encoding.map(str::trim).unwrap_or_default();
    let bytes: Cow<'_, [u8]> = if coding.is_empty() || coding.eq_ignore_ascii_case("identity") {
        if body.len() > max_decoded_bytes {
            return Err(DecodeError::TooLarge {
                limit: max_decoded_bytes,
            });
        }
        Cow::Borrowed(body)
    } else if coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip") {
        Cow::Owned(gunzip(body, max_decoded_bytes)?)
    } else {
        return Err(DecodeError::UnknownContentEncoding(attrs::shorten(coding)));
    };
    match encoding {
        Encoding::Protobuf => ExportTraceServiceRequest::decode(bytes.as_ref())
            .map_err(|e| DecodeError::Protobuf(e.to_string())),
        Encoding::Json => json_lenient::parse(&bytes),
    }
}

/// One OTLP/JSON line (a `TracesData`, same shape as the request).
pub fn decode_json_line(line: &str) -> Result<ExportTraceServiceRequest, DecodeError> {
    json_lenient::parse(line.as_bytes())
}

/// The response body, in the request's encoding (success: an empty
/// message; partial success: `partialSuccess {rejectedSpans,
/// errorMessage}`).
pub fn encode_response(rejected: u64, message: &str, encoding: Encoding) -> Vec<u8> {
    let partial = rejected > 0 || !message.is_empty();
    match encoding {
        Encoding::Protobuf => ExportTraceServiceResponse {
            partial_success: partial.then(|| ExportTracePartialSuccess {
                rejected_spans: i64::try_from(rejected).unwrap_or(i64::MAX),
                error_message: message.to_owned(),
            }),
        }
        .encode_to_vec(),
        Encoding::Json if partial => {
            let mut body = serde_json::Map::new();
            if rejected > 0 {
                // int64 is a decimal string in OTLP/JSON.
                body.insert("rejectedSpans".into(), rejected.to_string().into());
            }
            if !message.is_empty() {
                body.insert("errorMessage".into(), message.into());
            }
            serde_json::json!({ "partialSuccess": body })
                .to_string()
                .into_bytes()
        }
        Encoding::Json => b"{}".to_vec(),
    }
}

/// The gunzipped body, failing as soon as it grows past `limit`; the
/// buffer never holds more than `limit` bytes.
fn gunzip(body: &[u8], limit: usize) -> Result<Vec<u8>, DecodeError> {
    let mut decoder = MultiGzDecoder::new(body);
    let mut out: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let n = match decoder.read(&mut chunk) {
            Ok(0) => return Ok(out),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(DecodeError::Gzip(e.to_string())),
        };
        let len = out.len() + n;
        if len > limit {
            return Err(DecodeError::TooLarge { limit });
        }
        if len > out.capacity() {
            // Grow by doubling, but never past the limit.
            let want = out.capacity().saturating_mul(2).clamp(len, limit);
            out.reserve_exact(want - out.len());
        }
        out.extend_from_slice(chunk.get(..n).unwrap_or_default());
    }
}

//! Export requests sent to an OTLP/HTTP receiver as an exporter sends them:
//! `POST` of the binary protobuf (`Content-Type: application/x-protobuf`),
//! retried on 429, 502, 503 and 504 (and when the receiver cannot be
//! reached) after the `Retry-After` the answer names, else after an
//! exponential backoff; a 200 answers an `ExportTraceServiceResponse` whose
//! `partial_success` counts the spans it rejected; any other status is a
//! refusal, its body a `google.rpc.Status`.

use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use prost::Message;
use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, HeaderMap, RETRY_AFTER};
use std::time::Duration;

/// The content type of a binary OTLP/HTTP request and of its answer.
pub const PROTOBUF: &str = "application/x-protobuf";

/// How many times and how patiently a request is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostOptions {
    /// Attempts per request, the first included (at least one).
    pub max_attempts: u32,
    /// The wait before the first retry without `Retry-After`; doubled on
    /// each retry after it.
    pub backoff: Duration,
    /// The longest backoff.
    pub max_backoff: Duration,
    /// The longest `Retry-After` honoured: a receiver asking for a longer
    /// wait makes the request fail instead.
    pub max_retry_after: Duration,
    /// How long one attempt may take.
    pub timeout: Duration,
}

impl Default for PostOptions {
    /// Five attempts, backoff from 1 s to 30 s, `Retry-After` up to 60 s,
    /// 10 s per attempt.
    fn default() -> Self {
        PostOptions {
            max_attempts: 5,
            backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(60),
            timeout: Duration::from_secs(10),
        }
    }
}

/// What the receiver made of the requests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PostStats {
    /// Requests the receiver answered with a 200.
    pub requests: usize,
    /// Spans it took: those sent less those it rejected.
    pub accepted_spans: u64,
    /// Spans it rejected (`partial_success.rejected_spans`).
    pub rejected_spans: u64,
    /// Attempts beyond the first, over all requests.
    pub retries: u32,
    /// Each wait before a retry, in order.
    pub waits: Vec<Duration>,
    /// The non-empty `partial_success.error_message`s, in order.
    pub messages: Vec<String>,
}

/// Why sending stopped; `index` is the request that failed (the ones
/// before it were answered).
#[derive(Debug, thiserror::Error)]
pub enum PostError {
    /// The HTTP client could not be built.
    #[error("otlp client: {0}")]
    Client(#[source] reqwest::Error),
    /// The receiver refused the request (a status that is not retried).
    #[error("{endpoint}: request {index} refused with {status}: {message}")]
    Rejected {
        /// The endpoint, without its query.
        endpoint: String,
        /// The request that failed.
        index: usize,
        /// The HTTP status.
        status: u16,
        /// The `google.rpc.Status` message, or the start of the body.
        message: String,
    },
    /// Still throttled or unavailable after every attempt, or asked to
    /// wait longer than [`PostOptions::max_retry_after`].
    #[error("{endpoint}: request {index} still answered {status} after {attempts} attempts")]
    Throttled {
        /// The endpoint, without its query.
        endpoint: String,
        /// The request that failed.
        index: usize,
        /// The last HTTP status.
        status: u16,
        /// Attempts made.
        attempts: u32,
    },
    /// The receiver could not be reached (or did not answer in time) on
    /// any attempt.
    #[error("{endpoint}: request {index} not delivered after {attempts} attempts: {source}")]
    Transport {
        /// The endpoint, without its query.
        endpoint: String,
        /// The request that failed.
        index: usize,
        /// Attempts made.
        attempts: u32,
        /// The last failure.
        #[source]
        source: reqwest::Error,
    },
    /// A 200 whose body is not an `ExportTraceServiceResponse`.
    #[error("{endpoint}: request {index}: the answer is not an export response: {source}")]
    Decode {
        /// The endpoint, without its query.
        endpoint: String,
        /// The request that failed.
        index: usize,
        /// What the decoder said.
        #[source]
        source: prost::DecodeError,
    },
}

/// `google.rpc.Status`, the body of a refusal: only the fields read here.
#[derive(Clone, PartialEq, Message)]
struct RpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
}

/// Sends each request to `endpoint` (e.g.
/// `http://127.0.0.1:4318/v1/traces`) with `Authorization: Bearer <token>`
/// if a token is given, with the default [`PostOptions`].
pub async fn post_protobuf(
    endpoint: &str,
    token: Option<&str>,
    requests: &[ExportTraceServiceRequest],
) -> Result<PostStats, PostError> {
    post_protobuf_with(endpoint, token, requests, &PostOptions::default()).await
}

/// [`post_protobuf`] with the given retries and waits.
pub async fn post_protobuf_with(
    endpoint: &str,
    token: Option<&str>,
    requests: &[ExportTraceServiceRequest],
    options: &PostOptions,
) -> Result<PostStats, PostError> {
    let client = reqwest::Client::builder()
        .timeout(options.timeout)
        .build()
        .map_err(PostError::Client)?;
    let shown = endpoint.split('?').next().unwrap_or_default().to_owned();
    let mut stats = PostStats::default();
    for (index, request) in requests.iter().enumerate() {
        let body = request.encode_to_vec();
        let spans = span_count(request);
        let response = send(&client, endpoint, token, body, options, &mut stats)
            .await
            .map_err(|failure| failure.into_error(&shown, index))?;
        let answer = ExportTraceServiceResponse::decode(response.as_slice()).map_err(|source| {
            PostError::Decode {
                endpoint: shown.clone(),
                index,
                source,
            }
        })?;
        let (rejected, message) = answer.partial_success.map_or((0, String::new()), |p| {
            (
                u64::try_from(p.rejected_spans).unwrap_or(0),
                p.error_message,
            )
        });
        let rejected = rejected.min(spans);
        stats.requests += 1;
        stats.rejected_spans += rejected;
        stats.accepted_spans += spans - rejected;
        if !message.is_empty() {
            stats.messages.push(message);
        }
    }
    Ok(stats)
}

/// How one request's attempts ended, before it is named.
enum Failure {
    Rejected {
        status: u16,
        message: String,
    },
    Throttled {
        status: u16,
        attempts: u32,
    },
    Transport {
        attempts: u32,
        source: reqwest::Error,
    },
}

impl Failure {
    fn into_error(self, endpoint: &str, index: usize) -> PostError {
        let endpoint = endpoint.to_owned();
        match self {
            Failure::Rejected { status, message } => PostError::Rejected {
                endpoint,
                index,
                status,
                message,
            },
            Failure::Throttled { status, attempts } => PostError::Throttled {
                endpoint,
                index,
                status,
                attempts,
            },
            Failure::Transport { attempts, source } => PostError::Transport {
                endpoint,
                index,
                attempts,
                source,
            },
        }
    }
}

/// Sends one body until a 200 (its body returned), a refusal, or the
/// attempts or the patience run out.
async fn send(
    client: &reqwest::Client,
    endpoint: &str,
    token: Option<&str>,
    body: Vec<u8>,
    options: &PostOptions,
    stats: &mut PostStats,
) -> Result<Vec<u8>, Failure> {
    let max_attempts = options.max_attempts.max(1);
    let mut backoff = options.backoff;
    let mut attempt = 1;
    loop {
        let mut req = client
            .post(endpoint)
            .header(CONTENT_TYPE, PROTOBUF)
            .body(body.clone());
        if let Some(token) = token {
            req = req.bearer_auth(token);
        }
        let retry_after = match req.send().await {
            Ok(res) if res.status() == StatusCode::OK => {
                return res.bytes().await.map(|b| b.to_vec()).map_err(|source| {
                    Failure::Transport {
                        attempts: attempt,
                        source,
                    }
                });
            }
            Ok(res) if is_retryable(res.status()) => {
                let status = res.status().as_u16();
                let asked = retry_after(res.headers());
                if attempt >= max_attempts || asked.is_some_and(|d| d > options.max_retry_after) {
                    return Err(Failure::Throttled {
                        status,
                        attempts: attempt,
                    });
                }
                asked
            }
            Ok(res) => {
                let status = res.status().as_u16();
                let body = res.bytes().await.unwrap_or_default();
                return Err(Failure::Rejected {
                    status,
                    message: refusal_message(&body),
                });
            }
            Err(source) if attempt >= max_attempts => {
                return Err(Failure::Transport {
                    attempts: attempt,
                    source,
                });
            }
            Err(_) => None,
        };
        let wait = retry_after.unwrap_or(backoff);
        if retry_after.is_none() {
            backoff = (backoff * 2).min(options.max_backoff);
        }
        stats.waits.push(wait);
        stats.retries += 1;
        tokio::time::sleep(wait).await;
        attempt += 1;
    }
}

/// The statuses OTLP/HTTP retries.
fn is_retryable(status: StatusCode) -> bool {
    matches!(status.as_u16(), 429 | 502 | 503 | 504)
}

/// `Retry-After` as delay-seconds; an HTTP date (which needs the wall
/// clock) or anything else counts as absent.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    headers
        .get(RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()
        .map(Duration::from_secs)
}

/// The message of a refusal's `google.rpc.Status`, or the start of its
/// body as text.
fn refusal_message(body: &[u8]) -> String {
    match RpcStatus::decode(body) {
        Ok(status) if !status.message.is_empty() => status.message,
        _ => String::from_utf8_lossy(body).chars().take(200).collect(),
    }
}

fn span_count(request: &ExportTraceServiceRequest) -> u64 {
    request
        .resource_spans
        .iter()
        .flat_map(|rs| &rs.scope_spans)
        .map(|ss| ss.spans.len() as u64)
        .sum()
}

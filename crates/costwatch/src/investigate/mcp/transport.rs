//! One message: POSTed with retries under the client's policy, its answer
//! read as JSON or as an event stream under the size cap.

use super::McpClient;
use super::protocol::{RpcError, is_response_to, pick_json_response, protocol, rejected};
use super::sse::{self, SseParser};
use crate::http::{
    Attempt, CappedBody, ERROR_BODY_LIMIT, HttpError, Target, chain, error_text, retry_after,
    snippet,
};
use crate::investigate::InvestigateError;
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap};
use serde_json::Value;
use std::fmt;
use std::sync::atomic::Ordering;

const ACCEPT_BOTH: &str = "application/json, text/event-stream";

/// What a POST brought back.
#[derive(Debug)]
pub(super) enum Reply {
    /// The JSON-RPC response with the expected id, and the session id header.
    Message {
        message: Value,
        session_id: Option<String>,
    },
    /// 202 (or another 2xx without a body) for a notification.
    Accepted,
}

/// How a message failed after its retries.
#[derive(Debug)]
pub(super) enum Failure {
    /// Final: transient failures after the retries, a refused admin key,
    /// an oversized or malformed answer.
    Error(InvestigateError),
    /// The server refused the message: what it said may call for another
    /// era or another session.
    Refused(Refusal),
}

impl Failure {
    /// The error to report.
    pub(super) fn into_error(self) -> InvestigateError {
        match self {
            Failure::Error(e) => e,
            Failure::Refused(r) => r.error,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Error(e) => e.fmt(f),
            Failure::Refused(r) => r.error.fmt(f),
        }
    }
}

/// A request the server refused: a 4xx other than 401, 403 and 429, or a
/// JSON-RPC error in a successful answer.
#[derive(Debug)]
pub(super) struct Refusal {
    /// The HTTP status; 200 for a JSON-RPC error in a successful answer.
    pub(super) status: u16,
    /// The JSON-RPC error the answer holds, if it holds one.
    pub(super) rpc: Option<RpcError>,
    /// What the caller reports when it does not act on the refusal.
    pub(super) error: InvestigateError,
}

impl Refusal {
    /// A JSON-RPC error in a successful answer to `method`.
    pub(super) fn in_answer(method: &str, rpc: RpcError) -> Refusal {
        Refusal {
            status: 200,
            error: rpc.to_error(method),
            rpc: Some(rpc),
        }
    }

    /// The error's message.
    pub(super) fn message(&self) -> &str {
        match &self.error {
            InvestigateError::Transient(m)
            | InvestigateError::Rejected(m)
            | InvestigateError::Protocol(m) => m,
        }
    }

    /// The JSON-RPC error code, if the answer holds an error.
    pub(super) fn code(&self) -> Option<i64> {
        self.rpc.as_ref().map(|e| e.code)
    }
}

/// Whether a message is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// A request: it gets an id, and its response is read.
    Request,
    /// A notification: no id, nothing to read.
    Notification,
}

/// How the answer's body is read.
enum Answer {
    Json,
    EventStream,
}

impl McpClient {
    /// POSTs one message with retries and backoff; every attempt must end
    /// within the client's timeout. Each attempt of a request gets a new
    /// id: a request whose answer was lost is sent again as a new request
    /// (2026-07-28 requires it; the `initialize` era allows it).
    pub(super) async fn post(
        &self,
        message: &Value,
        headers: &HeaderMap,
        kind: Kind,
        method: &str,
    ) -> Result<Reply, Failure> {
        let once = || async {
            let mut message = message.clone();
            let expect = match (kind, message.as_object_mut()) {
                (Kind::Request, Some(object)) => {
                    let id = self.next_id.fetch_add(1, Ordering::Relaxed);
                    object.insert("id".to_owned(), Value::from(id));
                    Some(id)
                }
                _ => None,
            };
            let body = serde_json::to_vec(&message).map_err(|e| {
                Attempt::Stop(Failure::Error(protocol(format!(
                    "{method}: cannot encode: {e}"
                ))))
            })?;
            let attempt = self.post_once(body, headers, expect, method);
            match tokio::time::timeout(self.timeout, attempt).await {
                Ok(outcome) => outcome,
                Err(_) => Err(Attempt::Retry {
                    error: Failure::Error(InvestigateError::Transient(format!(
                        "{method}: no answer within {} ms",
                        self.timeout.as_millis()
                    ))),
                    retry_after: None,
                }),
            }
        };
        self.retry()
            .run(self.sleeper.as_ref(), method, once)
            .await
            .map(|done| done.value)
            .map_err(|gave_up| gave_up.error)
    }

    async fn post_once(
        &self,
        body: Vec<u8>,
        headers: &HeaderMap,
        expect: Option<u64>,
        method: &str,
    ) -> Result<Reply, Attempt<Failure>> {
        let target = Target::path("POST", &self.url);
        let request = self
            .message_request(self.http.reqwest().post(self.url.clone()))
            .headers(headers.clone())
            .header(ACCEPT, ACCEPT_BOTH)
            .header(CONTENT_TYPE, "application/json")
            .body(body);
        // Sent here rather than with `HttpClient::send`, which keeps only
        // the message of an error answer: a refusal's JSON-RPC error code and
        // data decide what the client does next.
        let resp = match request.send().await {
            Ok(resp) => resp,
            Err(e) => {
                let error = HttpError::Send {
                    target: target.to_string(),
                    connect: e.is_connect(),
                    timed_out: e.is_timeout(),
                    detail: chain(&e.without_url()),
                };
                return Err(self.failed(error, method));
            }
        };
        let status = resp.status();
        if !status.is_success() {
            return Err(self.refused(resp, &target, method).await);
        }
        let session_id = resp
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let content_type = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| {
                v.split(';')
                    .next()
                    .unwrap_or_default()
                    .trim()
                    .to_ascii_lowercase()
            })
            .unwrap_or_default();
        let Some(expect) = expect else {
            // A notification: 202 Accepted, nothing to read.
            return Ok(Reply::Accepted);
        };
        if status == StatusCode::ACCEPTED || status == StatusCode::NO_CONTENT {
            return Ok(Reply::Accepted);
        }
        let answer = match content_type.as_str() {
            "application/json" => Answer::Json,
            "text/event-stream" => Answer::EventStream,
            other => {
                return Err(Attempt::Stop(Failure::Error(protocol(format!(
                    "{method}: unexpected content type `{other}`"
                )))));
            }
        };
        let body = self
            .http
            .body(resp, self.limits.max_body_bytes, &target)
            .map_err(|e| self.failed(e, method))?;
        let message = match answer {
            Answer::Json => {
                let body = body
                    .read_to_end()
                    .await
                    .map_err(|e| self.failed(e, method))?;
                pick_json_response(&body, expect).map_err(|e| {
                    Attempt::Stop(Failure::Error(protocol(format!("{method}: {e}"))))
                })?
            }
            Answer::EventStream => self.read_event_stream(body, method, expect).await?,
        };
        Ok(Reply::Message {
            message,
            session_id,
        })
    }

    /// A failed exchange under the client's policy: retried as transient,
    /// or final as rejected (a refused key says so).
    fn failed(&self, error: HttpError, method: &str) -> Attempt<Failure> {
        match self.retry().attempt(error) {
            Attempt::Retry { error, retry_after } => Attempt::Retry {
                error: Failure::Error(InvestigateError::Transient(format!("{method}: {error}"))),
                retry_after,
            },
            Attempt::Stop(error) => {
                let hint = match error.status() {
                    Some(401 | 403) => " (check the admin key)",
                    _ => "",
                };
                Attempt::Stop(Failure::Error(rejected(format!("{method}: {error}{hint}"))))
            }
        }
    }

    /// An error answer: retried when transient (429, 5xx), final for a
    /// refused admin key (401, 403) or a status outside 4xx, otherwise a
    /// [`Refusal`] with the JSON-RPC error its body holds.
    async fn refused(
        &self,
        resp: reqwest::Response,
        target: &Target,
        method: &str,
    ) -> Attempt<Failure> {
        let status = resp.status().as_u16();
        let retry_after = retry_after(resp.headers());
        let body = error_body(resp).await;
        let rpc = serde_json::from_slice::<Value>(&body)
            .ok()
            .as_ref()
            .and_then(RpcError::of);
        let message = match &rpc {
            Some(e) => snippet(format!("json-rpc error {}: {}", e.code, e.message).as_bytes()),
            None => error_text(&body),
        };
        let error = HttpError::Status {
            target: target.to_string(),
            status,
            message,
            retry_after,
        };
        if self.retry().should_retry(&error)
            || !(400..500).contains(&status)
            || matches!(status, 401 | 403)
        {
            return self.failed(error, method);
        }
        let mut text = format!("{method}: {error}");
        if let Some(note) = rpc.as_ref().and_then(RpcError::versions_note) {
            text.push_str(&note);
        }
        Attempt::Stop(Failure::Refused(Refusal {
            status,
            rpc,
            error: rejected(text),
        }))
    }

    /// Reads an event stream until the response with id `expect` arrives.
    async fn read_event_stream(
        &self,
        mut body: CappedBody,
        method: &str,
        expect: u64,
    ) -> Result<Value, Attempt<Failure>> {
        let mut parser = SseParser::new();
        loop {
            let chunk = match body.chunk().await {
                Ok(Some(chunk)) => chunk,
                Ok(None) => {
                    return Err(Attempt::Retry {
                        error: Failure::Error(InvestigateError::Transient(format!(
                            "{method}: the event stream ended before the response"
                        ))),
                        retry_after: None,
                    });
                }
                Err(e) => return Err(self.failed(e, method)),
            };
            let events = parser
                .feed(&chunk)
                .map_err(|e| Attempt::Stop(Failure::Error(protocol(format!("{method}: {e}")))))?;
            for event in events.into_iter().filter(sse::SseEvent::is_message) {
                let message: Value = serde_json::from_str(&event.data).map_err(|e| {
                    Attempt::Stop(Failure::Error(protocol(format!(
                        "{method}: an event is not JSON: {e}"
                    ))))
                })?;
                if is_response_to(&message, expect) {
                    return Ok(message);
                }
                tracing::trace!(method, "skipped an mcp message that is not the response");
            }
        }
    }
}

/// The body of an error answer: at most [`ERROR_BODY_LIMIT`] bytes; a body
/// that fails midway keeps what arrived.
async fn error_body(mut resp: reqwest::Response) -> Vec<u8> {
    let mut body = Vec::new();
    while body.len() < ERROR_BODY_LIMIT {
        match resp.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            Ok(None) | Err(_) => break,
        }
    }
    body.truncate(ERROR_BODY_LIMIT);
    body
}

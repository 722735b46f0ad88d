//! One message: POSTed with retries under the client's policy, its answer
//! read as JSON or as an event stream under the size cap.

use super::McpClient;
use super::protocol::{is_response_to, pick_json_response, protocol, rejected};
use super::session::Session;
use super::sse::{self, SseParser};
use crate::http::{Attempt, CappedBody, HttpError, Target};
use crate::investigate::InvestigateError;
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use serde_json::Value;
use std::fmt;

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
    /// Anything but an expired session.
    Error(InvestigateError),
    /// 404 on a message that carried a session id: the session is gone, and
    /// the caller may initialize again.
    SessionGone,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Error(e) => e.fmt(f),
            Failure::SessionGone => f.write_str("the mcp session expired"),
        }
    }
}

/// How the answer's body is read.
enum Answer {
    Json,
    EventStream,
}

impl McpClient {
    /// POSTs one message with retries and backoff; every attempt must end
    /// within the client's timeout.
    pub(super) async fn post(
        &self,
        message: &Value,
        session: Option<&Session>,
        expect: Option<u64>,
        method: &str,
    ) -> Result<Reply, Failure> {
        let body = serde_json::to_vec(message)
            .map_err(|e| Failure::Error(protocol(format!("{method}: cannot encode: {e}"))))?;
        let once = || async {
            let attempt = self.post_once(body.clone(), session, expect, method);
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
        session: Option<&Session>,
        expect: Option<u64>,
        method: &str,
    ) -> Result<Reply, Attempt<Failure>> {
        let target = Target::path("POST", &self.url);
        let request = self
            .message_request(self.http.reqwest().post(self.url.clone()), session)
            .header(ACCEPT, ACCEPT_BOTH)
            .header(CONTENT_TYPE, "application/json")
            .body(body);
        let with_session = session.is_some_and(|s| s.id.is_some());
        let resp = match self.http.send(request, &target).await {
            Ok(resp) => resp,
            Err(e) if with_session && e.status() == Some(404) => {
                return Err(Attempt::Stop(Failure::SessionGone));
            }
            Err(e) => return Err(self.failed(e, method)),
        };
        let status = resp.status();
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

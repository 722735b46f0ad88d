//! Faults on the observations route: the shared [`FaultKind`]s, answered in
//! Langfuse's shapes. A 429 carries `Retry-After` and the `X-RateLimit-*`
//! headers with `{"message": "Rate limit exceeded", "code": "rate_limited",
//! "details"}` (`RateLimitService.ts`); a 5xx is
//! `{"message": "Internal Server Error", "error": ...}`
//! (`withMiddlewares.ts`); damaged bodies, dropped or changed fields,
//! repeated rows are applied to the page; cursors that cycle and listings
//! that never end work on keyset cursors.

use super::paging::{Listing, past_the_end, past_the_end_number};
use super::query::ObservationsQuery;
use super::{ApiError, MAX_LIMIT};
use crate::faults::{self, FaultQueue};
use crate::server::FaultKind;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};

/// Injects faults into the observations route: queued ones one per
/// request, a persistent one on every request until cleared. Cheap to
/// clone; clones share state.
#[derive(Debug, Clone, Default)]
pub struct LangfuseFaults {
    queue: FaultQueue<FaultKind>,
}

impl LangfuseFaults {
    /// Queues a fault for the next request.
    pub fn push(&self, kind: FaultKind) {
        self.queue.push(kind);
    }

    /// Makes every request get `kind` until set to `None`.
    pub fn set_persistent(&self, kind: Option<FaultKind>) {
        self.queue.set_persistent(kind);
    }

    /// Drops the queued and the persistent faults.
    pub fn clear(&self) {
        self.queue.clear();
    }

    /// How many queued faults have not been served yet.
    pub fn pending(&self) -> usize {
        self.queue.pending()
    }

    /// How many faults have been served so far.
    pub fn served(&self) -> u64 {
        self.queue.served()
    }
}

/// Answers with the next fault (if any) applied around `answer`, which
/// sees the fault so that paging faults can change its cursor. `now` is
/// the horizon, for the rate limit's reset time.
pub(super) async fn serve(
    faults: &LangfuseFaults,
    now: Option<DateTime<Utc>>,
    answer: impl FnOnce(Option<&FaultKind>) -> Result<Value, ApiError>,
) -> Response {
    let fault = faults.queue.take(|_| true);
    match &fault {
        Some(FaultKind::RateLimit { retry_after_secs }) => {
            return rate_limited(*retry_after_secs, now);
        }
        Some(FaultKind::ServerError { status }) => return server_error(*status),
        Some(FaultKind::Delay { millis }) => {
            tokio::time::sleep(std::time::Duration::from_millis(*millis)).await;
        }
        _ => {}
    }
    let body = match answer(fault.as_ref()) {
        Ok(body) => body,
        Err(e) => return e.into_response(),
    };
    damage(body, fault.as_ref())
}

/// The cursor the page hands out once `fault` has had its say; `next` is
/// the real one.
pub(super) fn next_cursor(
    fault: Option<&FaultKind>,
    listing: &Listing<'_>,
    q: &ObservationsQuery,
    next: Option<String>,
) -> Option<String> {
    match fault {
        Some(FaultKind::EndlessPages) => next.or_else(|| {
            let n = q.cursor.as_ref().and_then(past_the_end_number).unwrap_or(0);
            Some(past_the_end(n + 1))
        }),
        Some(FaultKind::CursorCycle { pages }) => {
            let pages = usize::try_from(*pages)
                .unwrap_or(MAX_LIMIT)
                .clamp(2, MAX_LIMIT);
            // chain[k] is the cursor page k + 1 hands out.
            let chain = listing.chain(q.limit.max(1), pages);
            let page = match &q.cursor_text {
                None => Some(1),
                Some(c) => chain.iter().position(|x| x == c).map(|i| i + 2),
            };
            match page {
                Some(p) if p >= pages => chain.first().cloned(),
                Some(p) => chain.get(p - 1).cloned(),
                None => next,
            }
        }
        _ => next,
    }
}

/// The page's body, damaged as `fault` says.
fn damage(mut body: Value, fault: Option<&FaultKind>) -> Response {
    match fault {
        Some(FaultKind::Truncated) => {
            let mut bytes = body.to_string().into_bytes();
            bytes.truncate(bytes.len() / 2);
            return (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "application/json; charset=utf-8")],
                bytes,
            )
                .into_response();
        }
        Some(FaultKind::Malformed) => {
            let page = "<html><head><title>502 Bad Gateway</title></head>\
                        <body><center><h1>502 Bad Gateway</h1></center></body></html>\n";
            return (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
                page,
            )
                .into_response();
        }
        Some(f) => faults::damage_rows(&mut body, f),
        None => {}
    }
    (StatusCode::OK, axum::Json(body)).into_response()
}

fn rate_limited(secs: u64, now: Option<DateTime<Utc>>) -> Response {
    let reset = now.map(|t| t + Duration::seconds(i64::try_from(secs).unwrap_or(i64::MAX / 1000)));
    let mut details = json!({ "retryAfterSeconds": secs, "limit": 1000, "remaining": 0 });
    if let (Some(reset), Some(d)) = (reset, details.as_object_mut()) {
        d.insert("resetAt".into(), json!(crate::dataset::format_ts(&reset)));
    }
    let body =
        json!({ "message": "Rate limit exceeded", "code": "rate_limited", "details": details });
    let mut res = (StatusCode::TOO_MANY_REQUESTS, axum::Json(body)).into_response();
    let headers = res.headers_mut();
    headers.insert("X-RateLimit-Limit", HeaderValue::from_static("1000"));
    headers.insert("X-RateLimit-Remaining", HeaderValue::from_static("0"));
    faults::retry_after(res, secs)
}

fn server_error(status: u16) -> Response {
    let status = faults::status(status);
    let body = json!({ "message": "Internal Server Error", "error": "An unknown error occurred" });
    (status, axum::Json(body)).into_response()
}

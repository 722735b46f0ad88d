//! The REST routes of the gateway contract (gateway-api.md section 1):
//! `GET /v1/sessions`, `GET /v1/requests` and `GET /v1/models`, their
//! answers, and the JSON error body `{"error": {"code", "message"}}`.

use super::Shared;
use super::faults::{FaultKind, FaultPath, next_position, serve};
use super::query::ListQuery;
use crate::cursor;
use crate::dataset::{Page, Window};
use crate::http::bearer;
use axum::extract::{RawQuery, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};
use std::sync::{Arc, PoisonError};

/// The routes that need the admin key.
pub(super) fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/v1/sessions", get(sessions))
        .route("/v1/requests", get(requests))
        .route("/v1/models", get(models))
}

/// Counts every request by path, rejected ones included.
pub(super) async fn count_hit(State(sh): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    {
        let mut hits = sh.hits.lock().unwrap_or_else(PoisonError::into_inner);
        *hits.entry(req.uri().path().to_string()).or_default() += 1;
    }
    next.run(req).await
}

/// Refuses requests without the admin key: 401 with `WWW-Authenticate: Bearer`.
pub(super) async fn authorize(State(sh): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    if bearer(req.headers()) != Some(sh.admin_key.as_str()) {
        let mut res = ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "missing or invalid admin key",
        )
        .into_response();
        res.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return res;
    }
    next.run(req).await
}

/// Any other path: 404.
pub(super) async fn not_found(req: Request) -> Response {
    let message = format!("no route for {} {}", req.method(), req.uri().path());
    ApiError::new(StatusCode::NOT_FOUND, "not_found", message).into_response()
}

async fn sessions(State(sh): State<Arc<Shared>>, RawQuery(raw): RawQuery) -> Response {
    serve(&sh.faults, FaultPath::Sessions, |fault| {
        list_sessions(&sh, raw.as_deref(), fault)
    })
    .await
}

async fn requests(State(sh): State<Arc<Shared>>, RawQuery(raw): RawQuery) -> Response {
    serve(&sh.faults, FaultPath::Requests, |fault| {
        list_requests(&sh, raw.as_deref(), fault)
    })
    .await
}

async fn models(State(sh): State<Arc<Shared>>) -> Response {
    serve(&sh.faults, FaultPath::Models, |_| {
        let rows: Vec<Value> = sh.dataset.models.iter().map(|m| m.to_row()).collect();
        Ok(json!({ "data": rows }))
    })
    .await
}

fn list_sessions(
    sh: &Shared,
    raw: Option<&str>,
    fault: Option<&FaultKind>,
) -> Result<Value, ApiError> {
    let q = ListQuery::parse(raw, false)?;
    let (start, end) = q
        .window()?
        .ok_or_else(|| ApiError::bad_request("start and end are required"))?;
    let fingerprint = q.fingerprint("sessions");
    let from = q.position(fingerprint)?;
    let w = Window {
        start,
        end,
        labels: &q.labels,
        now: sh.now(),
    };
    let page = sh.dataset.sessions_page(&w, from, q.limit);
    let next = next_position(fault, from, page.next, |p| {
        sh.dataset.sessions_page(&w, p, q.limit).next
    });
    Ok(cursor::page_body(page.rows, next, fingerprint))
}

fn list_requests(
    sh: &Shared,
    raw: Option<&str>,
    fault: Option<&FaultKind>,
) -> Result<Value, ApiError> {
    let q = ListQuery::parse(raw, true)?;
    let window = q.window()?;
    let fingerprint = q.fingerprint("requests");
    let from = q.position(fingerprint)?;
    let now = sh.now();
    let page_at = |from: usize| -> Result<Page, ApiError> {
        Ok(match (&q.session_id, window) {
            (Some(id), window) => sh
                .dataset
                .session_requests_page(id, window, &q.labels, now, from, q.limit)
                .unwrap_or(Page {
                    rows: Vec::new(),
                    next: None,
                }),
            (None, Some((start, end))) => {
                let w = Window {
                    start,
                    end,
                    labels: &q.labels,
                    now,
                };
                sh.dataset.requests_page(&w, from, q.limit)
            }
            (None, None) => {
                return Err(ApiError::bad_request("give session_id, or start and end"));
            }
        })
    };
    let page = page_at(from)?;
    let next = next_position(fault, from, page.next, |p| {
        page_at(p).ok().and_then(|page| page.next)
    });
    Ok(cursor::page_body(page.rows, next, fingerprint))
}

/// An error answer: `{"error": {"code", "message"}}`.
#[derive(Debug)]
pub(super) struct ApiError {
    pub(super) status: StatusCode,
    code: &'static str,
    message: String,
}

impl ApiError {
    pub(super) fn new(
        status: StatusCode,
        code: &'static str,
        message: impl Into<String>,
    ) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }

    pub(super) fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    pub(super) fn body(&self) -> Value {
        json!({ "error": { "code": self.code, "message": self.message } })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body())).into_response()
    }
}

//! The simulated proxy's routes: `GET /spend/logs/v2`, `GET /model/info`
//! (also at `/v1/model/info`), behind the proxy's bearer-key check.

use super::LiteLlmSim;
use super::errors::LiteLlmError;
use super::faults::{LiteLlmFaultKind, LiteLlmRoute, respond};
use super::query::{self, SpendQuery};
use super::rows::{model_info, provider_model, session_id, spend_log_row};
use crate::dataset::SimRequest;
use axum::Router;
use axum::extract::{RawQuery, Request, State};
use axum::http::header;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use chrono::TimeDelta;
use serde_json::{Value, json};

/// LiteLLM's cap on `total` (`SPEND_LOGS_PAGINATION_COUNT_CAP`).
const COUNT_CAP: u64 = 10_000;

/// The routes, for a router of any state.
pub(super) fn routes<S: Clone + Send + Sync + 'static>(sim: LiteLlmSim) -> Router<S> {
    Router::new()
        .route("/spend/logs/v2", get(spend_logs))
        .route("/model/info", get(models))
        .route("/v1/model/info", get(models))
        .route_layer(middleware::from_fn_with_state(sim.clone(), authorize))
        .with_state(sim)
}

/// `user_api_key_auth`: `Authorization: Bearer <key>` with the admin key,
/// else the proxy's 401.
async fn authorize(State(sim): State<LiteLlmSim>, req: Request, next: Next) -> Response {
    let sent = req.headers().get(header::AUTHORIZATION).map(|v| {
        v.to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("")
    });
    if sent != Some(sim.inner.admin_key.as_str()) {
        return LiteLlmError::unauthorized(sent).into_response();
    }
    next.run(req).await
}

async fn spend_logs(State(sim): State<LiteLlmSim>, RawQuery(raw): RawQuery) -> Response {
    let query = query::parse(raw.as_deref());
    let asked = query.as_ref().ok().map(|q| q.page);
    let fault = sim.inner.faults.take(LiteLlmRoute::SpendLogs, asked);
    let answer = query.map(|q| page(&sim, &q, fault.as_ref()));
    respond(answer, fault.as_ref())
}

async fn models(State(sim): State<LiteLlmSim>) -> Response {
    let fault = sim.inner.faults.take(LiteLlmRoute::ModelInfo, None);
    let data: Vec<Value> = sim.inner.dataset.models.iter().map(model_info).collect();
    respond(Ok(json!({ "data": data })), fault.as_ref())
}

/// One page of the spend log: the rows of `[start_date, end_date]` visible
/// at the horizon, filtered, sorted, then `LIMIT page_size OFFSET (page -
/// 1) * page_size`, with `total` capped.
fn page(sim: &LiteLlmSim, q: &SpendQuery, fault: Option<&LiteLlmFaultKind>) -> Value {
    let options = sim.options();
    let now = (sim.inner.now)();
    let mut calls: Vec<&SimRequest> = if q.model_calls && q.start <= q.end {
        let end = q.end + TimeDelta::nanoseconds(1);
        sim.inner.dataset.requests_in(q.start, end, &[], now)
    } else {
        Vec::new()
    };
    calls.retain(|r| {
        let status = if r.is_error() { "failure" } else { "success" };
        let status_ok = q.status.as_deref().is_none_or(|s| s == status);
        let session_ok = q.session_id.as_deref().is_none_or(|want| {
            session_id(r, &options)
                .as_str()
                .is_some_and(|have| have.contains(want))
        });
        status_ok && session_ok
    });
    // `requests_in` gives startTime order; other keys are stable sorts.
    match q.sort_by.as_str() {
        "spend" => calls.sort_by(|a, b| a.cost_usd.total_cmp(&b.cost_usd)),
        "total_tokens" => calls.sort_by_key(|r| r.input_tokens + r.output_tokens),
        "endTime" => calls.sort_by_key(|r| {
            r.created_at + TimeDelta::milliseconds(i64::try_from(r.latency_ms).unwrap_or(0))
        }),
        "request_duration_ms" => calls.sort_by_key(|r| r.latency_ms),
        "model" => calls.sort_by_key(|r| provider_model(&r.model)),
        _ => {}
    }
    // `ttft_ms` is null on every call (none streamed): NULLS LAST either way.
    let descending = (q.descending && q.sort_by != "ttft_ms")
        || fault == Some(&LiteLlmFaultKind::IgnoreSortOrder);
    if descending {
        calls.reverse();
    }
    if fault == Some(&LiteLlmFaultKind::TiesReversed) {
        for ties in calls.chunk_by_mut(|a, b| a.created_at == b.created_at) {
            ties.reverse();
        }
    }
    let page = match fault {
        Some(LiteLlmFaultKind::RepeatPreviousPage) => q.page.saturating_sub(1).max(1),
        _ => q.page,
    };
    let mut skip = (page - 1).saturating_mul(q.page_size);
    if let Some(LiteLlmFaultKind::RowsWrittenBehind { rows }) = fault {
        skip = skip.saturating_sub(*rows);
    }
    let data: Vec<Value> = calls
        .iter()
        .skip(usize::try_from(skip).unwrap_or(usize::MAX))
        .take(usize::try_from(q.page_size).unwrap_or(usize::MAX))
        .map(|r| spend_log_row(r, &options))
        .collect();
    let found = calls.len() as u64;
    let total = found.min(COUNT_CAP);
    json!({
        "data": data,
        "total": total,
        "page": page,
        "page_size": q.page_size,
        "total_pages": total.div_ceil(q.page_size),
        "total_is_capped": found > COUNT_CAP,
    })
}

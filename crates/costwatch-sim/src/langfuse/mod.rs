//! A stand-in for Langfuse's public observations API, v2:
//! `GET /api/public/v2/observations`, served from the same [`Dataset`] as
//! the reference routes, one generation per call.
//!
//! Followed from `langfuse/langfuse` at commit `6275144614` (tag
//! `v4.16.0-30`):
//! - `fern/apis/server/definition/observations.yml` and `commons.yml`
//!   (`ObservationV2`): the query parameters, the field groups, the
//!   `{data, meta: {cursor}}` envelope;
//! - `web/src/pages/api/public/v2/observations/index.ts` and
//!   `web/src/features/public-api/types/observations.ts`: `limit` 0 to
//!   1000 (default 50), one row more fetched to decide on `meta.cursor`
//!   (absent on the last page, `meta` then `{}`), the cursor as standard
//!   base64 of `{"lastStartTimeTo", "lastTraceId", "lastId"}`, a bad cursor
//!   a 400 `Invalid cursor format`, unknown parameters ignored and unknown
//!   field groups dropped;
//! - `packages/shared/src/server/repositories/events.ts`: rows ordered by
//!   `startTime`, `xxHash32(traceId)` and id, all descending, and a cursor
//!   resuming strictly after its row;
//! - `packages/shared/src/server/queries/public-api-filter-builder.ts`:
//!   `fromStartTime` inclusive, `toStartTime` exclusive, exact filters on
//!   `sessionId`, `userId`, `traceId`, `name`, `level`, `type`, `version`,
//!   any of `environment`;
//! - `packages/shared/src/server/repositories/observations_converters.ts`
//!   and `web/src/__tests__/server/observations-api-v2.servertest.ts`: which
//!   fields each group returns on the wire (the provided model name as
//!   `model`; `latency`, `timeToFirstToken`, `modelId` and the three prices
//!   on every row; `inputUsage`, `outputUsage`, `totalUsage`, `inputCost`,
//!   `outputCost` beside the usage group; `totalCost` taken from
//!   `costDetails.total`, `0` when there is none), with the events table's
//!   empty strings (`""`) for unset `sessionId`, `userId`,
//!   `statusMessage`, `version`, and metadata values parsed as JSON where
//!   they read as JSON (`metadata_conversion.ts`);
//! - `web/src/features/public-api/server/createAuthedProjectAPIRoute.ts`,
//!   `apiAuth.ts`, `withMiddlewares.ts`, `RateLimitService.ts` and
//!   `unstable-public-api-error-contract.ts`: HTTP Basic `public:secret`
//!   (401 `{"message": ...}`; a public key as Bearer token is a 403), a
//!   400 `{"message": "Invalid request data", "error": [zod issues]}`, a
//!   429 with `Retry-After` and `{"message", "code": "rate_limited",
//!   "details"}`, a 500 `{"message": "Internal Server Error", "error"}`.
//!
//! How a [`SimRequest`](crate::SimRequest) becomes an observation: its id
//! is the observation id; its session one trace (`traceId` derived from
//! the session id, [`trace_id_of`]), named after the `feature` label, with
//! one `<key>:<value>` tag per label; `sessionId` the session id (or `""`
//! for sessions served without one, [`LangfuseSim::serve_without_session_id`]);
//! `userId` one of sixteen users ([`user_id_of`]); `environment` the `env`
//! label; `metadata` the labels; `level: "ERROR"` with the message of
//! OpenAI's Python SDK for a failure (`Error code: 429 - {...}`, `Request
//! timed out.`); cost in `costDetails` and `totalCost` (or none,
//! [`LangfuseSim::serve_without_cost`]). `usageDetails` is written the way
//! an integration writes it ([`UsageSpelling`]): by default OpenAI's for
//! `gpt-*` models, LangChain's for `claude-*`, OpenTelemetry's for the
//! rest; every spelling tells cache writes apart on a model that bills
//! them (OpenAI's `input_cache_write_tokens`), so the same calls carry the
//! same tokens as through the other routes.
//!
//! Beside the observations, `GET /api/public/models` lists the project's
//! model definitions with their prices ([`models`]), and `GET
//! /api/public/projects` the keys' project ([`PROJECT_ID`]), as
//! `web/src/pages/api/public/projects/index.ts` answers.
//!
//! The simulator answers the API of a server in v4 mode (the route is there).
//! What it leaves out: the JSON `filter` parameter (a 400 says so), and the
//! `io`, `prompt` and time fields carry no content (`null`).
//!
//! Beside it, [`mcp`] stands in for Langfuse's own MCP server,
//! `/api/public/mcp`, whose observation tools read the same observations.

mod auth;
mod faults;
pub mod mcp;
pub mod models;
mod observation;
mod paging;
mod query;
#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;

pub use self::faults::LangfuseFaults;
pub(crate) use self::observation::status_message;
pub use self::observation::{UsageSpelling, bills_cache_writes, trace_id_of, user_id_of};
pub use self::paging::xxhash32;

use crate::dataset::Dataset;
use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use std::collections::HashSet;
use std::sync::{Arc, PoisonError, RwLock};

/// The public key the simulator accepts unless told otherwise.
pub const DEFAULT_PUBLIC_KEY: &str = "pk-lf-sim";

/// The largest `limit` the API accepts.
pub const MAX_LIMIT: usize = 1000;

/// The project every observation belongs to.
pub const PROJECT_ID: &str = "sim-project";

/// What is served differently from the plain dataset.
#[derive(Debug, Default)]
struct Shape {
    spelling: UsageSpelling,
    without_session: HashSet<String>,
    without_cost: HashSet<String>,
    without_definition: HashSet<String>,
}

/// The Langfuse side of a running simulator: its keys, its faults and how
/// it writes observations. Cheap to clone; clones share state.
#[derive(Clone)]
pub struct LangfuseSim {
    dataset: Arc<Dataset>,
    public_key: String,
    secret_key: String,
    faults: LangfuseFaults,
    shape: Arc<RwLock<Shape>>,
    mcp: Arc<mcp::McpState>,
}

impl std::fmt::Debug for LangfuseSim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LangfuseSim")
            .field("public_key", &self.public_key)
            .finish_non_exhaustive()
    }
}

impl LangfuseSim {
    /// Serves `dataset` to callers with this key pair.
    pub fn new(dataset: Arc<Dataset>, public_key: String, secret_key: String) -> LangfuseSim {
        LangfuseSim {
            dataset,
            public_key,
            secret_key,
            faults: LangfuseFaults::default(),
            shape: Arc::new(RwLock::new(Shape {
                without_definition: models::UNDEFINED_BY_DEFAULT
                    .iter()
                    .map(|m| (*m).to_owned())
                    .collect(),
                ..Shape::default()
            })),
            mcp: Arc::new(mcp::McpState::default()),
        }
    }

    /// The public key it accepts (`pk-lf-...`).
    pub fn public_key(&self) -> &str {
        &self.public_key
    }

    /// The secret key it accepts: the simulator's admin key.
    pub fn secret_key(&self) -> &str {
        &self.secret_key
    }

    /// The handle to inject faults into the observations route with.
    pub fn faults(&self) -> &LangfuseFaults {
        &self.faults
    }

    /// Writes every `usageDetails` in `spelling` from now on.
    pub fn set_usage_spelling(&self, spelling: UsageSpelling) {
        self.with_shape(|s| s.spelling = spelling);
    }

    /// The spelling a call to `model` is written in now.
    pub fn spelling_for(&self, model: &str) -> UsageSpelling {
        self.read_shape(|s| s.spelling.resolve(model))
    }

    /// Whether a call to `model` of `dataset` is written now with its cache
    /// writes told apart from the uncached prompt.
    pub fn reports_cache_writes(&self, dataset: &Dataset, model: &str) -> bool {
        let bills = dataset
            .models
            .iter()
            .any(|m| m.id == model && bills_cache_writes(m));
        self.spelling_for(model).reports_cache_writes(bills)
    }

    /// Serves the calls of these sessions without a session id (`""`), as
    /// for calls traced without one.
    pub fn serve_without_session_id(&self, session_ids: impl IntoIterator<Item = String>) {
        self.with_shape(|s| s.without_session.extend(session_ids));
    }

    /// Serves the calls of these sessions without cost (empty
    /// `costDetails`, `totalCost` 0), as for models Langfuse has no price
    /// for.
    pub fn serve_without_cost(&self, session_ids: impl IntoIterator<Item = String>) {
        self.with_shape(|s| s.without_cost.extend(session_ids));
    }

    /// Lists no model definition for these models (by default `nova-lite`
    /// has none): their calls keep the costs they were traced with, and
    /// nothing else prices them.
    pub fn serve_without_definition(&self, models: impl IntoIterator<Item = String>) {
        self.with_shape(|s| s.without_definition.extend(models));
    }

    fn with_shape<R>(&self, f: impl FnOnce(&mut Shape) -> R) -> R {
        f(&mut self.shape.write().unwrap_or_else(PoisonError::into_inner))
    }

    fn read_shape<R>(&self, f: impl FnOnce(&Shape) -> R) -> R {
        f(&self.shape.read().unwrap_or_else(PoisonError::into_inner))
    }
}

/// The clock of the simulator's horizon: calls after it do not exist yet.
pub(crate) type Horizon = Arc<dyn Fn() -> Option<DateTime<Utc>> + Send + Sync>;

#[derive(Clone)]
struct RouteState {
    sim: LangfuseSim,
    now: Horizon,
}

/// The routes below `/api/public`: `GET /v2/observations`, `GET /models`
/// ([`models`]), the MCP endpoint `/mcp` ([`mcp`]), and Langfuse's 404 for
/// anything else. `now` is the simulator's horizon.
pub(crate) fn router(sim: LangfuseSim, now: Horizon) -> Router {
    Router::new()
        .route("/v2/observations", get(observations))
        .route("/models", get(model_definitions))
        .route("/projects", get(projects))
        .route(
            "/mcp",
            post(mcp::post)
                .get(mcp::get)
                .delete(mcp::delete)
                .options(mcp::options),
        )
        .fallback(not_found)
        .with_state(RouteState { sim, now })
}

async fn observations(
    State(st): State<RouteState>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    if let Err(refused) = auth::check(&headers, &st.sim) {
        return refused.into_response();
    }
    faults::serve(&st.sim.faults, (st.now)(), |fault| {
        answer(&st, raw.as_deref(), fault)
    })
    .await
}

async fn model_definitions(
    State(st): State<RouteState>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    if let Err(refused) = auth::check(&headers, &st.sim) {
        return refused.into_response();
    }
    match models::answer(&st.sim, raw.as_deref()) {
        Ok(page) => axum::Json(page).into_response(),
        Err(e) => e.into_response(),
    }
}

/// `GET /api/public/projects`: the project the keys belong to, as
/// `web/src/pages/api/public/projects/index.ts` answers a project's keys
/// (`{"data": [{"id", "name", "metadata"}]}`).
async fn projects(State(st): State<RouteState>, headers: HeaderMap) -> Response {
    if let Err(refused) = auth::check(&headers, &st.sim) {
        return refused.into_response();
    }
    axum::Json(serde_json::json!({
        "data": [{"id": PROJECT_ID, "name": "costwatch-sim", "metadata": {}}],
    }))
    .into_response()
}

/// The page the query asks for, as JSON, with the cursor a paging fault
/// may have changed.
fn answer(
    st: &RouteState,
    raw: Option<&str>,
    fault: Option<&crate::FaultKind>,
) -> Result<Value, ApiError> {
    let q = query::ObservationsQuery::parse(raw)?;
    let shape = st.sim.shape.read().unwrap_or_else(PoisonError::into_inner);
    let listing = paging::Listing::new(&st.sim.dataset, &q, (st.now)(), &shape.without_session);
    let page = listing.page(q.cursor.as_ref(), q.limit);
    let next = faults::next_cursor(fault, &listing, &q, page.next.clone());
    let data: Vec<Value> = page
        .rows
        .iter()
        .map(|e| observation::to_json(e, &q.fields, &shape, &st.sim.dataset))
        .collect();
    let meta = match next {
        Some(cursor) => json!({ "cursor": cursor }),
        None => json!({}),
    };
    Ok(json!({ "data": data, "meta": meta }))
}

/// Any other path below `/api/public`: the web app's 404.
async fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        "<!DOCTYPE html><html><head><title>404: This page could not be found</title></head>\
         <body><h1>404</h1><h2>This page could not be found.</h2></body></html>",
    )
        .into_response()
}

/// An error answer in Langfuse's shape: a status and a JSON body.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ApiError {
    status: StatusCode,
    body: Value,
}

impl ApiError {
    /// `{"message": ...}` alone, as the authentication errors are.
    fn message(status: StatusCode, message: &str) -> ApiError {
        ApiError {
            status,
            body: json!({ "message": message }),
        }
    }

    /// A `BaseError` as the middleware writes it: `{"message", "error"}`
    /// with the error's class name.
    fn named(status: StatusCode, message: &str, name: &str) -> ApiError {
        ApiError {
            status,
            body: json!({ "message": message, "error": name }),
        }
    }

    /// A failed query: `{"message": "Invalid request data", "error": issues}`.
    fn invalid(issues: Vec<Value>) -> ApiError {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            body: json!({ "message": "Invalid request data", "error": issues }),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(self.body)).into_response()
    }
}

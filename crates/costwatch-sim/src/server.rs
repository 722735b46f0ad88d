//! The simulator's HTTP server: the gateway's REST contract on loopback, with
//! injectable faults.
//!
//! Routes (all need `Authorization: Bearer <admin key>`):
//! - `GET /v1/sessions?start&end&limit&cursor&metadata.<k>=<v>`
//! - `GET /v1/requests?session_id=...` or `?start&end`, same paging and filters
//! - `GET /v1/models`
//! - `POST /v1/mcp`: the same data as MCP tools ([`super::mcp`])
//!
//! Cursors are opaque: base64 of a position plus a fingerprint of the query
//! they belong to, so a cursor replayed against another query is a 400.

use super::dataset::{Dataset, Page, Window, format_ts};
use super::mcp::{McpMode, McpSim};
use axum::extract::{RawQuery, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The default admin key the simulator accepts.
pub const DEFAULT_ADMIN_KEY: &str = "sim-admin-key";
/// The largest page `limit` the API accepts.
pub const MAX_LIMIT: usize = 50;

/// Where the simulator listens and which key it accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimOptions {
    /// Address to bind; port 0 picks a free port.
    pub bind: SocketAddr,
    /// The admin key every request must carry.
    pub admin_key: String,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            admin_key: DEFAULT_ADMIN_KEY.to_string(),
        }
    }
}

// ---------------------------------------------------------------------------
// Faults.
// ---------------------------------------------------------------------------

/// Which routes a fault applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FaultPath {
    /// `GET /v1/sessions`.
    Sessions,
    /// `GET /v1/requests`.
    Requests,
    /// `GET /v1/models`.
    Models,
    /// Every route.
    Any,
}

impl FaultPath {
    /// Whether a fault for `self` applies to a request on `route`.
    pub fn matches(self, route: FaultPath) -> bool {
        self == FaultPath::Any || self == route
    }
}

/// What goes wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultKind {
    /// 429 with a `Retry-After` header and a JSON error.
    RateLimit {
        /// Seconds announced in `Retry-After`.
        retry_after_secs: u64,
    },
    /// An error status (5xx expected) with a JSON error.
    ServerError {
        /// The HTTP status; an invalid one becomes 500.
        status: u16,
    },
    /// A 200 whose JSON body is cut in the middle.
    Truncated,
    /// A 200 whose body is not JSON (an HTML error page).
    Malformed,
    /// A 200 whose rows all lack this field (e.g. `cost_usd`).
    DropField {
        /// The field removed from every row of `data`.
        field: String,
    },
    /// A pause before the normal answer.
    Delay {
        /// How long to wait.
        millis: u64,
    },
}

/// A fault and the routes it applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// Routes the fault applies to.
    pub path: FaultPath,
    /// What goes wrong.
    pub kind: FaultKind,
}

impl Fault {
    /// A fault on one route (or [`FaultPath::Any`]).
    pub fn on(path: FaultPath, kind: FaultKind) -> Fault {
        Fault { path, kind }
    }

    /// A fault on whichever route is called next.
    pub fn any(kind: FaultKind) -> Fault {
        Fault {
            path: FaultPath::Any,
            kind,
        }
    }
}

#[derive(Debug, Default)]
struct FaultState {
    queue: VecDeque<Fault>,
    persistent: Option<Fault>,
    served: u64,
}

/// Injects faults into a running simulator; cheap to clone, shareable
/// across threads.
///
/// Queued faults are consumed one per matching request, in order. A
/// persistent fault applies to every matching request (and takes precedence
/// over the queue) until it is cleared.
#[derive(Debug, Clone, Default)]
pub struct FaultHandle(Arc<Mutex<FaultState>>);

impl FaultHandle {
    /// A handle with no faults.
    pub fn new() -> FaultHandle {
        FaultHandle::default()
    }

    /// Queues a fault for the next matching request.
    pub fn push(&self, fault: Fault) {
        self.with(|s| s.queue.push_back(fault));
    }

    /// Makes every matching request fail (an outage) until set to `None`.
    pub fn set_persistent(&self, fault: Option<Fault>) {
        self.with(|s| s.persistent = fault);
    }

    /// Drops the queued and the persistent faults.
    pub fn clear(&self) {
        self.with(|s| {
            s.queue.clear();
            s.persistent = None;
        });
    }

    /// How many queued faults have not been served yet.
    pub fn pending(&self) -> usize {
        self.with(|s| s.queue.len())
    }

    /// How many faults have been served so far.
    pub fn served(&self) -> u64 {
        self.with(|s| s.served)
    }

    /// The fault to apply to a request on `route`, if any, counted as served.
    fn take(&self, route: FaultPath) -> Option<FaultKind> {
        self.with(|s| {
            let kind = match &s.persistent {
                Some(f) if f.path.matches(route) => Some(f.kind.clone()),
                _ => {
                    let i = s.queue.iter().position(|f| f.path.matches(route))?;
                    s.queue.remove(i).map(|f| f.kind)
                }
            };
            s.served += u64::from(kind.is_some());
            kind
        })
    }

    fn with<R>(&self, f: impl FnOnce(&mut FaultState) -> R) -> R {
        let mut state = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut state)
    }
}

/// What the simulator has served.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Requests received per path (`/v1/sessions`, ...), rejected ones included.
    pub hits: BTreeMap<String, u64>,
    /// Faults served.
    pub faults_served: u64,
}

impl SimStats {
    /// Requests received on `path`.
    pub fn hits(&self, path: &str) -> u64 {
        self.hits.get(path).copied().unwrap_or(0)
    }
}

// ---------------------------------------------------------------------------
// The server.
// ---------------------------------------------------------------------------

/// Up to when calls exist.
#[derive(Clone)]
enum Horizon {
    All,
    At(DateTime<Utc>),
    Clock(Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>),
}

/// State shared by the handlers.
struct Shared {
    dataset: Arc<Dataset>,
    admin_key: String,
    faults: FaultHandle,
    hits: Mutex<BTreeMap<String, u64>>,
    horizon: RwLock<Horizon>,
    mcp: McpSim,
}

impl Shared {
    fn now(&self) -> Option<DateTime<Utc>> {
        match &*self.horizon.read().unwrap_or_else(PoisonError::into_inner) {
            Horizon::All => None,
            Horizon::At(t) => Some(*t),
            Horizon::Clock(now) => Some(now()),
        }
    }

    fn set_horizon(&self, h: Horizon) {
        *self.horizon.write().unwrap_or_else(PoisonError::into_inner) = h;
    }
}

/// A running simulated gateway. Stops on [`SimServer::shutdown`] or when
/// dropped.
pub struct SimServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

impl fmt::Debug for SimServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl SimServer {
    /// Binds `opts.bind` and serves `dataset` until shut down.
    pub async fn start(dataset: Arc<Dataset>, opts: SimOptions) -> std::io::Result<SimServer> {
        let listener = TcpListener::bind(opts.bind).await?;
        let addr = listener.local_addr()?;
        let mcp = McpSim::new(dataset.clone(), opts.admin_key.clone(), McpMode::Json);
        let shared = Arc::new(Shared {
            dataset,
            admin_key: opts.admin_key,
            faults: FaultHandle::new(),
            hits: Mutex::new(BTreeMap::new()),
            horizon: RwLock::new(Horizon::All),
            mcp,
        });
        let app = router(shared.clone());
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await
        });
        tracing::debug!(%addr, "gateway simulator listening");
        Ok(SimServer {
            addr,
            shared,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The API base URL, e.g. `http://127.0.0.1:40123/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The admin key it accepts.
    pub fn admin_key(&self) -> &str {
        &self.shared.admin_key
    }

    /// The data it serves.
    pub fn dataset(&self) -> &Arc<Dataset> {
        &self.shared.dataset
    }

    /// The handle to inject faults with.
    pub fn faults(&self) -> FaultHandle {
        self.shared.faults.clone()
    }

    /// The MCP endpoint (answer mode, recorded calls, MCP faults).
    pub fn mcp(&self) -> &McpSim {
        &self.shared.mcp
    }

    /// The MCP endpoint's URL, e.g. `http://127.0.0.1:40123/v1/mcp`.
    pub fn mcp_url(&self) -> String {
        format!("http://{}/v1/mcp", self.addr)
    }

    /// Hits per path and faults served so far.
    pub fn stats(&self) -> SimStats {
        let hits = self
            .shared
            .hits
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        SimStats {
            hits,
            faults_served: self.shared.faults.served(),
        }
    }

    /// Sets the aggregation horizon: calls after `now` do not exist yet
    /// (`None`: every call exists, the default).
    pub fn set_now(&self, now: Option<DateTime<Utc>>) {
        self.shared
            .set_horizon(now.map_or(Horizon::All, Horizon::At));
    }

    /// Makes the horizon follow `now` (e.g. the fake clock of a demo).
    pub fn follow_clock(&self, now: impl Fn() -> DateTime<Utc> + Send + Sync + 'static) {
        self.shared.set_horizon(Horizon::Clock(Arc::new(now)));
    }

    /// Stops accepting, lets open requests finish, and waits for the server.
    pub async fn shutdown(mut self) -> std::io::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.task.take() {
            Some(task) => task.await.map_err(std::io::Error::other)?,
            None => Ok(()),
        }
    }
}

impl Drop for SimServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/v1/sessions", get(sessions))
        .route("/v1/requests", get(requests))
        .route("/v1/models", get(models))
        .route_layer(middleware::from_fn_with_state(shared.clone(), authorize))
        .nest_service("/v1/mcp", shared.mcp.router())
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(shared.clone(), count_hit))
        .with_state(shared)
}

// ---------------------------------------------------------------------------
// Middleware and handlers.
// ---------------------------------------------------------------------------

async fn count_hit(State(sh): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    {
        let mut hits = sh.hits.lock().unwrap_or_else(PoisonError::into_inner);
        *hits.entry(req.uri().path().to_string()).or_default() += 1;
    }
    next.run(req).await
}

async fn authorize(State(sh): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    let key = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if key != Some(sh.admin_key.as_str()) {
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

async fn not_found(req: Request) -> Response {
    let message = format!("no route for {} {}", req.method(), req.uri().path());
    ApiError::new(StatusCode::NOT_FOUND, "not_found", message).into_response()
}

async fn sessions(State(sh): State<Arc<Shared>>, RawQuery(raw): RawQuery) -> Response {
    serve(&sh.faults, FaultPath::Sessions, || {
        list_sessions(&sh, raw.as_deref())
    })
    .await
}

async fn requests(State(sh): State<Arc<Shared>>, RawQuery(raw): RawQuery) -> Response {
    serve(&sh.faults, FaultPath::Requests, || {
        list_requests(&sh, raw.as_deref())
    })
    .await
}

async fn models(State(sh): State<Arc<Shared>>) -> Response {
    serve(&sh.faults, FaultPath::Models, || {
        let rows: Vec<Value> = sh.dataset.models.iter().map(|m| m.to_row()).collect();
        Ok(json!({ "data": rows }))
    })
    .await
}

fn list_sessions(sh: &Shared, raw: Option<&str>) -> Result<Value, ApiError> {
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
    Ok(page_body(
        sh.dataset.sessions_page(&w, from, q.limit),
        fingerprint,
    ))
}

fn list_requests(sh: &Shared, raw: Option<&str>) -> Result<Value, ApiError> {
    let q = ListQuery::parse(raw, true)?;
    let window = q.window()?;
    let fingerprint = q.fingerprint("requests");
    let from = q.position(fingerprint)?;
    let now = sh.now();
    let page = match (&q.session_id, window) {
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
        (None, None) => return Err(ApiError::bad_request("give session_id, or start and end")),
    };
    Ok(page_body(page, fingerprint))
}

fn page_body(page: Page, fingerprint: u64) -> Value {
    let next = page.next.map(|pos| encode_cursor(pos, fingerprint));
    json!({ "data": page.rows, "next_cursor": next })
}

/// Applies the route's next fault (if any) around the normal answer.
async fn serve(
    faults: &FaultHandle,
    route: FaultPath,
    answer: impl FnOnce() -> Result<Value, ApiError>,
) -> Response {
    let fault = faults.take(route);
    match &fault {
        Some(FaultKind::RateLimit { retry_after_secs }) => return rate_limited(*retry_after_secs),
        Some(FaultKind::ServerError { status }) => return server_error(*status),
        Some(FaultKind::Delay { millis }) => {
            tokio::time::sleep(std::time::Duration::from_millis(*millis)).await;
        }
        _ => {}
    }
    respond(answer(), fault.as_ref())
}

/// The answer, damaged as `fault` says.
fn respond(answer: Result<Value, ApiError>, fault: Option<&FaultKind>) -> Response {
    let (status, mut body) = match answer {
        Ok(body) => (StatusCode::OK, body),
        Err(e) => (e.status, e.body()),
    };
    match fault {
        Some(FaultKind::DropField { field }) => drop_field(&mut body, field),
        Some(FaultKind::Truncated) => return truncated(status, &body),
        Some(FaultKind::Malformed) => return malformed(),
        _ => {}
    }
    (status, Json(body)).into_response()
}

fn drop_field(body: &mut Value, field: &str) {
    if let Some(rows) = body.get_mut("data").and_then(Value::as_array_mut) {
        for row in rows.iter_mut().filter_map(Value::as_object_mut) {
            row.remove(field);
        }
    }
}

fn truncated(status: StatusCode, body: &Value) -> Response {
    match serde_json::to_vec(body) {
        Ok(mut bytes) => {
            bytes.truncate(bytes.len() / 2);
            (status, [(header::CONTENT_TYPE, "application/json")], bytes).into_response()
        }
        Err(e) => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string())
            .into_response(),
    }
}

fn malformed() -> Response {
    let page = "<html><head><title>502 Bad Gateway</title></head><body><h1>Bad Gateway</h1></body></html>\n";
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        page,
    )
        .into_response()
}

fn rate_limited(retry_after_secs: u64) -> Response {
    let err = ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        "rate_limited",
        "too many requests, retry later",
    );
    let mut res = err.into_response();
    res.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs));
    res
}

fn server_error(status: u16) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let code = match status {
        StatusCode::BAD_GATEWAY => "bad_gateway",
        StatusCode::SERVICE_UNAVAILABLE => "unavailable",
        StatusCode::GATEWAY_TIMEOUT => "gateway_timeout",
        _ => "internal",
    };
    ApiError::new(status, code, "simulated server error").into_response()
}

// ---------------------------------------------------------------------------
// Errors.
// ---------------------------------------------------------------------------

/// An error answer: `{"error": {"code", "message"}}`.
#[derive(Debug)]
struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }

    fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    fn body(&self) -> Value {
        json!({ "error": { "code": self.code, "message": self.message } })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body())).into_response()
    }
}

// ---------------------------------------------------------------------------
// Query strings and cursors.
// ---------------------------------------------------------------------------

/// A `[start, end)` pair.
type Bounds = (DateTime<Utc>, DateTime<Utc>);

/// A list query: window, paging, session and label filters.
#[derive(Debug, Default)]
struct ListQuery {
    start: Option<DateTime<Utc>>,
    end: Option<DateTime<Utc>>,
    limit: usize,
    cursor: Option<String>,
    session_id: Option<String>,
    labels: Vec<(String, String)>,
}

impl ListQuery {
    /// Parses the raw query string; unknown or repeated parameters are a 400.
    fn parse(raw: Option<&str>, allow_session: bool) -> Result<ListQuery, ApiError> {
        let mut q = ListQuery {
            limit: MAX_LIMIT,
            ..ListQuery::default()
        };
        let mut seen = Vec::new();
        for (key, value) in url::form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
            if let Some(label) = key.strip_prefix("metadata.") {
                if label.is_empty() {
                    return Err(ApiError::bad_request("metadata.: empty label name"));
                }
                q.labels.push((label.to_string(), value.into_owned()));
                continue;
            }
            if seen.contains(&key) {
                return Err(ApiError::bad_request(format!(
                    "{key}: given more than once"
                )));
            }
            match key.as_ref() {
                "start" => q.start = Some(parse_time("start", &value)?),
                "end" => q.end = Some(parse_time("end", &value)?),
                "limit" => q.limit = parse_limit(&value)?,
                "cursor" => q.cursor = Some(value.to_string()),
                "session_id" if allow_session => q.session_id = Some(value.to_string()),
                other => {
                    return Err(ApiError::bad_request(format!(
                        "{other}: unknown query parameter"
                    )));
                }
            }
            seen.push(key);
        }
        Ok(q)
    }

    /// `[start, end)` when both are given, `None` when neither is.
    fn window(&self) -> Result<Option<Bounds>, ApiError> {
        match (self.start, self.end) {
            (None, None) => Ok(None),
            (Some(start), Some(end)) if end < start => {
                Err(ApiError::bad_request("end: before start"))
            }
            (Some(start), Some(end)) => Ok(Some((start, end))),
            _ => Err(ApiError::bad_request("start and end go together")),
        }
    }

    /// What a cursor is bound to: route, window, session and label filters.
    fn fingerprint(&self, route: &str) -> u64 {
        let mut labels: Vec<String> = self
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        labels.sort();
        let start = self.start.map(|t| format_ts(&t)).unwrap_or_default();
        let end = self.end.map(|t| format_ts(&t)).unwrap_or_default();
        let mut parts = vec![
            route,
            &start,
            &end,
            self.session_id.as_deref().unwrap_or(""),
        ];
        parts.extend(labels.iter().map(String::as_str));
        fnv1a(&parts)
    }

    /// Where the page starts: 0, or the position in the cursor.
    fn position(&self, fingerprint: u64) -> Result<usize, ApiError> {
        self.cursor
            .as_deref()
            .map_or(Ok(0), |c| decode_cursor(c, fingerprint))
    }
}

fn parse_time(name: &str, value: &str) -> Result<DateTime<Utc>, ApiError> {
    DateTime::parse_from_rfc3339(value)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|_| {
            ApiError::bad_request(format!(
                "{name}: expected an RFC 3339 timestamp, got `{value}`"
            ))
        })
}

fn parse_limit(value: &str) -> Result<usize, ApiError> {
    value
        .parse::<usize>()
        .ok()
        .filter(|n| (1..=MAX_LIMIT).contains(n))
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "limit: expected an integer from 1 to {MAX_LIMIT}, got `{value}`"
            ))
        })
}

/// 64-bit FNV-1a over the parts, each followed by a separator byte.
fn fnv1a(parts: &[&str]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for byte in part.bytes().chain([0xff]) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

fn encode_cursor(pos: usize, fingerprint: u64) -> String {
    URL_SAFE_NO_PAD.encode(format!("offset:{pos}:{fingerprint:016x}"))
}

fn decode_cursor(cursor: &str, fingerprint: u64) -> Result<usize, ApiError> {
    let bad = || ApiError::bad_request("cursor: not a cursor of this query");
    let bytes = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| bad())?;
    let text = String::from_utf8(bytes).map_err(|_| bad())?;
    let rest = text.strip_prefix("offset:").ok_or_else(bad)?;
    let (pos, fp) = rest.split_once(':').ok_or_else(bad)?;
    let pos = pos.parse::<usize>().map_err(|_| bad())?;
    let fp = u64::from_str_radix(fp, 16).map_err(|_| bad())?;
    if fp == fingerprint {
        Ok(pos)
    } else {
        Err(bad())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use crate::scenario::{ScenarioParams, generate};
    use std::time::{Duration, Instant};

    const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/seed-window.json");
    const START: &str = "2026-10-11T11:24:00Z";
    const END: &str = "2026-10-11T11:32:00Z";

    async fn fixture_server() -> SimServer {
        let d = Dataset::from_fixture(FIXTURE).unwrap();
        SimServer::start(Arc::new(d), SimOptions::default())
            .await
            .unwrap()
    }

    async fn get(s: &SimServer, path: &str, query: &[(&str, &str)]) -> reqwest::Response {
        reqwest::Client::new()
            .get(format!("{}{path}", s.base_url()))
            .bearer_auth(DEFAULT_ADMIN_KEY)
            .query(query)
            .send()
            .await
            .unwrap()
    }

    async fn get_json(s: &SimServer, path: &str, query: &[(&str, &str)]) -> Value {
        let res = get(s, path, query).await;
        assert_eq!(res.status(), 200);
        res.json().await.unwrap()
    }

    /// Walks every page; returns the rows and the number of pages.
    async fn walk(s: &SimServer, path: &str, query: &[(&str, &str)]) -> (Vec<Value>, usize) {
        let (mut rows, mut pages) = (Vec::new(), 0);
        let mut cursor: Option<String> = None;
        loop {
            let mut q = query.to_vec();
            if let Some(c) = &cursor {
                q.push(("cursor", c));
            }
            let body = get_json(s, path, &q).await;
            pages += 1;
            rows.extend(body["data"].as_array().unwrap().iter().cloned());
            match body["next_cursor"].as_str() {
                Some(c) => cursor = Some(c.to_string()),
                None => {
                    assert!(body["next_cursor"].is_null());
                    return (rows, pages);
                }
            }
        }
    }

    fn ids(rows: &[Value], key: &str) -> Vec<String> {
        rows.iter()
            .map(|r| r[key].as_str().unwrap().to_string())
            .collect()
    }

    async fn assert_error(res: reqwest::Response, status: u16, code: &str) -> Value {
        assert_eq!(res.status(), status);
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["error"]["code"], code, "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty())
        );
        body
    }

    #[tokio::test]
    async fn pages_of_seven_return_every_session_once_in_order() {
        let s = fixture_server().await;
        let (rows, pages) = walk(
            &s,
            "/sessions",
            &[("start", START), ("end", END), ("limit", "7")],
        )
        .await;
        assert_eq!(pages, 4);
        let expected: Value =
            serde_json::from_str(&std::fs::read_to_string(FIXTURE).unwrap()).unwrap();
        assert_eq!(Value::Array(rows), expected["data"]);
        s.shutdown().await.unwrap();
    }

    #[tokio::test]
    async fn pagination_over_generated_traffic_matches_the_dataset() {
        let d = generate(&ScenarioParams {
            sessions_per_day: 400,
            days: 1,
            ..ScenarioParams::default()
        });
        let s = SimServer::start(Arc::new(d), SimOptions::default())
            .await
            .unwrap();
        let (start, end) = ("2026-11-02T12:00:00Z", "2026-11-02T16:00:00Z");
        let (rows, pages) = walk(
            &s,
            "/sessions",
            &[("start", start), ("end", end), ("limit", "7")],
        )
        .await;
        let got = ids(&rows, "session_id");
        let want = s.dataset().sessions_in(
            parse_time("s", start).unwrap(),
            parse_time("e", end).unwrap(),
            &[],
            None,
        );
        assert_eq!(got, ids(&want, "session_id"));
        assert!(got.len() > 50 && pages == got.len().div_ceil(7));
        let mut unique = got.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), got.len());
        let keys: Vec<_> = rows
            .iter()
            .map(|r| {
                (
                    r["first_request_at"].as_str().unwrap(),
                    r["session_id"].as_str().unwrap(),
                )
            })
            .collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]));

        let (reqs, _) = walk(
            &s,
            "/requests",
            &[("start", start), ("end", "2026-11-02T13:00:00Z")],
        )
        .await;
        let times: Vec<_> = reqs
            .iter()
            .map(|r| {
                (
                    r["created_at"].as_str().unwrap(),
                    r["request_id"].as_str().unwrap(),
                )
            })
            .collect();
        assert!(times.len() > 50 && times.windows(2).all(|w| w[0] < w[1]));
        assert!(
            times
                .iter()
                .all(|(t, _)| *t >= start && *t < "2026-11-02T13:00:00Z")
        );
    }

    #[tokio::test]
    async fn bad_queries_are_400() {
        let s = fixture_server().await;
        let window = [("start", START), ("end", END)];
        for limit in ["51", "0", "abc", "-1", ""] {
            let q = [window[0], window[1], ("limit", limit)];
            assert_error(get(&s, "/sessions", &q).await, 400, "bad_request").await;
        }
        assert_error(
            get(&s, "/sessions", &[("start", START)]).await,
            400,
            "bad_request",
        )
        .await;
        assert_error(
            get(&s, "/sessions", &[("start", "yesterday"), ("end", END)]).await,
            400,
            "bad_request",
        )
        .await;
        assert_error(
            get(&s, "/sessions", &[("start", END), ("end", START)]).await,
            400,
            "bad_request",
        )
        .await;
        assert_error(
            get(&s, "/sessions", &[window[0], window[1], ("cursor", "xyz")]).await,
            400,
            "bad_request",
        )
        .await;
        assert_error(
            get(&s, "/sessions", &[window[0], window[1], ("colour", "red")]).await,
            400,
            "bad_request",
        )
        .await;
        assert_error(get(&s, "/requests", &[]).await, 400, "bad_request").await;
        // A cursor only works for the query it came from.
        let first = get_json(&s, "/sessions", &[window[0], window[1], ("limit", "5")]).await;
        let cursor = first["next_cursor"].as_str().unwrap();
        let other = [
            ("start", START),
            ("end", "2026-10-11T11:31:00Z"),
            ("cursor", cursor),
        ];
        assert_error(get(&s, "/sessions", &other).await, 400, "bad_request").await;
        let label = [
            window[0],
            window[1],
            ("metadata.feature", "search"),
            ("cursor", cursor),
        ];
        assert_error(get(&s, "/sessions", &label).await, 400, "bad_request").await;
        let same = get_json(
            &s,
            "/sessions",
            &[window[0], window[1], ("limit", "50"), ("cursor", cursor)],
        )
        .await;
        assert_eq!(same["data"].as_array().unwrap().len(), 21);
        assert!(
            get_json(&s, "/sessions", &[("start", START), ("end", START)]).await["data"]
                .as_array()
                .unwrap()
                .is_empty()
        );
    }

    #[tokio::test]
    async fn every_route_needs_the_admin_key() {
        let s = fixture_server().await;
        let client = reqwest::Client::new();
        for path in ["/sessions", "/requests", "/models"] {
            let url = format!("{}{path}", s.base_url());
            assert_error(client.get(&url).send().await.unwrap(), 401, "unauthorized").await;
            let wrong = client
                .get(&url)
                .bearer_auth("not-the-key")
                .send()
                .await
                .unwrap();
            assert_error(wrong, 401, "unauthorized").await;
        }
        assert_error(get(&s, "/nothing-here", &[]).await, 404, "not_found").await;
        assert_eq!(s.stats().hits("/v1/models"), 2);
    }

    #[tokio::test]
    async fn models_and_requests_follow_the_contract() {
        let s = fixture_server().await;
        let models = get_json(&s, "/models", &[]).await;
        assert_eq!(models["data"][0]["id"], "gpt-6-luna");
        assert_eq!(models["data"][1]["cached_input_usd_per_mtok"], 0.25);
        let (rows, pages) = walk(
            &s,
            "/requests",
            &[("session_id", "retry-loop-7f2e81c09ab5"), ("limit", "3")],
        )
        .await;
        assert_eq!((rows.len(), pages), (10, 4));
        assert_eq!(rows[0]["error_type"], "RateLimitError");
        assert_eq!(rows[9]["status"], "success");
        let keys: Vec<&String> = rows[0].as_object().unwrap().keys().collect();
        assert_eq!(keys.len(), 14);
        let (window, _) = walk(
            &s,
            "/requests",
            &[
                ("start", START),
                ("end", END),
                ("metadata.feature", "triage"),
            ],
        )
        .await;
        assert_eq!(window.len(), 10);
        let unknown = get_json(&s, "/requests", &[("session_id", "nope")]).await;
        assert_eq!(unknown, json!({"data": [], "next_cursor": null}));
    }

    #[tokio::test]
    async fn metadata_filters_are_exact_and_combined() {
        let s = fixture_server().await;
        let w = [("start", START), ("end", END)];
        let rows = |v: Value| v["data"].as_array().unwrap().clone();
        let latency = rows(
            get_json(
                &s,
                "/sessions",
                &[w[0], w[1], ("metadata.feature", "latency-test")],
            )
            .await,
        );
        assert_eq!(latency.len(), 4);
        let both = [
            w[0],
            w[1],
            ("metadata.feature", "checkout"),
            ("metadata.case", "retry-loop"),
        ];
        assert_eq!(
            ids(&rows(get_json(&s, "/sessions", &both).await), "session_id"),
            ["retry-loop-7f2e81c09ab5"]
        );
        let none = [
            w[0],
            w[1],
            ("metadata.feature", "search"),
            ("metadata.case", "retry-loop"),
        ];
        assert!(rows(get_json(&s, "/sessions", &none).await).is_empty());
    }

    #[tokio::test]
    async fn set_now_changes_a_session_spanning_the_horizon() {
        let s = fixture_server().await;
        let q = [
            ("start", START),
            ("end", END),
            ("metadata.case", "retry-loop"),
        ];
        let full = get_json(&s, "/sessions", &q).await;
        assert_eq!(full["data"][0]["requests"], 10);
        s.set_now(Some(parse_time("now", "2026-10-11T11:28:30Z").unwrap()));
        let early = get_json(&s, "/sessions", &q).await;
        assert_eq!(early["data"][0]["requests"], 4);
        assert_eq!(early["data"][0]["errors"], 4);
        let reqs = get_json(
            &s,
            "/requests",
            &[("session_id", "retry-loop-7f2e81c09ab5")],
        )
        .await;
        assert_eq!(reqs["data"].as_array().unwrap().len(), 4);
        s.set_now(None);
        assert_eq!(get_json(&s, "/sessions", &q).await, full);
    }

    #[tokio::test]
    async fn queued_faults_are_served_once_in_order() {
        let s = fixture_server().await;
        let f = s.faults();
        let w = [("start", START), ("end", END)];
        f.push(Fault::on(
            FaultPath::Models,
            FaultKind::ServerError { status: 503 },
        ));
        f.push(Fault::any(FaultKind::RateLimit {
            retry_after_secs: 7,
        }));
        f.push(Fault::on(
            FaultPath::Sessions,
            FaultKind::ServerError { status: 502 },
        ));

        let res = get(&s, "/sessions", &w).await;
        assert_eq!(res.headers()["retry-after"], "7");
        assert_error(res, 429, "rate_limited").await;
        assert_error(get(&s, "/sessions", &w).await, 502, "bad_gateway").await;
        assert_eq!(get(&s, "/sessions", &w).await.status(), 200);
        assert_eq!(f.pending(), 1);
        assert_error(get(&s, "/models", &[]).await, 503, "unavailable").await;
        assert_eq!(get(&s, "/models", &[]).await.status(), 200);
        assert_eq!(
            (f.pending(), f.served(), s.stats().faults_served),
            (0, 3, 3)
        );
        assert_eq!(s.stats().hits("/v1/sessions"), 3);
    }

    #[tokio::test]
    async fn damaged_bodies() {
        let s = fixture_server().await;
        let f = s.faults();
        let w = [("start", START), ("end", END)];
        f.push(Fault::on(FaultPath::Sessions, FaultKind::Truncated));
        let res = get(&s, "/sessions", &w).await;
        assert_eq!(res.status(), 200);
        let text = res.text().await.unwrap();
        assert!(text.starts_with("{\"data\":[{") && text.len() > 1000);
        assert!(serde_json::from_str::<Value>(&text).is_err());

        f.push(Fault::on(FaultPath::Sessions, FaultKind::Malformed));
        let res = get(&s, "/sessions", &w).await;
        assert_eq!(res.status(), 200);
        assert!(serde_json::from_str::<Value>(&res.text().await.unwrap()).is_err());

        f.push(Fault::on(
            FaultPath::Sessions,
            FaultKind::DropField {
                field: "cost_usd".into(),
            },
        ));
        let body = get_json(&s, "/sessions", &w).await;
        let rows = body["data"].as_array().unwrap();
        assert_eq!(rows.len(), 26);
        assert!(
            rows.iter()
                .all(|r| r.get("cost_usd").is_none() && r.get("input_tokens").is_some())
        );
        assert!(
            get_json(&s, "/sessions", &w).await["data"][0]
                .get("cost_usd")
                .is_some()
        );
    }

    #[tokio::test]
    async fn delay_then_serve_normally() {
        let s = fixture_server().await;
        s.faults().push(Fault::on(
            FaultPath::Models,
            FaultKind::Delay { millis: 150 },
        ));
        let t = Instant::now();
        assert_eq!(
            get_json(&s, "/models", &[]).await["data"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
        assert!(t.elapsed() >= Duration::from_millis(150));
    }

    #[tokio::test]
    async fn persistent_fault_is_an_outage_until_cleared() {
        let s = fixture_server().await;
        let f = s.faults();
        f.set_persistent(Some(Fault::on(
            FaultPath::Sessions,
            FaultKind::ServerError { status: 503 },
        )));
        let w = [("start", START), ("end", END)];
        for _ in 0..3 {
            assert_eq!(get(&s, "/sessions", &w).await.status(), 503);
        }
        assert_eq!(get(&s, "/models", &[]).await.status(), 200);
        f.set_persistent(None);
        assert_eq!(get(&s, "/sessions", &w).await.status(), 200);
        assert_eq!(f.served(), 3);
    }

    #[tokio::test]
    async fn shutdown_stops_listening() {
        let s = fixture_server().await;
        let url = format!("{}/models", s.base_url());
        s.shutdown().await.unwrap();
        assert!(reqwest::Client::new().get(&url).send().await.is_err());
    }

    #[test]
    fn cursors_round_trip_and_reject_tampering() {
        let c = encode_cursor(42, 0xdead_beef);
        assert_eq!(decode_cursor(&c, 0xdead_beef).unwrap(), 42);
        assert!(decode_cursor(&c, 0xdead_bee0).is_err());
        assert!(decode_cursor("b2Zmc2V0OjUw", 0xdead_beef).is_err());
    }
}

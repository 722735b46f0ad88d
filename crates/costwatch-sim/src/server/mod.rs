//! The simulator's HTTP server: the gateway's REST contract
//! (gateway-api.md section 1) on loopback, with injectable faults.
//!
//! Routes (all need `Authorization: Bearer <admin key>`):
//! - `GET /v1/sessions?start&end&limit&cursor&metadata.<k>=<v>`
//! - `GET /v1/requests?session_id=...` or `?start&end`, same paging and filters
//! - `GET /v1/models`
//! - `POST /v1/mcp`: the same data as MCP tools ([`super::mcp`])
//! - `GET /api/public/v2/observations`: the same data as Langfuse's
//!   observations API, with its own keys ([`super::langfuse`])
//!
//! Cursors are opaque: base64 of a position plus a fingerprint of the query
//! they belong to, so a cursor replayed against another query is a 400
//! (`crate::cursor`).
//!
//! Layout: this file holds the server and its state; `routes` the
//! handlers and the error body, `query` the query strings, `faults` the
//! REST faults and how they damage answers.

mod faults;
mod query;
mod routes;
#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;

pub use self::faults::{Fault, FaultHandle, FaultKind, FaultPath, RandomFaults};
pub use crate::cursor::MAX_LIMIT;

use crate::dataset::Dataset;
use crate::http::Listening;
use crate::langfuse::LangfuseSim;
use crate::litellm::LiteLlmSim;
use crate::mcp::{McpMode, McpSim};
use axum::Router;
use axum::middleware;
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

/// The default admin key the simulator accepts.
pub const DEFAULT_ADMIN_KEY: &str = "sim-admin-key";

/// Where the simulator listens and which key it accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimOptions {
    /// Address to bind; port 0 picks a free port.
    pub bind: SocketAddr,
    /// The admin key every request must carry; Langfuse's secret key too.
    pub admin_key: String,
    /// The Langfuse public key the observations API accepts.
    pub langfuse_public_key: String,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            admin_key: DEFAULT_ADMIN_KEY.to_string(),
            langfuse_public_key: crate::langfuse::DEFAULT_PUBLIC_KEY.to_string(),
        }
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
    langfuse: LangfuseSim,
}

impl Shared {
    /// The aggregation horizon now (`None`: every call exists).
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
    listening: Listening,
    shared: Arc<Shared>,
    litellm: LiteLlmSim,
}

impl fmt::Debug for SimServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimServer")
            .field("addr", &self.addr())
            .finish_non_exhaustive()
    }
}

impl SimServer {
    /// Binds `opts.bind` and serves `dataset` until shut down.
    pub async fn start(dataset: Arc<Dataset>, opts: SimOptions) -> std::io::Result<SimServer> {
        let mcp = McpSim::new(dataset.clone(), opts.admin_key.clone(), McpMode::Json);
        let langfuse = LangfuseSim::new(
            dataset.clone(),
            opts.langfuse_public_key,
            opts.admin_key.clone(),
        );
        let shared = Arc::new(Shared {
            dataset,
            admin_key: opts.admin_key,
            faults: FaultHandle::new(),
            hits: Mutex::new(BTreeMap::new()),
            horizon: RwLock::new(Horizon::All),
            mcp,
            langfuse,
        });
        let horizon = shared.clone();
        let litellm = LiteLlmSim::new(
            shared.dataset.clone(),
            shared.admin_key.clone(),
            Arc::new(move || horizon.now()),
        );
        let listening = Listening::start(opts.bind, router(shared.clone(), &litellm)).await?;
        tracing::debug!(addr = %listening.addr(), "gateway simulator listening");
        Ok(SimServer {
            listening,
            shared,
            litellm,
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.listening.addr()
    }

    /// The API base URL, e.g. `http://127.0.0.1:40123/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr())
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
        format!("http://{}/v1/mcp", self.addr())
    }

    /// The LiteLLM proxy's routes on the same data (setup, faults).
    pub fn litellm(&self) -> &LiteLlmSim {
        &self.litellm
    }

    /// The LiteLLM proxy's base URL, e.g. `http://127.0.0.1:40123`.
    pub fn litellm_url(&self) -> String {
        format!("http://{}", self.addr())
    }

    /// The Langfuse observations API (keys, faults, how calls are written).
    pub fn langfuse(&self) -> &LangfuseSim {
        &self.shared.langfuse
    }

    /// The Langfuse host's base URL, e.g. `http://127.0.0.1:40123`.
    pub fn langfuse_url(&self) -> String {
        format!("http://{}", self.addr())
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
    pub async fn shutdown(self) -> std::io::Result<()> {
        self.listening.shutdown().await
    }
}

fn router(shared: Arc<Shared>, litellm: &LiteLlmSim) -> Router {
    routes::routes()
        .route_layer(middleware::from_fn_with_state(
            shared.clone(),
            routes::authorize,
        ))
        .merge(litellm.router())
        .nest_service("/v1/mcp", shared.mcp.router())
        .nest_service("/api/public", langfuse_router(&shared))
        .fallback(routes::not_found)
        .layer(middleware::from_fn_with_state(
            shared.clone(),
            routes::count_hit,
        ))
        .with_state(shared)
}

/// Langfuse's routes below `/api/public`, on the simulator's horizon.
fn langfuse_router(shared: &Arc<Shared>) -> Router {
    let sh = shared.clone();
    crate::langfuse::router(shared.langfuse.clone(), Arc::new(move || sh.now()))
}

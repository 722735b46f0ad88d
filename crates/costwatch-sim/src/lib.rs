//! The built-in gateway simulator: an honest stand-in for the hosted gateway.
//!
//! It serves the reference gateway REST contract (gateway-api.md section 1:
//! `GET /v1/sessions`, `/v1/requests`, `/v1/models`, admin-key auth, cursor
//! pagination, JSON errors) on loopback, from either the seed fixture
//! ([`Dataset::from_fixture`]) or generated, labelled traffic
//! ([`scenario::generate`], and the adversarial family
//! [`scenario::adversarial::generate`]), and can inject faults
//! ([`FaultHandle`]) such as rate limits, outages, truncated or malformed
//! bodies, missing fields, cursors that cycle and listings that never end,
//! queued one by one or drawn at random ([`RandomFaults`]).
//!
//! It is the outside world: it has its own JSON shapes and never uses the
//! crate's `source` records. `costwatch demo`, the backtest and the
//! integration tests run against it.
//!
//! Modules, in reading order: `dataset` (what is served) and `scenario` (how
//! generated traffic is made); `server` (the REST contract) and `mcp` (the
//! MCP tools, section 2), which page with the shared `cursor` tokens and
//! inject faults through the shared `faults` queue; `langfuse` (Langfuse's
//! public observations API, v2, on the same data); `otlp` (the same data
//! as OpenTelemetry GenAI spans: OTLP export requests, the Collector's
//! file exporter's files, an OTLP/HTTP client); `model` (a scripted
//! OpenAI-compatible model, section 3); `alertmanager` (Alertmanager's
//! `POST /api/v2/alerts` and the way it keeps alerts, on a supplied clock);
//! `http` (the loopback listener and bearer keys the servers use); `rng`
//! (the seeded random source).

pub mod dataset;
pub mod scenario;

mod cursor;
mod faults;
pub mod langfuse;
pub mod mcp;
pub mod server;

pub mod alertmanager;
mod http;
pub mod litellm;
pub mod model;
pub mod otlp;
pub mod rng;

pub use dataset::{Dataset, DatasetError, SimModel, SimRequest, SimSession, Truth};
pub use scenario::{ScenarioParams, generate};
pub use server::{
    Fault, FaultHandle, FaultKind, FaultPath, RandomFaults, SimOptions, SimServer, SimStats,
};

/// The seed window (26 sessions, one example of each anomaly beside its fixed
/// twin) that `costwatch demo` starts with, built into the binary.
pub const SEED_WINDOW: &str = include_str!("../data/seed-window.json");

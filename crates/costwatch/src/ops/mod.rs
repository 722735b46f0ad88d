//! Running as a service: the counters the daemon keeps, the HTTP endpoint
//! that exposes them with a health check and a status page, the systemd
//! notify protocol, and whether the tick in progress is stuck.
//!
//! Nothing here decides anything about LLM spend; the daemon calls into these
//! pieces and they report what they are told.

pub mod http;
pub mod metrics;
pub mod stall;
pub mod status;
pub mod systemd;

pub use http::{HealthReport, serve};
pub use metrics::Metrics;

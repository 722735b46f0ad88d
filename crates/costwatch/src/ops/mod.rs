//! Running as a service: the counters the daemon keeps, the HTTP endpoint
//! that exposes them with a health check, and the systemd notify protocol.
//!
//! Nothing here decides anything about LLM spend; the daemon calls into these
//! pieces and they report what they are told.

pub mod http;
pub mod metrics;
pub mod systemd;

pub use http::{HealthReport, serve};
pub use metrics::Metrics;

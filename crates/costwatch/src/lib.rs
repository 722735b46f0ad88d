//! costwatch finds wasted LLM spend in an LLM gateway's logs.
//!
//! Modules in reading order: where time and secrets come from, the shared
//! domain words, how untrusted text is printed, the configuration, the
//! source of sessions, the pure detectors, the state store, and the window
//! pipeline that ties them together, and `app`, the composition root that
//! builds them from a configuration. The command line lives in the binary.
//! The simulator and the benchmark harness are crates of their own
//! (`costwatch-sim`, `costwatch-bench`).

pub mod clock;
pub(crate) mod decode;
pub mod domain;
pub mod http;
pub(crate) mod limits;
pub mod printable;
pub mod secret;
pub mod settings;

pub mod config;
pub mod pricing;
pub mod source;

pub mod detect;
pub mod incidents;
pub mod investigate;
pub mod notify;
pub mod schedule;
pub mod silence;
pub mod store;

pub mod alerting;
pub mod app;
pub mod backtest;
pub mod daemon;
pub mod escalate;
pub mod ingest;
pub mod logtools;
pub mod mcp_server;
pub mod ops;
pub mod pipeline;

//! costwatch finds wasted LLM spend in an LLM gateway's logs.
//!
//! Modules in reading order: where time and secrets come from, the
//! configuration, the source of sessions, the pure detectors, the state store,
//! the window pipeline that ties them together, and the built-in simulator.

pub mod clock;
pub mod secret;

pub mod config;
pub mod source;

pub mod detect;
pub mod incidents;
pub mod investigate;
pub mod notify;
pub mod store;

pub mod app;
pub mod backtest;
pub mod bench;
pub mod daemon;
pub mod escalate;
pub mod ops;
pub mod pipeline;

pub mod sim;

pub mod cli;

//! The integration tests: the daemon's pieces over real loopback HTTP against
//! the built-in gateway simulator, with real SQLite files, and the built binary.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod builtin_tools;
mod chart;
mod cli;
mod conformance;
mod daemon;
mod deadline;
mod delivery;
mod dry_run;
mod economy;
mod email;
mod episodes;
mod evaluation;
mod faults;
mod first_hour;
mod investigation;
mod langfuse;
mod langfuse_mcp;
mod layers;
mod litellm;
mod llama;
mod mcp;
mod mcp_server;
mod operator;
mod otel_genai_interop;
mod otel_interop;
mod otlp_receiver;
mod pg;
mod pictures;
mod pipeline;
mod postgres;
mod replicas;
mod reposts;
mod seed;
mod service;
mod silences;
mod source;
mod sources_cli;
mod status;
mod support;

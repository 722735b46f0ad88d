//! The client on loopback: against the simulator's MCP server (`legacy`,
//! the reference gateway as it is: the `initialize` era) and against a
//! scripted server (`modern`: revision 2026-07-28, the fallback, and the
//! refusals that decide between them).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod fake;
mod legacy;
mod modern;

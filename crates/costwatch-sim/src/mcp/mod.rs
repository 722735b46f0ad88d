//! The simulator's MCP server: the gateway's read-only log tools
//! (gateway-api.md section 2) over MCP Streamable HTTP, from the same
//! dataset as the REST routes.
//!
//! One endpoint (`POST /`, mounted at `/v1/mcp` by [`super::SimServer`])
//! speaks JSON-RPC 2.0 in the `initialize` era of the protocol (revisions
//! 2025-03-26 and 2025-06-18):
//! - `initialize` opens a session and returns its id in `Mcp-Session-Id`;
//!   every later message must carry it (a missing id is a 400, an unknown or
//!   expired one a 404), and `MCP-Protocol-Version`, when sent, must be a
//!   supported revision;
//! - `tools/list` is paginated ([`TOOLS_PAGE_SIZE`] tools a page,
//!   `nextCursor`) so clients have to follow cursors;
//! - `tools/call` answers with text written for a model: the rows of the REST
//!   contract as compact JSON. Bad arguments give a result with
//!   `isError: true` and a message the model can act on; an unknown tool is a
//!   JSON-RPC error.
//!
//! Every message needs `Authorization: Bearer <admin key>` (401 otherwise),
//! an `Accept` naming both `application/json` and `text/event-stream` (406),
//! `Content-Type: application/json` (415) and `X-MCP-Readonly: true` (400):
//! tools that change anything never exist here. Without `logs` in
//! `X-MCP-Toolsets` only the model catalogue tools are served.
//!
//! Answers are `application/json` or one `text/event-stream` response per
//! [`McpMode`]. The SSE form is deliberately awkward, as real servers may be:
//! CRLF line ends, a comment, an empty priming event, a log notification
//! before the response, and the response's JSON split over several `data:`
//! lines.
//!
//! Tests inspect what arrived with [`McpSim::calls`] and break things with
//! [`McpFaults`] (huge results, hangs, JSON-RPC errors, HTTP errors, delays)
//! or [`McpSim::expire_sessions`].
//!
//! Layout: this file holds the endpoint's state and test handles;
//! `transport` the HTTP handlers and header checks, `session` the
//! `Mcp-Session-Id` sessions, `wire` the JSON-RPC messages and the event
//! stream, `tools` the tool list and the tools, `args` their arguments,
//! `calls` the record of what arrived, `faults` the MCP faults.

mod args;
mod calls;
mod faults;
mod session;
#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;
mod tools;
mod transport;
mod wire;

pub use self::calls::McpCall;
pub use self::faults::{McpFault, McpFaultKind, McpFaults};
pub use self::tools::tool_specs;
pub use crate::cursor::MAX_LIMIT;

use self::session::Session;
use crate::dataset::Dataset;
use crate::http::bearer;
use axum::Router;
use axum::http::HeaderMap;
use axum::routing::post;
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// The protocol revisions the simulator speaks, newest first.
pub const PROTOCOL_VERSIONS: [&str; 2] = ["2025-06-18", "2025-03-26"];
/// Tools per `tools/list` page (small, so clients must follow `nextCursor`).
pub const TOOLS_PAGE_SIZE: usize = 4;
/// The most label pairs a filter may hold.
pub const MAX_LABELS: usize = 5;
/// How long a [`McpFaultKind::Hang`] holds a call at most, unless released.
pub const HANG_FOR: Duration = Duration::from_secs(600);

/// How the simulator answers a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum McpMode {
    /// One `application/json` body.
    #[default]
    Json,
    /// A `text/event-stream` carrying the response as one event.
    Sse,
}

/// State shared by the handlers.
struct McpShared {
    dataset: Arc<Dataset>,
    admin_key: String,
    mode: Mutex<McpMode>,
    faults: McpFaults,
    calls: Mutex<Vec<McpCall>>,
    sessions: Mutex<HashMap<String, Session>>,
    next_session: AtomicU64,
}

/// The simulated MCP endpoint and its test handles. Cheap to clone; clones
/// share state.
#[derive(Clone)]
pub struct McpSim {
    shared: Arc<McpShared>,
}

impl fmt::Debug for McpSim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpSim")
            .field("mode", &self.mode())
            .finish_non_exhaustive()
    }
}

impl McpSim {
    /// An endpoint serving `dataset` to holders of `admin_key`.
    pub fn new(dataset: Arc<Dataset>, admin_key: impl Into<String>, mode: McpMode) -> McpSim {
        McpSim {
            shared: Arc::new(McpShared {
                dataset,
                admin_key: admin_key.into(),
                mode: Mutex::new(mode),
                faults: McpFaults::new(),
                calls: Mutex::new(Vec::new()),
                sessions: Mutex::new(HashMap::new()),
                next_session: AtomicU64::new(1),
            }),
        }
    }

    /// The axum router, serving the endpoint at `/` (nest it where it
    /// belongs, e.g. `/v1/mcp`).
    pub fn router(&self) -> Router {
        Router::new()
            .route(
                "/",
                post(transport::handle_post)
                    .get(transport::handle_get)
                    .delete(transport::handle_delete),
            )
            .with_state(self.shared.clone())
    }

    /// How answers are sent.
    pub fn mode(&self) -> McpMode {
        self.shared.mode()
    }

    /// Switches between JSON and SSE answers.
    pub fn set_mode(&self, mode: McpMode) {
        *self
            .shared
            .mode
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = mode;
    }

    /// The handle to inject faults with.
    pub fn faults(&self) -> McpFaults {
        self.shared.faults.clone()
    }

    /// Every request received so far, oldest first (rejected ones included).
    pub fn calls(&self) -> Vec<McpCall> {
        self.shared
            .calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// How many requests carried JSON-RPC `method` (`""`: any).
    pub fn count(&self, method: &str) -> usize {
        self.calls()
            .iter()
            .filter(|c| method.is_empty() || c.method == method)
            .count()
    }

    /// Forgets every session: the next message of a client gets a 404 and
    /// it has to initialize again.
    pub fn expire_sessions(&self) {
        self.shared.sessions_lock().clear();
    }

    /// How many sessions are open.
    pub fn open_sessions(&self) -> usize {
        self.shared.sessions_lock().len()
    }
}

/// The MCP endpoint for `dataset`, answering in `mode`, as a router serving
/// `/` (mount it at `/v1/mcp`). Use [`McpSim`] to keep test handles.
pub fn router(dataset: Arc<Dataset>, admin_key: String, mode: McpMode) -> Router {
    McpSim::new(dataset, admin_key, mode).router()
}

impl McpShared {
    /// How answers are sent now.
    fn mode(&self) -> McpMode {
        *self.mode.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the headers carry the admin key.
    fn authorized(&self, headers: &HeaderMap) -> bool {
        bearer(headers) == Some(self.admin_key.as_str())
    }
}

//! Fault injection on the MCP endpoint's `tools/call`: what can go wrong
//! ([`McpFaultKind`]), for which tool ([`McpFault`]), the handle tests use
//! ([`McpFaults`]), and what each fault does to the answer on the MCP
//! Streamable HTTP transport (gateway-api.md section 2): a huge tool result,
//! a call that never returns, a JSON-RPC error, an HTTP error status.
//!
//! Queueing, persistence, counting and the release of hanging calls are the
//! shared `crate::faults` machinery, as for the REST routes.

use super::wire::{INVALID_REQUEST, answer, rpc_error, rpc_result, tool_result, transport_error};
use super::{HANG_FOR, McpMode};
use crate::faults::{self, FaultQueue};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::Value;
use std::time::Duration;

/// What goes wrong with a `tools/call`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpFaultKind {
    /// A successful result whose text is `bytes` long (e.g. 1 MB).
    HugeText {
        /// Length of the text, in bytes.
        bytes: usize,
    },
    /// The call is never answered: it waits for [`HANG_FOR`] or until the
    /// faults are cleared, then gets a 503.
    Hang,
    /// A JSON-RPC error instead of a result.
    RpcError {
        /// The JSON-RPC error code.
        code: i64,
        /// Its message.
        message: String,
    },
    /// An HTTP error status (429 gets `Retry-After: 1`) before any JSON-RPC.
    HttpStatus {
        /// The status; an invalid one becomes 500.
        status: u16,
    },
    /// A pause before the normal answer.
    Delay {
        /// How long to wait.
        millis: u64,
    },
}

/// A fault and the tool it applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpFault {
    /// The tool whose calls fail; `None`: every tool.
    pub tool: Option<String>,
    /// What goes wrong.
    pub kind: McpFaultKind,
}

impl McpFault {
    /// A fault on calls of one tool.
    pub fn on(tool: &str, kind: McpFaultKind) -> McpFault {
        McpFault {
            tool: Some(tool.to_owned()),
            kind,
        }
    }

    /// A fault on whichever tool is called next.
    pub fn any(kind: McpFaultKind) -> McpFault {
        McpFault { tool: None, kind }
    }

    /// Whether the fault applies to a call of `tool`.
    fn matches(&self, tool: &str) -> bool {
        self.tool.as_deref().is_none_or(|t| t == tool)
    }
}

/// Injects faults into `tools/call`; cheap to clone, shareable across
/// threads (like the REST [`crate::FaultHandle`]).
///
/// Queued faults are consumed one per matching call, in order. Persistent
/// faults apply to every matching call (the first matching one wins, and
/// they take precedence over the queue) until cleared.
#[derive(Debug, Clone, Default)]
pub struct McpFaults(FaultQueue<McpFault>);

impl McpFaults {
    /// A handle with no faults.
    pub fn new() -> McpFaults {
        McpFaults::default()
    }

    /// Queues a fault for the next matching call.
    pub fn push(&self, fault: McpFault) {
        self.0.push(fault);
    }

    /// Makes every matching call fail until [`McpFaults::clear`].
    pub fn set_persistent(&self, fault: McpFault) {
        self.0.add_persistent(fault);
    }

    /// Drops every fault and releases hanging calls.
    pub fn clear(&self) {
        self.0.clear();
    }

    /// How many queued faults have not been served yet.
    pub fn pending(&self) -> usize {
        self.0.pending()
    }

    /// How many faults have been served so far.
    pub fn served(&self) -> u64 {
        self.0.served()
    }

    /// Applies the next fault for a call of `tool`, if any: the answer that
    /// replaces the normal one, or `None` to answer normally (after a delay).
    pub(super) async fn apply(&self, tool: &str, mode: McpMode, id: &Value) -> Option<Response> {
        let kind = self.0.take(|f| f.matches(tool)).map(|f| f.kind)?;
        match kind {
            McpFaultKind::HugeText { bytes } => {
                let text = huge_text(bytes);
                Some(answer(
                    mode,
                    &rpc_result(id, tool_result(text, false)),
                    None,
                ))
            }
            McpFaultKind::Hang => {
                self.0.hang(HANG_FOR).await;
                Some(transport_error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    INVALID_REQUEST,
                    "the hung call was released",
                ))
            }
            McpFaultKind::RpcError { code, message } => {
                Some(answer(mode, &rpc_error(id, code, &message), None))
            }
            McpFaultKind::HttpStatus { status } => Some(http_status(status)),
            McpFaultKind::Delay { millis } => {
                tokio::time::sleep(Duration::from_millis(millis)).await;
                None
            }
        }
    }
}

/// A text of `bytes` bytes that looks like rows, so it is not trivially
/// recognisable as padding.
fn huge_text(bytes: usize) -> String {
    let row = r#"{"request_id":"req_0000000000000000","status":"success","cost_usd":0.0001},"#;
    let mut text = String::with_capacity(bytes);
    while text.len() + row.len() <= bytes {
        text.push_str(row);
    }
    while text.len() < bytes {
        text.push(' ');
    }
    text
}

/// An HTTP error before any JSON-RPC (`Retry-After: 1` on a 429).
fn http_status(status: u16) -> Response {
    let status = faults::status(status);
    let res = transport_error(status, INVALID_REQUEST, "simulated http error");
    if status == StatusCode::TOO_MANY_REQUESTS {
        faults::retry_after(res, 1)
    } else {
        res
    }
}

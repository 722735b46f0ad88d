//! MCP sessions (Streamable HTTP, gateway-api.md section 2): `initialize`
//! opens one and returns its id in `Mcp-Session-Id`; every later message
//! must carry it (missing: 400, unknown or expired: 404).

use super::McpShared;
use super::transport::header_str;
use super::wire::{INVALID_REQUEST, transport_error};
use crate::cursor::fnv1a;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{MutexGuard, PoisonError};

/// One open session.
#[derive(Debug, Clone)]
pub(super) struct Session {
    /// The protocol revision agreed on by `initialize`.
    pub(super) protocol_version: String,
    /// Whether `notifications/initialized` arrived.
    pub(super) initialized: bool,
}

impl McpShared {
    /// The open sessions, by id.
    pub(super) fn sessions_lock(&self) -> MutexGuard<'_, HashMap<String, Session>> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Opens a session speaking `protocol_version`; returns its id.
    pub(super) fn open_session(&self, protocol_version: &str) -> String {
        let n = self.next_session.fetch_add(1, Ordering::Relaxed);
        let id = format!(
            "sim-{n:04}-{:012x}",
            fnv1a(&[&n.to_string(), "session"]) >> 16
        );
        self.sessions_lock().insert(
            id.clone(),
            Session {
                protocol_version: protocol_version.to_owned(),
                initialized: false,
            },
        );
        id
    }

    /// The session a message belongs to, or the error answer.
    pub(super) fn session(&self, headers: &HeaderMap) -> Result<(String, Session), Box<Response>> {
        let Some(id) = header_str(headers, "mcp-session-id") else {
            return Err(Box::new(transport_error(
                StatusCode::BAD_REQUEST,
                INVALID_REQUEST,
                "missing Mcp-Session-Id header: initialize first",
            )));
        };
        let session = self.sessions_lock().get(id).cloned();
        match session {
            Some(s) => Ok((id.to_owned(), s)),
            None => Err(Box::new(transport_error(
                StatusCode::NOT_FOUND,
                INVALID_REQUEST,
                "unknown or expired session: initialize again",
            ))),
        }
    }
}

//! Opening, remembering and closing the MCP session, and the headers every
//! message carries.

use super::protocol::{protocol, rejected, rpc_result};
use super::transport::{Failure, Reply};
use super::{McpClient, PROTOCOL_VERSION, SUPPORTED_VERSIONS};
use crate::investigate::InvestigateError;
use reqwest::header::AUTHORIZATION;
use serde_json::{Value, json};
use std::sync::atomic::Ordering;

/// An open MCP session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Session {
    /// `Mcp-Session-Id`; `None` when the server keeps no sessions.
    pub(super) id: Option<String>,
    /// The version the server chose in `initialize`.
    pub(super) protocol_version: String,
}

impl McpClient {
    /// Ends the session (`DELETE`), best effort; the next call opens a new one.
    pub async fn close(&self) {
        self.forget_tools();
        let Some(session) = self.session.lock().await.take() else {
            return;
        };
        if session.id.is_none() {
            return;
        }
        let request = self
            .message_request(self.http.reqwest().delete(self.url.clone()), Some(&session))
            .send();
        if let Ok(Ok(resp)) = tokio::time::timeout(self.timeout, request).await {
            tracing::debug!(status = resp.status().as_u16(), "mcp session closed");
        }
    }

    /// The open session, initializing one if there is none.
    pub(super) async fn session(&self) -> Result<Session, InvestigateError> {
        let mut guard = self.session.lock().await;
        if let Some(s) = guard.as_ref() {
            return Ok(s.clone());
        }
        let session = self.initialize().await?;
        *guard = Some(session.clone());
        Ok(session)
    }

    /// Drops `stale` if it is still the open session.
    pub(super) async fn forget(&self, stale: &Session) {
        let mut guard = self.session.lock().await;
        if guard.as_ref() == Some(stale) {
            *guard = None;
        }
    }

    /// `initialize`, then `notifications/initialized`: a new session.
    async fn initialize(&self) -> Result<Session, InvestigateError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let message = json!({
            "jsonrpc": "2.0",
            "id": id,
            "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "costwatch", "version": env!("CARGO_PKG_VERSION")},
            },
        });
        let (message, session_id) = match self.post(&message, None, Some(id), "initialize").await {
            Ok(Reply::Message {
                message,
                session_id,
            }) => (message, session_id),
            Ok(Reply::Accepted) => {
                return Err(protocol(
                    "initialize: the server answered without a response",
                ));
            }
            Err(Failure::Error(e)) => return Err(e),
            Err(Failure::SessionGone) => {
                return Err(rejected("initialize: 404 not found (check the mcp url)"));
            }
        };
        let result = rpc_result("initialize", message)?;
        let version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .ok_or_else(|| protocol("initialize: the result has no protocolVersion"))?;
        if !SUPPORTED_VERSIONS.contains(&version) {
            return Err(rejected(format!(
                "initialize: the server speaks protocol version `{}`, costwatch speaks {}",
                crate::printable::printable(version),
                SUPPORTED_VERSIONS.join(" and ")
            )));
        }
        if let Some(sid) = &session_id
            && (sid.is_empty() || !sid.bytes().all(|b| (0x21..=0x7e).contains(&b)))
        {
            return Err(protocol(
                "initialize: the Mcp-Session-Id is not visible ASCII",
            ));
        }
        let session = Session {
            id: session_id,
            protocol_version: version.to_owned(),
        };
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        match self
            .post(
                &initialized,
                Some(&session),
                None,
                "notifications/initialized",
            )
            .await
        {
            Ok(_) => {}
            Err(Failure::Error(e)) => return Err(e),
            Err(Failure::SessionGone) => {
                return Err(rejected(
                    "notifications/initialized: the server forgot the session it just opened",
                ));
            }
        }
        tracing::debug!(
            protocol_version = %session.protocol_version,
            stateful = session.id.is_some(),
            "mcp session initialized"
        );
        Ok(session)
    }

    /// `request` with the headers of every message: the admin key (a
    /// sensitive value, never logged), the read-only log toolset, and the
    /// session id and protocol version once a session is open.
    pub(super) fn message_request(
        &self,
        request: reqwest::RequestBuilder,
        session: Option<&Session>,
    ) -> reqwest::RequestBuilder {
        let mut request = request
            .header(AUTHORIZATION, self.auth.clone())
            .header("x-mcp-readonly", "true")
            .header("x-mcp-toolsets", "logs");
        if let Some(s) = session {
            if let Some(id) = &s.id {
                request = request.header("mcp-session-id", id);
            }
            request = request.header("mcp-protocol-version", &s.protocol_version);
        }
        request
    }
}

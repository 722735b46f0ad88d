//! The `initialize` era: opening a session with the handshake, closing it,
//! and the headers every message carries in either era.

use super::negotiate::Agreement;
use super::protocol::{client_info, protocol, rejected, split_response};
use super::transport::{Failure, Kind, Refusal, Reply};
use super::{INITIALIZE_VERSIONS, McpClient};
use crate::investigate::InvestigateError;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use serde_json::{Value, json};

/// An open session of the `initialize` era.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Session {
    /// `Mcp-Session-Id`; `None` when the server keeps no sessions.
    pub(super) id: Option<String>,
    /// The revision the server chose in `initialize`.
    pub(super) protocol_version: String,
}

impl Session {
    /// The headers of a message in this session: its id, if any, and the
    /// revision.
    pub(super) fn headers(&self) -> HeaderMap {
        let mut headers = HeaderMap::new();
        // Both were checked to be visible ASCII when the session opened.
        if let Some(id) = &self.id
            && let Ok(v) = HeaderValue::from_str(id)
        {
            headers.insert("mcp-session-id", v);
        }
        if let Ok(v) = HeaderValue::from_str(&self.protocol_version) {
            headers.insert("mcp-protocol-version", v);
        }
        headers
    }
}

impl McpClient {
    /// Forgets what was negotiated and the tool list, and ends a session of
    /// the `initialize` era (`DELETE`, best effort). The next call
    /// negotiates again.
    pub async fn close(&self) {
        self.forget_tools();
        let agreement = std::mem::take(&mut *self.agreement.lock().await);
        let Agreement::Legacy {
            session: Some(session),
            ..
        } = agreement
        else {
            return;
        };
        if session.id.is_none() {
            return;
        }
        let request = self
            .message_request(self.http.reqwest().delete(self.url.clone()))
            .headers(session.headers())
            .send();
        if let Ok(Ok(resp)) = tokio::time::timeout(self.timeout, request).await {
            tracing::debug!(status = resp.status().as_u16(), "mcp session closed");
        }
    }

    /// `initialize` asking for revision `ask`, then
    /// `notifications/initialized`: a new session. A refusal is returned as
    /// such: the caller reads what it says about the era.
    pub(super) async fn initialize(&self, ask: &str) -> Result<Session, Failure> {
        let fail = |e: InvestigateError| Failure::Error(e);
        let message = json!({
            "jsonrpc": "2.0",
            "method": "initialize",
            "params": {
                "protocolVersion": ask,
                "capabilities": {},
                "clientInfo": client_info(),
            },
        });
        let none = HeaderMap::new();
        let (message, session_id) = match self
            .post(&message, &none, Kind::Request, "initialize")
            .await
        {
            Ok(Reply::Message {
                message,
                session_id,
            }) => (message, session_id),
            Ok(Reply::Accepted) => {
                return Err(fail(protocol(
                    "initialize: the server answered without a response",
                )));
            }
            Err(Failure::Refused(r)) if r.status == 404 => {
                return Err(fail(rejected(format!(
                    "{} (check the mcp url)",
                    r.message()
                ))));
            }
            Err(failure) => return Err(failure),
        };
        let result = match split_response("initialize", message).map_err(fail)? {
            Ok(result) => result,
            Err(error) => return Err(Failure::Refused(Refusal::in_answer("initialize", error))),
        };
        let version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .ok_or_else(|| fail(protocol("initialize: the result has no protocolVersion")))?;
        if !INITIALIZE_VERSIONS.contains(&version) {
            return Err(fail(rejected(format!(
                "initialize: the server speaks protocol version `{}`, costwatch speaks {} in the initialize era",
                crate::printable::printable(version),
                INITIALIZE_VERSIONS.join(", ")
            ))));
        }
        if let Some(sid) = &session_id
            && (sid.is_empty() || !sid.bytes().all(|b| (0x21..=0x7e).contains(&b)))
        {
            return Err(fail(protocol(
                "initialize: the Mcp-Session-Id is not visible ASCII",
            )));
        }
        let session = Session {
            id: session_id,
            protocol_version: version.to_owned(),
        };
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        match self
            .post(
                &initialized,
                &session.headers(),
                Kind::Notification,
                "notifications/initialized",
            )
            .await
        {
            Ok(_) => {}
            Err(Failure::Refused(r)) if r.status == 404 && session.id.is_some() => {
                return Err(fail(rejected(
                    "notifications/initialized: the server forgot the session it just opened",
                )));
            }
            Err(failure) => return Err(failure),
        }
        tracing::debug!(
            protocol_version = %session.protocol_version,
            stateful = session.id.is_some(),
            "mcp session initialized"
        );
        Ok(session)
    }

    /// `request` with the headers of every message, whatever the era: the
    /// admin key (a sensitive value, never logged) and the read-only log
    /// toolset.
    pub(super) fn message_request(
        &self,
        request: reqwest::RequestBuilder,
    ) -> reqwest::RequestBuilder {
        request
            .header(AUTHORIZATION, self.auth.clone())
            .header("x-mcp-readonly", "true")
            .header("x-mcp-toolsets", "logs")
    }
}

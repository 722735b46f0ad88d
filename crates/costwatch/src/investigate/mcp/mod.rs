//! The MCP client: the gateway's read-only log tools over MCP Streamable
//! HTTP (gateway-api.md section 2), behind [`ToolProvider`].
//!
//! A small client on reqwest rather than the `rmcp` SDK: it speaks the
//! `initialize` era of the protocol (revisions 2025-06-18 and 2025-03-26) as
//! a plain request/response exchange, so every wait goes through the
//! injected [`Sleeper`], every failure maps onto [`InvestigateError`]'s
//! retry semantics, and the response size is capped before anything is
//! parsed.
//!
//! The exchange:
//! - `initialize` (protocol version 2025-06-18, client `costwatch`), then
//!   `notifications/initialized`. The `Mcp-Session-Id` the server returns is
//!   sent on every later message, with `MCP-Protocol-Version` (the version
//!   the server chose).
//! - Every message carries `Authorization: Bearer <admin key>` (a sensitive
//!   header value, never logged), `Accept: application/json,
//!   text/event-stream`, `Content-Type: application/json`,
//!   `X-MCP-Readonly: true` and `X-MCP-Toolsets: logs`.
//! - Answers come as `application/json` or as an event stream
//!   ([`sse::SseParser`]); the JSON-RPC response whose id matches is taken,
//!   other messages (notifications, priming events) are skipped.
//! - `tools/list` follows `nextCursor`; `tools/call` returns the text
//!   content joined with `\n`, and a failing tool is a result with
//!   `is_error`, not an error.
//!
//! Failures: a JSON-RPC error object is [`InvestigateError::Rejected`]
//! (a parse error, code -32700, is [`InvestigateError::Protocol`]); 429, 5xx,
//! network errors, timeouts and streams cut off are retried up to
//! [`McpLimits::max_retries`] times with exponential backoff (honouring
//! `Retry-After`), then [`InvestigateError::Transient`]; a 404 on a session
//! means it expired: the client initializes again, once per call. Other 4xx
//! and oversized answers are `Rejected`, anything malformed is `Protocol`.
//!
//! **The allowlist is enforced here**: [`McpClient::list_tools`] returns
//! only allowlisted tools, in allowlist order (a stable list a prompt cache
//! can hold), and [`McpClient::call_tool`] refuses any other name without
//! contacting the server, whatever the server lists.

pub mod sse;

use super::{InvestigateError, ToolOutput, ToolProvider, ToolSpec};
use crate::clock::{Sleeper, TokioSleeper};
use crate::secret::Secret;
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use serde_json::{Value, json};
use sse::SseParser;
use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use url::Url;

/// The protocol revision the client asks for in `initialize`.
pub const PROTOCOL_VERSION: &str = "2025-06-18";
/// The revisions the client accepts from a server, newest first.
pub const SUPPORTED_VERSIONS: [&str; 2] = ["2025-06-18", "2025-03-26"];

const ACCEPT_BOTH: &str = "application/json, text/event-stream";
/// Bytes of an error answer kept for its message.
const MAX_ERROR_BODY: usize = 64 << 10;

/// Retry, size and paging limits of an [`McpClient`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpLimits {
    /// Attempts after the first for one message (429, 5xx, timeouts,
    /// network errors, streams cut off).
    pub max_retries: u32,
    /// First backoff delay; doubles per attempt.
    pub retry_base: Duration,
    /// Longest backoff (and longest `Retry-After` honoured).
    pub retry_max: Duration,
    /// Largest answer accepted (JSON body or whole event stream).
    pub max_body_bytes: usize,
    /// Most `tools/list` pages followed.
    pub max_list_pages: usize,
}

impl Default for McpLimits {
    /// Two retries from 250 ms, 4 MiB answers (a 1 MB tool result still
    /// reaches the investigation, which truncates it), 20 pages.
    fn default() -> Self {
        McpLimits {
            max_retries: 2,
            retry_base: Duration::from_millis(250),
            retry_max: Duration::from_secs(10),
            max_body_bytes: 4 << 20,
            max_list_pages: 20,
        }
    }
}

/// An open MCP session.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Session {
    /// `Mcp-Session-Id`; `None` when the server keeps no sessions.
    id: Option<String>,
    /// The version the server chose in `initialize`.
    protocol_version: String,
}

/// A client for one MCP endpoint, restricted to an allowlist of tools.
///
/// Calls may run concurrently; they share one session, opened on first use.
pub struct McpClient {
    http: reqwest::Client,
    url: Url,
    auth: HeaderValue,
    allowlist: Vec<String>,
    timeout: Duration,
    limits: McpLimits,
    sleeper: Arc<dyn Sleeper>,
    session: tokio::sync::Mutex<Option<Session>>,
    next_id: AtomicU64,
}

impl fmt::Debug for McpClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpClient")
            .field("url", &self.url.path())
            .field("allowlist", &self.allowlist)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// What a POST brought back.
#[derive(Debug)]
enum Reply {
    /// The JSON-RPC response with the expected id, and the session id header.
    Message {
        message: Value,
        session_id: Option<String>,
    },
    /// 202 (or another 2xx without a body) for a notification.
    Accepted,
}

/// How one attempt failed.
#[derive(Debug)]
enum Attempt {
    /// Worth another try, after `Retry-After` if the server gave one.
    Retry(InvestigateError, Option<Duration>),
    /// Stop.
    Fatal(InvestigateError),
    /// 404 on a message that carried a session id: the session is gone.
    SessionGone,
}

/// How a message failed after its retries.
#[derive(Debug)]
enum Failure {
    Error(InvestigateError),
    SessionGone,
}

impl McpClient {
    /// A client for the MCP endpoint at `url` (e.g.
    /// `https://gateway.example/v1/mcp`) authenticating with the admin key,
    /// allowed to use only the tools named in `allowlist`; every attempt of
    /// every message must finish within `timeout`. Nothing is sent until the
    /// first call.
    pub fn new(
        url: Url,
        admin_key: &Secret,
        allowlist: Vec<String>,
        timeout: Duration,
    ) -> Result<McpClient, InvestigateError> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(InvestigateError::Rejected(format!(
                "mcp url: expected http or https, got `{}`",
                url.scheme()
            )));
        }
        let http = reqwest::Client::builder()
            .user_agent(concat!("costwatch/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| InvestigateError::Rejected(format!("cannot build http client: {e}")))?;
        let mut auth =
            HeaderValue::from_str(&format!("Bearer {}", admin_key.expose())).map_err(|_| {
                InvestigateError::Rejected("admin key is not a valid header value".into())
            })?;
        auth.set_sensitive(true);
        let mut unique = HashSet::new();
        let allowlist = allowlist
            .into_iter()
            .filter(|name| unique.insert(name.clone()))
            .collect();
        Ok(McpClient {
            http,
            url,
            auth,
            allowlist,
            timeout,
            limits: McpLimits::default(),
            sleeper: Arc::new(TokioSleeper),
            session: tokio::sync::Mutex::new(None),
            next_id: AtomicU64::new(1),
        })
    }

    /// Replaces the retry, size and paging limits.
    pub fn with_limits(mut self, limits: McpLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Replaces how backoff waits (tests record instead of sleeping).
    pub fn with_sleeper(mut self, sleeper: Arc<dyn Sleeper>) -> Self {
        self.sleeper = sleeper;
        self
    }

    /// The tools this client may call, in order, without duplicates.
    pub fn allowlist(&self) -> &[String] {
        &self.allowlist
    }

    /// The endpoint.
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// The current session id, if a session is open and the server gave one.
    pub async fn session_id(&self) -> Option<String> {
        self.session
            .lock()
            .await
            .as_ref()
            .and_then(|s| s.id.clone())
    }

    /// The protocol version of the open session.
    pub async fn protocol_version(&self) -> Option<String> {
        self.session
            .lock()
            .await
            .as_ref()
            .map(|s| s.protocol_version.clone())
    }

    /// Opens the session now (it is otherwise opened by the first call).
    pub async fn connect(&self) -> Result<(), InvestigateError> {
        self.session().await.map(|_| ())
    }

    /// Every tool the server lists (all pages), allowlisted or not, in the
    /// server's order.
    pub async fn server_tools(&self) -> Result<Vec<ToolSpec>, InvestigateError> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        let mut seen = HashSet::new();
        for _ in 0..self.limits.max_list_pages.max(1) {
            let params = cursor
                .as_ref()
                .map_or_else(|| json!({}), |c| json!({ "cursor": c }));
            let result = self.request("tools/list", params).await?;
            let list = result
                .get("tools")
                .and_then(Value::as_array)
                .ok_or_else(|| protocol("tools/list: the result has no `tools` array"))?;
            for (i, tool) in list.iter().enumerate() {
                tools.push(
                    tool_spec(tool)
                        .map_err(|e| protocol(format!("tools/list: tools[{i}]: {e}")))?,
                );
            }
            match result.get("nextCursor") {
                Some(Value::String(next)) if !next.is_empty() => {
                    if !seen.insert(next.clone()) {
                        return Err(protocol(
                            "tools/list: the server returned the same cursor twice",
                        ));
                    }
                    cursor = Some(next.clone());
                }
                None | Some(Value::Null) | Some(Value::String(_)) => return Ok(tools),
                Some(_) => return Err(protocol("tools/list: nextCursor is not a string")),
            }
        }
        Err(protocol(format!(
            "tools/list: more than {} pages",
            self.limits.max_list_pages.max(1)
        )))
    }

    /// Ends the session (`DELETE`), best effort; the next call opens a new one.
    pub async fn close(&self) {
        let Some(session) = self.session.lock().await.take() else {
            return;
        };
        let Some(id) = session.id else { return };
        let request = self
            .http
            .delete(self.url.clone())
            .header(AUTHORIZATION, self.auth.clone())
            .header("x-mcp-readonly", "true")
            .header("x-mcp-toolsets", "logs")
            .header("mcp-session-id", id)
            .header("mcp-protocol-version", session.protocol_version)
            .send();
        if let Ok(Ok(resp)) = tokio::time::timeout(self.timeout, request).await {
            tracing::debug!(status = resp.status().as_u16(), "mcp session closed");
        }
    }

    /// The open session, initializing one if there is none.
    async fn session(&self) -> Result<Session, InvestigateError> {
        let mut guard = self.session.lock().await;
        if let Some(s) = guard.as_ref() {
            return Ok(s.clone());
        }
        let session = self.initialize().await?;
        *guard = Some(session.clone());
        Ok(session)
    }

    /// Drops `stale` if it is still the open session.
    async fn forget(&self, stale: &Session) {
        let mut guard = self.session.lock().await;
        if guard.as_ref() == Some(stale) {
            *guard = None;
        }
    }

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
                "initialize: the server speaks protocol version `{version}`, costwatch speaks {}",
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

    /// Sends one request in the open session and returns its `result`;
    /// initializes again once if the session expired.
    async fn request(&self, method: &str, params: Value) -> Result<Value, InvestigateError> {
        let mut reinitialized = false;
        loop {
            let session = self.session().await?;
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
            match self.post(&message, Some(&session), Some(id), method).await {
                Ok(Reply::Message { message, .. }) => return rpc_result(method, message),
                Ok(Reply::Accepted) => {
                    return Err(protocol(format!(
                        "{method}: the server answered without a response"
                    )));
                }
                Err(Failure::SessionGone) if !reinitialized => {
                    tracing::info!(method, "mcp session expired; initializing again");
                    self.forget(&session).await;
                    reinitialized = true;
                }
                Err(Failure::SessionGone) => {
                    return Err(rejected(format!(
                        "{method}: 404: the session expired again right after initialize"
                    )));
                }
                Err(Failure::Error(e)) => return Err(e),
            }
        }
    }

    /// POSTs one message with retries and backoff.
    async fn post(
        &self,
        message: &Value,
        session: Option<&Session>,
        expect: Option<u64>,
        method: &str,
    ) -> Result<Reply, Failure> {
        let body = serde_json::to_vec(message)
            .map_err(|e| Failure::Error(protocol(format!("{method}: cannot encode: {e}"))))?;
        let mut attempt: u32 = 0;
        loop {
            let once = self.post_once(body.clone(), session, expect, method);
            let outcome = match tokio::time::timeout(self.timeout, once).await {
                Ok(outcome) => outcome,
                Err(_) => Err(Attempt::Retry(
                    InvestigateError::Transient(format!(
                        "{method}: no answer within {} ms",
                        self.timeout.as_millis()
                    )),
                    None,
                )),
            };
            let (err, retry_after) = match outcome {
                Ok(reply) => return Ok(reply),
                Err(Attempt::Fatal(e)) => return Err(Failure::Error(e)),
                Err(Attempt::SessionGone) => return Err(Failure::SessionGone),
                Err(Attempt::Retry(e, after)) => (e, after),
            };
            if attempt >= self.limits.max_retries {
                return Err(Failure::Error(err));
            }
            let backoff = self
                .limits
                .retry_base
                .saturating_mul(2u32.saturating_pow(attempt))
                .min(self.limits.retry_max);
            let wait = retry_after.map_or(backoff, |a| a.min(self.limits.retry_max));
            tracing::warn!(
                method,
                attempt = attempt + 1,
                wait_ms = wait.as_millis() as u64,
                error = %err,
                "mcp call failed; retrying"
            );
            attempt += 1;
            self.sleeper.sleep(wait).await;
        }
    }

    async fn post_once(
        &self,
        body: Vec<u8>,
        session: Option<&Session>,
        expect: Option<u64>,
        method: &str,
    ) -> Result<Reply, Attempt> {
        let mut request = self
            .http
            .post(self.url.clone())
            .header(AUTHORIZATION, self.auth.clone())
            .header(ACCEPT, ACCEPT_BOTH)
            .header(CONTENT_TYPE, "application/json")
            .header("x-mcp-readonly", "true")
            .header("x-mcp-toolsets", "logs")
            .body(body);
        let with_session = session.is_some_and(|s| s.id.is_some());
        if let Some(s) = session {
            if let Some(id) = &s.id {
                request = request.header("mcp-session-id", id);
            }
            request = request.header("mcp-protocol-version", &s.protocol_version);
        }
        let resp = request.send().await.map_err(|e| {
            Attempt::Retry(
                InvestigateError::Transient(format!("{method}: {}", describe(&e))),
                None,
            )
        })?;
        let status = resp.status();
        if !status.is_success() {
            return Err(self.http_failure(resp, method, with_session).await);
        }
        let session_id = resp
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let content_type = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| {
                v.split(';')
                    .next()
                    .unwrap_or_default()
                    .trim()
                    .to_ascii_lowercase()
            })
            .unwrap_or_default();
        let Some(expect) = expect else {
            // A notification: 202 Accepted, nothing to read.
            return Ok(Reply::Accepted);
        };
        if status == StatusCode::ACCEPTED || status == StatusCode::NO_CONTENT {
            return Ok(Reply::Accepted);
        }
        let message = match content_type.as_str() {
            "application/json" => {
                let body = self
                    .read_capped(resp, method, self.limits.max_body_bytes)
                    .await?;
                pick_json_response(&body, expect)
                    .map_err(|e| Attempt::Fatal(protocol(format!("{method}: {e}"))))?
            }
            "text/event-stream" => self.read_event_stream(resp, method, expect).await?,
            other => {
                return Err(Attempt::Fatal(protocol(format!(
                    "{method}: unexpected content type `{other}`"
                ))));
            }
        };
        Ok(Reply::Message {
            message,
            session_id,
        })
    }

    /// Classifies an error status.
    async fn http_failure(
        &self,
        resp: reqwest::Response,
        method: &str,
        with_session: bool,
    ) -> Attempt {
        let status = resp.status();
        let retry_after = resp
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let body = self
            .read_capped(resp, method, MAX_ERROR_BODY)
            .await
            .unwrap_or_default();
        let what = format!("{method}: {} {}", status.as_u16(), error_message(&body));
        let what = what.trim_end().to_owned();
        match status {
            StatusCode::NOT_FOUND if with_session => Attempt::SessionGone,
            StatusCode::TOO_MANY_REQUESTS => {
                Attempt::Retry(InvestigateError::Transient(what), retry_after)
            }
            s if s.is_server_error() => {
                Attempt::Retry(InvestigateError::Transient(what), retry_after)
            }
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                Attempt::Fatal(rejected(format!("{what} (check the admin key)")))
            }
            _ => Attempt::Fatal(rejected(what)),
        }
    }

    /// Reads a whole body, refusing anything over `cap` bytes.
    async fn read_capped(
        &self,
        mut resp: reqwest::Response,
        method: &str,
        cap: usize,
    ) -> Result<Vec<u8>, Attempt> {
        if resp.content_length().is_some_and(|n| n > cap as u64) {
            return Err(too_large(method, cap));
        }
        let mut body = Vec::new();
        loop {
            match resp.chunk().await {
                Ok(Some(chunk)) => {
                    if body.len() + chunk.len() > cap {
                        return Err(too_large(method, cap));
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => return Ok(body),
                Err(e) => {
                    return Err(Attempt::Retry(
                        InvestigateError::Transient(format!(
                            "{method}: body cut off: {}",
                            describe(&e)
                        )),
                        None,
                    ));
                }
            }
        }
    }

    /// Reads an event stream until the response with id `expect` arrives.
    async fn read_event_stream(
        &self,
        mut resp: reqwest::Response,
        method: &str,
        expect: u64,
    ) -> Result<Value, Attempt> {
        let cap = self.limits.max_body_bytes;
        let mut parser = SseParser::new();
        let mut read = 0usize;
        loop {
            let chunk = match resp.chunk().await {
                Ok(Some(chunk)) => chunk,
                Ok(None) => {
                    return Err(Attempt::Retry(
                        InvestigateError::Transient(format!(
                            "{method}: the event stream ended before the response"
                        )),
                        None,
                    ));
                }
                Err(e) => {
                    return Err(Attempt::Retry(
                        InvestigateError::Transient(format!(
                            "{method}: event stream cut off: {}",
                            describe(&e)
                        )),
                        None,
                    ));
                }
            };
            read += chunk.len();
            if read > cap {
                return Err(too_large(method, cap));
            }
            let events = parser
                .feed(&chunk)
                .map_err(|e| Attempt::Fatal(protocol(format!("{method}: {e}"))))?;
            for event in events.into_iter().filter(sse::SseEvent::is_message) {
                let message: Value = serde_json::from_str(&event.data).map_err(|e| {
                    Attempt::Fatal(protocol(format!("{method}: an event is not JSON: {e}")))
                })?;
                if is_response_to(&message, expect) {
                    return Ok(message);
                }
                tracing::trace!(method, "skipped an mcp message that is not the response");
            }
        }
    }
}

impl ToolProvider for McpClient {
    /// The allowlisted tools the server lists, in allowlist order.
    async fn list_tools(&self) -> Result<Vec<ToolSpec>, InvestigateError> {
        let offered = self.server_tools().await?;
        let mut tools = Vec::with_capacity(self.allowlist.len());
        for name in &self.allowlist {
            match offered.iter().find(|t| &t.name == name) {
                Some(t) => tools.push(t.clone()),
                None => {
                    tracing::warn!(tool = %name, "an allowlisted tool is not offered by the mcp server")
                }
            }
        }
        Ok(tools)
    }

    /// Calls an allowlisted tool; any other name is refused without
    /// contacting the server.
    async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
    ) -> Result<ToolOutput, InvestigateError> {
        if !self.allowlist.iter().any(|allowed| allowed == name) {
            tracing::warn!(tool = %name, "refused a tool outside the allowlist");
            return Err(rejected(format!(
                "tool `{name}` is not allowed; allowed tools: {}",
                self.allowlist.join(", ")
            )));
        }
        let arguments = match arguments {
            Value::Null => json!({}),
            Value::Object(map) => Value::Object(map),
            _ => {
                return Err(rejected(format!(
                    "tool `{name}`: arguments must be a JSON object"
                )));
            }
        };
        let result = self
            .request("tools/call", json!({"name": name, "arguments": arguments}))
            .await?;
        tool_output(&result).map_err(|e| protocol(format!("tools/call {name}: {e}")))
    }
}

// ---------------------------------------------------------------------------
// Messages.
// ---------------------------------------------------------------------------

fn protocol(message: impl Into<String>) -> InvestigateError {
    InvestigateError::Protocol(message.into())
}

fn rejected(message: impl Into<String>) -> InvestigateError {
    InvestigateError::Rejected(message.into())
}

fn too_large(method: &str, cap: usize) -> Attempt {
    Attempt::Fatal(rejected(format!(
        "{method}: the answer is larger than max_body_bytes ({cap})"
    )))
}

/// Whether `message` is the response (result or error) to request `id`.
fn is_response_to(message: &Value, id: u64) -> bool {
    message.get("id").and_then(Value::as_u64) == Some(id)
        && message.get("method").is_none()
        && (message.get("result").is_some() || message.get("error").is_some())
}

/// The response with id `expect` in a JSON body (one message or a batch).
fn pick_json_response(body: &[u8], expect: u64) -> Result<Value, String> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| format!("the answer is not JSON: {e}"))?;
    let found = match value {
        Value::Array(items) => items.into_iter().find(|m| is_response_to(m, expect)),
        m if is_response_to(&m, expect) => Some(m),
        _ => None,
    };
    found.ok_or_else(|| format!("the answer holds no response to request {expect}"))
}

/// The `result` of a response, or its `error` as an [`InvestigateError`].
fn rpc_result(method: &str, mut message: Value) -> Result<Value, InvestigateError> {
    if let Some(error) = message.get("error") {
        let code = error
            .get("code")
            .and_then(Value::as_i64)
            .unwrap_or_default();
        let text = error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("no message");
        let what = format!("{method}: json-rpc error {code}: {text}");
        return Err(if code == -32700 {
            protocol(what)
        } else {
            rejected(what)
        });
    }
    match message.get_mut("result") {
        Some(result) if result.is_object() => Ok(result.take()),
        _ => Err(protocol(format!(
            "{method}: the response has no result object"
        ))),
    }
}

/// A `tools/list` entry.
fn tool_spec(tool: &Value) -> Result<ToolSpec, String> {
    let name = tool
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or("no name")?;
    let description = tool
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let input_schema = match tool.get("inputSchema") {
        Some(schema @ Value::Object(_)) => schema.clone(),
        None | Some(Value::Null) => json!({"type": "object"}),
        Some(_) => return Err(format!("`{name}`: inputSchema is not an object")),
    };
    Ok(ToolSpec {
        name: name.to_owned(),
        description: description.to_owned(),
        input_schema,
    })
}

/// A `tools/call` result: text content joined with `\n`, and `isError`.
fn tool_output(result: &Value) -> Result<ToolOutput, String> {
    let is_error = match result.get("isError") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err("isError is not a boolean".to_owned()),
    };
    let parts: Vec<String> = match result.get("content") {
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item.get("type").and_then(Value::as_str) {
                Some("text") => item
                    .get("text")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .ok_or_else(|| "a text item has no text".to_owned()),
                Some(other) => Ok(format!("[{other} content omitted]")),
                None => Err("a content item has no type".to_owned()),
            })
            .collect::<Result<_, _>>()?,
        None | Some(Value::Null) => match result.get("structuredContent") {
            Some(v) => vec![v.to_string()],
            None => return Err("the result has no content".to_owned()),
        },
        Some(_) => return Err("content is not an array".to_owned()),
    };
    Ok(ToolOutput {
        text: parts.join("\n"),
        is_error,
    })
}

/// The message of an error answer: a JSON-RPC or gateway error, or a short
/// prefix of the body.
fn error_message(body: &[u8]) -> String {
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        let text = String::from_utf8_lossy(&body[..body.len().min(200)]);
        return text.split_whitespace().collect::<Vec<_>>().join(" ");
    };
    v.pointer("/error/message")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_default()
}

/// A reqwest error without the URL.
fn describe(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timeout"
    } else if e.is_connect() {
        "connect error"
    } else if e.is_body() || e.is_decode() {
        "body error"
    } else {
        "request error"
    };
    let mut source: Option<&dyn std::error::Error> = std::error::Error::source(e);
    let mut detail = String::new();
    while let Some(s) = source {
        detail = s.to_string();
        source = s.source();
    }
    if detail.is_empty() {
        kind.to_owned()
    } else {
        format!("{kind}: {detail}")
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use crate::clock::RecordingSleeper;
    use costwatch_sim::mcp::{McpFault, McpFaultKind, McpMode};
    use costwatch_sim::{Dataset, SimOptions, SimServer};

    const FIXTURE: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../costwatch-sim/data/seed-window.json"
    );
    const KEY: &str = "sim-admin-key";
    const ALL: [&str; 7] = [
        "list_sessions",
        "search_requests",
        "get_request",
        "list_traces",
        "list_models",
        "get_model",
        "get_pricing",
    ];

    async fn sim(mode: McpMode) -> SimServer {
        let d = Dataset::from_fixture(FIXTURE).unwrap();
        let s = SimServer::start(Arc::new(d), SimOptions::default())
            .await
            .unwrap();
        s.mcp().set_mode(mode);
        s
    }

    fn limits() -> McpLimits {
        McpLimits {
            retry_base: Duration::from_millis(100),
            ..McpLimits::default()
        }
    }

    fn client_with(s: &SimServer, key: &str, allow: &[&str]) -> (McpClient, RecordingSleeper) {
        let sleeper = RecordingSleeper::default();
        let client = McpClient::new(
            Url::parse(&s.mcp_url()).unwrap(),
            &Secret::new(key),
            allow.iter().map(|t| (*t).to_owned()).collect(),
            Duration::from_secs(10),
        )
        .unwrap()
        .with_limits(limits())
        .with_sleeper(Arc::new(sleeper.clone()));
        (client, sleeper)
    }

    fn client(s: &SimServer, allow: &[&str]) -> (McpClient, RecordingSleeper) {
        client_with(s, KEY, allow)
    }

    fn rows(out: &ToolOutput) -> Vec<Value> {
        let v: Value = serde_json::from_str(&out.text).unwrap();
        v["data"].as_array().unwrap().clone()
    }

    #[tokio::test]
    async fn tools_outside_the_allowlist_are_refused_without_contacting_the_server() {
        let s = sim(McpMode::Json).await;
        let (c, _) = client(&s, &["list_models"]);
        for name in ["delete_sessions", "get_request", "list_models ", ""] {
            let err = c.call_tool(name, json!({})).await.unwrap_err();
            assert!(
                matches!(&err, InvestigateError::Rejected(m) if m.contains("not allowed") && m.contains("list_models")),
                "{err:?}"
            );
        }
        let err = c.call_tool("list_models", json!(["x"])).await.unwrap_err();
        assert!(matches!(err, InvestigateError::Rejected(_)));
        assert_eq!(s.stats().hits("/v1/mcp"), 0);
        assert!(s.mcp().calls().is_empty());
        assert_eq!(c.session_id().await, None);

        // Once a session is open, refusals still send nothing.
        let out = c.call_tool("list_models", Value::Null).await.unwrap();
        assert_eq!(rows(&out).len(), 2);
        let before = s.stats().hits("/v1/mcp");
        assert_eq!(before, 3); // initialize, initialized, tools/call
        assert!(c.call_tool("get_request", json!({})).await.is_err());
        assert_eq!(s.stats().hits("/v1/mcp"), before);
        assert_eq!(s.mcp().count("tools/call"), 1);
    }

    #[tokio::test]
    async fn list_tools_follows_pages_and_keeps_allowlist_order() {
        let s = sim(McpMode::Json).await;
        let allow = [
            "get_pricing",
            "list_sessions",
            "not_a_tool",
            "search_requests",
            "list_sessions",
        ];
        let (c, _) = client(&s, &allow);
        assert_eq!(
            c.allowlist(),
            [
                "get_pricing",
                "list_sessions",
                "not_a_tool",
                "search_requests"
            ]
        );
        let tools = c.list_tools().await.unwrap();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["get_pricing", "list_sessions", "search_requests"]);
        assert_eq!(tools[1].input_schema["required"], json!(["start", "end"]));
        assert!(!tools[1].description.is_empty());
        assert_eq!(s.mcp().count("tools/list"), 2);
        let all = c.server_tools().await.unwrap();
        let names: Vec<&str> = all.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ALL);
        // Same list every time: a prompt cache can hold it.
        assert_eq!(c.list_tools().await.unwrap(), tools);
    }

    #[tokio::test]
    async fn every_message_carries_the_headers_and_the_session() {
        for mode in [McpMode::Json, McpMode::Sse] {
            let s = sim(mode).await;
            let (c, _) = client(&s, &ALL);
            c.list_tools().await.unwrap();
            let out = c
                .call_tool(
                    "search_requests",
                    json!({"session_id": "retry-loop-7f2e81c09ab5", "limit": 3}),
                )
                .await
                .unwrap();
            assert!(!out.is_error);
            assert_eq!(rows(&out).len(), 3);
            let sid = c.session_id().await.unwrap();
            assert_eq!(c.protocol_version().await.as_deref(), Some("2025-06-18"));
            let calls = s.mcp().calls();
            let methods: Vec<&str> = calls.iter().map(|c| c.method.as_str()).collect();
            assert_eq!(
                methods,
                [
                    "initialize",
                    "notifications/initialized",
                    "tools/list",
                    "tools/list",
                    "tools/call"
                ],
                "{mode:?}"
            );
            for (i, call) in calls.iter().enumerate() {
                assert_eq!(call.header("authorization"), Some("Bearer [admin key]"));
                assert_eq!(
                    call.header("accept"),
                    Some("application/json, text/event-stream")
                );
                assert_eq!(call.header("content-type"), Some("application/json"));
                assert_eq!(call.header("x-mcp-readonly"), Some("true"));
                assert_eq!(call.header("x-mcp-toolsets"), Some("logs"));
                if i == 0 {
                    assert_eq!(call.header("mcp-session-id"), None);
                    assert_eq!(call.header("mcp-protocol-version"), None);
                } else {
                    assert_eq!(call.header("mcp-session-id"), Some(sid.as_str()));
                    assert_eq!(call.header("mcp-protocol-version"), Some("2025-06-18"));
                }
            }
        }
    }

    #[tokio::test]
    async fn a_failing_tool_is_a_result_and_a_json_rpc_error_is_rejected() {
        let s = sim(McpMode::Sse).await;
        let (c, _) = client(&s, &ALL);
        let out = c
            .call_tool(
                "list_sessions",
                json!({"start": "yesterday", "end": "today"}),
            )
            .await
            .unwrap();
        assert!(out.is_error);
        assert!(out.text.contains("RFC 3339"), "{}", out.text);

        s.mcp().faults().push(McpFault::on(
            "list_models",
            McpFaultKind::RpcError {
                code: -32603,
                message: "internal trouble".into(),
            },
        ));
        let err = c.call_tool("list_models", json!({})).await.unwrap_err();
        assert_eq!(
            err,
            InvestigateError::Rejected(
                "tools/call: json-rpc error -32603: internal trouble".into()
            )
        );
        s.mcp().faults().push(McpFault::any(McpFaultKind::RpcError {
            code: -32700,
            message: "parse error".into(),
        }));
        let err = c.call_tool("list_models", json!({})).await.unwrap_err();
        assert!(matches!(err, InvestigateError::Protocol(_)), "{err:?}");
        // JSON-RPC errors are not retried.
        assert_eq!(s.mcp().count("tools/call"), 3);
    }

    #[tokio::test]
    async fn server_errors_are_retried_with_backoff_then_transient() {
        let s = sim(McpMode::Json).await;
        let (c, sleeper) = client(&s, &ALL);
        let f = s.mcp().faults();
        f.push(McpFault::on(
            "list_models",
            McpFaultKind::HttpStatus { status: 503 },
        ));
        f.push(McpFault::on(
            "list_models",
            McpFaultKind::HttpStatus { status: 429 },
        ));
        let out = c.call_tool("list_models", json!({})).await.unwrap();
        assert_eq!(rows(&out).len(), 2);
        // 100 ms backoff, then the server's Retry-After of 1 s.
        assert_eq!(
            sleeper.delays(),
            [Duration::from_millis(100), Duration::from_secs(1)]
        );
        assert_eq!(s.mcp().count("tools/call"), 3);

        f.set_persistent(McpFault::any(McpFaultKind::HttpStatus { status: 502 }));
        let err = c.call_tool("list_models", json!({})).await.unwrap_err();
        assert!(
            matches!(&err, InvestigateError::Transient(m) if m.contains("502")),
            "{err:?}"
        );
        // One attempt and max_retries (2) more.
        assert_eq!(s.mcp().count("tools/call"), 6);
        assert_eq!(sleeper.delays().len(), 4);
        assert_eq!(sleeper.delays()[3], Duration::from_millis(200));
    }

    #[tokio::test]
    async fn an_expired_session_is_initialized_again_once() {
        let s = sim(McpMode::Sse).await;
        let (c, _) = client(&s, &ALL);
        c.connect().await.unwrap();
        let first = c.session_id().await.unwrap();
        s.mcp().expire_sessions();
        let out = c
            .call_tool("get_model", json!({"model": "gpt-6-luna"}))
            .await
            .unwrap();
        assert!(
            out.text.contains("\"supports_prompt_cache\":true"),
            "{}",
            out.text
        );
        let second = c.session_id().await.unwrap();
        assert_ne!(first, second);
        assert_eq!(s.mcp().count("initialize"), 2);
        assert_eq!(s.mcp().count("tools/call"), 2);
        assert_eq!(s.mcp().open_sessions(), 1);

        c.close().await;
        assert_eq!(s.mcp().open_sessions(), 0);
        assert_eq!(c.session_id().await, None);
        c.call_tool("list_models", json!({})).await.unwrap();
        assert_eq!(s.mcp().count("initialize"), 3);
    }

    #[tokio::test]
    async fn a_wrong_key_is_rejected_without_retries() {
        let s = sim(McpMode::Json).await;
        let (c, sleeper) = client_with(&s, "not-the-key", &ALL);
        let err = c.list_tools().await.unwrap_err();
        assert!(
            matches!(&err, InvestigateError::Rejected(m) if m.contains("401") && m.contains("admin key")),
            "{err:?}"
        );
        assert!(!format!("{err}").contains("not-the-key"));
        assert_eq!(s.mcp().count("initialize"), 1);
        assert!(sleeper.delays().is_empty());
        assert!(!format!("{c:?}").contains("not-the-key"));
    }

    #[tokio::test]
    async fn huge_answers_pass_up_to_the_cap_and_are_refused_beyond() {
        let s = sim(McpMode::Sse).await;
        let (c, _) = client(&s, &ALL);
        let f = s.mcp().faults();
        f.push(McpFault::on(
            "list_models",
            McpFaultKind::HugeText { bytes: 1 << 20 },
        ));
        let out = c.call_tool("list_models", json!({})).await.unwrap();
        assert_eq!(out.text.len(), 1 << 20);
        assert!(!out.is_error);

        let small = McpLimits {
            max_body_bytes: 64 << 10,
            ..limits()
        };
        let c = client(&s, &ALL).0.with_limits(small);
        f.push(McpFault::on(
            "list_models",
            McpFaultKind::HugeText { bytes: 1 << 20 },
        ));
        let err = c.call_tool("list_models", json!({})).await.unwrap_err();
        assert!(
            matches!(&err, InvestigateError::Rejected(m) if m.contains("max_body_bytes")),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn a_hanging_server_times_out_as_transient() {
        let s = sim(McpMode::Json).await;
        let (c, sleeper) = client(&s, &ALL);
        let c = McpClient {
            timeout: Duration::from_millis(300),
            ..c
        }
        .with_limits(McpLimits {
            max_retries: 1,
            ..limits()
        });
        c.connect().await.unwrap();
        let f = s.mcp().faults();
        f.set_persistent(McpFault::on("list_traces", McpFaultKind::Hang));
        let started = std::time::Instant::now();
        let err = c
            .call_tool(
                "list_traces",
                json!({"start": "2026-10-11T11:24:00Z", "end": "2026-10-11T11:32:00Z"}),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(&err, InvestigateError::Transient(m) if m.contains("no answer within 300 ms")),
            "{err:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(s.mcp().count("tools/call"), 2);
        assert_eq!(sleeper.delays(), [Duration::from_millis(100)]);
        f.clear();
        let out = c
            .call_tool(
                "list_traces",
                json!({"start": "2026-10-11T11:24:00Z", "end": "2026-10-11T11:32:00Z"}),
            )
            .await
            .unwrap();
        assert!(rows(&out).is_empty());
    }

    #[test]
    fn json_answers_pick_the_response_by_id() {
        let one = br#"{"jsonrpc":"2.0","id":7,"result":{"ok":true}}"#;
        assert_eq!(pick_json_response(one, 7).unwrap()["result"]["ok"], true);
        assert!(pick_json_response(one, 8).is_err());
        let batch = br#"[{"jsonrpc":"2.0","method":"notifications/message","params":{}},
                         {"jsonrpc":"2.0","id":3,"method":"ping"},
                         {"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"m"}}]"#;
        assert_eq!(pick_json_response(batch, 3).unwrap()["error"]["code"], -1);
        assert!(pick_json_response(b"<html>", 3).is_err());
    }

    #[test]
    fn results_and_errors_map_onto_investigate_errors() {
        let ok = json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": []}});
        assert_eq!(rpc_result("m", ok).unwrap(), json!({"tools": []}));
        let err = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "nope"}});
        assert_eq!(
            rpc_result("m", err).unwrap_err(),
            InvestigateError::Rejected("m: json-rpc error -32601: nope".into())
        );
        let parse = json!({"id": 1, "error": {"code": -32700, "message": "bad json"}});
        assert!(matches!(
            rpc_result("m", parse),
            Err(InvestigateError::Protocol(_))
        ));
        let neither = json!({"jsonrpc": "2.0", "id": 1});
        assert!(matches!(
            rpc_result("m", neither),
            Err(InvestigateError::Protocol(_))
        ));
    }

    #[test]
    fn tool_results_join_text_and_keep_is_error() {
        let r = json!({"content": [
            {"type": "text", "text": "one"},
            {"type": "image", "data": "...", "mimeType": "image/png"},
            {"type": "text", "text": "two"},
        ], "isError": true});
        assert_eq!(
            tool_output(&r).unwrap(),
            ToolOutput {
                text: "one\n[image content omitted]\ntwo".into(),
                is_error: true
            }
        );
        let structured = json!({"structuredContent": {"a": 1}});
        assert_eq!(tool_output(&structured).unwrap().text, r#"{"a":1}"#);
        assert!(!tool_output(&structured).unwrap().is_error);
        assert!(tool_output(&json!({})).is_err());
        assert!(tool_output(&json!({"content": [{"type": "text"}]})).is_err());
        assert!(tool_output(&json!({"content": [], "isError": "yes"})).is_err());
    }

    #[test]
    fn tool_specs_need_a_name_and_default_the_schema() {
        let t = tool_spec(&json!({"name": "x"})).unwrap();
        assert_eq!(
            (t.description.as_str(), t.input_schema),
            ("", json!({"type": "object"}))
        );
        assert!(tool_spec(&json!({"description": "no name"})).is_err());
        assert!(tool_spec(&json!({"name": "x", "inputSchema": "object"})).is_err());
    }

    #[test]
    fn only_http_urls_and_header_safe_keys_are_accepted() {
        let allow = vec!["list_models".to_owned()];
        let t = Duration::from_secs(1);
        let key = Secret::new("k");
        assert!(McpClient::new(Url::parse("ftp://x/").unwrap(), &key, allow.clone(), t).is_err());
        let bad = Secret::new("a\nb");
        assert!(McpClient::new(Url::parse("http://x/").unwrap(), &bad, allow, t).is_err());
    }
}

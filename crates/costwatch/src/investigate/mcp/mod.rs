//! The MCP client: the gateway's read-only log tools over MCP Streamable
//! HTTP (gateway-api.md section 2), behind [`ToolProvider`].
//!
//! A small client on the shared [`crate::http`] plumbing rather than the
//! `rmcp` SDK: it speaks revision 2026-07-28 of the protocol and, with
//! servers that do not, the `initialize` era (2025-11-25, 2025-06-18 and
//! 2025-03-26), each as a plain request/response exchange, so every wait
//! goes through the injected [`Sleeper`], every failure maps onto
//! [`InvestigateError`]'s retry semantics, and the response size is capped
//! before anything is parsed.
//!
//! The parts: this file is the client's API and the request loop;
//! `negotiate` decides the era once per client; `session` opens and closes
//! sessions of the `initialize` era and sets the headers every message
//! carries; `headers` the request metadata headers of 2026-07-28;
//! `transport` posts one message with retries and reads its answer (JSON or
//! [`sse`]); `protocol` reads JSON-RPC envelopes, errors, tool specs and
//! tool results.
//!
//! The exchange:
//! - First, `server/discover` at 2026-07-28 (`negotiate`). A server that
//!   speaks it gets every later request the same way: no handshake, no
//!   session; `params._meta` holds `io.modelcontextprotocol/protocolVersion`
//!   (`2026-07-28`), `io.modelcontextprotocol/clientCapabilities` (none) and
//!   `io.modelcontextprotocol/clientInfo` (`costwatch`); the POST carries
//!   `MCP-Protocol-Version: 2026-07-28`, `Mcp-Method` (the JSON-RPC method),
//!   on `tools/call` `Mcp-Name` (the tool) and an `Mcp-Param-{Name}` for
//!   each argument the tool's schema annotates with `x-mcp-header`
//!   (`headers`). A result's `resultType` must be `complete` (or absent).
//! - A server that does not speak 2026-07-28 (it answers the probe with
//!   `UnsupportedProtocolVersion` listing older revisions, or with a 4xx or
//!   JSON-RPC error of its own) gets `initialize` asking for 2025-11-25 (or
//!   the newest revision both list), then `notifications/initialized`; the
//!   `Mcp-Session-Id` the server returns is sent on every later message,
//!   with `MCP-Protocol-Version` (the revision the server chose: 2025-11-25,
//!   2025-06-18 or 2025-03-26). The fallback costs one request per client.
//! - Every message carries `Authorization: Bearer <admin key>`, or HTTP
//!   Basic for a server that wants a key pair
//!   ([`McpClient::with_basic_auth`]: Langfuse's takes a project's public
//!   key and secret key), a sensitive header value, never logged; and
//!   `Accept: application/json, text/event-stream`, `Content-Type:
//!   application/json`, `X-MCP-Readonly: true` and `X-MCP-Toolsets: logs`.
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
//! `Retry-After`), each attempt a new request with a new id, then
//! [`InvestigateError::Transient`]. A 404 on a session
//! means it expired: the client initializes again, once per call. An
//! `UnsupportedProtocolVersion` answer to a later request means the server
//! changed: the client negotiates again, once per call. A `HeaderMismatch`
//! answer to a 2026-07-28 `tools/call` means the tool's schema may have
//! changed: the client lists the tools again and retries once. Other 4xx
//! and oversized answers are `Rejected`, anything malformed is `Protocol`.
//!
//! **The allowlist is enforced here**: [`McpClient::list_tools`] returns
//! only allowlisted tools, in allowlist order (a stable list a prompt cache
//! can hold), and [`McpClient::call_tool`] refuses any other name without
//! contacting the server, whatever the server lists. A tool whose
//! `x-mcp-header` annotations break the rules is left out of every listing.
//!
//! **The tool list is fetched once per client** (the daemon keeps one
//! client for the process) and kept until the session or the era is lost:
//! a 404 on the session, an `UnsupportedProtocolVersion` or `HeaderMismatch`
//! answer, or [`McpClient::close`], makes the next listing ask the server
//! again, since a server that forgot the session may also have changed its
//! tools. The `ttlMs` of a 2026-07-28 listing is not read.

mod headers;
mod negotiate;
mod protocol;
mod session;
pub mod sse;
mod transport;

#[cfg(test)]
mod tests;

use super::{InvestigateError, ToolOutput, ToolProvider, ToolSpec};
use crate::clock::{Sleeper, TokioSleeper};
use crate::http::{ClientSettings, HttpClient, RetryPolicy};
use crate::secret::Secret;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use negotiate::{Agreement, Era};
use protocol::{
    HEADER_MISMATCH, UNSUPPORTED_VERSION, complete, protocol, rejected, split_response,
    tool_output, tool_spec, with_meta,
};
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::{Value, json};
use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;
use transport::{Failure, Kind, Refusal, Reply};
use url::Url;

/// The revision the client speaks first: no handshake, `_meta` on every
/// request.
pub const PROTOCOL_VERSION: &str = "2026-07-28";
/// The revision `initialize` asks for when the server does not speak
/// [`PROTOCOL_VERSION`].
pub const INITIALIZE_VERSION: &str = "2025-11-25";
/// The revisions of the `initialize` era the client accepts from a server,
/// newest first.
pub const INITIALIZE_VERSIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];
/// Every revision the client speaks, newest first.
pub const SUPPORTED_VERSIONS: [&str; 4] = ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"];

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

/// A client for one MCP endpoint, restricted to an allowlist of tools.
///
/// Calls may run concurrently; they share what was negotiated (and the
/// session of the `initialize` era), on first use.
pub struct McpClient {
    http: HttpClient,
    url: Url,
    auth: HeaderValue,
    allowlist: Vec<String>,
    timeout: Duration,
    limits: McpLimits,
    sleeper: Arc<dyn Sleeper>,
    /// The era agreed on with the server, and its session.
    agreement: tokio::sync::Mutex<Agreement>,
    /// The allowlisted tools as last listed: the list is fetched once and
    /// kept until the session or the era is lost (the server may have
    /// changed).
    tools: std::sync::Mutex<Option<Vec<ToolSpec>>>,
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
        // No client-wide timeout: each attempt is bounded by `timeout`,
        // event stream included (see [`transport`]).
        let http = HttpClient::new(ClientSettings {
            timeout: None,
            connect_timeout: None,
            follow_redirects: true,
        })
        .map_err(|e| InvestigateError::Rejected(e.to_string()))?;
        let auth = crate::http::bearer(admin_key).ok_or_else(|| {
            InvestigateError::Rejected("admin key is not a valid header value".into())
        })?;
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
            agreement: tokio::sync::Mutex::new(Agreement::Unknown),
            tools: std::sync::Mutex::new(None),
            next_id: AtomicU64::new(1),
        })
    }

    /// Authenticates with HTTP Basic, `user:password`, instead of the
    /// bearer admin key: Langfuse's MCP server (`{host}/api/public/mcp`)
    /// wants a project's public key as user and its secret key as password,
    /// and refuses a bearer token. `user` must be non-empty, without `:` or
    /// control characters; `password` non-empty.
    pub fn with_basic_auth(
        mut self,
        user: &str,
        password: &Secret,
    ) -> Result<Self, InvestigateError> {
        if user.is_empty() || user.contains(':') || user.chars().any(char::is_control) {
            return Err(InvestigateError::Rejected(
                "mcp basic auth: the user must be non-empty, without `:` or control characters"
                    .into(),
            ));
        }
        if password.expose().is_empty() {
            return Err(InvestigateError::Rejected(
                "mcp basic auth: the password is empty".into(),
            ));
        }
        let token = STANDARD.encode(format!("{user}:{}", password.expose()));
        let mut value = HeaderValue::from_str(&format!("Basic {token}")).map_err(|_| {
            InvestigateError::Rejected("mcp basic auth: not a valid header value".into())
        })?;
        value.set_sensitive(true);
        self.auth = value;
        Ok(self)
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

    /// How a message is retried: 429, 5xx, network errors, timeouts and
    /// answers cut off, with exponential backoff honouring `Retry-After`.
    fn retry(&self) -> RetryPolicy {
        RetryPolicy::exponential(
            self.limits.max_retries,
            self.limits.retry_base,
            self.limits.retry_max,
        )
    }

    /// The tools this client may call, in order, without duplicates.
    pub fn allowlist(&self) -> &[String] {
        &self.allowlist
    }

    /// The endpoint.
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// The current session id: a session of the `initialize` era is open
    /// and the server gave one.
    pub async fn session_id(&self) -> Option<String> {
        match &*self.agreement.lock().await {
            Agreement::Legacy {
                session: Some(s), ..
            } => s.id.clone(),
            _ => None,
        }
    }

    /// The revision agreed on: [`PROTOCOL_VERSION`], or the one the server
    /// chose in `initialize` while its session is open.
    pub async fn protocol_version(&self) -> Option<String> {
        match &*self.agreement.lock().await {
            Agreement::Modern => Some(PROTOCOL_VERSION.to_owned()),
            Agreement::Legacy {
                session: Some(s), ..
            } => Some(s.protocol_version.clone()),
            _ => None,
        }
    }

    /// Negotiates now (and opens the session of the `initialize` era); it
    /// is otherwise done by the first call.
    pub async fn connect(&self) -> Result<(), InvestigateError> {
        self.era().await.map(|_| ())
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
            let result = self.request("tools/list", &params).await?;
            let list = result
                .get("tools")
                .and_then(Value::as_array)
                .ok_or_else(|| protocol("tools/list: the result has no `tools` array"))?;
            for (i, tool) in list.iter().enumerate() {
                let tool = tool_spec(tool)
                    .map_err(|e| protocol(format!("tools/list: tools[{i}]: {e}")))?;
                match headers::check_annotations(&tool.input_schema) {
                    Ok(()) => tools.push(tool),
                    Err(reason) => tracing::warn!(
                        tool = %crate::printable::printable(&tool.name),
                        reason = %crate::printable::printable(&reason),
                        "left out an mcp tool whose x-mcp-header annotations are invalid"
                    ),
                }
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

    /// Sends one request in the agreed era and returns its `result`;
    /// initializes again once if the session expired, negotiates again once
    /// if the server no longer speaks the revision.
    async fn request(&self, method: &str, params: &Value) -> Result<Value, RequestError> {
        let mut again = false;
        loop {
            let era = self.era().await?;
            let (message, headers) = self.envelope(&era, method, params);
            let refusal = match self.post(&message, &headers, Kind::Request, method).await {
                Ok(Reply::Message { message, .. }) => match split_response(method, message)? {
                    Ok(result) => return Ok(complete(method, result)?),
                    Err(error) => Refusal::in_answer(method, error),
                },
                Ok(Reply::Accepted) => {
                    return Err(protocol(format!(
                        "{method}: the server answered without a response"
                    ))
                    .into());
                }
                Err(Failure::Error(e)) => return Err(e.into()),
                Err(Failure::Refused(refusal)) => refusal,
            };
            let session_gone = match &era {
                Era::Legacy(session) if refusal.status == 404 && session.id.is_some() => {
                    Some(session)
                }
                _ => None,
            };
            if let Some(session) = session_gone {
                if again {
                    return Err(rejected(format!(
                        "{method}: 404: the session expired again right after initialize"
                    ))
                    .into());
                }
                tracing::info!(method, "mcp session expired; initializing again");
                self.forget_session(session).await;
                self.forget_tools();
                again = true;
                continue;
            }
            if refusal.code() == Some(UNSUPPORTED_VERSION) && !again {
                tracing::info!(
                    method,
                    "the mcp server no longer speaks the agreed protocol version; negotiating again"
                );
                self.forget_era(&era).await;
                self.forget_tools();
                again = true;
                continue;
            }
            if era == Era::Modern && refusal.code() == Some(HEADER_MISMATCH) {
                return Err(RequestError::HeaderMismatch(refusal.error));
            }
            return Err(refusal.error.into());
        }
    }

    /// The request for `method` in `era` (its id is set per attempt), and
    /// its headers besides those of every message.
    fn envelope(&self, era: &Era, method: &str, params: &Value) -> (Value, HeaderMap) {
        match era {
            Era::Modern => {
                let params = with_meta(params);
                // The called tool's schema, as last listed, names the
                // arguments mirrored into headers.
                let schema = (method == "tools/call")
                    .then(|| params.get("name").and_then(Value::as_str))
                    .flatten()
                    .and_then(|name| {
                        self.cached_tools()?
                            .into_iter()
                            .find(|t| t.name == name)
                            .map(|t| t.input_schema)
                    });
                let headers = headers::modern_headers(method, &params, schema.as_ref());
                let message = json!({"jsonrpc": "2.0", "method": method, "params": params});
                (message, headers)
            }
            Era::Legacy(session) => (
                json!({"jsonrpc": "2.0", "method": method, "params": params}),
                session.headers(),
            ),
        }
    }
}

/// Why a request failed.
#[derive(Debug)]
enum RequestError {
    /// `HeaderMismatch` on a 2026-07-28 request: the `Mcp-Param-*` headers
    /// may follow a tool schema the server has changed since.
    HeaderMismatch(InvestigateError),
    /// Anything else.
    Failed(InvestigateError),
}

impl From<InvestigateError> for RequestError {
    fn from(e: InvestigateError) -> Self {
        RequestError::Failed(e)
    }
}

impl From<RequestError> for InvestigateError {
    fn from(e: RequestError) -> Self {
        match e {
            RequestError::HeaderMismatch(e) | RequestError::Failed(e) => e,
        }
    }
}

impl McpClient {
    /// The tool list kept from the last listing, if any.
    fn cached_tools(&self) -> Option<Vec<ToolSpec>> {
        self.tools
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Drops the kept tool list: the next [`ToolProvider::list_tools`]
    /// asks the server again.
    pub fn forget_tools(&self) {
        *self
            .tools
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }
}

impl ToolProvider for McpClient {
    /// The allowlisted tools the server lists, in allowlist order. Listed
    /// once and kept: a listing is asked for again only after the session
    /// or the era was lost (the server expired it, restarted, changed, or
    /// [`McpClient::close`]).
    async fn list_tools(&self) -> Result<Vec<ToolSpec>, InvestigateError> {
        if let Some(tools) = self.cached_tools() {
            return Ok(tools);
        }
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
        *self
            .tools
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(tools.clone());
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
            // The name is the model's, which may echo what a tool returned.
            tracing::warn!(tool = %crate::printable::printable(name), "refused a tool outside the allowlist");
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
        let params = json!({"name": name, "arguments": arguments});
        let result = match self.request("tools/call", &params).await {
            Ok(result) => result,
            Err(RequestError::HeaderMismatch(e)) => {
                // The spec's remedy: list the tools again (the schema names
                // the mirrored arguments) and retry once.
                tracing::info!(tool = %name, error = %e, "mcp header mismatch; listing the tools again");
                self.forget_tools();
                self.list_tools().await?;
                self.request("tools/call", &params).await?
            }
            Err(RequestError::Failed(e)) => return Err(e),
        };
        tool_output(&result).map_err(|e| protocol(format!("tools/call {name}: {e}")))
    }
}

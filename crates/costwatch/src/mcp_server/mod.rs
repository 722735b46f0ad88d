//! costwatch as an MCP server: the log tools over its source
//! ([`crate::logtools`]) and its own findings, incidents and baselines
//! ([`crate::logtools::state`]), all read-only, at `/mcp` on
//! `server.listen` (Streamable HTTP, [`http`]) and over stdio
//! (`costwatch mcp`, [`stdio`]).
//!
//! **Revisions.** Both eras of the protocol, stateless in each:
//! - the handshake era, 2025-11-25, 2025-06-18 and 2025-03-26: `initialize`
//!   answers the client's revision when it is one of those (the newest
//!   otherwise), no `Mcp-Session-Id` is issued, `ping` answers;
//! - 2026-07-28: no handshake; every request carries `params._meta` with
//!   `io.modelcontextprotocol/protocolVersion` and
//!   `io.modelcontextprotocol/clientCapabilities` (else -32602), over HTTP
//!   with `MCP-Protocol-Version`, `Mcp-Method` and, for `tools/call`,
//!   `Mcp-Name` equal to the body's (else -32020, `HeaderMismatch`); an
//!   unknown revision gets -32022 with `data: {supported, requested}`;
//!   `server/discover` names the revisions; results carry `resultType` and
//!   the server's identity in `_meta`; `tools/list` carries `ttlMs` and
//!   `cacheScope`.
//!
//! Over HTTP the era is chosen by the `MCP-Protocol-Version` header, as the
//! official SDK does: absent or a handshake revision is the handshake era,
//! anything else is checked as 2026-07-28. Over stdio a request whose
//! `_meta` names a revision is checked as 2026-07-28.
//!
//! **Tools.** Every tool is listed with `readOnlyHint: true`,
//! `destructiveHint: false`, `idempotentHint: true`, `openWorldHint: false`,
//! a `title` and an `outputSchema`; a result carries `structuredContent`
//! and the same JSON as text. Bad arguments, and a source or state
//! database that cannot be read, are results with `isError: true` and a
//! message naming the argument or the failure; an unknown tool is a
//! JSON-RPC error (-32602). A result is at most [`MAX_RESULT_BYTES`] of
//! JSON (50 rows a page keep it far below). Results hold no secret: the rows carry ids,
//! labels and figures, and error messages name URLs without credentials.

pub mod http;
pub mod stdio;

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;

use crate::logtools::state::{StateTools, state_tool_defs};
use crate::logtools::{Answer, LogTools, ToolDef, log_tool_defs};
use crate::source::Source;
use crate::store::WindowStore;
use crate::store::inspect::Inspect;
use serde_json::{Map, Value, json};

/// The current revision, without a handshake.
pub const MODERN_VERSION: &str = "2026-07-28";
/// The handshake revisions served, newest first.
pub const HANDSHAKE_VERSIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];

/// `_meta` key of a request's protocol revision (2026-07-28).
pub const PROTOCOL_VERSION_META: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key of a request's client capabilities (2026-07-28).
pub const CLIENT_CAPABILITIES_META: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key of the server's identity on a result (2026-07-28).
const SERVER_INFO_META: &str = "io.modelcontextprotocol/serverInfo";

/// JSON-RPC: the body is not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC: not a request object.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC: no such method.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC: bad parameters (an unknown tool, a missing `_meta`).
pub const INVALID_PARAMS: i64 = -32602;
/// MCP 2026-07-28: a routing header disagrees with the body.
pub const HEADER_MISMATCH: i64 = -32020;
/// MCP 2026-07-28: the request's revision is not served.
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// The largest tool result sent, in bytes of its JSON text: a bigger one
/// is refused, saying to ask for fewer rows.
pub const MAX_RESULT_BYTES: usize = 256 * 1024;

/// How long a client may keep the tool list, in milliseconds: the tools
/// change only with the binary.
const TOOLS_TTL_MS: u64 = 3_600_000;

/// What the server tells a model about itself.
const INSTRUCTIONS: &str = "costwatch finds wasted LLM spend in a gateway's request logs: \
    conversations that never read the prompt cache, premium models on tiny calls, retry loops. \
    list_incidents and list_findings say what was found and what it cost; get_incident and \
    get_baseline say why; list_sessions and search_requests read the calls themselves \
    (never any prompt text).";

/// Which era a request is handled in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// `initialize` first (2025-11-25 and before).
    Handshake,
    /// Every request stands alone (2026-07-28).
    Modern,
}

/// The routing headers of an HTTP request, lower-cased names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoutingHeaders {
    /// `MCP-Protocol-Version`.
    pub protocol_version: Option<String>,
    /// `Mcp-Method`.
    pub method: Option<String>,
    /// `Mcp-Name`.
    pub name: Option<String>,
}

/// A JSON-RPC error to answer with.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// The code.
    pub code: i64,
    /// What was wrong.
    pub message: String,
    /// Details (the revisions served, for -32022).
    pub data: Option<Value>,
}

impl RpcError {
    fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// The HTTP status a 2026-07-28 answer carrying this error gets.
    pub fn http_status(&self) -> u16 {
        match self.code {
            METHOD_NOT_FOUND => 404,
            PARSE_ERROR
            | INVALID_REQUEST
            | INVALID_PARAMS
            | HEADER_MISMATCH
            | UNSUPPORTED_PROTOCOL_VERSION => 400,
            _ => 200,
        }
    }
}

/// The JSON-RPC response to request `id`: its result or its error.
pub fn response(id: &Value, outcome: Result<Value, RpcError>) -> Value {
    match outcome {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(e) => {
            let mut error = json!({"code": e.code, "message": e.message});
            if let Some(data) = e.data {
                error["data"] = data;
            }
            json!({"jsonrpc": "2.0", "id": id, "error": error})
        }
    }
}

/// The tools a server offers: the log tools and, with a state database,
/// costwatch's own.
pub struct McpServer<S, St> {
    logs: LogTools<S>,
    state: Option<StateTools<St>>,
}

impl<S, St> McpServer<S, St>
where
    S: Source,
    St: Inspect + WindowStore,
{
    /// A server over `logs` and, when given, `state`.
    pub fn new(logs: LogTools<S>, state: Option<StateTools<St>>) -> McpServer<S, St> {
        McpServer { logs, state }
    }

    /// Every tool served, in the order listed.
    pub fn tools(&self) -> Vec<ToolDef> {
        let mut tools = log_tool_defs();
        if self.state.is_some() {
            tools.extend(state_tool_defs());
        }
        tools
    }

    /// Handles one JSON-RPC message in `era`; `None` for a notification
    /// (nothing to answer). Over HTTP `headers` are checked against the
    /// body in the 2026-07-28 era.
    pub async fn handle(
        &self,
        message: &Value,
        era: Era,
        headers: Option<&RoutingHeaders>,
    ) -> Option<Value> {
        let Some(obj) = message.as_object() else {
            let e = RpcError::new(INVALID_REQUEST, "expected one JSON-RPC request object");
            return Some(response(&Value::Null, Err(e)));
        };
        let id = obj.get("id").cloned();
        let method = obj.get("method").and_then(Value::as_str);
        let (Some(id), Some(method)) = (id, method) else {
            // A notification, or a response: nothing to answer.
            return None;
        };
        if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            let e = RpcError::new(INVALID_REQUEST, "jsonrpc: expected \"2.0\"");
            return Some(response(&id, Err(e)));
        }
        let params = obj.get("params").cloned().unwrap_or(Value::Null);
        let outcome = match era {
            Era::Handshake => self.handshake(method, &params).await,
            Era::Modern => match check_modern(method, &params, headers) {
                Ok(()) => self.modern(method, &params).await,
                Err(e) => Err(e),
            },
        };
        Some(response(&id, outcome))
    }

    async fn handshake(&self, method: &str, params: &Value) -> Result<Value, RpcError> {
        match method {
            "initialize" => {
                let asked = params.get("protocolVersion").and_then(Value::as_str);
                let version = asked
                    .filter(|v| HANDSHAKE_VERSIONS.contains(v))
                    .unwrap_or(HANDSHAKE_VERSIONS[0]);
                Ok(json!({
                    "protocolVersion": version,
                    "capabilities": {"tools": {"listChanged": false}},
                    "serverInfo": server_info(),
                    "instructions": INSTRUCTIONS,
                }))
            }
            "ping" => Ok(json!({})),
            "tools/list" => Ok(json!({"tools": self.listed()})),
            "tools/call" => self.call(params).await,
            other => Err(method_not_found(other)),
        }
    }

    async fn modern(&self, method: &str, params: &Value) -> Result<Value, RpcError> {
        let mut result = match method {
            "server/discover" => json!({
                "supportedVersions": [MODERN_VERSION],
                "capabilities": {"tools": {"listChanged": false}},
                "instructions": INSTRUCTIONS,
                "ttlMs": TOOLS_TTL_MS,
                "cacheScope": "private",
            }),
            "tools/list" => json!({
                "tools": self.listed(),
                "ttlMs": TOOLS_TTL_MS,
                "cacheScope": "private",
            }),
            "tools/call" => self.call(params).await?,
            other => return Err(method_not_found(other)),
        };
        result["resultType"] = json!("complete");
        result["_meta"] = json!({ SERVER_INFO_META: server_info() });
        Ok(result)
    }

    /// The tools as `tools/list` lists them.
    fn listed(&self) -> Vec<Value> {
        self.tools()
            .into_iter()
            .map(|t| {
                json!({
                    "name": t.name,
                    "title": t.title,
                    "description": t.description,
                    "inputSchema": t.input_schema,
                    "outputSchema": t.output_schema,
                    "annotations": {
                        "title": t.title,
                        "readOnlyHint": true,
                        "destructiveHint": false,
                        "idempotentHint": true,
                        "openWorldHint": false,
                    },
                })
            })
            .collect()
    }

    /// `tools/call`: the tool's answer as a result.
    async fn call(&self, params: &Value) -> Result<Value, RpcError> {
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            return Err(RpcError::new(
                INVALID_PARAMS,
                "params.name: the tool to call is required",
            ));
        };
        let empty = Map::new();
        let arguments = match params.get("arguments") {
            None | Some(Value::Null) => &empty,
            Some(Value::Object(m)) => m,
            Some(_) => {
                return Ok(tool_result(&Answer::Refused(
                    "arguments: expected a JSON object".into(),
                )));
            }
        };
        let answer = if crate::logtools::LOG_TOOLS.contains(&name) {
            self.logs
                .call(name, &Value::Object(arguments.clone()))
                .await
                .unwrap_or_else(|e| Answer::Refused(format!("the source could not be read: {e}")))
        } else if let Some(state) = self
            .state
            .as_ref()
            .filter(|_| crate::logtools::state::STATE_TOOLS.contains(&name))
        {
            state.call(name, arguments).await.unwrap_or_else(|e| {
                Answer::Refused(format!("the state database could not be read: {e}"))
            })
        } else {
            let names: Vec<&str> = self.tools().iter().map(|t| t.name).collect();
            return Err(RpcError::new(
                INVALID_PARAMS,
                format!(
                    "unknown tool `{}`; tools: {}",
                    crate::printable::printable(name),
                    names.join(", ")
                ),
            ));
        };
        Ok(tool_result(&bounded(answer)))
    }
}

/// `answer`, or a refusal when its text is over [`MAX_RESULT_BYTES`].
fn bounded(answer: Answer) -> Answer {
    match &answer {
        Answer::Done(_) if answer.text().len() > MAX_RESULT_BYTES => Answer::Refused(format!(
            "limit: the result is over {} KiB; ask for fewer rows",
            MAX_RESULT_BYTES / 1024
        )),
        _ => answer,
    }
}

/// A `tools/call` result: the JSON as text and as `structuredContent`, or
/// the refusal with `isError`.
fn tool_result(answer: &Answer) -> Value {
    let text = answer.text();
    match answer {
        Answer::Done(value) => json!({
            "content": [{"type": "text", "text": text}],
            "structuredContent": value,
            "isError": false,
        }),
        Answer::Refused(_) => json!({
            "content": [{"type": "text", "text": text}],
            "isError": true,
        }),
    }
}

fn server_info() -> Value {
    json!({"name": "costwatch", "title": "costwatch", "version": env!("CARGO_PKG_VERSION")})
}

fn method_not_found(method: &str) -> RpcError {
    RpcError::new(
        METHOD_NOT_FOUND,
        format!("method not found: {}", crate::printable::printable(method)),
    )
}

/// The checks every 2026-07-28 request passes, in the order the official
/// SDK runs them: the `_meta` envelope, the routing headers (over HTTP),
/// then the revision.
fn check_modern(
    method: &str,
    params: &Value,
    headers: Option<&RoutingHeaders>,
) -> Result<(), RpcError> {
    let meta = params.get("_meta").and_then(Value::as_object).ok_or_else(|| {
        RpcError::new(
            INVALID_PARAMS,
            format!(
                "params._meta must be an object carrying {PROTOCOL_VERSION_META} and {CLIENT_CAPABILITIES_META}"
            ),
        )
    })?;
    let missing: Vec<&str> = [PROTOCOL_VERSION_META, CLIENT_CAPABILITIES_META]
        .into_iter()
        .filter(|k| !meta.contains_key(*k))
        .collect();
    if !missing.is_empty() {
        return Err(RpcError::new(
            INVALID_PARAMS,
            format!("params._meta is missing {}", missing.join(", ")),
        ));
    }
    let version = meta.get(PROTOCOL_VERSION_META);
    if let Some(h) = headers {
        if h.protocol_version.as_deref().map(Value::from).as_ref() != version {
            return Err(RpcError::new(
                HEADER_MISMATCH,
                "the MCP-Protocol-Version header does not match params._meta's protocol version",
            ));
        }
        if h.method.as_deref() != Some(method) {
            return Err(RpcError::new(
                HEADER_MISMATCH,
                "the Mcp-Method header does not match the request's method",
            ));
        }
        if method == "tools/call"
            && let Some(name) = params.get("name").and_then(Value::as_str)
            && h.name.as_deref() != Some(name)
        {
            return Err(RpcError::new(
                HEADER_MISMATCH,
                "the Mcp-Name header does not match params.name",
            ));
        }
    }
    let Some(version) = version.and_then(Value::as_str) else {
        return Err(RpcError::new(
            INVALID_PARAMS,
            "params._meta's protocol version must be a string",
        ));
    };
    if version != MODERN_VERSION {
        return Err(RpcError {
            code: UNSUPPORTED_PROTOCOL_VERSION,
            message: "Unsupported protocol version".to_owned(),
            data: Some(json!({"supported": [MODERN_VERSION], "requested": version})),
        });
    }
    Ok(())
}

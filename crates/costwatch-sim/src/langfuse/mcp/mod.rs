//! A stand-in for Langfuse's own MCP server, `{host}/api/public/mcp`, over
//! the same observations as `GET /api/public/v2/observations` (each
//! simulated call one generation, written by `super::observation`).
//!
//! Followed from `langfuse/langfuse` at commit `62751446149b` (2026-08-22,
//! the commit the observations API of [`super`] follows too):
//! - `web/src/pages/api/public/mcp/index.ts`: the route. Host and Origin
//!   checked first (`server/security.ts`: the host of `NEXTAUTH_URL`, the
//!   exact names of `LANGFUSE_MCP_ALLOWED_HOSTS`, and loopback names outside
//!   production; else 403); then `ApiAuthService.verifyAuthHeaderAndReturnScope`
//!   (`web/src/features/public-api/server/apiAuth.ts`): HTTP Basic with a
//!   project's public key as user and its secret key as password, the key
//!   found by the hash of the secret (a public key that does not belong to
//!   it is only logged); a public key alone as a Bearer token is the
//!   `scores` scope, which MCP refuses (403, "MCP requires project-scoped
//!   API keys with BasicAuth"); anything else a 401. Those errors are JSON
//!   `{"error": "MCP error -32600: ...", "code": -32600}` (the messages of
//!   `core/error-formatting.ts`, prefixed as the SDK's `McpError` prefixes
//!   them), without `WWW-Authenticate`.
//! - `server/transport.ts` and `server/mcpServer.ts`: a fresh low-level
//!   `Server` (`@modelcontextprotocol/sdk` 1.29.0, `web/package.json`) and a
//!   `StreamableHTTPServerTransport` per request, stateless (no
//!   `sessionIdGenerator`: no `Mcp-Session-Id`, no handshake needed before a
//!   call) with `enableJsonResponse` (answers are `application/json`);
//!   server info `langfuse` `0.3.0-unstable`, capabilities `{"tools": {}}`.
//!   The SDK's transport (read in its `webStandardStreamableHttp` source)
//!   wants an `Accept` naming both JSON and SSE (406), `Content-Type:
//!   application/json` (415), and on every message but `initialize` an
//!   `MCP-Protocol-Version`, when sent, among 2025-11-25, 2025-06-18,
//!   2025-03-26, 2024-11-05 and 2024-10-07 (400, -32000 "Bad Request:
//!   Unsupported protocol version: ..."): revision 2026-07-28 and its
//!   `server/discover` are not spoken, so a client of that revision falls
//!   back to `initialize`, which answers the revision asked for when
//!   supported and 2025-11-25 otherwise. Notifications get a 202.
//! - `server/registry.ts`, `core/define-tool.ts`, `core/run-mcp-tool.ts`:
//!   a tool's result is `{"content": [{"type": "text", "text":
//!   JSON.stringify(result, null, 2)}]}`; every failure is a JSON-RPC error,
//!   never an `isError` result: arguments that fail the zod schema -32602
//!   `MCP error -32602: Validation failed: <path>: <message>, ...`,
//!   Langfuse's request errors (a bad cursor, an observation not found,
//!   input/output/metadata asked for without a scope) -32600 `MCP error
//!   -32600: <message>`, an unknown tool -32603 `Unknown tool: <name>`.
//!   Arguments the schema does not name are dropped, not refused (zod's
//!   default), so `listObservations` with a top-level `sessionId` lists the
//!   whole project: the session filter is `filter: [{"column":
//!   "sessionId", "operator": "=", "value": ...}]`.
//! - `features/observations/` (`index.ts`, `schema.ts`, `tools/*.ts`): the
//!   five observation tools, with their names, descriptions and input
//!   schemas (as `z.toJSONSchema` writes them, draft-7, output mode: a
//!   defaulted `limit` is required, `additionalProperties: false`),
//!   `readOnlyHint: true`, offered only when
//!   `LANGFUSE_MIGRATION_V4_ALLOW_PREVIEW_OPT_IN=true` (Langfuse v4;
//!   [`LangfuseSim::set_v4_opt_in`]); the projection (compact default
//!   fields, `["*"]`, or named fields; `providedModelName` read from the
//!   row's `model`; a `url` to the trace); `limit` 1 to 100 (default 50),
//!   one row more read to decide on `meta.cursor`, the cursor of the v2
//!   API; the advanced filters (`packages/shared/src/eventsTable.ts`:
//!   `OBSERVATION_MCP_ALLOWED_EVENTS_TABLE_FILTER_COLUMNS` and each
//!   column's type; `packages/shared/src/interfaces/filters.ts`: the
//!   operators of each type; an exact `id` filter becomes `any of`).
//! - `web/src/features/events/server/eventsService.ts` and
//!   `packages/shared/src/server/queries/clickhouse-sql/event-filter-options.ts`:
//!   `getObservationFilterValues` counts non-empty values, most frequent
//!   first then by value, pages with a base64 `{"offset"}` cursor, and
//!   answers numeric columns with `{min, max, avg, count}`; without
//!   `fromStartTime` it looks back 30 days (here: from the simulator's
//!   horizon when one is set, else over every call).
//!
//! What it leaves out: every other feature of the server (prompts,
//! datasets, scores, metrics with `queryMetrics` and `getMetricsSchema`,
//! ...): only two of its writes are listed, `createScore` and
//! `deleteDatasetItem` with their annotations and an open schema, so that
//! a listing mixes reads and writes as the real one does; calling them is
//! an error. Metadata values are not cut at 200 characters (the
//! simulator's are short), string filters compare case-sensitively,
//! datetimes are read as RFC 3339 (and plain dates), rate limits and the
//! in-app agent keys are not modelled, requests whose `params` break the
//! SDK's own request schemas get a -32603 of the simulator's wording, and
//! `GET` answers an event stream that ends at once (the per-request server
//! closes it).
//!
//! Layout: this file holds the endpoint's state, its test handles and the
//! HTTP side; `gate` the Host, Origin and key checks; `rpc` the JSON-RPC
//! messages; `tools` the tool list and dispatch; `input` the zod-like
//! argument checks; `filters` the advanced filters; `observations` the
//! observation tools; `values` the filter values and the two schema tools;
//! `json` the result text; `record` what arrived.

mod filters;
mod gate;
mod input;
mod json;
mod observations;
mod record;
mod rpc;
#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;
mod tools;
mod values;

pub use self::record::{LangfuseMcpCall, McpAuth};

use super::{LangfuseSim, RouteState};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use std::sync::{Mutex, PoisonError, RwLock};

/// The protocol revisions the server's SDK knows, newest first.
pub const PROTOCOL_VERSIONS: [&str; 5] = [
    "2025-11-25",
    "2025-06-18",
    "2025-03-26",
    "2024-11-05",
    "2024-10-07",
];

/// What the MCP endpoint keeps: what arrived, the extra host names it
/// accepts, and whether the v4 tools are on.
#[derive(Debug)]
pub(crate) struct McpState {
    calls: Mutex<Vec<LangfuseMcpCall>>,
    allowed_hosts: RwLock<Vec<String>>,
    v4: RwLock<bool>,
}

impl Default for McpState {
    fn default() -> Self {
        McpState {
            calls: Mutex::new(Vec::new()),
            allowed_hosts: RwLock::new(Vec::new()),
            v4: RwLock::new(true),
        }
    }
}

impl LangfuseSim {
    /// Every request the MCP endpoint received, oldest first (refused ones
    /// included).
    pub fn mcp_calls(&self) -> Vec<LangfuseMcpCall> {
        self.mcp
            .calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Accepts `host` (a host name, as in `LANGFUSE_MCP_ALLOWED_HOSTS`) in
    /// the `Host` header besides the loopback names.
    pub fn allow_mcp_host(&self, host: &str) {
        self.mcp
            .allowed_hosts
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .push(host.to_ascii_lowercase());
    }

    /// Serves the MCP endpoint as a server with
    /// `LANGFUSE_MIGRATION_V4_ALLOW_PREVIEW_OPT_IN` set (`true`, the
    /// default: Langfuse v4) or not (v3: the observation tools are neither
    /// listed nor callable).
    pub fn set_v4_opt_in(&self, on: bool) {
        *self.mcp.v4.write().unwrap_or_else(PoisonError::into_inner) = on;
    }

    fn v4(&self) -> bool {
        *self.mcp.v4.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn allowed_hosts(&self) -> Vec<String> {
        self.mcp
            .allowed_hosts
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// `POST`: JSON-RPC messages.
pub(super) async fn post(
    State(st): State<RouteState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let parsed: Option<Value> = serde_json::from_slice(&body).ok();
    let (auth, res) = match gate::check(&st.sim, &headers) {
        Ok((auth, origin)) => {
            let res = rpc::handle(&st, &headers, &body, parsed.as_ref());
            (auth, with_cors(res, origin))
        }
        Err(refused) => {
            let (auth, res) = *refused;
            (auth, with_cors(res, None))
        }
    };
    st.sim
        .record(&Method::POST, parsed.as_ref(), &headers, auth, res.status());
    res
}

/// `GET`: the SDK opens a stream for server messages; the per-request
/// server closes it as soon as the request is handled, so it ends empty.
pub(super) async fn get(State(st): State<RouteState>, headers: HeaderMap) -> Response {
    let (auth, res) = match gate::check(&st.sim, &headers) {
        Ok((auth, origin)) => {
            let res = match rpc::check_get(&headers) {
                Ok(()) => (
                    StatusCode::OK,
                    [
                        (header::CONTENT_TYPE, "text/event-stream"),
                        (header::CACHE_CONTROL, "no-cache, no-transform"),
                    ],
                    "",
                )
                    .into_response(),
                Err(res) => *res,
            };
            (auth, with_cors(res, origin))
        }
        Err(refused) => {
            let (auth, res) = *refused;
            (auth, with_cors(res, None))
        }
    };
    st.sim
        .record(&Method::GET, None, &headers, auth, res.status());
    res
}

/// `DELETE`: nothing to end in a stateless server; the SDK closes the
/// transport and answers 200.
pub(super) async fn delete(State(st): State<RouteState>, headers: HeaderMap) -> Response {
    let (auth, res) = match gate::check(&st.sim, &headers) {
        Ok((auth, origin)) => {
            let res = match rpc::check_version(&headers) {
                Ok(()) => StatusCode::OK.into_response(),
                Err(res) => *res,
            };
            (auth, with_cors(res, origin))
        }
        Err(refused) => {
            let (auth, res) = *refused;
            (auth, with_cors(res, None))
        }
    };
    st.sim
        .record(&Method::DELETE, None, &headers, auth, res.status());
    res
}

/// `OPTIONS`: the CORS preflight, answered after the Host and Origin
/// checks and before the keys.
pub(super) async fn options(State(st): State<RouteState>, headers: HeaderMap) -> Response {
    let res = match gate::security(&st.sim, &headers) {
        Ok(origin) => with_cors(StatusCode::OK.into_response(), origin),
        Err(res) => with_cors(*res, None),
    };
    let auth = McpAuth::of(&headers, &st.sim);
    st.sim
        .record(&Method::OPTIONS, None, &headers, auth, res.status());
    res
}

/// The CORS headers every answer of the route carries
/// (`applyMcpCorsHeaders`).
fn with_cors(mut res: Response, origin: Option<HeaderValue>) -> Response {
    let h = res.headers_mut();
    if let Some(origin) = origin {
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        h.insert(header::VARY, HeaderValue::from_static("Origin"));
    }
    h.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST, DELETE, OPTIONS"),
    );
    h.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static(
            "Content-Type, Authorization, Accept, Mcp-Session-Id, Last-Event-ID",
        ),
    );
    h.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static("Mcp-Session-Id"),
    );
    res
}

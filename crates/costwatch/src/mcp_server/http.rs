//! `/mcp` over Streamable HTTP: one JSON-RPC message per `POST`, answered
//! as `application/json` (no event stream: no tool sends progress), or
//! `202 Accepted` for a notification. No sessions: `GET` and `DELETE` are
//! `405`.
//!
//! Security as the specification's transport section asks:
//! - **`Origin`** (DNS rebinding): a request from a browser page must come
//!   from a loopback origin or from `server.public_url`'s; any other
//!   `Origin` is `403`. Requests without one (every non-browser client)
//!   pass.
//! - **A bearer token** (`COSTWATCH_MCP_TOKEN` or `server.mcp_token_file`),
//!   required when `server.listen` is not loopback: without it, or with
//!   another, `401` with `WWW-Authenticate: Bearer`.
//! - **Bodies** over [`MAX_BODY_BYTES`] are `413`.
//!
//! A reload (SIGHUP) swaps the server and who may call it whole
//! ([`McpEndpoint::replace`]): a rotated token file or a changed source is
//! in force from the next request, one in flight finishes with what it
//! started with, and with `server.mcp` turned off the route answers `404`.

use super::{Era, HANDSHAKE_VERSIONS, McpServer, PARSE_ERROR, RoutingHeaders, RpcError, response};
use crate::secret::BearerToken;
use crate::source::Source;
use crate::store::WindowStore;
use crate::store::inspect::Inspect;
use axum::Router;
use axum::body::{Body, to_bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::Value;
use std::sync::{Arc, PoisonError, RwLock};
use url::Url;

/// The largest request body read.
pub const MAX_BODY_BYTES: usize = 1 << 20;

/// Who may call `/mcp`.
#[derive(Debug, Clone, Default)]
pub struct Access {
    /// The token requests must carry, if any.
    pub token: Option<BearerToken>,
    /// An origin allowed besides loopback ones (`server.public_url`'s).
    pub public_origin: Option<String>,
}

impl Access {
    /// With `public_url`'s origin allowed.
    pub fn with_public_url(mut self, public_url: Option<&Url>) -> Access {
        self.public_origin = public_url.map(|u| u.origin().ascii_serialization());
        self
    }
}

struct Shared<S, St> {
    server: McpServer<S, St>,
    access: Access,
}

/// What `/mcp` answers with: the server and who may call it, or nothing
/// while `server.mcp` is off. Replaced whole by a reload.
pub struct McpEndpoint<S, St> {
    current: RwLock<Option<Arc<Shared<S, St>>>>,
}

impl<S, St> McpEndpoint<S, St> {
    /// Serves `server` to `access` from the next request on; `None` turns
    /// the route off (`404`).
    pub fn replace(&self, served: Option<(McpServer<S, St>, Access)>) {
        let next = served.map(|(server, access)| Arc::new(Shared { server, access }));
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = next;
    }

    fn current(&self) -> Option<Arc<Shared<S, St>>> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// The `/mcp` route, serving `served` (`None`: off until a reload turns it
/// on), and the handle a reload replaces it with.
pub fn router<S, St>(
    served: Option<(McpServer<S, St>, Access)>,
) -> (Router, Arc<McpEndpoint<S, St>>)
where
    S: Source + 'static,
    St: Inspect + WindowStore + 'static,
{
    let endpoint = Arc::new(McpEndpoint {
        current: RwLock::new(None),
    });
    endpoint.replace(served);
    let router = Router::new()
        .route(
            "/mcp",
            post(handle::<S, St>).get(not_allowed).delete(not_allowed),
        )
        .with_state(endpoint.clone());
    (router, endpoint)
}

async fn not_allowed() -> Response {
    (
        StatusCode::METHOD_NOT_ALLOWED,
        [(header::ALLOW, HeaderValue::from_static("POST"))],
        "costwatch's MCP endpoint answers POST only: it keeps no sessions and sends no stream\n",
    )
        .into_response()
}

/// Whether a browser's `Origin` may call: loopback, or the public URL's.
fn origin_allowed(origin: &str, access: &Access) -> bool {
    if access.public_origin.as_deref() == Some(origin) {
        return true;
    }
    let Ok(url) = Url::parse(origin) else {
        return false;
    };
    match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

fn header_text(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

async fn handle<S, St>(
    State(endpoint): State<Arc<McpEndpoint<S, St>>>,
    headers: HeaderMap,
    body: Body,
) -> Response
where
    S: Source + 'static,
    St: Inspect + WindowStore + 'static,
{
    let Some(shared) = endpoint.current() else {
        return (
            StatusCode::NOT_FOUND,
            "costwatch serves MCP here only with server.mcp: true\n",
        )
            .into_response();
    };
    if let Some(origin) = header_text(&headers, "origin")
        && !origin_allowed(&origin, &shared.access)
    {
        return (
            StatusCode::FORBIDDEN,
            "this Origin may not call costwatch's MCP endpoint\n",
        )
            .into_response();
    }
    if let Some(token) = &shared.access.token
        && !token.admits(headers.get(header::AUTHORIZATION).map(|v| v.as_bytes()))
    {
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"))],
            "a bearer token is required (Authorization: Bearer <token>)\n",
        )
            .into_response();
    }
    let Ok(bytes) = to_bytes(body, MAX_BODY_BYTES).await else {
        return (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("a request body is at most {MAX_BODY_BYTES} bytes\n"),
        )
            .into_response();
    };
    let message: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => {
            let error = RpcError {
                code: PARSE_ERROR,
                message: format!("the body is not JSON: {e}"),
                data: None,
            };
            return json_reply(StatusCode::BAD_REQUEST, &response(&Value::Null, Err(error)));
        }
    };
    let routing = RoutingHeaders {
        protocol_version: header_text(&headers, "mcp-protocol-version"),
        method: header_text(&headers, "mcp-method"),
        name: header_text(&headers, "mcp-name"),
    };
    let era = match routing.protocol_version.as_deref() {
        None => Era::Handshake,
        Some(v) if HANDSHAKE_VERSIONS.contains(&v) => Era::Handshake,
        Some(_) => Era::Modern,
    };
    match shared.server.handle(&message, era, Some(&routing)).await {
        None => StatusCode::ACCEPTED.into_response(),
        Some(reply) => {
            let status = match (era, reply.get("error").and_then(|e| e.get("code"))) {
                (Era::Modern, Some(code)) => {
                    let e = RpcError {
                        code: code.as_i64().unwrap_or_default(),
                        message: String::new(),
                        data: None,
                    };
                    StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::OK)
                }
                _ => StatusCode::OK,
            };
            json_reply(status, &reply)
        }
    }
}

fn json_reply(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body.to_string(),
    )
        .into_response()
}

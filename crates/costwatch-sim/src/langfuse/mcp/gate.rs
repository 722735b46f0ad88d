//! The checks before any JSON-RPC is read, in the route's order
//! (`web/src/pages/api/public/mcp/index.ts`): the `Host` and `Origin`
//! headers (`server/security.ts`), then the project's keys
//! (`apiAuth.ts`). A refusal is JSON `{"error", "code"}` with the message
//! `formatErrorForUser` gives a `ForbiddenError` (403) or an
//! `UnauthorizedError` (401).

use super::McpAuth;
use crate::langfuse::LangfuseSim;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use url::Url;

/// The 401 of a missing or wrong key.
pub(super) const UNAUTHORIZED: &str =
    "MCP error -32600: Authentication failed. Please check your API key.";
/// The 403 of a bad `Host` or `Origin`, or of a key that is not a
/// project's key pair.
pub(super) const FORBIDDEN: &str =
    "MCP error -32600: Access forbidden. You do not have permission to access this resource.";

/// Host names accepted outside production besides `NEXTAUTH_URL`'s.
const LOOPBACK: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// A refusal of the route: `{"error": message, "code": -32600}`.
pub(super) fn refusal(status: StatusCode, message: &str) -> Response {
    (
        status,
        axum::Json(json!({ "error": message, "code": -32600 })),
    )
        .into_response()
}

/// The `Host` and `Origin` checks: the origin to echo in CORS headers, or
/// the 403.
pub(super) fn security(
    sim: &LangfuseSim,
    headers: &HeaderMap,
) -> Result<Option<HeaderValue>, Box<Response>> {
    let forbidden = || Box::new(refusal(StatusCode::FORBIDDEN, FORBIDDEN));
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .ok_or_else(forbidden)?;
    let host_url = Url::parse(&format!("http://{host}")).map_err(|_| forbidden())?;
    let hostname = host_url
        .host_str()
        .map(str::to_ascii_lowercase)
        .ok_or_else(forbidden)?;
    let extra = sim.allowed_hosts();
    if !LOOPBACK.contains(&hostname.as_str()) && !extra.contains(&hostname) {
        return Err(forbidden());
    }
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(None);
    };
    let origin = origin
        .to_str()
        .ok()
        .and_then(|o| Url::parse(o).ok())
        .map(|o| o.origin().ascii_serialization().to_ascii_lowercase())
        .ok_or_else(forbidden)?;
    // Loopback origins on the server's own port, and the extra hosts.
    let port = host_url.port_or_known_default().unwrap_or(80);
    let allowed = LOOPBACK
        .iter()
        .flat_map(|name| {
            ["http", "https"].map(|scheme| {
                Url::parse(&format!("{scheme}://{name}:{port}"))
                    .map(|u| u.origin().ascii_serialization())
                    .unwrap_or_default()
            })
        })
        .chain(extra.iter().map(|h| format!("http://{h}")))
        .any(|a| a == origin);
    if !allowed {
        return Err(forbidden());
    }
    HeaderValue::from_str(&origin)
        .map(Some)
        .map_err(|_| forbidden())
}

/// A request let through: the key it carried and the origin to echo.
pub(super) type Passed = (McpAuth, Option<HeaderValue>);
/// A request refused: the key it carried and the answer.
pub(super) type Refused = Box<(McpAuth, Response)>;

/// Every check before the JSON-RPC: the key's kind, and the origin to echo
/// or the refusal.
pub(super) fn check(sim: &LangfuseSim, headers: &HeaderMap) -> Result<Passed, Refused> {
    let auth = McpAuth::of(headers, sim);
    let origin = match security(sim, headers) {
        Ok(origin) => origin,
        Err(res) => return Err(Box::new((auth, *res))),
    };
    match &auth {
        McpAuth::Basic {
            secret_ok: true, ..
        } => Ok((auth, origin)),
        // A public key alone is the `scores` scope: not a project key pair.
        McpAuth::Bearer { public_key: true } => {
            Err(Box::new((auth, refusal(StatusCode::FORBIDDEN, FORBIDDEN))))
        }
        _ => Err(Box::new((
            auth,
            refusal(StatusCode::UNAUTHORIZED, UNAUTHORIZED),
        ))),
    }
}

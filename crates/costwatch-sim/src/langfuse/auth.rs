//! The project key check of Langfuse's public API
//! (`web/src/features/public-api/server/apiAuth.ts`,
//! `createAuthedProjectAPIRoute.ts`): HTTP Basic with the public key as
//! user and the secret key as password. A public key alone, as a Bearer
//! token, reaches only the scores routes: here it is a 403. Failures are
//! `{"message": ...}` without a `WWW-Authenticate` header.

use super::{ApiError, LangfuseSim};
use axum::http::{HeaderMap, StatusCode, header};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;

const INVALID_CREDENTIALS: &str =
    "Invalid credentials. Confirm that you've configured the correct host.";

/// Whether the request carries the project's keys.
pub(super) fn check(headers: &HeaderMap, sim: &LangfuseSim) -> Result<(), ApiError> {
    let unauthorized = |m: &str| Err(ApiError::message(StatusCode::UNAUTHORIZED, m));
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return unauthorized("No authorization header");
    };
    let Ok(value) = value.to_str() else {
        return unauthorized("Invalid authorization header");
    };
    if let Some(token) = value.strip_prefix("Basic ") {
        let Some(text) = token
            .split(' ')
            .next()
            .and_then(|t| STANDARD.decode(t).ok())
            .and_then(|b| String::from_utf8(b).ok())
        else {
            return unauthorized(
                "Invalid character. Confirm that you've configured the correct host.",
            );
        };
        // `atob(value).split(":")`, first two parts.
        let mut parts = text.split(':');
        let (user, password) = (parts.next(), parts.next());
        if user == Some(sim.public_key.as_str()) && password == Some(sim.secret_key.as_str()) {
            return Ok(());
        }
        return unauthorized(INVALID_CREDENTIALS);
    }
    if let Some(token) = value.strip_prefix("Bearer ") {
        if token == sim.public_key {
            return Err(ApiError::message(
                StatusCode::FORBIDDEN,
                "Access denied - insufficient permissions for this endpoint",
            ));
        }
        return unauthorized(INVALID_CREDENTIALS);
    }
    unauthorized("Invalid authorization header")
}

//! Which era of the protocol the client speaks with the server, decided
//! once per client as the 2026-07-28 versioning rules say ("Backward
//! Compatibility"; Streamable HTTP, "Backward Compatibility").
//!
//! The probe is `server/discover` at 2026-07-28. The server speaks that
//! revision when the probe succeeds and the result lists it; a result that
//! lists only older revisions means `initialize` at the newest of them the
//! client speaks. Otherwise:
//! - `UnsupportedProtocolVersion` (-32022) names the revisions the server
//!   speaks: `initialize` asks for the newest of them the client speaks in
//!   the `initialize` era; a list sharing none is `Rejected`, naming both
//!   lists (a -32022 without a list counts as the next case);
//! - any other refusal (a 4xx, or a JSON-RPC error) that is not an error
//!   only 2026-07-28 servers send means a server of the `initialize` era:
//!   `initialize` asking for [`INITIALIZE_VERSION`];
//! - an error only 2026-07-28 servers send (`HeaderMismatch`,
//!   `MissingRequiredClientCapability`) is a refusal of the probe itself,
//!   `Rejected`; method not found with a 404 is a 2026-07-28 server without
//!   `server/discover`, spoken to at 2026-07-28;
//! - 401 and 403 are `Rejected` and transient failures are retried, then
//!   `Transient`: neither says anything about the era.
//!
//! The outcome is kept until [`McpClient::close`], or until the server
//! answers `UnsupportedProtocolVersion` to a later request or to
//! `initialize` (it changed): the next request probes again. A lost
//! session of the `initialize` era is opened again with `initialize` alone,
//! the era being a property of the server.

use super::headers::modern_headers;
use super::protocol::{
    METHOD_NOT_FOUND, UNSUPPORTED_VERSION, Verdict, complete, protocol, quote_versions, rejected,
    split_response, verdict, with_meta,
};
use super::session::Session;
use super::transport::{Failure, Kind, Refusal, Reply};
use super::{
    INITIALIZE_VERSION, INITIALIZE_VERSIONS, McpClient, PROTOCOL_VERSION, SUPPORTED_VERSIONS,
};
use crate::investigate::InvestigateError;
use serde_json::{Value, json};

/// What the client speaks with the server for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Era {
    /// 2026-07-28: no handshake and no session; every request carries
    /// `_meta` and the request metadata headers.
    Modern,
    /// The `initialize` era, in an open session.
    Legacy(Session),
}

/// What the client remembers of the negotiation.
#[derive(Debug, Default)]
pub(super) enum Agreement {
    /// Nothing yet, or forgotten: the next request probes.
    #[default]
    Unknown,
    /// The server speaks 2026-07-28.
    Modern,
    /// The server speaks the `initialize` era.
    Legacy {
        /// The revision `initialize` asks for.
        ask: &'static str,
        /// The open session; `None` once lost (the next request
        /// initializes again).
        session: Option<Session>,
    },
}

/// What the probe found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probe {
    /// The server speaks 2026-07-28.
    Modern,
    /// The server speaks the `initialize` era; ask for this revision.
    Legacy(&'static str),
}

impl McpClient {
    /// The era to send the next request in: the one agreed on, negotiated
    /// first if there is none, or a new session when the last one was lost.
    pub(super) async fn era(&self) -> Result<Era, InvestigateError> {
        let mut agreement = self.agreement.lock().await;
        let ask = match &*agreement {
            Agreement::Modern => return Ok(Era::Modern),
            Agreement::Legacy {
                session: Some(session),
                ..
            } => return Ok(Era::Legacy(session.clone())),
            Agreement::Legacy { ask, session: None } => *ask,
            Agreement::Unknown => match self.discover().await? {
                Probe::Modern => {
                    *agreement = Agreement::Modern;
                    tracing::debug!(
                        protocol_version = PROTOCOL_VERSION,
                        "mcp server speaks the modern protocol"
                    );
                    return Ok(Era::Modern);
                }
                Probe::Legacy(ask) => ask,
            },
        };
        match self.initialize(ask).await {
            Ok(session) => {
                *agreement = Agreement::Legacy {
                    ask,
                    session: Some(session.clone()),
                };
                Ok(Era::Legacy(session))
            }
            // A server refusing the revision of its `initialize` is one of
            // the 2026-07-28 era after all (it changed since the probe):
            // the next request probes again.
            Err(Failure::Refused(refusal)) if refusal.code() == Some(UNSUPPORTED_VERSION) => {
                *agreement = Agreement::Unknown;
                Err(refusal.error)
            }
            // Otherwise the era stays known; the next request initializes.
            Err(failure) => {
                *agreement = Agreement::Legacy { ask, session: None };
                Err(failure.into_error())
            }
        }
    }

    /// Forgets the session `stale` if it is still the open one: the next
    /// request initializes again.
    pub(super) async fn forget_session(&self, stale: &Session) {
        let mut agreement = self.agreement.lock().await;
        if let Agreement::Legacy { session, .. } = &mut *agreement
            && session.as_ref() == Some(stale)
        {
            *session = None;
        }
    }

    /// Forgets the era `stale` was sent in if it is still the agreed one:
    /// the next request negotiates again.
    pub(super) async fn forget_era(&self, stale: &Era) {
        let mut agreement = self.agreement.lock().await;
        let current = match &*agreement {
            Agreement::Modern => Some(Era::Modern),
            Agreement::Legacy {
                session: Some(s), ..
            } => Some(Era::Legacy(s.clone())),
            Agreement::Legacy { session: None, .. } | Agreement::Unknown => None,
        };
        if current.as_ref() == Some(stale) {
            *agreement = Agreement::Unknown;
        }
    }

    /// `server/discover` at 2026-07-28, read as the module documentation
    /// says.
    async fn discover(&self) -> Result<Probe, InvestigateError> {
        const METHOD: &str = "server/discover";
        let params = with_meta(&json!({}));
        let headers = modern_headers(METHOD, &params, None);
        let message = json!({"jsonrpc": "2.0", "method": METHOD, "params": params});
        let refusal = match self.post(&message, &headers, Kind::Request, METHOD).await {
            Ok(Reply::Message { message, .. }) => match split_response(METHOD, message)? {
                Ok(result) => return discovered(complete(METHOD, result)?),
                Err(error) => Refusal::in_answer(METHOD, error),
            },
            Ok(Reply::Accepted) => {
                return Err(protocol(format!(
                    "{METHOD}: the server answered without a response"
                )));
            }
            Err(Failure::Error(e)) => return Err(e),
            Err(Failure::Refused(refusal)) => refusal,
        };
        match verdict(refusal.status, refusal.rpc.as_ref()) {
            Verdict::Unsupported(Some(supported)) => choose(&supported),
            Verdict::Unsupported(None) | Verdict::Legacy => {
                tracing::debug!(
                    status = refusal.status,
                    code = refusal.rpc.as_ref().map(|e| e.code),
                    "mcp server does not speak the modern protocol; initializing"
                );
                Ok(Probe::Legacy(INITIALIZE_VERSION))
            }
            Verdict::Modern if refusal.rpc.as_ref().map(|e| e.code) == Some(METHOD_NOT_FOUND) => {
                tracing::warn!("the mcp server speaks the modern protocol without server/discover");
                Ok(Probe::Modern)
            }
            Verdict::Modern => Err(refusal.error),
        }
    }
}

/// A `server/discover` result: 2026-07-28 when its `supportedVersions` lists
/// it, otherwise the `initialize` era (a server that lists only older
/// revisions, or whose result is not a discovery result, speaks that).
fn discovered(result: Value) -> Result<Probe, InvestigateError> {
    let supported: Vec<String> = result
        .get("supportedVersions")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    if supported.iter().any(|v| v == PROTOCOL_VERSION) {
        return Ok(Probe::Modern);
    }
    let ask = INITIALIZE_VERSIONS
        .into_iter()
        .find(|v| supported.iter().any(|s| s == v))
        .unwrap_or(INITIALIZE_VERSION);
    tracing::debug!(
        supported = %quote_versions(&supported),
        "mcp server discovered without the modern protocol; initializing"
    );
    Ok(Probe::Legacy(ask))
}

/// The revision to speak with a server that answered the probe with
/// `UnsupportedProtocolVersion` listing `supported`.
fn choose(supported: &[String]) -> Result<Probe, InvestigateError> {
    if supported.iter().any(|v| v == PROTOCOL_VERSION) {
        return Err(protocol(format!(
            "server/discover: the server refused protocol version {PROTOCOL_VERSION} and lists it as supported"
        )));
    }
    match INITIALIZE_VERSIONS
        .into_iter()
        .find(|v| supported.iter().any(|s| s == v))
    {
        Some(ask) => Ok(Probe::Legacy(ask)),
        None => Err(rejected(format!(
            "server/discover: no protocol version in common: the server speaks {}; costwatch speaks {}",
            quote_versions(supported),
            SUPPORTED_VERSIONS.join(", ")
        ))),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    fn list(versions: &[&str]) -> Vec<String> {
        versions.iter().map(|v| (*v).to_owned()).collect()
    }

    #[test]
    fn the_newest_shared_revision_of_the_initialize_era_is_asked_for() {
        assert_eq!(
            choose(&list(&["2025-03-26", "2025-06-18"])),
            Ok(Probe::Legacy("2025-06-18"))
        );
        assert_eq!(
            choose(&list(&["2027-01-01", "2025-11-25", "2024-11-05"])),
            Ok(Probe::Legacy("2025-11-25"))
        );
        let err = choose(&list(&["2027-01-01", "2024-11-05"])).unwrap_err();
        assert_eq!(
            err,
            InvestigateError::Rejected(
                "server/discover: no protocol version in common: the server speaks 2027-01-01, 2024-11-05; \
                 costwatch speaks 2026-07-28, 2025-11-25, 2025-06-18, 2025-03-26"
                    .into()
            )
        );
        assert!(matches!(
            choose(&list(&["2026-07-28"])),
            Err(InvestigateError::Protocol(_))
        ));
    }

    #[test]
    fn a_discovery_result_without_the_modern_revision_means_initialize() {
        let modern = json!({"supportedVersions": ["2027-01-01", "2026-07-28"]});
        assert_eq!(discovered(modern), Ok(Probe::Modern));
        let legacy = json!({"supportedVersions": ["2025-06-18"]});
        assert_eq!(discovered(legacy), Ok(Probe::Legacy("2025-06-18")));
        assert_eq!(discovered(json!({})), Ok(Probe::Legacy("2025-11-25")));
    }
}

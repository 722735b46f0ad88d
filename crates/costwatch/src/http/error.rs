//! The one error type of an HTTP exchange, and how it is described.

use std::fmt;
use std::time::Duration;
use url::Url;

/// What a message says was called: the method and the URL with everything
/// that may be secret left out (query always, path when asked).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    method: &'static str,
    shown: String,
}

impl Target {
    /// `METHOD /path`: the query (label values, cursors) is left out.
    pub fn path(method: &'static str, url: &Url) -> Target {
        Target {
            method,
            shown: url.path().to_owned(),
        }
    }

    /// `METHOD scheme://host[:port]/…`: path, query and credentials are
    /// left out, for URLs that embed a token (webhooks).
    pub fn origin(method: &'static str, url: &Url) -> Target {
        Target {
            method,
            shown: origin_only(url),
        }
    }

    /// The URL as shown, without the method.
    pub fn shown(&self) -> &str {
        &self.shown
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.method, self.shown)
    }
}

/// `scheme://host[:port]/…`: the URL with its path, query, fragment and
/// credentials left out.
pub fn origin_only(url: &Url) -> String {
    let host = url.host_str().unwrap_or("");
    match url.port() {
        Some(port) => format!("{}://{host}:{port}/…", url.scheme()),
        None => format!("{}://{host}/…", url.scheme()),
    }
}

/// Why one HTTP exchange failed. Whether it is worth another attempt is the
/// [`RetryPolicy`](super::RetryPolicy)'s decision; the error only says what
/// happened, and each message names the call without secrets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    /// The client could not be built.
    #[error("cannot build http client: {detail}")]
    Setup {
        /// What went wrong.
        detail: String,
    },
    /// No answer arrived: the connection failed, was reset or timed out.
    #[error("{target}: {detail}")]
    Send {
        /// The call, without secrets.
        target: String,
        /// What went wrong, without the URL.
        detail: String,
        /// The connection was never opened: the server cannot have seen
        /// the request.
        connect: bool,
        /// The client gave up waiting.
        timed_out: bool,
    },
    /// An answer with a status other than 2xx.
    #[error("{target}: {}", status_line(*status, message))]
    Status {
        /// The call, without secrets.
        target: String,
        /// The status code.
        status: u16,
        /// The server's error message, or a snippet of its body.
        message: String,
        /// The server's `Retry-After`, if it gave one in seconds.
        retry_after: Option<Duration>,
    },
    /// The answer's body stopped before its end (connection closed or
    /// timed out mid-body): never taken as a short answer.
    #[error("{target}: body cut off: {detail}")]
    CutOff {
        /// The call, without secrets.
        target: String,
        /// What went wrong, without the URL.
        detail: String,
        /// The client gave up waiting.
        timed_out: bool,
    },
    /// The answer's body is larger than the cap.
    #[error("{target}: the answer is larger than max_body_bytes ({cap})")]
    TooLarge {
        /// The call, without secrets.
        target: String,
        /// The cap, in bytes.
        cap: usize,
    },
}

impl HttpError {
    /// Whether the server may have processed (and billed) the request:
    /// it was sent but no whole answer came back, or the answer was
    /// refused. A connection never opened or an error status means it was
    /// not.
    pub fn maybe_processed(&self) -> bool {
        match self {
            HttpError::Setup { .. } | HttpError::Status { .. } => false,
            HttpError::Send { connect, .. } => !connect,
            HttpError::CutOff { .. } | HttpError::TooLarge { .. } => true,
        }
    }

    /// The status code, for an error status.
    pub fn status(&self) -> Option<u16> {
        match self {
            HttpError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Whether the client gave up waiting (before or during the answer).
    pub fn timed_out(&self) -> bool {
        matches!(
            self,
            HttpError::Send {
                timed_out: true,
                ..
            } | HttpError::CutOff {
                timed_out: true,
                ..
            }
        )
    }

    /// The server's `Retry-After`, if it gave one.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            HttpError::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// `status 503 service unavailable: message` (the message only when there
/// is one).
fn status_line(status: u16, message: &str) -> String {
    let reason = reqwest::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason());
    let mut line = match reason {
        Some(reason) => format!("status {status} {}", reason.to_lowercase()),
        None => format!("status {status}"),
    };
    if !message.is_empty() {
        line.push_str(": ");
        line.push_str(message);
    }
    line
}

/// A reqwest error as text without its URL: `timed out after 10s` when the
/// client's timeout struck, otherwise the error and its sources.
pub(crate) fn describe(err: reqwest::Error, timeout: Option<Duration>) -> String {
    if err.is_timeout()
        && let Some(t) = timeout
    {
        return format!("timed out after {}", humantime::format_duration(t));
    }
    chain(&err.without_url())
}

/// An error and its sources, joined with `: ` (a source whose text is
/// already contained in the text so far is left out).
pub fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(e) = source {
        let part = e.to_string();
        if !part.is_empty() && !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = e.source();
    }
    text
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn targets_hide_queries_and_tokens() {
        let url = Url::parse("https://u:pw@hooks.example:8443/t/T0KEN?k=s3cret").unwrap();
        assert_eq!(Target::path("GET", &url).to_string(), "GET /t/T0KEN");
        assert_eq!(
            Target::origin("POST", &url).to_string(),
            "POST https://hooks.example:8443/…"
        );
    }

    #[test]
    fn status_errors_read_as_a_line() {
        let e = HttpError::Status {
            target: "GET /v1/sessions".into(),
            status: 503,
            message: "busy".into(),
            retry_after: None,
        };
        assert_eq!(
            e.to_string(),
            "GET /v1/sessions: status 503 service unavailable: busy"
        );
        assert_eq!(status_line(302, ""), "status 302 found");
        assert_eq!(status_line(599, "x"), "status 599: x");
    }
}

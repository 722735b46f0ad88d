//! Reading answers: whole bodies under a size cap, streamed chunk by chunk,
//! and the short message quoted from an error answer.

use super::error::{HttpError, describe};
use axum::body::Bytes;
use std::time::Duration;

/// Most bytes of an error answer read for its message.
pub const ERROR_BODY_LIMIT: usize = 64 << 10;

/// Most characters of an error answer quoted in a message.
pub const SNIPPET_CHARS: usize = 200;

/// A response body read chunk by chunk, failing as soon as more than `cap`
/// bytes arrived (or were announced by `Content-Length`), and failing, not
/// ending, when the connection stops before the body's end.
#[derive(Debug)]
pub struct CappedBody {
    response: reqwest::Response,
    cap: usize,
    read: usize,
    target: String,
    timeout: Option<Duration>,
}

impl CappedBody {
    /// Starts reading `response`; refuses at once a body announced larger
    /// than `cap`. `target` names the call in errors; `timeout` is the
    /// client's, for the message when it strikes mid-body.
    pub(crate) fn new(
        response: reqwest::Response,
        cap: usize,
        target: String,
        timeout: Option<Duration>,
    ) -> Result<CappedBody, HttpError> {
        if response.content_length().is_some_and(|n| n > cap as u64) {
            return Err(HttpError::TooLarge { target, cap });
        }
        Ok(CappedBody {
            response,
            cap,
            read: 0,
            target,
            timeout,
        })
    }

    /// The next chunk, or `None` at the body's end.
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, HttpError> {
        match self.response.chunk().await {
            Ok(Some(chunk)) => {
                self.read += chunk.len();
                if self.read > self.cap {
                    return Err(HttpError::TooLarge {
                        target: self.target.clone(),
                        cap: self.cap,
                    });
                }
                Ok(Some(chunk))
            }
            Ok(None) => Ok(None),
            Err(e) => Err(HttpError::CutOff {
                target: self.target.clone(),
                timed_out: e.is_timeout(),
                detail: describe(e, self.timeout),
            }),
        }
    }

    /// The whole body.
    pub async fn read_to_end(mut self) -> Result<Vec<u8>, HttpError> {
        // Sized once from Content-Length (within the cap) rather than grown
        // chunk by chunk.
        let expected = self
            .response
            .content_length()
            .map_or(0, |n| usize::try_from(n).unwrap_or(usize::MAX));
        let mut body = Vec::with_capacity(expected.min(self.cap));
        while let Some(chunk) = self.chunk().await? {
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }
}

/// The message of an error answer: read at most [`ERROR_BODY_LIMIT`] bytes
/// (a body that fails midway keeps what arrived) and quote it with
/// [`error_text`].
pub(crate) async fn error_message(mut response: reqwest::Response) -> String {
    let mut body = Vec::new();
    while body.len() < ERROR_BODY_LIMIT {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            Ok(None) | Err(_) => break,
        }
    }
    body.truncate(ERROR_BODY_LIMIT);
    error_text(&body)
}

/// The message of an error body: `error.message` of a JSON error envelope
/// (after `error.code` when that is a string), otherwise a
/// [`snippet`] of the body.
pub fn error_text(body: &[u8]) -> String {
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) {
        let text = |pointer: &str| value.pointer(pointer).and_then(|v| v.as_str());
        let (code, message) = (text("/error/code"), text("/error/message"));
        if code.is_some() || message.is_some() {
            let line = format!("{} {}", code.unwrap_or(""), message.unwrap_or(""));
            return snippet(line.as_bytes());
        }
    }
    snippet(body)
}

/// The start of `body` on one line: control and bidi characters and runs
/// of whitespace become one space, at most [`SNIPPET_CHARS`] characters, `…`
/// when more was left out.
pub fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let line = text
        .split(|c: char| c.is_whitespace() || crate::printable::is_unsafe(c))
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let mut chars = line.chars();
    let mut out: String = chars.by_ref().take(SNIPPET_CHARS).collect();
    if chars.next().is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn snippets_are_one_short_line() {
        assert_eq!(snippet(b"  busy\r\n\tnow \x07 "), "busy now");
        assert_eq!(
            snippet("down\u{202e}\u{1b}[2J\u{2028}now".as_bytes()),
            "down [2J now"
        );
        assert_eq!(snippet(b""), "");
        let long = "x".repeat(500);
        let s = snippet(long.as_bytes());
        assert_eq!(s.chars().count(), SNIPPET_CHARS + 1);
        assert!(s.ends_with('…'));
        let exact = "y".repeat(SNIPPET_CHARS);
        assert_eq!(snippet(exact.as_bytes()), exact);
    }

    #[test]
    fn json_error_envelopes_give_their_message() {
        let gw = br#"{"error": {"code": "rate_limited", "message": "slow down"}}"#;
        assert_eq!(error_text(gw), "rate_limited slow down");
        let rpc = br#"{"jsonrpc": "2.0", "error": {"code": -32600, "message": "bad"}}"#;
        assert_eq!(error_text(rpc), "bad");
        assert_eq!(error_text(br#"{"ok": false}"#), r#"{"ok": false}"#);
        assert_eq!(error_text(b"<html>oops</html>"), "<html>oops</html>");
    }
}

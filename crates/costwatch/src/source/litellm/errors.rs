//! What a refused read means for whoever runs costwatch: which setting to
//! change, or which LiteLLM version is needed.
//!
//! The page fetcher describes an error answer as `GET /path: status 401
//! unauthorized: <the proxy's message>` ([`HttpError`](crate::http::HttpError));
//! the status is read back from that line (a test below holds the format
//! to it) and the advice added. The key is never part of a message: should
//! the proxy quote it back, it is replaced.

use crate::secret::Secret;
use crate::source::SourceError;

/// The version whose `/spend/logs/v2` takes everything the reader sends
/// (`page_size` up to 1000, `sort_by`, `sort_order`, `session_id`).
pub(super) const MIN_VERSION: &str = "1.95.0";

/// Adds to `err`, an error of `GET path`, what to do about it.
pub(super) fn explain(err: SourceError, path: &str, key: &Secret) -> SourceError {
    // A key too short to be a LiteLLM key is not searched for: replacing
    // it would garble the message rather than hide anything.
    let scrub = |m: String| {
        if key.expose().len() < 8 {
            m
        } else {
            m.replace(key.expose(), "[redacted]")
        }
    };
    match err {
        SourceError::Rejected(m) => {
            let m = scrub(m);
            let advice = match status(&m, path) {
                Some(401 | 403) => "the LiteLLM proxy refused the key: set COSTWATCH_ADMIN_KEY or \
                     source.admin_key_file to its master key or to a virtual key of a proxy \
                     admin (a key of another role reads only its own spend)"
                    .to_owned(),
                Some(404) => format!(
                    "no such route on the proxy: source.api_url must be the LiteLLM proxy's \
                     base URL (without /v1), and {path} needs LiteLLM {MIN_VERSION} or later"
                ),
                Some(400 | 422) => format!(
                    "the proxy refused the query: costwatch needs LiteLLM {MIN_VERSION} or \
                     later (page_size up to 1000, sort_by, sort_order, session_id)"
                ),
                _ => return SourceError::Rejected(m),
            };
            SourceError::Rejected(format!("{m}; {advice}"))
        }
        SourceError::Invalid(m) if m.contains("larger than max_body_bytes") => {
            SourceError::Invalid(format!(
                "{}; lower source.page_limit or raise source.max_body_bytes",
                scrub(m)
            ))
        }
        SourceError::Invalid(m) => SourceError::Invalid(scrub(m)),
        SourceError::Transient(m) => SourceError::Transient(scrub(m)),
    }
}

/// The status of an error answer to `GET path`, from its description.
fn status(message: &str, path: &str) -> Option<u16> {
    let rest = message.strip_prefix("GET ")?.strip_prefix(path)?;
    let code = rest.strip_prefix(": status ")?;
    code.get(..3)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::HttpError;

    fn rejected(status: u16, message: &str) -> SourceError {
        SourceError::Rejected(
            HttpError::Status {
                target: "GET /spend/logs/v2".to_owned(),
                status,
                message: message.to_owned(),
                retry_after: None,
            }
            .to_string(),
        )
    }

    #[test]
    fn the_status_is_read_back_from_the_fetchers_description() {
        let SourceError::Rejected(m) = rejected(401, "401 Authentication Error") else {
            return;
        };
        assert_eq!(status(&m, "/spend/logs/v2"), Some(401));
        assert_eq!(status(&m, "/model/info"), None);
        assert_eq!(
            status("GET /spend/logs/v2: body cut off", "/spend/logs/v2"),
            None
        );
    }

    #[test]
    fn a_refused_key_names_the_settings_and_never_the_key() {
        let key = Secret::new("sk-master-1234");
        let err = explain(
            rejected(401, "Authentication Error, key=sk-master-1234 is invalid"),
            "/spend/logs/v2",
            &key,
        );
        let text = err.to_string();
        assert!(matches!(err, SourceError::Rejected(_)));
        assert!(text.contains("COSTWATCH_ADMIN_KEY"), "{text}");
        assert!(text.contains("source.admin_key_file"), "{text}");
        assert!(!text.contains("sk-master-1234"), "{text}");
        assert!(text.contains("[redacted]"), "{text}");
        let text = explain(rejected(403, "forbidden"), "/spend/logs/v2", &key).to_string();
        assert!(text.contains("COSTWATCH_ADMIN_KEY"), "{text}");
    }

    #[test]
    fn a_missing_route_names_the_url_and_the_version() {
        let text = explain(
            rejected(404, "Not Found"),
            "/spend/logs/v2",
            &Secret::new("k"),
        )
        .to_string();
        assert!(text.contains("source.api_url"), "{text}");
        assert!(text.contains(MIN_VERSION), "{text}");
        let text = explain(
            rejected(422, "page_size"),
            "/spend/logs/v2",
            &Secret::new("k"),
        )
        .to_string();
        assert!(text.contains(MIN_VERSION), "{text}");
        // Other refusals keep their own message.
        let text = explain(
            rejected(409, "conflict"),
            "/spend/logs/v2",
            &Secret::new("k"),
        )
        .to_string();
        assert!(!text.contains(MIN_VERSION), "{text}");
    }
}

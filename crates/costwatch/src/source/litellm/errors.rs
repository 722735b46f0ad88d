//! What a refused read means for whoever runs costwatch: which setting to
//! change, or which LiteLLM version is needed.
//!
//! [`refusal`] is the page fetcher's [`Refusal`](crate::source::fetch::Refusal):
//! it gets the answer's status and adds the advice. [`explain`] then keeps
//! the key out of every message: should the proxy quote it back, it is
//! replaced.

use crate::secret::Secret;
use crate::source::SourceError;

/// The version whose `/spend/logs/v2` takes everything the reader sends
/// (`page_size` up to 1000, `sort_by`, `sort_order`, `session_id`).
pub(super) const MIN_VERSION: &str = "1.95.0";

/// What a refused answer of the proxy means.
pub(super) fn refusal(status: u16, message: String) -> SourceError {
    let advice = match status {
        401 | 403 => "the LiteLLM proxy refused the key: set COSTWATCH_ADMIN_KEY or \
             source.admin_key_file to its master key or to a virtual key of a proxy \
             admin (a key of another role reads only its own spend)"
            .to_owned(),
        404 => format!(
            "no such route on the proxy: source.api_url must be the LiteLLM proxy's \
             base URL (without /v1), and the spend log needs LiteLLM {MIN_VERSION} or later"
        ),
        400 | 422 => format!(
            "the proxy refused the query: costwatch needs LiteLLM {MIN_VERSION} or \
             later (page_size up to 1000, sort_by, sort_order, session_id)"
        ),
        _ => return SourceError::Rejected(message),
    };
    SourceError::Rejected(format!("{message}; {advice}"))
}

/// `err` without the key, and with what to do about an answer too large.
pub(super) fn explain(err: SourceError, key: &Secret) -> SourceError {
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
        SourceError::Rejected(m) => SourceError::Rejected(scrub(m)),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::HttpError;

    /// A refusal as the page fetcher hands it over.
    fn rejected(status: u16, message: &str) -> SourceError {
        let described = HttpError::Status {
            target: "GET /spend/logs/v2".to_owned(),
            status,
            message: message.to_owned(),
            retry_after: None,
        }
        .to_string();
        refusal(status, described)
    }

    #[test]
    fn a_refused_key_names_the_settings_and_never_the_key() {
        let key = Secret::new("sk-master-1234");
        let err = explain(
            rejected(401, "Authentication Error, key=sk-master-1234 is invalid"),
            &key,
        );
        let text = err.to_string();
        assert!(matches!(err, SourceError::Rejected(_)));
        assert!(text.contains("COSTWATCH_ADMIN_KEY"), "{text}");
        assert!(text.contains("source.admin_key_file"), "{text}");
        assert!(!text.contains("sk-master-1234"), "{text}");
        assert!(text.contains("[redacted]"), "{text}");
        let text = explain(rejected(403, "forbidden"), &key).to_string();
        assert!(text.contains("COSTWATCH_ADMIN_KEY"), "{text}");
    }

    #[test]
    fn a_missing_route_names_the_url_and_the_version() {
        let text = explain(rejected(404, "Not Found"), &Secret::new("k")).to_string();
        assert!(text.contains("source.api_url"), "{text}");
        assert!(text.contains(MIN_VERSION), "{text}");
        let text = explain(rejected(422, "page_size"), &Secret::new("k")).to_string();
        assert!(text.contains(MIN_VERSION), "{text}");
        // Other refusals keep their own message.
        let text = explain(rejected(409, "conflict"), &Secret::new("k")).to_string();
        assert!(!text.contains(MIN_VERSION), "{text}");
    }
}

//! What kind of failure an observation with `level: ERROR` records, from its
//! `statusMessage`.
//!
//! `statusMessage` is free text written by the integration: the
//! exception's text (`str(e)` in the Python SDK), which can quote the
//! provider's answer or even the prompt. None of it is copied. costwatch
//! keeps only what has a fixed form:
//! - an HTTP status written the way clients write it (`Error code: 429`,
//!   the text of OpenAI's `APIStatusError`; `status code 503`;
//!   `status_code=500`; `HTTP 502`), as `http_status`;
//! - an exception class leading the text (`RateLimitError: ...`,
//!   `openai.APITimeoutError: ...`), as `error_type`;
//! - otherwise, for a known status, the class OpenAI's SDK raises for it
//!   (429 `RateLimitError`, 5xx `InternalServerError`, ...), and for a text
//!   that says it timed out, `Timeout`;
//! - and `error` when nothing of the above is there.

/// Longest exception class name taken from a message, in bytes.
const MAX_CLASS_BYTES: usize = 64;
/// How far into the message a status is looked for, in bytes.
const SCAN_BYTES: usize = 512;

/// The failure an error observation records: the HTTP status if the
/// message states one, and a short class.
pub(super) fn classify(message: Option<&str>) -> (Option<u16>, String) {
    let Some(message) = message.map(str::trim).filter(|m| !m.is_empty()) else {
        return (None, "error".to_owned());
    };
    let head = prefix(message, SCAN_BYTES);
    let status = http_status(head);
    if let Some(class) = leading_class(head) {
        return (status, class.to_owned());
    }
    if let Some(class) = status.and_then(class_of_status) {
        return (status, class.to_owned());
    }
    let lower = head.to_ascii_lowercase();
    if lower.contains("timed out") || lower.contains("timeout") {
        return (status, "Timeout".to_owned());
    }
    (status, "error".to_owned())
}

/// At most `max` bytes of `text`, cut on a character boundary.
fn prefix(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The first status code written after one of the usual markers.
fn http_status(text: &str) -> Option<u16> {
    const MARKERS: [&str; 6] = [
        "Error code: ",
        "error code: ",
        "status code ",
        "status code: ",
        "status_code=",
        "HTTP ",
    ];
    MARKERS
        .iter()
        .filter_map(|m| {
            let at = text.find(m)? + m.len();
            let digits = text.get(at..at + 3)?;
            let next = text[at + 3..].chars().next();
            let code = digits
                .bytes()
                .all(|b| b.is_ascii_digit())
                .then(|| digits.parse::<u16>().ok())??;
            let whole = next.is_none_or(|c| !c.is_ascii_digit());
            (whole && (100..=599).contains(&code)).then_some((at, code))
        })
        .min_by_key(|(at, _)| *at)
        .map(|(_, code)| code)
}

/// An exception class at the start of the message: a dotted name whose last
/// part is an upper-case identifier ending in `Error`, `Exception` or
/// `Timeout`, followed by `:` or by nothing.
fn leading_class(text: &str) -> Option<&str> {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
        .unwrap_or(text.len());
    let (name, rest) = text.split_at(end);
    if !(rest.is_empty() || rest.starts_with(':')) {
        return None;
    }
    let class = name.rsplit('.').next()?;
    let named = ["Error", "Exception", "Timeout"]
        .iter()
        .any(|s| class.ends_with(s));
    let capital = class.chars().next().is_some_and(|c| c.is_ascii_uppercase());
    (named && capital && class.len() <= MAX_CLASS_BYTES).then_some(class)
}

/// The class OpenAI's Python SDK raises for an error status.
fn class_of_status(status: u16) -> Option<&'static str> {
    Some(match status {
        400 => "BadRequestError",
        401 => "AuthenticationError",
        403 => "PermissionDeniedError",
        404 => "NotFoundError",
        408 => "Timeout",
        409 => "ConflictError",
        422 => "UnprocessableEntityError",
        429 => "RateLimitError",
        500..=599 => "InternalServerError",
        _ => return None,
    })
}

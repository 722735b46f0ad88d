//! JSON read into typed values, naming the failing field: every page a
//! source reads and every price list.

use serde::Deserialize;

/// Parses a page, naming the failing field (`data[3]: missing field \`cost_usd\``).
/// The message can quote the page (a map key, an unknown variant), so it is
/// made [`printable`](crate::printable).
///
/// Tracking the path costs an allocation per key, so a page is parsed
/// without it first (from text validated as UTF-8 once, rather than string
/// by string); only a page that fails is parsed again to name the field.
/// Parsing is deterministic, so the second pass fails the same way.
pub(crate) fn json<'de, T: Deserialize<'de>>(body: &'de [u8]) -> Result<T, String> {
    if let Ok(text) = std::str::from_utf8(body)
        && let Ok(page) = serde_json::from_str(text)
    {
        return Ok(page);
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(&mut de).map_err(|e| failing_field(&e))
}

/// `path: message` of a failed read (the message alone at the root), made
/// printable, since it can quote the input.
pub(crate) fn failing_field<E: std::fmt::Display>(e: &serde_path_to_error::Error<E>) -> String {
    let path = e.path().to_string();
    let message = if path == "." || path.is_empty() {
        e.inner().to_string()
    } else {
        format!("{path}: {}", e.inner())
    };
    crate::printable::printable(&message).to_string()
}

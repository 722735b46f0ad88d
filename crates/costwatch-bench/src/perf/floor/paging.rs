//! The paging fields of a page, found in its bytes without parsing it.
//!
//! A key is the JSON string `"name"` followed by a colon: inside a JSON
//! string a quote is always escaped, so in a valid page those bytes can
//! only be that key (at whatever depth); the key's name must not be one a
//! row nests. A page cut off (by a proxy, or a server that failed while
//! writing it) lacks the envelope's closing brace or the key written after
//! its rows, and is an error, never a last page.

use crate::BenchError;
use memchr::memmem;

/// The quoted key `"name"`.
fn quoted(name: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(name.len() + 2);
    key.push(b'"');
    key.extend_from_slice(name.as_bytes());
    key.push(b'"');
    key
}

/// Where the value of a key whose quoted name ends at `after` starts,
/// when a colon follows it.
fn value_at(body: &[u8], after: usize) -> Option<usize> {
    let rest = body.get(after..)?;
    let colon = rest.iter().position(|b| !b.is_ascii_whitespace())?;
    if rest[colon] != b':' {
        return None;
    }
    let value = rest[colon + 1..]
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .map_or(rest.len(), |v| colon + 1 + v);
    Some(after + value)
}

/// Where the values of the keys `name` start, the last first.
pub fn keys_from_end<'a>(body: &'a [u8], name: &str) -> impl Iterator<Item = usize> + 'a {
    let key = quoted(name);
    let mut end = body.len();
    std::iter::from_fn(move || {
        while let Some(at) = memmem::rfind(&body[..end], &key) {
            end = at;
            if let Some(value) = value_at(body, at + key.len()) {
                return Some(value);
            }
        }
        None
    })
}

/// Where the value of the last key `name` starts, if the page has one.
pub fn last_key(body: &[u8], name: &str) -> Option<usize> {
    keys_from_end(body, name).next()
}

/// Where the value of the first key `name` at or after `from` starts.
pub fn first_key(body: &[u8], name: &str, from: usize) -> Option<usize> {
    let key = quoted(name);
    let rest = body.get(from..)?;
    memmem::find_iter(rest, &key).find_map(|at| value_at(body, from + at + key.len()))
}

/// How many keys `name` the bytes hold.
pub fn count_keys(body: &[u8], name: &str) -> u64 {
    let key = quoted(name);
    memmem::find_iter(body, &key)
        .filter(|at| value_at(body, at + key.len()).is_some())
        .count() as u64
}

/// The string value starting at `at`, or `None` for `null`; `what` names
/// the key in the error.
pub fn string_or_null<'a>(
    body: &'a [u8],
    at: usize,
    what: &str,
) -> Result<Option<&'a [u8]>, BenchError> {
    let rest = body.get(at..).unwrap_or_default();
    if rest.starts_with(b"null") {
        return Ok(None);
    }
    rest.strip_prefix(b"\"")
        .and_then(|r| r.iter().position(|b| *b == b'"').map(|end| &r[..end]))
        .map(Some)
        .ok_or_else(|| BenchError::Setup(format!("a {what} that is not a string")))
}

/// The unsigned integer starting at `at`.
pub fn number(body: &[u8], at: usize) -> Option<u64> {
    let rest = body.get(at..)?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()
}

/// Where the object starting at `at` ends (just past its closing brace),
/// strings and nested objects skipped; `None` when it is not an object or
/// is cut off.
pub fn object_end(body: &[u8], at: usize) -> Option<usize> {
    if body.get(at) != Some(&b'{') {
        return None;
    }
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for (i, b) in body.iter().enumerate().skip(at) {
        match (in_string, escaped, *b) {
            (true, true, _) => escaped = false,
            (true, false, b'\\') => escaped = true,
            (true, false, b'"') => in_string = false,
            (true, false, _) => {}
            (false, _, b'"') => in_string = true,
            (false, _, b'{' | b'[') => depth += 1,
            (false, _, b'}' | b']') => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// Whether only the envelope's closing brace (and whitespace) follows
/// `at`.
pub fn only_close_after(body: &[u8], at: usize) -> bool {
    let rest = body.get(at..).unwrap_or_default();
    let mut tail = rest.iter().filter(|b| !b.is_ascii_whitespace());
    tail.next() == Some(&b'}') && tail.next().is_none()
}

/// Whether the page's last byte that is not whitespace is a closing
/// brace (a page cut right after a row's brace passes this: the caller
/// also finds a key the envelope writes after its rows).
pub fn closed(body: &[u8]) -> bool {
    body.iter().rev().find(|b| !b.is_ascii_whitespace()) == Some(&b'}')
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_a_quoted_name_before_a_colon() {
        let page = br#"{"a": "startTime", "x": {"startTime" : "t1"}, "startTime":"t2", "completionStartTime": "t3"}"#;
        assert_eq!(count_keys(page, "startTime"), 2);
        let last = last_key(page, "startTime").unwrap();
        assert_eq!(string_or_null(page, last, "t").unwrap(), Some(&b"t2"[..]));
        let first = first_key(page, "startTime", 0).unwrap();
        assert_eq!(string_or_null(page, first, "t").unwrap(), Some(&b"t1"[..]));
        assert_eq!(first_key(page, "startTime", last), None);
        assert_eq!(last_key(page, "endTime"), None);
    }

    #[test]
    fn values_are_strings_null_or_numbers_and_a_page_is_closed_by_its_brace() {
        let page = br#"{"c": null, "n": 12, "s": 7}"#;
        let c = last_key(page, "c").unwrap();
        assert_eq!(string_or_null(page, c, "c").unwrap(), None);
        let n = last_key(page, "n").unwrap();
        assert_eq!(number(page, n), Some(12));
        let s = last_key(page, "s").unwrap();
        assert!(string_or_null(page, s, "s").is_err());
        assert!(closed(b"{\"data\": []}\n"));
        let page = br#"{"data": [], "meta": {"cursor": "a}\"b", "x": {"y": [1]}} }"#;
        let meta = last_key(page, "meta").unwrap();
        let end = object_end(page, meta).unwrap();
        assert!(only_close_after(page, end));
        assert!(!only_close_after(&page[..page.len() - 1], end));
        assert_eq!(object_end(&page[..end - 1], meta), None);
        assert!(!closed(b"{\"data\": [{\"a\": 1}, {\"a\""));
    }
}

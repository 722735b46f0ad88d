//! Paging shared by the REST routes and the MCP list tools: the page size
//! limit, the opaque cursor (paging token) and the page body.
//!
//! Both follow the reference gateway's paging (gateway-api.md section 1:
//! `limit` 1..50, `cursor` is the `next_cursor` of the previous page,
//! `next_cursor` is `null` on the last page; section 2 reuses it for
//! `list_sessions` and `search_requests`, and MCP's `tools/list` pages with
//! the same tokens as `nextCursor`).
//!
//! A cursor is base64 (URL-safe, unpadded) of `offset:<position>:<fingerprint>`,
//! where the fingerprint is a hash of the query it belongs to: a cursor
//! replayed against another query does not decode. What goes into the
//! fingerprint is the caller's choice (the REST route and its filters, the
//! MCP tool and its arguments); [`fnv1a`] hashes it.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

/// The largest page `limit` the API accepts.
pub const MAX_LIMIT: usize = 50;

/// 64-bit FNV-1a over the parts, each followed by a separator byte.
pub(crate) fn fnv1a(parts: &[&str]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for byte in part.bytes().chain([0xff]) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

/// The cursor resuming at `pos` of the query with this fingerprint.
pub(crate) fn encode(pos: usize, fingerprint: u64) -> String {
    URL_SAFE_NO_PAD.encode(format!("offset:{pos}:{fingerprint:016x}"))
}

/// The position in `cursor`, if it is a cursor of the query with this
/// fingerprint.
pub(crate) fn decode(cursor: &str, fingerprint: u64) -> Option<usize> {
    let bytes = URL_SAFE_NO_PAD.decode(cursor).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let (pos, fp) = text.strip_prefix("offset:")?.split_once(':')?;
    let pos = pos.parse::<usize>().ok()?;
    let fp = u64::from_str_radix(fp, 16).ok()?;
    (fp == fingerprint).then_some(pos)
}

/// A page body: `{"data": rows, "next_cursor": cursor or null}`.
pub(crate) fn page_body(rows: Vec<Value>, next: Option<usize>, fingerprint: u64) -> Value {
    let next = next.map(|pos| encode(pos, fingerprint));
    json!({ "data": rows, "next_cursor": next })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_reject_tampering() {
        let c = encode(42, 0xdead_beef);
        assert_eq!(decode(&c, 0xdead_beef), Some(42));
        assert_eq!(decode(&c, 0xdead_bee0), None);
        assert_eq!(decode("b2Zmc2V0OjUw", 0xdead_beef), None);
        assert_eq!(decode("not base64!", 0xdead_beef), None);
    }

    #[test]
    fn the_last_page_has_a_null_cursor() {
        let last = page_body(vec![json!(1)], None, 7);
        assert_eq!(last, json!({"data": [1], "next_cursor": null}));
        let more = page_body(Vec::new(), Some(3), 7);
        assert_eq!(decode(more["next_cursor"].as_str().unwrap(), 7), Some(3));
    }
}

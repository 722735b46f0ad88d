//! Which observations a query selects, their order, and the keyset cursor
//! (`packages/shared/src/server/repositories/events.ts`,
//! `orderByForObservationsQuery` and `applyObservationsCursorFilter`;
//! `encodeCursor` in `web/src/features/public-api/types/observations.ts`).
//!
//! Rows are ordered by `(startTime, xxHash32(traceId), id)`, descending. A
//! cursor is standard base64 of `{"lastStartTimeTo", "lastTraceId",
//! "lastId"}` of the last row handed out, and the next page starts with the
//! first row whose key is below it. The cursor carries `startTime` in
//! milliseconds, so keys compare in milliseconds too.

use super::observation::trace_id_of;
use super::query::ObservationsQuery;
use crate::dataset::{Dataset, SimRequest, format_ts};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE};
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use std::collections::HashSet;

/// What a page starts after: a row's key.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Cursor {
    /// `lastStartTimeTo`, in milliseconds since the epoch.
    pub millis: i64,
    /// `xxHash32(lastTraceId)`.
    pub trace_hash: u32,
    /// `lastId`.
    pub id: String,
}

/// A cursor's text: base64 of its JSON.
pub(super) fn encode_cursor(at: DateTime<Utc>, trace_id: &str, id: &str) -> String {
    let body = json!({ "lastStartTimeTo": format_ts(&at), "lastTraceId": trace_id, "lastId": id });
    STANDARD.encode(body.to_string())
}

/// The cursor in `text`. `Err(None)`: not base64 of JSON; `Err(Some(issue))`:
/// JSON of another shape (a zod issue).
pub(super) fn decode_cursor(text: &str) -> Result<Cursor, Option<Value>> {
    // `Buffer.from(value, "base64")` takes either alphabet, padded or not.
    let trimmed = text.trim_end_matches('=');
    let bytes = STANDARD
        .decode(format!(
            "{trimmed}{}",
            "=".repeat((4 - trimmed.len() % 4) % 4)
        ))
        .or_else(|_| URL_SAFE.decode(text))
        .map_err(|_| None)?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|_| None)?;
    let field = |name: &str| value.get(name).and_then(Value::as_str);
    let issue = |name: &str| {
        Some(
            json!({"expected": "string", "code": "invalid_type", "path": ["cursor", name],
                    "message": "Invalid input: expected string, received undefined"}),
        )
    };
    let at = field("lastStartTimeTo").ok_or_else(|| issue("lastStartTimeTo"))?;
    let at = DateTime::parse_from_rfc3339(at)
        .map_err(|_| {
            Some(json!({"expected": "date", "code": "invalid_type",
                        "path": ["cursor", "lastStartTimeTo"],
                        "message": "Invalid input: expected date, received Date"}))
        })?
        .with_timezone(&Utc);
    let trace = field("lastTraceId").ok_or_else(|| issue("lastTraceId"))?;
    let id = field("lastId").ok_or_else(|| issue("lastId"))?;
    Ok(Cursor {
        millis: at.timestamp_millis(),
        trace_hash: xxhash32(trace.as_bytes()),
        id: id.to_owned(),
    })
}

/// A row of a listing with its sort key.
#[derive(Debug, Clone)]
pub(super) struct Entry<'a> {
    pub request: &'a SimRequest,
    pub trace_id: String,
    pub key: Cursor,
}

impl Entry<'_> {
    /// The cursor that resumes after this row.
    pub(super) fn cursor(&self) -> String {
        encode_cursor(
            self.request.created_at,
            &self.trace_id,
            &self.request.request_id,
        )
    }
}

/// A page: its rows and the cursor of the next one.
#[derive(Debug)]
pub(super) struct Page<'l, 'a> {
    pub rows: &'l [Entry<'a>],
    pub next: Option<String>,
}

/// Every row a query selects (all its pages), newest first.
#[derive(Debug)]
pub(super) struct Listing<'a> {
    entries: Vec<Entry<'a>>,
}

impl<'a> Listing<'a> {
    /// The calls of `q`'s range and filters that exist at `now`; the
    /// sessions in `without_session` are served without a session id, so
    /// no `sessionId` filter selects them.
    pub(super) fn new(
        dataset: &'a Dataset,
        q: &ObservationsQuery,
        now: Option<DateTime<Utc>>,
        without_session: &HashSet<String>,
    ) -> Listing<'a> {
        let from = q.from.unwrap_or(DateTime::<Utc>::MIN_UTC);
        let to = q.to.unwrap_or(DateTime::<Utc>::MAX_UTC);
        let mut entries: Vec<Entry<'a>> = dataset
            .requests_in(from, to, &[], now)
            .into_iter()
            .filter(|r| selects(q, r, without_session))
            .map(|r| {
                let trace_id = trace_id_of(&r.session_id);
                let key = Cursor {
                    millis: r.created_at.timestamp_millis(),
                    trace_hash: xxhash32(trace_id.as_bytes()),
                    id: r.request_id.clone(),
                };
                Entry {
                    request: r,
                    trace_id,
                    key,
                }
            })
            .collect();
        entries.sort_by(|a, b| b.key.cmp(&a.key));
        Listing { entries }
    }

    /// Keeps only the rows `keep` accepts (the MCP tools' advanced
    /// filters), in order.
    pub(super) fn retain(&mut self, keep: impl FnMut(&Entry<'a>) -> bool) {
        self.entries.retain(keep);
    }

    /// Every row, newest first.
    pub(super) fn entries(&self) -> &[Entry<'a>] {
        &self.entries
    }

    /// The page starting after `cursor` (at the newest row without one),
    /// of at most `limit` rows; `next` is set when rows remain.
    pub(super) fn page(&self, cursor: Option<&Cursor>, limit: usize) -> Page<'_, 'a> {
        let from = cursor.map_or(0, |c| self.entries.partition_point(|e| e.key >= *c));
        let rest = self.entries.get(from..).unwrap_or_default();
        let rows = rest.get(..limit.min(rest.len())).unwrap_or_default();
        let next = match rows.last() {
            Some(last) if rest.len() > limit => Some(last.cursor()),
            _ => None,
        };
        Page { rows, next }
    }

    /// The cursors pages 1 to `pages` hand out, walking from the first;
    /// past the last row, fresh cursors of empty pages.
    pub(super) fn chain(&self, limit: usize, pages: usize) -> Vec<String> {
        let mut out = Vec::with_capacity(pages);
        let mut cursor: Option<Cursor> = None;
        for k in 0..pages {
            let next = if cursor.as_ref().is_some_and(|c| c.millis == PAST_THE_END) {
                None
            } else {
                self.page(cursor.as_ref(), limit).next
            };
            let text = next.unwrap_or_else(|| past_the_end(k + 1));
            cursor = decode_cursor(&text).ok();
            out.push(text);
        }
        out
    }
}

/// Whether the query's filters keep the call.
fn selects(q: &ObservationsQuery, r: &SimRequest, without_session: &HashSet<String>) -> bool {
    let level = if r.is_error() { "ERROR" } else { "DEFAULT" };
    let session = if without_session.contains(&r.session_id) {
        ""
    } else {
        r.session_id.as_str()
    };
    let environment = super::observation::environment(r);
    q.kind.as_deref().is_none_or(|k| k == "GENERATION")
        && q.level.as_deref().is_none_or(|l| l == level)
        && q.name
            .as_deref()
            .is_none_or(|n| n == super::observation::NAME)
        && q.session_id.as_deref().is_none_or(|s| s == session)
        && q.user_id
            .as_deref()
            .is_none_or(|u| u == super::user_id_of(&r.session_id))
        && q.trace_id
            .as_deref()
            .is_none_or(|t| t == trace_id_of(&r.session_id))
        && q.version.as_deref().is_none_or(str::is_empty)
        && q.parent_observation_id.is_none()
        && q.is_root != Some(false)
        && (q.environments.is_empty() || q.environments.iter().any(|e| e == environment))
}

/// Where cursors past the last row point: before every call.
const PAST_THE_END: i64 = 0;

/// The `n`-th cursor past the last row: its page is empty.
pub(super) fn past_the_end(n: usize) -> String {
    let at = DateTime::<Utc>::UNIX_EPOCH;
    encode_cursor(at, "", &format!("past-the-end-{n}"))
}

/// The number `n` of a cursor made by [`past_the_end`].
pub(super) fn past_the_end_number(cursor: &Cursor) -> Option<usize> {
    (cursor.millis == PAST_THE_END)
        .then(|| cursor.id.strip_prefix("past-the-end-")?.parse().ok())
        .flatten()
}

/// xxHash32 with seed 0, as ClickHouse's `xxHash32(string)` computes it.
pub fn xxhash32(input: &[u8]) -> u32 {
    const P1: u32 = 2_654_435_761;
    const P2: u32 = 2_246_822_519;
    const P3: u32 = 3_266_489_917;
    const P4: u32 = 668_265_263;
    const P5: u32 = 374_761_393;
    let word = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    let round = |acc: u32, lane: u32| {
        acc.wrapping_add(lane.wrapping_mul(P2))
            .rotate_left(13)
            .wrapping_mul(P1)
    };
    let stripes = input.chunks_exact(16);
    let tail = stripes.remainder();
    let mut h = if input.len() >= 16 {
        let mut v = [P1.wrapping_add(P2), P2, 0, 0u32.wrapping_sub(P1)];
        for stripe in stripes {
            for (lane, acc) in stripe.chunks_exact(4).zip(v.iter_mut()) {
                *acc = round(*acc, word(lane));
            }
        }
        v[0].rotate_left(1)
            .wrapping_add(v[1].rotate_left(7))
            .wrapping_add(v[2].rotate_left(12))
            .wrapping_add(v[3].rotate_left(18))
    } else {
        P5
    };
    h = h.wrapping_add(input.len() as u32);
    let words = tail.chunks_exact(4);
    let bytes = words.remainder();
    for w in words {
        h = h
            .wrapping_add(word(w).wrapping_mul(P3))
            .rotate_left(17)
            .wrapping_mul(P4);
    }
    for &b in bytes {
        h = h
            .wrapping_add(u32::from(b).wrapping_mul(P5))
            .rotate_left(11)
            .wrapping_mul(P1);
    }
    h ^= h >> 15;
    h = h.wrapping_mul(P2);
    h ^= h >> 13;
    h = h.wrapping_mul(P3);
    h ^= h >> 16;
    h
}

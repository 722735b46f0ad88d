//! The data the simulator serves, held in memory: the model catalogue, the
//! sessions with their request rows, and the ground truth of which sessions
//! carry waste.
//!
//! These are the gateway's own JSON shapes (the outside world: the REST
//! contract of gateway-api.md section 1), deliberately independent of the
//! crate's `source` records. Sessions are kept sorted by their first request
//! so that a window query touches only the sessions that could overlap it,
//! never the whole dataset.
//!
//! Layout: this file holds [`Dataset`] and its window and paging queries;
//! `rows` the row types and their JSON, `truth` the labelled truth,
//! `fixture` loading a fixture file.

mod fixture;
mod rows;
#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;
mod truth;

pub use self::fixture::DatasetError;
pub use self::rows::{SimModel, SimRequest, SimSession, format_ts, round_usd};
pub use self::truth::{KINDS, NO_CACHE, OVERSIZED_MODEL, RETRY_LOOP, Truth};

use self::rows::labels_match;
use chrono::{DateTime, Duration, Utc};
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};

/// A `[start, end)` pair.
pub(crate) type Bounds = (DateTime<Utc>, DateTime<Utc>);

/// The window of a query from its optional `start` and `end`: both or
/// neither (`None`), and `end` not before `start`; the message says what is
/// wrong otherwise.
pub(crate) fn bounds(
    start: Option<DateTime<Utc>>,
    end: Option<DateTime<Utc>>,
) -> Result<Option<Bounds>, &'static str> {
    match (start, end) {
        (None, None) => Ok(None),
        (Some(start), Some(end)) if end < start => Err("end: before start"),
        (Some(start), Some(end)) => Ok(Some((start, end))),
        _ => Err("start and end go together"),
    }
}

/// What a window query selects: calls in `[start, end)` whose labels carry
/// every pair of `labels`, as the gateway would show them at `now`.
#[derive(Debug, Clone, Copy)]
pub struct Window<'a> {
    /// Inclusive start.
    pub start: DateTime<Utc>,
    /// Exclusive end.
    pub end: DateTime<Utc>,
    /// Exact-match label filter (AND).
    pub labels: &'a [(String, String)],
    /// Aggregation horizon: calls after it do not exist yet (`None`: all do).
    pub now: Option<DateTime<Utc>>,
}

/// One page of rows and the position to resume from, if any rows remain.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// The rows, in the API's order.
    pub rows: Vec<Value>,
    /// Where the next page starts; `None` on the last page.
    pub next: Option<usize>,
}

/// Lookup structures derived from the sessions.
#[derive(Debug, Clone, Default)]
struct Index {
    /// Session id -> position in `sessions`.
    by_id: HashMap<String, usize>,
    /// The longest first-to-last call span of any session.
    max_span: Duration,
    /// Every call as (session, call) positions, by `created_at` then `request_id`.
    by_time: Vec<(usize, usize)>,
}

/// Everything the simulated gateway knows.
///
/// Build it with [`Dataset::new`], [`Dataset::from_fixture`] or
/// [`crate::scenario::generate`]; the fields are public to read, and a
/// changed dataset must go through [`Dataset::new`] again to be re-indexed.
#[derive(Debug, Clone)]
pub struct Dataset {
    /// The model catalogue.
    pub models: Vec<SimModel>,
    /// Sessions by first call then id; each has at least one call.
    pub sessions: Vec<SimSession>,
    /// Which sessions carry waste.
    pub truth: Truth,
    /// Sessions whose rows carry no `by_model` breakdown.
    summary_only: BTreeSet<String>,
    index: Index,
}

impl Dataset {
    /// Sorts and indexes the data; sessions without calls are dropped.
    pub fn new(models: Vec<SimModel>, mut sessions: Vec<SimSession>, truth: Truth) -> Dataset {
        sessions.retain(|s| !s.requests.is_empty());
        for s in &mut sessions {
            s.requests
                .sort_by(|a, b| (a.created_at, &a.request_id).cmp(&(b.created_at, &b.request_id)));
        }
        sessions.sort_by(|a, b| {
            (a.first_request_at(), &a.session_id).cmp(&(b.first_request_at(), &b.session_id))
        });
        let index = build_index(&sessions);
        Dataset {
            models,
            sessions,
            truth,
            summary_only: BTreeSet::new(),
            index,
        }
    }

    /// The same traffic `by` later (or earlier): every call and every fixed
    /// session row moved, so a recorded window can be replayed as if it
    /// had just happened.
    pub fn shifted(self, by: chrono::TimeDelta) -> Dataset {
        let Dataset {
            models,
            mut sessions,
            truth,
            summary_only,
            ..
        } = self;
        for s in &mut sessions {
            for r in &mut s.requests {
                r.created_at += by;
            }
            if let Some(Value::Object(row)) = &mut s.fixed_row {
                for key in ["first_request_at", "last_request_at"] {
                    let moved = row
                        .get(key)
                        .and_then(Value::as_str)
                        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                        .map(|t| {
                            (t.with_timezone(&Utc) + by)
                                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
                        });
                    if let Some(t) = moved {
                        row.insert(key.to_owned(), Value::String(t));
                    }
                }
            }
        }
        let mut shifted = Dataset::new(models, sessions, truth);
        shifted.summary_only = summary_only;
        shifted
    }

    /// The same data, with the rows of `session_ids` served without a
    /// per-model breakdown (`by_model` left out, `models` kept), as a gateway
    /// that builds session rows by grouping request rows may serve them.
    pub fn without_breakdown(mut self, session_ids: impl IntoIterator<Item = String>) -> Dataset {
        self.summary_only.extend(session_ids);
        self
    }

    /// Whether the session's rows carry a per-model breakdown.
    pub fn has_breakdown(&self, session_id: &str) -> bool {
        !self.summary_only.contains(session_id)
    }

    /// The session with this id.
    pub fn session(&self, session_id: &str) -> Option<&SimSession> {
        self.index
            .by_id
            .get(session_id)
            .and_then(|&i| self.sessions.get(i))
    }

    /// The calls of one session, in time order.
    pub fn requests_of(&self, session_id: &str) -> Option<&[SimRequest]> {
        self.session(session_id).map(|s| s.requests.as_slice())
    }

    /// How many calls the dataset holds.
    pub fn request_count(&self) -> usize {
        self.index.by_time.len()
    }

    /// The first and the last call's time.
    pub fn time_range(&self) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
        let first = self.index.by_time.first().and_then(|&p| self.call(p))?;
        let last = self.index.by_time.last().and_then(|&p| self.call(p))?;
        Some((first.created_at, last.created_at))
    }

    /// Every session row of the window, as `GET /v1/sessions` pages would
    /// return them together.
    pub fn sessions_in(
        &self,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        labels: &[(String, String)],
        now: Option<DateTime<Utc>>,
    ) -> Vec<Value> {
        let w = Window {
            start,
            end,
            labels,
            now,
        };
        self.sessions_page(&w, 0, usize::MAX).rows
    }

    /// One page of session rows starting at position `from` (0, or a
    /// previous page's `next`). Only sessions that could overlap the window
    /// are looked at.
    pub fn sessions_page(&self, w: &Window<'_>, from: usize, limit: usize) -> Page {
        let earliest = w.start.checked_sub_signed(self.index.max_span);
        let lo = earliest.map_or(0, |t| {
            self.sessions
                .partition_point(|s| s.first_request_at().is_some_and(|f| f < t))
        });
        let positions = (lo.max(from)..self.sessions.len()).take_while(|&i| {
            self.sessions[i]
                .first_request_at()
                .is_some_and(|f| f < w.end)
        });
        collect_page(
            positions,
            limit,
            |i| {
                let s = &self.sessions[i];
                s.has_labels(w.labels) && s.active_in(w.start, w.end, w.now)
            },
            |i| {
                let s = &self.sessions[i];
                s.row_shaped(w.now, self.has_breakdown(&s.session_id))
            },
        )
    }

    /// Every call of the window, by `created_at` then `request_id`.
    pub fn requests_in(
        &self,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        labels: &[(String, String)],
        now: Option<DateTime<Utc>>,
    ) -> Vec<&SimRequest> {
        let w = Window {
            start,
            end,
            labels,
            now,
        };
        self.window_positions(&w, 0)
            .filter_map(|i| self.call_at(i))
            .filter(|r| labels_match(&r.labels, labels))
            .collect()
    }

    /// One page of the window's request rows starting at position `from`.
    pub fn requests_page(&self, w: &Window<'_>, from: usize, limit: usize) -> Page {
        collect_page(
            self.window_positions(w, from),
            limit,
            |i| {
                self.call_at(i)
                    .is_some_and(|r| labels_match(&r.labels, w.labels))
            },
            |i| self.call_at(i).map(SimRequest::to_row),
        )
    }

    /// One page of one session's request rows starting at position `from`,
    /// optionally restricted to `[start, end)`; `None` for an unknown session.
    pub fn session_requests_page(
        &self,
        session_id: &str,
        window: Option<(DateTime<Utc>, DateTime<Utc>)>,
        labels: &[(String, String)],
        now: Option<DateTime<Utc>>,
        from: usize,
        limit: usize,
    ) -> Option<Page> {
        let calls = self.session(session_id)?.visible(now);
        let in_window =
            |r: &SimRequest| window.is_none_or(|(s, e)| s <= r.created_at && r.created_at < e);
        Some(collect_page(
            from..calls.len(),
            limit,
            |i| in_window(&calls[i]) && labels_match(&calls[i].labels, labels),
            |i| Some(calls[i].to_row()),
        ))
    }

    /// Positions in the time index of the window's calls visible at `now`,
    /// from `from` on (binary search to the start, then a bounded walk).
    fn window_positions<'s>(
        &'s self,
        w: &Window<'_>,
        from: usize,
    ) -> impl Iterator<Item = usize> + 's {
        let (end, now) = (w.end, w.now);
        let lo = self.first_call_from(w.start).max(from);
        (lo..self.index.by_time.len()).take_while(move |&i| {
            self.call_at(i)
                .is_some_and(|r| r.created_at < end && now.is_none_or(|n| r.created_at <= n))
        })
    }

    /// Position in the time index of the first call at or after `t`.
    fn first_call_from(&self, t: DateTime<Utc>) -> usize {
        self.index
            .by_time
            .partition_point(|&p| self.call(p).is_some_and(|r| r.created_at < t))
    }

    fn call(&self, (s, r): (usize, usize)) -> Option<&SimRequest> {
        self.sessions.get(s).and_then(|s| s.requests.get(r))
    }

    fn call_at(&self, i: usize) -> Option<&SimRequest> {
        self.index.by_time.get(i).and_then(|&p| self.call(p))
    }
}

/// Walks `positions`, keeps those passing `keep`, and stops after `limit`
/// rows, remembering where the next page would start.
fn collect_page(
    positions: impl Iterator<Item = usize>,
    limit: usize,
    keep: impl Fn(usize) -> bool,
    row: impl Fn(usize) -> Option<Value>,
) -> Page {
    let limit = limit.max(1);
    let mut rows = Vec::new();
    for pos in positions.filter(|&p| keep(p)) {
        if rows.len() == limit {
            return Page {
                rows,
                next: Some(pos),
            };
        }
        rows.extend(row(pos));
    }
    Page { rows, next: None }
}

/// Builds the id map, the longest span and the time index of sorted sessions.
fn build_index(sessions: &[SimSession]) -> Index {
    let mut by_id = HashMap::with_capacity(sessions.len());
    let mut max_span = Duration::zero();
    let mut by_time = Vec::new();
    for (i, s) in sessions.iter().enumerate() {
        by_id.insert(s.session_id.clone(), i);
        if let (Some(f), Some(l)) = (s.first_request_at(), s.last_request_at()) {
            max_span = max_span.max(l - f);
        }
        by_time.extend((0..s.requests.len()).map(|r| (i, r)));
    }
    by_time.sort_by(|&(sa, ra), &(sb, rb)| {
        let (a, b) = (&sessions[sa].requests[ra], &sessions[sb].requests[rb]);
        (a.created_at, &a.request_id).cmp(&(b.created_at, &b.request_id))
    });
    Index {
        by_id,
        max_span,
        by_time,
    }
}

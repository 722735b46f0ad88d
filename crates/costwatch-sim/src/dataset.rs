//! The data the simulator serves, held in memory: the model catalogue, the
//! sessions with their request rows, and the ground truth of which sessions
//! carry waste.
//!
//! These are the gateway's own JSON shapes (the outside world), deliberately
//! independent of the crate's `source` records. Sessions are kept sorted by
//! their first request so that a window query touches only the sessions that
//! could overlap it, never the whole dataset.

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

/// Formats a timestamp the way the gateway does: RFC 3339, milliseconds, `Z`.
pub fn format_ts(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Rounds a dollar amount to 1e-8, the precision the gateway reports.
pub fn round_usd(usd: f64) -> f64 {
    (usd * 1e8).round() / 1e8
}

/// Serde adapter writing timestamps with [`format_ts`].
mod ts {
    use chrono::{DateTime, Utc};
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::format_ts(t))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
        DateTime::<Utc>::deserialize(d)
    }
}

/// A model of the catalogue, exactly as `GET /v1/models` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimModel {
    /// Model id, e.g. `gpt-6-luna`.
    pub id: String,
    /// Dollars per million uncached prompt tokens.
    pub input_usd_per_mtok: f64,
    /// Dollars per million prompt tokens read from the cache; `None` without a cache.
    pub cached_input_usd_per_mtok: Option<f64>,
    /// Dollars per million prompt tokens written to the cache; `None` without a cache.
    pub cache_write_usd_per_mtok: Option<f64>,
    /// Dollars per million completion tokens.
    pub output_usd_per_mtok: f64,
    /// Whether the model has a prompt cache.
    pub supports_prompt_cache: bool,
}

impl SimModel {
    /// The catalogue row as JSON.
    pub fn to_row(&self) -> Value {
        json!({
            "id": self.id,
            "input_usd_per_mtok": self.input_usd_per_mtok,
            "cached_input_usd_per_mtok": self.cached_input_usd_per_mtok,
            "cache_write_usd_per_mtok": self.cache_write_usd_per_mtok,
            "output_usd_per_mtok": self.output_usd_per_mtok,
            "supports_prompt_cache": self.supports_prompt_cache,
        })
    }

    /// What one call costs: uncached input, cached input and output at their
    /// prices, rounded to 1e-8 dollars.
    pub fn cost(&self, input: u64, cached: u64, output: u64) -> f64 {
        let cached_price = self
            .cached_input_usd_per_mtok
            .unwrap_or(self.input_usd_per_mtok);
        let uncached = input.saturating_sub(cached) as f64;
        round_usd(
            (uncached * self.input_usd_per_mtok
                + cached as f64 * cached_price
                + output as f64 * self.output_usd_per_mtok)
                / 1e6,
        )
    }
}

/// One request row, with exactly the fields of `GET /v1/requests`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimRequest {
    /// `req_` and 16 hex digits.
    pub request_id: String,
    /// The session the call belongs to.
    pub session_id: String,
    /// When the call was made.
    #[serde(with = "ts")]
    pub created_at: DateTime<Utc>,
    /// Model id.
    pub model: String,
    /// `success` or `error`.
    pub status: String,
    /// HTTP status the caller saw.
    pub http_status: u16,
    /// The failure, e.g. `RateLimitError` or `Timeout`; `None` on success.
    pub error_type: Option<String>,
    /// Whole prompt tokens, cached ones included.
    pub input_tokens: u64,
    /// Prompt tokens read from the cache.
    pub cached_tokens: u64,
    /// Prompt tokens written to the cache.
    pub cache_write_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// What the call cost.
    pub cost_usd: f64,
    /// How long the call took.
    pub latency_ms: u64,
    /// The caller's labels.
    pub labels: BTreeMap<String, String>,
}

impl SimRequest {
    /// The request row as JSON, as `GET /v1/requests` returns it.
    pub fn to_row(&self) -> Value {
        json!({
            "request_id": self.request_id,
            "session_id": self.session_id,
            "created_at": format_ts(&self.created_at),
            "model": self.model,
            "status": self.status,
            "http_status": self.http_status,
            "error_type": self.error_type,
            "input_tokens": self.input_tokens,
            "cached_tokens": self.cached_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd,
            "latency_ms": self.latency_ms,
            "labels": self.labels,
        })
    }

    /// Whether the call failed.
    pub fn is_error(&self) -> bool {
        self.status != "success"
    }
}

/// A session: its labels, its calls in time order, and optionally a verbatim
/// row to serve instead of the aggregate computed from the calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimSession {
    /// `<feature>-<12 hex>` for generated sessions.
    pub session_id: String,
    /// The session's labels (`feature`, `env`, ...).
    pub labels: BTreeMap<String, String>,
    /// The calls, sorted by `created_at` then `request_id`.
    pub requests: Vec<SimRequest>,
    /// The fixture's row for this session, served as-is once all its calls
    /// are visible.
    pub fixed_row: Option<Value>,
}

impl SimSession {
    /// Time of the first call.
    pub fn first_request_at(&self) -> Option<DateTime<Utc>> {
        self.requests.first().map(|r| r.created_at)
    }

    /// Time of the last call.
    pub fn last_request_at(&self) -> Option<DateTime<Utc>> {
        self.requests.last().map(|r| r.created_at)
    }

    /// The calls made up to `now` (`None`: all of them).
    pub fn visible(&self, now: Option<DateTime<Utc>>) -> &[SimRequest] {
        match now {
            None => &self.requests,
            Some(now) => {
                let n = self.requests.partition_point(|r| r.created_at <= now);
                &self.requests[..n]
            }
        }
    }

    /// Whether every `(key, value)` pair is among the session's labels.
    pub fn has_labels(&self, filter: &[(String, String)]) -> bool {
        labels_match(&self.labels, filter)
    }

    /// Whether a call visible at `now` falls in `[start, end)`.
    pub fn active_in(
        &self,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        now: Option<DateTime<Utc>>,
    ) -> bool {
        let i = self.requests.partition_point(|r| r.created_at < start);
        self.requests
            .get(i)
            .is_some_and(|r| r.created_at < end && now.is_none_or(|now| r.created_at <= now))
    }

    /// The session row as of `now`: the fixed row when every call is
    /// visible, else the aggregate of the visible calls; `None` before the
    /// first call.
    pub fn row(&self, now: Option<DateTime<Utc>>) -> Option<Value> {
        let calls = self.visible(now);
        if calls.is_empty() {
            return None;
        }
        match &self.fixed_row {
            Some(row) if calls.len() == self.requests.len() => Some(row.clone()),
            _ => Some(aggregate(&self.session_id, &self.labels, calls)),
        }
    }
}

/// Whether every `(key, value)` pair of `filter` is in `labels`.
fn labels_match(labels: &BTreeMap<String, String>, filter: &[(String, String)]) -> bool {
    filter.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// Sums of one model's (or a whole session's) calls.
#[derive(Debug, Default)]
struct Totals {
    requests: u64,
    errors: u64,
    input: u64,
    cached: u64,
    write: u64,
    output: u64,
    cost: f64,
}

impl Totals {
    fn add(&mut self, r: &SimRequest) {
        self.requests += 1;
        self.errors += u64::from(r.is_error());
        self.input += r.input_tokens;
        self.cached += r.cached_tokens;
        self.write += r.cache_write_tokens;
        self.output += r.output_tokens;
        self.cost += r.cost_usd;
    }

    fn by_model_entry(&self) -> Value {
        json!({
            "requests": self.requests,
            "input_tokens": self.input,
            "cached_tokens": self.cached,
            "output_tokens": self.output,
            "cost_usd": round_usd(self.cost),
        })
    }
}

/// The aggregate session row of `calls` (non-empty, in time order).
fn aggregate(session_id: &str, labels: &BTreeMap<String, String>, calls: &[SimRequest]) -> Value {
    let mut total = Totals::default();
    let mut per_model: BTreeMap<&str, Totals> = BTreeMap::new();
    for r in calls {
        total.add(r);
        per_model.entry(r.model.as_str()).or_default().add(r);
    }
    // Models are listed most expensive first, as the reference gateway does.
    let mut models: Vec<(&str, f64)> = per_model.iter().map(|(m, t)| (*m, t.cost)).collect();
    models.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    let by_model: Map<String, Value> = per_model
        .iter()
        .map(|(m, t)| ((*m).to_string(), t.by_model_entry()))
        .collect();
    let first = calls.first().map(|r| format_ts(&r.created_at));
    let last = calls.last().map(|r| format_ts(&r.created_at));
    json!({
        "session_id": session_id,
        "first_request_at": first,
        "last_request_at": last,
        "requests": total.requests,
        "errors": total.errors,
        "input_tokens": total.input,
        "cached_tokens": total.cached,
        "cache_write_tokens": total.write,
        "output_tokens": total.output,
        "cost_usd": round_usd(total.cost),
        "models": models.iter().map(|(m, _)| *m).collect::<Vec<_>>(),
        "by_model": by_model,
        "labels": labels,
    })
}

/// Truth kind: a conversation that never reads its prompt cache.
pub const NO_CACHE: &str = "no_cache";
/// Truth kind: a premium model doing a small model's job.
pub const OVERSIZED_MODEL: &str = "oversized_model";
/// Truth kind: the same call resent over and over.
pub const RETRY_LOOP: &str = "retry_loop";
/// Every truth kind.
pub const KINDS: [&str; 3] = [NO_CACHE, OVERSIZED_MODEL, RETRY_LOOP];

/// Which sessions really carry waste, by kind (`no_cache`,
/// `oversized_model`, `retry_loop`). Never visible through the API.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Truth {
    /// Kind -> ids of the sessions of that kind.
    pub by_kind: BTreeMap<String, BTreeSet<String>>,
}

impl Truth {
    /// Records `session_id` as a session of `kind`.
    pub fn insert(&mut self, kind: &str, session_id: &str) {
        self.by_kind
            .entry(kind.to_string())
            .or_default()
            .insert(session_id.to_string());
    }

    /// The sessions of `kind` (empty when none).
    pub fn of(&self, kind: &str) -> impl Iterator<Item = &str> {
        self.by_kind
            .get(kind)
            .into_iter()
            .flatten()
            .map(String::as_str)
    }

    /// The kinds `session_id` is labelled with.
    pub fn kinds_of(&self, session_id: &str) -> Vec<&str> {
        self.by_kind
            .iter()
            .filter(|(_, ids)| ids.contains(session_id))
            .map(|(k, _)| k.as_str())
            .collect()
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

/// Why a fixture could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The fixture path.
        path: String,
        /// The I/O failure.
        source: std::io::Error,
    },
    /// The file is not a fixture's JSON.
    #[error("{context}: {source}")]
    Parse {
        /// The fixture path (or `fixture` for in-memory text).
        context: String,
        /// The JSON failure.
        source: serde_json::Error,
    },
    /// The fixture is well-formed JSON but inconsistent.
    #[error("{0}")]
    Invalid(String),
}

/// The fixture file's top level (`window` and `note` are ignored).
#[derive(Deserialize)]
struct FixtureFile {
    data: Vec<Value>,
    requests: Vec<SimRequest>,
    models: Vec<SimModel>,
    #[serde(default)]
    expect: BTreeMap<String, Vec<String>>,
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
            index,
        }
    }

    /// Loads a fixture such as `seed-window.json` (`data`, `requests`,
    /// `models`, `expect`).
    pub fn from_fixture(path: impl AsRef<Path>) -> Result<Dataset, DatasetError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| DatasetError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse_fixture(&text, &path.display().to_string())
    }

    /// Loads a fixture from its JSON text.
    pub fn from_fixture_str(text: &str) -> Result<Dataset, DatasetError> {
        Self::parse_fixture(text, "fixture")
    }

    fn parse_fixture(text: &str, context: &str) -> Result<Dataset, DatasetError> {
        let file: FixtureFile =
            serde_json::from_str(text).map_err(|source| DatasetError::Parse {
                context: context.to_string(),
                source,
            })?;
        let sessions = fixture_sessions(file.data, file.requests)
            .map_err(|m| DatasetError::Invalid(format!("{context}: {m}")))?;
        let mut truth = Truth::default();
        for (kind, ids) in &file.expect {
            for id in ids {
                if !sessions.iter().any(|s| &s.session_id == id) {
                    return Err(DatasetError::Invalid(format!(
                        "{context}: expect.{kind}: unknown session `{id}`"
                    )));
                }
                truth.insert(kind, id);
            }
        }
        Ok(Dataset::new(file.models, sessions, truth))
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
            |i| self.sessions[i].row(w.now),
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

/// Groups the fixture's calls under its session rows.
fn fixture_sessions(
    rows: Vec<Value>,
    requests: Vec<SimRequest>,
) -> Result<Vec<SimSession>, String> {
    let mut calls: BTreeMap<String, Vec<SimRequest>> = BTreeMap::new();
    for r in requests {
        calls.entry(r.session_id.clone()).or_default().push(r);
    }
    let mut sessions = Vec::with_capacity(rows.len());
    for (i, row) in rows.into_iter().enumerate() {
        let id = row
            .get("session_id")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("data[{i}]: missing session_id"))?
            .to_string();
        let requests = calls
            .remove(&id)
            .ok_or_else(|| format!("data[{i}]: session `{id}` has no requests"))?;
        let labels = row_labels(&row);
        sessions.push(SimSession {
            session_id: id,
            labels,
            requests,
            fixed_row: Some(row),
        });
    }
    for (id, requests) in calls {
        let labels = requests
            .first()
            .map(|r| r.labels.clone())
            .unwrap_or_default();
        sessions.push(SimSession {
            session_id: id,
            labels,
            requests,
            fixed_row: None,
        });
    }
    Ok(sessions)
}

/// The string labels of a session row.
fn row_labels(row: &Value) -> BTreeMap<String, String> {
    row.get("labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v.as_str().map_or_else(|| v.to_string(), str::to_string),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    pub(crate) const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/seed-window.json");

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn fixture() -> Dataset {
        Dataset::from_fixture(FIXTURE).unwrap()
    }

    fn fixture_json() -> Value {
        serde_json::from_str(&std::fs::read_to_string(FIXTURE).unwrap()).unwrap()
    }

    #[test]
    fn fixture_loads_sessions_and_truth() {
        let d = fixture();
        assert_eq!(d.sessions.len(), 26);
        assert_eq!(d.request_count(), 84);
        assert_eq!(d.models.len(), 2);
        let ids = |k: &str| d.truth.of(k).collect::<Vec<_>>();
        assert_eq!(ids("no_cache"), ["replay-mismatch-a14896679e70"]);
        assert_eq!(ids("oversized_model"), ["subagent-sol-9b31c0e4d2aa"]);
        assert_eq!(ids("retry_loop"), ["retry-loop-7f2e81c09ab5"]);
        assert_eq!(
            d.requests_of("retry-loop-7f2e81c09ab5").map(<[_]>::len),
            Some(10)
        );
    }

    #[test]
    fn fixture_window_is_served_verbatim() {
        let d = fixture();
        let rows = d.sessions_in(
            t("2026-10-11T11:24:00Z"),
            t("2026-10-11T11:32:00Z"),
            &[],
            None,
        );
        let expected = fixture_json()["data"].as_array().unwrap().clone();
        assert_eq!(rows.len(), 26);
        assert_eq!(rows, expected);
    }

    #[test]
    fn fixture_requests_round_trip() {
        let d = fixture();
        let rows: Vec<Value> = d
            .requests_in(
                t("2026-10-11T11:00:00Z"),
                t("2026-10-11T12:00:00Z"),
                &[],
                None,
            )
            .into_iter()
            .map(SimRequest::to_row)
            .collect();
        assert_eq!(rows.len(), 84);
        let mut expected = fixture_json()["requests"].as_array().unwrap().clone();
        expected.sort_by(|a, b| {
            (a["created_at"].as_str(), a["request_id"].as_str())
                .cmp(&(b["created_at"].as_str(), b["request_id"].as_str()))
        });
        assert_eq!(rows, expected);
        let typed =
            serde_json::to_value(d.requests_of("demo-9d2ca13ffe79").unwrap()[0].clone()).unwrap();
        assert_eq!(
            typed,
            d.requests_of("demo-9d2ca13ffe79").unwrap()[0].to_row()
        );
    }

    #[test]
    fn window_selects_overlapping_sessions_only() {
        let d = fixture();
        // 11:28:20-11:28:40 catches the retry loop (11:28:10-11:29:02) mid-life.
        let rows = d.sessions_in(
            t("2026-10-11T11:28:20Z"),
            t("2026-10-11T11:28:40Z"),
            &[],
            None,
        );
        let ids: Vec<_> = rows
            .iter()
            .map(|r| r["session_id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["retry-loop-7f2e81c09ab5"]);
        let empty = d.sessions_in(
            t("2026-10-11T12:00:00Z"),
            t("2026-10-11T13:00:00Z"),
            &[],
            None,
        );
        assert!(empty.is_empty());
    }

    #[test]
    fn label_filter_is_exact_and_conjunctive() {
        let d = fixture();
        let (s, e) = (t("2026-10-11T11:00:00Z"), t("2026-10-11T12:00:00Z"));
        let f = |pairs: &[(&str, &str)]| {
            let v: Vec<(String, String)> = pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            d.sessions_in(s, e, &v, None).len()
        };
        assert_eq!(f(&[("feature", "latency-test")]), 4);
        assert_eq!(f(&[("feature", "checkout"), ("case", "retry-loop")]), 1);
        assert_eq!(f(&[("feature", "search"), ("case", "retry-loop")]), 0);
        assert_eq!(f(&[("feature", "latency")]), 0);
    }

    #[test]
    fn horizon_cuts_a_session_short() {
        let d = fixture();
        let (s, e) = (t("2026-10-11T11:00:00Z"), t("2026-10-11T12:00:00Z"));
        let now = t("2026-10-11T11:28:30Z");
        let rows = d.sessions_in(s, e, &[], Some(now));
        let row = rows
            .iter()
            .find(|r| r["session_id"] == "retry-loop-7f2e81c09ab5")
            .unwrap();
        assert_eq!(row["requests"], 4);
        assert_eq!(row["errors"], 4);
        assert_eq!(row["last_request_at"], "2026-10-11T11:28:27.333Z");
        // Sessions that had not started yet do not exist.
        assert!(
            rows.iter()
                .all(|r| r["first_request_at"].as_str().unwrap() <= "2026-10-11T11:28:30Z")
        );
        assert_eq!(rows.len(), 17);
    }

    #[test]
    fn aggregate_sums_calls_and_splits_by_model() {
        let d = fixture();
        let mut s = d.session("subagent-sol-9b31c0e4d2aa").unwrap().clone();
        s.fixed_row = None;
        let row = s.row(None).unwrap();
        assert_eq!(row["requests"], 5);
        assert_eq!(row["input_tokens"], 507);
        assert_eq!(row["models"], json!(["gpt-6.1-sol", "gpt-6-luna"]));
        assert_eq!(row["by_model"]["gpt-6.1-sol"]["requests"], 3);
        assert_eq!(row["by_model"]["gpt-6.1-sol"]["input_tokens"], 217);
        assert_eq!(row["first_request_at"], "2026-10-11T11:27:30.000Z");
        assert!((row["cost_usd"].as_f64().unwrap() - 0.0012).abs() < 1e-9);
    }

    #[test]
    fn pages_resume_where_they_stopped() {
        let d = fixture();
        let w = Window {
            start: t("2026-10-11T11:00:00Z"),
            end: t("2026-10-11T12:00:00Z"),
            labels: &[],
            now: None,
        };
        let mut from = 0;
        let mut ids = Vec::new();
        loop {
            let page = d.sessions_page(&w, from, 5);
            assert!(page.rows.len() <= 5);
            ids.extend(
                page.rows
                    .iter()
                    .map(|r| r["session_id"].as_str().unwrap().to_string()),
            );
            match page.next {
                Some(n) => from = n,
                None => break,
            }
        }
        let all: Vec<_> = d.sessions.iter().map(|s| s.session_id.clone()).collect();
        assert_eq!(ids, all);
    }

    #[test]
    fn bad_fixtures_are_errors() {
        assert!(matches!(
            Dataset::from_fixture("/nonexistent/x.json"),
            Err(DatasetError::Read { .. })
        ));
        assert!(matches!(
            Dataset::from_fixture_str("{"),
            Err(DatasetError::Parse { .. })
        ));
        let unknown =
            r#"{"data": [], "requests": [], "models": [], "expect": {"no_cache": ["x"]}}"#;
        assert!(matches!(
            Dataset::from_fixture_str(unknown),
            Err(DatasetError::Invalid(_))
        ));
    }
}

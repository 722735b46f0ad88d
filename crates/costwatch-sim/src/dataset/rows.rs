//! The rows the simulated gateway serves, in the exact JSON shapes of the
//! reference gateway's REST contract (gateway-api.md section 1): catalogue
//! rows of `GET /v1/models` ([`SimModel`]), request rows of
//! `GET /v1/requests` ([`SimRequest`]) and the aggregated session rows of
//! `GET /v1/sessions` ([`SimSession::row`]), with the gateway's timestamp
//! and dollar formats.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

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
        self.row_shaped(now, true)
    }

    /// Like [`SimSession::row`], but an aggregate without `by_model` when
    /// `breakdown` is false: only `models` says which models were used, as
    /// in the session rows of gateways that group request rows themselves.
    pub fn row_shaped(&self, now: Option<DateTime<Utc>>, breakdown: bool) -> Option<Value> {
        let calls = self.visible(now);
        if calls.is_empty() {
            return None;
        }
        match &self.fixed_row {
            Some(row) if calls.len() == self.requests.len() => Some(row.clone()),
            _ => Some(aggregate(&self.session_id, &self.labels, calls, breakdown)),
        }
    }
}

/// Whether every `(key, value)` pair of `filter` is in `labels`.
pub(super) fn labels_match(labels: &BTreeMap<String, String>, filter: &[(String, String)]) -> bool {
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

/// The aggregate session row of `calls` (non-empty, in time order), with
/// `by_model` only when `breakdown` is set.
fn aggregate(
    session_id: &str,
    labels: &BTreeMap<String, String>,
    calls: &[SimRequest],
    breakdown: bool,
) -> Value {
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
    let mut row = json!({
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
    });
    if !breakdown && let Some(fields) = row.as_object_mut() {
        fields.remove("by_model");
    }
    row
}

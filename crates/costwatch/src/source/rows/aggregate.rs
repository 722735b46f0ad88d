//! Grouping call rows into sessions.
//!
//! An [`OpenSession`] is the running total of one session's calls, the
//! same figures the reference API's session rows carry, plus (while the
//! memory budget allows) the calls themselves for drill-downs. Calls
//! without a session id become sessions of one call, marked with
//! [`PER_CALL_LABEL`] so they form a peer group of their own and never
//! swamp the baseline of the sessions they sit beside.

use super::CallRow;
use crate::pricing::table::{Billed, PriceTable};
use crate::source::{Labels, ModelUsage, RequestRecord, SessionRecord};
use chrono::{DateTime, Utc};
use std::sync::Arc;

/// The label a session built from one call without a session id carries,
/// with the value [`PER_CALL_VALUE`]; its peer group is its own.
pub const PER_CALL_LABEL: &str = "costwatch.session";

/// The value of [`PER_CALL_LABEL`].
pub const PER_CALL_VALUE: &str = "per-call";

/// The session id given to a call without one.
pub fn per_call_id(request_id: &str) -> String {
    format!("per-call:{request_id}")
}

/// One session's calls so far.
#[derive(Debug, Clone)]
pub(super) struct OpenSession {
    pub first: DateTime<Utc>,
    pub last: DateTime<Utc>,
    pub requests: u64,
    pub errors: u64,
    pub input: u64,
    pub cached: u64,
    pub cache_write: u64,
    pub output: u64,
    pub cost: f64,
    /// Whether any call's cost was computed here rather than reported.
    pub cost_computed: bool,
    /// Successful calls, and how many of them reported cache reads.
    pub successes: u64,
    pub cache_reports: u64,
    /// The instrumentations of the successful calls without a cache-read
    /// count, each once: their reads are 0 where the instrumentation
    /// reports cache reads (see [`super::reporters`]).
    pub unreported_by: Vec<Arc<str>>,
    pub by_model: Vec<ModelUsage>,
    pub labels: Labels,
    /// The calls, while every one of them is kept; `None` once one was
    /// not (the session is then read again when drilled into).
    pub calls: Option<Vec<RequestRecord>>,
}

/// How a call's cost was arrived at.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Cost {
    /// As the gateway reported it.
    Reported(f64),
    /// From the price table.
    Computed(f64),
    /// Neither the gateway nor the table prices the model: counted as 0.
    Unknown,
}

impl Cost {
    /// The cost of `row`: reported, else priced from `prices` at the
    /// prices that held for the call.
    pub fn of(row: &CallRow, prices: &PriceTable) -> Cost {
        if let Some(c) = row.cost_usd {
            return Cost::Reported(c);
        }
        match prices.call_cost(&row.model, row.created_at, &billed(row)) {
            Some(c) => Cost::Computed(c),
            None => Cost::Unknown,
        }
    }

    fn usd(self) -> f64 {
        match self {
            Cost::Reported(c) | Cost::Computed(c) => c,
            Cost::Unknown => 0.0,
        }
    }

    fn computed(self) -> bool {
        !matches!(self, Cost::Reported(_))
    }
}

impl OpenSession {
    /// A session of one call.
    pub fn new(row: CallRow, cost: Cost, keep: bool) -> OpenSession {
        let mut s = OpenSession {
            first: row.created_at,
            last: row.created_at,
            requests: 0,
            errors: 0,
            input: 0,
            cached: 0,
            cache_write: 0,
            output: 0,
            cost: 0.0,
            cost_computed: false,
            successes: 0,
            cache_reports: 0,
            unreported_by: Vec::new(),
            by_model: Vec::new(),
            labels: Labels::new(),
            calls: Some(Vec::new()),
        };
        s.add(row, cost, keep);
        s
    }

    /// Adds one call; `keep` says whether the call itself may be kept (its
    /// strings move into the kept call rather than being copied).
    pub fn add(&mut self, mut row: CallRow, cost: Cost, keep: bool) {
        self.first = self.first.min(row.created_at);
        self.last = self.last.max(row.created_at);
        self.requests += 1;
        let failed = row.status == crate::source::RequestStatus::Error;
        self.errors += u64::from(failed);
        self.successes += u64::from(!failed);
        self.cache_reports += u64::from(!failed && row.cache_reported);
        if let Some(by) = &row.instrumentation
            && !failed
            && !row.cache_reported
            && !self.unreported_by.contains(by)
        {
            self.unreported_by.push(by.clone());
        }
        self.input = self.input.saturating_add(row.input_tokens);
        self.cached = self.cached.saturating_add(row.cached_tokens);
        self.cache_write = self.cache_write.saturating_add(row.cache_write_tokens);
        self.output = self.output.saturating_add(row.output_tokens);
        let usd = cost.usd();
        self.cost += usd;
        self.cost_computed |= cost.computed();
        ModelUsage::add_call(
            &mut self.by_model,
            &row.model,
            row.input_tokens,
            row.cached_tokens,
            row.output_tokens,
            usd,
        );
        // The first value seen of each label stays.
        let labels = std::mem::take(&mut row.labels);
        if self.labels.is_empty() {
            self.labels = labels;
        } else {
            for (k, v) in labels {
                self.labels.entry(k).or_insert(v);
            }
        }
        match (&mut self.calls, keep) {
            (Some(calls), true) => calls.push(request_record(row, usd)),
            (calls, _) => *calls = None,
        }
    }

    /// The session as the reference API would list it; `reports` says
    /// whether an instrumentation reports cache reads (its calls without a
    /// count then read 0).
    pub fn record(&self, session_id: &str, reports: impl Fn(&str) -> bool) -> SessionRecord {
        let mut by_model = self.by_model.clone();
        by_model.sort_by(|a, b| a.model.cmp(&b.model));
        for m in &mut by_model {
            m.cost_usd = round_usd(m.cost_usd);
        }
        SessionRecord {
            session_id: session_id.to_owned(),
            first_request_at: self.first,
            last_request_at: self.last,
            requests: self.requests,
            errors: self.errors,
            input_tokens: self.input,
            cached_tokens: self.cached,
            cache_write_tokens: self.cache_write,
            output_tokens: self.output,
            cost_usd: round_usd(self.cost),
            by_model,
            labels: self.labels.clone(),
            cost_computed: self.cost_computed,
            cache_unreported: self.successes > 0
                && self.cache_reports == 0
                && !self.unreported_by.iter().any(|by| reports(by)),
        }
    }

    /// How many calls are kept.
    pub fn kept(&self) -> usize {
        self.calls.as_ref().map_or(0, Vec::len)
    }
}

/// A call's tokens by how they are billed.
pub(super) fn billed(row: &CallRow) -> Billed {
    Billed::of(
        row.input_tokens,
        row.cached_tokens,
        row.cache_write_tokens,
        row.output_tokens,
    )
}

/// The request row of a call, as a drill-down returns it.
pub(super) fn request_record(row: CallRow, cost_usd: f64) -> RequestRecord {
    RequestRecord {
        request_id: row.request_id,
        session_id: row.session_id.unwrap_or_default(),
        created_at: row.created_at,
        model: row.model,
        status: row.status,
        http_status: row.http_status,
        error_type: row.error_type,
        input_tokens: row.input_tokens,
        cached_tokens: row.cached_tokens,
        cache_write_tokens: row.cache_write_tokens,
        output_tokens: row.output_tokens,
        cost_usd,
        provider: row.provider,
    }
}

/// Rounds dollars to 1e-8, the precision gateways report.
fn round_usd(v: f64) -> f64 {
    (v * 1e8).round() / 1e8
}

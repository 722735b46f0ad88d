//! The daemon's counters and gauges, rendered in the Prometheus text
//! exposition format 0.0.4.
//!
//! The format is small enough to write by hand: a `# HELP` and a `# TYPE`
//! line per family, then one `name{label="value"} number` line per sample.
//! Label values escape `\`, `"` and newlines; help text escapes `\` and
//! newlines.
//!
//! Layout: this file holds what is counted and how; `exposition` writes it
//! out in the text format.

use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

mod exposition;
#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;

/// The `Content-Type` of [`Metrics::render`]'s output.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Gateway error kinds that are always exported, at zero until seen, so that
/// `rate()` works from the first scrape.
const GATEWAY_ERROR_KINDS: [&str; 3] = ["transient", "rejected", "invalid"];

/// Everything the daemon counts, shared as `Arc<Metrics>`.
///
/// Every method takes `&self`; the plain counters are atomics and the
/// labelled ones sit behind one mutex that is held only to add a number or to
/// copy the values out for rendering.
#[derive(Debug)]
pub struct Metrics {
    windows_processed: AtomicU64,
    window_failures: AtomicU64,
    sessions_read: AtomicU64,
    drilldowns_skipped: AtomicU64,
    findings_held: AtomicU64,
    state: Mutex<State>,
}

/// The labelled counters, gauges and timestamps.
#[derive(Debug, Clone, Default)]
struct State {
    watermark: Option<DateTime<Utc>>,
    now: Option<DateTime<Utc>>,
    findings: BTreeMap<String, u64>,
    alerts_enqueued: BTreeMap<String, u64>,
    /// Notifications held back by a silence, by incident kind.
    alerts_silenced: BTreeMap<String, u64>,
    /// Open incidents below the alert floor, untold, by kind (a gauge).
    below_floor: BTreeMap<String, u64>,
    /// Keyed by channel, then `true` for sent and `false` for failed.
    deliveries: BTreeMap<(String, bool), u64>,
    gateway_errors: BTreeMap<String, u64>,
    /// OTLP export requests by outcome (`accepted`, `bad_data`, ...).
    otlp_requests: BTreeMap<String, u64>,
    /// OTLP spans by outcome (`stored`, `duplicate`, `rejected`, `other`,
    /// `without_usage`).
    otlp_spans: BTreeMap<String, u64>,
    investigation_spend_usd: f64,
    last_tick: Option<(DateTime<Utc>, bool)>,
    /// Whether the last load of the configuration (at start or on SIGHUP)
    /// succeeded, and when one last did.
    config_ok: bool,
    config_loaded_at: Option<DateTime<Utc>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// All counters at zero, no watermark and no tick yet.
    pub fn new() -> Self {
        let gateway_errors = GATEWAY_ERROR_KINDS
            .iter()
            .map(|k| ((*k).to_owned(), 0))
            .collect();
        Metrics {
            windows_processed: AtomicU64::new(0),
            window_failures: AtomicU64::new(0),
            sessions_read: AtomicU64::new(0),
            drilldowns_skipped: AtomicU64::new(0),
            findings_held: AtomicU64::new(0),
            state: Mutex::new(State {
                gateway_errors,
                config_ok: true,
                ..State::default()
            }),
        }
    }

    /// Counts `n` windows that were read, checked and stored.
    pub fn windows_processed(&self, n: u64) {
        self.windows_processed.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts one window whose processing failed (it will be retried).
    pub fn window_failed(&self) {
        self.window_failures.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts `n` sessions read from the gateway.
    pub fn sessions_read(&self, n: u64) {
        self.sessions_read.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts `n` retry-loop suspects left unread by their rule's
    /// `drilldown_budget`.
    pub fn drilldowns_skipped(&self, n: u64) {
        self.drilldowns_skipped.fetch_add(n, Ordering::Relaxed);
    }

    /// Records how many findings the last window held for the windows
    /// after it (a gauge).
    pub fn set_findings_held(&self, n: u64) {
        self.findings_held.store(n, Ordering::Relaxed);
    }

    /// Records the end of the last completed window.
    pub fn set_watermark(&self, t: DateTime<Utc>) {
        self.lock().watermark = Some(t);
    }

    /// Records the daemon clock's current time, against which the watermark
    /// lag is measured.
    pub fn set_now(&self, t: DateTime<Utc>) {
        self.lock().now = Some(t);
    }

    /// Counts one finding of `kind` (for example `no_cache`).
    pub fn finding(&self, kind: &str) {
        bump(&mut self.lock().findings, kind);
    }

    /// Counts one alert of `kind` put in the outbox.
    pub fn alert_enqueued(&self, kind: &str) {
        bump(&mut self.lock().alerts_enqueued, kind);
    }

    /// Counts one notification of an incident of `kind` held back by a
    /// silence (once per silence, incident episode and status).
    pub fn alert_silenced(&self, kind: &str) {
        bump(&mut self.lock().alerts_silenced, kind);
    }

    /// Sets how many open incidents of each kind are below the alert floor
    /// and were not sent (as of the last evaluation).
    pub fn set_below_floor(&self, by_kind: &BTreeMap<String, u64>) {
        let mut state = self.lock();
        // Kinds seen before stay listed, at 0, so the series do not vanish.
        for v in state.below_floor.values_mut() {
            *v = 0;
        }
        for (kind, n) in by_kind {
            state.below_floor.insert(kind.clone(), *n);
        }
    }

    /// Counts one delivery attempt on `channel` that was sent (`ok`) or failed.
    pub fn delivery(&self, channel: &str, ok: bool) {
        let mut state = self.lock();
        let count = state
            .deliveries
            .entry((channel.to_owned(), ok))
            .or_insert(0);
        *count = count.saturating_add(1);
    }

    /// Counts one gateway error of `kind`: `transient`, `rejected` or
    /// `invalid`.
    pub fn gateway_error(&self, kind: &str) {
        bump(&mut self.lock().gateway_errors, kind);
    }

    /// Counts one OTLP export request by its outcome: `accepted` or the
    /// reason it was refused.
    pub fn otlp_request(&self, outcome: &str) {
        bump(&mut self.lock().otlp_requests, outcome);
    }

    /// Counts the spans of one accepted OTLP export: model calls stored,
    /// already stored (a resent batch), rejected; spans that were not model
    /// calls; and stored calls that carried no usage.
    pub fn otlp_spans(
        &self,
        stored: u64,
        duplicate: u64,
        rejected: u64,
        other: u64,
        without_usage: u64,
    ) {
        let mut state = self.lock();
        for (outcome, n) in [
            ("stored", stored),
            ("duplicate", duplicate),
            ("rejected", rejected),
            ("other", other),
            ("without_usage", without_usage),
        ] {
            if n > 0 {
                let count = state.otlp_spans.entry(outcome.to_owned()).or_insert(0);
                *count = count.saturating_add(n);
            }
        }
    }

    /// Counts stored OTLP calls that started before the detection job's
    /// watermark: their window was read before they arrived.
    pub fn otlp_late(&self, n: u64) {
        let mut state = self.lock();
        let count = state.otlp_spans.entry("late".to_owned()).or_insert(0);
        *count = count.saturating_add(n);
    }

    /// Adds `usd` spent on investigation model calls; negative or non-finite
    /// amounts are ignored because a counter never goes down.
    pub fn investigation_spend(&self, usd: f64) {
        if usd.is_finite() && usd > 0.0 {
            self.lock().investigation_spend_usd += usd;
        }
    }

    /// Records a scheduler tick at `at` and whether it succeeded.
    pub fn tick(&self, ok: bool, at: DateTime<Utc>) {
        self.lock().last_tick = Some((at, ok));
    }

    /// Records a load of the configuration at `at` (at start or on SIGHUP)
    /// and whether it was taken; a refused reload leaves the running one.
    pub fn config_load(&self, ok: bool, at: DateTime<Utc>) {
        let mut state = self.lock();
        state.config_ok = ok;
        if ok {
            state.config_loaded_at = Some(at);
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves only whole numbers behind, so
        // the values are still worth reporting.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Adds one to `key`'s count.
fn bump(map: &mut BTreeMap<String, u64>, key: &str) {
    match map.get_mut(key) {
        Some(count) => *count = count.saturating_add(1),
        None => {
            map.insert(key.to_owned(), 1);
        }
    }
}

//! The small chart an incident's alert carries: the flagged sessions
//! against their peer group, on the figure the detector judged.
//!
//! [`ChartSpec`] is plain data captured when the alert is built (from the
//! group's baseline ring and the findings' evidence) and stored with the
//! alert in the outbox, so drawing it at send time needs no state and
//! gives the same picture every time. [`draw::render_png`] draws it; the
//! email carries the PNG inline, the operations endpoint serves it at
//! `/incidents/{fingerprint}/chart.png` for Slack.
//!
//! | kind | metric | group values (baseline ring) | flagged value (evidence) | scale |
//! | --- | --- | --- | --- | --- |
//! | `no_cache` | cache-read share of the prompt per session | `cached_share` | `cached_share` | linear, 0–1 |
//! | `retry_loop` | calls per session | `log_requests` (as `exp`) | `requests` | log |
//! | `oversized_model` | tiny-call price level, US$ per million tokens (blended 3:1 input:output) | `tiny_call_price` | `tiny_call_price` | linear from 0 |
//!
//! The group's values are kept as a histogram of [`BINS`] bins over the
//! axis range (evenly spaced on the axis' scale), with their median and a
//! band of one robust standard deviation (1.4826 × MAD) either side of it,
//! computed as the detectors compute them (for calls per session, on
//! `ln(calls)`).

pub mod draw;
pub mod encode;
mod font;
#[cfg(test)]
mod tests;

pub use draw::{CHART_HEIGHT, CHART_WIDTH, ChartError, render_png};

use super::AlertSession;
use crate::detect::baseline::{GroupBaseline, Ring};
use crate::domain::Kind;
use serde::{Deserialize, Serialize};

/// Bins of the group's histogram.
pub const BINS: usize = 40;
/// Flagged sessions marked at most (the alert's top sessions by impact).
pub const MAX_FLAGGED: usize = 8;

/// The figure a chart shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChartMetric {
    /// no_cache: the share of the prompt read from the cache, per session.
    CachedShare,
    /// retry_loop: calls per session, on a log scale.
    CallsPerSession,
    /// oversized_model: the price level of a session's tiny calls, US$ per
    /// million tokens (0 when tiny calls are not most of its cost).
    TinyCallPrice,
}

impl ChartMetric {
    /// The metric the detector of `kind` judged.
    pub fn of(kind: Kind) -> ChartMetric {
        match kind {
            Kind::NoCache => ChartMetric::CachedShare,
            Kind::RetryLoop => ChartMetric::CallsPerSession,
            Kind::OversizedModel => ChartMetric::TinyCallPrice,
        }
    }

    /// Whether the axis is logarithmic.
    pub fn log_scale(self) -> bool {
        self == ChartMetric::CallsPerSession
    }

    /// What the axis shows, for titles and alt texts.
    pub fn describe(self) -> &'static str {
        match self {
            ChartMetric::CachedShare => "cache-read share per session",
            ChartMetric::CallsPerSession => "calls per session",
            ChartMetric::TinyCallPrice => "tiny-call price per session ($/Mtok)",
        }
    }

    /// The key of the flagged session's value in the finding's evidence.
    fn evidence_key(self) -> &'static str {
        match self {
            ChartMetric::CachedShare => "cached_share",
            ChartMetric::CallsPerSession => "requests",
            ChartMetric::TinyCallPrice => "tiny_call_price",
        }
    }

    /// The group's ring of this metric.
    fn ring(self, b: &GroupBaseline) -> &Ring {
        match self {
            ChartMetric::CachedShare => &b.cached_share,
            ChartMetric::CallsPerSession => &b.log_requests,
            ChartMetric::TinyCallPrice => &b.tiny_call_price,
        }
    }

    /// A value of the metric for people: a share as a percentage, calls as
    /// a whole number, prices with two decimals.
    pub fn format(self, v: f64) -> String {
        match self {
            ChartMetric::CachedShare => format!("{:.0}%", v * 100.0),
            ChartMetric::CallsPerSession => format!("{v:.0}"),
            ChartMetric::TinyCallPrice => format!("${v:.2}"),
        }
    }
}

/// One flagged session on the chart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChartPoint {
    /// The gateway's session id.
    pub session_id: String,
    /// Its value of the metric.
    pub value: f64,
}

/// Everything a chart shows; see the module documentation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChartSpec {
    /// The figure on the axis.
    pub metric: ChartMetric,
    /// The peer group, as in the alert.
    pub group: String,
    /// How many of the group's recent sessions the histogram counts.
    pub peers: u64,
    /// The axis' low end, in the metric's units.
    pub lo: f64,
    /// The axis' high end, in the metric's units.
    pub hi: f64,
    /// The group's sessions per bin, [`BINS`] bins from `lo` to `hi`,
    /// evenly spaced on the axis' scale.
    pub bins: Vec<u32>,
    /// The group's median.
    pub median: f64,
    /// The band around the median: one robust standard deviation (1.4826 ×
    /// MAD) either side, within the axis.
    pub band: [f64; 2],
    /// The flagged sessions, largest impact first.
    pub flagged: Vec<ChartPoint>,
}

impl ChartSpec {
    /// The chart of an alert of `kind` in `group`, whose baseline is
    /// `baseline`, marking `sessions` (their values read from their
    /// evidence). `None` when the group has no values yet or no session
    /// has a value to mark.
    pub fn capture(
        kind: Kind,
        group: &str,
        baseline: &GroupBaseline,
        sessions: &[AlertSession],
    ) -> Option<ChartSpec> {
        let metric = ChartMetric::of(kind);
        let ring = metric.ring(baseline);
        let (median, sigma) = ring.median_mad()?;
        let values: Vec<f64> = ring.values().map(|v| to_metric(metric, v)).collect();
        let flagged: Vec<ChartPoint> = sessions
            .iter()
            .filter_map(|s| {
                let value = s.evidence.get(metric.evidence_key())?.as_f64()?;
                (value.is_finite() && value >= 0.0).then(|| ChartPoint {
                    session_id: s.session_id.clone(),
                    value,
                })
            })
            .take(MAX_FLAGGED)
            .collect();
        if flagged.is_empty() {
            return None;
        }
        let top = values
            .iter()
            .chain(flagged.iter().map(|p| &p.value))
            .copied()
            .fold(0.0_f64, f64::max);
        let (lo, hi) = match metric {
            ChartMetric::CachedShare => (0.0, 1.0),
            ChartMetric::CallsPerSession => (1.0, nice_log_top(top)),
            ChartMetric::TinyCallPrice => (0.0, nice_top(top)),
        };
        let band = if metric.log_scale() {
            [(median - sigma).exp(), (median + sigma).exp()]
        } else {
            [median - sigma, median + sigma]
        };
        let clamp = |v: f64| round4(v.clamp(lo, hi));
        let mut bins = vec![0u32; BINS];
        for v in &values {
            let i = bin_of(metric, lo, hi, *v);
            bins[i] = bins[i].saturating_add(1);
        }
        Some(ChartSpec {
            metric,
            group: group.to_owned(),
            peers: values.len() as u64,
            lo,
            hi,
            bins,
            median: clamp(to_metric(metric, median)),
            band: [clamp(band[0]), clamp(band[1])],
            flagged: flagged
                .into_iter()
                .map(|p| ChartPoint {
                    value: round4(p.value),
                    ..p
                })
                .collect(),
        })
    }

    /// Where `v` falls on the axis, from 0 (`lo`) to 1 (`hi`), on its scale;
    /// values outside the axis are held at its ends.
    pub fn position(&self, v: f64) -> f64 {
        position(self.metric, self.lo, self.hi, v)
    }

    /// One line saying what the chart shows, for the email's text part and
    /// the image's alt text.
    pub fn describe(&self) -> String {
        let flagged = self
            .flagged
            .iter()
            .map(|p| self.metric.format(p.value))
            .collect::<Vec<_>>()
            .join(", ");
        format!(
            "Chart: {} in {}: {} peer sessions, median {} (band {} to {}); flagged: {}",
            self.metric.describe(),
            self.group,
            self.peers,
            self.metric.format(self.median),
            self.metric.format(self.band[0]),
            self.metric.format(self.band[1]),
            flagged
        )
    }
}

/// A ring's stored value in the metric's units (the request ring holds
/// `ln(calls)`).
fn to_metric(metric: ChartMetric, v: f64) -> f64 {
    if metric.log_scale() { v.exp() } else { v }
}

fn position(metric: ChartMetric, lo: f64, hi: f64, v: f64) -> f64 {
    let (lo, hi, v) = if metric.log_scale() {
        (lo.max(1e-9).ln(), hi.max(1e-9).ln(), v.max(1e-9).ln())
    } else {
        (lo, hi, v)
    };
    if hi <= lo {
        return 0.0;
    }
    ((v - lo) / (hi - lo)).clamp(0.0, 1.0)
}

fn bin_of(metric: ChartMetric, lo: f64, hi: f64, v: f64) -> usize {
    let p = position(metric, lo, hi, v);
    ((p * BINS as f64) as usize).min(BINS - 1)
}

/// A round top for a linear axis from 0: 1, 2 or 5 times a power of ten
/// at or above `top` plus a tenth.
fn nice_top(top: f64) -> f64 {
    let want = (top * 1.1).max(1e-6);
    let exp = want.log10().floor();
    let base = 10f64.powf(exp);
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if m * base >= want {
            return round4(m * base);
        }
    }
    round4(10.0 * base)
}

/// A power of ten at or above `top`, at least 10, for a log axis from 1.
fn nice_log_top(top: f64) -> f64 {
    let want = top.max(10.0) * 1.05;
    10f64.powf(want.log10().ceil())
}

/// Four significant digits: enough for a picture, short in JSON.
fn round4(v: f64) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return if v.is_finite() { v } else { 0.0 };
    }
    let scale = 10f64.powi(3 - v.abs().log10().floor() as i32);
    (v * scale).round() / scale
}

//! The checks: pure functions from session aggregates, a group's baseline and
//! the rules to findings. No I/O happens here and nothing here fails: odd data
//! becomes a diagnostic, never an error.

pub mod baseline;
pub mod caching;
pub mod catalogue;
pub mod drilldown;
pub mod held;
pub mod no_cache;
pub mod oversized_model;
pub mod remedy;
pub mod retry_loop;
pub mod rules;
pub mod settings;
mod suspects;
pub mod window;

pub use baseline::{GroupBaseline, GroupStats, Ring};
pub use caching::{CachingEvidence, FactFrom, ModelCaching};
pub use catalogue::Catalogue;
pub use drilldown::{Confirmed, Drilldown};
pub use held::{Held, HeldFindings, Settled};
pub use no_cache::PeerWait;
pub use settings::DetectionConfig;
pub use window::{Detector, Judgement, Rejudge, WindowAnalysis};

use crate::domain::Severity;
use crate::source::rows::PER_CALL_LABEL;
use crate::source::{Labels, SessionRecord, Window};
use serde::{Deserialize, Serialize};

pub use crate::domain::Kind;

/// A map on the per-session path, keyed by model names or peer groups:
/// foldhash instead of SipHash (several times cheaper for short keys;
/// still seeded per process, and no order is relied on).
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// One session found wasting money, with the evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// What kind of waste.
    pub kind: Kind,
    /// The session.
    pub session_id: String,
    /// The window in which it was found.
    pub window: Window,
    /// From the rule.
    pub severity: Severity,
    /// Name of the rule that matched.
    pub rule: String,
    /// Peer group, e.g. `feature=support-agent`.
    pub group: String,
    /// The session's labels.
    pub labels: Labels,
    /// What the session cost.
    pub cost_usd: f64,
    /// Estimated cost above what its peers would have spent.
    pub impact_usd: f64,
    /// The figures behind the finding.
    pub evidence: serde_json::Value,
    /// One sentence a person can check.
    pub explanation: String,
}

/// Something odd noticed while checking, reported rather than failed on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// The session concerned, if one.
    pub session_id: Option<String>,
    /// What was odd.
    pub message: String,
}

/// The peer group of a session: `key=value` for each `group_by` label,
/// joined by `,`; a missing label has an empty value. No `group_by` labels
/// put every session in one group, `all`.
pub fn group_key(labels: &Labels, group_by: &[String]) -> String {
    let mut key = String::new();
    write_group_key(labels, group_by, &mut key);
    key
}

/// Writes [`group_key`] into `key` (cleared first), so one buffer can serve
/// every session of a window.
///
/// Sessions a row source built from single calls without a session id
/// carry [`PER_CALL_LABEL`] and get it appended, so they form groups of
/// their own (`feature=batch,costwatch.session=per-call`).
pub fn write_group_key(labels: &Labels, group_by: &[String], key: &mut String) {
    key.clear();
    if group_by.is_empty() {
        key.push_str("all");
    }
    for (i, k) in group_by.iter().enumerate() {
        if i > 0 {
            key.push(',');
        }
        key.push_str(k);
        key.push('=');
        key.push_str(labels.get(k).map(String::as_str).unwrap_or(""));
    }
    if let Some(v) = labels.get(PER_CALL_LABEL)
        && !group_by.iter().any(|k| k == PER_CALL_LABEL)
    {
        key.push(',');
        key.push_str(PER_CALL_LABEL);
        key.push('=');
        key.push_str(v);
    }
}

/// Notes on `f` that costwatch priced some of `s`'s calls itself, from its
/// price table, because the gateway reported no cost for them.
pub(crate) fn note_computed_cost(s: &SessionRecord, f: &mut Finding) {
    if !s.cost_computed {
        return;
    }
    if let Some(map) = f.evidence.as_object_mut() {
        map.insert("cost_computed".to_owned(), serde_json::Value::Bool(true));
    }
    f.explanation
        .push_str(" (Cost computed by costwatch from its price table: the gateway reported none.)");
}

/// Share of the prompt read from cache, in `[0, 1]`.
pub fn cached_share(s: &SessionRecord) -> f64 {
    if s.input_tokens == 0 {
        0.0
    } else {
        s.cached_tokens.min(s.input_tokens) as f64 / s.input_tokens as f64
    }
}

/// Average prompt size per call.
pub fn avg_input(s: &SessionRecord) -> f64 {
    if s.requests == 0 {
        0.0
    } else {
        s.input_tokens as f64 / s.requests as f64
    }
}

/// Rounds money for evidence (to a hundred-millionth of a dollar).
pub(crate) fn usd(v: f64) -> f64 {
    (v * 1e8).round() / 1e8
}

/// Rounds a share for evidence.
pub(crate) fn ratio(v: f64) -> f64 {
    (v * 1e4).round() / 1e4
}

#[cfg(test)]
mod tests;

//! A session calling far more often than its peers, confirmed at request level
//! by a run of near-identical calls or an unbroken burst of failures.
//!
//! Session aggregates only nominate candidates (many calls for the group, or
//! many errors); the request drill-down decides. A long, healthy conversation
//! also makes many calls, but its prompt grows every turn, so it never forms a
//! run of near-identical calls.

use super::{Finding, GroupStats, Kind, ratio, usd};
use crate::config::RetryLoopRule;
use crate::source::{RequestRecord, RequestStatus, SessionRecord, Window};
use serde::Serialize;
use serde_json::json;
use std::collections::BTreeMap;

/// Why a session is worth a drill-down.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "trigger")]
pub enum Trigger {
    /// Far more calls than the group's robust baseline.
    Outlier {
        /// Robust z-score of `ln(requests)`.
        z: f64,
        /// Calls over the group's median calls.
        ratio_to_median: f64,
    },
    /// Too little history: the rule's absolute threshold was met.
    ColdStart,
    /// Many failed calls.
    Errors,
}

/// The smallest robust spread assumed for `ln(requests)`, so a group whose
/// sessions all make the same number of calls does not turn one extra call
/// into an outlier.
const MIN_LOG_SIGMA: f64 = 0.25;

/// Whether the session's aggregate makes it a candidate, and why.
pub fn trigger(s: &SessionRecord, stats: &GroupStats, rule: &RetryLoopRule) -> Option<Trigger> {
    if s.requests < rule.min_requests {
        return None;
    }
    if stats.peers < rule.min_peers {
        if s.requests >= rule.cold_start_min_requests {
            return Some(Trigger::ColdStart);
        }
    } else {
        let sigma = stats.log_req_sigma.max(MIN_LOG_SIGMA);
        let z = ((s.requests as f64).ln() - stats.log_req_median) / sigma;
        let r = s.requests as f64 / stats.median_requests();
        if z >= rule.min_robust_z && r >= rule.min_ratio_to_median {
            return Some(Trigger::Outlier {
                z: ratio(z),
                ratio_to_median: ratio(r),
            });
        }
    }
    (s.errors >= rule.min_error_burst).then_some(Trigger::Errors)
}

/// What the request log shows.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RunEvidence {
    /// Longest run of consecutive near-identical calls.
    pub longest_run: u64,
    /// Model of that run.
    pub run_model: Option<String>,
    /// Prompt size at the start of the run.
    pub run_input_tokens: u64,
    /// Failed calls in the run.
    pub run_errors: u64,
    /// What the run cost.
    pub run_cost_usd: f64,
    /// When the run started and ended.
    pub run_span: Option<(String, String)>,
    /// Longest streak of consecutive failed calls.
    pub error_streak: u64,
    /// Failed calls by error type.
    pub error_types: BTreeMap<String, u64>,
    /// First request ids of the run, to look up in the gateway.
    pub request_ids: Vec<String>,
}

fn near_identical(prev: &RequestRecord, next: &RequestRecord, rule: &RetryLoopRule) -> bool {
    let delta = prev.input_tokens.abs_diff(next.input_tokens);
    prev.model == next.model
        && (delta <= rule.input_tolerance_tokens
            || delta as f64 <= rule.input_tolerance_ratio * prev.input_tokens as f64)
}

/// Reads the session's calls (in time order) for runs and error streaks.
pub fn analyse(requests: &[RequestRecord], rule: &RetryLoopRule) -> RunEvidence {
    let mut ev = RunEvidence::default();
    let (mut run_start, mut streak) = (0usize, 0u64);
    for (i, r) in requests.iter().enumerate() {
        if i > 0 && !near_identical(&requests[i - 1], r, rule) {
            run_start = i;
        }
        let run_len = (i - run_start + 1) as u64;
        if run_len > ev.longest_run {
            ev.longest_run = run_len;
            let run = &requests[run_start..=i];
            ev.run_model = Some(r.model.clone());
            ev.run_input_tokens = run[0].input_tokens;
            ev.run_errors = run
                .iter()
                .filter(|q| q.status == RequestStatus::Error)
                .count() as u64;
            ev.run_cost_usd = run.iter().map(|q| q.cost_usd).sum();
            ev.run_span = Some((run[0].created_at.to_rfc3339(), r.created_at.to_rfc3339()));
            ev.request_ids = run.iter().take(5).map(|q| q.request_id.clone()).collect();
        }
        if r.status == RequestStatus::Error {
            streak += 1;
            ev.error_streak = ev.error_streak.max(streak);
            let t = r.error_type.clone().unwrap_or_else(|| "unknown".to_owned());
            *ev.error_types.entry(t).or_default() += 1;
        } else {
            streak = 0;
        }
    }
    ev
}

/// Confirms a candidate from its requests.
pub fn confirm(
    s: &SessionRecord,
    requests: &[RequestRecord],
    trigger: Trigger,
    group: &str,
    stats: &GroupStats,
    rule: &RetryLoopRule,
    window: Window,
) -> Option<Finding> {
    let ev = analyse(requests, rule);
    let looped = ev.longest_run >= rule.min_identical_run;
    let burst = ev.error_streak >= rule.min_error_burst;
    if !looped && !burst {
        return None;
    }
    // Cost above the peers: the calls beyond the group's usual count, at this
    // session's own cost per call (with no peers, beyond one call).
    let expected = if stats.peers == 0 {
        1.0
    } else {
        stats.median_requests().max(1.0)
    };
    let calls = s.requests.max(requests.len() as u64) as f64;
    let per_call = s.cost_usd / calls.max(1.0);
    let excess_calls = (calls - expected).max(0.0);
    let impact = excess_calls * per_call;
    let errors: u64 = ev.error_types.values().sum();
    let what = if looped {
        format!(
            "{} consecutive near-identical calls to {} ({} tokens each, {} failed)",
            ev.longest_run,
            ev.run_model.as_deref().unwrap_or("?"),
            ev.run_input_tokens,
            ev.run_errors
        )
    } else {
        format!("{} failed calls in a row", ev.error_streak)
    };
    let mut f = Finding {
        kind: Kind::RetryLoop,
        session_id: s.session_id.clone(),
        window,
        severity: rule.meta.severity,
        rule: rule.meta.name.clone(),
        group: group.to_owned(),
        labels: s.labels.clone(),
        cost_usd: s.cost_usd,
        impact_usd: usd(impact),
        evidence: json!({
            "requests": calls as u64,
            "errors": errors,
            "peer_median_requests": ratio(expected),
            "peers": stats.peers,
            "trigger": trigger,
            "longest_identical_run": ev.longest_run,
            "run_model": ev.run_model,
            "run_input_tokens": ev.run_input_tokens,
            "run_errors": ev.run_errors,
            "run_cost_usd": usd(ev.run_cost_usd),
            "run_span": ev.run_span,
            "error_streak": ev.error_streak,
            "error_types": ev.error_types,
            "request_ids": ev.request_ids,
        }),
        explanation: format!(
            "{} calls where peers in {group} make a median {:.0}: {what}; the extra calls cost about ${:.5}",
            calls as u64, expected, impact
        ),
    };
    super::note_computed_cost(s, &mut f);
    Some(f)
}

//! A session resending the same calls, confirmed at request level by a run
//! of near-identical calls (or a two-call cycle) close together, a run of
//! calls whose prompts grow by the same amount with answers of one size (a
//! refused tool call asked for again, each resend carrying the last answer
//! and the error), or an unbroken burst of failures.
//!
//! Session aggregates only nominate candidates; the request drill-down
//! decides. Three tests nominate outright: far more calls than the group's
//! robust baseline, many failed calls, or (with too little history) the
//! rule's absolute count. Every other session with enough calls is a
//! suspect if its calls average at most `suspect_max_mean_gap_seconds`
//! apart (a loop resends within seconds; a conversation waits for its
//! user), ranked by what its aggregates reveal cheaply (calls above the
//! group's median in robust units, a loop's pace, the share of failed
//! calls); those at least `suspect_min_suspicion` are read, the most
//! suspicious first, within the rule's per-window `drilldown_budget`, so a
//! loop in a group whose call counts spread widely is still found. A long,
//! healthy conversation also makes many calls, but its prompt grows every
//! turn, so it never forms a run of near-identical calls; an agent that
//! holds its context at a fixed budget makes prompts of one size, which
//! its cache reads tell apart from resends (see [`analyse`]).

use super::rules::RetryLoopRule;
use super::{Finding, GroupStats, Kind, ratio, usd};
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
    /// None of the above, but enough calls to hide a loop and a suspicion
    /// of at least the rule's `suspect_min_suspicion`: read within its
    /// `drilldown_budget`, the most suspicious first.
    Suspect {
        /// The rank: `z + pace + error_share`.
        suspicion: f64,
        /// Robust z-score of `ln(requests)` (0 without peers).
        z: f64,
        /// Calls per minute over the session's span.
        calls_per_minute: f64,
        /// Share of the calls that failed.
        error_share: f64,
    },
}

impl Trigger {
    /// The suspicion of a suspect; `None` for the triggers that are always
    /// read.
    pub fn suspicion(&self) -> Option<f64> {
        match self {
            Trigger::Suspect { suspicion, .. } => Some(*suspicion),
            _ => None,
        }
    }
}

/// The smallest robust spread assumed for `ln(requests)`, so a group whose
/// sessions all make the same number of calls does not turn one extra call
/// into an outlier.
const MIN_LOG_SIGMA: f64 = 0.25;

/// Robust z-score of the session's `ln(requests)` in its group.
fn robust_z(s: &SessionRecord, stats: &GroupStats) -> f64 {
    if stats.peers == 0 || s.requests == 0 {
        return 0.0;
    }
    let sigma = stats.log_req_sigma.max(MIN_LOG_SIGMA);
    ((s.requests as f64).ln() - stats.log_req_median) / sigma
}

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
        let z = robust_z(s, stats);
        let r = s.requests as f64 / stats.median_requests();
        if z >= rule.min_robust_z && r >= rule.min_ratio_to_median {
            return Some(Trigger::Outlier {
                z: ratio(z),
                ratio_to_median: ratio(r),
            });
        }
    }
    if s.errors >= rule.min_error_burst {
        return Some(Trigger::Errors);
    }
    // Too few calls for the run a suspect needs (and too few failures for
    // a burst, or the test above would have nominated it): its rows could
    // not confirm anything.
    if s.requests < rule.suspect_min_identical_run {
        return None;
    }
    // Calls that average more than the rule's pause apart: a conversation
    // paced by its user or its tools. A loop inside it would have to be a
    // small part of a long, slow session; the outlier and error tests
    // above still see it when it adds enough calls or failures.
    let max_gap = rule.suspect_max_mean_gap.as_secs_f64();
    if max_gap > 0.0 && mean_gap_secs(s) > max_gap {
        return None;
    }
    // Nothing in its aggregates stands out (a typical call count, calls
    // spread out, no failures): an ordinary long session, not worth a read.
    let t = suspect(s, stats, rule);
    (t.suspicion()? >= rule.suspect_min_suspicion).then_some(t)
}

/// Seconds between the starts of the session's calls, on average
/// (infinite for a single call).
fn mean_gap_secs(s: &SessionRecord) -> f64 {
    if s.requests < 2 {
        return f64::INFINITY;
    }
    let span = (s.last_request_at - s.first_request_at).num_milliseconds() as f64 / 1000.0;
    span.max(0.0) / (s.requests as f64 - 1.0)
}

/// Ranks a session that no test nominated by what its aggregates reveal:
/// its call count above the group's median in robust units, plus up to 1
/// for a loop's pace (1 when its calls average a tenth of
/// `max_run_gap_seconds` apart or less, 0 at that gap or more), plus the
/// share of its calls that failed.
pub fn suspect(s: &SessionRecord, stats: &GroupStats, rule: &RetryLoopRule) -> Trigger {
    let z = robust_z(s, stats);
    let calls = s.requests.max(1) as f64;
    let span = (s.last_request_at - s.first_request_at).num_milliseconds() as f64 / 1000.0;
    let gap = mean_gap_secs(s);
    let max_gap = rule.max_run_gap.as_secs_f64().max(1.0);
    let pace = ((max_gap / gap.max(0.01)).ln() / 10f64.ln()).clamp(0.0, 1.0);
    let error_share = (s.errors as f64 / calls).min(1.0);
    let calls_per_minute = if span > 0.0 { calls * 60.0 / span } else { 0.0 };
    Trigger::Suspect {
        suspicion: ratio(z + pace + error_share),
        z: ratio(z),
        calls_per_minute: ratio(calls_per_minute),
        error_share: ratio(error_share),
    }
}

/// What the request log shows.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RunEvidence {
    /// Longest run of resends in a row, counting the call first sent: `n`
    /// for `n` consecutive near-identical calls, or for a cycle of two calls
    /// with `n - 1` repeats.
    pub longest_run: u64,
    /// 1 when that run repeats the same call, 2 when it cycles between two.
    pub run_cycle: u64,
    /// For a run whose prompts grow by the same amount on every call (each
    /// resend carrying the last answer and the error it got), that amount
    /// in tokens; 0 for a run of repeated prompts.
    pub run_growth_tokens: u64,
    /// Calls in that run.
    pub run_calls: u64,
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
    /// What each resend of the run cost, oldest first: its calls after the
    /// ones first sent (one, or two for a cycle). Not part of the evidence:
    /// the impact counts them.
    #[serde(skip)]
    pub resend_costs: Vec<f64>,
    /// Likewise for the longest error streak: its calls after the first.
    #[serde(skip)]
    pub streak_resend_costs: Vec<f64>,
}

/// Whether `next` resends `prev`: the same model and a prompt of the same
/// size; or, unless `exact`, a longer prompt within the rule's tolerances.
/// A resend repeats a request or extends it (an error appended). But when
/// `prev` was answered and itself repeated `before` (the call it would
/// resend) unchanged, a longer prompt is the next request: a loop that
/// appends grows on every resend, one that repeats stays flat, and flat
/// then longer is two requests, each retried (two bounded retries back to
/// back, of requests a few tokens apart, are not one loop). A prompt that
/// shrinks is a new request, as in a context held at a fixed budget,
/// whose sizes go up and down by a few tokens.
fn near_identical(
    before: Option<&RequestRecord>,
    prev: &RequestRecord,
    next: &RequestRecord,
    rule: &RetryLoopRule,
    exact: bool,
) -> bool {
    let Some(delta) = next.input_tokens.checked_sub(prev.input_tokens) else {
        return false;
    };
    let next_request = prev.status == RequestStatus::Success
        && before.is_some_and(|b| b.model == prev.model && b.input_tokens == prev.input_tokens);
    prev.model == next.model
        && (delta == 0
            || !exact
                && !next_request
                && (delta <= rule.input_tolerance_tokens
                    || delta as f64 <= rule.input_tolerance_ratio * prev.input_tokens as f64))
}

/// Whether the session's calls read whole earlier prompts from the cache:
/// some call read at least `WHOLE_PROMPT_SHARE` of the prompt of the call
/// just before it on the same model. Such a session caches its
/// conversation, not only a fixed prefix (a system prompt marked alone).
fn caches_whole_prompts(requests: &[RequestRecord]) -> bool {
    requests.windows(2).any(|w| {
        w[0].model == w[1].model
            && w[0].input_tokens > 0
            && w[1].cached_tokens as f64 >= WHOLE_PROMPT_SHARE * w[0].input_tokens as f64
    })
}

/// Share of the previous prompt a call must read from the cache to show
/// the session caches whole prompts (prompt caches work in blocks, 128
/// tokens at OpenAI, so a read falls a little short of the prompt).
const WHOLE_PROMPT_SHARE: f64 = 0.8;

/// Whether the cache shows that `next` did not resend `prev`, in a session
/// that caches whole prompts: a resent prompt is read back from the cache
/// almost whole, so a call that read some of its prompt, but under half of
/// the one it would repeat, shares only an early prefix with it (a context
/// cut to a fixed budget keeps its system prompt and drops the oldest
/// turns). A call that read nothing says nothing: a cache can miss.
fn cache_denies(prev: &RequestRecord, next: &RequestRecord) -> bool {
    next.cached_tokens > 0 && next.cached_tokens.saturating_mul(2) < prev.input_tokens
}

/// Whether `next` came soon enough after `prev` to continue a run.
fn close(prev: &RequestRecord, next: &RequestRecord, rule: &RetryLoopRule) -> bool {
    let gap = (next.created_at - prev.created_at).num_milliseconds();
    gap >= 0 && gap as u128 <= rule.max_run_gap.as_millis()
}

/// The longest streak of consecutive calls `i` (from `reach` on) for which
/// `links(i)` holds, each tying call `i` to the `reach` calls before it.
/// Returns `(links in the streak, index of its first call)`: the streak
/// holds `links + reach` calls; `(0, 0)` when no call links.
fn longest_streak(
    len: usize,
    reach: usize,
    mut links: impl FnMut(usize) -> bool,
) -> (usize, usize) {
    let (mut best, mut best_first) = (0usize, 0usize);
    let mut streak = 0usize;
    for i in reach..len {
        streak = if links(i) { streak + 1 } else { 0 };
        if streak > best {
            best = streak;
            best_first = i + 1 - streak - reach;
        }
    }
    (best, best_first)
}

/// The longest stretch of calls that each resend the call `period` before
/// them (1: the same call again; 2: a cycle between two calls), each close
/// to the previous one. Returns `(repeats, index of the run's first call)`:
/// the run holds `repeats + period` calls. With `whole_prompts` (see
/// [`caches_whole_prompts`]), a call the cache shows to be new breaks the
/// run.
fn longest_run(
    requests: &[RequestRecord],
    period: usize,
    rule: &RetryLoopRule,
    exact: bool,
    whole_prompts: bool,
) -> (usize, usize) {
    longest_streak(requests.len(), period, |i| {
        let (prev, next) = (&requests[i - period], &requests[i]);
        let before = i.checked_sub(2 * period).and_then(|b| requests.get(b));
        near_identical(before, prev, next, rule, exact)
            && close(&requests[i - 1], next, rule)
            && !(whole_prompts && cache_denies(prev, next))
    })
}

/// Whether `next` grows `prev`'s prompt as `prev` grew `before`'s: the
/// same model, prompts that grew by the same number of tokens and answers
/// of the same size (within `growth_tolerance_tokens`; exactly when
/// `exact`). A resend that carries the last answer and the error it got
/// grows its prompt by the same amount every time; a healthy agent's step
/// appends a tool result and an answer of their own sizes.
fn steady_step(
    before: &RequestRecord,
    prev: &RequestRecord,
    next: &RequestRecord,
    rule: &RetryLoopRule,
    exact: bool,
) -> bool {
    let tolerance = if exact {
        0
    } else {
        rule.growth_tolerance_tokens
    };
    let grew = |a: &RequestRecord, b: &RequestRecord| {
        b.input_tokens
            .checked_sub(a.input_tokens)
            .filter(|d| *d > 0)
    };
    let (Some(first), Some(second)) = (grew(before, prev), grew(prev, next)) else {
        return false;
    };
    before.model == prev.model
        && prev.model == next.model
        && first.abs_diff(second) <= tolerance
        && before.output_tokens.abs_diff(prev.output_tokens) <= tolerance
        && prev.output_tokens.abs_diff(next.output_tokens) <= tolerance
}

/// The longest stretch of calls whose prompts grow steadily (see
/// [`steady_step`]), each close to the previous one. Returns `(calls,
/// index of the run's first call)`; a run holds at least three calls, or
/// none.
fn longest_steady_run(
    requests: &[RequestRecord],
    rule: &RetryLoopRule,
    exact: bool,
    whole_prompts: bool,
) -> (usize, usize) {
    let (steps, first) = longest_streak(requests.len(), 2, |i| {
        let (before, prev, next) = (&requests[i - 2], &requests[i - 1], &requests[i]);
        steady_step(before, prev, next, rule, exact)
            && close(before, prev, rule)
            && close(prev, next, rule)
            && !(whole_prompts && (cache_denies(before, prev) || cache_denies(prev, next)))
    });
    if steps == 0 {
        (0, 0)
    } else {
        (steps + 2, first)
    }
}

/// Reads the session's calls (in time order) for runs and error streaks.
/// With `exact`, runs count only prompts of exactly the same size, or
/// growing by exactly the same amount with answers of exactly one size. In a
/// session that caches whole prompts, a call whose cache read shows a new
/// prompt breaks a run.
pub fn analyse(requests: &[RequestRecord], rule: &RetryLoopRule, exact: bool) -> RunEvidence {
    let mut ev = RunEvidence::default();
    let whole_prompts = caches_whole_prompts(requests);
    let same = longest_run(requests, 1, rule, exact, whole_prompts);
    let cycle = longest_run(requests, 2, rule, exact, whole_prompts);
    // Calls that repeat the one before also repeat the one two before: a
    // cycle counts only when it holds more repeats than any plain run.
    let ((repeats, first), period) = if cycle.0 > same.0 {
        (cycle, 2)
    } else {
        (same, 1)
    };
    // A run of steadily growing prompts counts its calls as a run of
    // repeated ones does (the call first sent and each resend), and counts
    // only when longer.
    let steady = if rule.steady_growth {
        longest_steady_run(requests, rule, exact, whole_prompts)
    } else {
        (0, 0)
    };
    let grows = steady.0 > repeats + 1;
    let (longest, first, calls, period) = if grows {
        (steady.0, steady.1, steady.0, 1)
    } else {
        (repeats + 1, first, repeats + period, period)
    };
    if !requests.is_empty() {
        let run = &requests[first..(first + calls).min(requests.len())];
        ev.longest_run = longest as u64;
        ev.run_cycle = period as u64;
        if grows {
            ev.run_growth_tokens = run
                .get(1)
                .zip(run.first())
                .map_or(0, |(b, a)| b.input_tokens.saturating_sub(a.input_tokens));
        }
        ev.run_calls = run.len() as u64;
        ev.run_model = run.first().map(|q| q.model.clone());
        ev.run_input_tokens = run.first().map_or(0, |q| q.input_tokens);
        ev.run_errors = run
            .iter()
            .filter(|q| q.status == RequestStatus::Error)
            .count() as u64;
        ev.run_cost_usd = run.iter().map(|q| q.cost_usd).sum();
        if let (Some(a), Some(b)) = (run.first(), run.last()) {
            ev.run_span = Some((a.created_at.to_rfc3339(), b.created_at.to_rfc3339()));
        }
        ev.request_ids = run.iter().take(5).map(|q| q.request_id.clone()).collect();
        ev.resend_costs = run.iter().skip(period).map(|q| q.cost_usd).collect();
    }
    let mut streak = 0u64;
    let mut streak_end = 0;
    for (i, r) in requests.iter().enumerate() {
        if r.status == RequestStatus::Error {
            streak += 1;
            if streak > ev.error_streak {
                ev.error_streak = streak;
                streak_end = i + 1;
            }
            let t = r.error_type.clone().unwrap_or_else(|| "unknown".to_owned());
            *ev.error_types.entry(t).or_default() += 1;
        } else {
            streak = 0;
        }
    }
    if ev.error_streak > 1 {
        let start = streak_end - ev.error_streak as usize;
        ev.streak_resend_costs = requests[start + 1..streak_end]
            .iter()
            .map(|q| q.cost_usd)
            .collect();
    }
    ev
}

/// What the calls beyond the peers' count cost: first the loop's last
/// resends, each at its own price (the calls a loop should not have made;
/// in a growing loop the last are the dearest, and a failed call costs what
/// the gateway charged for it), then, past the resends, other calls at
/// their average price. At most what the session cost.
fn excess_cost(resends: &[f64], excess_calls: f64, session_cost: f64, calls: f64) -> f64 {
    let excess_calls = excess_calls.max(0.0);
    let k = (excess_calls.floor() as usize).min(resends.len());
    let own: f64 = resends[resends.len() - k..].iter().sum();
    let others = (calls - resends.len() as f64).max(1.0);
    let other_price = (session_cost - resends.iter().sum::<f64>()).max(0.0) / others;
    (own + (excess_calls - k as f64) * other_price).clamp(0.0, session_cost.max(0.0))
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
    // A suspect's aggregates gave little evidence, so its rows must show
    // more: a longer run of resends of exactly the same prompt. A resent
    // request is the same text, so its prompt has the same size to the
    // token; prompts a few tokens apart are new requests that happen to be
    // of one size (a context cut to a fixed budget, short unrelated calls).
    let suspect = trigger.suspicion().is_some();
    let min_run = if suspect {
        rule.suspect_min_identical_run
    } else {
        rule.min_identical_run
    };
    let ev = analyse(requests, rule, suspect);
    let looped = ev.longest_run >= min_run;
    let burst = ev.error_streak >= rule.min_error_burst;
    if !looped && !burst {
        return None;
    }
    // Cost above the peers: the calls beyond the group's usual count (with
    // no peers, beyond one call), taken from the loop's last resends.
    let expected = if stats.peers == 0 {
        1.0
    } else {
        stats.median_requests().max(1.0)
    };
    let calls = s.requests.max(requests.len() as u64) as f64;
    let excess_calls = (calls - expected).max(0.0);
    let resends = if looped {
        &ev.resend_costs
    } else {
        &ev.streak_resend_costs
    };
    let impact = excess_cost(resends, excess_calls, s.cost_usd, calls);
    let errors: u64 = ev.error_types.values().sum();
    let what = if looped && ev.run_cycle == 2 {
        format!(
            "{} calls to {} cycling between two requests (from {} tokens, {} failed)",
            ev.run_calls,
            ev.run_model.as_deref().unwrap_or("?"),
            ev.run_input_tokens,
            ev.run_errors
        )
    } else if looped && ev.run_growth_tokens > 0 {
        format!(
            "{} consecutive calls to {} each resending the last with {} more tokens (from {} tokens, {} failed)",
            ev.longest_run,
            ev.run_model.as_deref().unwrap_or("?"),
            ev.run_growth_tokens,
            ev.run_input_tokens,
            ev.run_errors
        )
    } else if looped {
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
            "cold_start": trigger == Trigger::ColdStart,
            "longest_identical_run": ev.longest_run,
            "run_cycle": ev.run_cycle,
            "run_growth_tokens": ev.run_growth_tokens,
            "run_calls": ev.run_calls,
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
    note_missing_facts(s, requests, &mut f);
    super::note_computed_cost(s, &mut f);
    Some(f)
}

/// Failed calls the source logged without their usage (no tokens) and at
/// no cost: an OpenTelemetry span of a failed call carries no usage
/// attributes, where a gateway's row keeps the prompt it was sent and
/// what it charged.
fn calls_without_usage(requests: &[RequestRecord]) -> u64 {
    requests
        .iter()
        .filter(|r| {
            r.status == RequestStatus::Error
                && r.input_tokens == 0
                && r.output_tokens == 0
                && r.cost_usd == 0.0
        })
        .count() as u64
}

/// Says in the evidence's `missing_facts` what the source did not report
/// of the figures: `priced_from_table`, the figures costwatch priced from
/// its price table because the source reported no cost for some calls;
/// `failed_calls_without_usage`, failed calls logged without tokens or
/// cost, counted at $0 in every figure. Absent when the source reported
/// everything.
fn note_missing_facts(s: &SessionRecord, requests: &[RequestRecord], f: &mut Finding) {
    let without_usage = calls_without_usage(requests);
    let mut missing = serde_json::Map::new();
    if s.cost_computed {
        missing.insert(
            "priced_from_table".to_owned(),
            json!(["cost_usd", "run_cost_usd", "impact_usd"]),
        );
    }
    if without_usage > 0 {
        missing.insert(
            "failed_calls_without_usage".to_owned(),
            json!(without_usage),
        );
        f.explanation.push_str(&format!(
            " ({without_usage} failed {} logged without usage, counted at $0)",
            if without_usage == 1 { "call" } else { "calls" }
        ));
    }
    if let (false, Some(e)) = (missing.is_empty(), f.evidence.as_object_mut()) {
        e.insert(
            "missing_facts".to_owned(),
            serde_json::Value::Object(missing),
        );
    }
}

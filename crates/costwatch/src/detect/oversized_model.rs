//! A premium model used for tiny calls, in a group where that is not the
//! normal pattern; the finding estimates what the group's usual model would
//! have cost for the same calls.
//!
//! What the group's baseline knows decides what is normal: a group whose
//! most-called model is premium, or most of whose sessions make tiny premium
//! calls (over its whole baseline, or among its newest sessions, after it
//! moved to a premium model), is following its design. While the baseline is
//! thin (fewer than `cold_start_peers` sessions) the share tolerated is
//! halved and counted among the other sessions, and findings are marked
//! `cold_start`. A session with failed calls that also called the usual
//! model is failing over, not choosing the dearer model: left alone.

use super::{Catalogue, Finding, GroupStats, Kind, ratio, usd};
use crate::config::OversizedModelRule;
use crate::source::{SessionRecord, Window};
use serde_json::json;

/// The tiny premium calls of one session.
#[derive(Debug, Clone, PartialEq)]
pub struct TinyPremium {
    /// Premium models called with tiny prompts, with their figures.
    pub calls: Vec<PremiumCalls>,
    /// What those calls cost.
    pub cost_usd: f64,
    /// Their share of the session's cost.
    pub cost_share: f64,
}

/// One premium model's tiny calls in a session.
#[derive(Debug, Clone, PartialEq)]
pub struct PremiumCalls {
    /// The premium model.
    pub model: String,
    /// Calls to it.
    pub requests: u64,
    /// Their prompt tokens.
    pub input_tokens: u64,
    /// Their cached prompt tokens.
    pub cached_tokens: u64,
    /// Their completion tokens.
    pub output_tokens: u64,
    /// What they cost.
    pub cost_usd: f64,
    /// Price relative to the cheapest model in use.
    pub price_ratio: f64,
}

/// The price level of a session's tiny calls: the blended price of the
/// cheapest model among the dearest models whose tiny calls together make
/// `min_premium_cost_share` of its cost; 0 when tiny calls never add up to
/// that share. The session made mostly tiny premium calls exactly when this
/// is at or above the premium floor, whatever the floor turns out to be.
pub fn tiny_call_price(s: &SessionRecord, cat: &Catalogue, rule: &OversizedModelRule) -> f64 {
    if s.cost_usd <= 0.0 {
        return 0.0;
    }
    let mut tiny: Vec<(f64, f64)> = s
        .by_model
        .iter()
        .filter(|m| m.requests > 0 && is_tiny(m.input_tokens, m.output_tokens, m.requests, rule))
        .filter_map(|m| Some((cat.blended(&m.model)?, m.cost_usd)))
        .collect();
    tiny.sort_by(|a, b| b.0.total_cmp(&a.0));
    let mut cost = 0.0;
    for (price, c) in tiny {
        cost += c;
        if cost >= rule.min_premium_cost_share * s.cost_usd {
            return price;
        }
    }
    0.0
}

fn is_tiny(input: u64, output: u64, requests: u64, rule: &OversizedModelRule) -> bool {
    let n = requests.max(1) as f64;
    input as f64 / n <= rule.max_avg_input_tokens as f64
        && output as f64 / n <= rule.max_avg_output_tokens as f64
}

/// The session's tiny calls to premium models, when they are most of its
/// cost (by `min_premium_cost_share`).
pub fn tiny_premium(
    s: &SessionRecord,
    cat: &Catalogue,
    rule: &OversizedModelRule,
) -> Option<TinyPremium> {
    let calls: Vec<PremiumCalls> = s
        .by_model
        .iter()
        .filter(|m| m.requests > 0)
        .filter_map(|m| {
            let price_ratio = cat.price_ratio(&m.model)?;
            let tiny = is_tiny(m.input_tokens, m.output_tokens, m.requests, rule);
            (price_ratio >= rule.premium_price_ratio && tiny).then(|| PremiumCalls {
                model: m.model.clone(),
                requests: m.requests,
                input_tokens: m.input_tokens,
                cached_tokens: m.cached_tokens,
                output_tokens: m.output_tokens,
                cost_usd: m.cost_usd,
                price_ratio,
            })
        })
        .collect();
    if calls.is_empty() || s.cost_usd <= 0.0 {
        return None;
    }
    let cost: f64 = calls.iter().map(|c| c.cost_usd).sum();
    let share = (cost / s.cost_usd).min(1.0);
    (share >= rule.min_premium_cost_share).then_some(TinyPremium {
        calls,
        cost_usd: cost,
        cost_share: share,
    })
}

/// The model the group would normally use instead: its most called model,
/// else (no history of models) the cheapest model in use. `None` when the
/// group's most called model is itself premium: premium is its design.
fn usual_model<'a>(
    stats: &'a GroupStats,
    cat: &'a Catalogue,
    rule: &OversizedModelRule,
) -> Option<&'a str> {
    match stats.usual_model.as_deref() {
        Some(m)
            if cat
                .price_ratio(m)
                .is_some_and(|r| r >= rule.premium_price_ratio) =>
        {
            None
        }
        Some(m) if cat.get(m).is_some() => Some(m),
        _ => cat.cheapest_in_use(),
    }
}

/// The share of the group's baseline sessions making mostly tiny premium
/// calls, leaving out the one judged (observed into the baseline before it
/// is judged, and itself such a session).
fn others_share(stats: &GroupStats) -> f64 {
    let n = stats.premium_peers as f64;
    if n <= 1.0 {
        return 0.0;
    }
    ((stats.premium_tiny_share * n - 1.0) / (n - 1.0)).max(0.0)
}

/// Judges a candidate against its group's habits.
pub fn judge(
    s: &SessionRecord,
    tiny: &TinyPremium,
    group: &str,
    stats: &GroupStats,
    cat: &Catalogue,
    rule: &OversizedModelRule,
    window: Window,
) -> Option<Finding> {
    if stats.premium_peers < rule.min_peers
        || stats.premium_tiny_share > rule.max_group_share
        || stats.recent_premium_tiny_share > rule.max_group_share
    {
        // Too few peers to know the group's habits, or tiny premium calls are
        // what this group normally does, or has done since it moved.
        return None;
    }
    // A thin baseline judges conservatively: at most half the share of
    // sessions making tiny premium calls that a full one tolerates. The
    // share is the other sessions': in a thin baseline the session's own
    // weight would decide it.
    let cold_start = stats.premium_peers < rule.cold_start_peers;
    if cold_start && others_share(stats) > rule.max_group_share / 2.0 {
        return None;
    }
    let usual = usual_model(stats, cat, rule)?;
    // Failed calls beside calls to the usual model: the session was failing
    // over (a router's fallback after a rate limit or an outage), so the
    // dearer model was not chosen for the sub-task.
    if s.errors > 0
        && s.by_model
            .iter()
            .any(|m| m.model == usual && m.requests > 0)
    {
        return None;
    }
    let on_usual: f64 = tiny
        .calls
        .iter()
        .filter_map(|c| cat.cost(usual, c.input_tokens, c.cached_tokens, c.output_tokens))
        .sum();
    let impact = (tiny.cost_usd - on_usual).max(0.0);
    if impact < rule.min_impact_usd {
        return None;
    }
    let first = tiny.calls.first()?;
    let requests: u64 = tiny.calls.iter().map(|c| c.requests).sum();
    let input: u64 = tiny.calls.iter().map(|c| c.input_tokens).sum();
    let calls: Vec<serde_json::Value> = tiny
        .calls
        .iter()
        .map(|c| {
            json!({
                "model": c.model,
                "requests": c.requests,
                "input_tokens": c.input_tokens,
                "output_tokens": c.output_tokens,
                "cost_usd": usd(c.cost_usd),
                "price_ratio": ratio(c.price_ratio),
            })
        })
        .collect();
    let mut f = Finding {
        kind: Kind::OversizedModel,
        session_id: s.session_id.clone(),
        window,
        severity: rule.meta.severity,
        rule: rule.meta.name.clone(),
        group: group.to_owned(),
        labels: s.labels.clone(),
        cost_usd: s.cost_usd,
        impact_usd: usd(impact),
        evidence: json!({
            "premium_calls": calls,
            "premium_cost_usd": usd(tiny.cost_usd),
            "premium_cost_share": ratio(tiny.cost_share),
            "usual_model": usual,
            "cost_on_usual_model_usd": usd(on_usual),
            "group_tiny_premium_share": ratio(stats.premium_tiny_share),
            // The figure the group's `tiny_call_price` ring keeps, for the
            // alert's chart of this session against its peers.
            "tiny_call_price": ratio(tiny_call_price(s, cat, rule)),
            "recent_tiny_premium_share": ratio(stats.recent_premium_tiny_share),
            "peers": stats.premium_peers,
            "cold_start": cold_start,
        }),
        explanation: format!(
            "{requests} calls to {} ({:.0}x the cheapest model in use) averaged {:.0} prompt tokens and made {:.0}% of the session's cost; on {usual} they would have cost ${:.5} instead of ${:.5}",
            first.model,
            first.price_ratio,
            input as f64 / requests.max(1) as f64,
            tiny.cost_share * 100.0,
            on_usual,
            tiny.cost_usd
        ),
    };
    super::note_computed_cost(s, &mut f);
    Some(f)
}

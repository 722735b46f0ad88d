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
//!
//! Aggregates hide tiny premium calls in two shapes, and those sessions are
//! judged from their request rows instead ([`may_hide_tiny_premium`],
//! [`confirm`]): a premium model's calls averaging above tiny although there
//! are several of them (a big planning call beside tiny ones), whether or
//! not the session also called a smaller model, and a session served
//! without a per-model breakdown that cost more than any model below the
//! premium floor could have charged for its tokens. A session that called
//! nothing but premium models is read only in a group whose usual model,
//! learnt from the models its sessions showed, is below the floor: there
//! the group's design had a smaller home for the sub-task.

use super::{Catalogue, Finding, GroupStats, Kind, ratio, usd};
use crate::config::OversizedModelRule;
use crate::source::{ModelUsage, RequestRecord, RequestStatus, SessionRecord, Window};
use serde_json::json;
use std::sync::Arc;

/// The tiny premium calls of one session.
#[derive(Debug, Clone, PartialEq)]
pub struct TinyPremium {
    /// Premium models called with tiny prompts, with their figures.
    pub calls: Vec<PremiumCalls>,
    /// What those calls cost.
    pub cost_usd: f64,
    /// Their share of the session's cost.
    pub cost_share: f64,
    /// Whether only the session's request rows show them (its aggregates
    /// do not).
    pub from_rows: bool,
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

/// The blended price of the cheapest model the session called; 0 when its
/// aggregates do not say (no per-model breakdown, or no known model).
pub fn cheapest_call_price(s: &SessionRecord, cat: &Catalogue) -> f64 {
    s.by_model
        .iter()
        .filter(|m| m.requests > 0)
        .filter_map(|m| cat.blended(&m.model))
        .min_by(f64::total_cmp)
        .unwrap_or(0.0)
}

/// Whether every model the session called is priced at `floor` or more
/// (with the tolerance of the baseline's run of such sessions).
fn calls_only_premium(s: &SessionRecord, cat: &Catalogue, floor: f64) -> bool {
    cheapest_call_price(s, cat) >= floor * (1.0 - 1e-6)
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
            let tiny = is_tiny(m.input_tokens, m.output_tokens, m.requests, rule);
            premium_calls(m, cat, rule).filter(|_| tiny)
        })
        .collect();
    share_of(calls, s, rule)
}

/// A model's calls as [`PremiumCalls`] when the model is premium.
fn premium_calls(
    m: &ModelUsage,
    cat: &Catalogue,
    rule: &OversizedModelRule,
) -> Option<PremiumCalls> {
    let price_ratio = cat.price_ratio(&m.model)?;
    (price_ratio >= rule.premium_price_ratio).then(|| PremiumCalls {
        model: m.model.clone(),
        requests: m.requests,
        input_tokens: m.input_tokens,
        cached_tokens: m.cached_tokens,
        output_tokens: m.output_tokens,
        cost_usd: m.cost_usd,
        price_ratio,
    })
}

/// `calls` as the session's [`TinyPremium`], when they make at least
/// `min_premium_cost_share` of its cost.
fn share_of(
    calls: Vec<PremiumCalls>,
    s: &SessionRecord,
    rule: &OversizedModelRule,
) -> Option<TinyPremium> {
    if calls.is_empty() || s.cost_usd <= 0.0 {
        return None;
    }
    let cost: f64 = calls.iter().map(|c| c.cost_usd).sum();
    let share = (cost / s.cost_usd).min(1.0);
    (share >= rule.min_premium_cost_share).then_some(TinyPremium {
        calls,
        cost_usd: cost,
        cost_share: share,
        from_rows: false,
    })
}

/// Whether the session's aggregates could hide tiny premium calls that only
/// its request rows show, `floor` being the blended price from which a
/// model is premium: several calls to a premium model that average above
/// tiny (one big call can hide tiny ones beside it), or, without a
/// per-model breakdown, a cost above what any model below the floor could
/// have charged for the session's tokens. A session that called nothing
/// but premium models passes too: its group's usual model (learnt from the
/// models its sessions showed, this one among them) decides whether the
/// sub-tasks had a smaller home ([`usual_if_judged`]).
pub fn may_hide_tiny_premium(
    s: &SessionRecord,
    cat: &Catalogue,
    rule: &OversizedModelRule,
    floor: f64,
) -> bool {
    if !may_hide_at_any_price(s, rule) {
        return false;
    }
    if s.by_model.is_empty() {
        return costs_above_the_floor(s, cat, floor);
    }
    several_above_tiny_at_or_above(s, cat, rule, floor)
}

/// [`may_hide_tiny_premium`] before prices: a session without a per-model
/// breakdown, or one with a model called several times averaging above
/// tiny. The nomination asks it of every session, so it looks at no price.
fn may_hide_at_any_price(s: &SessionRecord, rule: &OversizedModelRule) -> bool {
    if s.requests == 0 || s.cost_usd <= 0.0 {
        return false;
    }
    s.by_model.is_empty() || s.by_model.iter().any(|m| several_above_tiny(m, rule))
}

/// Whether a model the session called several times, averaging above tiny,
/// is priced at `floor` or more.
fn several_above_tiny_at_or_above(
    s: &SessionRecord,
    cat: &Catalogue,
    rule: &OversizedModelRule,
    floor: f64,
) -> bool {
    s.by_model
        .iter()
        .any(|m| several_above_tiny(m, rule) && cat.blended(&m.model).is_some_and(|b| b >= floor))
}

/// Whether the session called a model priced below `floor`.
pub fn calls_below(s: &SessionRecord, cat: &Catalogue, floor: f64) -> bool {
    s.by_model
        .iter()
        .any(|m| m.requests > 0 && cat.blended(&m.model).is_some_and(|b| b < floor))
}

/// Whether a session without a per-model breakdown cost more than any one
/// model below `floor` could have charged for its tokens: it called a model
/// at or above the floor. A lower floor leaves fewer models below it, so
/// it says so of more sessions.
fn costs_above_the_floor(s: &SessionRecord, cat: &Catalogue, floor: f64) -> bool {
    cat.dearest_cost_below(floor, s.input_tokens, s.output_tokens)
        .is_some_and(|most| s.cost_usd > most + COST_ROUNDING_USD)
}

fn several_above_tiny(m: &ModelUsage, rule: &OversizedModelRule) -> bool {
    m.requests >= 2 && !is_tiny(m.input_tokens, m.output_tokens, m.requests, rule)
}

/// The most a gateway's rounding of a session's cost can add, in USD.
const COST_ROUNDING_USD: f64 = 1e-6;

/// What an oversized_model candidate is confirmed against once its request
/// rows are read: its group's figures, its rule, and the prices of the
/// window (shared by the window's candidates).
#[derive(Debug, Clone)]
pub struct RowCheck {
    pub(super) stats: GroupStats,
    pub(super) rule: OversizedModelRule,
    pub(super) catalogue: Arc<Catalogue>,
}

impl RowCheck {
    /// A check against `stats` (with the group's premium shares) under
    /// `rule`, priced by `catalogue`.
    pub fn new(stats: GroupStats, rule: OversizedModelRule, catalogue: Arc<Catalogue>) -> Self {
        RowCheck {
            stats,
            rule,
            catalogue,
        }
    }
}

/// Judges a candidate from its request rows (oldest first): its successful
/// calls to premium models, each tiny on its own, judged as [`judge`]
/// judges a session's tiny premium calls. A session served without a
/// per-model breakdown is judged with the breakdown its rows give.
pub fn confirm(
    s: &SessionRecord,
    requests: &[RequestRecord],
    check: &RowCheck,
    group: &str,
    window: Window,
) -> Option<Finding> {
    let (cat, rule) = (check.catalogue.as_ref(), &check.rule);
    let mut tiny: Vec<ModelUsage> = Vec::new();
    let mut all: Vec<ModelUsage> = Vec::new();
    for r in requests {
        let add = |by_model: &mut Vec<ModelUsage>| {
            let (input, cached, output) = (r.input_tokens, r.cached_tokens, r.output_tokens);
            ModelUsage::add_call(by_model, &r.model, input, cached, output, r.cost_usd);
        };
        add(&mut all);
        if r.status == RequestStatus::Success && is_tiny(r.input_tokens, r.output_tokens, 1, rule) {
            add(&mut tiny);
        }
    }
    let calls: Vec<PremiumCalls> = tiny
        .iter()
        .filter_map(|m| premium_calls(m, cat, rule))
        .collect();
    let judged = |s: &SessionRecord| {
        let tiny = TinyPremium {
            from_rows: true,
            ..share_of(calls, s, rule)?
        };
        judge(s, &tiny, group, &check.stats, cat, rule, window)
    };
    if s.by_model.is_empty() {
        // The group's habits were learnt without knowing which models its
        // sessions call: a group whose design is a premium model would look
        // like one on the small model. Only a session that called a model
        // below the premium floor shows the sub-task had a smaller home.
        let floor = cat.premium_floor(rule.premium_price_ratio)?;
        let below = all.iter().any(|m| {
            cat.blended(&m.model)
                .is_some_and(|b| b < floor * (1.0 - 1e-6))
        });
        if !below {
            return None;
        }
        judged(&SessionRecord {
            by_model: all,
            ..s.clone()
        })
    } else {
        judged(s)
    }
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
/// calls other than the one judged: the judged session was observed into
/// the baseline before it is judged, and when `counted` it is itself among
/// those sessions.
fn others_share(stats: &GroupStats, counted: bool) -> f64 {
    let n = stats.premium_peers as f64;
    if n <= 1.0 {
        return 0.0;
    }
    let own = if counted { 1.0 } else { 0.0 };
    ((stats.premium_tiny_share * n - own) / (n - 1.0)).max(0.0)
}

/// The model the group's habits would have used for a session's tiny
/// premium calls, when those habits allow a finding at all: `None` when
/// the group has too few peers to know its habits, when tiny premium calls
/// are what it normally does (or has done since it moved), or when its
/// usual model is itself premium. `counted`: whether the judged session is
/// among the group's sessions making mostly tiny premium calls.
pub fn usual_if_judged<'a>(
    stats: &'a GroupStats,
    cat: &'a Catalogue,
    rule: &OversizedModelRule,
    counted: bool,
) -> Option<&'a str> {
    if stats.premium_peers < rule.min_peers
        || stats.premium_tiny_share > rule.max_group_share
        || stats.recent_premium_tiny_share > rule.max_group_share
    {
        return None;
    }
    // A thin baseline judges conservatively: at most half the share of
    // sessions making tiny premium calls that a full one tolerates. The
    // share is the other sessions': in a thin baseline the session's own
    // weight would decide it.
    let cold_start = stats.premium_peers < rule.cold_start_peers;
    if cold_start && others_share(stats, counted) > rule.max_group_share / 2.0 {
        return None;
    }
    usual_model(stats, cat, rule)
}

/// Whether a finding of `s` must wait for its group's next sessions, and
/// on what run: the session called only premium models (priced at `floor`
/// or more) and is in its group's newest run of such sessions, which is
/// still shorter than `moved_after_sessions`. The group may be starting a
/// move to the premium model (see `detect::held`).
pub fn open_move(
    s: &SessionRecord,
    stats: &GroupStats,
    cat: &Catalogue,
    rule: &OversizedModelRule,
    floor: f64,
) -> Option<super::held::GroupMove> {
    let run = stats.premium_only_run;
    (calls_only_premium(s, cat, floor) && run > 0 && run < rule.moved_after_sessions).then_some(
        super::held::GroupMove {
            run,
            moved_after: rule.moved_after_sessions,
            floor,
        },
    )
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
    // The group's baseline counted the session among those making mostly
    // tiny premium calls exactly when its aggregates show them.
    let usual = usual_if_judged(stats, cat, rule, !tiny.from_rows)?;
    // A session in the group's newest run of sessions that called nothing
    // but premium models, `moved_after_sessions` long (and itself calling
    // only premium models): the group has moved to the premium model (its
    // new design), before its recent share or its usual model can say so.
    if stats.premium_only_run >= rule.moved_after_sessions
        && cat
            .premium_floor(rule.premium_price_ratio)
            .is_some_and(|f| calls_only_premium(s, cat, f))
    {
        return None;
    }
    let cold_start = stats.premium_peers < rule.cold_start_peers;
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
    if tiny.from_rows
        && let Some(e) = f.evidence.as_object_mut()
    {
        // Said only when true: a finding from aggregates reads as before.
        e.insert("from_request_rows".to_owned(), json!(true));
    }
    super::note_computed_cost(s, &mut f);
    Some(f)
}

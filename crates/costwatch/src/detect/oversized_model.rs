//! A premium model used for tiny calls, in a group where that is not the
//! normal pattern; the finding estimates what the group's usual model would
//! have cost for the same calls.
//!
//! What the group's history knows decides what is normal: a group whose
//! most-called model is premium, or most of whose sessions make tiny
//! premium calls, is following its design. While the history is thin
//! (fewer than `cold_start_peers` sessions) the share tolerated is halved
//! and counted among the other sessions, and findings are marked
//! `cold_start`. A session with failed calls is judged from its request
//! rows: after a failed call, calls to another model are failing over (a
//! router's fallback) until the model that failed answers again, not
//! choosing the dearer model, and are left alone, unless a cheaper model
//! answered in the same failover (it was at hand); tiny premium calls
//! outside a failover are judged as any.
//!
//! A move is an incident, never a new design costwatch decides on by
//! itself: when a group with a history of small-model habits starts sending
//! its tiny calls to a premium model, however many of its sessions do it,
//! those sessions are kept out of its history (`detect::window`), so each
//! one is judged against what the group did before and the incident stays
//! open for as long as the move lasts. Only after `accept_after` without a
//! pause does the history take the move in as the group's new normal. A
//! team that moved on purpose says so with the rule's `design_model`: tiny
//! calls to that model, or to one no dearer, are the group's design, and
//! the model is the group's usual one.
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

use super::rules::OversizedModelRule;
use super::{Catalogue, Finding, GroupStats, Kind, ratio, usd};
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
    let premium = price_ratio >= rule.premium_price_ratio
        && !cat
            .blended(&m.model)
            .is_some_and(|p| by_design(p, cat, rule));
    premium.then(|| PremiumCalls {
        model: m.model.clone(),
        requests: m.requests,
        input_tokens: m.input_tokens,
        cached_tokens: m.cached_tokens,
        output_tokens: m.output_tokens,
        cost_usd: m.cost_usd,
        price_ratio,
    })
}

/// Whether a model priced `price` (blended) is the group's design by its
/// rule: the rule names a `design_model` no cheaper. A design model the
/// price table does not know covers every model: nothing can be priced
/// against it.
pub fn by_design(price: f64, cat: &Catalogue, rule: &OversizedModelRule) -> bool {
    rule.design_model
        .as_deref()
        .is_some_and(|d| cat.blended(d).is_none_or(|p| price <= p * (1.0 + 1e-6)))
}

/// The blended price from which a model is premium for `rule`'s groups:
/// `premium_price_ratio` times the cheapest model in use, and, where the
/// rule names a `design_model`, dearer than it. `None` before any model is
/// known to be in use.
pub fn premium_floor(cat: &Catalogue, rule: &OversizedModelRule) -> Option<f64> {
    let floor = cat.premium_floor(rule.premium_price_ratio)?;
    let design = rule.design_model.as_deref().and_then(|d| cat.blended(d));
    // Just above the design model's price, beyond the tolerance with which
    // stored prices are compared.
    Some(design.map_or(floor, |p| floor.max(p * (1.0 + 1e-5))))
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
/// calls to premium models, each tiny on its own and not a failover (a
/// call to another model after a failed one, until the model that failed
/// answers again, in which no cheaper model answered), judged as [`judge`]
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
    let add = |by_model: &mut Vec<ModelUsage>, r: &RequestRecord| {
        let (input, cached, output) = (r.input_tokens, r.cached_tokens, r.output_tokens);
        ModelUsage::add_call(by_model, &r.model, input, cached, output, r.cost_usd);
    };
    // After a failed call, calls to other models are a failover (a
    // router's fallback after a rate limit or an outage), until a call to
    // the model that failed succeeds again: the fallback was not chosen
    // for the sub-task. Unless a cheaper model answered in the same
    // failover: then it was at hand, and the tiny calls to dearer models
    // beside it are judged as any.
    let mut failover = Failover::default();
    for r in requests {
        add(&mut all, r);
        if r.status != RequestStatus::Success {
            failover.failed_on.get_or_insert(r.model.as_str());
            continue;
        }
        if failover.failed_on == Some(r.model.as_str()) {
            failover.end(&mut tiny, cat, add);
        }
        let is_tiny_call = is_tiny(r.input_tokens, r.output_tokens, 1, rule);
        if failover.failed_on.is_none() {
            if is_tiny_call {
                add(&mut tiny, r);
            }
        } else {
            if let Some(price) = cat.blended(&r.model) {
                failover.cheapest = Some(failover.cheapest.map_or(price, |c| c.min(price)));
            }
            if is_tiny_call {
                failover.tiny.push(r);
            }
        }
    }
    failover.end(&mut tiny, cat, add);
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

/// The calls since a failed call, until the model that failed answers
/// again (see [`confirm`]).
#[derive(Default)]
struct Failover<'a> {
    /// The model whose call failed first; `None` outside a failover.
    failed_on: Option<&'a str>,
    /// The price of the cheapest model that answered in it.
    cheapest: Option<f64>,
    /// Its successful tiny calls.
    tiny: Vec<&'a RequestRecord>,
}

impl<'a> Failover<'a> {
    /// Closes the failover: its tiny calls to a model dearer than one that
    /// answered in it count as any; the others are left alone.
    fn end(
        &mut self,
        tiny: &mut Vec<ModelUsage>,
        cat: &Catalogue,
        add: impl Fn(&mut Vec<ModelUsage>, &RequestRecord),
    ) {
        if let Some(cheapest) = self.cheapest {
            for r in &self.tiny {
                if cat
                    .blended(&r.model)
                    .is_some_and(|p| p > cheapest * (1.0 + 1e-6))
                {
                    add(tiny, r);
                }
            }
        }
        *self = Failover::default();
    }
}

/// The model the group would normally use instead: the rule's
/// `design_model` when it names one, else the group's most called model,
/// else (no history of models) the cheapest model in use. `None` when the
/// group's most called model is itself premium: premium is its design.
fn usual_model<'a>(
    stats: &'a GroupStats,
    cat: &'a Catalogue,
    rule: &'a OversizedModelRule,
) -> Option<&'a str> {
    if let Some(design) = rule.design_model.as_deref() {
        return Some(design);
    }
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
/// are what it normally does (or its history has taken a move to them in,
/// after `accept_after`), or when its usual model is itself premium.
/// `counted`: whether the judged session is among the group's sessions
/// making mostly tiny premium calls.
pub fn usual_if_judged<'a>(
    stats: &'a GroupStats,
    cat: &'a Catalogue,
    rule: &'a OversizedModelRule,
    counted: bool,
) -> Option<&'a str> {
    if stats.premium_peers < rule.min_peers
        || stats.premium_tiny_share > rule.max_group_share
        || stats.premium_accepted
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
    // tiny premium calls exactly when its aggregates show them, unless the
    // group is in a move its history keeps out.
    let kept_out = stats.premium_since.is_some() && !stats.premium_accepted;
    let usual = usual_if_judged(stats, cat, rule, !tiny.from_rows && !kept_out)?;
    let cold_start = stats.premium_peers < rule.cold_start_peers;
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
            "peers": stats.premium_peers,
            "cold_start": cold_start,
        }),
        explanation: format!(
            "{requests} {} to {} ({:.0}x the cheapest model in use) averaged {:.0} prompt tokens and made {:.0}% of the session's cost; on {usual} they would have cost ${:.5} instead of ${:.5}",
            if requests == 1 { "call" } else { "calls" },
            first.model,
            first.price_ratio,
            input as f64 / requests.max(1) as f64,
            tiny.cost_share * 100.0,
            on_usual,
            tiny.cost_usd
        ),
    };
    if let Some(e) = f.evidence.as_object_mut() {
        // Each said only when true: a finding without them reads as before.
        if tiny.from_rows {
            e.insert("from_request_rows".to_owned(), json!(true));
        }
        if let Some(design) = &rule.design_model {
            e.insert("design_model".to_owned(), json!(design));
        }
        // The move's start, once it began before the window: a fresh one
        // is said by the window itself.
        if let Some(since) = stats.premium_since.filter(|t| *t < window.start) {
            let at = since.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
            e.insert("premium_since".to_owned(), json!(at));
        }
    }

    super::note_computed_cost(s, &mut f);
    Some(f)
}

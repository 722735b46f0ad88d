//! When things happen in the adversarial family: the incidents, the
//! deliberate changes and the bursts, drawn from the family's own seeded
//! generator before any session, in a fixed order; then the model moves,
//! from a stream of their own, so the draws before them stay as they were.
//!
//! No wire format here: the schedule never shows in the gateway's rows
//! (gateway-api.md section 1), only in what the sessions do.

use super::super::ScenarioParams;
use super::catalogue::{OPUS, SOL};
use super::{CHECKOUT_MOVE_MINUTES, CHECKOUT_MOVE_SHARE, Feature, TRIAGE_MOVE_MINUTES};
use crate::rng::SimRng;
use chrono::{DateTime, Duration, Timelike, Utc};
use std::ops::RangeInclusive;

/// A half-open time span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Span {
    pub(super) start: DateTime<Utc>,
    pub(super) end: DateTime<Utc>,
}

impl Span {
    /// Whether `t` is in the span.
    pub(super) fn contains(&self, t: DateTime<Utc>) -> bool {
        self.start <= t && t < self.end
    }
}

/// Whether `t` is in `span`, if there is one.
pub(super) fn within(span: Option<Span>, t: DateTime<Utc>) -> bool {
    span.is_some_and(|s| s.contains(t))
}

/// The family's schedule (`None` where the scenario is too short).
#[derive(Debug, Clone)]
pub(super) struct Plan {
    /// A `helpdesk` deploy breaks the cached prefix (day 1).
    pub(super) helpdesk_broken: Option<Span>,
    /// A `claude-desk` template change breaks the cached prefix (last day).
    pub(super) desk_broken: Option<Span>,
    /// `triage` sub-agents send calls to a premium model (days 0 and 3),
    /// with the model they go to.
    pub(super) triage_premium: Vec<(Span, &'static str)>,
    /// `router` sends its classification steps to the premium model (day 2).
    pub(super) router_misroute: Option<Span>,
    /// `router`'s conversations lose their cached prefix (day 3).
    pub(super) router_broken: Option<Span>,
    /// `fieldops` sends tiny steps to the premium model (day 1).
    pub(super) fieldops_premium: Option<Span>,
    /// `checkout` sessions loop on failures (day 2).
    pub(super) checkout_loops: Option<Span>,
    /// A provider outage: `checkout` retries three times and gives up (day 3).
    pub(super) checkout_outage: Option<Span>,
    /// A schema change makes `agent` sessions loop on validation (day 2).
    pub(super) agent_loops: Option<Span>,
    /// The `batch` burst that meets a rate-limit storm (day 1 noon).
    pub(super) batch_storm: Option<Span>,
    /// A marketing mail multiplies `faq` traffic for an hour (day 2).
    pub(super) faq_spike: Option<Span>,
    /// `summarize` moves to a premium model on purpose (day 2).
    pub(super) summarize_switch: Option<DateTime<Utc>>,
    /// `contract-qa` starts (day 1).
    pub(super) contract_qa_from: Option<DateTime<Utc>>,
    /// Model moves nobody declared (`triage` on day 1, `checkout` on day 0).
    pub(super) model_moves: Vec<ModelMove>,
}

/// A model move: while `span` lasts, a `share` of the sessions of
/// `feature` send their sub-step's tiny calls to the premium `model`, the
/// rest of each session staying where its design sends it. The design
/// does not change, so the move is waste however many sessions make it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct ModelMove {
    pub(super) feature: Feature,
    pub(super) span: Span,
    pub(super) share: f64,
    pub(super) model: &'static str,
}

impl Plan {
    /// Draws the schedule: everything from `rng`, then the model moves from
    /// `moves`, a stream of their own.
    pub(super) fn new(p: &ScenarioParams, rng: &mut SimRng, moves: &mut SimRng) -> Plan {
        let days = i64::from(p.days);
        let mut span = |day: i64, hours: RangeInclusive<i64>, minutes: RangeInclusive<i64>| {
            let start = p.start
                + Duration::days(day)
                + Duration::hours(rng.random_range(hours))
                + Duration::minutes(rng.random_range(0..60));
            let len = rng.random_range(minutes);
            (day < days && day >= 0).then_some(Span {
                start,
                end: start + Duration::minutes(len),
            })
        };
        let helpdesk_broken = span(1, 9..=12, 150..=270);
        let desk_broken = span(days - 1, 13..=16, 120..=120).filter(|_| days >= 2);
        let triage_premium = [
            span(0, 13..=14, 180..=180).map(|s| (s, super::catalogue::SONNET)),
            span(3, 7..=8, 120..=120).map(|s| (s, super::catalogue::SOL)),
        ]
        .into_iter()
        .flatten()
        .collect();
        let router_misroute = span(2, 10..=13, 180..=240);
        let router_broken = span(3, 14..=16, 120..=120);
        let fieldops_premium = span(1, 13..=16, 180..=180);
        let checkout_loops = span(2, 15..=17, 120..=180);
        let checkout_outage = span(3, 10..=12, 45..=90);
        let agent_loops = span(2, 8..=10, 120..=120);
        let faq_spike = span(2, 17..=20, 60..=60).map(|s| {
            let hour = s.start - Duration::minutes(i64::from(s.start.minute()));
            Span {
                start: hour,
                end: hour + Duration::hours(1),
            }
        });
        let summarize_switch = span(2, 12..=15, 0..=0).map(|s| s.start);
        let contract_qa_from = span(1, 8..=14, 0..=0).map(|s| s.start);
        let noon = p.start + Duration::days(1) + Duration::hours(12);
        let batch_storm = (days >= 2).then_some(Span {
            start: noon,
            end: noon + Duration::hours(1),
        });
        Plan {
            helpdesk_broken,
            desk_broken,
            triage_premium,
            router_misroute,
            router_broken,
            fieldops_premium,
            checkout_loops,
            checkout_outage,
            agent_loops,
            batch_storm,
            faq_spike,
            summarize_switch,
            contract_qa_from,
            model_moves: model_moves(p, moves),
        }
    }

    /// The model move of `feature` under way at `t`, if any.
    pub(super) fn model_move_at(&self, feature: Feature, t: DateTime<Utc>) -> Option<&ModelMove> {
        self.model_moves
            .iter()
            .find(|m| m.feature == feature && m.span.contains(t))
    }

    /// The premium model `triage` misroutes to at `t`, during an incident.
    pub(super) fn triage_premium_at(&self, t: DateTime<Utc>) -> Option<&'static str> {
        self.triage_premium
            .iter()
            .find(|(s, _)| s.contains(t))
            .map(|(_, m)| *m)
    }
}

/// Draws the model moves: on day 1, for 4-8 hours, every `triage` session
/// sends its sub-step to Opus; on day 0, for 3-5 hours, 40-60% of
/// `checkout` sessions send theirs to Sol.
fn model_moves(p: &ScenarioParams, rng: &mut SimRng) -> Vec<ModelMove> {
    let days = i64::from(p.days);
    let mut span = |day: i64, hours: RangeInclusive<i64>, minutes: RangeInclusive<i64>| {
        let start = p.start
            + Duration::days(day)
            + Duration::hours(rng.random_range(hours))
            + Duration::minutes(rng.random_range(0..60));
        let end = start + Duration::minutes(rng.random_range(minutes));
        (day < days).then_some(Span { start, end })
    };
    let triage = span(1, 8..=11, TRIAGE_MOVE_MINUTES).map(|span| ModelMove {
        feature: Feature::Triage,
        span,
        share: 1.0,
        model: OPUS,
    });
    let checkout = span(0, 9..=12, CHECKOUT_MOVE_MINUTES);
    let share = rng.random_range(CHECKOUT_MOVE_SHARE);
    let checkout = checkout.map(|span| ModelMove {
        feature: Feature::Checkout,
        span,
        share,
        model: SOL,
    });
    [triage, checkout].into_iter().flatten().collect()
}

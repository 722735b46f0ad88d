//! The incident schedule: when each incident of a scenario happens, drawn
//! from the seeded generator before any session (the order of draws fixes
//! the data, so it must not change). The model moves come last, from a
//! stream of their own, so the draws before them stay as they were.
//!
//! No wire format here: the plan never shows in the gateway's rows
//! (gateway-api.md section 1), only in which sessions carry waste.

use super::{
    CHECKOUT_MOVE_MINUTES, CHECKOUT_MOVE_SHARE, Feature, NO_CACHE_MINUTES,
    ONBOARDING_NO_CACHE_MINUTES, RETRY_LOOP_MINUTES, SOL, SONNET, ScenarioParams,
    TRIAGE_MOVE_MINUTES,
};
use crate::rng::SimRng;
use chrono::{DateTime, Duration, Timelike, Utc};
use std::ops::RangeInclusive;

/// A half-open time span.
#[derive(Debug, Clone, Copy)]
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

/// When each incident happens (`None` when the scenario is too short).
#[derive(Debug, Clone, Default)]
pub(super) struct Plan {
    pub(super) no_cache: Option<Span>,
    pub(super) onboarding_from: Option<DateTime<Utc>>,
    pub(super) onboarding_no_cache: Option<Span>,
    pub(super) retry_loop: Option<Span>,
    pub(super) oversized: Vec<Span>,
    pub(super) spike: Option<Span>,
    pub(super) model_moves: Vec<ModelMove>,
}

/// A model move: while `span` lasts, a `share` of the sessions of
/// `feature` send their sub-step's tiny calls to the premium `model`, the
/// rest of each session staying on the feature's small model. Nobody
/// declared it, so it is waste however many sessions do it.
#[derive(Debug, Clone, Copy)]
pub(super) struct ModelMove {
    pub(super) feature: Feature,
    pub(super) span: Span,
    pub(super) share: f64,
    pub(super) model: &'static str,
}

/// Whether `t` is in `span`, if there is one.
pub(super) fn in_span(span: Option<Span>, t: DateTime<Utc>) -> bool {
    span.is_some_and(|s| s.contains(t))
}

impl Plan {
    /// Draws the schedule: the incidents from `rng`, then the model moves
    /// from `moves`, a stream of their own.
    pub(super) fn new(p: &ScenarioParams, rng: &mut SimRng, moves: &mut SimRng) -> Plan {
        let days = i64::from(p.days);
        let no_cache_len = rng.random_range(NO_CACHE_MINUTES);
        let retry_len = rng.random_range(RETRY_LOOP_MINUTES);
        let mut span = |day: i64, hours: RangeInclusive<i64>, minutes: i64| {
            (day < days).then(|| {
                let start = p.start
                    + Duration::days(day)
                    + Duration::hours(rng.random_range(hours))
                    + Duration::minutes(rng.random_range(0..60));
                Span {
                    start,
                    end: start + Duration::minutes(minutes),
                }
            })
        };
        let no_cache = span(1, 9..=12, no_cache_len);
        let retry_loop = span(2, 10..=13, retry_len);
        let oversized = [span(0, 13..=14, 180), span(3, 7..=8, 120)]
            .into_iter()
            .flatten()
            .collect();
        let onboarding_no_cache =
            span(days - 1, 13..=16, ONBOARDING_NO_CACHE_MINUTES).filter(|_| days >= 3);
        let spike = span(1, 14..=17, 60).map(|s| {
            let hour = s.start - Duration::minutes(i64::from(s.start.minute()));
            Span {
                start: hour,
                end: hour + Duration::hours(1),
            }
        });
        let onboarding_from =
            (days >= 3).then(|| p.start + Duration::days(2) + Duration::hours(12));
        Plan {
            no_cache,
            onboarding_from,
            onboarding_no_cache,
            retry_loop,
            oversized,
            spike,
            model_moves: model_moves(p, moves),
        }
    }

    /// The model move of `feature` under way at `t`, if any.
    pub(super) fn model_move_at(&self, feature: Feature, t: DateTime<Utc>) -> Option<&ModelMove> {
        self.model_moves
            .iter()
            .find(|m| m.feature == feature && m.span.contains(t))
    }
}

/// Draws the model moves: from the evening of day 0, for about two days,
/// every `triage` session sends its sub-step to Sol; on the morning of
/// day 0, for 3-5 hours, 40-60% of `checkout` sessions send theirs to
/// Sonnet.
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
    let triage = span(0, 19..=22, TRIAGE_MOVE_MINUTES).map(|span| ModelMove {
        feature: Feature::Triage,
        span,
        share: 1.0,
        model: SOL,
    });
    let checkout = span(0, 9..=11, CHECKOUT_MOVE_MINUTES);
    let share = rng.random_range(CHECKOUT_MOVE_SHARE);
    let checkout = checkout.map(|span| ModelMove {
        feature: Feature::Checkout,
        span,
        share,
        model: SONNET,
    });
    [triage, checkout].into_iter().flatten().collect()
}

//! The incident schedule: when each incident of a scenario happens, drawn
//! from the seeded generator before any session (the order of draws fixes
//! the data, so it must not change).
//!
//! No wire format here: the plan never shows in the gateway's rows
//! (gateway-api.md section 1), only in which sessions carry waste.

use super::{NO_CACHE_MINUTES, ONBOARDING_NO_CACHE_MINUTES, RETRY_LOOP_MINUTES, ScenarioParams};
use crate::rng::SimRng;
use chrono::{DateTime, Duration, Timelike, Utc};
use std::ops::RangeInclusive;

/// A half-open time span.
#[derive(Debug, Clone, Copy)]
pub(super) struct Span {
    start: DateTime<Utc>,
    end: DateTime<Utc>,
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
}

/// Whether `t` is in `span`, if there is one.
pub(super) fn in_span(span: Option<Span>, t: DateTime<Utc>) -> bool {
    span.is_some_and(|s| s.contains(t))
}

impl Plan {
    /// Draws the schedule.
    pub(super) fn new(p: &ScenarioParams, rng: &mut SimRng) -> Plan {
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
        }
    }
}

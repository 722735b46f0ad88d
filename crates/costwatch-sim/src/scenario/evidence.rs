//! Situations only the traffic can judge, drawn after every other session
//! (so the draws before them, and the figures of the features they do not
//! touch, stay as they were):
//!
//! - `quotes` on `gemini-3.6-flash`: conversations of three to six calls on
//!   prompts of 1,100 to 2,200 tokens. The provider caches from 1,024
//!   tokens, although the shipped caching table says 2,048 for the model's
//!   family. For [`QUOTES_BROKEN_MINUTES`] on day 2 (the last day of a
//!   shorter run), a release breaks the cached prefix of
//!   [`QUOTES_BROKEN_SHARE`] of its new sessions: waste by the true
//!   minimum, each of their calls after the first could have read.
//! - `release-notes`: a new service's only session, on day 1 (the last
//!   day of a shorter run). A conversation of 8 to 14 calls on Luna whose
//!   prompt holds the last one's, from about 3,000 tokens, and never reads
//!   the cache: a feature broken from its first conversation (waste).
//! - `bulk-tagging`: another new service's only session, the same day: 8 to
//!   15 unrelated prompts on Luna that share nothing, so nothing could have
//!   been read (not waste).

use super::calls::{CacheMode, Call, Draft, Gap, cache_blocks};
use super::generator::Generator;
use super::{
    CACHE_MISS_RATE, Feature, GEMINI, LUNA, QUOTES_BROKEN_MINUTES, QUOTES_BROKEN_SHARE,
    QUOTES_PER_DAY,
};
use crate::dataset::NO_CACHE;
use chrono::Duration;

impl Generator {
    /// The situations of this module, after every other session.
    pub(super) fn evidence_situations(&mut self) {
        let days = i64::from(self.params.days.max(1));
        let start = self.params.start;
        let incident_day = 2.min(days - 1);
        let from = start
            + Duration::days(incident_day)
            + Duration::minutes(self.rng.random_range(8 * 60..=15 * 60));
        let broken = (from, from + Duration::minutes(QUOTES_BROKEN_MINUTES));
        for day in 0..days {
            for hour in 0..24 {
                let t = start + Duration::days(day) + Duration::hours(hour);
                let day_total: f64 = (0..24)
                    .map(|h| Generator::diurnal(t - Duration::hours(h)))
                    .sum();
                let expected = QUOTES_PER_DAY * Generator::diurnal(t) / day_total;
                let n = expected.floor() as u64 + u64::from(self.rng.random_bool(expected.fract()));
                for _ in 0..n {
                    let at = t + Duration::milliseconds(self.rng.random_range(0..3_600_000));
                    let hit = (broken.0..broken.1).contains(&at);
                    let draft = self.quotes(hit);
                    self.materialize(Feature::Quotes, at, draft);
                }
            }
        }
        let lone_day = 1.min(days - 1);
        let at = start
            + Duration::days(lone_day)
            + Duration::minutes(self.rng.random_range(9 * 60..=17 * 60));
        let draft = self.release_notes(true);
        self.materialize(Feature::ReleaseNotes, at, draft);
        let at = at + Duration::minutes(self.rng.random_range(20..=120));
        let draft = self.bulk_tagging();
        self.materialize(Feature::BulkTagging, at, draft);
    }

    /// A conversation on `model`: `turns` calls, the first prompt drawn
    /// from `first`, each next one the last prompt, its answer and a new
    /// turn of `turn` tokens; cached as `cache` says.
    fn dialogue(
        &mut self,
        model: &'static str,
        turns: u32,
        first: std::ops::RangeInclusive<u64>,
        turn: std::ops::RangeInclusive<u64>,
        output: std::ops::RangeInclusive<u64>,
        cache: CacheMode,
    ) -> Vec<Call> {
        let mut calls: Vec<Call> = Vec::with_capacity(turns as usize);
        let mut input = self.rng.random_range(first);
        for i in 0..turns {
            if let Some(prev) = calls.last() {
                input = prev.input + prev.output + self.rng.random_range(turn.clone());
            }
            let out = self.rng.random_range(output.clone());
            let mut call = Call::ok(model, input, out, Gap::Turn);
            let read = i > 0
                && match cache {
                    CacheMode::Broken => false,
                    _ => !self.rng.random_bool(CACHE_MISS_RATE),
                };
            if let (true, Some(prev)) = (read, calls.last()) {
                call.cached = cache_blocks(prev.input);
            }
            call.write = input - call.cached;
            calls.push(call);
        }
        calls
    }

    /// A `quotes` conversation on Gemini; `broken`: during the release
    /// that breaks the prefix, a share of them never reads.
    pub(super) fn quotes(&mut self, incident: bool) -> Draft {
        let turns = self.rng.random_range(3..=6);
        let broken = incident && self.rng.random_bool(QUOTES_BROKEN_SHARE);
        let cache = if broken {
            CacheMode::Broken
        } else {
            CacheMode::Previous
        };
        let mut calls = self.dialogue(GEMINI, turns, 1_100..=1_300, 40..=120, 30..=90, cache);
        // The provider's implicit cache writes nothing billable.
        for c in &mut calls {
            c.write = 0;
        }
        if !broken && calls[1..].iter().all(|c| c.cached == 0) {
            calls[1].cached = cache_blocks(calls[0].input);
        }
        Draft {
            calls,
            kind: broken.then_some(NO_CACHE),
        }
    }

    /// A `release-notes` conversation; `broken`: it never reads the cache.
    pub(super) fn release_notes(&mut self, broken: bool) -> Draft {
        let turns = self.rng.random_range(8..=14);
        let cache = if broken {
            CacheMode::Broken
        } else {
            CacheMode::Previous
        };
        let calls = self.dialogue(LUNA, turns, 2_950..=3_100, 60..=200, 120..=260, cache);
        Draft {
            calls,
            kind: broken.then_some(NO_CACHE),
        }
    }

    /// The other new service's batch of unrelated prompts.
    pub(super) fn bulk_tagging(&mut self) -> Draft {
        let n = self.rng.random_range(8..=15);
        let calls = (0..n)
            .map(|_| {
                Call::ok(
                    LUNA,
                    self.rng.random_range(1_200..=4_000),
                    self.rng.random_range(20..=80),
                    Gap::Chain,
                )
            })
            .collect();
        Draft { calls, kind: None }
    }
}

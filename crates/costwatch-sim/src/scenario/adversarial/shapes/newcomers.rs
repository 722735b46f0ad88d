//! Sessions only the traffic can judge: `estimates` on Gemini (cache
//! minimum 1,024 tokens, which a shipped table may state otherwise), and
//! two new services whose group is their only session: `changelog`, a
//! conversation that never reads the cache, and `tagger`, a batch of
//! unrelated prompts that share nothing.

use super::super::catalogue::{GEMINI, LUNA};
use super::super::draft::{CachePolicy, Draft, NewCall, Situation};
use super::{Talk, chain_gap, turn_gap};
use crate::rng::SimRng;

/// Share of `estimates` sessions whose prompts stay below the minimum.
pub(in super::super) const ESTIMATES_BELOW_MIN: f64 = 0.12;
/// Share of `estimates` sessions broken while its incident lasts.
pub(in super::super) const ESTIMATES_BROKEN_SHARE: f64 = 0.45;

/// An `estimates` conversation on Gemini; `incident`: a release that
/// breaks the prefix.
pub(in super::super) fn estimates(rng: &mut SimRng, incident: bool) -> Draft {
    let output = 30..=150;
    let (situation, talk) = if rng.random_bool(ESTIMATES_BELOW_MIN) {
        let turns = rng.random_range(2..=4);
        let talk = Talk::growing(rng, GEMINI, turns, 640..=900, 20..=40, output);
        (Situation::BelowMinimum, talk)
    } else {
        let turns = rng.random_range(2..=6);
        let talk = Talk::growing(rng, GEMINI, turns, 1_040..=1_400, 60..=250, output);
        (Situation::CachedConversation, talk)
    };
    let mut d = Draft::new(situation);
    talk.all(rng, &mut d, turn_gap);
    if incident && rng.random_bool(ESTIMATES_BROKEN_SHARE) {
        d.cache = CachePolicy::Broken;
        d.situation = Situation::BrokenCache;
    }
    d
}

/// A new service's first conversation on Luna: each prompt the last one,
/// its answer and a new turn; its prefix changes at the top of every call,
/// so it never reads.
pub(in super::super) fn changelog(rng: &mut SimRng) -> Draft {
    let turns = rng.random_range(6..=12);
    let mut d = Draft::new(Situation::FirstConversation);
    d.cache = CachePolicy::Broken;
    let (mut input, mut prefix) = (rng.random_range(2_400..=3_200), 0);
    for _ in 0..turns {
        let output = rng.random_range(100u64..=300);
        let gap_ms = turn_gap(rng);
        d.call(NewCall {
            model: LUNA,
            thread: 0,
            input,
            output,
            prefix,
            norm: LUNA,
            gap_ms,
        });
        prefix = input;
        input += output + rng.random_range(50u64..=250);
    }
    d
}

/// A new service's batch of unrelated prompts on Luna, sharing nothing.
pub(in super::super) fn tagger(rng: &mut SimRng) -> Draft {
    let n = rng.random_range(6..=14);
    let mut d = Draft::new(Situation::UnrelatedBatch);
    for _ in 0..n {
        let input = rng.random_range(1_100..=3_800);
        let output = rng.random_range(20..=90);
        let gap_ms = chain_gap(rng);
        d.call(NewCall {
            model: LUNA,
            thread: 0,
            input,
            output,
            prefix: 0,
            norm: LUNA,
            gap_ms,
        });
    }
    d
}

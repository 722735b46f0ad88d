//! Conversations on cache-capable models, around each model's cache
//! minimum: `helpdesk` (Luna, 1,024 tokens), `claude-desk` (Haiku, 2,048),
//! `doc-review` (Opus, 4,096) and `faq` (tiny Luna sessions straddling
//! 1,024). Each has healthy sessions whose caching starts partway, sessions
//! that could never cache, and, during incidents, sessions whose cached
//! prefix is broken.

use super::super::catalogue::{HAIKU, LUNA, OPUS};
use super::super::draft::{CachePolicy, Draft, Situation};
use super::{Talk, long_pause, turn_gap};
use crate::rng::SimRng;

/// Share of `helpdesk` sessions whose prompts stay below the minimum or
/// cross it only on the last call.
pub(in super::super) const HELPDESK_BELOW_MIN: f64 = 0.06;
/// Share of `helpdesk` sessions whose turns are all further apart than the
/// cache lives (answered by mail, hours long).
pub(in super::super) const HELPDESK_PAUSED: f64 = 0.07;
/// Share of `helpdesk` sessions that start below the minimum and cross it.
pub(in super::super) const HELPDESK_LATE_START: f64 = 0.17;
/// Share of `helpdesk` sessions broken by the deploy while it lasts.
pub(in super::super) const HELPDESK_BROKEN_SHARE: f64 = 0.35;
/// Share of `claude-desk` sessions broken while its incident lasts.
pub(in super::super) const DESK_BROKEN_SHARE: f64 = 0.40;
/// Share of `faq` sessions from a client version that breaks the prefix.
pub(in super::super) const FAQ_LEGACY_SHARE: f64 = 0.025;

/// Marks `d` as broken when `broken`.
fn break_if(mut d: Draft, broken: bool) -> Draft {
    if broken {
        d.cache = CachePolicy::Broken;
        d.situation = Situation::BrokenCache;
    }
    d
}

/// Prompts that stay under the minimum until the last: `first`, rising
/// evenly to `before_last`, then `last`.
fn creeping(turns: u32, first: u64, before_last: u64, last: u64) -> Vec<u64> {
    let steps = turns.saturating_sub(2).max(1) as u64;
    let mut prompts: Vec<u64> = (0..turns.saturating_sub(1) as u64)
        .map(|i| first + (before_last.saturating_sub(first)) * i / steps)
        .collect();
    if let Some(p) = prompts.last_mut() {
        *p = before_last;
    }
    prompts.push(last);
    prompts
}

/// A `helpdesk` conversation on Luna; `incident`: the broken deploy.
pub(in super::super) fn helpdesk(rng: &mut SimRng, incident: bool) -> Draft {
    let x = rng.random_f64();
    let output = 60..=500;
    let d = if x < HELPDESK_BELOW_MIN {
        // The example: 775, 1,018, 1,282 tokens averages above the
        // minimum yet no earlier prompt was ever long enough to cache.
        let turns = rng.random_range(3..=4);
        let first = rng.random_range(620..=880);
        let before_last = rng.random_range(930..=1_020);
        let last = rng.random_range(1_030..=1_400);
        let talk = Talk {
            model: LUNA,
            thread: 0,
            prompts: creeping(turns, first, before_last, last),
            output,
        };
        let mut d = Draft::new(Situation::BelowMinimum);
        talk.all(rng, &mut d, turn_gap);
        d
    } else if x < HELPDESK_BELOW_MIN + HELPDESK_PAUSED {
        let turns = rng.random_range(2..=6);
        let talk = Talk::growing(rng, LUNA, turns, 1_200..=3_000, 150..=800, output);
        let mut d = Draft::new(Situation::PausedConversation);
        talk.all(rng, &mut d, long_pause);
        d
    } else if x < HELPDESK_BELOW_MIN + HELPDESK_PAUSED + HELPDESK_LATE_START {
        let turns = rng.random_range(4..=10);
        let talk = Talk::growing(rng, LUNA, turns, 600..=950, 100..=400, output);
        let mut d = Draft::new(Situation::LateCacheStart);
        talk.all(rng, &mut d, turn_gap);
        d
    } else {
        let turns = if rng.random_bool(0.03) {
            rng.random_range(25..=45)
        } else {
            rng.random_range(2..=12)
        };
        let talk = Talk::growing(rng, LUNA, turns, 1_100..=3_500, 100..=900, output);
        // Some users step away once, longer than the cache lives.
        let pause_at = rng
            .random_bool(0.10)
            .then(|| rng.random_range(1..=turns.max(1) as usize));
        let mut d = Draft::new(Situation::CachedConversation);
        for i in 0..talk.prompts.len() {
            let gap = if Some(i) == pause_at {
                long_pause(rng)
            } else {
                turn_gap(rng)
            };
            talk.turn(rng, &mut d, i, gap);
        }
        d
    };
    let broken = incident && rng.random_bool(HELPDESK_BROKEN_SHARE);
    break_if(d, broken)
}

/// A `claude-desk` conversation on Haiku (cache minimum 2,048 tokens);
/// `incident`: the template change that breaks the prefix.
pub(in super::super) fn claude_desk(rng: &mut SimRng, incident: bool) -> Draft {
    let output = 80..=500;
    let d = if rng.random_bool(0.35) {
        // Prompts between 1,100 and 1,900 tokens: above Luna's minimum,
        // below Haiku's.
        let turns = rng.random_range(2..=5);
        let talk = Talk::growing(rng, HAIKU, turns, 1_100..=1_500, 50..=100, output);
        let mut d = Draft::new(Situation::BelowMinimum);
        talk.all(rng, &mut d, turn_gap);
        d
    } else {
        let turns = rng.random_range(2..=10);
        let talk = Talk::growing(rng, HAIKU, turns, 1_300..=3_600, 150..=600, output);
        let mut d = Draft::new(Situation::LateCacheStart);
        talk.all(rng, &mut d, turn_gap);
        d
    };
    let broken = incident && rng.random_bool(DESK_BROKEN_SHARE);
    break_if(d, broken)
}

/// A reviewer reading between turns.
fn reading_gap(rng: &mut SimRng) -> i64 {
    rng.random_range(20_000..=12 * 60_000)
}

/// A `doc-review` conversation on Opus (cache minimum 4,096 tokens): big
/// prompts on the premium model are this group's design.
pub(in super::super) fn doc_review(rng: &mut SimRng) -> Draft {
    let output = 300..=1_500;
    let (situation, talk) = if rng.random_bool(0.30) {
        let turns = rng.random_range(2..=4);
        let talk = Talk::growing(rng, OPUS, turns, 1_800..=3_000, 100..=300, output);
        (Situation::BelowMinimum, talk)
    } else {
        let turns = rng.random_range(2..=6);
        let talk = Talk::growing(rng, OPUS, turns, 2_500..=9_000, 300..=2_000, output);
        (Situation::LateCacheStart, talk)
    };
    let mut d = Draft::new(situation);
    talk.all(rng, &mut d, reading_gap);
    d
}

/// A `faq` session: two to four short Luna calls around the minimum,
/// costing about a hundredth of a cent; a few come from a client version
/// that breaks the prefix.
pub(in super::super) fn faq(rng: &mut SimRng) -> Draft {
    let turns = rng.random_range(2..=4);
    let talk = Talk::growing(rng, LUNA, turns, 880..=1_250, 40..=200, 30..=150);
    let cacheable = talk
        .prompts
        .iter()
        .take(talk.prompts.len().saturating_sub(1))
        .any(|&p| p >= 1_024);
    let situation = if cacheable {
        Situation::CachedConversation
    } else {
        Situation::BelowMinimum
    };
    let mut d = Draft::new(situation);
    talk.all(rng, &mut d, |r| r.random_range(3_000..=20_000));
    let legacy = rng.random_bool(FAQ_LEGACY_SHARE);
    break_if(d, legacy)
}

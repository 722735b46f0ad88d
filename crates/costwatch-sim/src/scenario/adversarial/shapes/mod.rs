//! The shape of each feature's sessions in the adversarial family, and the
//! draws they share: pauses, heavy-tailed counts, growing conversations.
//! Every draw comes from the family's generator in a fixed order.
//!
//! No wire format here: the drafts become the request rows of
//! gateway-api.md section 1 in `rows`.

pub(super) mod agents;
pub(super) mod conversations;
pub(super) mod newcomers;
pub(super) mod routing;

use super::draft::{Draft, NewCall};
use crate::rng::SimRng;
use std::ops::RangeInclusive;

/// A user thinking between turns.
pub(super) fn turn_gap(rng: &mut SimRng) -> i64 {
    rng.random_range(2_000..=40_000)
}

/// An agent or pipeline chaining calls.
pub(super) fn chain_gap(rng: &mut SimRng) -> i64 {
    rng.random_range(300..=4_000)
}

/// A pause longer than a cached prefix lives: 6 to 30 minutes.
pub(super) fn long_pause(rng: &mut SimRng) -> i64 {
    rng.random_range(6 * 60_000..=30 * 60_000)
}

/// A standard normal draw (Box-Muller).
fn normal(rng: &mut SimRng) -> f64 {
    let u1 = 1.0 - rng.random_f64();
    let u2 = rng.random_f64();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// A log-normal count with this median and log-spread, in `range`.
pub(super) fn lognormal_count(
    rng: &mut SimRng,
    median: f64,
    sigma: f64,
    range: RangeInclusive<u32>,
) -> u32 {
    let x = (median * (sigma * normal(rng)).exp()).round();
    (x.max(0.0) as u32).clamp(*range.start(), *range.end())
}

/// A Pareto count: `min` times a heavy tail of index `alpha`, capped.
pub(super) fn pareto_count(rng: &mut SimRng, min: f64, alpha: f64, cap: u32) -> u32 {
    let u = rng.random_f64();
    let x = (min * (1.0 - u).powf(-1.0 / alpha)).floor();
    (x.max(1.0) as u32).min(cap)
}

/// A conversation: each prompt is the previous one plus a turn, so it
/// shares all of the previous prompt.
#[derive(Debug, Clone)]
pub(super) struct Talk {
    pub(super) model: &'static str,
    pub(super) thread: u8,
    /// Each turn's prompt, in order.
    pub(super) prompts: Vec<u64>,
    pub(super) output: RangeInclusive<u64>,
}

impl Talk {
    /// Prompts starting at a draw from `first`, growing by draws from
    /// `growth`, `turns` long.
    pub(super) fn growing(
        rng: &mut SimRng,
        model: &'static str,
        turns: u32,
        first: RangeInclusive<u64>,
        growth: RangeInclusive<u64>,
        output: RangeInclusive<u64>,
    ) -> Talk {
        let mut prompts = Vec::with_capacity(turns as usize);
        let mut p = rng.random_range(first);
        for t in 0..turns {
            if t > 0 {
                p += rng.random_range(growth.clone());
            }
            prompts.push(p);
        }
        Talk {
            model,
            thread: 0,
            prompts,
            output,
        }
    }

    /// Appends turn `i` to `draft` after `gap_ms`; returns its position.
    pub(super) fn turn(&self, rng: &mut SimRng, draft: &mut Draft, i: usize, gap_ms: i64) -> usize {
        let input = self.prompts.get(i).copied().unwrap_or(0);
        let prefix = i
            .checked_sub(1)
            .and_then(|p| self.prompts.get(p))
            .copied()
            .unwrap_or(0);
        draft.call(NewCall {
            model: self.model,
            thread: self.thread,
            input,
            output: rng.random_range(self.output.clone()),
            prefix,
            norm: self.model,
            gap_ms,
        })
    }

    /// Appends every turn, each after a pause from `gap`.
    pub(super) fn all(&self, rng: &mut SimRng, draft: &mut Draft, gap: fn(&mut SimRng) -> i64) {
        for i in 0..self.prompts.len() {
            let g = gap(rng);
            self.turn(rng, draft, i, g);
        }
    }
}

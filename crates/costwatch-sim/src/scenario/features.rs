//! The shape of each feature's sessions (conversations, short chains,
//! retries, premium-model sub-calls) and the building blocks they share:
//! a growing conversation, its prompt-cache reads, a burst of resent calls.
//! These draw from the generator's random source in a fixed order.
//!
//! No wire format here: the drafts become the request rows of
//! gateway-api.md section 1 in `generator`.

use super::calls::{
    CacheMode, Call, Conversation, Draft, Failure, Gap, cache_blocks, ensure_one_hit,
};
use super::generator::Generator;
use super::{CACHE_MISS_RATE, CHECKOUT_RETRY_SHARE, LONG_SUPPORT_SHARE, LUNA, NOVA, SOL, SONNET};
use crate::dataset::{NO_CACHE, OVERSIZED_MODEL, RETRY_LOOP};
use std::ops::RangeInclusive;

impl Generator {
    /// The shape of a support conversation: 2-12 turns, sometimes 25-45.
    fn support_shape(&mut self) -> Conversation {
        let turns = if self.rng.random_bool(LONG_SUPPORT_SHARE) {
            self.rng.random_range(25..=45)
        } else {
            self.rng.random_range(2..=12)
        };
        Conversation {
            model: LUNA,
            turns,
            prompt: 1_500..=4_000,
            growth: 300..=1_500,
            output: 80..=600,
            cache: CacheMode::Previous,
        }
    }

    /// A support conversation; during an incident (`incident`), a `share`
    /// of those with 3+ turns never read the cache.
    pub(super) fn support(&mut self, incident: bool, share: f64) -> Draft {
        let mut shape = self.support_shape();
        let broken = incident && shape.turns >= 3 && self.rng.random_bool(share);
        if broken {
            shape.cache = CacheMode::Broken;
        }
        Draft {
            calls: self.conversation(&shape),
            kind: broken.then_some(NO_CACHE),
        }
    }

    /// A support conversation stuck on one turn, resent 8-15 times.
    pub(super) fn support_loop(&mut self) -> Draft {
        let mut shape = self.support_shape();
        shape.turns = self.rng.random_range(2..=8);
        let calls = self.conversation(&shape);
        let at = self.rng.random_range(0..calls.len());
        let n = self.rng.random_range(8..=15);
        let (burst, gave_up) = self.burst(&calls[at], n, 0..=0);
        let mut out: Vec<Call> = calls[..at].to_vec();
        out.extend(burst);
        if !gave_up {
            out.extend_from_slice(&calls[at + 1..]);
        }
        Draft {
            calls: out,
            kind: Some(RETRY_LOOP),
        }
    }

    /// One or two short uncached prompts.
    pub(super) fn search(&mut self) -> Vec<Call> {
        let n = if self.rng.random_bool(0.6) { 1 } else { 2 };
        (0..n)
            .map(|_| {
                Call::ok(
                    LUNA,
                    self.rng.random_range(400..=900),
                    self.rng.random_range(50..=250),
                    Gap::Turn,
                )
            })
            .collect()
    }

    /// One short checkout call.
    fn checkout_call(&mut self) -> Call {
        Call::ok(
            LUNA,
            self.rng.random_range(300..=500),
            self.rng.random_range(20..=120),
            Gap::Chain,
        )
    }

    /// 2-5 short calls; a few sessions retry once or twice after a rate limit.
    pub(super) fn checkout(&mut self) -> Vec<Call> {
        let n = self.rng.random_range(2..=5);
        let mut calls: Vec<Call> = (0..n).map(|_| self.checkout_call()).collect();
        if self.rng.random_bool(CHECKOUT_RETRY_SHARE) {
            let at = self.rng.random_range(0..calls.len());
            let failed = calls[at].resend(Some(Failure::RateLimit), 0);
            let retries = self.rng.random_range(1..=2);
            calls[at].gap = Gap::Retry;
            for _ in 0..retries {
                calls.insert(at, failed.clone());
            }
            if let Some(first) = calls.get_mut(at) {
                first.gap = Gap::Chain;
            }
        }
        calls
    }

    /// A checkout stuck in a loop: 8-25 near-identical calls, mostly failing.
    pub(super) fn checkout_loop(&mut self) -> Draft {
        let mut calls = Vec::new();
        if self.rng.random_bool(0.3) {
            calls.push(self.checkout_call());
        }
        let base = self.checkout_call();
        let n = self.rng.random_range(8..=25);
        let growth = if self.rng.random_bool(0.5) {
            0..=0
        } else {
            0..=20
        };
        calls.extend(self.burst(&base, n, growth).0);
        Draft {
            calls,
            kind: Some(RETRY_LOOP),
        }
    }

    /// 3-6 short sub-agent calls; oversized sessions send 2-4 of them to Sol.
    pub(super) fn triage(&mut self, oversized: bool) -> Draft {
        let n = self.rng.random_range(3..=6);
        let mut calls: Vec<Call> = (0..n)
            .map(|_| {
                Call::ok(
                    LUNA,
                    self.rng.random_range(100..=250),
                    self.rng.random_range(15..=40),
                    Gap::Chain,
                )
            })
            .collect();
        let mut sol_calls = 0;
        if oversized {
            let k = self.rng.random_range(2usize..=4).min(n);
            for i in self.choose(n, k) {
                calls[i] = Call::ok(
                    SOL,
                    self.rng.random_range(60..=200),
                    self.rng.random_range(10..=30),
                    Gap::Chain,
                );
                sol_calls += 1;
            }
        }
        Draft {
            calls,
            kind: (sol_calls > 0).then_some(OVERSIZED_MODEL),
        }
    }

    /// A premium-model conversation with big prompts and a warm cache.
    pub(super) fn research(&mut self) -> Vec<Call> {
        let shape = Conversation {
            model: SOL,
            turns: self.rng.random_range(2..=6),
            prompt: 15_000..=25_000,
            growth: 500..=3_000,
            output: 300..=1_500,
            cache: CacheMode::Share(0.6, 0.9),
        };
        self.conversation(&shape)
    }

    /// Two to four short prompts on Claude Sonnet.
    pub(super) fn legal_review(&mut self) -> Vec<Call> {
        let n = self.rng.random_range(2..=4);
        (0..n)
            .map(|_| {
                Call::ok(
                    SONNET,
                    self.rng.random_range(300..=800),
                    self.rng.random_range(100..=500),
                    Gap::Turn,
                )
            })
            .collect()
    }

    /// A long conversation with a warm cache.
    pub(super) fn long_chat(&mut self) -> Vec<Call> {
        let shape = Conversation {
            model: LUNA,
            turns: self.rng.random_range(20..=60),
            prompt: 1_200..=2_500,
            growth: 150..=600,
            output: 50..=400,
            cache: CacheMode::Share(0.7, 0.9),
        };
        self.conversation(&shape)
    }

    /// Large prompts on a model without a cache.
    pub(super) fn batch_extract(&mut self) -> Vec<Call> {
        let n = self.rng.random_range(3..=8);
        (0..n)
            .map(|_| {
                Call::ok(
                    NOVA,
                    self.rng.random_range(3_000..=8_000),
                    self.rng.random_range(200..=800),
                    Gap::Chain,
                )
            })
            .collect()
    }

    /// A conversation whose prompt grows every turn.
    fn conversation(&mut self, c: &Conversation) -> Vec<Call> {
        let mut input =
            self.rng.random_range(c.prompt.clone()) + self.rng.random_range(50u64..=400);
        let mut calls: Vec<Call> = Vec::with_capacity(c.turns as usize);
        for turn in 0..c.turns {
            if turn > 0 {
                input += self.rng.random_range(c.growth.clone());
            }
            let previous = calls.last().map(|p| p.input);
            let cached = self.cached(c.cache, previous, input);
            let mut call = Call::ok(
                c.model,
                input,
                self.rng.random_range(c.output.clone()),
                Gap::Turn,
            );
            call.cached = cached;
            // A hit writes the new tail; a miss (or a broken prefix) writes it all.
            call.write = input - cached;
            calls.push(call);
        }
        if !matches!(c.cache, CacheMode::Broken) {
            ensure_one_hit(&mut calls);
        }
        calls
    }

    /// Tokens read from the cache on a turn after `previous`'s prompt.
    fn cached(&mut self, mode: CacheMode, previous: Option<u64>, input: u64) -> u64 {
        match (mode, previous) {
            (CacheMode::Broken, _) | (_, None) => 0,
            (CacheMode::Previous, Some(p)) => {
                if self.rng.random_bool(CACHE_MISS_RATE) {
                    0
                } else {
                    cache_blocks(p.min(input))
                }
            }
            (CacheMode::Share(lo, hi), Some(_)) => {
                cache_blocks((input as f64 * self.rng.random_range(lo..=hi)) as u64)
            }
        }
    }

    /// `base` resent `n` times, 60-100% of them failing; the prompt grows by
    /// `growth` per call. Ends on a success unless every call failed (the
    /// client gave up); returns the calls and whether it gave up.
    fn burst(&mut self, base: &Call, n: u32, growth: RangeInclusive<u64>) -> (Vec<Call>, bool) {
        let n = n.max(1) as usize;
        let errors = ((n as f64 * self.rng.random_range(0.6..=1.0)).ceil() as usize).clamp(1, n);
        let gave_up = errors == n;
        let successes = if gave_up { 0 } else { n - errors - 1 };
        let early_ok = self.choose(n - 1, successes);
        let usual = if self.rng.random_bool(0.7) {
            Failure::RateLimit
        } else {
            Failure::Timeout
        };
        let mut calls = Vec::with_capacity(n);
        let mut input = base.input;
        for i in 0..n {
            let ok = (!gave_up && i == n - 1) || early_ok.contains(&i);
            let call = if ok {
                let output = if i == n - 1 {
                    base.output
                } else {
                    self.rng.random_range(1..=15)
                };
                base.resend(None, output)
            } else {
                let other = if usual == Failure::RateLimit {
                    Failure::Timeout
                } else {
                    Failure::RateLimit
                };
                let failure = if self.rng.random_bool(0.15) {
                    other
                } else {
                    usual
                };
                base.resend(Some(failure), 0)
            };
            calls.push(Call {
                input,
                cached: call.cached.min(input),
                ..call
            });
            input += self.rng.random_range(growth.clone());
        }
        if let Some(first) = calls.first_mut() {
            first.gap = base.gap;
            // A rate-limited call is rejected before anything is written.
            if first.failure != Some(Failure::RateLimit) {
                first.write = base.write;
            }
        }
        (calls, gave_up)
    }

    /// `k` distinct positions out of `0..n`, ascending.
    fn choose(&mut self, n: usize, k: usize) -> Vec<usize> {
        let mut all: Vec<usize> = (0..n).collect();
        for i in 0..k.min(n) {
            let j = self.rng.random_range(i..n);
            all.swap(i, j);
        }
        let mut picked: Vec<usize> = all.into_iter().take(k).collect();
        picked.sort_unstable();
        picked
    }
}

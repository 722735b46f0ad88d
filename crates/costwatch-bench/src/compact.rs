//! A large dataset for the performance benchmark: a million sessions (or any
//! number) in one hour, built cheaply from the simulator's own types and
//! catalogue so the built-in simulator serves it unchanged.
//!
//! The multi-day scenario ([`costwatch_sim::scenario`]) is built for detection
//! quality: long conversations, many look-alikes, incidents clustered in
//! time. Generated at a million sessions it would hold tens of millions of
//! calls. This dataset keeps the same features, models and labels but with
//! few calls per session (2.6 on average), so one process can hold it, and
//! only a small fraction of sessions are worth a closer look:
//!
//! - 0.10% `no_cache` (support conversations whose cache never hits),
//! - 0.05% `oversized_model` (triage sub-agents calling the premium model),
//! - 0.05% `retry_loop` (checkout sessions resending one call 8-15 times),
//! - and healthy look-alikes that a static threshold flags: two-call
//!   uncached searches and checkouts, a group that always uses a premium
//!   model on short prompts (`legal-review`), long warm-cache conversations
//!   (`long-chat`), a model without a prompt cache (`batch-extract`) and
//!   single-call probes.
//!
//! [`Mix::Scenario`] uses the scenario's feature shares instead, where about
//! one session in ten is nominated. The truth is written to
//! [`Dataset::truth`], as in the scenario.

use chrono::{DateTime, Duration, NaiveDate, Utc};
use costwatch_sim::dataset::{
    Dataset, NO_CACHE, OVERSIZED_MODEL, RETRY_LOOP, SimRequest, SimSession,
};
use costwatch_sim::scenario::{self, LUNA, NOVA, SOL, SONNET};
use costwatch_sim::{SimModel, Truth};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::ops::RangeInclusive;

/// Share of sessions that never read their prompt cache.
pub const NO_CACHE_SHARE: f64 = 0.001;
/// Share of sessions sending tiny calls to the premium model.
pub const OVERSIZED_SHARE: f64 = 0.0005;
/// Share of sessions stuck in a retry loop.
pub const RETRY_LOOP_SHARE: f64 = 0.0005;

/// Healthy traffic by feature (percent of sessions) in the lean mix: few
/// sessions worth a closer look (under 1%).
const LEAN: [(&str, f64); 9] = [
    ("support-agent", 30.0),
    ("search", 20.0),
    ("checkout", 15.0),
    ("triage", 10.0),
    ("research", 6.0),
    ("batch-extract", 4.0),
    ("latency-test", 14.5),
    ("legal-review", 0.25),
    ("long-chat", 0.25),
];

/// The scenario's own shares ([`scenario::FEATURE_SHARES`]): 5% of sessions
/// always use a premium model on short prompts and 4% are long
/// conversations, so about one session in ten is nominated for a closer
/// look, far more than `detection.max_candidates` in a big window.
const SCENARIO: [(&str, f64); 9] = [
    ("support-agent", 30.0),
    ("search", 20.0),
    ("checkout", 15.0),
    ("triage", 10.0),
    ("research", 6.0),
    ("batch-extract", 4.0),
    ("latency-test", 3.0),
    ("legal-review", 5.0),
    ("long-chat", 4.0),
];

/// Which feature shares to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mix {
    /// Under 1% of sessions nominated for a closer look.
    #[default]
    Lean,
    /// The scenario's shares: about 10% nominated.
    Scenario,
}

impl Mix {
    fn shares(self) -> &'static [(&'static str, f64); 9] {
        match self {
            Mix::Lean => &LEAN,
            Mix::Scenario => &SCENARIO,
        }
    }

    /// The name used on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Mix::Lean => "lean",
            Mix::Scenario => "scenario",
        }
    }

    /// Parses [`Mix::as_str`] back.
    pub fn parse(s: &str) -> Option<Mix> {
        [Mix::Lean, Mix::Scenario]
            .into_iter()
            .find(|m| m.as_str() == s)
    }
}

/// What to generate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactParams {
    /// Number of sessions.
    pub sessions: usize,
    /// Random seed.
    pub seed: u64,
    /// Start of the hour the sessions fall in.
    pub start: DateTime<Utc>,
    /// Feature shares.
    pub mix: Mix,
}

impl CompactParams {
    /// `sessions` sessions in the hour from 2026-11-02 12:00 UTC.
    pub fn new(sessions: usize, seed: u64) -> Self {
        let start = NaiveDate::from_ymd_opt(2026, 11, 2)
            .and_then(|d| d.and_hms_opt(12, 0, 0))
            .map(|n| n.and_utc())
            .unwrap_or_default();
        CompactParams {
            sessions,
            seed,
            start,
            mix: Mix::Lean,
        }
    }

    /// The hour every call falls in, `[start, start + 1h)`.
    pub fn window(&self) -> (DateTime<Utc>, DateTime<Utc>) {
        (self.start, self.start + Duration::hours(1))
    }
}

/// One call before ids and times.
#[derive(Debug, Clone, Copy)]
struct Call {
    model: &'static str,
    input: u64,
    cached: u64,
    output: u64,
    error: Option<(u16, &'static str)>,
}

impl Call {
    fn ok(model: &'static str, input: u64, output: u64) -> Call {
        Call {
            model,
            input,
            cached: 0,
            output,
            error: None,
        }
    }
}

/// A bijection on 48 bits, so ids look random but never collide.
fn mix48(x: u64) -> u64 {
    const MASK: u64 = (1 << 48) - 1;
    let mut x = x & MASK;
    x = x.wrapping_mul(0x9E37_79B9_7F4B) & MASK;
    x ^= x >> 23;
    x = x.wrapping_mul(0xBF58_476D_1CE5) & MASK;
    x ^= x >> 21;
    x
}

/// A bijection on 64 bits (splitmix64's finaliser).
fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

struct Generator {
    rng: SmallRng,
    shares: &'static [(&'static str, f64); 9],
    models: Vec<SimModel>,
    next_request: u64,
    salt: u64,
}

impl Generator {
    fn range(&mut self, r: RangeInclusive<u64>) -> u64 {
        self.rng.random_range(r)
    }

    /// A conversation on Luna whose prompt grows each turn and reads the
    /// previous turn's prompt from the cache (unless `broken`).
    fn conversation(&mut self, turns: u64, broken: bool, prompt: RangeInclusive<u64>) -> Vec<Call> {
        let mut input = self.range(prompt);
        let mut calls = Vec::with_capacity(turns as usize);
        for turn in 0..turns {
            if turn > 0 {
                input += self.range(300..=1_500);
            }
            let cached = match calls.last() {
                Some(prev) if !broken => {
                    let p: &Call = prev;
                    p.input.min(input) / 128 * 128
                }
                _ => 0,
            };
            let output = self.range(80..=600);
            calls.push(Call {
                cached,
                ..Call::ok(LUNA, input, output)
            });
        }
        calls
    }

    fn short(&mut self, model: &'static str, n: u64, input: RangeInclusive<u64>) -> Vec<Call> {
        (0..n)
            .map(|_| {
                let i = self.range(input.clone());
                let o = self.range(15..=150);
                Call::ok(model, i, o)
            })
            .collect()
    }

    /// A session's feature, calls and truth kind.
    fn draft(&mut self) -> (&'static str, Vec<Call>, Option<&'static str>) {
        let x: f64 = self.rng.random();
        if x < NO_CACHE_SHARE {
            let turns = self.range(3..=5);
            return (
                "support-agent",
                self.conversation(turns, true, 1_500..=4_000),
                Some(NO_CACHE),
            );
        }
        if x < NO_CACHE_SHARE + OVERSIZED_SHARE {
            let n = self.range(3..=4);
            let mut calls = self.short(LUNA, n, 100..=250);
            let k = self.range(2..=n);
            for c in calls.iter_mut().take(k as usize) {
                *c = Call::ok(SOL, self.rng.random_range(60..=200), 20);
            }
            return ("triage", calls, Some(OVERSIZED_MODEL));
        }
        if x < NO_CACHE_SHARE + OVERSIZED_SHARE + RETRY_LOOP_SHARE {
            let n = self.range(8..=15);
            let input = self.range(300..=500);
            let calls = (0..n)
                .map(|i| Call {
                    error: (i + 1 < n).then_some((429, "RateLimitError")),
                    output: if i + 1 < n { 0 } else { 60 },
                    ..Call::ok(LUNA, input, 0)
                })
                .collect();
            return ("checkout", calls, Some(RETRY_LOOP));
        }
        let total: f64 = self.shares.iter().map(|(_, s)| s).sum();
        let mut pick = self.rng.random_range(0.0..total);
        let mut feature = self.shares[0].0;
        for &(f, share) in self.shares {
            if pick < share {
                feature = f;
                break;
            }
            pick -= share;
        }
        let calls = match feature {
            "support-agent" => {
                let turns = self.range(2..=5);
                self.conversation(turns, false, 1_500..=4_000)
            }
            "search" => {
                let n = self.range(1..=2);
                self.short(LUNA, n, 400..=900)
            }
            "checkout" => {
                let n = self.range(2..=4);
                let mut calls = self.short(LUNA, n, 300..=500);
                if self.rng.random_bool(0.03) {
                    let mut failed = calls[0];
                    failed.error = Some((429, "RateLimitError"));
                    failed.output = 0;
                    calls.insert(0, failed);
                }
                calls
            }
            "triage" => {
                let n = self.range(3..=4);
                self.short(LUNA, n, 100..=250)
            }
            "research" => {
                let n = self.range(2..=3);
                let mut calls = self.short(SOL, n, 15_000..=25_000);
                for c in calls.iter_mut().skip(1) {
                    c.cached = c.input * 3 / 4 / 128 * 128;
                }
                calls
            }
            "batch-extract" => {
                let n = self.range(2..=3);
                self.short(NOVA, n, 3_000..=8_000)
            }
            "legal-review" => {
                let n = self.range(2..=3);
                self.short(SONNET, n, 300..=800)
            }
            "long-chat" => {
                let turns = self.range(6..=8);
                self.conversation(turns, false, 1_200..=2_500)
            }
            _ => vec![Call::ok(LUNA, 60, 8)],
        };
        (feature, calls, None)
    }

    fn cost(&self, c: &Call) -> f64 {
        self.models
            .iter()
            .find(|m| m.id == c.model)
            .map_or(0.0, |m| m.cost(c.input, c.cached, c.output))
    }

    fn session(&mut self, n: u64, start: DateTime<Utc>, truth: &mut Truth) -> SimSession {
        let (feature, calls, kind) = self.draft();
        let session_id = format!("{feature}-{:012x}", mix48(n ^ self.salt));
        let labels: BTreeMap<String, String> = [("env", "prod"), ("feature", feature)]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        // Every session starts in the first 50 minutes and its calls are a
        // few seconds apart, so the whole session falls in the hour.
        let mut at = start + Duration::milliseconds(self.rng.random_range(0..3_000_000));
        let mut requests = Vec::with_capacity(calls.len());
        for c in &calls {
            let latency = self.rng.random_range(100..=900);
            let id = mix64(self.next_request ^ self.salt);
            self.next_request += 1;
            requests.push(SimRequest {
                request_id: format!("req_{id:016x}"),
                session_id: session_id.clone(),
                created_at: at,
                model: c.model.to_owned(),
                status: if c.error.is_some() {
                    "error"
                } else {
                    "success"
                }
                .to_owned(),
                http_status: c.error.map_or(200, |(s, _)| s),
                error_type: c.error.map(|(_, t)| t.to_owned()),
                input_tokens: c.input,
                cached_tokens: c.cached,
                cache_write_tokens: 0,
                output_tokens: c.output,
                cost_usd: self.cost(c),
                latency_ms: latency,
                labels: labels.clone(),
            });
            at += Duration::milliseconds(latency as i64 + self.rng.random_range(500..=5_000));
        }
        if let Some(kind) = kind {
            truth.insert(kind, &session_id);
        }
        SimSession {
            session_id,
            labels,
            requests,
            fixed_row: None,
        }
    }
}

/// Generates the dataset; the same parameters give the same data.
pub fn generate(p: &CompactParams) -> Dataset {
    let mut g = Generator {
        rng: SmallRng::seed_from_u64(p.seed),
        shares: p.mix.shares(),
        models: scenario::catalogue(),
        next_request: 0,
        salt: mix64(p.seed),
    };
    let mut truth = Truth::default();
    let sessions: Vec<SimSession> = (0..p.sessions as u64)
        .map(|n| g.session(n, p.start, &mut truth))
        .collect();
    Dataset::new(scenario::catalogue(), sessions, truth)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn sessions_fall_in_the_hour_with_unique_ids_and_their_truth() {
        let p = CompactParams::new(20_000, 3);
        let d = generate(&p);
        let (start, end) = p.window();
        assert_eq!(d.sessions.len(), 20_000);
        let ids: HashSet<&str> = d.sessions.iter().map(|s| s.session_id.as_str()).collect();
        assert_eq!(ids.len(), 20_000);
        let (first, last) = d.time_range().unwrap();
        assert!(first >= start && last < end, "{first} {last}");
        let calls = d.request_count() as f64 / 20_000.0;
        assert!((2.0..3.5).contains(&calls), "{calls} calls per session");
        let n = |k: &str| d.truth.of(k).count();
        assert!((8..=40).contains(&n(NO_CACHE)), "{}", n(NO_CACHE));
        assert!((2..=25).contains(&n(OVERSIZED_MODEL)));
        assert!((2..=25).contains(&n(RETRY_LOOP)));
        for id in d.truth.of(NO_CACHE) {
            let s = d.session(id).unwrap();
            assert!(s.requests.len() >= 3 && s.requests.iter().all(|r| r.cached_tokens == 0));
        }
        assert_eq!(
            generate(&p).sessions[..50],
            d.sessions[..50],
            "generation is deterministic"
        );
        let share = |d: &Dataset, f: &str| {
            d.sessions
                .iter()
                .filter(|s| s.labels["feature"] == f)
                .count() as f64
                / 20_000.0
        };
        assert!(share(&d, "legal-review") < 0.01);
        let scenario = generate(&CompactParams {
            mix: Mix::Scenario,
            ..p
        });
        assert!(share(&scenario, "legal-review") > 0.04);
        assert_eq!(Mix::parse("scenario"), Some(Mix::Scenario));
    }
}

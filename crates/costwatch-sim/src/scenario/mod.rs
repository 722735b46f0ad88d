//! Generated, labelled gateway traffic: several days of sessions from a
//! handful of features with realistic shapes, a few incidents that waste
//! money, and healthy look-alikes that must stay quiet.
//!
//! The same [`ScenarioParams`] (seed included) always yield the same
//! [`Dataset`]. Which sessions carry waste is written to [`Dataset::truth`],
//! never into labels or ids: labels are only `feature` and `env`.
//!
//! Incidents (days are 0-based from [`ScenarioParams::start`]):
//! - `no_cache`: on day 1 a deploy breaks the prompt cache of
//!   `support-agent` for 3-5 hours; on the last day a smaller 2-hour
//!   cluster hits `onboarding`.
//! - `retry_loop`: on day 2, for 2-4 hours, `checkout` sessions loop on
//!   rate limits and timeouts; a few isolated loops are scattered over all
//!   days (in `checkout` and `support-agent`).
//! - `oversized_model`: on day 0 afternoon and day 3 morning, `triage`
//!   sub-agents send some calls to `gpt-6.1-sol`.

use super::dataset::{
    Dataset, NO_CACHE, OVERSIZED_MODEL, RETRY_LOOP, SimModel, SimRequest, SimSession, Truth,
};
use crate::rng::SimRng;
use chrono::{DateTime, Duration, NaiveDate, Timelike, Utc};
use std::collections::{BTreeMap, HashSet};
use std::ops::RangeInclusive;

// ---------------------------------------------------------------------------
// Tunables: volumes and anomaly fractions.
// ---------------------------------------------------------------------------

/// Share (percent) of the base session volume of each feature.
pub const FEATURE_SHARES: [(Feature, f64); 9] = [
    (Feature::SupportAgent, 30.0),
    (Feature::Search, 20.0),
    (Feature::Checkout, 15.0),
    (Feature::Triage, 10.0),
    (Feature::Research, 6.0),
    (Feature::LegalReview, 5.0),
    (Feature::LongChat, 4.0),
    (Feature::BatchExtract, 4.0),
    (Feature::LatencyTest, 3.0),
];
/// Share (percent weight beside [`FEATURE_SHARES`]) of `onboarding` once it exists.
pub const ONBOARDING_SHARE: f64 = 3.0;
/// Relative hourly volume at night; the afternoon peak is about `1 + NIGHT_FLOOR`.
pub const NIGHT_FLOOR: f64 = 0.15;
/// Hourly volumes vary by up to this fraction around the diurnal curve.
pub const VOLUME_JITTER: f64 = 0.10;
/// Volume factor of `search` and `checkout` during the spike hour.
pub const SPIKE_FACTOR: u32 = 6;

/// Share of `support-agent` turns (after the first) that miss the cache.
pub const CACHE_MISS_RATE: f64 = 0.05;
/// Share of `support-agent` sessions that are long (25-45 turns) and healthy.
pub const LONG_SUPPORT_SHARE: f64 = 0.03;
/// Share of healthy `checkout` sessions with one short rate-limit retry.
pub const CHECKOUT_RETRY_SHARE: f64 = 0.05;

/// Share of new `support-agent` sessions (3+ turns) without cache during the deploy.
pub const NO_CACHE_SHARE: f64 = 0.40;
/// Length of the broken deploy, in minutes.
pub const NO_CACHE_MINUTES: RangeInclusive<i64> = 180..=300;
/// Share of new `onboarding` sessions (3+ turns) without cache in the last-day cluster.
pub const ONBOARDING_NO_CACHE_SHARE: f64 = 0.30;
/// Length of the `onboarding` no-cache cluster, in minutes.
pub const ONBOARDING_NO_CACHE_MINUTES: i64 = 120;
/// Share of new `checkout` sessions that loop during the retry incident.
pub const RETRY_LOOP_SHARE: f64 = 0.20;
/// Length of the retry incident, in minutes.
pub const RETRY_LOOP_MINUTES: RangeInclusive<i64> = 120..=240;
/// How many isolated retry loops are scattered over all days.
pub const SCATTERED_LOOPS: RangeInclusive<u32> = 4..=6;
/// Share of `triage` sessions sending calls to the premium model during an incident.
pub const OVERSIZED_SHARE: f64 = 0.25;

// ---------------------------------------------------------------------------
// Catalogue.
// ---------------------------------------------------------------------------

/// The small, cheap default model.
pub const LUNA: &str = "gpt-6-luna";
/// The premium model.
pub const SOL: &str = "gpt-6.1-sol";
/// The other premium model.
pub const SONNET: &str = "claude-sonnet-5.5";
/// A cheap model without prompt cache.
pub const NOVA: &str = "nova-lite";

/// The simulated gateway's model catalogue.
pub fn catalogue() -> Vec<SimModel> {
    let model = |id: &str, input, cached, write, output| SimModel {
        id: id.to_string(),
        input_usd_per_mtok: input,
        cached_input_usd_per_mtok: cached,
        cache_write_usd_per_mtok: write,
        output_usd_per_mtok: output,
        supports_prompt_cache: cached.is_some(),
    };
    vec![
        model(LUNA, 0.10, Some(0.01), Some(0.125), 0.40),
        model(SOL, 2.50, Some(0.25), Some(3.125), 10.0),
        model(SONNET, 3.00, Some(0.30), Some(3.75), 15.0),
        model(NOVA, 0.20, None, None, 0.80),
    ]
}

// ---------------------------------------------------------------------------
// Parameters.
// ---------------------------------------------------------------------------

/// What to generate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioParams {
    /// Random seed; the same seed gives the same data.
    pub seed: u64,
    /// Start of day 0 (midnight UTC is expected by the incident schedule).
    pub start: DateTime<Utc>,
    /// Number of days.
    pub days: u32,
    /// Base sessions per day, before the spike.
    pub sessions_per_day: u32,
}

impl Default for ScenarioParams {
    fn default() -> Self {
        let start = NaiveDate::from_ymd_opt(2026, 11, 2)
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .map(|n| n.and_utc())
            .unwrap_or_default();
        ScenarioParams {
            seed: 7,
            start,
            days: 4,
            sessions_per_day: 2400,
        }
    }
}

/// A product feature: the `feature` label and the session id prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Feature {
    /// Customer support conversations on Luna with a cached system prompt.
    SupportAgent,
    /// One or two short uncached prompts.
    Search,
    /// A few short calls; sometimes a rate-limit retry.
    Checkout,
    /// A Luna sub-agent making short calls.
    Triage,
    /// Big prompts on the premium model (normal for the group).
    Research,
    /// Short prompts always on Claude Sonnet (normal for the group).
    LegalReview,
    /// Long conversations with a warm cache.
    LongChat,
    /// Large prompts on a model without a cache.
    BatchExtract,
    /// Tiny single probes.
    LatencyTest,
    /// A group appearing on day 2, shaped like `support-agent`.
    Onboarding,
}

impl Feature {
    /// The `feature` label value.
    pub fn name(self) -> &'static str {
        match self {
            Feature::SupportAgent => "support-agent",
            Feature::Search => "search",
            Feature::Checkout => "checkout",
            Feature::Triage => "triage",
            Feature::Research => "research",
            Feature::LegalReview => "legal-review",
            Feature::LongChat => "long-chat",
            Feature::BatchExtract => "batch-extract",
            Feature::LatencyTest => "latency-test",
            Feature::Onboarding => "onboarding",
        }
    }
}

/// Generates the scenario's dataset.
pub fn generate(p: &ScenarioParams) -> Dataset {
    let mut g = Generator::new(p);
    for day in 0..i64::from(p.days) {
        for hour in 0..24 {
            g.hour(p.start + Duration::days(day) + Duration::hours(hour));
        }
    }
    g.scattered_loops();
    Dataset::new(catalogue(), g.sessions, g.truth)
}

// ---------------------------------------------------------------------------
// Incident schedule.
// ---------------------------------------------------------------------------

/// A half-open time span.
#[derive(Debug, Clone, Copy)]
struct Span {
    start: DateTime<Utc>,
    end: DateTime<Utc>,
}

impl Span {
    fn contains(&self, t: DateTime<Utc>) -> bool {
        self.start <= t && t < self.end
    }
}

/// When each incident happens (`None` when the scenario is too short).
#[derive(Debug, Clone, Default)]
struct Plan {
    no_cache: Option<Span>,
    onboarding_from: Option<DateTime<Utc>>,
    onboarding_no_cache: Option<Span>,
    retry_loop: Option<Span>,
    oversized: Vec<Span>,
    spike: Option<Span>,
}

fn in_span(span: Option<Span>, t: DateTime<Utc>) -> bool {
    span.is_some_and(|s| s.contains(t))
}

impl Plan {
    fn new(p: &ScenarioParams, rng: &mut SimRng) -> Plan {
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

// ---------------------------------------------------------------------------
// Calls and drafts.
// ---------------------------------------------------------------------------

/// How a call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    RateLimit,
    Timeout,
}

impl Failure {
    fn http(self) -> (u16, &'static str) {
        match self {
            Failure::RateLimit => (429, "RateLimitError"),
            Failure::Timeout => (504, "Timeout"),
        }
    }
}

/// The pause before a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gap {
    /// A user thinking between conversation turns.
    Turn,
    /// A client backing off before resending.
    Retry,
    /// An agent or batch chaining calls.
    Chain,
}

impl Gap {
    fn millis(self) -> RangeInclusive<i64> {
        match self {
            Gap::Turn => 2_000..=30_000,
            Gap::Retry => 1_000..=8_000,
            Gap::Chain => 1_000..=5_000,
        }
    }
}

/// One call before ids, times and costs are assigned.
#[derive(Debug, Clone)]
struct Call {
    model: &'static str,
    input: u64,
    cached: u64,
    write: u64,
    output: u64,
    failure: Option<Failure>,
    gap: Gap,
}

impl Call {
    fn ok(model: &'static str, input: u64, output: u64, gap: Gap) -> Call {
        Call {
            model,
            input,
            cached: 0,
            write: 0,
            output,
            failure: None,
            gap,
        }
    }

    /// The same prompt resent after a failure or as a retry.
    fn resend(&self, failure: Option<Failure>, output: u64) -> Call {
        // A rate-limited call is rejected before the prompt is processed.
        let cached = if failure == Some(Failure::RateLimit) {
            0
        } else {
            self.cached
        };
        Call {
            cached,
            write: 0,
            output,
            failure,
            gap: Gap::Retry,
            ..self.clone()
        }
    }
}

/// A session's calls and, when it carries waste, its truth kind.
#[derive(Debug, Default)]
struct Draft {
    calls: Vec<Call>,
    kind: Option<&'static str>,
}

/// How a conversation uses the prompt cache after its first turn.
#[derive(Debug, Clone, Copy)]
enum CacheMode {
    /// Reads the previous turn's prompt, with occasional misses.
    Previous,
    /// Reads a share of the prompt in this range.
    Share(f64, f64),
    /// Never reads: the prefix changes every call (a broken deploy).
    Broken,
}

/// The shape of a conversation.
#[derive(Debug, Clone)]
struct Conversation {
    model: &'static str,
    turns: u32,
    prompt: RangeInclusive<u64>,
    growth: RangeInclusive<u64>,
    output: RangeInclusive<u64>,
    cache: CacheMode,
}

/// Prompt caches work in blocks of 128 tokens.
fn cache_blocks(tokens: u64) -> u64 {
    tokens / 128 * 128
}

// ---------------------------------------------------------------------------
// The generator.
// ---------------------------------------------------------------------------

struct Generator {
    rng: SimRng,
    plan: Plan,
    params: ScenarioParams,
    models: Vec<SimModel>,
    session_ids: HashSet<String>,
    request_ids: HashSet<String>,
    sessions: Vec<SimSession>,
    truth: Truth,
}

impl Generator {
    fn new(p: &ScenarioParams) -> Generator {
        let mut rng = SimRng::seed_from_u64(p.seed);
        let plan = Plan::new(p, &mut rng);
        Generator {
            rng,
            plan,
            params: p.clone(),
            models: catalogue(),
            session_ids: HashSet::new(),
            request_ids: HashSet::new(),
            sessions: Vec::new(),
            truth: Truth::default(),
        }
    }

    /// Relative volume of the hour starting at `t` (low at night, peak 15:00 UTC).
    fn diurnal(t: DateTime<Utc>) -> f64 {
        let h = f64::from(t.hour()) + 0.5;
        NIGHT_FLOOR + (-(h - 15.0).powi(2) / (2.0 * 4.0 * 4.0)).exp()
    }

    /// Expected base sessions in the hour starting at `t`.
    fn expected(&self, t: DateTime<Utc>) -> f64 {
        let day_total: f64 = (0..24).map(|h| Self::diurnal(t - Duration::hours(h))).sum();
        f64::from(self.params.sessions_per_day) * Self::diurnal(t) / day_total
    }

    /// Generates the sessions starting in the hour from `t`.
    fn hour(&mut self, t: DateTime<Utc>) {
        let expected = self.expected(t);
        let jitter = self
            .rng
            .random_range(1.0 - VOLUME_JITTER..=1.0 + VOLUME_JITTER);
        let n = (expected * jitter).round() as u64;
        for _ in 0..n {
            let at = self.time_in_hour(t);
            let feature = self.pick_feature(at);
            let draft = self.draft(feature, at);
            self.materialize(feature, at, draft);
        }
        if in_span(self.plan.spike, t) {
            self.spike(t, expected);
        }
    }

    /// Extra healthy `search` and `checkout` sessions during the spike hour.
    fn spike(&mut self, t: DateTime<Utc>, expected: f64) {
        let total: f64 = FEATURE_SHARES.iter().map(|(_, s)| s).sum();
        for (feature, share) in FEATURE_SHARES {
            if !matches!(feature, Feature::Search | Feature::Checkout) {
                continue;
            }
            let extra = (expected * share / total * f64::from(SPIKE_FACTOR - 1)).round() as u64;
            for _ in 0..extra {
                let at = self.time_in_hour(t);
                let draft = self.healthy(feature);
                self.materialize(feature, at, draft);
            }
        }
    }

    /// A few isolated retry loops at random times.
    fn scattered_loops(&mut self) {
        let n = self.rng.random_range(SCATTERED_LOOPS);
        let millis = i64::from(self.params.days) * 86_400_000;
        for _ in 0..n {
            let at =
                self.params.start + Duration::milliseconds(self.rng.random_range(0..millis.max(1)));
            let (feature, draft) = if self.rng.random_bool(0.5) {
                (Feature::Checkout, self.checkout_loop())
            } else {
                (Feature::SupportAgent, self.support_loop())
            };
            self.materialize(feature, at, draft);
        }
    }

    fn time_in_hour(&mut self, t: DateTime<Utc>) -> DateTime<Utc> {
        t + Duration::milliseconds(self.rng.random_range(0..3_600_000))
    }

    fn pick_feature(&mut self, at: DateTime<Utc>) -> Feature {
        let onboarding = self.plan.onboarding_from.is_some_and(|from| at >= from);
        let extra = if onboarding { ONBOARDING_SHARE } else { 0.0 };
        let total: f64 = FEATURE_SHARES.iter().map(|(_, s)| s).sum::<f64>() + extra;
        let mut x = self.rng.random_range(0.0..total);
        for (feature, share) in FEATURE_SHARES {
            if x < share {
                return feature;
            }
            x -= share;
        }
        if onboarding {
            Feature::Onboarding
        } else {
            Feature::SupportAgent
        }
    }

    /// A session of `feature` starting at `at`, incidents included.
    fn draft(&mut self, feature: Feature, at: DateTime<Utc>) -> Draft {
        match feature {
            Feature::SupportAgent => self.support(in_span(self.plan.no_cache, at), NO_CACHE_SHARE),
            Feature::Onboarding => {
                let hit = in_span(self.plan.onboarding_no_cache, at);
                self.support(hit, ONBOARDING_NO_CACHE_SHARE)
            }
            Feature::Checkout
                if in_span(self.plan.retry_loop, at) && self.rng.random_bool(RETRY_LOOP_SHARE) =>
            {
                self.checkout_loop()
            }
            Feature::Triage => {
                let incident = self.plan.oversized.iter().any(|s| s.contains(at));
                let oversized = incident && self.rng.random_bool(OVERSIZED_SHARE);
                self.triage(oversized)
            }
            _ => self.healthy(feature),
        }
    }

    /// A session of `feature` outside any incident.
    fn healthy(&mut self, feature: Feature) -> Draft {
        let calls = match feature {
            Feature::SupportAgent | Feature::Onboarding => return self.support(false, 0.0),
            Feature::Triage => return self.triage(false),
            Feature::Search => self.search(),
            Feature::Checkout => self.checkout(),
            Feature::Research => self.research(),
            Feature::LegalReview => self.legal_review(),
            Feature::LongChat => self.long_chat(),
            Feature::BatchExtract => self.batch_extract(),
            Feature::LatencyTest => {
                vec![Call::ok(LUNA, 60, self.rng.random_range(5..=10), Gap::Turn)]
            }
        };
        Draft { calls, kind: None }
    }

    // -- Features ----------------------------------------------------------

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
    fn support(&mut self, incident: bool, share: f64) -> Draft {
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
    fn support_loop(&mut self) -> Draft {
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

    fn search(&mut self) -> Vec<Call> {
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

    fn checkout_call(&mut self) -> Call {
        Call::ok(
            LUNA,
            self.rng.random_range(300..=500),
            self.rng.random_range(20..=120),
            Gap::Chain,
        )
    }

    /// 2-5 short calls; a few sessions retry once or twice after a rate limit.
    fn checkout(&mut self) -> Vec<Call> {
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
    fn checkout_loop(&mut self) -> Draft {
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
    fn triage(&mut self, oversized: bool) -> Draft {
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

    fn research(&mut self) -> Vec<Call> {
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

    fn legal_review(&mut self) -> Vec<Call> {
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

    fn long_chat(&mut self) -> Vec<Call> {
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

    fn batch_extract(&mut self) -> Vec<Call> {
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

    // -- Building blocks -----------------------------------------------------

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

    // -- Materializing -------------------------------------------------------

    fn new_session_id(&mut self, feature: Feature) -> String {
        loop {
            let id = format!(
                "{}-{:012x}",
                feature.name(),
                self.rng.next_u64() & 0xffff_ffff_ffff
            );
            if self.session_ids.insert(id.clone()) {
                return id;
            }
        }
    }

    fn new_request_id(&mut self) -> String {
        loop {
            let id = format!("req_{:016x}", self.rng.next_u64());
            if self.request_ids.insert(id.clone()) {
                return id;
            }
        }
    }

    /// How long a call takes, by model, tokens and failure.
    fn latency(&mut self, c: &Call) -> u64 {
        match c.failure {
            Some(Failure::RateLimit) => self.rng.random_range(20..=200),
            Some(Failure::Timeout) => self.rng.random_range(15_000..=30_000),
            None => {
                let (base, per_output) = match c.model {
                    SOL => (400, 15),
                    SONNET => (500, 20),
                    NOVA => (250, 8),
                    _ => (200, 6),
                };
                base + per_output * c.output
                    + (c.input - c.cached) / 100
                    + self.rng.random_range(0u64..=300)
            }
        }
    }

    fn cost(&self, c: &Call) -> f64 {
        self.models
            .iter()
            .find(|m| m.id == c.model)
            .map_or(0.0, |m| m.cost(c.input, c.cached, c.output))
    }

    /// Assigns ids, times, latencies and costs, and records the truth.
    fn materialize(&mut self, feature: Feature, start: DateTime<Utc>, draft: Draft) {
        let session_id = self.new_session_id(feature);
        let labels: BTreeMap<String, String> = [("feature", feature.name()), ("env", "prod")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut at = start;
        let mut requests = Vec::with_capacity(draft.calls.len());
        for c in &draft.calls {
            if let Some(prev) = requests.last().map(|r: &SimRequest| r.latency_ms) {
                let gap = self.rng.random_range(c.gap.millis());
                at += Duration::milliseconds(prev as i64 + gap);
            }
            let (http_status, error_type) = c.failure.map_or((200, None), |f| {
                let (status, kind) = f.http();
                (status, Some(kind.to_string()))
            });
            requests.push(SimRequest {
                request_id: self.new_request_id(),
                session_id: session_id.clone(),
                created_at: at,
                model: c.model.to_string(),
                status: if c.failure.is_some() {
                    "error"
                } else {
                    "success"
                }
                .to_string(),
                http_status,
                error_type,
                input_tokens: c.input,
                cached_tokens: c.cached,
                cache_write_tokens: c.write,
                output_tokens: c.output,
                cost_usd: self.cost(c),
                latency_ms: self.latency(c),
                labels: labels.clone(),
            });
        }
        if let Some(kind) = draft.kind {
            self.truth.insert(kind, &session_id);
        }
        self.sessions.push(SimSession {
            session_id,
            labels,
            requests,
            fixed_row: None,
        });
    }
}

/// A healthy conversation of 3+ turns reads the cache at least once.
fn ensure_one_hit(calls: &mut [Call]) {
    if calls.len() < 3 || calls[1..].iter().any(|c| c.cached > 0) {
        return;
    }
    let previous = calls[0].input;
    let second = &mut calls[1];
    second.cached = cache_blocks(previous.min(second.input));
    second.write = second.input - second.cached;
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use crate::dataset::KINDS;
    use std::sync::OnceLock;

    fn default_dataset() -> &'static Dataset {
        static D: OnceLock<Dataset> = OnceLock::new();
        D.get_or_init(|| generate(&ScenarioParams::default()))
    }

    fn small(seed: u64) -> Dataset {
        generate(&ScenarioParams {
            seed,
            days: 4,
            sessions_per_day: 300,
            ..ScenarioParams::default()
        })
    }

    fn first_100_json(d: &Dataset) -> String {
        serde_json::to_string(&d.sessions[..100]).unwrap()
    }

    #[test]
    fn generation_is_deterministic() {
        assert_eq!(first_100_json(&small(11)), first_100_json(&small(11)));
        assert_ne!(first_100_json(&small(11)), first_100_json(&small(12)));
        let d = default_dataset();
        assert_eq!(
            first_100_json(d),
            first_100_json(&generate(&ScenarioParams::default()))
        );
    }

    #[test]
    fn truth_covers_every_kind_and_every_id_exists() {
        let d = default_dataset();
        for kind in KINDS {
            let ids: Vec<_> = d.truth.of(kind).collect();
            assert!(!ids.is_empty(), "no {kind} sessions");
            for id in ids {
                assert!(d.session(id).is_some(), "{kind}: {id} missing");
            }
        }
    }

    #[test]
    fn labels_do_not_leak_the_truth() {
        let d = default_dataset();
        let words = [
            "cache",
            "oversized",
            "retry",
            "loop",
            "incident",
            "truth",
            "anomal",
            "waste",
            "case",
        ];
        for s in &d.sessions {
            let keys: Vec<_> = s.labels.keys().map(String::as_str).collect();
            assert_eq!(keys, ["env", "feature"]);
            for text in s.labels.values().chain([&s.session_id]) {
                for w in words {
                    assert!(!text.contains(w), "{text} contains {w}");
                }
            }
            assert!(s.requests.iter().all(|r| r.labels == s.labels));
        }
    }

    #[test]
    fn costs_follow_the_catalogue_prices() {
        let d = default_dataset();
        let prices: BTreeMap<&str, (f64, f64, f64)> = [
            (LUNA, (0.10, 0.01, 0.40)),
            (SOL, (2.50, 0.25, 10.0)),
            (SONNET, (3.00, 0.30, 15.0)),
            (NOVA, (0.20, 0.20, 0.80)),
        ]
        .into_iter()
        .collect();
        for s in d.sessions.iter().step_by(7) {
            let mut sum = 0.0;
            for r in &s.requests {
                let (i, c, o) = prices[r.model.as_str()];
                let want = ((r.input_tokens - r.cached_tokens) as f64 * i
                    + r.cached_tokens as f64 * c
                    + r.output_tokens as f64 * o)
                    / 1e6;
                assert!(
                    (r.cost_usd - want).abs() < 1e-8,
                    "{}: {} != {want}",
                    r.request_id,
                    r.cost_usd
                );
                assert!(
                    r.cached_tokens <= r.input_tokens && r.cache_write_tokens <= r.input_tokens
                );
                sum += r.cost_usd;
            }
            let row = s.row(None).unwrap();
            assert!((row["cost_usd"].as_f64().unwrap() - sum).abs() < 1e-7);
        }
    }

    #[test]
    fn requests_are_consistent() {
        let d = default_dataset();
        let mut ids = HashSet::new();
        for s in &d.sessions {
            assert!(
                s.requests
                    .windows(2)
                    .all(|w| w[0].created_at < w[1].created_at)
            );
            for r in &s.requests {
                assert!(ids.insert(r.request_id.clone()));
                assert_eq!(r.request_id.len(), 20);
                match (r.status.as_str(), r.http_status, r.error_type.as_deref()) {
                    ("success", 200, None) => {}
                    ("error", 429, Some("RateLimitError")) | ("error", 504, Some("Timeout")) => {
                        assert_eq!(r.output_tokens, 0)
                    }
                    other => panic!("inconsistent status {other:?}"),
                }
                if r.model == NOVA {
                    assert_eq!(r.cached_tokens, 0);
                }
            }
        }
    }

    fn feature(s: &SimSession) -> &str {
        s.labels["feature"].as_str()
    }

    #[test]
    fn truth_sessions_carry_their_waste() {
        let d = default_dataset();
        for id in d.truth.of(NO_CACHE) {
            let s = d.session(id).unwrap();
            assert!(s.requests.len() >= 3);
            assert!(
                s.requests
                    .iter()
                    .all(|r| r.cached_tokens == 0 && r.input_tokens >= 1_500)
            );
        }
        for id in d.truth.of(OVERSIZED_MODEL) {
            let s = d.session(id).unwrap();
            let sol: f64 = s
                .requests
                .iter()
                .filter(|r| r.model == SOL)
                .map(|r| r.cost_usd)
                .sum();
            let all: f64 = s.requests.iter().map(|r| r.cost_usd).sum();
            assert!(sol / all > 0.5, "{id}: sol share {}", sol / all);
            assert_eq!(feature(s), "triage");
        }
        for id in d.truth.of(RETRY_LOOP) {
            let s = d.session(id).unwrap();
            let errors = s.requests.iter().filter(|r| r.is_error()).count();
            assert!(s.requests.len() >= 8, "{id}: {} calls", s.requests.len());
            assert!(errors >= 5, "{id}: {errors} errors");
        }
    }

    #[test]
    fn look_alikes_stay_out_of_the_truth() {
        let d = default_dataset();
        let in_truth = |id: &str| !d.truth.kinds_of(id).is_empty();
        let mut long_support = 0;
        let mut healthy_retries = 0;
        for s in &d.sessions {
            let n = s.requests.len();
            match feature(s) {
                "triage" if !in_truth(&s.session_id) => {
                    assert!(s.requests.iter().all(|r| r.model == LUNA))
                }
                "checkout" if !in_truth(&s.session_id) => {
                    assert!(n <= 7);
                    healthy_retries += usize::from(s.requests.iter().any(SimRequest::is_error));
                }
                "support-agent" | "onboarding" if !in_truth(&s.session_id) => {
                    assert!(s.requests.iter().all(|r| !r.is_error()));
                    long_support += usize::from(n >= 25);
                    if n >= 3 {
                        assert!(s.requests.iter().any(|r| r.cached_tokens > 0));
                    }
                }
                "research" | "legal-review" | "long-chat" | "batch-extract" => {
                    assert!(!in_truth(&s.session_id))
                }
                _ => {}
            }
        }
        assert!(long_support > 50, "{long_support} long support sessions");
        assert!(
            healthy_retries > 30,
            "{healthy_retries} healthy checkout retries"
        );
    }

    #[test]
    fn default_volumes_are_as_designed() {
        let d = default_dataset();
        let count = |k: &str| d.truth.of(k).count();
        let by_feature = |f: &str| d.sessions.iter().filter(|s| feature(s) == f).count();
        let n = d.sessions.len();
        eprintln!(
            "sessions {n}, requests {}, no_cache {}, oversized_model {}, retry_loop {}, onboarding {}",
            d.request_count(),
            count(NO_CACHE),
            count(OVERSIZED_MODEL),
            count(RETRY_LOOP),
            by_feature("onboarding"),
        );
        assert!((9_000..=11_500).contains(&n), "{n} sessions");
        assert!((30..=150).contains(&count(NO_CACHE)));
        assert!((8..=40).contains(&count(OVERSIZED_MODEL)));
        assert!((8..=40).contains(&count(RETRY_LOOP)));
        assert!(by_feature("onboarding") > 50);
        let (first, last) = d.time_range().unwrap();
        assert!(first >= ScenarioParams::default().start);
        assert!(last - first < Duration::days(4) + Duration::hours(2));
        // Onboarding only exists from noon of day 2.
        let noon = ScenarioParams::default().start + Duration::hours(60);
        assert!(
            d.sessions
                .iter()
                .filter(|s| feature(s) == "onboarding")
                .all(|s| s.first_request_at().unwrap() >= noon)
        );
    }

    #[test]
    fn night_is_quieter_than_afternoon() {
        let d = default_dataset();
        let start = ScenarioParams::default().start;
        let count = |h: i64| {
            let (s, e) = (start + Duration::hours(h), start + Duration::hours(h + 1));
            d.sessions
                .iter()
                .filter(|x| x.first_request_at().is_some_and(|f| s <= f && f < e))
                .count()
        };
        assert!(
            count(3) * 3 < count(15),
            "03h {} vs 15h {}",
            count(3),
            count(15)
        );
    }
}

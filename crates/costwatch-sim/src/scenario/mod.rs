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
//!   sub-agents send some calls to `gpt-6.1-sol`. Two model moves nobody
//!   declared, waste however many of the group's sessions make them, for
//!   as long as they last: from the evening of day 0, for 46-50 hours,
//!   every `triage` session sends its sub-step (two to four of its tiny
//!   calls) to `gpt-6.1-sol`; on the morning of day 0, for 3-5 hours,
//!   40-60% of healthy `checkout` sessions send theirs (one call where a
//!   session has only two) to `claude-sonnet-5.5`. Either way the rest of
//!   each session stays on Luna. The moves draw from a stream of their
//!   own, so every other session is the same as without them.
//!
//! - `quotes`, `release-notes` and `bulk-tagging` (`evidence`): a model
//!   whose cache minimum the shipped table states wrongly, broken for 90
//!   minutes on day 2, and two groups of one session each on day 1: a
//!   conversation that never caches (waste) and a batch of unrelated
//!   prompts (not waste). Drawn after every other session.
//!
//! Layout: this file holds the tunables, the parameters, the features and
//! [`generate`]; `models` the catalogue, `plan` the incident schedule,
//! `calls` the calls before they become rows, `generator` the hour-by-hour
//! generation and the rows it writes (the gateway's request rows,
//! gateway-api.md section 1), `features` the shape of each feature's
//! sessions. [`adversarial`] is a second, independent family built to
//! break the detectors, sharing only [`Dataset`] and [`ScenarioParams`].

pub mod adversarial;
mod calls;
mod evidence;
mod features;
mod generator;
mod models;
mod plan;
#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;

pub use self::models::{GEMINI, LUNA, NOVA, SOL, SONNET, catalogue};

use self::generator::Generator;
use super::dataset::Dataset;
use chrono::{DateTime, Duration, NaiveDate, Utc};
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
/// Length of the `triage` model move (every session), in minutes: about two days.
pub const TRIAGE_MOVE_MINUTES: RangeInclusive<i64> = 2_760..=3_000;
/// Length of the `checkout` model move, in minutes.
pub const CHECKOUT_MOVE_MINUTES: RangeInclusive<i64> = 180..=300;
/// Share of `checkout` sessions in its model move (drawn once per run).
pub const CHECKOUT_MOVE_SHARE: RangeInclusive<f64> = 0.40..=0.60;
/// Calls of a session's sub-step sent to the premium model in a model move
/// (fewer where the session would have none left on its small model).
pub const MOVED_CALLS: RangeInclusive<usize> = 2..=4;
/// `quotes` sessions a day (on Gemini), spread over the day like the rest.
pub const QUOTES_PER_DAY: f64 = 220.0;
/// Share of new `quotes` sessions whose prefix the release breaks.
pub const QUOTES_BROKEN_SHARE: f64 = 0.5;
/// Length of the `quotes` release that breaks the prefix, in minutes.
pub const QUOTES_BROKEN_MINUTES: i64 = 90;
/// Mixed into the seed of the model moves' own stream of draws.
const MOVE_SALT: u64 = 0x6d6f_7665_d1ff_5eed;

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
    /// Short conversations on Gemini (cache minimum 1,024, 2,048 by the table).
    Quotes,
    /// A new service's only session: a conversation never cached.
    ReleaseNotes,
    /// A new service's only session: unrelated prompts.
    BulkTagging,
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
            Feature::Quotes => "quotes",
            Feature::ReleaseNotes => "release-notes",
            Feature::BulkTagging => "bulk-tagging",
        }
    }
}

/// Generates the scenario's dataset.
pub fn generate(p: &ScenarioParams) -> Dataset {
    run(Generator::new(p), p)
}

/// Runs `g`, its plan drawn, over the days of `p`.
fn run(mut g: Generator, p: &ScenarioParams) -> Dataset {
    for day in 0..i64::from(p.days) {
        for hour in 0..24 {
            g.hour(p.start + Duration::days(day) + Duration::hours(hour));
        }
    }
    g.scattered_loops();
    g.evidence_situations();
    Dataset::new(catalogue(), g.sessions, g.truth)
}

//! The adversarial family: a second, independent family of labelled
//! traffic, built to break the detectors rather than to confirm them. It
//! shares the [`Dataset`] type, the gateway's wire format (gateway-api.md
//! section 1) and [`ScenarioParams`] with the first family, and nothing
//! else: its own features, catalogue, schedule and seeded generator, so
//! the first family's draws and figures do not move.
//!
//! **The truth is the definition of waste**, applied to each session's
//! request rows and to what the rows do not show (which prompts share a
//! prefix by design, which call resends which, which model the group's
//! design meant for a call): `definition` states the three rules. It is
//! what a careful person reading the request rows would call waste, not
//! what a detector can see; the situations below say what each session was
//! made to be, and the truth follows from the rows whatever that was.
//!
//! Features and their situations (four days from [`ScenarioParams::start`];
//! days are 0-based):
//! - `helpdesk` (Luna, cache minimum 1,024): cached conversations; ones
//!   that start below the minimum and cross it (caching starts partway);
//!   ones whose prompts stay below it or cross it only on the last call
//!   (775, 1,018, 1,282: average above the minimum, nothing cacheable: not
//!   waste); ones answered by mail, every pause longer than the cache lives
//!   (not waste; they cross windows). Day 1: a deploy breaks the prefix of
//!   35% of sessions for 2.5-4.5 hours (waste where at least two calls
//!   could have read).
//! - `claude-desk` (Haiku, minimum 2,048): a third of the sessions stay
//!   between 1,100 and 1,900 tokens (not waste); the last day, a template
//!   change breaks the prefix of 40% for two hours.
//! - `doc-review` (Opus, minimum 4,096; a premium model on big prompts by
//!   design): sessions below 4,096 (not waste), pauses of up to 12 minutes.
//! - `faq`: tiny Luna sessions (about $0.0001) of two to four calls
//!   straddling 1,024 tokens; a client version that breaks the prefix in
//!   2.5% of them, all days (waste where at least two calls could have
//!   read: a two-call session whose second call missed is the providers'
//!   best-effort caching, not waste); a marketing mail multiplies the
//!   traffic eight times for an hour on day 2.
//! - `agent` (Luna): tool loops with heavy-tailed call counts (log-normal,
//!   median 7, up to 400); a quarter cut their context to a fixed budget,
//!   so successive prompts have the same size but are new steps (not
//!   waste); validation loops (one step resent 8-13 times, each successful,
//!   seconds apart; waste) scattered over all days and for 20% of sessions
//!   in two hours of day 2; a few two-call cycles (waste); a few sessions
//!   stuck on a blocked tool call, the model asking for it 8 to 40 times,
//!   each successful resend carrying its last answer and the same error, so
//!   the prompt grows by the same 40-210 tokens on every call (waste; a
//!   resend that appends what it got is still a resend).
//! - `checkout` (Luna): short chains, 5% with one or two retries (not
//!   waste); day 2, 15% loop 6-30 times on failures (waste); day 3, a 45-90
//!   minute outage: 80% retry a call three times with backoff and give up
//!   (four failures in a row; a bounded retry, not waste). Day 0, for
//!   3-5 hours, 40-60% of the sessions send two to four of their calls
//!   that succeed the first time (one where a session has only two) to
//!   Sol, the rest staying on Luna (a model move nobody declared: waste).
//! - `batch` (Luna, bursts of 40-120 sessions every six hours): fan-outs of
//!   a heavy-tailed number of independent items whose shared template is
//!   below the minimum (not waste), some with a retry or two; the day-1
//!   noon burst meets a rate-limit storm and 30% of its sessions resend an
//!   item 6-20 times (waste).
//! - `triage` (Luna sub-agents): day 0 (Sonnet) and day 3 (Sol), 25% send
//!   two to four tiny calls to the premium model (waste); 5% escalate one
//!   big call to Sol on purpose; 3% fail over to Haiku after a rate limit
//!   (another small model: not waste). Day 1, for 4-8 hours, every session
//!   sends its sub-step, two to four of its tiny calls (fewer where a
//!   session has too few to keep one on its small model), to Opus, its
//!   other calls staying as they were: a default nobody declared, so waste
//!   however many of the group's sessions do it, for as long as it lasts.
//! - `router`: mixed models in one session: a Luna conversation, a Sol
//!   planning call on a big prompt, classification on Luna, extraction on
//!   Nova (no cache). Day 2, 30% send classification to Sol (tiny premium
//!   calls beside a big one: waste); day 3, 40% lose the conversation's
//!   prefix (waste where at least two calls could have read).
//! - `fieldops`: served without a per-model breakdown; short Luna steps
//!   and, in half the sessions, a Sol planning call; day 1, 30% send two to
//!   four tiny steps to Sol (waste).
//! - `summarize`: short prompts on Luna until day 2, then on Sonnet on
//!   purpose (the group changes model mid-run; its new design, not waste).
//! - `contract-qa`: a thin group appearing on day 1 (about 18 sessions a
//!   day) whose design is Sonnet on short questions and long documents (not
//!   waste).
//! - `estimates` (Gemini, minimum 1,024, which costwatch's shipped table
//!   states as 2,048): conversations of two to six calls from 1,040
//!   tokens, 12% staying below the minimum (not waste); day 1, a release
//!   breaks the prefix of 45% for one to two hours (waste where at least
//!   two calls could have read).
//! - `changelog` and `tagger`: two new services whose group is their only
//!   session, on day 2: a conversation of 6 to 12 calls on Luna that never
//!   reads the cache (waste) and a batch of unrelated prompts sharing
//!   nothing (not waste).
//!
//! `estimates`, `changelog` and `tagger` are drawn after every other
//! session, so the draws before them stay as they were. The model moves of
//! `triage` and `checkout` draw from a stream of their
//! own, so every other session is the same as without them.
//!
//! Layout: this file holds the tunables, the features and [`generate`];
//! `catalogue` the models and their cache facts, `definition` the truth,
//! `draft` the sessions before rows and their notes, `schedule` the
//! incidents, `shapes` each feature's sessions, `generator` the hours, and
//! `rows` the request rows.

mod catalogue;
mod definition;
mod draft;
mod generator;
mod rows;
mod schedule;
mod shapes;
#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;

pub use self::catalogue::{
    CACHE_TTL_MS, HAIKU, OPUS, TINY_INPUT, TINY_OUTPUT, catalogue, is_premium, min_prefix,
};
pub use self::definition::{
    LOOP_MAX_GAP_MS, LOOP_MIN_REPEATS, NO_CACHE_MIN_MISSES, is_no_cache, is_oversized,
    is_retry_loop, kinds, longest_resend_run, readable_tokens,
};
pub use self::draft::{CallNote, Notes, SessionNotes, Situation};

use self::generator::Generator;
use super::ScenarioParams;
use crate::dataset::Dataset;
use chrono::Duration;
use std::ops::RangeInclusive;

/// Mixed into the seed so a seed's draws differ from the first family's.
const SEED_SALT: u64 = 0xad5e_7a11_f00d_cafe;

/// Share (percent) of the regular session volume of each feature; `batch`
/// and `contract-qa` come on their own schedule.
pub const FEATURE_SHARES: [(Feature, f64); 10] = [
    (Feature::Helpdesk, 22.0),
    (Feature::Agent, 14.0),
    (Feature::Triage, 12.0),
    (Feature::Router, 10.0),
    (Feature::Faq, 9.0),
    (Feature::Checkout, 9.0),
    (Feature::ClaudeDesk, 7.0),
    (Feature::Summarize, 6.0),
    (Feature::FieldOps, 5.0),
    (Feature::DocReview, 4.0),
];
/// Relative hourly volume at night; the afternoon peak is about `1 + NIGHT_FLOOR`.
pub const NIGHT_FLOOR: f64 = 0.15;
/// Sessions of one `batch` burst (every six hours).
pub const BATCH_BURST_SESSIONS: RangeInclusive<u32> = 40..=120;
/// Sessions a day of the thin `contract-qa` group once it exists.
pub const CONTRACT_QA_PER_DAY: f64 = 18.0;
/// Volume factor of `faq` during its spike hour.
pub const FAQ_SPIKE_FACTOR: u32 = 8;
/// Share of `agent` sessions that loop during the validation incident.
pub const AGENT_LOOP_SHARE: f64 = 0.20;
/// Isolated `agent` validation loops over all days.
pub const SCATTERED_VALIDATION: RangeInclusive<u32> = 6..=9;
/// Isolated `agent` two-call cycles over all days.
pub const SCATTERED_CYCLES: RangeInclusive<u32> = 3..=5;
/// Isolated `agent` sessions stuck on a blocked tool call over all days.
pub const SCATTERED_BLOCKED: RangeInclusive<u32> = 4..=7;
/// Length of the `triage` model move (every session), in minutes.
pub const TRIAGE_MOVE_MINUTES: RangeInclusive<i64> = 240..=480;
/// Length of the `checkout` model move, in minutes.
pub const CHECKOUT_MOVE_MINUTES: RangeInclusive<i64> = 180..=300;
/// Share of `checkout` sessions in its model move (drawn once per run).
pub const CHECKOUT_MOVE_SHARE: RangeInclusive<f64> = 0.40..=0.60;
/// Calls of a session's sub-step sent to the premium model in a model move
/// (fewer where the session would have none left on its small model).
pub const MOVED_CALLS: RangeInclusive<usize> = 2..=4;
/// `estimates` sessions a day, spread over the day like the rest.
pub const ESTIMATES_PER_DAY: f64 = 160.0;
/// Length of the `estimates` release that breaks the prefix, in minutes.
pub const ESTIMATES_BROKEN_MINUTES: RangeInclusive<i64> = 60..=120;
/// Mixed into the seed of the model moves' own stream of draws.
const MOVE_SALT: u64 = 0x6d6f_7665_d1ff_5eed;

/// A product feature of the family: the `feature` label and the session id
/// prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Feature {
    /// Support conversations on Luna.
    Helpdesk,
    /// Support conversations on Haiku (cache minimum 2,048).
    ClaudeDesk,
    /// Document review on Opus (cache minimum 4,096).
    DocReview,
    /// Tiny Luna sessions around the cache minimum.
    Faq,
    /// Tool loops with heavy-tailed call counts.
    Agent,
    /// Short chains with retries.
    Checkout,
    /// Bursty fan-outs of independent items.
    Batch,
    /// Sub-agents on Luna.
    Triage,
    /// Three models in one session.
    Router,
    /// Sessions served without a per-model breakdown.
    FieldOps,
    /// Short prompts; the group moves to Sonnet on day 2.
    Summarize,
    /// A thin new group on Sonnet.
    ContractQa,
    /// Short conversations on Gemini.
    Estimates,
    /// A new service's only session: a conversation.
    Changelog,
    /// A new service's only session: unrelated prompts.
    Tagger,
}

impl Feature {
    /// The `feature` label value.
    pub fn name(self) -> &'static str {
        match self {
            Feature::Helpdesk => "helpdesk",
            Feature::ClaudeDesk => "claude-desk",
            Feature::DocReview => "doc-review",
            Feature::Faq => "faq",
            Feature::Agent => "agent",
            Feature::Checkout => "checkout",
            Feature::Batch => "batch",
            Feature::Triage => "triage",
            Feature::Router => "router",
            Feature::FieldOps => "fieldops",
            Feature::Summarize => "summarize",
            Feature::ContractQa => "contract-qa",
            Feature::Estimates => "estimates",
            Feature::Changelog => "changelog",
            Feature::Tagger => "tagger",
        }
    }

    /// Whether the gateway serves this feature's session rows with a
    /// per-model breakdown.
    pub fn has_breakdown(self) -> bool {
        self != Feature::FieldOps
    }
}

/// Generates the family's dataset.
pub fn generate(p: &ScenarioParams) -> Dataset {
    generate_with_notes(p).0
}

/// Generates the family's dataset and the notes behind its truth: each
/// session's situation and what its rows do not show.
pub fn generate_with_notes(p: &ScenarioParams) -> (Dataset, Notes) {
    run(Generator::new(p, SEED_SALT), p)
}

/// Runs `g`, its schedule drawn, over the days of `p`.
fn run(mut g: Generator, p: &ScenarioParams) -> (Dataset, Notes) {
    for day in 0..i64::from(p.days) {
        for hour in 0..24 {
            g.hour(p.start + Duration::days(day) + Duration::hours(hour));
        }
    }
    g.scattered_loops();
    g.blocked_tools();
    g.newcomers();
    let w = g.writer.finish();
    let dataset = Dataset::new(catalogue(), w.sessions, w.truth).without_breakdown(w.summary_only);
    (dataset, w.notes)
}

//! The settings of a `retry_loop` rule.

use super::{Rule, RuleSettings, Rules};
use crate::settings::Settings;
use crate::settings::units::seconds;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A `retry_loop` rule: sessions that call far more often than their
/// peers, confirmed by repeated near-identical requests or an error burst
/// (`detect::retry_loop`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
#[schemars(rename = "RetryLoopRule")]
#[schemars(transform = crate::settings::in_declared_order::<RetryLoop>)]
pub struct RetryLoop {
    /// Fewest calls for a session to be considered at all.
    #[schemars(range(min = 2))]
    pub min_requests: u64,
    /// Calls must be at least this many times the peers' median.
    #[schemars(range(min = 1.0))]
    pub min_ratio_to_median: f64,
    /// Robust z-score (median and MAD of log call counts) needed; above 0.
    #[schemars(extend("exclusiveMinimum" = 0.0))]
    pub min_robust_z: f64,
    /// Fewest peers for the statistical test; below it
    /// `cold_start_min_requests` applies.
    #[schemars(range(min = 1))]
    pub min_peers: usize,
    /// Calls needed when the group has too little history.
    pub cold_start_min_requests: u64,
    /// Consecutive near-identical calls that confirm a loop.
    #[schemars(range(min = 2))]
    pub min_identical_run: u64,
    /// Consecutive calls of exactly the same prompt size that confirm a
    /// suspect's loop (a session no other test nominated).
    #[schemars(range(min = 2))]
    pub suspect_min_identical_run: u64,
    /// A prompt the same size as the previous one, or longer by at most this
    /// many tokens, counts as near-identical...
    pub input_tolerance_tokens: u64,
    /// ...or longer by at most this share of the previous prompt.
    #[schemars(range(min = 0.0, max = 1.0))]
    pub input_tolerance_ratio: f64,
    /// Calls whose prompts each grow by the same number of tokens and
    /// whose answers are the same size (both within
    /// `growth_tolerance_tokens`, exactly for a suspect) are resends too:
    /// each carries the last answer and the error it got, as when a tool
    /// call is refused and the model asks for it again.
    pub steady_growth: bool,
    /// How far apart two growths, or two answers, may be in tokens and
    /// still count as the same for `steady_growth`.
    pub growth_tolerance_tokens: u64,
    /// Least suspicion (calls above the group's median in robust units, plus
    /// up to 1 for a loop's pace, plus the share of failed calls) for a
    /// suspect to be read at all.
    pub suspect_min_suspicion: f64,
    /// Longest average pause, in seconds between the starts of a session's
    /// calls (its span over its calls less one), for it to be a suspect at
    /// all: a loop resends seconds apart. 0 reads suspects at any pace.
    #[serde(rename = "suspect_max_mean_gap_seconds", with = "seconds")]
    #[schemars(with = "u64")]
    pub suspect_max_mean_gap: Duration,
    /// Most suspects of this rule (sessions of at least
    /// `suspect_min_identical_run` calls that the outlier, error and
    /// cold-start tests did not nominate, with a suspicion of at least
    /// `suspect_min_suspicion`) whose request rows are read per window, the
    /// most suspicious first; the rest are skipped and counted.
    #[schemars(range(max = 1_000_000))]
    pub drilldown_budget: usize,
    /// Longest pause, in seconds from one call's start to the next, inside a
    /// run of resent calls.
    #[serde(rename = "max_run_gap_seconds", with = "seconds")]
    #[schemars(with = "u64", range(min = 1))]
    pub max_run_gap: Duration,
    /// Failed calls in a row that confirm a loop; also the failed calls that
    /// make a session a candidate whatever its size.
    pub min_error_burst: u64,
}

impl Default for RetryLoop {
    fn default() -> Self {
        RetryLoop {
            min_requests: 6,
            min_ratio_to_median: 2.5,
            min_robust_z: 3.0,
            min_peers: 20,
            cold_start_min_requests: 8,
            min_identical_run: 6,
            suspect_min_identical_run: 7,
            input_tolerance_tokens: 32,
            input_tolerance_ratio: 0.0,
            steady_growth: true,
            growth_tolerance_tokens: 4,
            suspect_min_suspicion: 0.5,
            suspect_max_mean_gap: Duration::from_secs(10),
            drilldown_budget: 100,
            max_run_gap: Duration::from_secs(60),
            min_error_burst: 5,
        }
    }
}

impl Settings for RetryLoop {}

impl RuleSettings for RetryLoop {
    const KIND: &'static str = crate::domain::Kind::RetryLoop.as_str();

    fn list(rules: &mut Rules) -> &mut Vec<Rule<RetryLoop>> {
        &mut rules.retry_loop
    }
}

//! The raw rule files: one struct per rule kind, every key's default
//! written once here.

use crate::domain::Severity;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One rule file. Every kind is optional; each holds a list of rules.
#[derive(Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "costwatch rule file")]
pub(crate) struct RawRuleFile {
    /// Multi-request conversations on a cache-capable model that never hit
    /// the prompt cache while their peers do.
    #[serde(default)]
    pub no_cache: Vec<RawNoCacheRule>,
    /// A premium model used for tiny calls where the group does not normally
    /// do so.
    #[serde(default)]
    pub oversized_model: Vec<RawOversizedModelRule>,
    /// Sessions that call far more often than their peers, confirmed by
    /// repeated near-identical requests or an error burst.
    #[serde(default)]
    pub retry_loop: Vec<RawRetryLoopRule>,
}

/// A `no_cache` rule.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "NoCacheRule")]
pub(crate) struct RawNoCacheRule {
    /// Unique name among the `no_cache` rules; appears in findings.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Severity of the rule's findings.
    #[serde(default = "default_severity")]
    pub severity: Severity,
    /// Exact-match label selector; `{}` covers every session. The most
    /// specific matching rule decides.
    #[serde(default, rename = "match")]
    pub selector: BTreeMap<String, String>,
    /// A disabled rule silences the sessions it covers.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Fewest calls in the session (a single call can never hit the cache).
    #[serde(default = "no_cache_min_requests")]
    #[schemars(range(min = 2))]
    pub min_requests: u64,
    /// Smallest average prompt per call, in tokens, below which a session is
    /// not looked at. 0 (the default) leaves it to each call's cacheability:
    /// a session whose prompts grow past the minimum can average below it
    /// and still have calls that could read the cache.
    #[serde(default = "no_cache_min_avg_input_tokens")]
    pub min_avg_input_tokens: u64,
    /// Smallest prompt prefix, in tokens, that a model caches, for models
    /// whose minimum neither `model_min_cacheable_tokens` nor the gateway's
    /// catalogue gives.
    #[serde(default = "no_cache_min_cacheable_tokens")]
    #[schemars(range(min = 1))]
    pub min_cacheable_tokens: u64,
    /// Per-model smallest cacheable prefix, in tokens (model id to tokens);
    /// overrides the gateway's catalogue and `min_cacheable_tokens`.
    #[serde(default)]
    pub model_min_cacheable_tokens: BTreeMap<String, u64>,
    /// How long a cached prefix lives after the call that wrote or last read
    /// it, in seconds, for models `model_cache_lifetime_seconds` does not
    /// name: a call can read the cache only within it of an earlier
    /// cacheable call on the same model.
    #[serde(default = "no_cache_cache_lifetime_seconds")]
    #[schemars(range(min = 1))]
    pub cache_lifetime_seconds: u64,
    /// Per-model cache lifetime, in seconds (model id to seconds); overrides
    /// `cache_lifetime_seconds`.
    #[serde(default)]
    pub model_cache_lifetime_seconds: BTreeMap<String, u64>,
    /// Fewest calls that could have read the cache and read nothing before
    /// a session is a no-cache conversation: at least 2, since a single
    /// miss is the providers' best-effort caching, never a finding by
    /// itself.
    #[serde(default = "no_cache_min_missed_calls")]
    #[schemars(range(min = 2))]
    pub min_missed_calls: u64,
    /// Whether a session still going at the window's end is judged by the
    /// windows after it: its finding is held, stands in the next window if
    /// that window does not list the session or still finds it uncached,
    /// and is dropped if it reads the cache there. false judges such a
    /// session in its own window only.
    #[serde(default = "yes")]
    pub judge_once_ended: bool,
    /// Removed: a single missed read is never a finding, beside its
    /// group's uncached sessions or not.
    #[serde(default, skip_serializing)]
    #[schemars(skip)]
    pub corroborating_sessions: Option<serde::de::IgnoredAny>,
    /// Removed, as `corroborating_sessions`.
    #[serde(default, skip_serializing)]
    #[schemars(skip)]
    pub corroborated_min_requests: Option<serde::de::IgnoredAny>,
    /// Removed: every finding is judged call by call from its request rows.
    #[serde(default, skip_serializing)]
    #[schemars(skip)]
    pub clear_avg_input_ratio: Option<serde::de::IgnoredAny>,
    /// Cached share of the prompt at or below which the session counts as
    /// uncached.
    #[serde(default = "no_cache_max_cached_share")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub max_cached_share: f64,
    /// Peers' median cached share needed before an uncached session is unusual.
    #[serde(default = "no_cache_min_peer_cached_share")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub min_peer_cached_share: f64,
    /// Fewest eligible peers for the peer test; below it the expectation is
    /// `min_peer_cached_share`, unless the few peers seen do not cache
    /// either.
    #[serde(default = "no_cache_min_peers")]
    #[schemars(range(min = 1))]
    pub min_peers: u64,
    /// Smallest estimated waste worth a finding, in USD.
    #[serde(default)]
    #[schemars(range(min = 0.0))]
    pub min_impact_usd: f64,
}

/// An `oversized_model` rule.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "OversizedModelRule")]
pub(crate) struct RawOversizedModelRule {
    /// Unique name among the `oversized_model` rules; appears in findings.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Severity of the rule's findings.
    #[serde(default = "default_severity")]
    pub severity: Severity,
    /// Exact-match label selector; `{}` covers every session. The most
    /// specific matching rule decides.
    #[serde(default, rename = "match")]
    pub selector: BTreeMap<String, String>,
    /// A disabled rule silences the sessions it covers.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// A model is premium when its blended price is at least this many times
    /// the cheapest model in use.
    #[serde(default = "oversized_premium_price_ratio")]
    #[schemars(range(min = 1.0))]
    pub premium_price_ratio: f64,
    /// Largest average prompt per premium call that counts as tiny, in tokens.
    #[serde(default = "oversized_max_avg_input_tokens")]
    pub max_avg_input_tokens: u64,
    /// Largest average completion per premium call that counts as tiny, in
    /// tokens.
    #[serde(default = "oversized_max_avg_output_tokens")]
    pub max_avg_output_tokens: u64,
    /// Smallest share of the session's cost spent on tiny premium calls.
    #[serde(default = "oversized_min_premium_cost_share")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub min_premium_cost_share: f64,
    /// Fewest peers before the group's habits are judged at all.
    #[serde(default = "oversized_min_peers")]
    #[schemars(range(min = 1))]
    pub min_peers: u64,
    /// When more than this share of the group's sessions make tiny premium
    /// calls, that is the group's normal pattern and nothing is flagged.
    #[serde(default = "oversized_max_group_share")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub max_group_share: f64,
    /// Below this many peers the group's baseline is thin: a finding needs
    /// at most half of `max_group_share` of the peers to make mostly tiny
    /// premium calls, and is marked `cold_start`.
    #[serde(default = "oversized_cold_start_peers")]
    #[schemars(range(min = 1))]
    pub cold_start_peers: u64,
    /// The model this group's calls are meant for, declared by the team
    /// (say, after a deliberate move to a premium model): tiny calls to it,
    /// or to a model no dearer, are its design and never flagged, and a
    /// finding prices the calls on it rather than on the model the group's
    /// history uses most. Unset, costwatch never concludes by itself that a
    /// move to a premium model was meant.
    #[serde(default)]
    #[schemars(length(min = 1))]
    pub design_model: Option<String>,
    /// How long a group's tiny calls must have gone to a premium model
    /// without a pause (a window whose sessions made none) before its
    /// history takes that as its new normal: until then its sessions are
    /// flagged, however many do it, and its history keeps what it did
    /// before. A duration with a unit, such as `7d` or `36h`.
    #[serde(default = "oversized_accept_after")]
    pub accept_after: String,
    /// Removed: the share of the newest sessions no longer says a group
    /// moved on purpose (see `design_model` and `accept_after`).
    #[serde(default, skip_serializing)]
    #[schemars(skip)]
    pub recent_sessions: Option<serde::de::IgnoredAny>,
    /// Removed, as `recent_sessions`.
    #[serde(default, skip_serializing)]
    #[schemars(skip)]
    pub moved_after_sessions: Option<serde::de::IgnoredAny>,
    /// Removed, as `recent_sessions`.
    #[serde(default, skip_serializing)]
    #[schemars(skip)]
    pub moved_wait_minutes: Option<serde::de::IgnoredAny>,
    /// Smallest estimated waste worth a finding, in USD.
    #[serde(default)]
    #[schemars(range(min = 0.0))]
    pub min_impact_usd: f64,
}

/// A `retry_loop` rule.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "RetryLoopRule")]
pub(crate) struct RawRetryLoopRule {
    /// Unique name among the `retry_loop` rules; appears in findings.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Severity of the rule's findings.
    #[serde(default = "default_severity")]
    pub severity: Severity,
    /// Exact-match label selector; `{}` covers every session. The most
    /// specific matching rule decides.
    #[serde(default, rename = "match")]
    pub selector: BTreeMap<String, String>,
    /// A disabled rule silences the sessions it covers.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Fewest calls for a session to be considered at all.
    #[serde(default = "retry_min_requests")]
    #[schemars(range(min = 2))]
    pub min_requests: u64,
    /// Calls must be at least this many times the peers' median.
    #[serde(default = "retry_min_ratio_to_median")]
    #[schemars(range(min = 1.0))]
    pub min_ratio_to_median: f64,
    /// Robust z-score (median and MAD of log call counts) needed; above 0.
    #[serde(default = "retry_min_robust_z")]
    pub min_robust_z: f64,
    /// Fewest peers for the statistical test; below it
    /// `cold_start_min_requests` applies.
    #[serde(default = "retry_min_peers")]
    #[schemars(range(min = 1))]
    pub min_peers: u64,
    /// Calls needed when the group has too little history.
    #[serde(default = "retry_cold_start_min_requests")]
    pub cold_start_min_requests: u64,
    /// Consecutive near-identical calls that confirm a loop.
    #[serde(default = "retry_min_identical_run")]
    #[schemars(range(min = 2))]
    pub min_identical_run: u64,
    /// Consecutive calls of exactly the same prompt size that confirm a
    /// suspect's loop (a session no other test nominated).
    #[serde(default = "retry_suspect_min_identical_run")]
    #[schemars(range(min = 2))]
    pub suspect_min_identical_run: u64,
    /// A prompt the same size as the previous one, or longer by at most this
    /// many tokens, counts as near-identical...
    #[serde(default = "retry_input_tolerance_tokens")]
    pub input_tolerance_tokens: u64,
    /// ...or longer by at most this share of the previous prompt.
    #[serde(default = "retry_input_tolerance_ratio")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub input_tolerance_ratio: f64,
    /// Calls whose prompts each grow by the same number of tokens and
    /// whose answers are the same size (both within
    /// `growth_tolerance_tokens`, exactly for a suspect) are resends too:
    /// each carries the last answer and the error it got, as when a tool
    /// call is refused and the model asks for it again.
    #[serde(default = "yes")]
    pub steady_growth: bool,
    /// How far apart two growths, or two answers, may be in tokens and
    /// still count as the same for `steady_growth`.
    #[serde(default = "retry_growth_tolerance_tokens")]
    pub growth_tolerance_tokens: u64,
    /// Least suspicion (calls above the group's median in robust units, plus
    /// up to 1 for a loop's pace, plus the share of failed calls) for a
    /// suspect to be read at all.
    #[serde(default = "retry_suspect_min_suspicion")]
    pub suspect_min_suspicion: f64,
    /// Longest average pause, in seconds between the starts of a session's
    /// calls (its span over its calls less one), for it to be a suspect at
    /// all: a loop resends seconds apart. 0 reads suspects at any pace.
    #[serde(default = "retry_suspect_max_mean_gap_seconds")]
    pub suspect_max_mean_gap_seconds: u64,
    /// Most suspects of this rule (sessions of at least
    /// `suspect_min_identical_run` calls that the outlier, error and
    /// cold-start tests did not nominate, with a suspicion of at least
    /// `suspect_min_suspicion`) whose request rows are read per window, the
    /// most suspicious first; the rest are skipped and counted.
    #[serde(default = "retry_drilldown_budget")]
    #[schemars(range(max = 1_000_000))]
    pub drilldown_budget: u64,
    /// Longest pause, in seconds from one call's start to the next, inside a
    /// run of resent calls.
    #[serde(default = "retry_max_run_gap_seconds")]
    #[schemars(range(min = 1))]
    pub max_run_gap_seconds: u64,
    /// Failed calls in a row that confirm a loop; also the failed calls that
    /// make a session a candidate whatever its size.
    #[serde(default = "retry_min_error_burst")]
    pub min_error_burst: u64,
}

fn default_severity() -> Severity {
    Severity::Warning
}

fn yes() -> bool {
    true
}

fn no_cache_min_requests() -> u64 {
    3
}
fn no_cache_min_avg_input_tokens() -> u64 {
    0
}
fn no_cache_min_cacheable_tokens() -> u64 {
    1024
}
fn no_cache_max_cached_share() -> f64 {
    0.05
}
fn no_cache_min_peer_cached_share() -> f64 {
    0.15
}
fn no_cache_min_peers() -> u64 {
    5
}
fn no_cache_cache_lifetime_seconds() -> u64 {
    300
}
fn no_cache_min_missed_calls() -> u64 {
    2
}

fn oversized_premium_price_ratio() -> f64 {
    5.0
}
fn oversized_max_avg_input_tokens() -> u64 {
    1000
}
fn oversized_max_avg_output_tokens() -> u64 {
    500
}
fn oversized_min_premium_cost_share() -> f64 {
    0.0
}
fn oversized_min_peers() -> u64 {
    2
}
fn oversized_max_group_share() -> f64 {
    0.5
}
fn oversized_cold_start_peers() -> u64 {
    20
}
fn oversized_accept_after() -> String {
    "7d".to_owned()
}

fn retry_min_requests() -> u64 {
    6
}
fn retry_min_ratio_to_median() -> f64 {
    2.5
}
fn retry_min_robust_z() -> f64 {
    3.0
}
fn retry_min_peers() -> u64 {
    20
}
fn retry_cold_start_min_requests() -> u64 {
    8
}
fn retry_suspect_min_identical_run() -> u64 {
    7
}
fn retry_min_identical_run() -> u64 {
    6
}
fn retry_input_tolerance_tokens() -> u64 {
    32
}
fn retry_growth_tolerance_tokens() -> u64 {
    4
}
fn retry_input_tolerance_ratio() -> f64 {
    0.0
}
fn retry_suspect_min_suspicion() -> f64 {
    0.5
}
fn retry_suspect_max_mean_gap_seconds() -> u64 {
    10
}
fn retry_drilldown_budget() -> u64 {
    100
}
fn retry_max_run_gap_seconds() -> u64 {
    60
}
fn retry_min_error_burst() -> u64 {
    5
}

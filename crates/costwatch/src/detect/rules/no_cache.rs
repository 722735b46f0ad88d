//! The settings of a `no_cache` rule.

use super::{Rule, RuleSettings, Rules};
use crate::settings::units::{seconds, seconds_by_model, with_unit};
use crate::settings::{Issue, Settings};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// A `no_cache` rule: multi-request conversations on a cache-capable model
/// that never hit the prompt cache while their peers do
/// (`detect::no_cache`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
#[schemars(rename = "NoCacheRule")]
#[schemars(transform = crate::settings::in_declared_order::<NoCache>)]
pub struct NoCache {
    /// Fewest calls in the session (a single call can never hit the cache).
    #[schemars(range(min = 2))]
    pub min_requests: u64,
    /// Smallest average prompt per call, in tokens, below which a session is
    /// not looked at. 0 (the default) leaves it to each call's cacheability:
    /// a session whose prompts grow past the minimum can average below it
    /// and still have calls that could read the cache.
    pub min_avg_input_tokens: u64,
    /// Smallest prompt prefix, in tokens, that a model caches, for models
    /// whose minimum neither `model_min_cacheable_tokens` nor the gateway's
    /// catalogue gives.
    #[schemars(range(min = 1))]
    pub min_cacheable_tokens: u64,
    /// Per-model smallest cacheable prefix, in tokens (model id to tokens);
    /// overrides the gateway's catalogue and `min_cacheable_tokens`.
    pub model_min_cacheable_tokens: BTreeMap<String, u64>,
    /// How long a cached prefix lives after the call that wrote or last read
    /// it, in seconds, for models `model_cache_lifetime_seconds` does not
    /// name: a call can read the cache only within it of an earlier
    /// cacheable call on the same model.
    #[serde(rename = "cache_lifetime_seconds", with = "seconds")]
    #[schemars(with = "u64", range(min = 1))]
    pub cache_lifetime: Duration,
    /// Per-model cache lifetime, in seconds (model id to seconds); overrides
    /// `cache_lifetime_seconds`.
    #[serde(rename = "model_cache_lifetime_seconds", with = "seconds_by_model")]
    #[schemars(with = "BTreeMap<String, u64>")]
    pub model_cache_lifetime: BTreeMap<String, Duration>,
    /// Fewest calls that could have read the cache and read nothing before
    /// a session is a no-cache conversation: at least 2, since a single
    /// miss is the providers' best-effort caching, never a finding by
    /// itself.
    #[schemars(range(min = 2))]
    pub min_missed_calls: u64,
    /// Whether a session still going at the window's end is judged by the
    /// windows after it: its finding is held, stands in the next window if
    /// that window does not list the session or still finds it uncached,
    /// and is dropped if it reads the cache there. false judges such a
    /// session in its own window only.
    pub judge_once_ended: bool,
    /// Cached share of the prompt at or below which the session counts as
    /// uncached.
    #[schemars(range(min = 0.0, max = 1.0))]
    pub max_cached_share: f64,
    /// Peers' median cached share needed before an uncached session is unusual.
    #[schemars(range(min = 0.0, max = 1.0))]
    pub min_peer_cached_share: f64,
    /// Fewest eligible peers for the peer test; below it the expectation is
    /// `min_peer_cached_share`, unless the few peers seen do not cache
    /// either.
    #[schemars(range(min = 1))]
    pub min_peers: usize,
    /// How long an uncached session of a group with fewer than `min_peers`
    /// eligible sessions waits for its group to have them: its finding is
    /// held, and stands once the group's sessions show it caches (their
    /// median cached share at least `min_peer_cached_share`) or is dropped
    /// once they show it does not. Still too few when the wait is over, it
    /// stands unless the few seen cache nothing. 0 judges it at once
    /// against the few there are, itself among them. A duration with a
    /// unit, such as `1d` or `6h`.
    #[serde(with = "with_unit")]
    #[schemars(with = "crate::settings::units::DurationText")]
    pub wait_for_peers: Duration,
    /// Smallest estimated waste worth a finding, in USD.
    #[schemars(range(min = 0.0))]
    pub min_impact_usd: f64,
}

impl Default for NoCache {
    fn default() -> Self {
        NoCache {
            min_requests: 3,
            min_avg_input_tokens: 0,
            min_cacheable_tokens: 1024,
            model_min_cacheable_tokens: BTreeMap::new(),
            cache_lifetime: Duration::from_secs(300),
            model_cache_lifetime: BTreeMap::new(),
            min_missed_calls: 2,
            judge_once_ended: true,
            max_cached_share: 0.05,
            min_peer_cached_share: 0.15,
            min_peers: 5,
            wait_for_peers: Duration::from_secs(86_400),
            min_impact_usd: 0.0,
        }
    }
}

/// Why the single-miss settings went.
const SINGLE_MISS: &str =
    "a single missed read is never a finding, beside its group's uncached sessions or not";

impl Settings for NoCache {
    fn problems(&self) -> Vec<Issue> {
        let least_tokens = self.model_min_cacheable_tokens.values().min();
        let least_lifetime = self.model_cache_lifetime.values().min();
        [
            least_tokens.filter(|l| **l < 1).map(|l| {
                Issue::new(
                    "model_min_cacheable_tokens",
                    format!("must be at least 1, got {l}"),
                )
            }),
            Issue::when(
                least_lifetime.is_some_and(Duration::is_zero),
                "model_cache_lifetime_seconds",
                || "must be at least 1, got 0".to_owned(),
            ),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

impl RuleSettings for NoCache {
    const KIND: &'static str = crate::domain::Kind::NoCache.as_str();
    const REMOVED: &'static [(&'static str, &'static str)] = &[
        ("corroborating_sessions", SINGLE_MISS),
        ("corroborated_min_requests", SINGLE_MISS),
        (
            "clear_avg_input_ratio",
            "every finding is judged call by call from its request rows",
        ),
    ];

    fn list(rules: &mut Rules) -> &mut Vec<Rule<NoCache>> {
        &mut rules.no_cache
    }
}

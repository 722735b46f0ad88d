//! Typed detector rules, as loaded from `rules/*.yaml`.

use crate::domain::Labels;
pub use crate::domain::Severity;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Exact-match label selector; empty matches every session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector(pub Labels);

impl Selector {
    /// Whether every pair of the selector is present in `labels`.
    pub fn matches(&self, labels: &Labels) -> bool {
        self.0.iter().all(|(k, v)| labels.get(k) == Some(v))
    }

    /// Number of pairs; a more specific selector wins over a less specific one.
    pub fn specificity(&self) -> usize {
        self.0.len()
    }
}

/// What every rule has.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleMeta {
    /// Unique name within its kind; appears in findings.
    pub name: String,
    /// Severity of its findings.
    pub severity: Severity,
    /// Which sessions the rule covers.
    pub selector: Selector,
    /// A disabled rule silences the sessions it covers.
    pub enabled: bool,
    /// File the rule came from.
    pub file: PathBuf,
}

/// A multi-request conversation on a cache-capable model that never hits the
/// prompt cache while its peers do.
#[derive(Debug, Clone, PartialEq)]
pub struct NoCacheRule {
    /// Name, severity, selector.
    pub meta: RuleMeta,
    /// Fewest calls in the session (a single call can never hit the cache).
    pub min_requests: u64,
    /// Smallest average prompt per call below which a session is not looked
    /// at; 0 leaves it to each call's cacheability.
    pub min_avg_input_tokens: u64,
    /// Smallest cacheable prompt prefix of models whose minimum neither
    /// `model_min_cacheable_tokens` nor the gateway's catalogue gives.
    pub min_cacheable_tokens: u64,
    /// Per-model smallest cacheable prefix; overrides the catalogue.
    pub model_min_cacheable_tokens: BTreeMap<String, u64>,
    /// How long a cached prefix lives after its last use, for models
    /// `model_cache_lifetime` does not name.
    pub cache_lifetime: std::time::Duration,
    /// Per-model cache lifetime; overrides `cache_lifetime`.
    pub model_cache_lifetime: BTreeMap<String, std::time::Duration>,
    /// Fewest calls that could have read the cache and read nothing (at
    /// least 2).
    pub min_missed_calls: u64,
    /// Whether a finding of a session still going at the window's end is
    /// held for the windows after it to decide (`detect::held`).
    pub judge_once_ended: bool,
    /// Cached share of the prompt at or below which the session counts as uncached.
    pub max_cached_share: f64,
    /// Peers' median cached share needed before an uncached session is unusual.
    pub min_peer_cached_share: f64,
    /// Fewest eligible peers for the peer test; below it the rule alone decides.
    pub min_peers: usize,
    /// Smallest estimated waste worth a finding, in USD.
    pub min_impact_usd: f64,
}

/// A premium model used for tiny calls where the group does not normally do so.
#[derive(Debug, Clone, PartialEq)]
pub struct OversizedModelRule {
    /// Name, severity, selector.
    pub meta: RuleMeta,
    /// A model is premium when its blended price is at least this many times
    /// the cheapest model in use.
    pub premium_price_ratio: f64,
    /// Largest average prompt per premium call that counts as tiny.
    pub max_avg_input_tokens: u64,
    /// Largest average completion per premium call that counts as tiny.
    pub max_avg_output_tokens: u64,
    /// Smallest share of the session's cost spent on tiny premium calls.
    pub min_premium_cost_share: f64,
    /// Fewest peers before the group's habits are judged at all.
    pub min_peers: usize,
    /// When more than this share of the group's sessions make tiny premium
    /// calls, that is the group's normal pattern and nothing is flagged.
    pub max_group_share: f64,
    /// Below this many peers the baseline is thin: judged conservatively and
    /// findings marked `cold_start`.
    pub cold_start_peers: usize,
    /// The model the group's calls are meant for, when the team declared
    /// it: tiny calls to it (or to a model no dearer) are its design.
    pub design_model: Option<String>,
    /// How long a move of the group's tiny calls to a premium model must
    /// last without a pause before its history takes it as normal.
    pub accept_after: std::time::Duration,
    /// Smallest estimated waste worth a finding, in USD.
    pub min_impact_usd: f64,
}

/// A session that calls far more often than its peers, confirmed by repeated
/// near-identical requests or an error burst.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryLoopRule {
    /// Name, severity, selector.
    pub meta: RuleMeta,
    /// Fewest calls for a session to be considered at all.
    pub min_requests: u64,
    /// Calls must be at least this many times the peers' median.
    pub min_ratio_to_median: f64,
    /// Robust z-score (median/MAD of log call counts) needed.
    pub min_robust_z: f64,
    /// Fewest peers for the statistical test; below it `cold_start_min_requests` applies.
    pub min_peers: usize,
    /// Calls needed when the group has too little history.
    pub cold_start_min_requests: u64,
    /// Consecutive near-identical calls that confirm a loop.
    pub min_identical_run: u64,
    /// Consecutive calls of exactly the same prompt size that confirm a
    /// suspect's loop.
    pub suspect_min_identical_run: u64,
    /// A prompt the same size as the previous one, or longer by at most this
    /// many tokens, counts as near-identical...
    pub input_tolerance_tokens: u64,
    /// ...or longer by at most this share of the previous prompt.
    pub input_tolerance_ratio: f64,
    /// Calls whose prompts grow by the same amount, with answers of the
    /// same size, are resends too (see `detect::retry_loop`).
    pub steady_growth: bool,
    /// How far apart two growths, or two answers, may be and still count
    /// as the same for `steady_growth`.
    pub growth_tolerance_tokens: u64,
    /// Least suspicion for a suspect to be read at all.
    pub suspect_min_suspicion: f64,
    /// Longest average pause between a suspect's calls (zero: no limit).
    pub suspect_max_mean_gap: std::time::Duration,
    /// Most suspects drilled into per window, the most suspicious first.
    pub drilldown_budget: usize,
    /// Longest pause between the starts of two calls of a run of resends.
    pub max_run_gap: std::time::Duration,
    /// Failed calls in a row that confirm a loop; also the failed calls that
    /// make a session a candidate whatever its size.
    pub min_error_burst: u64,
}

/// Every rule, by kind, in load order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rules {
    /// `no_cache` rules.
    pub no_cache: Vec<NoCacheRule>,
    /// `oversized_model` rules.
    pub oversized_model: Vec<OversizedModelRule>,
    /// `retry_loop` rules.
    pub retry_loop: Vec<RetryLoopRule>,
}

/// Picks the rule that covers `labels`: the enabled-or-not rule with the most
/// specific matching selector, the first loaded on a tie. A disabled winner
/// means "not checked".
pub fn select<'a, R>(
    rules: &'a [R],
    meta: impl Fn(&R) -> &RuleMeta,
    labels: &Labels,
) -> Option<&'a R> {
    let mut best: Option<(&R, usize)> = None;
    for r in rules {
        let m = meta(r);
        if m.selector.matches(labels) {
            let s = m.selector.specificity();
            if best.is_none_or(|(_, bs)| s > bs) {
                best = Some((r, s));
            }
        }
    }
    best.and_then(|(r, _)| meta(r).enabled.then_some(r))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(name: &str, sel: &[(&str, &str)], enabled: bool) -> RuleMeta {
        RuleMeta {
            name: name.into(),
            severity: Severity::Warning,
            selector: Selector(
                sel.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            enabled,
            file: PathBuf::from("rules/x.yaml"),
        }
    }

    #[test]
    fn most_specific_selector_wins_and_disabled_silences() {
        let rules = vec![
            meta("all", &[], true),
            meta("support", &[("feature", "support")], true),
            meta("quiet", &[("feature", "batch")], false),
        ];
        let l = |v: &str| Labels::from([("feature".to_string(), v.to_string())]);
        assert_eq!(
            select(&rules, |r| r, &l("support")).map(|r| r.name.as_str()),
            Some("support")
        );
        assert_eq!(
            select(&rules, |r| r, &l("search")).map(|r| r.name.as_str()),
            Some("all")
        );
        assert_eq!(select(&rules, |r| r, &l("batch")), None);
    }
}

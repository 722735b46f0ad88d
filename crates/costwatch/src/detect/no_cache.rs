//! A multi-request conversation on a cache-capable model whose prompts are
//! long enough to cache, yet it reads (almost) nothing from the cache while
//! its peers do.

use super::{Catalogue, Finding, GroupStats, Kind, avg_input, cached_share, ratio, usd};
use crate::config::NoCacheRule;
use crate::source::{SessionRecord, Window};
use serde_json::json;

/// Whether the session could have used the prompt cache at all: enough calls,
/// prompts above the cacheable minimum, and only models with a prompt cache.
pub fn eligible(s: &SessionRecord, cat: &Catalogue, rule: &NoCacheRule) -> bool {
    s.requests >= rule.min_requests
        && avg_input(s) >= rule.min_avg_input_tokens as f64
        && !s.by_model.is_empty()
        && s.by_model.iter().all(|m| cat.supports_cache(&m.model))
}

/// The cheap test made on every session: eligible and uncached.
pub fn is_candidate(s: &SessionRecord, cat: &Catalogue, rule: &NoCacheRule) -> bool {
    eligible(s, cat, rule) && cached_share(s) <= rule.max_cached_share
}

/// Judges a candidate against its group.
pub fn judge(
    s: &SessionRecord,
    group: &str,
    stats: &GroupStats,
    cat: &Catalogue,
    rule: &NoCacheRule,
    window: Window,
) -> Option<Finding> {
    let peer_median = stats.cache_median;
    let cold_start = stats.cache_peers < rule.min_peers;
    if !cold_start && peer_median.is_none_or(|m| m < rule.min_peer_cached_share) {
        // The peers do not cache either: nothing unusual about this session.
        return None;
    }
    // What caching like the peers would have saved; with too few peers, the
    // rule's own floor is the expectation.
    let expected_share = peer_median
        .unwrap_or(rule.min_peer_cached_share)
        .max(rule.min_peer_cached_share);
    let saved_tokens = expected_share * s.input_tokens as f64 - s.cached_tokens as f64;
    let impact: f64 = s
        .by_model
        .iter()
        .filter_map(|m| {
            let p = cat.get(&m.model)?;
            let discount = p.input_usd_per_mtok - p.cached_input_usd_per_mtok?;
            let share = m.input_tokens as f64 / s.input_tokens.max(1) as f64;
            Some(saved_tokens.max(0.0) * share * discount / 1e6)
        })
        .sum();
    if impact < rule.min_impact_usd {
        return None;
    }
    let share = cached_share(s);
    let models: Vec<&str> = s.by_model.iter().map(|m| m.model.as_str()).collect();
    let peers_text = match (cold_start, peer_median) {
        (false, Some(m)) => format!(
            "while {} peers in {group} cached a median {:.0}%",
            stats.cache_peers,
            m * 100.0
        ),
        _ => format!(
            "and {group} has too little history to compare ({} peers), so the rule alone decided",
            stats.cache_peers
        ),
    };
    Some(Finding {
        kind: Kind::NoCache,
        session_id: s.session_id.clone(),
        window,
        severity: rule.meta.severity,
        rule: rule.meta.name.clone(),
        group: group.to_owned(),
        labels: s.labels.clone(),
        cost_usd: s.cost_usd,
        impact_usd: usd(impact),
        evidence: json!({
            "requests": s.requests,
            "input_tokens": s.input_tokens,
            "cached_tokens": s.cached_tokens,
            "cached_share": ratio(share),
            "avg_input_tokens": avg_input(s).round(),
            "models": models,
            "peer_median_cached_share": peer_median.map(ratio),
            "peers": stats.cache_peers,
            "cold_start": cold_start,
        }),
        explanation: format!(
            "{} calls read {} of {} prompt tokens from the prompt cache ({:.1}%) {peers_text}; caching like them would have saved about ${:.4}",
            s.requests,
            s.cached_tokens,
            s.input_tokens,
            share * 100.0,
            impact
        ),
    })
}

//! A multi-request conversation on a cache-capable model whose prompts are
//! long enough to cache, yet it reads (almost) nothing from the cache while
//! its peers do.
//!
//! A call can read the cache only if it and an earlier successful call of the
//! session on the same model were each at least the model's minimum cacheable
//! prefix, and that earlier call (or the last one to use the prefix since)
//! started at most the cache lifetime before it. Aggregates settle the clear
//! cases: too little prompt on every model for two such calls (never
//! cacheable), or an average per call well above the minimum, within one
//! cache lifetime from first call to last, with nothing read (cacheable).
//! Otherwise the session's request rows decide which calls could have read
//! the cache.
//!
//! A session is uncached when at least `min_missed_calls` of the calls that
//! could have read the cache read nothing, and those calls together read at
//! most `max_cached_share` of their prompt. A session whose caching starts
//! partway (its first cacheable calls miss, the later ones read) reads a
//! fair share of what it could and is not flagged; seen before its first
//! read, it shows a single miss, which is not enough. A session quiet for
//! a cache lifetime before the window's end has ended as far as its cache
//! goes: for it a single miss is final, and enough. With
//! `corroborating_sessions` set, a single miss of a session still going
//! (or of one with fewer than `min_requests` calls, from
//! `corroborated_min_requests` up) is a [`Weak`] finding, which stands
//! beside enough of its group's sessions found uncached on their own in the
//! same window (see [`super::Corroboration`]). With `judge_once_ended`, a
//! finding of a session still going that nothing corroborates is a weak
//! one too, held for the windows after it to decide (see
//! [`super::held`]).

use super::{Catalogue, Finding, GroupStats, Kind, avg_input, cached_share, ratio, usd};
use crate::config::NoCacheRule;
use crate::source::{ModelUsage, RequestRecord, RequestStatus, SessionRecord, Window};
use chrono::{DateTime, Utc};
use serde_json::json;
use std::collections::BTreeMap;
use std::time::Duration;

/// What the session aggregates say about whether any call could have read
/// the prompt cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cacheability {
    /// No model carries two calls of at least its minimum.
    Never,
    /// Every model that could is well above its minimum on average.
    Clear,
    /// Some model is near its minimum: the request rows decide.
    Unsure,
}

/// The smallest cacheable prefix of `model`: the rule's per-model value,
/// else the gateway's catalogue, else the rule's default.
pub fn min_cacheable(model: &str, cat: &Catalogue, rule: &NoCacheRule) -> u64 {
    rule.model_min_cacheable_tokens
        .get(model)
        .copied()
        .or_else(|| cat.min_cacheable(model))
        .unwrap_or(rule.min_cacheable_tokens)
        .max(1)
}

/// How long a cached prefix of `model` lives after its last use: the rule's
/// per-model value, else its default.
pub fn cache_lifetime(model: &str, rule: &NoCacheRule) -> Duration {
    rule.model_cache_lifetime
        .get(model)
        .copied()
        .unwrap_or(rule.cache_lifetime)
}

fn model_cacheability(m: &ModelUsage, min: u64, rule: &NoCacheRule) -> Cacheability {
    // One call writes the prefix, a later one reads it: both at least `min`.
    if m.requests < 2 || m.input_tokens < min.saturating_mul(2) {
        Cacheability::Never
    } else if m.input_tokens as f64 / m.requests as f64 >= rule.clear_avg_input_ratio * min as f64 {
        Cacheability::Clear
    } else {
        Cacheability::Unsure
    }
}

/// Whether any of the session's calls could have read the cache, as far as
/// its aggregates tell (O(models)). Models without a prompt cache never
/// could. The aggregates count failed calls too, but only a successful one
/// reads the cache (a failed one often reports no usage at all): a session
/// with any is never clear from its aggregates, its rows tell which calls
/// could have read.
pub fn cacheability(s: &SessionRecord, cat: &Catalogue, rule: &NoCacheRule) -> Cacheability {
    let mut seen = Cacheability::Never;
    for m in s.by_model.iter().filter(|m| cat.supports_cache(&m.model)) {
        match model_cacheability(m, min_cacheable(&m.model, cat, rule), rule) {
            Cacheability::Unsure => return Cacheability::Unsure,
            Cacheability::Clear if s.errors > 0 => return Cacheability::Unsure,
            Cacheability::Clear => seen = Cacheability::Clear,
            Cacheability::Never => {}
        }
    }
    seen
}

/// Whether the session could have used the prompt cache at all: enough calls,
/// prompts above the cacheable minimum, and a model with a prompt cache
/// (a session mixing in a model without one, say an extraction model, is
/// judged on the others); and whether its cache reads are known (a source
/// that reported none for it says nothing either way).
pub fn eligible(s: &SessionRecord, cat: &Catalogue, rule: &NoCacheRule) -> bool {
    s.requests >= rule.min_requests && could_cache(s, cat, rule)
}

/// Whether a session of too few calls to count alone (at least
/// `corroborated_min_requests`, fewer than `min_requests`) may count beside
/// its group's uncached sessions.
pub fn weakly_eligible(s: &SessionRecord, cat: &Catalogue, rule: &NoCacheRule) -> bool {
    rule.corroborating_sessions > 0
        && s.requests >= rule.corroborated_min_requests.max(2)
        && s.requests < rule.min_requests
        && could_cache(s, cat, rule)
}

/// Eligibility without the number of calls.
fn could_cache(s: &SessionRecord, cat: &Catalogue, rule: &NoCacheRule) -> bool {
    !s.cache_unreported
        && avg_input(s) >= rule.min_avg_input_tokens as f64
        && cacheability(s, cat, rule) != Cacheability::Never
}

/// Share of the prompt sent to models with a prompt cache that was read
/// from it, in `[0, 1]`: what a session's caching is judged by, undiluted
/// by calls to models that cannot cache.
pub fn capable_cached_share(s: &SessionRecord, cat: &Catalogue) -> f64 {
    let (mut input, mut cached) = (0u64, 0u64);
    for m in s.by_model.iter().filter(|m| cat.supports_cache(&m.model)) {
        input += m.input_tokens;
        cached += m.cached_tokens.min(m.input_tokens);
    }
    if input == 0 {
        0.0
    } else {
        cached as f64 / input as f64
    }
}

/// The cheap test made on every session: eligible and uncached.
pub fn is_candidate(s: &SessionRecord, cat: &Catalogue, rule: &NoCacheRule) -> bool {
    (eligible(s, cat, rule) || weakly_eligible(s, cat, rule))
        && capable_cached_share(s, cat) <= rule.max_cached_share
}

/// What the peers say a session of the group should cache.
#[derive(Debug, Clone, PartialEq)]
struct Peers {
    /// Share of the cacheable prompt caching like the peers reads from cache.
    expected_share: f64,
    median: Option<f64>,
    count: usize,
    cold_start: bool,
}

/// One cache-capable model of a candidate: its minimum and what a cached
/// prompt token saves on it.
#[derive(Debug, Clone, PartialEq)]
struct ModelCache {
    model: String,
    min_tokens: u64,
    lifetime: Duration,
    discount_usd_per_mtok: f64,
}

/// A candidate near the cacheable minimum, to judge from its request rows.
#[derive(Debug, Clone, PartialEq)]
pub struct RowCheck {
    peers: Peers,
    models: Vec<ModelCache>,
    rule: NoCacheRule,
}

impl RowCheck {
    /// The rule's `corroborating_sessions`.
    pub fn needs(&self) -> u64 {
        self.rule.corroborating_sessions
    }
}

/// The outcome of judging a candidate from its aggregates.
#[derive(Debug)]
pub enum Verdict {
    /// Not wasteful (or not worth a finding).
    Clean,
    /// Wasteful, from the aggregates alone.
    Found(Box<Finding>),
    /// A single missed read, from the aggregates: a finding only beside
    /// its group's uncached sessions.
    Weak(Box<Weak>),
    /// Its request rows decide.
    Rows(Box<RowCheck>),
}

/// A finding that too few missed reads support (one, with the shipped
/// `min_missed_calls`): the session had too few calls to count alone, or
/// was still going at the window's end (it may be caching late). It stands
/// when `corroborating_sessions` other sessions of its group were found
/// uncached on their own in the same window.
#[derive(Debug, Clone)]
pub struct Weak {
    /// The finding, as it reads once corroborated.
    pub finding: Finding,
    /// The rule's `corroborating_sessions`.
    pub needs: u64,
    /// For a session still going that would count alone once ended (the
    /// rule's `judge_once_ended`): when a cache lifetime will have passed
    /// since its last call. Uncorroborated, it is held for the windows
    /// after it: a single miss until then, one that counts `alone` for one
    /// window (see [`super::held`]).
    pub once_ended: Option<DateTime<Utc>>,
    /// Enough missed reads to count alone: weak only because its session
    /// is still going and may start reading the cache in its next window
    /// (held one window; it corroborates its group's single misses as a
    /// finding does).
    pub alone: bool,
}

impl Weak {
    /// The finding, corroborated by `by` sessions of its group.
    pub fn corroborated(mut self, by: u64) -> Finding {
        let f = &mut self.finding;
        if let Some(e) = f.evidence.as_object_mut() {
            e.insert("corroborated_by".into(), by.into());
        }
        f.explanation.push_str(&format!(
            "; alone its missed reads would not count, but {by} other sessions of {} were found uncached on their own in this window",
            f.group
        ));
        self.finding
    }
}

/// A judged session: wasteful on its own, or beside its group.
#[derive(Debug)]
pub enum Judged {
    /// Enough missed reads to count alone.
    Alone(Finding),
    /// Too few missed reads to count alone.
    Weak(Weak),
}

/// The cacheable part of one model's calls.
#[derive(Debug, Clone, Default)]
struct Part {
    calls: u64,
    input: u64,
    cached: u64,
    /// Cacheable calls that read nothing.
    missed: u64,
}

fn peers(stats: &GroupStats, rule: &NoCacheRule) -> Option<Peers> {
    let median = stats.cache_median;
    let cold_start = stats.cache_peers < rule.min_peers;
    if median.is_some_and(|m| m < rule.min_peer_cached_share) || !cold_start && median.is_none() {
        // The peers do not cache either: nothing unusual about this
        // session. Said by fewer than `min_peers` too: a thin baseline is
        // not evidence against its own sessions (a new batch feature whose
        // shared template is below the minimum caches nothing from the
        // start).
        return None;
    }
    // With too few peers, the rule's own floor is the expectation.
    Some(Peers {
        expected_share: median
            .unwrap_or(rule.min_peer_cached_share)
            .max(rule.min_peer_cached_share),
        median,
        count: stats.cache_peers,
        cold_start,
    })
}

fn model_caches(s: &SessionRecord, cat: &Catalogue, rule: &NoCacheRule) -> Vec<ModelCache> {
    s.by_model
        .iter()
        .filter_map(|m| {
            let p = cat.get(&m.model)?;
            Some(ModelCache {
                model: m.model.clone(),
                min_tokens: min_cacheable(&m.model, cat, rule),
                lifetime: cache_lifetime(&m.model, rule),
                discount_usd_per_mtok: p.input_usd_per_mtok - p.cached_input_usd_per_mtok?,
            })
        })
        .collect()
}

/// Judges a candidate against its group.
pub fn judge(
    s: &SessionRecord,
    group: &str,
    stats: &GroupStats,
    cat: &Catalogue,
    rule: &NoCacheRule,
    window: Window,
) -> Verdict {
    let Some(peers) = peers(stats, rule) else {
        return Verdict::Clean;
    };
    let models = model_caches(s, cat, rule);
    let rows = || {
        Verdict::Rows(Box::new(RowCheck {
            peers: peers.clone(),
            models: models.clone(),
            rule: rule.clone(),
        }))
    };
    // Aggregates cannot tell which calls read what, nor whether a pause
    // outlived the cache: a session that read a little, or that lasted
    // longer than a cache lifetime, is judged from its rows.
    let span = (s.last_request_at - s.first_request_at)
        .to_std()
        .unwrap_or_default();
    let outlives = models.iter().any(|m| span > m.lifetime);
    match cacheability(s, cat, rule) {
        Cacheability::Never => Verdict::Clean,
        Cacheability::Unsure => rows(),
        Cacheability::Clear if s.cached_tokens > 0 || outlives => rows(),
        Cacheability::Clear => {
            // Every call but the first on each model could have read the
            // cache; the first is counted at the model's average.
            let parts: Vec<Part> = models
                .iter()
                .map(|mc| {
                    let usage = s.by_model.iter().find(|m| m.model == mc.model);
                    usage
                        .filter(|m| {
                            model_cacheability(m, mc.min_tokens, rule) != Cacheability::Never
                        })
                        .map(|m| Part {
                            calls: m.requests - 1,
                            input: m.input_tokens - m.input_tokens / m.requests,
                            cached: m.cached_tokens,
                            missed: m.requests - 1,
                        })
                        .unwrap_or_default()
                })
                .collect();
            match finding(s, group, &peers, &models, &parts, rule, window, false) {
                None => Verdict::Clean,
                Some(Judged::Alone(f)) => Verdict::Found(Box::new(f)),
                Some(Judged::Weak(w)) => Verdict::Weak(Box::new(w)),
            }
        }
    }
}

/// Judges a candidate from its request rows (oldest first): a successful
/// call of at least the model's minimum is cacheable when an earlier
/// successful call on the same model was too, and the last such call
/// started at most the model's cache lifetime before it (every such call
/// writes or reads the prefix, which keeps it alive). The rows carry no end
/// times, so pauses are measured from start to start: a slow call can make
/// a pause look up to its own latency longer, which errs towards no
/// finding. No cacheable call, no finding.
pub fn confirm(
    s: &SessionRecord,
    requests: &[RequestRecord],
    check: &RowCheck,
    group: &str,
    window: Window,
) -> Option<Judged> {
    let mut parts = vec![Part::default(); check.models.len()];
    let mut primed: Vec<Option<chrono::DateTime<chrono::Utc>>> = vec![None; check.models.len()];
    for r in requests {
        if r.status != RequestStatus::Success {
            continue;
        }
        let Some(i) = check.models.iter().position(|m| m.model == r.model) else {
            continue;
        };
        let m = &check.models[i];
        if r.input_tokens < m.min_tokens {
            continue;
        }
        let alive = primed[i].is_some_and(|at| {
            (r.created_at - at)
                .to_std()
                .is_ok_and(|pause| pause <= m.lifetime)
        });
        if alive {
            let cached = r.cached_tokens.min(r.input_tokens);
            parts[i].calls += 1;
            parts[i].input += r.input_tokens;
            parts[i].cached += cached;
            parts[i].missed += u64::from(cached == 0);
        }
        primed[i] = Some(r.created_at);
    }
    finding(
        s,
        group,
        &check.peers,
        &check.models,
        &parts,
        &check.rule,
        window,
        true,
    )
}

#[allow(clippy::too_many_arguments)]
fn finding(
    s: &SessionRecord,
    group: &str,
    peers: &Peers,
    models: &[ModelCache],
    parts: &[Part],
    rule: &NoCacheRule,
    window: Window,
    from_rows: bool,
) -> Option<Judged> {
    let cacheable_input: u64 = parts.iter().map(|p| p.input).sum();
    let cacheable_calls: u64 = parts.iter().map(|p| p.calls).sum();
    let cacheable_cached: u64 = parts.iter().map(|p| p.cached).sum();
    let missed: u64 = parts.iter().map(|p| p.missed).sum();
    // A session quiet for a cache lifetime before the window's end has
    // ended as far as its cache goes: a single miss is final. One still
    // going may be caching late, seen before its first read.
    let lifetime = models.iter().map(|m| m.lifetime).max().unwrap_or_default();
    let ended = (window.end - s.last_request_at)
        .to_std()
        .is_ok_and(|quiet| quiet >= lifetime);
    let alone = s.requests >= rule.min_requests
        && (missed >= rule.min_missed_calls || (ended && missed >= 1));
    if cacheable_calls == 0 || cacheable_input == 0 || missed == 0 {
        return None;
    }
    // Still going with enough calls: alone once it has ended, and judged
    // in full only then or in its next window.
    let once_ended = (rule.judge_once_ended && !ended && s.requests >= rule.min_requests)
        .then(|| {
            chrono::Duration::from_std(lifetime)
                .ok()
                .and_then(|l| s.last_request_at.checked_add_signed(l))
        })
        .flatten();
    if !alone && rule.corroborating_sessions == 0 && once_ended.is_none() {
        return None;
    }
    // Caching that starts partway reads a fair share of what it could.
    let read_share = cacheable_cached as f64 / cacheable_input as f64;
    if read_share > rule.max_cached_share {
        return None;
    }
    // What caching the cacheable calls like the peers would have saved.
    let impact: f64 = models
        .iter()
        .zip(parts)
        .map(|(m, p)| {
            let saved = peers.expected_share * p.input as f64 - p.cached as f64;
            saved.max(0.0) * m.discount_usd_per_mtok / 1e6
        })
        .sum();
    if impact < rule.min_impact_usd {
        return None;
    }
    let share = cached_share(s);
    let names: Vec<&str> = s.by_model.iter().map(|m| m.model.as_str()).collect();
    let minimums: BTreeMap<&str, u64> = models
        .iter()
        .map(|m| (m.model.as_str(), m.min_tokens))
        .collect();
    let lifetimes: BTreeMap<&str, u64> = models
        .iter()
        .map(|m| (m.model.as_str(), m.lifetime.as_secs()))
        .collect();
    let peers_text = match (peers.cold_start, peers.median) {
        (false, Some(m)) => format!(
            "while {} peers in {group} cached a median {:.0}%",
            peers.count,
            m * 100.0
        ),
        _ => format!(
            "and {group} has too little history to compare ({} peers), so the rule alone decided",
            peers.count
        ),
    };
    let mut f = Finding {
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
            "models": names,
            "min_cacheable_tokens": minimums,
            "cacheable_calls": cacheable_calls,
            "cacheable_input_tokens": cacheable_input,
            "cacheable_cached_share": ratio(read_share),
            "missed_calls": missed,
            "cache_lifetime_seconds": lifetimes,
            "judged_from": if from_rows { "requests" } else { "aggregates" },
            "peer_median_cached_share": peers.median.map(ratio),
            "peers": peers.count,
            "cold_start": peers.cold_start,
        }),
        explanation: format!(
            "{} calls read {} of {} prompt tokens from the prompt cache ({:.1}%) {peers_text}; {} of the calls ({} prompt tokens) could have read it, and caching them like the peers would have saved about ${:.4}",
            s.requests,
            s.cached_tokens,
            s.input_tokens,
            share * 100.0,
            cacheable_calls,
            cacheable_input,
            impact
        ),
    };
    super::note_computed_cost(s, &mut f);
    Some(if alone && once_ended.is_none() {
        Judged::Alone(f)
    } else {
        Judged::Weak(Weak {
            finding: f,
            needs: rule.corroborating_sessions,
            once_ended,
            alone,
        })
    })
}

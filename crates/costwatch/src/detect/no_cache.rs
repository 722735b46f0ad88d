//! A no-cache conversation: a session of at least `min_missed_calls` (2)
//! calls that could have read the prompt cache and read nothing, while its
//! peers do.
//!
//! A call could have read the cache when an earlier successful call of the
//! session on the same model, at most the model's cache lifetime before it,
//! had a prompt of at least the model's minimum cacheable prefix, and so
//! did the call itself. A single such miss is the providers' best-effort
//! caching, never a finding by itself: a session of two calls whose second
//! missed is not a no-cache conversation.
//!
//! The aggregates nominate (a cache-capable model with two calls' worth of
//! cacheable prompt, nearly nothing read, peers that cache); the request
//! rows decide, call by call, and say why each call that read nothing
//! missed ([`Cause`]). Only what the team could have saved counts in the
//! impact: the calls whose prefix changed, the calls sent to another
//! provider or deployment, and the write premium of cache writes no later
//! call read. A pause longer than the cache lives is shown with what a
//! longer lifetime would have saved; a conversation's first call and calls
//! below the minimum never count.

use super::rules::{NoCache, NoCacheRule};
use super::{Catalogue, FactFrom, Finding, GroupStats, Kind, avg_input, cached_share, ratio, usd};
use crate::source::{RequestRecord, RequestStatus, SessionRecord, Window};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

mod facts;
pub use facts::CachingFacts;

/// The smallest cacheable prefix of `model`: see [`min_cacheable_from`].
pub fn min_cacheable(model: &str, cat: &Catalogue, rule: &NoCacheRule) -> u64 {
    min_cacheable_from(model, cat, rule).0
}

/// The smallest cacheable prefix of `model` and where it came from: the
/// rule's per-model value; else the smallest prefix the traffic showed read
/// where it is below the prior; else the prior, the model's own row or the
/// shipped table; else the rule's default.
pub fn min_cacheable_from(model: &str, cat: &Catalogue, rule: &NoCache) -> (u64, FactFrom) {
    if let Some(v) = rule.model_min_cacheable_tokens.get(model) {
        return ((*v).max(1), FactFrom::Rule);
    }
    let prior = cat
        .min_cacheable(model)
        .unwrap_or((rule.min_cacheable_tokens, FactFrom::Rule));
    let fact = match cat.observed(model).min_cacheable {
        Some(seen) if seen < prior.0 => (seen, FactFrom::Observed),
        _ => prior,
    };
    (fact.0.max(1), fact.1)
}

/// How long a cached prefix of `model` lives after its last use: see
/// [`cache_lifetime_from`].
pub fn cache_lifetime(model: &str, cat: &Catalogue, rule: &NoCacheRule) -> Duration {
    cache_lifetime_from(model, cat, rule).0
}

/// How long a cached prefix of `model` lives after its last use, and where
/// that came from: the rule's per-model value; else the longest pause the
/// traffic showed a read after, where it is longer than the prior; else the
/// prior, the model's own row or the shipped table; else the rule's
/// default.
pub fn cache_lifetime_from(model: &str, cat: &Catalogue, rule: &NoCache) -> (Duration, FactFrom) {
    if let Some(v) = rule.model_cache_lifetime.get(model) {
        return (*v, FactFrom::Rule);
    }
    let prior = cat
        .cache_lifetime(model)
        .unwrap_or((rule.cache_lifetime, FactFrom::Rule));
    match cat.observed(model).lifetime {
        Some(seen) if seen > prior.0 => (seen, FactFrom::Observed),
        _ => prior,
    }
}

/// Whether any of the session's calls could have read the cache, as far as
/// its aggregates tell (O(models)): a cache-capable model with two calls
/// and at least twice its minimum of prompt (one call writes the prefix, a
/// later one reads it). Models without a prompt cache never could.
fn could_read(s: &SessionRecord, cat: &Catalogue, rule: &NoCacheRule) -> bool {
    s.by_model
        .iter()
        .filter(|m| cat.supports_cache(&m.model))
        .any(|m| {
            m.requests >= 2
                && m.input_tokens >= min_cacheable(&m.model, cat, rule).saturating_mul(2)
        })
}

/// Whether an uncached session says something of its group's caching: on
/// some cache-capable model its prompts average at least the model's
/// minimum cacheable prefix. One whose prompts mostly stay below it could
/// not have cached much whatever its group does (a short conversation that
/// crosses the minimum on its last call), so it stays out of the group's
/// history: a thin history of such sessions must not read as a group that
/// does not cache.
pub fn tells_of_group(s: &SessionRecord, cat: &Catalogue, rule: &NoCacheRule) -> bool {
    s.by_model
        .iter()
        .filter(|m| cat.supports_cache(&m.model) && m.requests > 0)
        .any(|m| m.input_tokens >= min_cacheable(&m.model, cat, rule).saturating_mul(m.requests))
}

/// Whether the session could have used the prompt cache at all: enough calls,
/// prompts above the cacheable minimum, and a model with a prompt cache
/// (a session mixing in a model without one, say an extraction model, is
/// judged on the others); and whether its cache reads are known (a source
/// that reported none for it says nothing either way).
pub fn eligible(s: &SessionRecord, cat: &Catalogue, rule: &NoCacheRule) -> bool {
    s.requests >= rule.min_requests.max(rule.min_missed_calls + 1)
        && !s.cache_unreported
        && avg_input(s) >= rule.min_avg_input_tokens as f64
        && could_read(s, cat, rule)
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
    eligible(s, cat, rule) && capable_cached_share(s, cat) <= rule.max_cached_share
}

/// Why a call that read nothing from the prompt cache missed it; and
/// [`Cause::WrittenNeverRead`], a call whose cache write no later call
/// read. The names are the keys of a finding's `cache_miss_causes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Cause {
    /// The session's first cacheable call: there was nothing to read yet.
    ColdStart,
    /// The prompt was below the model's minimum cacheable prefix.
    BelowMinimum,
    /// The pause since the previous call on the model (or, for a model's
    /// first call, since the conversation's previous call) outlived the
    /// model's cache lifetime.
    TtlExpired,
    /// The model's first call after the conversation ran on another model
    /// within the cache lifetime: a cache lives with one model.
    ModelSwitch,
    /// Cacheable, in time and on the same model, but served by another
    /// provider or deployment than the call that last used the prefix on
    /// that model.
    ProviderSwitch,
    /// Cacheable, in time, same model and provider, and read nothing: the
    /// prompt's start changed (a timestamp, a reordered tool list). The
    /// one a team fixes in its own code.
    PrefixChanged,
    /// A cache write that no later call read: its premium bought nothing.
    WrittenNeverRead,
}

impl Cause {
    /// Every cause, in the order evidence lists them.
    pub const ALL: [Cause; 7] = [
        Cause::ColdStart,
        Cause::BelowMinimum,
        Cause::TtlExpired,
        Cause::ModelSwitch,
        Cause::ProviderSwitch,
        Cause::PrefixChanged,
        Cause::WrittenNeverRead,
    ];

    /// The cause's name in evidence.
    pub fn name(self) -> &'static str {
        match self {
            Cause::ColdStart => "cold_start",
            Cause::BelowMinimum => "below_minimum",
            Cause::TtlExpired => "ttl_expired",
            Cause::ModelSwitch => "model_switch",
            Cause::ProviderSwitch => "provider_switch",
            Cause::PrefixChanged => "prefix_changed",
            Cause::WrittenNeverRead => "written_never_read",
        }
    }

    /// Whether its dollars count in the impact: what the team could have
    /// saved by fixing its own calls.
    pub fn avoidable(self) -> bool {
        matches!(
            self,
            Cause::PrefixChanged | Cause::ProviderSwitch | Cause::WrittenNeverRead
        )
    }

    /// What it means, for a person reading the explanation.
    fn meaning(self) -> &'static str {
        match self {
            Cause::ColdStart => "the conversation's first cacheable call",
            Cause::BelowMinimum => "prompts below the model's minimum cacheable prefix",
            Cause::TtlExpired => "pauses longer than the cache lives",
            Cause::ModelSwitch => "the conversation moved to another model",
            Cause::ProviderSwitch => {
                "calls served by another provider or deployment than the one holding the cache"
            }
            Cause::PrefixChanged => {
                "the prompt's start changed between calls, as a timestamp or a reordered tool list does"
            }
            Cause::WrittenNeverRead => "cache writes no later call read",
        }
    }
}

/// The calls of one cause and what a working cache would have saved on
/// them (for [`Cause::WrittenNeverRead`], the write premium paid).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Tally {
    /// Calls.
    pub calls: u64,
    /// Dollars.
    pub usd: f64,
}

/// Why each call of a session missed the cache, and what the calls that
/// could have read it read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Misses {
    /// Per cause.
    pub causes: BTreeMap<Cause, Tally>,
    /// Calls that could have read the cache.
    pub could_read: u64,
    /// Their prompt tokens.
    pub could_read_input: u64,
    /// What they read.
    pub could_read_cached: u64,
    /// Those of them that read nothing.
    pub missed: u64,
}

impl Misses {
    fn add(&mut self, cause: Cause, usd: f64) {
        let t = self.causes.entry(cause).or_default();
        t.calls += 1;
        t.usd += usd;
    }

    /// What the team could have saved: the avoidable causes' dollars.
    pub fn avoidable_usd(&self) -> f64 {
        self.causes
            .iter()
            .filter(|(c, _)| c.avoidable())
            .map(|(_, t)| t.usd)
            .sum()
    }

    /// The avoidable cause with the most dollars; else, where none saved
    /// anything, the cause with the most calls.
    pub fn dominant(&self) -> Option<Cause> {
        let avoidable = self
            .causes
            .iter()
            .filter(|(c, t)| c.avoidable() && t.usd > 0.0)
            .max_by(|a, b| a.1.usd.total_cmp(&b.1.usd).then(b.0.cmp(a.0)))
            .map(|(c, _)| *c);
        avoidable.or_else(|| {
            self.causes
                .iter()
                .filter(|(_, t)| t.calls > 0)
                .max_by(|a, b| a.1.calls.cmp(&b.1.calls).then(b.0.cmp(a.0)))
                .map(|(c, _)| *c)
        })
    }

    /// The causes as evidence: name → `{calls, usd}`.
    fn evidence(&self) -> Value {
        let mut out = Map::new();
        for (c, t) in &self.causes {
            out.insert(
                c.name().into(),
                json!({"calls": t.calls, "usd": usd(t.usd)}),
            );
        }
        Value::Object(out)
    }
}

/// One cache-capable model of a candidate: its minimum, its cache's
/// lifetime, what a cached prompt token saves on it and what a written one
/// costs above an uncached one.
#[derive(Debug, Clone, PartialEq)]
struct ModelCache {
    model: String,
    min_tokens: u64,
    min_from: FactFrom,
    lifetime: Duration,
    lifetime_from: FactFrom,
    discount_usd_per_mtok: f64,
    write_premium_usd_per_mtok: f64,
}

fn model_caches(s: &SessionRecord, cat: &Catalogue, rule: &NoCacheRule) -> Vec<ModelCache> {
    s.by_model
        .iter()
        .map(|m| m.model.as_str())
        .filter(|m| cat.supports_cache(m))
        .filter_map(|m| {
            let p = cat.get(m)?;
            let (min_tokens, min_from) = min_cacheable_from(m, cat, rule);
            let (lifetime, lifetime_from) = cache_lifetime_from(m, cat, rule);
            Some(ModelCache {
                model: m.to_owned(),
                min_tokens,
                min_from,
                lifetime,
                lifetime_from,
                discount_usd_per_mtok: p.input_usd_per_mtok - p.cached_input_usd_per_mtok?,
                write_premium_usd_per_mtok: p
                    .cache_write_usd_per_mtok
                    .map_or(0.0, |w| (w - p.input_usd_per_mtok).max(0.0)),
            })
        })
        .collect()
}

/// The last call on a model that wrote or read its prefix.
#[derive(Debug, Clone, Copy)]
struct Use<'r> {
    at: DateTime<Utc>,
    provider: Option<&'r str>,
    input: u64,
}

fn within(earlier: DateTime<Utc>, later: DateTime<Utc>, lifetime: Duration) -> bool {
    (later - earlier)
        .to_std()
        .is_ok_and(|pause| pause <= lifetime)
}

/// Classifies every successful call on a cache-capable model that read
/// nothing (rows oldest first), and every cache write no later call read
/// once the cache has expired by `now`. A call's saving is the prefix a
/// working cache would have read: the smaller of its prompt and that of
/// the call that last used the prefix. The rows carry no end times, so
/// pauses are measured from start to start: a slow call can make a pause
/// look up to its own latency longer, which errs towards no finding.
fn misses(requests: &[RequestRecord], models: &[ModelCache], now: DateTime<Utc>) -> Misses {
    let mut out = Misses::default();
    let mut last: Vec<Option<Use<'_>>> = vec![None; models.len()];
    let mut writes: Vec<Vec<u64>> = vec![Vec::new(); models.len()];
    // The conversation's previous cacheable call: its time and model.
    let mut prev: Option<(DateTime<Utc>, usize)> = None;
    let never_read = |out: &mut Misses, m: &ModelCache, pending: &mut Vec<u64>| {
        for tokens in pending.drain(..) {
            out.add(
                Cause::WrittenNeverRead,
                tokens as f64 * m.write_premium_usd_per_mtok / 1e6,
            );
        }
    };
    for r in requests {
        if r.status != RequestStatus::Success {
            continue;
        }
        let Some(i) = models.iter().position(|m| m.model == r.model) else {
            continue;
        };
        let m = &models[i];
        let cached = r.cached_tokens.min(r.input_tokens);
        let alive = last[i].filter(|u| within(u.at, r.created_at, m.lifetime));
        if last[i].is_some() && alive.is_none() {
            never_read(&mut out, m, &mut writes[i]);
        }
        if r.input_tokens < m.min_tokens {
            if cached == 0 {
                out.add(Cause::BelowMinimum, 0.0);
            }
            continue;
        }
        let provider = r.provider.as_deref();
        let saving =
            |u: &Use<'_>| r.input_tokens.min(u.input) as f64 * m.discount_usd_per_mtok / 1e6;
        if let Some(u) = &alive {
            out.could_read += 1;
            out.could_read_input += r.input_tokens;
            out.could_read_cached += cached;
            if cached == 0 {
                out.missed += 1;
                let moved = matches!((u.provider, provider), (Some(a), Some(b)) if a != b);
                let cause = if moved {
                    Cause::ProviderSwitch
                } else {
                    Cause::PrefixChanged
                };
                out.add(cause, saving(u));
            }
        } else if cached == 0 {
            match (&last[i], prev) {
                (Some(u), _) => out.add(Cause::TtlExpired, saving(u)),
                (None, Some((at, _))) if within(at, r.created_at, m.lifetime) => {
                    out.add(Cause::ModelSwitch, 0.0);
                }
                (None, Some(_)) => out.add(Cause::TtlExpired, 0.0),
                (None, None) => out.add(Cause::ColdStart, 0.0),
            }
        }
        if cached > 0 {
            // Read: what was written before is paid back.
            writes[i].clear();
        }
        if r.cache_write_tokens > 0 {
            writes[i].push(r.cache_write_tokens);
        }
        last[i] = Some(Use {
            at: r.created_at,
            provider,
            input: r.input_tokens,
        });
        prev = Some((r.created_at, i));
    }
    // Writes still alive at `now` may yet be read.
    for (i, m) in models.iter().enumerate() {
        if last[i].is_some_and(|u| !within(u.at, now, m.lifetime)) {
            never_read(&mut out, m, &mut writes[i]);
        }
    }
    out
}

/// What the peers say a session of the group should cache.
#[derive(Debug, Clone, PartialEq)]
struct Peers {
    median: Option<f64>,
    count: usize,
    cold_start: bool,
}

fn peers(stats: &GroupStats, rule: &NoCacheRule) -> Option<Peers> {
    let median = stats.cache_median;
    let cold_start = stats.cache_peers < rule.min_peers;
    let waits = cold_start && !rule.wait_for_peers.is_zero();
    if !waits && median.is_some_and(|m| m < rule.min_peer_cached_share)
        || !cold_start && median.is_none()
    {
        // The peers do not cache either: nothing unusual about this
        // session. Said by fewer than `min_peers` too: a thin baseline is
        // not evidence against its own sessions (a new batch feature whose
        // shared template is below the minimum caches nothing from the
        // start). Unless the candidate waits for more peers: its own
        // uncached share may be most of what so few say.
        return None;
    }
    Some(Peers {
        median,
        count: stats.cache_peers,
        cold_start,
    })
}

/// The other sessions on a model, for a conversation of a group too thin
/// to say what it does: they cache (at least `min_peers` of them, with a
/// median cached share of at least `min_peer_cached_share`).
#[derive(Debug, Clone, PartialEq)]
struct ModelPeers {
    model: String,
    count: usize,
    median: f64,
}

/// The model a session of a thin group is judged on, when its other
/// sessions cache: the session's cache-capable model with the most calls.
fn model_peers(s: &SessionRecord, cat: &Catalogue, rule: &NoCacheRule) -> Option<ModelPeers> {
    let m = s
        .by_model
        .iter()
        .filter(|m| cat.supports_cache(&m.model))
        .max_by(|a, b| a.requests.cmp(&b.requests).then(b.model.cmp(&a.model)))?;
    let seen = cat.observed(&m.model);
    let (count, median) = seen.peers;
    let median = median?;
    (count >= rule.min_peers && median >= rule.min_peer_cached_share).then(|| ModelPeers {
        model: m.model.clone(),
        count,
        median,
    })
}

/// Fewest calls on one model that make a conversation's shape.
pub const CONVERSATION_CALLS: usize = 3;

/// Whether the session's successful calls on `model` (rows oldest first)
/// are a conversation: at least [`CONVERSATION_CALLS`] of them, each
/// holding the previous call's prompt, so the prompt grows by about the
/// last answer plus a new turn: by at least half the last answer, and by no
/// more than the prompt so far plus the last answer (a new turn no longer
/// than all that came before it). A batch of unrelated prompts rises and
/// falls.
pub fn is_conversation(requests: &[RequestRecord], model: &str) -> bool {
    let calls: Vec<&RequestRecord> = requests
        .iter()
        .filter(|r| r.status == RequestStatus::Success && r.model == model)
        .collect();
    calls.len() >= CONVERSATION_CALLS
        && calls.windows(2).all(|w| {
            let (a, b) = (w[0], w[1]);
            let least = a
                .input_tokens
                .saturating_add(a.output_tokens / 2)
                .max(a.input_tokens + 1);
            let most = a
                .input_tokens
                .saturating_mul(2)
                .saturating_add(a.output_tokens);
            (least..=most).contains(&b.input_tokens)
        })
}

/// A candidate whose peers cache, to judge from its request rows.
#[derive(Debug, Clone, PartialEq)]
pub struct RowCheck {
    peers: Peers,
    models: Vec<ModelCache>,
    rule: NoCacheRule,
    /// For a candidate of a thin group: its model's other sessions, where
    /// they cache.
    by_model: Option<ModelPeers>,
}

/// Judges a candidate against its group: the rows to read when its peers
/// cache (`None`: not unusual, or no cache-capable model priced). A group
/// with no history yet to go by (none of its sessions told anything of its
/// caching, [`tells_of_group`]) has only the candidate's own prompts: they
/// are read when they average at least the minimum, as a session of that
/// group that could have cached.
pub fn judge(
    s: &SessionRecord,
    stats: &GroupStats,
    cat: &Catalogue,
    rule: &NoCacheRule,
) -> Option<RowCheck> {
    let peers = peers(stats, rule)?;
    if peers.median.is_none() && !tells_of_group(s, cat, rule) {
        return None;
    }
    let models = model_caches(s, cat, rule);
    let by_model = peers
        .cold_start
        .then(|| model_peers(s, cat, rule))
        .flatten();
    (!models.is_empty()).then(|| RowCheck {
        peers,
        models,
        rule: rule.clone(),
        by_model,
    })
}

/// A session its rows show uncached.
#[derive(Debug)]
pub enum Judged {
    /// Its finding.
    Found(Finding),
    /// Its finding, of a session still going at the window's end (its
    /// last call less than a cache lifetime before it), which may start
    /// reading the cache in its next window: held until then (the rule's
    /// `judge_once_ended`; see [`super::held`]). The time is when a cache
    /// lifetime will have passed since its last call.
    Going(Finding, DateTime<Utc>),
    /// Its finding, in a group with too few peers to compare (the rule's
    /// `wait_for_peers`): held until the group's sessions say whether it
    /// caches ([`super::held`]). The time is as for [`Judged::Going`].
    Thin(Finding, DateTime<Utc>, PeerWait),
}

/// What a finding of a group with too few peers waits for: `min_peers` of
/// them, whose median cached share decides, until `until`; and what the
/// group's sessions said when it was last seen.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PeerWait {
    /// Peers the group needs.
    pub min_peers: usize,
    /// The median cached share they must reach for the finding to stand.
    pub min_peer_cached_share: f64,
    /// When the wait is over: the finding is decided by the peers there
    /// are then.
    pub until: DateTime<Utc>,
    /// The group's eligible sessions when it was last seen (the finding's
    /// own among them when it told of its group).
    pub peers: usize,
    /// Their median cached share.
    pub median: Option<f64>,
}

impl PeerWait {
    /// Notes what the group's sessions say now.
    pub fn saw(&mut self, peers: usize, median: Option<f64>) {
        self.peers = peers;
        self.median = median;
    }

    /// Whether the finding is decided by the end of `now`: `Some(true)` it
    /// stands, `Some(false)` it goes, `None` it waits on. With `min_peers`
    /// peers it stands when they cache; still too few once the wait is
    /// over, when the few seen cache. With no peer at all, nothing says
    /// its group caches: it goes.
    pub fn decide(&self, now: DateTime<Utc>) -> Option<bool> {
        let caches = self.median.is_some_and(|m| m >= self.min_peer_cached_share);
        if self.peers >= self.min_peers || now >= self.until {
            Some(caches)
        } else {
            None
        }
    }
}

/// Judges a candidate from its request rows (oldest first).
///
/// A candidate of a group too thin to compare waits for its group's peers
/// (`wait_for_peers`), unless it is a conversation ([`is_conversation`]) on
/// a model whose other sessions cache: it is then judged against them at
/// once. A feature broken from its first conversation is told.
pub fn confirm(
    s: &SessionRecord,
    requests: &[RequestRecord],
    check: &RowCheck,
    group: &str,
    window: Window,
) -> Option<Judged> {
    let rule = &check.rule;
    let conversation = check
        .by_model
        .as_ref()
        .filter(|p| is_conversation(requests, &p.model));
    if let Some(by_model) = conversation {
        let models = &check.models;
        if let Some(f) = uncached(s, requests, check, models, Some(by_model), group, window) {
            return Some(going_or_found(s, f, models, rule, window));
        }
    }
    let f = uncached(s, requests, check, &check.models, None, group, window)?;
    let wait = chrono::Duration::from_std(rule.wait_for_peers).ok();
    let until = wait.and_then(|w| window.end.checked_add_signed(w));
    match (quiet_at(s, &check.models), until) {
        (Some(at), Some(until)) if check.peers.cold_start && !rule.wait_for_peers.is_zero() => {
            let wait = PeerWait {
                min_peers: rule.min_peers,
                min_peer_cached_share: rule.min_peer_cached_share,
                until,
                peers: check.peers.count,
                median: check.peers.median,
            };
            Some(Judged::Thin(f, at, wait))
        }
        _ => Some(going_or_found(s, f, &check.models, rule, window)),
    }
}

/// The finding of a candidate whose rows (with `models`' minimums and
/// lifetimes) show it uncached, judged against its group or, with
/// `by_model`, against its model's other sessions.
fn uncached(
    s: &SessionRecord,
    requests: &[RequestRecord],
    check: &RowCheck,
    models: &[ModelCache],
    by_model: Option<&ModelPeers>,
    group: &str,
    window: Window,
) -> Option<Finding> {
    let rule = &check.rule;
    let m = misses(requests, models, window.end);
    if m.missed < rule.min_missed_calls || m.could_read_input == 0 {
        return None;
    }
    // Caching that starts partway reads a fair share of what it could.
    let read_share = m.could_read_cached as f64 / m.could_read_input as f64;
    if read_share > rule.max_cached_share {
        return None;
    }
    let impact = m.avoidable_usd();
    if impact < rule.min_impact_usd {
        return None;
    }
    let judged = Judging {
        peers: &check.peers,
        rule,
        models,
        by_model,
    };
    Some(finding(s, group, &judged, &m, read_share, impact, window))
}

/// When a cache lifetime of `models` will have passed since the session's
/// last call.
fn quiet_at(s: &SessionRecord, models: &[ModelCache]) -> Option<DateTime<Utc>> {
    let lifetime = models.iter().map(|m| m.lifetime).max().unwrap_or_default();
    chrono::Duration::from_std(lifetime)
        .ok()
        .and_then(|l| s.last_request_at.checked_add_signed(l))
}

/// A finding that stands now, or, for a session still going at the
/// window's end, is held until it ends (`judge_once_ended`).
fn going_or_found(
    s: &SessionRecord,
    f: Finding,
    models: &[ModelCache],
    rule: &NoCacheRule,
    window: Window,
) -> Judged {
    let lifetime = models.iter().map(|m| m.lifetime).max().unwrap_or_default();
    let ended = (window.end - s.last_request_at)
        .to_std()
        .is_ok_and(|quiet| quiet >= lifetime);
    match quiet_at(s, models) {
        Some(at) if rule.judge_once_ended && !ended => Judged::Going(f, at),
        _ => Judged::Found(f),
    }
}

/// The sentence naming the dominant cause and its dollars.
fn cause_text(m: &Misses, impact: f64) -> String {
    let Some(dominant) = m.dominant() else {
        return String::new();
    };
    let t = m.causes.get(&dominant).copied().unwrap_or_default();
    let mut text = if dominant.avoidable() && impact > 0.0 {
        format!(
            "; most of what could have been saved is {}, {} calls and ${:.4} of ${:.4} ({:.0}%): {}",
            dominant.name(),
            t.calls,
            t.usd,
            impact,
            t.usd / impact * 100.0,
            dominant.meaning()
        )
    } else {
        format!(
            "; most misses are {}, {} calls: {}, which no fix of the calls would have saved",
            dominant.name(),
            t.calls,
            dominant.meaning()
        )
    };
    if let Some(ttl) = m
        .causes
        .get(&Cause::TtlExpired)
        .filter(|t| t.usd > 0.0 && dominant != Cause::TtlExpired)
    {
        text.push_str(&format!(
            "; a longer cache lifetime would have saved ${:.4} more on {} calls",
            ttl.usd, ttl.calls
        ));
    } else if dominant == Cause::TtlExpired && t.usd > 0.0 {
        text.push_str(&format!(
            "; a longer cache lifetime would have saved ${:.4}",
            t.usd
        ));
    }
    text
}

/// What a finding was judged with: its group's peers, the rule, the
/// models' caching facts and, for a conversation of a thin group, the
/// model's other sessions.
struct Judging<'a> {
    peers: &'a Peers,
    rule: &'a NoCacheRule,
    models: &'a [ModelCache],
    by_model: Option<&'a ModelPeers>,
}

fn finding(
    s: &SessionRecord,
    group: &str,
    judged: &Judging<'_>,
    m: &Misses,
    read_share: f64,
    impact: f64,
    window: Window,
) -> Finding {
    let (peers, rule, models) = (judged.peers, judged.rule, judged.models);
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
    let facts_from: BTreeMap<&str, Value> = models
        .iter()
        .map(|m| {
            let from = json!({
                "min_cacheable_tokens": m.min_from.as_str(),
                "cache_lifetime_seconds": m.lifetime_from.as_str(),
            });
            (m.model.as_str(), from)
        })
        .collect();
    let peers_text = match (judged.by_model, peers.cold_start, peers.median) {
        (Some(p), _, _) => format!(
            "while {} other sessions on {} cached a median {:.0}% ({group} is too new to compare, {} of {} peers, and its prompts grow call by call as a conversation's do)",
            p.count,
            p.model,
            p.median * 100.0,
            peers.count,
            rule.min_peers
        ),
        (None, false, Some(m)) => format!(
            "while {} peers in {group} cached a median {:.0}%",
            peers.count,
            m * 100.0
        ),
        (None, ..) if !rule.wait_for_peers.is_zero() => format!(
            "and {group} had too few peers to compare when it was found ({} of {})",
            peers.count, rule.min_peers
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
            "cacheable_calls": m.could_read,
            "cacheable_input_tokens": m.could_read_input,
            "cacheable_cached_share": ratio(read_share),
            "missed_calls": m.missed,
            "cache_lifetime_seconds": lifetimes,
            "cache_miss_causes": m.evidence(),
            "dominant_cause": m.dominant().map(Cause::name),
            "caching_facts_from": facts_from,
            "peer_median_cached_share": peers.median.map(ratio),
            "peers": peers.count,
            "cold_start": peers.cold_start,
        }),
        explanation: format!(
            "{} calls read {} of {} prompt tokens from the prompt cache ({:.1}%) {peers_text}; {} of the {} calls that could have read it read nothing{}",
            s.requests,
            s.cached_tokens,
            s.input_tokens,
            share * 100.0,
            m.missed,
            m.could_read,
            cause_text(m, impact)
        ),
    };
    if let (Some(p), Some(e)) = (judged.by_model, f.evidence.as_object_mut()) {
        e.insert("judged_against".into(), "model".into());
        e.insert(
            "model_peers".into(),
            json!({"model": p.model, "sessions": p.count, "median_cached_share": ratio(p.median)}),
        );
        e.insert("conversation".into(), true.into());
    }
    super::note_computed_cost(s, &mut f);
    f
}

//! What the traffic shows of each model's prompt cache, which outranks
//! the shipped table (`pricing/caching.rs`): the table is only the prior.
//!
//! - **The smallest prefix seen read.** A call that read `n` tokens from
//!   the cache proves that a prefix of `n` tokens is cacheable on its model:
//!   below the minimum a provider caches nothing and reports 0. A session's
//!   aggregate that read `n` tokens in all proves it too (its smallest read
//!   was at most `n`). The [`KEEP`]th smallest of these is the model's
//!   observed minimum, so that one odd row cannot lower it.
//! - **The longest pause after which a call still read**, from the request
//!   rows costwatch reads: the [`KEEP`]th longest is the model's observed
//!   cache lifetime.
//! - **How the model's sessions cache**: the cached shares of the sessions
//!   that could have cached on it, in [`BUCKETS`] buckets whose weights
//!   halve once they pass [`MAX_WEIGHT`], so the figure follows the recent
//!   traffic. A conversation of a group too new to say what it does is
//!   judged against them (`no_cache`).
//!
//! The evidence only ever lowers a minimum or lengthens a lifetime: not
//! seeing a small prompt read says nothing. A rule's
//! `model_min_cacheable_tokens` and `model_cache_lifetime_seconds` still
//! win over it, because a person said so. It is kept in the state
//! database, so restarts and replicas share it.

use super::Catalogue;
use super::rules::NoCacheRule;
use crate::source::{RequestRecord, RequestStatus, SessionRecord, Window};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How many observations stand behind an observed minimum or lifetime.
pub const KEEP: usize = 2;
/// Buckets of the cached-share histogram, each `1 / BUCKETS` wide.
pub const BUCKETS: usize = 20;
/// The histogram's weight past which it is halved.
pub const MAX_WEIGHT: f64 = 2_000.0;
/// Most models kept; the evidence of more is not learned.
pub const MAX_MODELS: usize = 4_096;

/// Where a caching fact used in a judgement came from, as a finding's
/// evidence names it (`caching_facts_from`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FactFrom {
    /// The caching facts shipped inside the binary (`pricing/caching.json`).
    Table,
    /// The model's own price row: `source.models_file`, or the gateway's
    /// catalogue where it publishes the field.
    ModelsFile,
    /// The rule: its per-model value, or its default where nothing else
    /// knows the model.
    Rule,
    /// What the traffic showed ([`ModelCaching`]).
    Observed,
}

impl FactFrom {
    /// The name in evidence and in listings.
    pub fn as_str(self) -> &'static str {
        match self {
            FactFrom::Table => "table",
            FactFrom::ModelsFile => "models_file",
            FactFrom::Rule => "rule",
            FactFrom::Observed => "observed",
        }
    }
}

/// What the traffic showed of one model's cache.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelCaching {
    /// The smallest cache reads seen, in tokens, ascending, at most
    /// [`KEEP`].
    #[serde(default)]
    pub reads: Vec<u64>,
    /// The longest pauses after which a call still read, in seconds,
    /// descending, at most [`KEEP`].
    #[serde(default)]
    pub read_gaps: Vec<u64>,
    /// Sessions that could have cached on the model, weighted, by cached
    /// share ([`BUCKETS`] entries once any was seen).
    #[serde(default)]
    pub shares: Vec<f64>,
}

impl ModelCaching {
    /// Notes a cache read of `tokens`.
    pub fn note_read(&mut self, tokens: u64) {
        if tokens > 0 {
            keep_smallest(&mut self.reads, tokens);
        }
    }

    /// Notes a read `seconds` after the model's previous call.
    pub fn note_gap(&mut self, seconds: u64) {
        if seconds > 0 {
            keep_longest(&mut self.read_gaps, seconds);
        }
    }

    /// Notes a session that could have cached on the model and read
    /// `share` of its prompt.
    pub fn note_share(&mut self, share: f64) {
        if !share.is_finite() {
            return;
        }
        if self.shares.len() != BUCKETS {
            self.shares = vec![0.0; BUCKETS];
        }
        let i = ((share.clamp(0.0, 1.0) * BUCKETS as f64) as usize).min(BUCKETS - 1);
        self.shares[i] += 1.0;
        self.decay();
    }

    fn decay(&mut self) {
        if self.weight() > MAX_WEIGHT {
            for w in &mut self.shares {
                *w /= 2.0;
            }
        }
    }

    /// Takes in what another read showed.
    pub fn merge(&mut self, other: &ModelCaching) {
        for r in &other.reads {
            self.note_read(*r);
        }
        for g in &other.read_gaps {
            self.note_gap(*g);
        }
        if other.shares.len() == BUCKETS {
            if self.shares.len() != BUCKETS {
                self.shares = vec![0.0; BUCKETS];
            }
            for (w, o) in self.shares.iter_mut().zip(&other.shares) {
                *w += o;
            }
            self.decay();
        }
    }

    /// The observed minimum cacheable prefix: the [`KEEP`]th smallest read,
    /// once that many were seen.
    pub fn min_cacheable(&self) -> Option<u64> {
        (self.reads.len() >= KEEP).then(|| self.reads[KEEP - 1])
    }

    /// The observed cache lifetime, in seconds: the [`KEEP`]th longest pause
    /// after which a call still read, once that many were seen.
    pub fn lifetime(&self) -> Option<u64> {
        (self.read_gaps.len() >= KEEP).then(|| self.read_gaps[KEEP - 1])
    }

    /// The weight of the sessions behind the cached shares.
    pub fn weight(&self) -> f64 {
        self.shares.iter().sum()
    }

    /// How many sessions say how the model caches (the weight, rounded
    /// down), and their median cached share (within a bucket, by linear
    /// interpolation).
    pub fn peers(&self) -> (usize, Option<f64>) {
        let total = self.weight();
        if total <= 0.0 {
            return (0, None);
        }
        let half = total / 2.0;
        let mut below = 0.0;
        for (i, w) in self.shares.iter().enumerate() {
            if *w > 0.0 && below + w >= half {
                let within = ((half - below) / w).clamp(0.0, 1.0);
                return (total as usize, Some((i as f64 + within) / BUCKETS as f64));
            }
            below += w;
        }
        (total as usize, Some(1.0))
    }

    /// Whether it holds anything.
    pub fn is_empty(&self) -> bool {
        self.reads.is_empty() && self.read_gaps.is_empty() && self.weight() <= 0.0
    }
}

fn keep_smallest(kept: &mut Vec<u64>, v: u64) {
    let at = kept.partition_point(|k| *k <= v);
    if at < KEEP {
        kept.insert(at, v);
        kept.truncate(KEEP);
    }
}

fn keep_longest(kept: &mut Vec<u64>, v: u64) {
    let at = kept.partition_point(|k| *k >= v);
    if at < KEEP {
        kept.insert(at, v);
        kept.truncate(KEEP);
    }
}

/// What the traffic showed of every model's cache, by model id.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CachingEvidence {
    models: BTreeMap<String, ModelCaching>,
}

/// No evidence, for a commit that has none.
static NONE: CachingEvidence = CachingEvidence {
    models: BTreeMap::new(),
};

impl CachingEvidence {
    /// Notes what a session, in the window of its first call, shows of
    /// its models' caches: each model's cache reads (the tokens read in
    /// all, at least the smallest one read), and, under a no_cache `rule`,
    /// the cached share of each cache-capable model its prompts could have
    /// cached on (two calls or more, averaging at least the model's
    /// minimum).
    pub fn note_session(&mut self, s: &SessionRecord, cat: &Catalogue, rule: Option<&NoCacheRule>) {
        if s.cache_unreported {
            return;
        }
        for m in &s.by_model {
            let read = m.cached_tokens.min(m.input_tokens);
            let could = rule.is_some_and(|r| {
                cat.supports_cache(&m.model)
                    && m.requests >= 2
                    && m.input_tokens
                        >= super::no_cache::min_cacheable(&m.model, cat, r)
                            .saturating_mul(m.requests)
            });
            if read == 0 && !could {
                continue;
            }
            let Some(e) = self.model_mut(&m.model) else {
                return;
            };
            e.note_read(read);
            if could {
                e.note_share(read as f64 / m.input_tokens as f64);
            }
        }
    }

    /// No evidence at all.
    pub fn none() -> &'static CachingEvidence {
        &NONE
    }

    /// Evidence of these models.
    pub fn from_models(models: impl IntoIterator<Item = (String, ModelCaching)>) -> Self {
        CachingEvidence {
            models: models.into_iter().collect(),
        }
    }

    /// One model's, where any was seen.
    pub fn get(&self, model: &str) -> Option<&ModelCaching> {
        self.models.get(model)
    }

    /// Every model's, in id order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &ModelCaching)> {
        self.models.iter()
    }

    /// Whether nothing was seen.
    pub fn is_empty(&self) -> bool {
        self.models.values().all(ModelCaching::is_empty)
    }

    /// The entry of `model` to note into; `None` past [`MAX_MODELS`].
    pub fn model_mut(&mut self, model: &str) -> Option<&mut ModelCaching> {
        if !self.models.contains_key(model) {
            if self.models.len() >= MAX_MODELS {
                return None;
            }
            self.models
                .insert(model.to_owned(), ModelCaching::default());
        }
        self.models.get_mut(model)
    }

    /// Notes what one session's request rows (oldest first) show: each
    /// successful call made in `window` that read the cache, with the
    /// pause since the session's previous successful call on its model.
    /// Calls of other windows are left to theirs, so a call counts once
    /// however often its session is read.
    pub fn note_rows(&mut self, requests: &[RequestRecord], window: Window) {
        let mut last: Vec<(&str, chrono::DateTime<chrono::Utc>)> = Vec::new();
        for r in requests {
            if r.status != RequestStatus::Success {
                continue;
            }
            let previous = last.iter_mut().find(|(m, _)| *m == r.model);
            let gap = previous
                .as_ref()
                .and_then(|(_, at)| (r.created_at - *at).to_std().ok())
                .map(|d| d.as_secs());
            match previous {
                Some(p) => p.1 = r.created_at,
                None => last.push((r.model.as_str(), r.created_at)),
            }
            let read = r.cached_tokens.min(r.input_tokens);
            if read == 0 || !window.contains(r.created_at) {
                continue;
            }
            let Some(e) = self.model_mut(&r.model) else {
                return;
            };
            e.note_read(read);
            if let Some(gap) = gap {
                e.note_gap(gap);
            }
        }
    }

    /// Takes in what another read showed.
    pub fn merge(&mut self, other: &CachingEvidence) {
        for (model, e) in &other.models {
            if let Some(mine) = self.model_mut(model) {
                mine.merge(e);
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_minimum_needs_two_reads_and_is_the_second_smallest() {
        let mut m = ModelCaching::default();
        m.note_read(1_280);
        m.note_read(0);
        assert_eq!(m.min_cacheable(), None, "one read is not enough");
        m.note_read(5_000);
        assert_eq!(m.min_cacheable(), Some(5_000));
        m.note_read(1_152);
        assert_eq!(m.reads, vec![1_152, 1_280]);
        assert_eq!(m.min_cacheable(), Some(1_280));
        // One odd row alone does not lower it below the others.
        m.note_read(3);
        assert_eq!(m.min_cacheable(), Some(1_152));
    }

    #[test]
    fn the_lifetime_is_the_second_longest_pause_after_which_a_call_read() {
        let mut m = ModelCaching::default();
        for g in [30, 400, 290, 310, 5] {
            m.note_gap(g);
        }
        assert_eq!(m.read_gaps, vec![400, 310]);
        assert_eq!(m.lifetime(), Some(310));
    }

    #[test]
    fn the_median_share_follows_the_sessions_and_decays_to_the_recent_ones() {
        let mut m = ModelCaching::default();
        assert_eq!(m.peers(), (0, None));
        for _ in 0..9 {
            m.note_share(0.9);
        }
        m.note_share(0.0);
        let (n, median) = m.peers();
        assert_eq!(n, 10);
        assert!((0.85..=0.95).contains(&median.unwrap()), "{median:?}");
        // Thousands of uncached sessions later, the old ones weigh little.
        for _ in 0..5_000 {
            m.note_share(0.0);
        }
        let (n, median) = m.peers();
        assert!(n <= MAX_WEIGHT as usize, "{n}");
        assert!(median.unwrap() < 0.05, "{median:?}");
    }

    #[test]
    fn merging_keeps_the_extremes_and_adds_the_shares() {
        let mut a = CachingEvidence::default();
        let mut b = CachingEvidence::default();
        a.model_mut("m").unwrap().note_read(2_048);
        a.model_mut("m").unwrap().note_share(1.0);
        b.model_mut("m").unwrap().note_read(1_024);
        b.model_mut("m").unwrap().note_gap(600);
        b.model_mut("m").unwrap().note_share(0.5);
        b.model_mut("n").unwrap().note_read(7);
        a.merge(&b);
        let m = a.get("m").unwrap();
        assert_eq!(m.reads, vec![1_024, 2_048]);
        assert_eq!(m.read_gaps, vec![600]);
        assert_eq!(m.peers().0, 2);
        assert_eq!(a.get("n").unwrap().reads, vec![7]);
        let json = serde_json::to_string(m).unwrap();
        assert_eq!(serde_json::from_str::<ModelCaching>(&json).unwrap(), *m);
    }
}

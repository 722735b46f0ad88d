//! One window's pass: every session is seen once as its page streams by
//! (O(1) work, folded into bounded per-group samples); only candidates are
//! kept. After the last page, candidates are judged against their group's
//! baseline (history plus this window), and retry-loop candidates are handed
//! back for a request drill-down.

use super::baseline::GroupBaseline;
use super::retry_loop::Trigger;
use super::{
    Catalogue, Diagnostic, Finding, GroupStats, cached_share, group_key, no_cache, oversized_model,
    retry_loop,
};
use crate::config::rules::select;
use crate::config::{NoCacheRule, OversizedModelRule, RetryLoopRule, Rules};
use crate::source::{RequestRecord, SessionRecord, Window};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// The rules and settings every window is checked with.
#[derive(Debug, Clone)]
pub struct Detector {
    /// Detector rules.
    pub rules: Rules,
    /// Labels that form peer groups.
    pub group_by: Vec<String>,
    /// Sessions kept per group baseline.
    pub baseline_samples: usize,
    /// Largest number of candidates kept per window.
    pub max_candidates: usize,
}

/// A session kept for judging.
#[derive(Debug, Clone)]
struct Candidate {
    session: SessionRecord,
    group: String,
    no_cache: bool,
    oversized: bool,
    retry: bool,
}

/// A retry-loop candidate waiting for its requests.
#[derive(Debug, Clone)]
pub struct RetryCandidate {
    /// The session.
    pub session: SessionRecord,
    /// Its peer group.
    pub group: String,
    /// Why it was nominated.
    pub trigger: Trigger,
    stats: GroupStats,
    rule: RetryLoopRule,
}

/// The state of one window while its pages stream in.
#[derive(Debug)]
pub struct WindowAnalysis<'d> {
    det: &'d Detector,
    window: Window,
    catalogue: Catalogue,
    fresh: HashMap<String, GroupBaseline>,
    candidates: Vec<Candidate>,
    sessions: u64,
    skipped_candidates: u64,
    diagnostics: Vec<Diagnostic>,
    models_seen: BTreeSet<String>,
}

/// The outcome of judging a window, before drill-downs.
#[derive(Debug)]
pub struct Judgement {
    /// Findings that need nothing more.
    pub findings: Vec<Finding>,
    /// Retry-loop candidates to confirm from their requests.
    pub drilldowns: Vec<RetryCandidate>,
    /// Baselines to store for the groups seen.
    pub baselines: HashMap<String, GroupBaseline>,
    /// Odd things noticed.
    pub diagnostics: Vec<Diagnostic>,
    /// Sessions seen in the window.
    pub sessions: u64,
    /// Models seen carrying traffic in the window.
    pub models_seen: BTreeSet<String>,
}

/// Most diagnostics kept per window; beyond it they are only counted.
const MAX_DIAGNOSTICS: usize = 100;

impl Detector {
    /// Starts a window. `catalogue` holds the gateway's prices and the models
    /// known to be in use.
    pub fn begin(&self, window: Window, catalogue: Catalogue) -> WindowAnalysis<'_> {
        WindowAnalysis {
            det: self,
            window,
            catalogue,
            fresh: HashMap::new(),
            candidates: Vec::new(),
            sessions: 0,
            skipped_candidates: 0,
            diagnostics: Vec::new(),
            models_seen: BTreeSet::new(),
        }
    }

    fn no_cache_rule(&self, s: &SessionRecord) -> Option<&NoCacheRule> {
        select(&self.rules.no_cache, |r| &r.meta, &s.labels)
    }

    fn oversized_rule(&self, s: &SessionRecord) -> Option<&OversizedModelRule> {
        select(&self.rules.oversized_model, |r| &r.meta, &s.labels)
    }

    fn retry_rule(&self, s: &SessionRecord) -> Option<&RetryLoopRule> {
        select(&self.rules.retry_loop, |r| &r.meta, &s.labels)
    }

    /// Confirms or drops a retry-loop candidate from its requests (oldest first).
    pub fn confirm_retry(
        &self,
        c: &RetryCandidate,
        requests: &[RequestRecord],
        window: Window,
    ) -> Option<Finding> {
        retry_loop::confirm(
            &c.session, requests, c.trigger, &c.group, &c.stats, &c.rule, window,
        )
    }
}

impl WindowAnalysis<'_> {
    fn diagnose(&mut self, session_id: Option<&str>, message: String) {
        if self.diagnostics.len() < MAX_DIAGNOSTICS {
            self.diagnostics.push(Diagnostic {
                session_id: session_id.map(str::to_owned),
                message,
            });
        }
    }

    /// Takes one session as its page arrives.
    pub fn observe(&mut self, mut s: SessionRecord) {
        self.sessions += 1;
        if s.cached_tokens > s.input_tokens {
            self.diagnose(
                Some(&s.session_id),
                format!(
                    "cached_tokens {} exceed input_tokens {}; capped",
                    s.cached_tokens, s.input_tokens
                ),
            );
            s.cached_tokens = s.input_tokens;
        }
        for m in &s.by_model {
            if !self.models_seen.contains(&m.model) {
                self.models_seen.insert(m.model.clone());
                self.catalogue.note_in_use(&m.model);
            }
        }
        let group = group_key(&s.labels, &self.det.group_by);
        let nc_rule = self.det.no_cache_rule(&s);
        let os_rule = self.det.oversized_rule(&s);
        let rl_rule = self.det.retry_rule(&s);
        let no_cache = nc_rule.is_some_and(|r| no_cache::is_candidate(&s, &self.catalogue, r));
        let tiny_price = os_rule.map_or(0.0, |r| {
            oversized_model::tiny_call_price(&s, &self.catalogue, r)
        });
        // Nominated against the cheapest model listed, which is never dearer
        // than the cheapest in use once the whole window is known.
        let oversized = os_rule.is_some_and(|r| {
            tiny_price > 0.0
                && self
                    .catalogue
                    .lowest_premium_floor(r.premium_price_ratio)
                    .is_some_and(|f| tiny_price >= f)
        });
        let retry =
            rl_rule.is_some_and(|r| s.requests >= r.min_requests || s.errors >= r.min_error_burst);

        // Each session enters its group's baseline once: in the window where
        // its first request falls.
        if self.window.contains(s.first_request_at) {
            let cap = self.det.baseline_samples;
            let b = self
                .fresh
                .entry(group.clone())
                .or_insert_with(|| GroupBaseline::new(cap));
            if s.requests > 0 {
                b.log_requests.push((s.requests as f64).ln());
            }
            if nc_rule.is_some_and(|r| no_cache::eligible(&s, &self.catalogue, r)) {
                b.cached_share.push(cached_share(&s));
            }
            b.tiny_call_price.push(tiny_price);
            for m in &s.by_model {
                *b.model_calls.entry(m.model.clone()).or_default() += m.requests as f64;
            }
        } else {
            self.fresh
                .entry(group.clone())
                .or_insert_with(|| GroupBaseline::new(self.det.baseline_samples));
        }

        if no_cache || oversized || retry {
            if self.candidates.len() >= self.det.max_candidates {
                self.skipped_candidates += 1;
                return;
            }
            self.candidates.push(Candidate {
                session: s,
                group,
                no_cache,
                oversized,
                retry,
            });
        }
    }

    /// Peer groups seen so far.
    pub fn groups(&self) -> Vec<String> {
        self.fresh.keys().cloned().collect()
    }

    /// Judges the candidates against `history` (stored baselines of the
    /// groups seen) merged with this window's sessions.
    pub fn judge(mut self, mut history: HashMap<String, GroupBaseline>) -> Judgement {
        let cap = self.det.baseline_samples;
        let mut baselines = HashMap::new();
        let mut stats: HashMap<String, GroupStats> = HashMap::new();
        for (group, fresh) in std::mem::take(&mut self.fresh) {
            let mut b = history
                .remove(&group)
                .unwrap_or_else(|| GroupBaseline::new(cap));
            b.resize(cap);
            b.decay_models();
            merge(&mut b, fresh);
            stats.insert(group.clone(), b.stats());
            baselines.insert(group, b);
        }
        if self.skipped_candidates > 0 {
            let n = self.skipped_candidates;
            self.diagnose(
                None,
                format!("{n} candidates over detection.max_candidates were not judged"),
            );
        }
        let mut findings = Vec::new();
        let mut drilldowns = Vec::new();
        let empty = GroupBaseline::new(1).stats();
        for c in std::mem::take(&mut self.candidates) {
            let st = stats.get(&c.group).unwrap_or(&empty);
            let s = &c.session;
            if let Some(rule) = self.det.no_cache_rule(s).filter(|_| c.no_cache) {
                findings.extend(no_cache::judge(
                    s,
                    &c.group,
                    st,
                    &self.catalogue,
                    rule,
                    self.window,
                ));
            }
            if let Some(rule) = self.det.oversized_rule(s).filter(|_| c.oversized) {
                let tiny = oversized_model::tiny_premium(s, &self.catalogue, rule);
                let floor = self.catalogue.premium_floor(rule.premium_price_ratio);
                if let (Some(tiny), Some(floor), Some(b)) = (tiny, floor, baselines.get(&c.group)) {
                    let st = GroupStats {
                        premium_tiny_share: b.premium_tiny_share(floor),
                        ..st.clone()
                    };
                    findings.extend(oversized_model::judge(
                        s,
                        &tiny,
                        &c.group,
                        &st,
                        &self.catalogue,
                        rule,
                        self.window,
                    ));
                }
            }
            let retry_rule = self.det.retry_rule(s).filter(|_| c.retry);
            if let Some((rule, trigger)) =
                retry_rule.and_then(|r| retry_loop::trigger(s, st, r).map(|t| (r, t)))
            {
                drilldowns.push(RetryCandidate {
                    session: c.session.clone(),
                    group: c.group.clone(),
                    trigger,
                    stats: st.clone(),
                    rule: rule.clone(),
                });
            }
        }
        Judgement {
            findings,
            drilldowns,
            baselines,
            diagnostics: self.diagnostics,
            sessions: self.sessions,
            models_seen: self.models_seen,
        }
    }
}

/// Appends a window's fresh samples to the stored baseline.
fn merge(into: &mut GroupBaseline, fresh: GroupBaseline) {
    let GroupBaseline {
        log_requests,
        cached_share,
        tiny_call_price,
        model_calls,
    } = fresh;
    for (ring, new) in [
        (&mut into.log_requests, log_requests),
        (&mut into.cached_share, cached_share),
        (&mut into.tiny_call_price, tiny_call_price),
    ] {
        for v in new.values() {
            ring.push(v);
        }
    }
    let models: BTreeMap<String, f64> = model_calls;
    for (m, n) in models {
        *into.model_calls.entry(m).or_default() += n;
    }
}

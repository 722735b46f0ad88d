//! One window's pass: every session is seen once as its page streams by
//! (O(1) work, folded into bounded per-group samples); only candidates are
//! kept. After the last page, candidates are judged against their group's
//! baseline (history plus this window); retry-loop candidates, no_cache
//! candidates whose peers cache, and oversized_model candidates whose
//! aggregates could hide tiny premium calls are handed back for a request
//! drill-down.
//!
//! A window that nominates more sessions than `max_candidates` is read a
//! second time ([`WindowAnalysis::rejudge`]): by then its baselines are
//! complete, so every session is judged as it streams by and only findings
//! and drill-downs are kept. Memory stays bounded by what is found, and the
//! result is the same as with no cap.

use super::FastMap;
use super::baseline::GroupBaseline;
use super::drilldown::{Confirmed, Drilldown, RetryCheck};
use super::held::Held;
use super::rules::{NoCacheRule, OversizedModelRule, RetryLoopRule, Rules, select};
use super::suspects::Suspects;
use super::{
    CachingEvidence, Catalogue, Diagnostic, Finding, GroupStats, no_cache, oversized_model,
    retry_loop, write_group_key,
};
use crate::source::{RequestRecord, SessionRecord, Window};
use chrono::{DateTime, Utc};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

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

/// What the cheap test made on every session nominates it for.
#[derive(Debug, Clone, Copy, Default)]
struct Nomination {
    no_cache: bool,
    oversized: bool,
    retry: bool,
    /// Its aggregates could hide tiny premium calls: its rows may show them.
    oversized_rows: bool,
    /// The price level of its tiny calls (see
    /// [`oversized_model::tiny_call_price`]).
    tiny_price: f64,
}

impl Nomination {
    fn any(&self) -> bool {
        self.no_cache || self.oversized || self.retry || self.oversized_rows
    }
}

/// A session kept for judging.
#[derive(Debug, Clone)]
struct Candidate {
    session: SessionRecord,
    group: String,
    nomination: Nomination,
}

/// A session of the window whose tiny calls went to a premium model (by
/// its nomination) that its rule does not declare the group's design:
/// whether it enters its group's history is decided once the window's
/// prices and the group's history are known ([`Verdicts`]). Until a move
/// is accepted, such sessions stay out of the history that says what the
/// group normally does.
#[derive(Debug)]
struct PremiumEntry<'d> {
    /// The price level of its tiny calls.
    tiny_price: f64,
    /// Its calls per model.
    model_calls: Vec<(String, u64)>,
    /// Its first call.
    first_request_at: DateTime<Utc>,
    /// Its rule.
    rule: &'d OversizedModelRule,
    /// Where it arrived among its group's tiny-call prices
    /// ([`super::baseline::Ring::pushed`]).
    at: u64,
}

/// A session of the window that could have cached and read (nearly)
/// nothing: whether its cached share enters its group's history is decided
/// once the group's history is known ([`Verdicts`]). A group that caches
/// keeps such sessions out of the history that says what it normally
/// reads, so a broken prefix stays an incident however many of its
/// sessions it breaks, and for as long as it lasts.
#[derive(Debug)]
struct UncachedEntry<'d> {
    /// Its cached share.
    share: f64,
    /// Whether it says something of its group's caching
    /// ([`no_cache::tells_of_group`]).
    tells: bool,
    /// Its rule.
    rule: &'d NoCacheRule,
    /// Where it arrived among its group's cached shares
    /// ([`super::baseline::Ring::pushed`]).
    at: u64,
}

/// The state of one window while its pages stream in.
#[derive(Debug)]
pub struct WindowAnalysis<'d> {
    det: &'d Detector,
    window: Window,
    catalogue: Catalogue,
    fresh: FastMap<String, GroupBaseline>,
    /// Per group, the sessions entering its history whose tiny calls went
    /// to a premium model, held apart until the window is judged.
    premium: FastMap<String, Vec<PremiumEntry<'d>>>,
    /// Per group, the sessions entering its history that read (nearly)
    /// nothing of what they could have cached, held apart likewise.
    uncached: FastMap<String, Vec<UncachedEntry<'d>>>,
    candidates: Vec<Candidate>,
    sessions: u64,
    skipped_candidates: u64,
    diagnostics: Vec<Diagnostic>,
    models_seen: BTreeSet<String>,
    /// What the window's sessions showed of their models' caches.
    caching: CachingEvidence,
    /// The current session's group key, reused from session to session.
    key: String,
}

/// The outcome of judging a window, before drill-downs.
#[derive(Debug)]
pub struct Judgement {
    /// Findings that need nothing more.
    pub findings: Vec<Finding>,
    /// Candidates to judge from their request rows.
    pub drilldowns: Vec<Drilldown>,
    /// Baselines to store for the groups seen.
    pub baselines: HashMap<String, GroupBaseline>,
    /// Odd things noticed.
    pub diagnostics: Vec<Diagnostic>,
    /// Sessions seen in the window.
    pub sessions: u64,
    /// Models seen carrying traffic in the window.
    pub models_seen: BTreeSet<String>,
    /// Retry-loop suspects left unread by their rule's `drilldown_budget`.
    pub drilldowns_skipped: u64,
    /// no_cache findings of sessions still going at the window's end, held
    /// for the next window (see [`super::held`]). Filled by
    /// [`Judgement::confirmed`].
    pub held: Vec<Held>,
    /// What the window's sessions and the rows read for them showed of
    /// their models' caches ([`super::caching`]), to store.
    pub caching: CachingEvidence,
}

impl Judgement {
    /// Takes what the drill-downs' rows confirmed (in any order; the
    /// findings keep one).
    pub fn confirmed(&mut self, mut c: Confirmed) {
        c.findings
            .sort_by(|a, b| (&a.session_id, a.kind).cmp(&(&b.session_id, b.kind)));
        self.findings.append(&mut c.findings);
        self.held.append(&mut c.held);
        self.caching.merge(&c.caching);
    }
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
            fresh: FastMap::default(),
            premium: FastMap::default(),
            uncached: FastMap::default(),
            candidates: Vec::new(),
            sessions: 0,
            skipped_candidates: 0,
            diagnostics: Vec::new(),
            models_seen: BTreeSet::new(),
            caching: CachingEvidence::default(),
            key: String::new(),
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

    /// The cheap test made on every session (`cached_tokens` already capped).
    /// `so_far`: the session's group as this window's sessions before it
    /// showed it, when they are the only sessions known.
    fn nominate(
        &self,
        s: &SessionRecord,
        catalogue: &Catalogue,
        so_far: Option<&GroupBaseline>,
    ) -> Nomination {
        let os_rule = self.oversized_rule(s);
        let tiny_price = os_rule.map_or(0.0, |r| oversized_model::tiny_call_price(s, catalogue, r));
        let lowest_floor =
            |r: &OversizedModelRule| catalogue.lowest_premium_floor(r.premium_price_ratio);
        Nomination {
            no_cache: self
                .no_cache_rule(s)
                .is_some_and(|r| no_cache::is_candidate(s, catalogue, r)),
            // Nominated against the cheapest model listed, which is never
            // dearer than the cheapest in use once the whole window is known.
            oversized: os_rule.is_some_and(|r| {
                tiny_price > 0.0 && lowest_floor(r).is_some_and(|f| tiny_price >= f)
            }),
            // Before the models in use are all known: against the lowest
            // floor, which no later floor undercuts (and which leaves the
            // fewest models below it). A session of premium models alone
            // is read only where its group's usual model is small, so it
            // is kept only while the group's sessions so far in this
            // window call a small model most (or none came yet): a group
            // whose design is a premium model on big prompts fills no
            // candidate list.
            oversized_rows: os_rule.is_some_and(|r| {
                lowest_floor(r).is_some_and(|f| {
                    oversized_model::may_hide_tiny_premium(s, catalogue, r, f)
                        && (s.by_model.is_empty()
                            || oversized_model::calls_below(s, catalogue, f)
                            || so_far
                                .and_then(GroupBaseline::usual_model)
                                .is_none_or(|m| catalogue.blended(m).is_some_and(|b| b < f)))
                })
            }),
            retry: self
                .retry_rule(s)
                .is_some_and(|r| s.requests >= r.min_requests || s.errors >= r.min_error_burst),
            tiny_price,
        }
    }

    /// Judges a drill-down candidate from its requests (oldest first).
    pub fn confirm(&self, c: &Drilldown, requests: &[RequestRecord], window: Window) -> Confirmed {
        c.confirm(requests, window)
    }
}

impl<'d> WindowAnalysis<'d> {
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
        write_group_key(&s.labels, &self.det.group_by, &mut self.key);
        let n = self
            .det
            .nominate(&s, &self.catalogue, self.fresh.get(&self.key));

        // Looked up before inserting, so a known group costs no key copy.
        let b = match self.fresh.get_mut(&self.key) {
            Some(b) => b,
            None => self
                .fresh
                .entry(self.key.clone())
                .or_insert_with(|| GroupBaseline::new(self.det.baseline_samples)),
        };
        // Each session enters its group's baseline once: in the window where
        // its first request falls.
        if self.window.contains(s.first_request_at) {
            if s.requests > 0 {
                b.log_requests.push((s.requests as f64).ln());
            }
            let rule = self.det.no_cache_rule(&s);
            self.caching.note_session(&s, &self.catalogue, rule);
            let eligible = rule.filter(|r| no_cache::eligible(&s, &self.catalogue, r));
            if let Some(rule) = eligible {
                let share = no_cache::capable_cached_share(&s, &self.catalogue);
                if share <= rule.max_cached_share {
                    let tells = no_cache::tells_of_group(&s, &self.catalogue, rule);
                    let entry = UncachedEntry {
                        share,
                        tells,
                        rule,
                        at: b.cached_share.pushed(),
                    };
                    match self.uncached.get_mut(&self.key) {
                        Some(list) => list.push(entry),
                        None => {
                            self.uncached.insert(self.key.clone(), vec![entry]);
                        }
                    }
                } else {
                    b.cached_share.push(share);
                }
            }
            let premium = self.det.oversized_rule(&s).filter(|r| {
                n.oversized && !oversized_model::by_design(n.tiny_price, &self.catalogue, r)
            });
            if let Some(rule) = premium {
                let entry = PremiumEntry {
                    tiny_price: n.tiny_price,
                    model_calls: s
                        .by_model
                        .iter()
                        .map(|m| (m.model.clone(), m.requests))
                        .collect(),
                    first_request_at: s.first_request_at,
                    rule,
                    at: b.tiny_call_price.pushed(),
                };
                match self.premium.get_mut(&self.key) {
                    Some(list) => list.push(entry),
                    None => {
                        self.premium.insert(self.key.clone(), vec![entry]);
                    }
                }
            } else {
                b.tiny_call_price.push(n.tiny_price);
                for m in &s.by_model {
                    add_calls(b, &m.model, m.requests);
                }
            }
        }

        if n.any() {
            if self.candidates.len() >= self.det.max_candidates {
                self.skipped_candidates += 1;
                return;
            }
            self.candidates.push(Candidate {
                session: s,
                group: self.key.clone(),
                nomination: n,
            });
        }
    }

    /// Peer groups seen so far.
    pub fn groups(&self) -> Vec<String> {
        self.fresh.keys().cloned().collect()
    }

    /// Whether more sessions were nominated than `max_candidates` kept:
    /// read the window again into [`WindowAnalysis::rejudge`] to judge them
    /// all, or [`WindowAnalysis::judge`] only those kept.
    pub fn overflowed(&self) -> bool {
        self.skipped_candidates > 0
    }

    /// The baselines of the groups seen: `history` (their stored baselines)
    /// merged with this window's sessions, ready to judge against.
    fn verdicts(&mut self, mut history: HashMap<String, GroupBaseline>) -> Verdicts<'d> {
        let cap = self.det.baseline_samples;
        // What the window's sessions showed of their models' caches counts
        // in its own judgement.
        self.catalogue.learn(&self.caching);
        let mut baselines = HashMap::new();
        let mut premium = std::mem::take(&mut self.premium);
        let mut uncached = std::mem::take(&mut self.uncached);
        for (group, fresh) in std::mem::take(&mut self.fresh) {
            let mut b = history
                .remove(&group)
                .unwrap_or_else(|| GroupBaseline::new(cap));
            b.resize(cap);
            b.decay_models();
            let entries = premium.remove(&group).unwrap_or_default();
            let entered = fresh.tiny_call_price.len() + entries.len();
            let moved = moved_entries(&b, &entries, &self.catalogue);
            // An uncached session of a group whose history caches is a
            // broken cache, not the group's new habit. (The history's
            // median is taken only for a group with such a session.)
            let broken = uncached.remove(&group).unwrap_or_default();
            let history =
                (!broken.is_empty()).then(|| (b.cached_share.len(), b.cached_share.median()));
            let late_shares: Vec<(u64, f64)> = broken
                .into_iter()
                .filter(|e| {
                    let caches = history.is_some_and(|(peers, median)| {
                        peers >= e.rule.min_peers
                            && median.is_some_and(|m| m >= e.rule.min_peer_cached_share)
                    });
                    !caches && e.tells
                })
                .map(|e| (e.at, e.share))
                .collect();
            // The stretch of the move: begun by its first session, broken
            // by a window whose sessions (there were some) made no such
            // call.
            if let Some(first) = entries
                .iter()
                .zip(&moved)
                .filter(|(_, m)| **m)
                .map(|(e, _)| e.first_request_at)
                .min()
            {
                b.premium_since.get_or_insert(first);
            } else if entered > 0 {
                b.premium_since = None;
            }
            let mut late_prices = Vec::new();
            for (e, moved) in entries.into_iter().zip(moved) {
                if moved && !accepted(&b, e.rule, self.window) {
                    continue;
                }
                late_prices.push((e.at, e.tiny_price));
                for (model, calls) in &e.model_calls {
                    add_calls(&mut b, model, *calls);
                }
            }
            merge(&mut b, fresh, late_shares, late_prices);
            baselines.insert(group, b);
        }
        Verdicts {
            det: self.det,
            window: self.window,
            catalogue: std::mem::take(&mut self.catalogue),
            baselines,
            stats: FastMap::default(),
            empty: GroupBaseline::new(1).stats(),
            findings: Vec::new(),
            drilldowns: Vec::new(),
            suspects: Suspects::default(),
            shared_catalogue: None,
        }
    }

    /// Judges the candidates against `history` (stored baselines of the
    /// groups seen) merged with this window's sessions. When the window
    /// [`overflowed`](WindowAnalysis::overflowed), only the candidates kept
    /// are judged.
    pub fn judge(mut self, history: HashMap<String, GroupBaseline>) -> Judgement {
        if self.skipped_candidates > 0 {
            let n = self.skipped_candidates;
            self.diagnose(
                None,
                format!("{n} candidates over detection.max_candidates were not judged"),
            );
        }
        let candidates = std::mem::take(&mut self.candidates);
        let mut v = self.verdicts(history);
        for c in candidates {
            v.check(c.session, &c.group, c.nomination);
        }
        let mut j = v.into_judgement(self.diagnostics, self.sessions, self.models_seen);
        j.caching = self.caching;
        j
    }

    /// For a window that [`overflowed`](WindowAnalysis::overflowed): judges
    /// every session of a second read of the window against the baselines
    /// of this (complete) first read, as the sessions stream by. The
    /// baselines are not fed again.
    pub fn rejudge(mut self, history: HashMap<String, GroupBaseline>) -> Rejudge<'d> {
        let n = self.skipped_candidates + self.candidates.len() as u64;
        self.diagnose(
            None,
            format!(
                "{n} candidates exceeded detection.max_candidates ({}); the window was read again to judge them all",
                self.det.max_candidates
            ),
        );
        self.candidates = Vec::new();
        let verdicts = self.verdicts(history);
        Rejudge {
            verdicts,
            diagnostics: self.diagnostics,
            sessions: self.sessions,
            models_seen: self.models_seen,
            caching: self.caching,
            key: String::new(),
        }
    }
}

/// A window's baselines and statistics, and what judging against them found.
#[derive(Debug)]
struct Verdicts<'d> {
    det: &'d Detector,
    window: Window,
    catalogue: Catalogue,
    baselines: HashMap<String, GroupBaseline>,
    /// The statistics of the groups judged so far: computed (medians of
    /// the rings) only for a group with a nominated session.
    stats: FastMap<String, GroupStats>,
    empty: GroupStats,
    findings: Vec<Finding>,
    drilldowns: Vec<Drilldown>,
    suspects: Suspects,
    /// The catalogue shared by the window's oversized_model row checks,
    /// made at the first.
    shared_catalogue: Option<Arc<Catalogue>>,
}

impl Verdicts<'_> {
    /// The judgement: findings, the drill-downs every test asked for, then
    /// the suspects within their budgets, most suspicious first.
    fn into_judgement(
        self,
        mut diagnostics: Vec<Diagnostic>,
        sessions: u64,
        models_seen: BTreeSet<String>,
    ) -> Judgement {
        let mut drilldowns = self.drilldowns;
        let (suspects, skipped) = self.suspects.finish();
        drilldowns.extend(suspects);
        if skipped > 0 && diagnostics.len() < MAX_DIAGNOSTICS {
            diagnostics.push(Diagnostic {
                session_id: None,
                message: format!(
                    "{skipped} retry-loop suspects over their rule's drilldown_budget were not read"
                ),
            });
        }
        Judgement {
            findings: self.findings,
            drilldowns,
            baselines: self.baselines,
            diagnostics,
            sessions,
            models_seen,
            drilldowns_skipped: skipped,
            held: Vec::new(),
            caching: CachingEvidence::default(),
        }
    }

    /// Judges one nominated session of `group`.
    fn check(&mut self, s: SessionRecord, group: &str, n: Nomination) {
        if !self.stats.contains_key(group)
            && let Some(b) = self.baselines.get(group)
        {
            self.stats.insert(group.to_owned(), b.stats());
        }
        let st = self.stats.get(group).unwrap_or(&self.empty);
        let no_cache_rows = self
            .det
            .no_cache_rule(&s)
            .filter(|_| n.no_cache)
            .and_then(|rule| no_cache::judge(&s, st, &self.catalogue, rule));
        let mut oversized_rows = None;
        let os_rule = self
            .det
            .oversized_rule(&s)
            .filter(|_| n.oversized || n.oversized_rows);
        let floor = os_rule.and_then(|r| oversized_model::premium_floor(&self.catalogue, r));
        if let (Some(rule), Some(floor), Some(b)) = (os_rule, floor, self.baselines.get(group)) {
            let st = GroupStats {
                premium_tiny_share: b.premium_tiny_share(floor),
                premium_accepted: accepted(b, rule, self.window),
                premium_since: b.premium_since,
                ..st.clone()
            };
            let tiny =
                oversized_model::tiny_premium(&s, &self.catalogue, rule).filter(|_| n.oversized);
            let cat = &self.catalogue;
            // Only the rows can tell (read only where the group's habits
            // would let a finding stand): tiny premium calls the aggregates
            // may hide, and, in a session with failed calls, whether the
            // premium calls followed a failure (a failover) or not.
            let read_rows = match &tiny {
                Some(_) if s.errors > 0 => {
                    oversized_model::usual_if_judged(&st, cat, rule, true).is_some()
                }
                Some(_) => false,
                None => {
                    n.oversized_rows
                        && oversized_model::may_hide_tiny_premium(&s, cat, rule, floor)
                        && oversized_model::usual_if_judged(&st, cat, rule, false).is_some()
                }
            };
            if read_rows {
                let catalogue = self
                    .shared_catalogue
                    .get_or_insert_with(|| Arc::new(self.catalogue.clone()))
                    .clone();
                oversized_rows = Some(oversized_model::RowCheck::new(st, rule.clone(), catalogue));
            } else if let Some(tiny) = tiny {
                let found = oversized_model::judge(
                    &s,
                    &tiny,
                    group,
                    &st,
                    &self.catalogue,
                    rule,
                    self.window,
                );
                if let Some(f) = found {
                    self.findings.push(f);
                }
            }
        }
        let retry_rule = self.det.retry_rule(&s).filter(|_| n.retry);
        let retry = retry_rule.and_then(|r| {
            retry_loop::trigger(&s, st, r).map(|trigger| RetryCheck {
                trigger,
                stats: st.clone(),
                rule: r.clone(),
            })
        });
        // A suspect whose rows are read anyway costs nothing more; the
        // others wait for their rule's budget.
        let suspect = retry
            .as_ref()
            .filter(|_| no_cache_rows.is_none() && oversized_rows.is_none())
            .and_then(|r| Some((r.trigger.suspicion()?, r.rule.drilldown_budget)));
        let rule_name = retry.as_ref().map(|r| r.rule.meta.name.clone());
        if retry.is_none() && no_cache_rows.is_none() && oversized_rows.is_none() {
            return;
        }
        let d = Drilldown {
            session: s,
            group: group.to_owned(),
            retry,
            no_cache: no_cache_rows,
            oversized: oversized_rows,
        };
        match (suspect, rule_name) {
            (Some((suspicion, budget)), Some(rule)) => {
                self.suspects.offer(&rule, budget, suspicion, d);
            }
            _ => self.drilldowns.push(d),
        }
    }
}

/// The second read of a window that had too many candidates; see
/// [`WindowAnalysis::rejudge`].
#[derive(Debug)]
pub struct Rejudge<'d> {
    verdicts: Verdicts<'d>,
    diagnostics: Vec<Diagnostic>,
    sessions: u64,
    models_seen: BTreeSet<String>,
    caching: CachingEvidence,
    key: String,
}

impl Rejudge<'_> {
    /// Takes one session of the second read as its page arrives.
    pub fn observe(&mut self, mut s: SessionRecord) {
        // Odd figures were reported on the first read.
        s.cached_tokens = s.cached_tokens.min(s.input_tokens);
        let det = self.verdicts.det;
        // The baselines are complete: the judgement itself decides which
        // sessions of a premium model alone are read.
        let n = det.nominate(&s, &self.verdicts.catalogue, None);
        if !n.any() {
            return;
        }
        write_group_key(&s.labels, &det.group_by, &mut self.key);
        let group = std::mem::take(&mut self.key);
        self.verdicts.check(s, &group, n);
        self.key = group;
    }

    /// The judgement of the window: the baselines and counts of the first
    /// read, the findings and drill-downs of the second.
    pub fn finish(self) -> Judgement {
        let mut j = self
            .verdicts
            .into_judgement(self.diagnostics, self.sessions, self.models_seen);
        j.caching = self.caching;
        j
    }
}

/// Adds `calls` to `model`'s weight in the group's usual-model tally.
fn add_calls(b: &mut GroupBaseline, model: &str, calls: u64) {
    match b.model_calls.get_mut(model) {
        Some(n) => *n += calls as f64,
        None => {
            b.model_calls.insert(model.to_owned(), calls as f64);
        }
    }
}

/// Which of a group's premium entries are part of a move: premium at the
/// window's floor for their rule, in a group whose history (before the
/// window) knows its habits and says that tiny premium calls are not one
/// of them. A new group's, or one whose design is premium, enter its
/// history as any session does.
fn moved_entries(
    history: &GroupBaseline,
    entries: &[PremiumEntry<'_>],
    cat: &Catalogue,
) -> Vec<bool> {
    let usual = history.usual_model();
    entries
        .iter()
        .map(|e| {
            let Some(floor) = oversized_model::premium_floor(cat, e.rule) else {
                return false;
            };
            let premium_usual = usual
                .and_then(|m| cat.price_ratio(m))
                .is_some_and(|r| r >= e.rule.premium_price_ratio);
            e.tiny_price >= floor * (1.0 - 1e-6)
                && history.tiny_call_price.len() >= e.rule.min_peers
                && history.premium_tiny_share(floor) <= e.rule.max_group_share
                && !premium_usual
        })
        .collect()
}

/// Whether the group's move to premium tiny calls has lasted the rule's
/// `accept_after` by the end of `window`: its history takes it in now.
fn accepted(b: &GroupBaseline, rule: &OversizedModelRule, window: Window) -> bool {
    let after = chrono::Duration::from_std(rule.accept_after).unwrap_or(chrono::Duration::MAX);
    b.premium_since.is_some_and(|t| window.end - t >= after)
}

/// Appends a window's fresh samples to the stored baseline, with the
/// sessions held apart and let in (`late_shares`, `late_prices`: where
/// each arrived, and its value) in their places among them.
fn merge(
    into: &mut GroupBaseline,
    fresh: GroupBaseline,
    late_shares: Vec<(u64, f64)>,
    late_prices: Vec<(u64, f64)>,
) {
    into.log_requests.merge_in_order(&fresh.log_requests, []);
    into.cached_share
        .merge_in_order(&fresh.cached_share, late_shares);
    into.tiny_call_price
        .merge_in_order(&fresh.tiny_call_price, late_prices);
    for (m, n) in fresh.model_calls {
        *into.model_calls.entry(m).or_default() += n;
    }
}

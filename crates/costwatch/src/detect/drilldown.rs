//! Candidates that need their request rows before they are judged: retry-loop
//! candidates, no_cache candidates (their rows say which calls could have
//! read the cache and why each missed), and oversized_model candidates
//! whose aggregates could hide tiny premium calls. A session needing
//! several is fetched once.

use super::retry_loop::Trigger;
use super::rules::RetryLoopRule;
use super::{
    CachingEvidence, Finding, GroupStats, Held, Kind, no_cache, oversized_model, retry_loop,
};
use crate::source::{RequestRecord, SessionRecord, Window};

/// A candidate waiting for its request rows.
#[derive(Debug, Clone)]
pub struct Drilldown {
    /// The session.
    pub session: SessionRecord,
    /// Its peer group.
    pub group: String,
    pub(super) retry: Option<RetryCheck>,
    pub(super) no_cache: Option<no_cache::RowCheck>,
    pub(super) oversized: Option<oversized_model::RowCheck>,
}

/// What a retry-loop candidate is confirmed against.
#[derive(Debug, Clone)]
pub(super) struct RetryCheck {
    pub(super) trigger: Trigger,
    pub(super) stats: GroupStats,
    pub(super) rule: RetryLoopRule,
}

impl Drilldown {
    /// Why it is a retry-loop candidate, if it is one.
    pub fn retry_trigger(&self) -> Option<Trigger> {
        self.retry.as_ref().map(|r| r.trigger)
    }

    /// The kinds its rows will decide.
    pub fn kinds(&self) -> impl Iterator<Item = Kind> + '_ {
        let retry = self.retry.as_ref().map(|_| Kind::RetryLoop);
        let no_cache = self.no_cache.as_ref().map(|_| Kind::NoCache);
        let oversized = self.oversized.as_ref().map(|_| Kind::OversizedModel);
        no_cache.into_iter().chain(oversized).chain(retry)
    }

    /// Judges the candidate from its request rows (oldest first).
    pub fn confirm(&self, requests: &[RequestRecord], window: Window) -> Confirmed {
        let mut out = Confirmed::default();
        out.caching.note_rows(requests, window);
        let found = &mut out.findings;
        if let Some(c) = &self.no_cache {
            match no_cache::confirm(&self.session, requests, c, &self.group, window) {
                Some(no_cache::Judged::Found(f)) => found.push(f),
                Some(no_cache::Judged::Going(f, quiet_at)) => {
                    out.held.push(Held::new(f, quiet_at));
                }
                Some(no_cache::Judged::Thin(f, quiet_at, wait)) => {
                    out.held.push(Held::waiting(f, quiet_at, wait));
                }
                None => {}
            }
        }
        if let Some(c) = &self.oversized {
            found.extend(oversized_model::confirm(
                &self.session,
                requests,
                c,
                &self.group,
                window,
            ));
        }
        if let Some(r) = &self.retry {
            found.extend(retry_loop::confirm(
                &self.session,
                requests,
                r.trigger,
                &self.group,
                &r.stats,
                &r.rule,
                window,
            ));
        }
        out
    }
}

/// What a candidate's request rows confirmed.
#[derive(Debug, Default)]
pub struct Confirmed {
    /// Findings that stand now.
    pub findings: Vec<Finding>,
    /// no_cache findings of sessions still going at the window's end, held
    /// for the next window (see [`super::held`]).
    pub held: Vec<Held>,
    /// What the rows showed of their models' caches.
    pub caching: CachingEvidence,
}

impl Confirmed {
    /// Adds what another candidate's rows confirmed.
    pub fn extend(&mut self, other: Confirmed) {
        self.findings.extend(other.findings);
        self.held.extend(other.held);
        self.caching.merge(&other.caching);
    }
}

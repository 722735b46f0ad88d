//! Turning drafts into the gateway's request rows (gateway-api.md section
//! 1: ids, times, status, tokens, cost, latency, labels): times from each
//! call's pause and the previous call's latency, then what the prompt cache
//! served, decided by [`definition::readable_tokens`] so that no row reads
//! a cache that could not hold its prefix. The truth is computed from the
//! finished rows and notes by [`definition::kinds`].

use super::Feature;
use super::catalogue::HAIKU;
use super::catalogue::{NOVA, OPUS, SOL, SONNET, catalogue, min_prefix};
use super::definition;
use super::draft::{CachePolicy, Draft, Notes, Outcome, SessionNotes, Step};
use crate::dataset::{SimModel, SimRequest, SimSession, Truth};
use crate::rng::SimRng;
use chrono::{DateTime, Duration, Utc};
use std::collections::{BTreeMap, HashSet};

/// Share of readable calls of a working cache that miss anyway (evicted);
/// a session that could read always reads at least once.
const CACHE_MISS_RATE: f64 = 0.03;

/// Everything written so far.
pub(super) struct Writer {
    models: Vec<SimModel>,
    session_ids: HashSet<String>,
    request_ids: HashSet<String>,
    sessions: Vec<SimSession>,
    notes: Notes,
    summary_only: Vec<String>,
}

/// The finished rows, their truth, their notes, and the sessions served
/// without a per-model breakdown.
pub(super) struct Written {
    pub(super) sessions: Vec<SimSession>,
    pub(super) truth: Truth,
    pub(super) notes: Notes,
    pub(super) summary_only: Vec<String>,
}

impl Writer {
    pub(super) fn new() -> Writer {
        Writer {
            models: catalogue(),
            session_ids: HashSet::new(),
            request_ids: HashSet::new(),
            sessions: Vec::new(),
            notes: Notes::default(),
            summary_only: Vec::new(),
        }
    }

    /// Writes one session of `feature` starting at `start`.
    pub(super) fn write(
        &mut self,
        rng: &mut SimRng,
        feature: Feature,
        start: DateTime<Utc>,
        draft: Draft,
    ) {
        if draft.steps.is_empty() {
            return;
        }
        let session_id = self.session_id(rng, feature);
        let labels: BTreeMap<String, String> = [("feature", feature.name()), ("env", "prod")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut at = start;
        let mut rows: Vec<SimRequest> = Vec::with_capacity(draft.steps.len());
        for step in &draft.steps {
            if let Some(prev) = rows.last() {
                at += Duration::milliseconds(prev.latency_ms as i64 + step.gap_ms);
            }
            let latency_ms = latency(rng, step);
            let (http_status, error_type) = step
                .outcome
                .error()
                .map_or((200, None), |(s, t)| (s, Some(t.to_string())));
            rows.push(SimRequest {
                request_id: self.request_id(rng),
                session_id: session_id.clone(),
                created_at: at,
                model: step.model.to_string(),
                status: if error_type.is_some() {
                    "error"
                } else {
                    "success"
                }
                .to_string(),
                http_status,
                error_type,
                input_tokens: step.input,
                cached_tokens: 0,
                cache_write_tokens: 0,
                output_tokens: step.output,
                cost_usd: 0.0,
                latency_ms,
                labels: labels.clone(),
            });
        }
        let notes: Vec<_> = draft.steps.iter().map(|s| s.note.clone()).collect();
        self.serve_cache(rng, draft.cache, &mut rows, &notes, &draft.steps);
        if !feature.has_breakdown() {
            self.summary_only.push(session_id.clone());
        }
        self.notes.sessions.insert(
            session_id.clone(),
            SessionNotes {
                situation: draft.situation,
                calls: notes,
            },
        );
        self.sessions.push(SimSession {
            session_id,
            labels,
            requests: rows,
            fixed_row: None,
        });
    }

    /// Fills in cache reads, cache writes and costs.
    fn serve_cache(
        &self,
        rng: &mut SimRng,
        policy: CachePolicy,
        rows: &mut [SimRequest],
        notes: &[super::draft::CallNote],
        steps: &[Step],
    ) {
        let readable: Vec<u64> = (0..rows.len())
            .map(|i| definition::readable_tokens(rows, notes, i))
            .collect();
        let mut cached = vec![0u64; rows.len()];
        if policy == CachePolicy::Works {
            for (c, &r) in cached.iter_mut().zip(&readable) {
                if r > 0 && !rng.random_bool(CACHE_MISS_RATE) {
                    *c = r;
                }
            }
            if cached.iter().all(|&c| c == 0)
                && let Some(i) = readable.iter().position(|&r| r > 0)
            {
                cached[i] = readable[i];
            }
        }
        for ((row, c), step) in rows.iter_mut().zip(cached).zip(steps) {
            row.cached_tokens = c;
            let writes = step.outcome == Outcome::Ok
                && min_prefix(step.model).is_some_and(|m| step.input >= m);
            row.cache_write_tokens = if writes { step.input - c } else { 0 };
            // A rejected call is never processed, so never billed.
            let billed = matches!(step.outcome, Outcome::Ok | Outcome::Timeout);
            row.cost_usd = if billed {
                self.models
                    .iter()
                    .find(|m| m.id == step.model)
                    .map_or(0.0, |m| m.cost(step.input, c, step.output))
            } else {
                0.0
            };
        }
    }

    /// A fresh session id for `feature`.
    fn session_id(&mut self, rng: &mut SimRng, feature: Feature) -> String {
        loop {
            let id = format!(
                "{}-{:012x}",
                feature.name(),
                rng.next_u64() & 0xffff_ffff_ffff
            );
            if self.session_ids.insert(id.clone()) {
                return id;
            }
        }
    }

    /// A fresh request id.
    fn request_id(&mut self, rng: &mut SimRng) -> String {
        loop {
            let id = format!("req_{:016x}", rng.next_u64());
            if self.request_ids.insert(id.clone()) {
                return id;
            }
        }
    }

    /// The rows, with the truth computed from them.
    pub(super) fn finish(self) -> Written {
        let mut truth = Truth::default();
        for s in &self.sessions {
            if let Some(n) = self.notes.of(&s.session_id) {
                for kind in definition::kinds(&s.requests, &n.calls) {
                    truth.insert(kind, &s.session_id);
                }
            }
        }
        Written {
            sessions: self.sessions,
            truth,
            notes: self.notes,
            summary_only: self.summary_only,
        }
    }
}

/// How long a call takes, by model, tokens and outcome.
fn latency(rng: &mut SimRng, s: &Step) -> u64 {
    match s.outcome {
        Outcome::RateLimited => rng.random_range(20..=200),
        Outcome::Unavailable => rng.random_range(50..=400),
        Outcome::Timeout => rng.random_range(15_000..=30_000),
        Outcome::Ok => {
            let (base, per_output) = match s.model {
                SOL => (400, 15),
                SONNET => (500, 20),
                OPUS => (900, 35),
                HAIKU => (300, 8),
                NOVA => (250, 8),
                _ => (200, 6),
            };
            base + per_output * s.output + s.input / 150 + rng.random_range(0u64..=300)
        }
    }
}

//! The generator: hour by hour, how many sessions start and of which
//! feature, the incidents of the [`Plan`], and turning each draft into the
//! gateway's request rows (gateway-api.md section 1: ids, times, status,
//! tokens, cost, latency, labels) while recording the truth.
//!
//! Every random draw comes from one seeded [`SimRng`] in a fixed order:
//! the same parameters always yield the same rows. The model moves draw
//! from a second stream of their own, seeded from the same parameters, so
//! the sessions around them are the same as without them.

use super::calls::{Call, Draft, Failure, Gap};
use super::plan::{Plan, in_span};
use super::{
    FEATURE_SHARES, Feature, GEMINI, LUNA, MOVE_SALT, MOVED_CALLS, NIGHT_FLOOR, NO_CACHE_SHARE,
    NOVA, ONBOARDING_NO_CACHE_SHARE, ONBOARDING_SHARE, OVERSIZED_SHARE, RETRY_LOOP_SHARE,
    SCATTERED_LOOPS, SOL, SONNET, SPIKE_FACTOR, ScenarioParams, VOLUME_JITTER, catalogue,
};
use crate::dataset::{OVERSIZED_MODEL, SimModel, SimRequest, SimSession, Truth};
use crate::rng::SimRng;
use chrono::{DateTime, Duration, Timelike, Utc};
use std::collections::{BTreeMap, HashSet};

/// The state of one generation.
pub(super) struct Generator {
    pub(super) rng: SimRng,
    /// The model moves' own stream: which sessions move, and how much.
    moves: SimRng,
    plan: Plan,
    pub(super) params: ScenarioParams,
    models: Vec<SimModel>,
    session_ids: HashSet<String>,
    request_ids: HashSet<String>,
    pub(super) sessions: Vec<SimSession>,
    pub(super) truth: Truth,
}

impl Generator {
    /// A generator seeded from `p`, its incident plan drawn.
    pub(super) fn new(p: &ScenarioParams) -> Generator {
        let mut rng = SimRng::seed_from_u64(p.seed);
        let mut moves = SimRng::seed_from_u64(p.seed ^ MOVE_SALT);
        let plan = Plan::new(p, &mut rng, &mut moves);
        Generator {
            rng,
            moves,
            plan,
            params: p.clone(),
            models: catalogue(),
            session_ids: HashSet::new(),
            request_ids: HashSet::new(),
            sessions: Vec::new(),
            truth: Truth::default(),
        }
    }

    /// The incident schedule.
    #[cfg(test)]
    pub(super) fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The schedule, to change before generating.
    #[cfg(test)]
    pub(super) fn plan_mut(&mut self) -> &mut Plan {
        &mut self.plan
    }

    /// Relative volume of the hour starting at `t` (low at night, peak 15:00 UTC).
    pub(super) fn diurnal(t: DateTime<Utc>) -> f64 {
        let h = f64::from(t.hour()) + 0.5;
        NIGHT_FLOOR + (-(h - 15.0).powi(2) / (2.0 * 4.0 * 4.0)).exp()
    }

    /// Expected base sessions in the hour starting at `t`.
    fn expected(&self, t: DateTime<Utc>) -> f64 {
        let day_total: f64 = (0..24).map(|h| Self::diurnal(t - Duration::hours(h))).sum();
        f64::from(self.params.sessions_per_day) * Self::diurnal(t) / day_total
    }

    /// Generates the sessions starting in the hour from `t`.
    pub(super) fn hour(&mut self, t: DateTime<Utc>) {
        let expected = self.expected(t);
        let jitter = self
            .rng
            .random_range(1.0 - VOLUME_JITTER..=1.0 + VOLUME_JITTER);
        let n = (expected * jitter).round() as u64;
        for _ in 0..n {
            let at = self.time_in_hour(t);
            let feature = self.pick_feature(at);
            let draft = self.draft(feature, at);
            self.materialize(feature, at, draft);
        }
        if in_span(self.plan.spike, t) {
            self.spike(t, expected);
        }
    }

    /// Extra healthy `search` and `checkout` sessions during the spike hour.
    fn spike(&mut self, t: DateTime<Utc>, expected: f64) {
        let total: f64 = FEATURE_SHARES.iter().map(|(_, s)| s).sum();
        for (feature, share) in FEATURE_SHARES {
            if !matches!(feature, Feature::Search | Feature::Checkout) {
                continue;
            }
            let extra = (expected * share / total * f64::from(SPIKE_FACTOR - 1)).round() as u64;
            for _ in 0..extra {
                let at = self.time_in_hour(t);
                let draft = self.healthy(feature);
                self.materialize(feature, at, draft);
            }
        }
    }

    /// A few isolated retry loops at random times.
    pub(super) fn scattered_loops(&mut self) {
        let n = self.rng.random_range(SCATTERED_LOOPS);
        let millis = i64::from(self.params.days) * 86_400_000;
        for _ in 0..n {
            let at =
                self.params.start + Duration::milliseconds(self.rng.random_range(0..millis.max(1)));
            let (feature, draft) = if self.rng.random_bool(0.5) {
                (Feature::Checkout, self.checkout_loop())
            } else {
                (Feature::SupportAgent, self.support_loop())
            };
            self.materialize(feature, at, draft);
        }
    }

    /// A random time in the hour from `t`.
    fn time_in_hour(&mut self, t: DateTime<Utc>) -> DateTime<Utc> {
        t + Duration::milliseconds(self.rng.random_range(0..3_600_000))
    }

    /// The feature of a session starting at `at`, by share.
    fn pick_feature(&mut self, at: DateTime<Utc>) -> Feature {
        let onboarding = self.plan.onboarding_from.is_some_and(|from| at >= from);
        let extra = if onboarding { ONBOARDING_SHARE } else { 0.0 };
        let total: f64 = FEATURE_SHARES.iter().map(|(_, s)| s).sum::<f64>() + extra;
        let mut x = self.rng.random_range(0.0..total);
        for (feature, share) in FEATURE_SHARES {
            if x < share {
                return feature;
            }
            x -= share;
        }
        if onboarding {
            Feature::Onboarding
        } else {
            Feature::SupportAgent
        }
    }

    /// A session of `feature` starting at `at`, incidents included.
    fn draft(&mut self, feature: Feature, at: DateTime<Utc>) -> Draft {
        match feature {
            Feature::SupportAgent => self.support(in_span(self.plan.no_cache, at), NO_CACHE_SHARE),
            Feature::Onboarding => {
                let hit = in_span(self.plan.onboarding_no_cache, at);
                self.support(hit, ONBOARDING_NO_CACHE_SHARE)
            }
            Feature::Checkout
                if in_span(self.plan.retry_loop, at) && self.rng.random_bool(RETRY_LOOP_SHARE) =>
            {
                self.checkout_loop()
            }
            Feature::Triage => {
                let incident = self.plan.oversized.iter().any(|s| s.contains(at));
                let oversized = incident && self.rng.random_bool(OVERSIZED_SHARE);
                self.triage(oversized)
            }
            _ => self.healthy(feature),
        }
    }

    /// A session of `feature` outside any incident.
    fn healthy(&mut self, feature: Feature) -> Draft {
        let calls = match feature {
            Feature::SupportAgent | Feature::Onboarding => return self.support(false, 0.0),
            Feature::Triage => return self.triage(false),
            Feature::Quotes => return self.quotes(false),
            Feature::ReleaseNotes => return self.release_notes(false),
            Feature::BulkTagging => return self.bulk_tagging(),
            Feature::Search => self.search(),
            Feature::Checkout => self.checkout(),
            Feature::Research => self.research(),
            Feature::LegalReview => self.legal_review(),
            Feature::LongChat => self.long_chat(),
            Feature::BatchExtract => self.batch_extract(),
            Feature::LatencyTest => {
                vec![Call::ok(LUNA, 60, self.rng.random_range(5..=10), Gap::Turn)]
            }
        };
        Draft { calls, kind: None }
    }

    /// A fresh session id for `feature`.
    fn new_session_id(&mut self, feature: Feature) -> String {
        loop {
            let id = format!(
                "{}-{:012x}",
                feature.name(),
                self.rng.next_u64() & 0xffff_ffff_ffff
            );
            if self.session_ids.insert(id.clone()) {
                return id;
            }
        }
    }

    /// A fresh request id.
    fn new_request_id(&mut self) -> String {
        loop {
            let id = format!("req_{:016x}", self.rng.next_u64());
            if self.request_ids.insert(id.clone()) {
                return id;
            }
        }
    }

    /// How long a call takes, by model, tokens and failure.
    fn latency(&mut self, c: &Call) -> u64 {
        match c.failure {
            Some(Failure::RateLimit) => self.rng.random_range(20..=200),
            Some(Failure::Timeout) => self.rng.random_range(15_000..=30_000),
            None => {
                let (base, per_output) = match c.model {
                    SOL => (400, 15),
                    GEMINI => (180, 4),
                    SONNET => (500, 20),
                    NOVA => (250, 8),
                    _ => (200, 6),
                };
                base + per_output * c.output
                    + (c.input - c.cached) / 100
                    + self.rng.random_range(0u64..=300)
            }
        }
    }

    /// What a call costs at the catalogue's prices.
    fn cost(&self, c: &Call) -> f64 {
        self.models
            .iter()
            .find(|m| m.id == c.model)
            .map_or(0.0, |m| m.cost(c.input, c.cached, c.output))
    }

    /// During a model move of `feature` at `at`, sends the sub-step of a
    /// healthy session (one of the move's share) to the move's premium
    /// model: waste nobody declared. Sessions made for another incident
    /// are left as they are. Draws only from the moves' own stream.
    fn model_move(&mut self, feature: Feature, at: DateTime<Utc>, draft: &mut Draft) {
        if draft.kind.is_some() {
            return;
        }
        let Some(m) = self.plan.model_move_at(feature, at).copied() else {
            return;
        };
        // A share of 1 draws nothing: every session moves.
        if !self.moves.random_bool(m.share) {
            return;
        }
        let calls = self.moves.random_range(MOVED_CALLS);
        if draft.move_substep(LUNA, m.model, calls) > 0 {
            draft.kind = Some(OVERSIZED_MODEL);
        }
    }

    /// Assigns ids, times, latencies and costs, and records the truth.
    pub(super) fn materialize(&mut self, feature: Feature, start: DateTime<Utc>, mut draft: Draft) {
        self.model_move(feature, start, &mut draft);
        let session_id = self.new_session_id(feature);
        let labels: BTreeMap<String, String> = [("feature", feature.name()), ("env", "prod")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut at = start;
        let mut requests = Vec::with_capacity(draft.calls.len());
        for c in &draft.calls {
            if let Some(prev) = requests.last().map(|r: &SimRequest| r.latency_ms) {
                let gap = self.rng.random_range(c.gap.millis());
                at += Duration::milliseconds(prev as i64 + gap);
            }
            let (http_status, error_type) = c.failure.map_or((200, None), |f| {
                let (status, kind) = f.http();
                (status, Some(kind.to_string()))
            });
            requests.push(SimRequest {
                request_id: self.new_request_id(),
                session_id: session_id.clone(),
                created_at: at,
                model: c.model.to_string(),
                status: if c.failure.is_some() {
                    "error"
                } else {
                    "success"
                }
                .to_string(),
                http_status,
                error_type,
                input_tokens: c.input,
                cached_tokens: c.cached,
                cache_write_tokens: c.write,
                output_tokens: c.output,
                cost_usd: self.cost(c),
                latency_ms: self.latency(c),
                labels: labels.clone(),
            });
        }
        if let Some(kind) = draft.kind {
            self.truth.insert(kind, &session_id);
        }
        self.sessions.push(SimSession {
            session_id,
            labels,
            requests,
            fixed_row: None,
        });
    }
}

//! The adversarial family's generator: hour by hour, how many sessions
//! start and of which feature, the `batch` bursts, the thin new group, the
//! scattered loops, and which incidents the schedule puts on each session.
//!
//! Every draw comes from one [`SimRng`] seeded from the parameters (apart
//! from the first family's), in a fixed order: the same parameters always
//! yield the same rows. The model moves draw from a second stream of their
//! own, so the sessions around them are the same as without them.

use super::super::ScenarioParams;
use super::draft::{Draft, Situation};
use super::rows::Writer;
use super::schedule::Span;
use super::schedule::{Plan, within};
use super::shapes::agents::{self, AgentLoop};
use super::shapes::{conversations, newcomers, routing};
use super::{
    AGENT_LOOP_SHARE, BATCH_BURST_SESSIONS, CONTRACT_QA_PER_DAY, ESTIMATES_BROKEN_MINUTES,
    ESTIMATES_PER_DAY, FAQ_SPIKE_FACTOR, FEATURE_SHARES, Feature, MOVE_SALT, MOVED_CALLS,
    NIGHT_FLOOR, SCATTERED_BLOCKED, SCATTERED_CYCLES, SCATTERED_VALIDATION,
};
use crate::rng::SimRng;
use chrono::{DateTime, Duration, Timelike, Utc};

/// The state of one generation.
pub(super) struct Generator {
    pub(super) rng: SimRng,
    /// The model moves' own stream: which sessions move, and how much.
    moves: SimRng,
    plan: Plan,
    params: ScenarioParams,
    pub(super) writer: Writer,
}

impl Generator {
    /// A generator seeded from `p`, its schedule drawn.
    pub(super) fn new(p: &ScenarioParams, salt: u64) -> Generator {
        let mut rng = SimRng::seed_from_u64(p.seed ^ salt);
        let mut moves = SimRng::seed_from_u64(p.seed ^ salt ^ MOVE_SALT);
        let plan = Plan::new(p, &mut rng, &mut moves);
        Generator {
            rng,
            moves,
            plan,
            params: p.clone(),
            writer: Writer::new(),
        }
    }

    /// The family's schedule.
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
    fn diurnal(t: DateTime<Utc>) -> f64 {
        let h = f64::from(t.hour()) + 0.5;
        NIGHT_FLOOR + (-(h - 15.0).powi(2) / (2.0 * 4.0 * 4.0)).exp()
    }

    /// Expected sessions in the hour starting at `t`, before bursts.
    fn expected(&self, t: DateTime<Utc>) -> f64 {
        let day_total: f64 = (0..24).map(|h| Self::diurnal(t - Duration::hours(h))).sum();
        f64::from(self.params.sessions_per_day) * Self::diurnal(t) / day_total
    }

    /// A whole count with `expected` as its mean (the fraction by chance).
    fn count(&mut self, expected: f64) -> u64 {
        let whole = expected.floor();
        whole as u64 + u64::from(self.rng.random_bool(expected - whole))
    }

    /// A random time in `[t, t + minutes)`.
    fn time_in(&mut self, t: DateTime<Utc>, minutes: i64) -> DateTime<Utc> {
        t + Duration::milliseconds(self.rng.random_range(0..minutes.max(1) * 60_000))
    }

    /// Generates the sessions starting in the hour from `t`.
    pub(super) fn hour(&mut self, t: DateTime<Utc>) {
        let expected = self.expected(t);
        let jitter = self.rng.random_range(0.9..=1.1);
        let n = (expected * jitter).round() as u64;
        for _ in 0..n {
            let at = self.time_in(t, 60);
            let feature = self.pick_feature();
            self.session(feature, at);
        }
        if within(self.plan.faq_spike, t) {
            let share = FEATURE_SHARES
                .iter()
                .find(|(f, _)| *f == Feature::Faq)
                .map_or(0.0, |(_, s)| *s);
            let total: f64 = FEATURE_SHARES.iter().map(|(_, s)| s).sum();
            let extra = (expected * share / total * f64::from(FAQ_SPIKE_FACTOR - 1)).round();
            for _ in 0..extra as u64 {
                let at = self.time_in(t, 60);
                self.session(Feature::Faq, at);
            }
        }
        if self.plan.contract_qa_from.is_some_and(|from| t >= from) {
            let n = self.count(CONTRACT_QA_PER_DAY / 24.0);
            for _ in 0..n {
                let at = self.time_in(t, 60);
                self.session(Feature::ContractQa, at);
            }
        }
        if t.hour().is_multiple_of(6) {
            self.burst(t);
        }
    }

    /// A `batch` burst: its sessions start within 15 minutes of a time
    /// drawn in the hour's first 20 minutes.
    fn burst(&mut self, t: DateTime<Utc>) {
        let from = self.time_in(t, 20);
        let n = self.rng.random_range(BATCH_BURST_SESSIONS);
        for _ in 0..n {
            let at = self.time_in(from, 15);
            self.session(Feature::Batch, at);
        }
    }

    /// A few isolated `agent` loops at random times.
    pub(super) fn scattered_loops(&mut self) {
        let millis = i64::from(self.params.days) * 86_400_000;
        let validation = self.rng.random_range(SCATTERED_VALIDATION);
        let cycles = self.rng.random_range(SCATTERED_CYCLES);
        for k in 0..validation + cycles {
            let at =
                self.params.start + Duration::milliseconds(self.rng.random_range(0..millis.max(1)));
            let kind = if k < validation {
                AgentLoop::Validation
            } else {
                AgentLoop::Cycle
            };
            let draft = agents::agent(&mut self.rng, Some(kind));
            self.writer.write(&mut self.rng, Feature::Agent, at, draft);
        }
    }

    /// A few isolated `agent` sessions stuck on a blocked tool call, at
    /// random times. Drawn after everything else, so the sessions before
    /// them are the same with or without them.
    pub(super) fn blocked_tools(&mut self) {
        let millis = i64::from(self.params.days) * 86_400_000;
        for _ in 0..self.rng.random_range(SCATTERED_BLOCKED) {
            let at =
                self.params.start + Duration::milliseconds(self.rng.random_range(0..millis.max(1)));
            let draft = agents::agent(&mut self.rng, Some(AgentLoop::Blocked));
            self.writer.write(&mut self.rng, Feature::Agent, at, draft);
        }
    }

    /// The feature of a regular session, by share.
    fn pick_feature(&mut self) -> Feature {
        let total: f64 = FEATURE_SHARES.iter().map(|(_, s)| s).sum();
        let mut x = self.rng.random_range(0.0..total);
        for (feature, share) in FEATURE_SHARES {
            if x < share {
                return feature;
            }
            x -= share;
        }
        Feature::Helpdesk
    }

    /// `estimates` over every day, its release breaking the prefix on day
    /// 1, and the two one-session services on day 2 (the last day of a
    /// shorter run): drawn after every other session.
    pub(super) fn newcomers(&mut self) {
        let days = i64::from(self.params.days.max(1));
        let start = self.params.start;
        let from = start
            + Duration::days(1.min(days - 1))
            + Duration::minutes(self.rng.random_range(10 * 60..=18 * 60));
        let minutes = self.rng.random_range(ESTIMATES_BROKEN_MINUTES);
        let broken = Some(Span {
            start: from,
            end: from + Duration::minutes(minutes),
        });
        for hour in 0..days * 24 {
            let t = start + Duration::hours(hour);
            let day_total: f64 = (0..24).map(|h| Self::diurnal(t - Duration::hours(h))).sum();
            let n = self.count(ESTIMATES_PER_DAY * Self::diurnal(t) / day_total);
            for _ in 0..n {
                let at = self.time_in(t, 60);
                let draft = newcomers::estimates(&mut self.rng, within(broken, at));
                self.writer
                    .write(&mut self.rng, Feature::Estimates, at, draft);
            }
        }
        let day = start + Duration::days(2.min(days - 1));
        let at = self.time_in(day + Duration::hours(9), 8 * 60);
        let draft = newcomers::changelog(&mut self.rng);
        self.writer
            .write(&mut self.rng, Feature::Changelog, at, draft);
        let at = self.time_in(day + Duration::hours(9), 8 * 60);
        let draft = newcomers::tagger(&mut self.rng);
        self.writer.write(&mut self.rng, Feature::Tagger, at, draft);
    }

    /// Drafts and writes one session of `feature` starting at `at`.
    fn session(&mut self, feature: Feature, at: DateTime<Utc>) {
        let mut draft = self.draft(feature, at);
        self.model_move(feature, at, &mut draft);
        self.writer.write(&mut self.rng, feature, at, draft);
    }

    /// During a model move of `feature` at `at`, sends the sub-step of an
    /// ordinary session (one of the move's share) to the move's premium
    /// model. Sessions made for another incident are left as they are.
    /// Draws only from the moves' own stream.
    fn model_move(&mut self, feature: Feature, at: DateTime<Utc>, draft: &mut Draft) {
        let ordinary = matches!(
            draft.situation,
            Situation::SubAgent
                | Situation::Escalation
                | Situation::Failover
                | Situation::ShortCalls
        );
        if !ordinary {
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
        if draft.move_substep(m.model, calls) > 0 {
            draft.situation = Situation::ModelMove;
        }
    }

    /// A session of `feature` starting at `at`, with the incidents of the
    /// schedule.
    fn draft(&mut self, feature: Feature, at: DateTime<Utc>) -> Draft {
        let plan = &self.plan;
        let rng = &mut self.rng;
        match feature {
            Feature::Helpdesk => conversations::helpdesk(rng, within(plan.helpdesk_broken, at)),
            Feature::ClaudeDesk => conversations::claude_desk(rng, within(plan.desk_broken, at)),
            Feature::DocReview => conversations::doc_review(rng),
            Feature::Faq => conversations::faq(rng),
            Feature::Agent => {
                let looping = within(plan.agent_loops, at) && rng.random_bool(AGENT_LOOP_SHARE);
                agents::agent(rng, looping.then_some(AgentLoop::Validation))
            }
            Feature::Checkout => {
                let looping =
                    within(plan.checkout_loops, at) && rng.random_bool(agents::CHECKOUT_LOOP_SHARE);
                agents::checkout(rng, looping, within(plan.checkout_outage, at))
            }
            Feature::Batch => agents::batch(rng, within(plan.batch_storm, at)),
            Feature::Triage => routing::triage(rng, plan.triage_premium_at(at)),
            Feature::Router => routing::router(
                rng,
                within(plan.router_misroute, at),
                within(plan.router_broken, at),
            ),
            Feature::FieldOps => routing::fieldops(rng, within(plan.fieldops_premium, at)),
            Feature::Summarize => {
                let switched = plan.summarize_switch.is_some_and(|s| at >= s);
                routing::summarize(rng, switched)
            }
            Feature::ContractQa => routing::contract_qa(rng),
            Feature::Estimates => newcomers::estimates(rng, false),
            Feature::Changelog => newcomers::changelog(rng),
            Feature::Tagger => newcomers::tagger(rng),
        }
    }
}

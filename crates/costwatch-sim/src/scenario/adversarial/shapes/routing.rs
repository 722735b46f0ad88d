//! Which model a call goes to: `triage` sub-agents (misrouted to a premium
//! model during incidents, escalating a hard case on purpose, or failing
//! over to another small model), `router` sessions that mix three models,
//! `fieldops` (served without a per-model breakdown), `summarize` (which
//! moves to a premium model on purpose), and `contract-qa` (a thin, new
//! group whose design is a premium model on short prompts).

use super::super::catalogue::{HAIKU, LUNA, NOVA, SOL, SONNET};
use super::super::draft::{CachePolicy, Draft, NewCall, Outcome, Situation};
use super::{Talk, chain_gap, turn_gap};
use crate::rng::SimRng;

/// Share of `triage` sessions misrouted while an incident lasts.
pub(in super::super) const TRIAGE_PREMIUM_SHARE: f64 = 0.25;
/// Share of `triage` sessions that escalate one hard case to Sol.
pub(in super::super) const TRIAGE_ESCALATION_SHARE: f64 = 0.05;
/// Share of `triage` sessions that fail over to Haiku after a rate limit.
pub(in super::super) const TRIAGE_FAILOVER_SHARE: f64 = 0.03;
/// Share of `router` sessions misrouted while the incident lasts.
pub(in super::super) const ROUTER_MISROUTE_SHARE: f64 = 0.30;
/// Share of `router` sessions whose prefix breaks while the incident lasts.
pub(in super::super) const ROUTER_BROKEN_SHARE: f64 = 0.40;
/// Share of `fieldops` sessions misrouted while the incident lasts.
pub(in super::super) const FIELDOPS_PREMIUM_SHARE: f64 = 0.30;
/// Share of `contract-qa` sessions on long documents.
pub(in super::super) const CONTRACT_LONG_SHARE: f64 = 0.30;

/// A short independent call meant for `norm`, sent to `model`.
fn short(
    rng: &mut SimRng,
    d: &mut Draft,
    model: &'static str,
    norm: &'static str,
    thread: u8,
    input: std::ops::RangeInclusive<u64>,
    output: std::ops::RangeInclusive<u64>,
) -> usize {
    let input = rng.random_range(input);
    let output = rng.random_range(output);
    let gap_ms = chain_gap(rng);
    d.call(NewCall {
        model,
        thread,
        input,
        output,
        prefix: 0,
        norm,
        gap_ms,
    })
}

/// A `triage` session: three to six short sub-agent calls on Luna.
/// `premium`: during an incident, the premium model some calls go to.
pub(in super::super) fn triage(rng: &mut SimRng, premium: Option<&'static str>) -> Draft {
    let n = rng.random_range(3usize..=6);
    let misrouted = premium.filter(|_| rng.random_bool(TRIAGE_PREMIUM_SHARE));
    let x = rng.random_f64();
    let escalate = misrouted.is_none() && x < TRIAGE_ESCALATION_SHARE;
    let failover = misrouted.is_none()
        && (TRIAGE_ESCALATION_SHARE..TRIAGE_ESCALATION_SHARE + TRIAGE_FAILOVER_SHARE).contains(&x);
    let premium_calls = rng.random_range(2usize..=4).min(n);
    let special = rng.random_range(0..n);
    let mut d = Draft::new(Situation::SubAgent);
    let mut model = LUNA;
    for i in 0..n {
        match misrouted {
            Some(m) if i < premium_calls => {
                d.situation = Situation::PremiumSubtask;
                short(rng, &mut d, m, LUNA, 0, 60..=250, 10..=40);
                continue;
            }
            _ => {}
        }
        if escalate && i == special {
            d.situation = Situation::Escalation;
            short(rng, &mut d, SOL, SOL, 1, 3_000..=8_000, 200..=600);
            continue;
        }
        let at = short(rng, &mut d, model, LUNA, 0, 100..=300, 15..=40);
        if failover && i == special {
            // The router moves the rest of the session to another small
            // model after a rate limit.
            d.situation = Situation::Failover;
            d.fail(at, Outcome::RateLimited);
            model = HAIKU;
            short(rng, &mut d, model, LUNA, 0, 100..=300, 15..=40);
        }
    }
    d
}

/// A `router` session: a Luna conversation, a premium planning call on a
/// big prompt, classification steps on Luna and extraction on Nova (no
/// prompt cache). `misroute`: classification goes to Sol; `broken`: the
/// conversation's prefix breaks.
pub(in super::super) fn router(rng: &mut SimRng, misroute: bool, broken: bool) -> Draft {
    let misrouted = misroute && rng.random_bool(ROUTER_MISROUTE_SHARE);
    let is_broken = broken && rng.random_bool(ROUTER_BROKEN_SHARE);
    let turns = rng.random_range(3..=8);
    let talk = Talk::growing(rng, LUNA, turns, 1_200..=3_000, 100..=600, 80..=400);
    let plans = rng.random_bool(0.7);
    let classify = rng.random_range(1usize..=3);
    let extract = rng.random_range(1usize..=3);
    let mut d = Draft::new(Situation::MixedRouter);
    for i in 0..talk.prompts.len() {
        let gap = turn_gap(rng);
        talk.turn(rng, &mut d, i, gap);
        if i == 0 && plans {
            short(rng, &mut d, SOL, SOL, 1, 3_000..=12_000, 200..=800);
        }
        if i == 1 {
            let model = if misrouted { SOL } else { LUNA };
            for _ in 0..classify {
                short(rng, &mut d, model, LUNA, 2, 150..=600, 5..=30);
            }
        }
    }
    for _ in 0..extract {
        short(rng, &mut d, NOVA, NOVA, 3, 2_000..=6_000, 200..=800);
    }
    if misrouted {
        d.situation = Situation::PremiumSubtask;
    }
    if is_broken {
        d.cache = CachePolicy::Broken;
        d.situation = Situation::BrokenCache;
    }
    d
}

/// A `fieldops` session: short Luna steps and, in half of them, a Sol
/// planning call; served without a per-model breakdown. `misroute`: some
/// tiny steps go to Sol.
pub(in super::super) fn fieldops(rng: &mut SimRng, misroute: bool) -> Draft {
    let n = rng.random_range(3usize..=8);
    let plans = rng.random_bool(0.5);
    let misrouted = misroute && rng.random_bool(FIELDOPS_PREMIUM_SHARE);
    let premium_calls = rng.random_range(2usize..=4).min(n);
    let mut d = Draft::new(Situation::SubAgent);
    if plans {
        d.situation = Situation::MixedRouter;
        short(rng, &mut d, SOL, SOL, 1, 2_000..=6_000, 200..=600);
    }
    for i in 0..n {
        let model = if misrouted && i < premium_calls {
            d.situation = Situation::PremiumSubtask;
            SOL
        } else {
            LUNA
        };
        short(rng, &mut d, model, LUNA, 0, 200..=700, 20..=200);
    }
    d
}

/// A `summarize` session: one to three short prompts, on Luna until the
/// group moves to Sonnet on purpose at `switched`.
pub(in super::super) fn summarize(rng: &mut SimRng, switched: bool) -> Draft {
    let (model, situation) = if switched {
        (SONNET, Situation::ModelMigration)
    } else {
        (LUNA, Situation::ShortCalls)
    };
    let n = rng.random_range(1..=3);
    let mut d = Draft::new(situation);
    for _ in 0..n {
        short(rng, &mut d, model, model, 0, 300..=900, 80..=300);
    }
    d
}

/// A `contract-qa` session on Sonnet: short questions, or a conversation
/// over a long document.
pub(in super::super) fn contract_qa(rng: &mut SimRng) -> Draft {
    let mut d = Draft::new(Situation::PremiumNorm);
    if rng.random_bool(CONTRACT_LONG_SHARE) {
        let turns = rng.random_range(1..=3);
        let talk = Talk::growing(rng, SONNET, turns, 4_000..=12_000, 200..=800, 300..=900);
        talk.all(rng, &mut d, turn_gap);
    } else {
        let n = rng.random_range(1..=3);
        for _ in 0..n {
            short(rng, &mut d, SONNET, SONNET, 0, 300..=900, 100..=400);
        }
    }
    d
}

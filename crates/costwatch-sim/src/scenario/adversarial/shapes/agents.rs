//! Many calls per session: `agent` tool loops with heavy-tailed lengths
//! (some cut to a fixed context budget, some stuck re-validating one step
//! or cycling between two), `checkout` chains (healthy retries, failure
//! loops, and bounded retries through a provider outage), and `batch`
//! fan-outs that arrive in bursts (one of which meets a rate-limit storm).

use super::super::catalogue::LUNA;
use super::super::draft::{Draft, NewCall, Outcome, Situation};
use super::{chain_gap, lognormal_count, pareto_count};
use crate::rng::SimRng;

/// Median calls of an `agent` session.
pub(in super::super) const AGENT_MEDIAN_CALLS: f64 = 7.0;
/// Spread of `ln(calls)` of `agent` sessions: a heavy tail.
pub(in super::super) const AGENT_LOG_SIGMA: f64 = 1.1;
/// Share of `agent` apps that cut their context to a fixed budget.
pub(in super::super) const AGENT_BUDGET_SHARE: f64 = 0.25;
/// Share of `checkout` sessions that loop during the loop incident.
pub(in super::super) const CHECKOUT_LOOP_SHARE: f64 = 0.15;
/// Share of `checkout` sessions that meet the outage while it lasts.
pub(in super::super) const CHECKOUT_OUTAGE_SHARE: f64 = 0.80;
/// Share of `batch` sessions that loop in the rate-limit storm.
pub(in super::super) const BATCH_STORM_SHARE: f64 = 0.30;

/// How an `agent` session goes wrong, if it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in super::super) enum AgentLoop {
    /// One step resent, successfully, 8 to 13 times in all.
    Validation,
    /// Two steps resent in turn, 6 to 12 calls.
    Cycle,
    /// A tool call the application blocks: the model asks for it again,
    /// 8 to 40 times, each resend carrying its last answer (the same tool
    /// call) and the same error, so the prompt grows by the same amount on
    /// every call and the cost grows with the square of the count
    /// (Kilo-Org/kilocode#13772: one paid generation per step, $626).
    Blocked,
}

/// An `agent` session on Luna.
pub(in super::super) fn agent(rng: &mut SimRng, looping: Option<AgentLoop>) -> Draft {
    let n = lognormal_count(rng, AGENT_MEDIAN_CALLS, AGENT_LOG_SIGMA, 2..=400);
    let system = rng.random_range(1_100u64..=2_600);
    let budget = rng
        .random_bool(AGENT_BUDGET_SHARE)
        .then(|| rng.random_range(6_000u64..=16_000));
    let loop_at = looping.map(|_| rng.random_range(0..n as usize));
    let mut d = Draft::new(Situation::AgentRun);
    let mut grown = system + rng.random_range(200u64..=800);
    let mut previous = 0;
    let mut plateau = false;
    for i in 0..n as usize {
        if i > 0 {
            grown += rng.random_range(80u64..=1_500);
        }
        // Past the budget the oldest turns are dropped: the prompt stays at
        // the budget and shares only the system prompt with the last one.
        let (input, prefix) = match budget {
            Some(b) if grown > b => {
                plateau = true;
                (b - rng.random_range(0u64..=40), system)
            }
            _ => (grown, previous),
        };
        let output = rng.random_range(20u64..=600);
        let gap_ms = chain_gap(rng);
        let at = d.call(NewCall {
            model: LUNA,
            thread: 0,
            input,
            output,
            prefix,
            norm: LUNA,
            gap_ms,
        });
        previous = input;
        match looping.filter(|_| loop_at == Some(i)) {
            Some(AgentLoop::Validation) => {
                let resends = rng.random_range(7..=12);
                for _ in 0..resends {
                    let output = rng.random_range(5u64..=40);
                    let gap = rng.random_range(400..=3_000);
                    d.resend(at, Outcome::Ok, output, gap);
                }
            }
            Some(AgentLoop::Cycle) => {
                let other = d.call(NewCall {
                    model: LUNA,
                    thread: 0,
                    input: input + rng.random_range(100u64..=400),
                    output: rng.random_range(20u64..=200),
                    prefix: input,
                    norm: LUNA,
                    gap_ms: rng.random_range(300..=2_000),
                });
                let calls = rng.random_range(6..=12);
                for k in 0..calls {
                    let of = if k % 2 == 0 { at } else { other };
                    let output = rng.random_range(20u64..=200);
                    let gap = rng.random_range(300..=2_000);
                    d.resend(of, Outcome::Ok, output, gap);
                }
            }
            Some(AgentLoop::Blocked) => {
                // The step's answer is the tool call the application
                // refuses; the model asks for it again, and gets the same
                // refusal, every time.
                let call = rng.random_range(25u64..=120);
                let refusal = rng.random_range(15u64..=90);
                if let Some(step) = d.steps.get_mut(at) {
                    step.output = call;
                }
                let resends = rng.random_range(7..=39);
                for _ in 0..resends {
                    let gap = rng.random_range(300..=2_500);
                    d.resend_appended(at, call + refusal, call, gap);
                }
                // The loop ends the session: a person stops it.
                break;
            }
            None => {}
        }
    }
    d.situation = match looping {
        Some(AgentLoop::Validation) => Situation::ValidationLoop,
        Some(AgentLoop::Cycle) => Situation::CycleLoop,
        Some(AgentLoop::Blocked) => Situation::BlockedTool,
        None if plateau => Situation::ContextPlateau,
        None => Situation::AgentRun,
    };
    d
}

/// One short checkout call.
fn checkout_call(rng: &mut SimRng, d: &mut Draft) -> usize {
    let input = rng.random_range(300u64..=500);
    let output = rng.random_range(20u64..=120);
    let gap_ms = chain_gap(rng);
    d.call(NewCall {
        model: LUNA,
        thread: 0,
        input,
        output,
        prefix: 0,
        norm: LUNA,
        gap_ms,
    })
}

/// A `checkout` session: two to five short calls. `looping`: stuck
/// resending one call 6 to 30 times, mostly failing; `outage`: the
/// provider is down, and a call is retried three times with backoff, then
/// given up.
pub(in super::super) fn checkout(rng: &mut SimRng, looping: bool, outage: bool) -> Draft {
    let mut d = Draft::new(Situation::ShortCalls);
    if looping {
        d.situation = Situation::FailureLoop;
        if rng.random_bool(0.3) {
            checkout_call(rng, &mut d);
        }
        let at = checkout_call(rng, &mut d);
        let sends = rng.random_range(6u32..=30);
        let errors = ((f64::from(sends) * rng.random_range(0.6..=1.0)).ceil() as u32).min(sends);
        let usual = if rng.random_bool(0.7) {
            Outcome::RateLimited
        } else {
            Outcome::Timeout
        };
        let output = d.steps.get(at).map_or(0, |s| s.output);
        d.fail(at, usual);
        for k in 1..sends {
            let ok = errors < sends && k == sends - 1;
            let outcome = if ok { Outcome::Ok } else { usual };
            let gap = rng.random_range(500..=3_000);
            d.resend(at, outcome, output, gap);
        }
        return d;
    }
    let n = rng.random_range(2..=5);
    let outage_at =
        (outage && rng.random_bool(CHECKOUT_OUTAGE_SHARE)).then(|| rng.random_range(0..n));
    let retry_at = rng.random_bool(0.05).then(|| rng.random_range(0..n));
    for i in 0..n {
        let at = checkout_call(rng, &mut d);
        let output = d.steps.get(at).map_or(0, |s| s.output);
        if outage_at == Some(i) {
            d.situation = Situation::BoundedRetry;
            d.fail(at, Outcome::Unavailable);
            for backoff in [1_000i64, 2_000, 4_000] {
                let gap = backoff + rng.random_range(0i64..=500);
                d.resend(at, Outcome::Unavailable, 0, gap);
            }
            return d;
        }
        if retry_at == Some(i) {
            d.fail(at, Outcome::RateLimited);
            let resends = rng.random_range(1..=2);
            for k in 0..resends {
                let outcome = if k + 1 == resends {
                    Outcome::Ok
                } else {
                    Outcome::RateLimited
                };
                let gap = rng.random_range(1_000..=8_000);
                d.resend(at, outcome, output, gap);
            }
        }
    }
    d
}

/// A `batch` fan-out: a heavy-tailed number of independent items, each
/// a template shorter than the cache minimum plus the item. `storm`: the
/// burst met a rate-limit storm.
pub(in super::super) fn batch(rng: &mut SimRng, storm: bool) -> Draft {
    let n = pareto_count(rng, 4.0, 1.3, 150);
    let template = rng.random_range(300u64..=750);
    let looping = storm && rng.random_bool(BATCH_STORM_SHARE);
    let retry = !looping && rng.random_bool(0.08);
    let trouble_at = rng.random_range(0..n);
    let mut d = Draft::new(if looping {
        Situation::FailureLoop
    } else {
        Situation::FanOut
    });
    for i in 0..n {
        let input = template + rng.random_range(40u64..=900);
        let output = rng.random_range(5u64..=60);
        let gap_ms = rng.random_range(200..=1_500);
        let at = d.call(NewCall {
            model: LUNA,
            thread: 0,
            input,
            output,
            prefix: template,
            norm: LUNA,
            gap_ms,
        });
        if i != trouble_at || !(looping || retry) {
            continue;
        }
        d.fail(at, Outcome::RateLimited);
        let resends = if looping {
            rng.random_range(5..=19)
        } else {
            rng.random_range(1..=2)
        };
        for k in 0..resends {
            let outcome = if k + 1 == resends {
                Outcome::Ok
            } else {
                Outcome::RateLimited
            };
            let gap = rng.random_range(500..=2_000);
            d.resend(at, outcome, output, gap);
        }
    }
    d
}

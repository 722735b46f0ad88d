//! Hard caps and cost accounting for one investigation.
//!
//! Every model call is planned before it is made: the worst case of the call
//! (its prompt, estimated from above by `tokens.rs`, plus the `max_tokens` it
//! is allowed, all priced at the uncached input price) must fit in what is
//! left of the run's token and dollar caps and of the day's budget. If it
//! does not, `max_tokens` is shrunk to what is left, and if that leaves less
//! than [`MIN_USEFUL_MAX_TOKENS`] the run stops instead. The day's share is
//! reserved in the [`BudgetLedger`](super::BudgetLedger) before the call and
//! settled with the actual cost from `usage` after it.
//!
//! # Planning ahead
//!
//! - **The output cap is shared out.** A round that may still call tools
//!   asks for at most [`output_share`] of the output tokens left: an equal
//!   share per round the caps still allow (never below
//!   [`MIN_USEFUL_MAX_TOKENS`]). So a small output cap leaves room for tool
//!   rounds and for the answer; the last round gets everything left.
//! - **The last affordable call is the answer.** [`RunBudget::next_call_refusal`]
//!   asks whether, after this call at its worst case, another call could
//!   still fit (the run's tokens and dollars, and what is left of the day's
//!   budget now): when none could, this call is made with
//!   `tool_choice: "none"`, so no paid round ends without an answer. Its
//!   message quotes what is really left now, not what would be left.
//!
//! A wrong estimate is still caught: a call whose reported usage passes a cap
//! stops the run at once (see `run/round.rs`), so it can overshoot a cap by
//! at most that one call's error, and it is reported, never silent.

use super::model::Usage;
use crate::domain::counted;
use chrono::NaiveDate;
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

/// The smallest `max_tokens` worth a call: below it the run stops instead.
pub const MIN_USEFUL_MAX_TOKENS: u32 = 64;

/// The hard limits of one investigation, and of a day
/// (`investigation.caps`).
#[derive(Debug, Clone, PartialEq, serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
#[schemars(transform = crate::settings::in_declared_order::<Caps>)]
pub struct Caps {
    /// Model calls per run.
    #[schemars(range(min = 1))]
    pub max_rounds: u32,
    /// Tool calls per run (refused and malformed calls count).
    pub max_tool_calls: u32,
    /// Prompt tokens per run, summed over its calls (cached ones included).
    #[schemars(range(min = 1))]
    pub max_input_tokens: u64,
    /// Completion tokens per run, summed over its calls.
    #[schemars(range(min = 1))]
    pub max_output_tokens: u64,
    /// Dollars per run.
    #[schemars(range(min = 0.0))]
    pub max_usd_per_run: f64,
    /// Dollars per UTC day, over every run and replica (kept in the ledger).
    #[schemars(range(min = 0.0))]
    pub max_usd_per_day: f64,
    /// Largest tool result passed to the model, in bytes, truncation marker
    /// included.
    #[schemars(range(min = 64))]
    pub max_tool_result_bytes: usize,
    /// Wall-clock time per run.
    #[serde(with = "crate::settings::units::positive")]
    #[schemars(with = "crate::settings::units::DurationText")]
    pub wall_timeout: std::time::Duration,
}

impl Default for Caps {
    fn default() -> Self {
        Caps {
            max_rounds: 4,
            max_tool_calls: 6,
            max_input_tokens: 16_000,
            max_output_tokens: 2_000,
            max_usd_per_run: 0.05,
            max_usd_per_day: 1.0,
            max_tool_result_bytes: 4_000,
            wall_timeout: std::time::Duration::from_secs(120),
        }
    }
}

/// What the investigating model costs, in dollars per million tokens
/// (`investigation.prices`).
#[derive(
    Debug, Clone, Copy, PartialEq, serde::Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
#[schemars(transform = crate::settings::in_declared_order::<Prices>)]
pub struct Prices {
    /// Uncached prompt tokens.
    #[schemars(range(min = 0.0))]
    #[schemars(example = 0.2)]
    pub input_usd_per_mtok: f64,
    /// Prompt tokens read from the cache (the input price without a cache).
    #[schemars(range(min = 0.0))]
    #[schemars(example = 0.05)]
    pub cached_input_usd_per_mtok: f64,
    /// Completion tokens.
    #[schemars(range(min = 0.0))]
    #[schemars(example = 0.8)]
    pub output_usd_per_mtok: f64,
}

impl Prices {
    /// The prices of a catalogue model (cached reads at the input price when
    /// it has no prompt cache).
    pub fn from_catalogue(m: &crate::source::ModelPrice) -> Prices {
        Prices {
            input_usd_per_mtok: m.input_usd_per_mtok,
            cached_input_usd_per_mtok: m.cached_input_usd_per_mtok.unwrap_or(m.input_usd_per_mtok),
            output_usd_per_mtok: m.output_usd_per_mtok,
        }
    }

    /// What a call with this usage cost.
    pub fn cost(&self, usage: &Usage) -> f64 {
        let cached = usage.cached_tokens.min(usage.prompt_tokens);
        let uncached = usage.prompt_tokens - cached;
        (uncached as f64 * self.input_usd_per_mtok
            + cached as f64 * self.cached_input_usd_per_mtok
            + usage.completion_tokens as f64 * self.output_usd_per_mtok)
            / 1e6
    }

    /// The most a call with `prompt_tokens` and `max_tokens` can cost: every
    /// prompt token at the dearer of the two input prices, every allowed
    /// completion token used.
    pub fn worst_case(&self, prompt_tokens: u64, max_tokens: u64) -> f64 {
        let input = self.input_usd_per_mtok.max(self.cached_input_usd_per_mtok);
        (prompt_tokens as f64 * input + max_tokens as f64 * self.output_usd_per_mtok) / 1e6
    }
}

/// `max_tokens` for a round that may still call tools: `per_call`, but no
/// more than an equal share of the `output_left` tokens over the
/// `rounds_left` rounds the caps allow (this one included), and never below
/// [`MIN_USEFUL_MAX_TOKENS`] (or `per_call` if smaller).
pub fn output_share(per_call: u32, output_left: u64, rounds_left: u32) -> u32 {
    let share = output_left / u64::from(rounds_left.max(1));
    let share = u32::try_from(share).unwrap_or(u32::MAX);
    per_call.min(share.max(MIN_USEFUL_MAX_TOKENS))
}

/// What a run has used so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Spent {
    /// Prompt tokens, cached ones included.
    pub input_tokens: u64,
    /// Prompt tokens read from the cache.
    pub cached_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// Dollars.
    pub cost_usd: f64,
}

/// A model call that fits: how large it may be and what it may cost at most.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CallPlan {
    /// The estimated prompt tokens (never below the true count, see above).
    pub prompt_tokens: u64,
    /// `max_tokens` for the call.
    pub max_tokens: u32,
    /// The call's worst-case cost, reserved before it is made.
    pub worst_usd: f64,
}

/// Which cap refused a call.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// The run's input or output token cap.
    TokenCap(String),
    /// The run's dollar cap.
    RunBudget(String),
    /// The day's dollar cap.
    DailyBudget(String),
}

/// The caps of one run and what it has used.
#[derive(Debug, Clone)]
pub struct RunBudget {
    caps: Caps,
    prices: Prices,
    spent: Spent,
}

impl RunBudget {
    /// A fresh run under `caps`, priced at `prices`.
    pub fn new(caps: Caps, prices: Prices) -> RunBudget {
        RunBudget {
            caps,
            prices,
            spent: Spent::default(),
        }
    }

    /// What the run has used so far.
    pub fn spent(&self) -> Spent {
        self.spent
    }

    /// The caps.
    pub fn caps(&self) -> &Caps {
        &self.caps
    }

    /// The prices.
    pub fn prices(&self) -> &Prices {
        &self.prices
    }

    /// Whether a call of `prompt_tokens` and `max_tokens` fits in the run's
    /// caps and in `day_left_usd`.
    fn fits(&self, prompt_tokens: u64, max_tokens: u64, day_left_usd: f64) -> bool {
        let worst = self.prices.worst_case(prompt_tokens, max_tokens);
        self.spent.input_tokens.saturating_add(prompt_tokens) <= self.caps.max_input_tokens
            && self.spent.output_tokens.saturating_add(max_tokens) <= self.caps.max_output_tokens
            && self.spent.cost_usd + worst <= self.caps.max_usd_per_run
            && worst <= day_left_usd
    }

    /// Plans the next call: its prompt of `prompt_tokens` (estimated) must
    /// fit, and `max_tokens` is `wanted` shrunk to what the run's caps and
    /// `day_left_usd` (the day's cap minus what the ledger holds) leave. A
    /// call that could not get at least [`MIN_USEFUL_MAX_TOKENS`] (or
    /// `wanted`, if smaller) is refused, naming the cap that binds.
    pub fn plan(
        &self,
        prompt_tokens: u64,
        wanted: u32,
        day_left_usd: f64,
    ) -> Result<CallPlan, Refusal> {
        let caps = &self.caps;
        let min = MIN_USEFUL_MAX_TOKENS.min(wanted).max(1);
        let input_left = caps
            .max_input_tokens
            .saturating_sub(self.spent.input_tokens);
        if prompt_tokens > input_left {
            return Err(Refusal::TokenCap(format!(
                "the next prompt (about {}) does not fit in the {} left of {}",
                counted(prompt_tokens, "token"),
                counted(input_left, "input token"),
                caps.max_input_tokens
            )));
        }
        let output_left = caps
            .max_output_tokens
            .saturating_sub(self.spent.output_tokens);
        if output_left < u64::from(min) {
            return Err(Refusal::TokenCap(format!(
                "{} left of {}, fewer than the {min} an answer needs",
                counted(output_left, "output token"),
                caps.max_output_tokens
            )));
        }
        let run_left = caps.max_usd_per_run - self.spent.cost_usd;
        let prompt_usd = self.prices.worst_case(prompt_tokens, 0);
        let by_usd = |left: f64| -> u64 {
            let per_token = self.prices.output_usd_per_mtok / 1e6;
            let rest = left - prompt_usd;
            if rest < 0.0 {
                0
            } else if per_token <= 0.0 {
                u64::MAX
            } else {
                (rest / per_token).floor().min(u64::MAX as f64) as u64
            }
        };
        let mut max_tokens = u64::from(wanted)
            .min(output_left)
            .min(by_usd(run_left))
            .min(by_usd(day_left_usd));
        // The float division above can be off by one either way; the same
        // check that guards the caps decides.
        while max_tokens > 0 && !self.fits(prompt_tokens, max_tokens, day_left_usd) {
            max_tokens -= 1;
        }
        let ceiling = u64::from(wanted).min(output_left);
        for _ in 0..2 {
            if max_tokens < ceiling && self.fits(prompt_tokens, max_tokens + 1, day_left_usd) {
                max_tokens += 1;
            }
        }
        if max_tokens < u64::from(min) || !self.fits(prompt_tokens, max_tokens, day_left_usd) {
            let worst = self.prices.worst_case(prompt_tokens, u64::from(min));
            return Err(if self.spent.cost_usd + worst > caps.max_usd_per_run {
                Refusal::RunBudget(format!(
                    "the next call's worst case (${worst:.6}) does not fit in the ${:.6} left of the run's ${}",
                    run_left.max(0.0),
                    caps.max_usd_per_run
                ))
            } else {
                Refusal::DailyBudget(format!(
                    "the next call's worst case (${worst:.6}) does not fit in the ${:.6} left of today's ${}",
                    day_left_usd.max(0.0),
                    caps.max_usd_per_day
                ))
            });
        }
        let max_tokens = u32::try_from(max_tokens).unwrap_or(u32::MAX);
        Ok(CallPlan {
            prompt_tokens,
            max_tokens,
            worst_usd: self.prices.worst_case(prompt_tokens, u64::from(max_tokens)),
        })
    }

    /// What would refuse another call after this one: `Some` means the
    /// call planned as `plan` is the last one the caps allow, so it must
    /// answer. The next call is taken to need a prompt of `next_prompt`
    /// tokens and [`MIN_USEFUL_MAX_TOKENS`] of output, after this one at its
    /// worst case; `day_left_usd` is what the day's budget has left now.
    /// The message quotes what is left now.
    pub fn next_call_refusal(
        &self,
        plan: &CallPlan,
        next_prompt: u64,
        day_left_usd: f64,
    ) -> Option<Refusal> {
        let caps = &self.caps;
        let min = u64::from(MIN_USEFUL_MAX_TOKENS);
        let input_left = caps
            .max_input_tokens
            .saturating_sub(self.spent.input_tokens);
        if plan.prompt_tokens.saturating_add(next_prompt) > input_left {
            return Some(Refusal::TokenCap(format!(
                "{} left of {}; this call's prompt takes about {} and another would need about {}",
                counted(input_left, "input token"),
                caps.max_input_tokens,
                plan.prompt_tokens,
                next_prompt
            )));
        }
        let output_left = caps
            .max_output_tokens
            .saturating_sub(self.spent.output_tokens);
        if u64::from(plan.max_tokens).saturating_add(min) > output_left {
            return Some(Refusal::TokenCap(format!(
                "{} left of {}; this call may use {} and another would need at least {min}",
                counted(output_left, "output token"),
                caps.max_output_tokens,
                plan.max_tokens
            )));
        }
        let next_worst = self.prices.worst_case(next_prompt, min);
        let run_left = caps.max_usd_per_run - self.spent.cost_usd;
        if plan.worst_usd + next_worst > run_left {
            return Some(Refusal::RunBudget(format!(
                "${:.6} left of the run's ${}; this call may cost ${:.6} and another at least ${next_worst:.6}",
                run_left.max(0.0),
                caps.max_usd_per_run,
                plan.worst_usd
            )));
        }
        if plan.worst_usd + next_worst > day_left_usd {
            return Some(Refusal::DailyBudget(format!(
                "${:.6} left of today's ${}; this call may cost ${:.6} and another at least ${next_worst:.6}",
                day_left_usd.max(0.0),
                caps.max_usd_per_day,
                plan.worst_usd
            )));
        }
        None
    }

    /// Counts a call's usage and cost.
    pub fn record(&mut self, usage: &Usage, cost_usd: f64) {
        self.spent.input_tokens += usage.prompt_tokens;
        self.spent.cached_tokens += usage.cached_tokens.min(usage.prompt_tokens);
        self.spent.output_tokens += usage.completion_tokens;
        self.spent.cost_usd += cost_usd;
    }

    /// Counts a call whose outcome is unknown (it timed out or its answer
    /// could not be read) at its worst case.
    pub fn record_worst_case(&mut self, plan: &CallPlan) {
        self.spent.input_tokens += plan.prompt_tokens;
        self.spent.output_tokens += u64::from(plan.max_tokens);
        self.spent.cost_usd += plan.worst_usd;
    }
}

/// A [`BudgetLedger`](super::BudgetLedger) in memory, for tests and demos
/// (the daemon keeps the day's budget in the state database).
#[derive(Debug, Default)]
pub struct MemoryLedger {
    days: Mutex<HashMap<NaiveDate, f64>>,
}

impl MemoryLedger {
    /// An empty ledger.
    pub fn new() -> MemoryLedger {
        MemoryLedger::default()
    }

    /// A ledger in which `day` has already spent `usd`.
    pub fn with_spent(day: NaiveDate, usd: f64) -> MemoryLedger {
        let ledger = MemoryLedger::default();
        ledger.with(|d| d.insert(day, usd));
        ledger
    }

    fn with<R>(&self, f: impl FnOnce(&mut HashMap<NaiveDate, f64>) -> R) -> R {
        let mut days = self.days.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut days)
    }
}

impl super::BudgetLedger for MemoryLedger {
    async fn reserve(
        &self,
        day: NaiveDate,
        usd: f64,
        cap: f64,
    ) -> Result<bool, super::LedgerError> {
        Ok(self.with(|d| {
            let spent = d.entry(day).or_insert(0.0);
            if *spent + usd <= cap {
                *spent += usd;
                true
            } else {
                false
            }
        }))
    }

    async fn settle(
        &self,
        day: NaiveDate,
        reserved: f64,
        actual: f64,
    ) -> Result<(), super::LedgerError> {
        self.with(|d| {
            let spent = d.entry(day).or_insert(0.0);
            *spent = (*spent - reserved + actual).max(0.0);
        });
        Ok(())
    }

    async fn spent(&self, day: NaiveDate) -> Result<f64, super::LedgerError> {
        Ok(self.with(|d| d.get(&day).copied().unwrap_or(0.0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::investigate::BudgetLedger;

    fn prices() -> Prices {
        Prices {
            input_usd_per_mtok: 1.0,
            cached_input_usd_per_mtok: 0.1,
            output_usd_per_mtok: 4.0,
        }
    }

    fn caps() -> Caps {
        Caps {
            max_input_tokens: 10_000,
            max_output_tokens: 1_000,
            max_usd_per_run: 0.02,
            ..Caps::default()
        }
    }

    #[test]
    fn the_output_cap_is_shared_over_the_rounds_left() {
        assert_eq!(output_share(1024, 2_000, 4), 500);
        assert_eq!(output_share(1024, 1_000, 4), 250);
        assert_eq!(output_share(200, 1_000, 2), 200);
        // Never below a useful answer, nor above the call's own size.
        assert_eq!(output_share(1024, 100, 4), MIN_USEFUL_MAX_TOKENS);
        assert_eq!(output_share(1024, 100_000, 1), 1024);
    }

    #[test]
    fn worst_case_prices_every_prompt_token_uncached() {
        let p = prices();
        let usage = Usage {
            prompt_tokens: 1000,
            cached_tokens: 600,
            completion_tokens: 100,
        };
        assert!((p.cost(&usage) - (400.0 + 60.0 + 400.0) / 1e6).abs() < 1e-15);
        assert!(p.cost(&usage) <= p.worst_case(1000, 100));
    }

    #[test]
    fn max_tokens_shrinks_to_what_is_left_and_then_refuses() {
        let mut b = RunBudget::new(caps(), prices());
        let plan = b.plan(1_000, 800, f64::INFINITY).unwrap();
        assert_eq!(plan.max_tokens, 800);
        b.record(
            &Usage {
                prompt_tokens: 1_000,
                cached_tokens: 0,
                completion_tokens: 900,
            },
            0.0,
        );
        // 100 output tokens left: shrunk.
        let plan = b.plan(1_000, 800, f64::INFINITY).unwrap();
        assert_eq!(plan.max_tokens, 100);
        b.record(
            &Usage {
                prompt_tokens: 1_000,
                cached_tokens: 0,
                completion_tokens: 40,
            },
            0.0,
        );
        // 60 left: fewer than a useful answer.
        assert!(matches!(
            b.plan(1_000, 800, f64::INFINITY),
            Err(Refusal::TokenCap(_))
        ));
    }

    #[test]
    fn the_input_cap_holds_to_the_token() {
        let mut b = RunBudget::new(caps(), prices());
        b.record(
            &Usage {
                prompt_tokens: 9_000,
                cached_tokens: 0,
                completion_tokens: 0,
            },
            0.0,
        );
        assert!(b.plan(1_000, 100, f64::INFINITY).is_ok());
        assert!(matches!(
            b.plan(1_001, 100, f64::INFINITY),
            Err(Refusal::TokenCap(_))
        ));
    }

    #[test]
    fn the_dollar_caps_hold_to_the_cent_and_below() {
        // $0.02 per run: a 10,000-token prompt costs $0.01, leaving $0.01 for
        // 2,500 output tokens; the output cap (1,000) binds first.
        let b = RunBudget::new(caps(), prices());
        let plan = b.plan(10_000, 5_000, f64::INFINITY).unwrap();
        assert_eq!(plan.max_tokens, 1_000);
        assert!(plan.worst_usd <= 0.02);
        // Exactly at the run cap: $0.016 of prompt leaves room for 1000 tokens.
        let c = Caps {
            max_input_tokens: 100_000,
            max_output_tokens: 100_000,
            ..caps()
        };
        let b = RunBudget::new(c.clone(), prices());
        let plan = b.plan(16_000, 5_000, f64::INFINITY).unwrap();
        assert_eq!(plan.max_tokens, 1_000);
        assert!(plan.worst_usd <= c.max_usd_per_run);
        assert!(!b.fits(16_000, 1_001, f64::INFINITY));
        // The day's budget binds when it is smaller.
        let plan = b.plan(16_000, 5_000, 0.0164).unwrap();
        assert_eq!(plan.max_tokens, 100);
        assert!(plan.worst_usd <= 0.0164);
        assert!(matches!(
            b.plan(16_000, 5_000, 0.0162),
            Err(Refusal::DailyBudget(_))
        ));
        assert!(matches!(
            b.plan(19_800, 5_000, 1.0),
            Err(Refusal::RunBudget(_))
        ));
    }

    #[test]
    fn a_call_is_last_when_no_other_would_fit_and_the_message_says_what_is_left() {
        let mut b = RunBudget::new(caps(), prices());
        b.record(
            &Usage {
                prompt_tokens: 2_000,
                cached_tokens: 0,
                completion_tokens: 100,
            },
            0.0024,
        );
        let small = b.plan(1_000, 200, f64::INFINITY).unwrap();
        assert_eq!(b.next_call_refusal(&small, 1_500, f64::INFINITY), None);
        let large = b.plan(5_000, 200, f64::INFINITY).unwrap();
        match b.next_call_refusal(&large, 5_500, f64::INFINITY) {
            Some(Refusal::TokenCap(m)) => assert_eq!(
                m,
                "8000 input tokens left of 10000; this call's prompt takes about 5000 and another would need about 5500"
            ),
            other => panic!("{other:?}"),
        }
        // The day's budget: room for this call but not for another.
        let day_left = small.worst_usd + prices().worst_case(1_500, 63);
        match b.next_call_refusal(&small, 1_500, day_left) {
            Some(Refusal::DailyBudget(m)) => {
                assert!(
                    m.starts_with(&format!("${day_left:.6} left of today's $1")),
                    "{m}"
                )
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            b.next_call_refusal(&small, 1_500, day_left + prices().worst_case(0, 2)),
            None
        );
    }

    #[tokio::test]
    async fn the_memory_ledger_reserves_atomically_and_settles() {
        let day = NaiveDate::from_ymd_opt(2026, 10, 11).unwrap();
        let l = MemoryLedger::with_spent(day, 0.5);
        assert!(l.reserve(day, 0.5, 1.0).await.unwrap());
        assert!(!l.reserve(day, 0.000001, 1.0).await.unwrap());
        l.settle(day, 0.5, 0.25).await.unwrap();
        assert!((l.spent(day).await.unwrap() - 0.75).abs() < 1e-12);
        let other = day.succ_opt().unwrap();
        assert_eq!(l.spent(other).await.unwrap(), 0.0);
    }
}

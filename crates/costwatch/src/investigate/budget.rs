//! Hard caps and cost accounting for one investigation.
//!
//! Every model call is planned before it is made: the worst case of the call
//! (its prompt, estimated conservatively from the bytes sent, plus the
//! `max_tokens` it is allowed, all priced at the uncached input price) must
//! fit in what is left of the run's token and dollar caps and of the day's
//! budget. If it does not, `max_tokens` is shrunk to what is left, and if that
//! leaves less than [`MIN_USEFUL_MAX_TOKENS`] the run stops instead. The day's
//! share is reserved in the [`BudgetLedger`](super::BudgetLedger) before the
//! call and settled with the actual cost from `usage` after it.
//!
//! # The prompt estimate
//!
//! [`estimate_prompt_tokens`] counts one token per [`PROMPT_BYTES_PER_TOKEN`]
//! (3) bytes of the serialized request body, rounded up. It is never below the
//! true count when:
//! - the model counts like the scripted simulator (`costwatch_sim::model`), which bills
//!   one token per 4 bytes of the messages and tools only, a subset of the
//!   body: the bound holds by construction (and is tested);
//! - a BPE tokenizer of the GPT or Claude families reads this body: ASCII JSON
//!   and English prose average 3.5 to 4.5 bytes a token, and the body also
//!   carries JSON syntax (keys, quotes, escapes, the `model`, `tool_choice`
//!   and `max_tokens` fields) that chat templates bill as fewer tokens.
//!
//! It is an estimate, not a proof, for arbitrary text: a byte-level tokenizer
//! can need one token per byte on adversarial input. The run therefore checks
//! every answer: a call whose reported usage exceeds what was reserved stops
//! the run at once (see `run.rs`), so a wrong estimate can overshoot a cap by
//! at most that one call's error, and it is reported, never silent.

use super::model::Usage;
use chrono::NaiveDate;
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

/// Bytes of request body counted as one prompt token by the estimate.
pub const PROMPT_BYTES_PER_TOKEN: u64 = 3;

/// The smallest `max_tokens` worth a call: below it the run stops instead.
pub const MIN_USEFUL_MAX_TOKENS: u32 = 64;

/// The caps and prices are the `investigation` section's own types: the
/// configuration is what a run is held to.
pub use crate::config::{Caps, Prices};

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

/// A conservative count of the prompt tokens of a request body of
/// `body_bytes` bytes: one per [`PROMPT_BYTES_PER_TOKEN`] bytes, rounded up
/// (see the module documentation for when it bounds the true count).
pub fn estimate_prompt_tokens(body_bytes: usize) -> u64 {
    (body_bytes as u64).div_ceil(PROMPT_BYTES_PER_TOKEN)
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
                "the next prompt (about {prompt_tokens} tokens) does not fit in the {input_left} input tokens left of {}",
                caps.max_input_tokens
            )));
        }
        let output_left = caps
            .max_output_tokens
            .saturating_sub(self.spent.output_tokens);
        if output_left < u64::from(min) {
            return Err(Refusal::TokenCap(format!(
                "{output_left} output tokens left of {}, fewer than the {min} an answer needs",
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

    /// What would refuse a following call, if `plan` were spent in full
    /// and the next prompt were at least as large: `Some` means this call
    /// is the last one and must answer. (The day's budget is not guessed:
    /// other runs share it.)
    pub fn next_call_refusal(&self, plan: &CallPlan) -> Option<Refusal> {
        let mut after = self.clone();
        after.record_worst_case(plan);
        after
            .plan(plan.prompt_tokens, MIN_USEFUL_MAX_TOKENS, f64::INFINITY)
            .err()
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
    fn the_estimate_rounds_up() {
        assert_eq!(estimate_prompt_tokens(0), 0);
        assert_eq!(estimate_prompt_tokens(1), 1);
        assert_eq!(estimate_prompt_tokens(3), 1);
        assert_eq!(estimate_prompt_tokens(4), 2);
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
    fn a_call_is_last_when_no_other_would_fit() {
        let b = RunBudget::new(caps(), prices());
        let small = b.plan(1_000, 200, f64::INFINITY).unwrap();
        assert_eq!(b.next_call_refusal(&small), None);
        let large = b.plan(6_000, 200, f64::INFINITY).unwrap();
        assert!(matches!(
            b.next_call_refusal(&large),
            Some(Refusal::TokenCap(_))
        ));
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

//! The run's hard limits, checked in code before every model call: the wall
//! time, the round and tool-call caps, the token and dollar caps of the run,
//! and the day's budget reserved in the ledger before the call and settled
//! after it.

use super::record::{Round, StopReason};
use super::{Runner, Stop};
use crate::domain::counted;
use crate::investigate::budget::{CallPlan, Refusal};
use crate::investigate::{BudgetLedger, ToolProvider};
use chrono::NaiveDate;
use tokio::time::Instant;

/// Tokens of framing around a tool message and its call id, beyond its text.
pub(super) const TOOL_MESSAGE_TOKENS: u64 = 32;

/// The stop a cap's refusal means.
pub(super) fn refusal_stop(r: Refusal) -> Stop {
    match r {
        Refusal::TokenCap(d) => (StopReason::TokenCap, Some(d)),
        Refusal::RunBudget(d) => (StopReason::RunBudget, Some(d)),
        Refusal::DailyBudget(d) => (StopReason::DailyBudget, Some(d)),
    }
}

impl<T: ToolProvider, L: BudgetLedger> Runner<'_, T, L> {
    /// Whether the wall time is up, by the injected clock or the timer.
    pub(super) fn out_of_time(&self) -> bool {
        let by_clock = (self.clock.now() - self.started_at)
            .to_std()
            .is_ok_and(|e| e >= self.caps().wall_timeout);
        by_clock || Instant::now() >= self.deadline
    }

    /// The stop when the wall time is up.
    pub(super) fn wall_stop(&self) -> Stop {
        (
            StopReason::WallTimeout,
            Some(format!(
                "the run may take {}s",
                self.caps().wall_timeout.as_secs_f64()
            )),
        )
    }

    /// What `day`'s budget has left now, by the ledger.
    pub(super) async fn day_left(&self, day: NaiveDate) -> Result<f64, Stop> {
        let day_spent = self.ledger.spent(day).await.map_err(|e| {
            (
                StopReason::DailyBudget,
                Some(format!("the budget ledger cannot be read: {e}")),
            )
        })?;
        Ok(self.caps().max_usd_per_day - day_spent)
    }

    /// Rounds the caps still allow, this one (`index`) included: each
    /// round but the last makes at least one tool call.
    pub(super) fn rounds_left(&self, index: u32) -> u32 {
        let caps = self.caps();
        let by_rounds = caps.max_rounds.saturating_sub(index) + 1;
        let by_calls = caps.max_tool_calls.saturating_sub(self.tool_calls) + 1;
        by_rounds.min(by_calls)
    }

    /// Why round `index` must be the last by the round or tool-call
    /// limits, if it must.
    pub(super) fn last_by_count(&self, index: u32) -> Option<Stop> {
        let caps = self.caps();
        if index >= caps.max_rounds {
            Some((
                StopReason::MaxRounds,
                Some(format!(
                    "round {index} was the last of the {} allowed",
                    counted(caps.max_rounds, "round")
                )),
            ))
        } else if self.tool_calls >= caps.max_tool_calls {
            Some((
                StopReason::MaxToolCalls,
                Some(format!(
                    "{} made, of the {} allowed",
                    counted(self.tool_calls, "tool call"),
                    caps.max_tool_calls
                )),
            ))
        } else {
            None
        }
    }

    /// A bound on the prompt of the call after one of `prompt` tokens that
    /// may write `max_tokens`: this prompt, that output, and one tool
    /// result at the size cap.
    pub(super) fn next_prompt_bound(&self, prompt: u64, max_tokens: u32) -> u64 {
        prompt
            + u64::from(max_tokens)
            + self
                .model
                .estimator()
                .bytes_bound(self.caps().max_tool_result_bytes)
            + TOOL_MESSAGE_TOKENS
    }

    /// Reserves the call's worst case in `day`'s budget.
    pub(super) async fn reserve(&self, day: NaiveDate, plan: &CallPlan) -> Result<(), Stop> {
        let cap = self.caps().max_usd_per_day;
        match self.ledger.reserve(day, plan.worst_usd, cap).await {
            Ok(true) => Ok(()),
            Ok(false) => Err((
                StopReason::DailyBudget,
                Some(format!(
                    "the next call's worst case (${:.6}) does not fit in today's ${} (another run took it first)",
                    plan.worst_usd, cap
                )),
            )),
            Err(e) => Err((
                StopReason::DailyBudget,
                Some(format!("the budget ledger refused the reservation: {e}")),
            )),
        }
    }

    /// Replaces the call's reservation by its `actual` cost.
    pub(super) async fn settle(&self, day: NaiveDate, plan: &CallPlan, actual: f64) {
        if let Err(e) = self.ledger.settle(day, plan.worst_usd, actual).await {
            tracing::warn!(
                run_id = %self.inv.run_id,
                error = %e,
                "the budget ledger could not settle a call; its reservation stays counted"
            );
        }
    }

    /// Counts a call whose outcome is unknown at its worst case, in the
    /// ledger, the run's budget and the round.
    pub(super) async fn charge_worst_case(
        &mut self,
        day: NaiveDate,
        plan: &CallPlan,
        round: &mut Round,
    ) {
        self.settle(day, plan, plan.worst_usd).await;
        self.budget.record_worst_case(plan);
        round.cost_usd = plan.worst_usd;
        round.cost_is_worst_case = true;
    }
}

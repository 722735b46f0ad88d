//! One round: plan the model call against the caps, reserve its worst case,
//! call the model, settle what it cost, then run the tool calls it asked for.

use super::caps::{TOOL_MESSAGE_TOKENS, refusal_stop};
use super::record::{Round, StopReason};
use super::tools::not_executed;
use super::{Runner, Stop, ms};
use crate::investigate::budget::{CallPlan, MIN_USEFUL_MAX_TOKENS, output_share};
use crate::investigate::model::{
    ChatMessage, ChatRequest, Completion, FunctionTool, ToolCall, ToolChoice,
};
use crate::investigate::tokens::RawCount;
use crate::investigate::{BudgetLedger, ToolProvider};
use chrono::NaiveDate;
use tokio::time::{Instant, timeout_at};

/// A model call planned, reserved and ready to send.
struct PlannedCall {
    /// The request, with its final `tool_choice` and `max_tokens`.
    request: ChatRequest,
    /// Its worst case under the caps.
    plan: CallPlan,
    /// The day whose budget holds the reservation.
    day: NaiveDate,
    /// The estimator's raw count of the prompt, to learn from the answer.
    raw_prompt: RawCount,
    /// Why this round must answer, if it must.
    last: Option<Stop>,
    /// The round's record so far.
    round: Round,
}

impl<T: ToolProvider, L: BudgetLedger> Runner<'_, T, L> {
    /// One model call and its tool calls; `Some` ends the run.
    pub(super) async fn round(
        &mut self,
        index: u32,
        function_tools: &[FunctionTool],
    ) -> Option<Stop> {
        if self.out_of_time() {
            return Some(self.wall_stop());
        }
        let PlannedCall {
            request,
            plan,
            day,
            raw_prompt,
            last,
            mut round,
        } = match self.plan_round(index, function_tools).await {
            Ok(call) => call,
            Err(stop) => return Some(stop),
        };
        let completion = match self.call_model(&request, &plan, day, &mut round).await {
            Ok(c) => c,
            Err(stop) => {
                self.inv.rounds.push(round);
                return Some(stop);
            }
        };
        let kind = request.tool_choice.unwrap_or(ToolChoice::Auto);
        self.model.estimator().observe(
            kind,
            raw_prompt,
            completion.usage.prompt_tokens,
            &self.inv.run_id,
            self.clock.now().timestamp_millis(),
        );
        self.answer(completion, &plan, day, last, round).await
    }

    /// Builds the round's request, plans it against the caps and reserves
    /// its worst case in the day's budget.
    async fn plan_round(
        &mut self,
        index: u32,
        function_tools: &[FunctionTool],
    ) -> Result<PlannedCall, Stop> {
        let per_call = self.opts.max_tokens_per_call.max(1);
        let mut request = self.request(function_tools, ToolChoice::Auto, per_call);
        // The body's size, for the transcript (the request must encode).
        let body_bytes = request
            .body()
            .map_err(|e| (StopReason::ModelError(e.to_string()), None))?
            .len();
        let raw_prompt = self.model.raw_count(&request).await;
        let estimator = self.model.estimator();
        // Planned as a call that may use tools; re-estimated below if the
        // caps make it the answer.
        let prompt = estimator.estimate(ToolChoice::Auto, raw_prompt, &self.inv.run_id);
        let day: NaiveDate = self.clock.now().date_naive();
        let day_left = self.day_left(day).await?;
        let mut last = self.last_by_count(index);
        // A round that may still call tools gets its share of the output
        // cap; the last one gets all that is left.
        let wanted = if last.is_some() {
            per_call
        } else {
            let output_left = self
                .caps()
                .max_output_tokens
                .saturating_sub(self.budget.spent().output_tokens);
            output_share(per_call, output_left, self.rounds_left(index))
        };
        let mut plan = self
            .budget
            .plan(prompt, wanted, day_left)
            .map_err(refusal_stop)?;
        if last.is_none() {
            let next = self.next_prompt_bound(prompt, plan.max_tokens);
            if let Some(refusal) = self.budget.next_call_refusal(&plan, next, day_left) {
                last = Some(refusal_stop(refusal));
            }
        }
        let choice = if last.is_some() {
            ToolChoice::None
        } else {
            ToolChoice::Auto
        };
        if last.is_some() {
            // The answer: estimated as a call that may not use tools (some
            // servers then leave the tools out of the prompt), and given
            // all the output the caps leave.
            let answer = estimator.estimate(choice, raw_prompt, &self.inv.run_id);
            if let Ok(whole) = self.budget.plan(answer, per_call, day_left) {
                plan = whole;
            }
        }
        request.tool_choice = Some(choice);
        request.max_tokens = plan.max_tokens;
        let summary = self.request_summary(&request, choice, &plan, body_bytes);
        self.reserve(day, &plan).await?;
        let round = Round {
            index,
            client_request_id: format!("{}-r{index}", self.inv.run_id),
            response_id: None,
            request: summary,
            latency_ms: 0,
            retries: 0,
            finish_reason: None,
            content: None,
            tool_calls: Vec::new(),
            usage: None,
            cost_usd: 0.0,
            cost_is_worst_case: false,
            error: None,
            error_type: None,
        };
        Ok(PlannedCall {
            request,
            plan,
            day,
            raw_prompt,
            last,
            round,
        })
    }

    /// Sends the request within the wall time. A failed call is settled
    /// (at its worst case when it may have been billed) and recorded in
    /// `round`, and ends the run.
    async fn call_model(
        &mut self,
        request: &ChatRequest,
        plan: &CallPlan,
        day: NaiveDate,
        round: &mut Round,
    ) -> Result<Completion, Stop> {
        let t0 = Instant::now();
        let outcome = timeout_at(
            self.deadline,
            self.model.complete(request, &round.client_request_id),
        )
        .await;
        round.latency_ms = ms(t0.elapsed());
        match outcome {
            Err(_) => {
                // Cut off while waiting: the call may have been billed.
                self.charge_worst_case(day, plan, round).await;
                round.error = Some("the run's time limit was reached during the call".into());
                round.error_type = Some("Timeout".into());
                Err(self.wall_stop())
            }
            Ok(Err(e)) => {
                if e.maybe_billed {
                    self.charge_worst_case(day, plan, round).await;
                } else {
                    self.settle(day, plan, 0.0).await;
                }
                round.error = Some(e.to_string());
                round.error_type = Some(e.error_type.clone());
                Err((StopReason::ModelError(e.to_string()), None))
            }
            Ok(Ok(c)) => Ok(c),
        }
    }

    /// Settles the call's cost, records the answer and acts on it: an
    /// answer ends the run, tool calls are run unless this round was the last.
    async fn answer(
        &mut self,
        completion: Completion,
        plan: &CallPlan,
        day: NaiveDate,
        last: Option<Stop>,
        mut round: Round,
    ) -> Option<Stop> {
        let cost = self.budget.prices().cost(&completion.usage);
        self.settle(day, plan, cost).await;
        self.budget.record(&completion.usage, cost);
        let Completion {
            id,
            content,
            tool_calls,
            finish_reason,
            usage,
            retries,
        } = completion;
        round.response_id = id;
        round.retries = retries;
        round.finish_reason = finish_reason;
        round.usage = Some(usage);
        round.cost_usd = cost;
        let text = content.filter(|c| !c.trim().is_empty());
        round.content = text.clone();
        self.messages
            .push(ChatMessage::assistant(text.clone(), tool_calls.clone()));

        if let Some((reason, e)) = self.cap_passed(&round, plan, day).await {
            round.error = Some(e.clone());
            round.error_type = Some("UsageOverCap".into());
            self.inv.answer = text;
            self.inv.rounds.push(round);
            return Some((reason, Some(e)));
        }
        if tool_calls.is_empty() {
            self.inv.rounds.push(round);
            return Some(match text {
                Some(t) => {
                    self.inv.answer = Some(t);
                    // An answer in a round a cap made the last is forced
                    // by that cap, and says so.
                    match last {
                        Some((reason, detail)) => (
                            reason.forced_answer().unwrap_or(StopReason::Answered),
                            detail,
                        ),
                        None => (StopReason::Answered, None),
                    }
                }
                None => (
                    StopReason::ModelError("the model returned neither text nor tool calls".into()),
                    None,
                ),
            });
        }
        if let Some(stop) = last {
            // The model was told to answer and asked for tools anyway.
            for call in &tool_calls {
                round.tool_calls.push(not_executed(
                    call,
                    "not run: this round allowed no tool calls".into(),
                ));
            }
            self.inv.answer = text;
            self.inv.rounds.push(round);
            return Some(stop);
        }
        let stop = self.run_tool_calls(&tool_calls, &mut round).await;
        self.inv.rounds.push(round);
        stop
    }

    /// Runs the tool calls in order, passing each result to the model; once
    /// the wall time is up, the rest are recorded as not run.
    async fn run_tool_calls(&mut self, tool_calls: &[ToolCall], round: &mut Round) -> Option<Stop> {
        let mut stop = None;
        for call in tool_calls {
            if stop.is_some() {
                round.tool_calls.push(not_executed(
                    call,
                    "not run: the run's time limit was reached".into(),
                ));
                continue;
            }
            if let Some(why) = self.answer_would_not_fit().await {
                round.tool_calls.push(not_executed(call, why));
                continue;
            }
            let (record, timed_out) = self.tool_call(call).await;
            self.messages
                .push(ChatMessage::tool(call.id.clone(), record.result.clone()));
            round.tool_calls.push(record);
            if timed_out {
                stop = Some(self.wall_stop());
            }
        }
        stop
    }
}

impl<T: ToolProvider, L: BudgetLedger> Runner<'_, T, L> {
    /// Why another tool call must not run, if it must not: with its result
    /// at the size cap, the call that follows could no longer be afforded,
    /// and the run would have paid for tools without an answer.
    async fn answer_would_not_fit(&self) -> Option<String> {
        let function_tools: Vec<FunctionTool> =
            self.offered.iter().map(FunctionTool::from_spec).collect();
        let request = self.request(&function_tools, ToolChoice::None, MIN_USEFUL_MAX_TOKENS);
        let raw = self.model.raw_count(&request).await;
        let estimator = self.model.estimator();
        let prompt = estimator.estimate(ToolChoice::None, raw, &self.inv.run_id)
            + estimator.bytes_bound(self.caps().max_tool_result_bytes)
            + TOOL_MESSAGE_TOKENS;
        let day = self.clock.now().date_naive();
        let day_left = self.day_left(day).await.unwrap_or(0.0);
        match self.budget.plan(prompt, MIN_USEFUL_MAX_TOKENS, day_left) {
            Ok(_) => None,
            Err(r) => {
                let (_, detail) = refusal_stop(r);
                Some(format!(
                    "not run: the caps leave room only for the answer ({}); answer with what you have",
                    detail.unwrap_or_default()
                ))
            }
        }
    }
}

impl<T: ToolProvider, L: BudgetLedger> Runner<'_, T, L> {
    /// Which cap the answer's usage passed, if one was: the call was
    /// planned on an estimate, and a model that counted more than it can
    /// pass a cap by that one call. The run then stops, saying by how much.
    /// Usage above the estimate that still fits every cap passes nothing:
    /// the estimator has learned from it, and the run goes on.
    async fn cap_passed(
        &self,
        round: &Round,
        plan: &CallPlan,
        day: NaiveDate,
    ) -> Option<(StopReason, String)> {
        let usage = round.usage?;
        if usage.prompt_tokens <= plan.prompt_tokens
            && usage.completion_tokens <= u64::from(plan.max_tokens)
            && round.cost_usd <= plan.worst_usd
        {
            return None;
        }
        let caps = self.caps();
        let spent = self.budget.spent();
        let reported = format!(
            "the model reported {} prompt tokens where about {} were planned",
            usage.prompt_tokens, plan.prompt_tokens
        );
        if spent.input_tokens > caps.max_input_tokens {
            return Some((
                StopReason::TokenCap,
                format!(
                    "{reported}: {} input tokens used of the {} allowed",
                    spent.input_tokens, caps.max_input_tokens
                ),
            ));
        }
        if spent.output_tokens > caps.max_output_tokens {
            return Some((
                StopReason::TokenCap,
                format!(
                    "{reported}: {} output tokens used of the {} allowed",
                    spent.output_tokens, caps.max_output_tokens
                ),
            ));
        }
        if spent.cost_usd > caps.max_usd_per_run {
            return Some((
                StopReason::RunBudget,
                format!(
                    "{reported}: ${:.6} spent of the run's ${}",
                    spent.cost_usd, caps.max_usd_per_run
                ),
            ));
        }
        match self.ledger.spent(day).await {
            Ok(day_spent) if day_spent > caps.max_usd_per_day => Some((
                StopReason::DailyBudget,
                format!(
                    "{reported}: ${day_spent:.6} spent of today's ${}",
                    caps.max_usd_per_day
                ),
            )),
            _ => None,
        }
    }
}

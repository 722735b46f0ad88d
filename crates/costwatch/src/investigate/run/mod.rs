//! The investigation loop: a model reads the gateway's log tools under hard
//! caps, and everything it did is kept for the alert.
//!
//! One run: list the tools and keep the configured subset, in the configured
//! order (the same list on every call, so a prompt cache can hold it); send
//! the system instruction and the alert's digest; then round after round,
//! plan the call against the caps (see `budget.rs`), reserve its worst case
//! in the day's ledger, call the model, settle the actual cost, and run the
//! tool calls it asked for. The last allowed round (by rounds, tool calls or
//! budget) offers the tools with `tool_choice: "none"`, so the model must
//! answer. Every way out is a [`StopReason`], and the [`Investigation`]
//! returned always holds what was gathered up to that point.
//!
//! Tool calls are checked before they run: a tool outside the offered list is
//! refused, arguments that are not a JSON object are sent back as an error
//! the model can act on, and both count as tool calls. Results are made
//! compact and cut to `max_tool_result_bytes`, whole rows at a time and
//! still valid JSON, with a note the model sees (`investigate::results`). A tool that hangs
//! is cut off after the tool timeout; nothing waits past the wall timeout.

mod caps;
mod prompt;
mod record;
mod round;
#[cfg(test)]
mod tests;
mod tools;

pub use prompt::SYSTEM_PROMPT;
pub use record::{
    Investigation, RequestSummary, Round, StopCode, StopReason, ToolCallRecord, ToolCallStatus,
    ToolListing, Totals,
};

use super::budget::{Caps, Prices, RunBudget};
use super::model::{ChatMessage, FunctionTool, ModelClient};
use super::toolset::offered_tools;
use super::{BudgetLedger, ToolProvider, ToolSpec};
use crate::clock::Clock;
use crate::domain::Kind;
use crate::notify::Alert;
use chrono::{DateTime, Utc};
use std::time::Duration;
use tokio::time::{Instant, timeout_at};

/// The tools offered by default, in this order.
pub const DEFAULT_TOOLS: [&str; 3] = ["search_requests", "get_request", "list_sessions"];

/// How a run is set up, beyond its caps.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOptions {
    /// The tools offered to the model, in this order, if the server lists
    /// them; the model can call nothing else.
    pub tools: Vec<String>,
    /// `max_tokens` asked for each call (shrunk to what the caps leave).
    pub max_tokens_per_call: u32,
    /// How long one tool call (and the tool listing) may take.
    pub tool_timeout: Duration,
    /// Sessions listed in the digest.
    pub digest_sessions: usize,
    /// The run's id; derived from the alert and the start time when `None`.
    pub run_id: Option<String>,
    /// Sampling temperature sent with each call; the provider's default
    /// when `None`.
    pub temperature: Option<f32>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            tools: DEFAULT_TOOLS.iter().map(|t| (*t).to_owned()).collect(),
            max_tokens_per_call: 1024,
            tool_timeout: Duration::from_secs(20),
            digest_sessions: 5,
            run_id: None,
            temperature: None,
        }
    }
}

/// Runs one investigation of `alert`. Never fails: every way out is a
/// [`StopReason`] and the transcript so far.
#[allow(clippy::too_many_arguments)]
pub async fn investigate<T: ToolProvider, L: BudgetLedger>(
    alert: &Alert,
    tools: &T,
    model: &ModelClient,
    ledger: &L,
    caps: &Caps,
    prices: &Prices,
    clock: &dyn Clock,
    opts: &RunOptions,
) -> Investigation {
    let started_at = clock.now();
    let run_id = opts.run_id.clone().unwrap_or_else(|| {
        let fp: String = alert.fingerprint.chars().take(12).collect();
        format!(
            "inv-{fp}-{}-{}",
            alert.sequence,
            started_at.timestamp_millis()
        )
    });
    let mut run = Runner {
        tools,
        model,
        ledger,
        clock,
        opts,
        budget: RunBudget::new(caps.clone(), *prices),
        deadline: Instant::now() + caps.wall_timeout,
        started_at,
        inv: Investigation {
            run_id,
            model: model.model().to_owned(),
            stop_reason: StopReason::Answered,
            stop_detail: None,
            answer: None,
            tools: ToolListing::default(),
            rounds: Vec::new(),
            totals: Totals::default(),
            started_at,
            finished_at: started_at,
        },
        offered: Vec::new(),
        messages: Vec::new(),
        tool_calls: 0,
    };
    let (reason, detail) = run.go(alert).await;
    let spent = run.budget.spent();
    let mut inv = run.inv;
    inv.stop_reason = reason;
    inv.stop_detail = detail;
    inv.totals = Totals {
        input_tokens: spent.input_tokens,
        cached_tokens: spent.cached_tokens,
        output_tokens: spent.output_tokens,
        cost_usd: spent.cost_usd,
        tool_calls: run.tool_calls,
        rounds: inv.rounds.len() as u32,
    };
    inv.finished_at = clock.now();
    tracing::info!(
        run_id = %inv.run_id,
        model = %inv.model,
        stop_reason = inv.stop_reason.code(),
        rounds = inv.totals.rounds,
        tool_calls = inv.totals.tool_calls,
        input_tokens = inv.totals.input_tokens,
        output_tokens = inv.totals.output_tokens,
        cost_usd = inv.totals.cost_usd,
        "investigation finished"
    );
    inv
}

/// Why a run ends, and which limit bound by how much.
type Stop = (StopReason, Option<String>);

/// One run in progress: its peers, its caps and what it gathered so far.
struct Runner<'a, T, L> {
    tools: &'a T,
    model: &'a ModelClient,
    ledger: &'a L,
    clock: &'a dyn Clock,
    opts: &'a RunOptions,
    budget: RunBudget,
    deadline: Instant,
    started_at: DateTime<Utc>,
    inv: Investigation,
    offered: Vec<ToolSpec>,
    messages: Vec<ChatMessage>,
    tool_calls: u32,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl<T: ToolProvider, L: BudgetLedger> Runner<'_, T, L> {
    fn caps(&self) -> &Caps {
        self.budget.caps()
    }

    async fn go(&mut self, alert: &Alert) -> Stop {
        if let Err(stop) = self.list_tools(alert.kind.waste()).await {
            return stop;
        }
        self.messages = prompt::opening(alert, self.opts.digest_sessions);
        let function_tools: Vec<FunctionTool> =
            self.offered.iter().map(FunctionTool::from_spec).collect();
        let max_rounds = self.caps().max_rounds;
        for index in 1..=max_rounds {
            if let Some(stop) = self.round(index, &function_tools).await {
                return stop;
            }
        }
        (
            StopReason::MaxRounds,
            Some(format!(
                "{} allowed",
                crate::domain::counted(max_rounds, "round")
            )),
        )
    }

    /// Lists the tools and keeps the configured ones this incident needs,
    /// in the configured order (see `toolset`).
    async fn list_tools(&mut self, kind: Option<Kind>) -> Result<(), Stop> {
        let t0 = Instant::now();
        let until = self.deadline.min(t0 + self.opts.tool_timeout);
        let listed = timeout_at(until, self.tools.list_tools()).await;
        self.inv.tools.latency_ms = ms(t0.elapsed());
        let listed = match listed {
            Ok(Ok(list)) => list,
            Ok(Err(e)) => {
                let e = format!("tools/list failed: {e}");
                self.inv.tools.error = Some(e.clone());
                return Err((StopReason::ToolsUnavailable(e), None));
            }
            Err(_) => {
                let e = format!(
                    "tools/list did not answer within {}s",
                    (until - t0).as_secs_f64()
                );
                self.inv.tools.error = Some(e.clone());
                if self.out_of_time() {
                    return Err(self.wall_stop());
                }
                return Err((StopReason::ToolsUnavailable(e), None));
            }
        };
        let (offered, missing) = offered_tools(&listed, &self.opts.tools, kind);
        self.offered = offered;
        self.inv.tools.missing = missing;
        self.inv.tools.offered = self.offered.iter().map(|t| t.name.clone()).collect();
        if self.offered.is_empty() {
            return Err((
                StopReason::ToolsUnavailable(format!(
                    "the server lists none of the configured tools ({})",
                    self.opts.tools.join(", ")
                )),
                None,
            ));
        }
        Ok(())
    }
}

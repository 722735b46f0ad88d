//! What a run records: why it stopped, each round's request summary, model
//! answer and tool calls, the tool listing and the totals.

use crate::investigate::model::{ToolChoice, Usage};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Why a run ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reason", content = "detail", rename_all = "snake_case")]
pub enum StopReason {
    /// The model answered.
    Answered,
    /// The last allowed round ended without an answer.
    MaxRounds,
    /// The tool-call cap was reached and the model still asked for tools.
    MaxToolCalls,
    /// The run's input or output token cap left no room for another call.
    TokenCap,
    /// The run's dollar cap left no room for another call.
    RunBudget,
    /// The day's dollar cap left no room for another call.
    DailyBudget,
    /// The run's wall-clock time ran out.
    WallTimeout,
    /// The model endpoint failed or answered something unusable.
    ModelError(String),
    /// The tools could not be listed, or none of the configured ones exists.
    ToolsUnavailable(String),
}

/// The short stable name of a [`StopReason`], without its detail: what
/// alerts, the state database and logs carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopCode {
    /// The model answered.
    Answered,
    /// The last allowed round ended without an answer.
    MaxRounds,
    /// The tool-call cap was reached and the model still asked for tools.
    MaxToolCalls,
    /// The run's token cap left no room for another call.
    TokenCap,
    /// The run's dollar cap left no room for another call.
    RunBudget,
    /// The day's dollar cap left no room for another call.
    DailyBudget,
    /// The run's wall-clock time ran out.
    WallTimeout,
    /// The model endpoint failed or answered something unusable.
    ModelError,
    /// The tools could not be listed, or none of the configured ones exists.
    ToolsUnavailable,
}

impl StopCode {
    /// The name (`answered`, `token_cap`, ...), as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            StopCode::Answered => "answered",
            StopCode::MaxRounds => "max_rounds",
            StopCode::MaxToolCalls => "max_tool_calls",
            StopCode::TokenCap => "token_cap",
            StopCode::RunBudget => "run_budget",
            StopCode::DailyBudget => "daily_budget",
            StopCode::WallTimeout => "wall_timeout",
            StopCode::ModelError => "model_error",
            StopCode::ToolsUnavailable => "tools_unavailable",
        }
    }
}

impl std::fmt::Display for StopCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl StopReason {
    /// The reason without its detail.
    pub fn stop_code(&self) -> StopCode {
        match self {
            StopReason::Answered => StopCode::Answered,
            StopReason::MaxRounds => StopCode::MaxRounds,
            StopReason::MaxToolCalls => StopCode::MaxToolCalls,
            StopReason::TokenCap => StopCode::TokenCap,
            StopReason::RunBudget => StopCode::RunBudget,
            StopReason::DailyBudget => StopCode::DailyBudget,
            StopReason::WallTimeout => StopCode::WallTimeout,
            StopReason::ModelError(_) => StopCode::ModelError,
            StopReason::ToolsUnavailable(_) => StopCode::ToolsUnavailable,
        }
    }

    /// A short stable name (`answered`, `token_cap`, ...).
    pub fn code(&self) -> &'static str {
        self.stop_code().as_str()
    }

    /// A sentence for people.
    pub fn describe(&self) -> String {
        match self {
            StopReason::Answered => "the model answered".to_owned(),
            StopReason::MaxRounds => "the round limit was reached without an answer".to_owned(),
            StopReason::MaxToolCalls => {
                "the tool-call limit was reached and the model kept asking for tools".to_owned()
            }
            StopReason::TokenCap => "the run's token cap left no room for another call".to_owned(),
            StopReason::RunBudget => {
                "the run's dollar cap left no room for another call".to_owned()
            }
            StopReason::DailyBudget => {
                "the day's investigation budget left no room for another call".to_owned()
            }
            StopReason::WallTimeout => "the run's time limit was reached".to_owned(),
            StopReason::ModelError(e) => format!("the model call failed: {e}"),
            StopReason::ToolsUnavailable(e) => format!("the log tools were unavailable: {e}"),
        }
    }
}

/// What a round's request looked like (never the prompt text itself).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestSummary {
    /// Messages sent.
    pub messages: usize,
    /// Tools offered, in order.
    pub tools: Vec<String>,
    /// `auto`, or `none` on the last allowed round.
    pub tool_choice: ToolChoice,
    /// `max_tokens` after the caps.
    pub max_tokens: u32,
    /// Bytes of the request body.
    pub body_bytes: usize,
    /// The conservative prompt estimate reserved for.
    pub estimated_prompt_tokens: u64,
    /// The worst-case cost reserved before the call.
    pub reserved_usd: f64,
}

/// How a tool call went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolCallStatus {
    /// It ran and succeeded.
    Ok,
    /// It ran and the server reported a failure (or the call failed).
    ToolError,
    /// The tool is not offered: refused without running.
    Refused,
    /// The arguments were not a JSON object: refused without running.
    Malformed,
    /// It did not answer within the tool timeout.
    Timeout,
    /// Not run: the tool-call cap or the last round allowed no more.
    NotExecuted,
}

impl ToolCallStatus {
    /// A short name for the step log.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolCallStatus::Ok => "ok",
            ToolCallStatus::ToolError => "tool_error",
            ToolCallStatus::Refused => "refused",
            ToolCallStatus::Malformed => "malformed_arguments",
            ToolCallStatus::Timeout => "timeout",
            ToolCallStatus::NotExecuted => "not_executed",
        }
    }
}

/// One tool call the model asked for, and what it was given back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRecord {
    /// The model's id of the call.
    pub id: String,
    /// The tool asked for.
    pub name: String,
    /// The arguments as the model wrote them.
    pub arguments: String,
    /// How it went.
    pub status: ToolCallStatus,
    /// The tool message passed to the model (truncated, with its marker).
    pub result: String,
    /// Bytes of the result before truncation.
    pub result_bytes: usize,
    /// Whether the result was cut.
    pub truncated: bool,
    /// How long the call took.
    pub latency_ms: u64,
}

/// One model call and the tool calls it led to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Round {
    /// 1-based.
    pub index: u32,
    /// Our id of the call (sent as `X-Client-Request-Id`).
    pub client_request_id: String,
    /// The provider's id of the answer.
    pub response_id: Option<String>,
    /// The request, summarized.
    pub request: RequestSummary,
    /// How long the model call took.
    pub latency_ms: u64,
    /// Retries before the answer (429/5xx, failed connections).
    pub retries: u32,
    /// Why the model stopped.
    pub finish_reason: Option<String>,
    /// The model's text this round.
    pub content: Option<String>,
    /// The tool calls it asked for.
    pub tool_calls: Vec<ToolCallRecord>,
    /// Token counts from `usage` (`None` when the call failed).
    pub usage: Option<Usage>,
    /// What the call cost (its worst case when `cost_is_worst_case`).
    pub cost_usd: f64,
    /// True when the outcome is unknown (timeout, unreadable answer) and
    /// the call is counted at its worst case.
    pub cost_is_worst_case: bool,
    /// Why the call failed.
    pub error: Option<String>,
    /// A short name of the failure (`Timeout`, `RateLimitError`, ...).
    pub error_type: Option<String>,
}

/// The tool listing at the start of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolListing {
    /// Tools offered to the model, in order.
    pub offered: Vec<String>,
    /// Configured tools the server does not list.
    pub missing: Vec<String>,
    /// How long the listing took.
    pub latency_ms: u64,
    /// Why it failed.
    pub error: Option<String>,
}

/// What a run used in all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Totals {
    /// Prompt tokens, cached ones included.
    pub input_tokens: u64,
    /// Prompt tokens read from the cache.
    pub cached_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// Dollars.
    pub cost_usd: f64,
    /// Tool calls counted against the cap (refused and malformed included).
    pub tool_calls: u32,
    /// Model calls.
    pub rounds: u32,
}

/// One investigation: its answer or why it stopped, and its transcript.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Investigation {
    /// Unique id of the run.
    pub run_id: String,
    /// The model.
    pub model: String,
    /// Why it ended.
    pub stop_reason: StopReason,
    /// Which limit bound, and by how much, when a cap stopped it.
    pub stop_detail: Option<String>,
    /// The model's answer.
    pub answer: Option<String>,
    /// The tool listing.
    pub tools: ToolListing,
    /// Every model call, in order.
    pub rounds: Vec<Round>,
    /// What it used.
    pub totals: Totals,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// When it ended.
    pub finished_at: DateTime<Utc>,
}

impl Investigation {
    /// The answer, or what stopped the run before one.
    pub fn summary(&self) -> String {
        match (&self.answer, &self.stop_reason) {
            (Some(a), StopReason::Answered) => a.clone(),
            (Some(a), other) => format!("{a}\n(partial: {})", other.describe()),
            (None, other) => {
                let mut s = format!("no answer: {}", other.describe());
                if let Some(d) = &self.stop_detail {
                    s.push_str(" (");
                    s.push_str(d);
                    s.push(')');
                }
                s
            }
        }
    }
}

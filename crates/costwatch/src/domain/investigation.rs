//! What an alert carries about its investigation: the record of the run
//! (summary, cost, totals, rounds, tool calls) as plain data.
//!
//! `investigate` produces these records and `notify` carries and renders
//! them; they live here so neither of the two modules depends on the other
//! for them. The JSON shape is stored in the outbox and sent to webhooks, so
//! it is a contract: fields are only ever added (one was removed once:
//! `transcript_text`, a second copy of `transcript` as text; the email's
//! text attachment is now rendered from `transcript`).

use serde::{Deserialize, Serialize};

/// What an alert carries about its investigation (`Alert::investigation`):
/// stored with the alert and sent to every channel, so its JSON shape is a
/// contract. Fields are only ever added.
///
/// The transcript travels once, as `transcript` (the rounds): webhooks
/// carry it as JSON, email renders it as a text attachment. In an alert,
/// tool results are shortened to [`ALERT_RESULT_BYTES`] each (whole rows,
/// still JSON; `clipped_from` says how much the model saw), so a long run
/// still makes a small alert; the whole record stays in the state database
/// (`costwatch investigation show RUN_ID`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InvestigationReport {
    /// The answer, or what stopped the run before one.
    pub summary: String,
    /// What the run cost, in US dollars.
    pub cost_usd: f64,
    /// Why the run ended.
    pub stop_reason: StopCode,
    /// Which limit bound, and by how much, when a cap stopped it.
    pub stop_detail: Option<String>,
    /// The model.
    pub model: String,
    /// Unique id of the run.
    pub run_id: String,
    /// Prompt tokens, cached ones included.
    pub input_tokens: u64,
    /// Prompt tokens read from the cache.
    pub cached_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// Tool calls counted against the cap.
    pub tool_calls: u32,
    /// Model calls.
    pub rounds: u32,
    /// Tools offered to the model, in order.
    pub tools_offered: Vec<String>,
    /// Every model call and its tool calls, in order.
    pub transcript: Vec<Round>,
}

/// The most bytes of one tool result an alert carries; the model may have
/// seen more (the state database keeps all of it).
pub const ALERT_RESULT_BYTES: usize = 1_000;

impl InvestigationReport {
    /// The share of the prompt tokens read from the provider's cache, when
    /// the model reported any prompt tokens.
    pub fn cached_share(&self) -> Option<f64> {
        (self.input_tokens > 0).then(|| self.cached_tokens as f64 / self.input_tokens as f64)
    }
}

/// The short stable name of why an investigation ended, without its detail: what
/// alerts, the state database and logs carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopCode {
    /// The model answered of its own accord, with tool calls still allowed.
    Answered,
    /// The model answered in the last round the round limit allowed.
    AnsweredAtMaxRounds,
    /// The model answered once the tool-call limit was reached.
    AnsweredAtMaxToolCalls,
    /// The model answered in the last call the token caps allowed.
    AnsweredAtTokenCap,
    /// The model answered in the last call the run's dollar cap allowed.
    AnsweredAtRunBudget,
    /// The model answered in the last call the day's budget allowed.
    AnsweredAtDailyBudget,
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
            StopCode::AnsweredAtMaxRounds => "answered_at_max_rounds",
            StopCode::AnsweredAtMaxToolCalls => "answered_at_max_tool_calls",
            StopCode::AnsweredAtTokenCap => "answered_at_token_cap",
            StopCode::AnsweredAtRunBudget => "answered_at_run_budget",
            StopCode::AnsweredAtDailyBudget => "answered_at_daily_budget",
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

impl StopCode {
    /// Whether the run ended with the model's answer (free or forced by a cap).
    pub fn answered(self) -> bool {
        matches!(
            self,
            StopCode::Answered
                | StopCode::AnsweredAtMaxRounds
                | StopCode::AnsweredAtMaxToolCalls
                | StopCode::AnsweredAtTokenCap
                | StopCode::AnsweredAtRunBudget
                | StopCode::AnsweredAtDailyBudget
        )
    }
}

impl std::fmt::Display for StopCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
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
    /// Bytes of the result the model saw, when `result` is a shorter copy
    /// (in an alert: see [`ALERT_RESULT_BYTES`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clipped_from: Option<usize>,
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

/// Whether the model may call tools in a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// It may.
    Auto,
    /// It must answer (the last allowed round).
    None,
}

impl ToolChoice {
    /// The wire value.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolChoice::Auto => "auto",
            ToolChoice::None => "none",
        }
    }
}

/// Token counts of one call, from the answer's `usage`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// `usage.prompt_tokens`: the whole prompt, cached tokens included.
    pub prompt_tokens: u64,
    /// `usage.prompt_tokens_details.cached_tokens` (0 when absent).
    pub cached_tokens: u64,
    /// `usage.completion_tokens`.
    pub completion_tokens: u64,
}

/// A report with this summary and cost, and no rounds.
#[cfg(test)]
pub(crate) fn sample_report(summary: &str, cost_usd: f64) -> InvestigationReport {
    InvestigationReport {
        summary: summary.to_owned(),
        cost_usd,
        stop_reason: StopCode::Answered,
        stop_detail: None,
        model: "gpt-6-luna".to_owned(),
        run_id: "inv-sample".to_owned(),
        input_tokens: 1200,
        cached_tokens: 0,
        output_tokens: 80,
        tool_calls: 1,
        rounds: 2,
        tools_offered: vec!["search_requests".to_owned()],
        transcript: Vec::new(),
    }
}

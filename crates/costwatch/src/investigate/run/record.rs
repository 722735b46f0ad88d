//! What a run records: why it stopped, each round's request summary, model
//! answer and tool calls, the tool listing and the totals.

pub use crate::domain::investigation::{
    RequestSummary, Round, StopCode, ToolCallRecord, ToolCallStatus,
};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Why a run ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reason", content = "detail", rename_all = "snake_case")]
pub enum StopReason {
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

impl StopReason {
    /// The reason without its detail.
    pub fn stop_code(&self) -> StopCode {
        match self {
            StopReason::Answered => StopCode::Answered,
            StopReason::AnsweredAtMaxRounds => StopCode::AnsweredAtMaxRounds,
            StopReason::AnsweredAtMaxToolCalls => StopCode::AnsweredAtMaxToolCalls,
            StopReason::AnsweredAtTokenCap => StopCode::AnsweredAtTokenCap,
            StopReason::AnsweredAtRunBudget => StopCode::AnsweredAtRunBudget,
            StopReason::AnsweredAtDailyBudget => StopCode::AnsweredAtDailyBudget,
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

    /// The answer a cap forced when this was the reason the round had to
    /// be the last; `None` for reasons that are not caps.
    pub fn forced_answer(&self) -> Option<StopReason> {
        Some(match self {
            StopReason::MaxRounds => StopReason::AnsweredAtMaxRounds,
            StopReason::MaxToolCalls => StopReason::AnsweredAtMaxToolCalls,
            StopReason::TokenCap => StopReason::AnsweredAtTokenCap,
            StopReason::RunBudget => StopReason::AnsweredAtRunBudget,
            StopReason::DailyBudget => StopReason::AnsweredAtDailyBudget,
            _ => return None,
        })
    }

    /// A sentence for people.
    pub fn describe(&self) -> String {
        match self {
            StopReason::Answered => "the model answered".to_owned(),
            StopReason::AnsweredAtMaxRounds => {
                "the model answered in the last round the round limit allowed".to_owned()
            }
            StopReason::AnsweredAtMaxToolCalls => {
                "the model answered once the tool-call limit was reached".to_owned()
            }
            StopReason::AnsweredAtTokenCap => {
                "the model answered in the last call the token caps allowed".to_owned()
            }
            StopReason::AnsweredAtRunBudget => {
                "the model answered in the last call the run's dollar cap allowed".to_owned()
            }
            StopReason::AnsweredAtDailyBudget => {
                "the model answered in the last call the day's budget allowed".to_owned()
            }
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
            (Some(a), reason) if reason.stop_code().answered() => a.clone(),
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

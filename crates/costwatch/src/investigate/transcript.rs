//! What a run leaves behind for people and for logs.
//!
//! - [`step_log`] / [`step_log_jsonl`]: one JSON line per step (the tool
//!   listing, each model call, each tool call) with exactly the keys of
//!   [`StepLine`]. The allowlist is the struct: there is no field for prompt
//!   text, answers, tool arguments or tool results, so none can leak into
//!   the log.
//! - [`render_text`]: the whole record as plain text (`costwatch
//!   investigation show`): when the run started and ended, the tool
//!   listing, then the transcript as `notify::render::transcript_text`
//!   writes it, every tool result exactly as the model saw it.
//! - [`InvestigationReport`]: what an alert carries about its investigation
//!   (the summary, the cost, the totals, and the rounds with each tool
//!   result shortened to `ALERT_RESULT_BYTES`).

pub use crate::domain::investigation::InvestigationReport;

use super::model::Usage;
use super::run::{Investigation, ToolCallStatus};
use crate::domain::investigation::ALERT_RESULT_BYTES;
use crate::investigate::results::shape_result;
use crate::notify::render::transcript_text;
use serde::Serialize;
use std::fmt::Write;

impl InvestigationReport {
    /// The report an alert carries: tool results longer than
    /// [`ALERT_RESULT_BYTES`] are shortened (whole rows, still JSON).
    pub fn of(inv: &Investigation) -> InvestigationReport {
        let mut report = InvestigationReport::full(inv);
        for round in &mut report.transcript {
            for call in &mut round.tool_calls {
                if call.result.len() > ALERT_RESULT_BYTES {
                    let seen = call.result.len();
                    call.result = shape_result(&call.result, ALERT_RESULT_BYTES).text;
                    call.clipped_from = Some(seen);
                }
            }
        }
        report
    }

    /// The report with every tool result as the model saw it.
    pub fn full(inv: &Investigation) -> InvestigationReport {
        InvestigationReport {
            summary: inv.summary(),
            cost_usd: inv.totals.cost_usd,
            stop_reason: inv.stop_reason.stop_code(),
            stop_detail: inv.stop_detail.clone(),
            model: inv.model.clone(),
            run_id: inv.run_id.clone(),
            input_tokens: inv.totals.input_tokens,
            cached_tokens: inv.totals.cached_tokens,
            output_tokens: inv.totals.output_tokens,
            tool_calls: inv.totals.tool_calls,
            rounds: inv.totals.rounds,
            tools_offered: inv.tools.offered.clone(),
            transcript: inv.rounds.clone(),
        }
    }
}

/// One line of the step log. Its fields are the allowlist of keys.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepLine {
    /// The run.
    pub run_id: String,
    /// `list_tools`, `model_call`, or `tool_call:<name>` (`tool_call:refused`
    /// for a tool that is not offered).
    pub step_name: String,
    /// The provider's id: the answer's `id`, or the model's tool-call id.
    pub request_id: Option<String>,
    /// Our id of a model call (sent as `X-Client-Request-Id`).
    pub client_request_id: Option<String>,
    /// The model, on model calls.
    pub model: Option<String>,
    /// Token counts, on model calls that answered.
    pub usage: Option<Usage>,
    /// How long the step took.
    pub latency_ms: u64,
    /// `ok` or `error`.
    pub status: &'static str,
    /// A short name of the failure, never its message.
    pub error_type: Option<String>,
}

/// The run's steps, in order.
pub fn step_log(inv: &Investigation) -> Vec<StepLine> {
    let mut lines = vec![StepLine {
        run_id: inv.run_id.clone(),
        step_name: "list_tools".to_owned(),
        request_id: None,
        client_request_id: None,
        model: None,
        usage: None,
        latency_ms: inv.tools.latency_ms,
        status: if inv.tools.error.is_some() {
            "error"
        } else {
            "ok"
        },
        error_type: inv
            .tools
            .error
            .as_ref()
            .map(|_| "ToolsUnavailable".to_owned()),
    }];
    for round in &inv.rounds {
        lines.push(StepLine {
            run_id: inv.run_id.clone(),
            step_name: "model_call".to_owned(),
            request_id: round.response_id.clone(),
            client_request_id: Some(round.client_request_id.clone()),
            model: Some(inv.model.clone()),
            usage: round.usage,
            latency_ms: round.latency_ms,
            status: if round.error_type.is_some() {
                "error"
            } else {
                "ok"
            },
            error_type: round.error_type.clone(),
        });
        for call in &round.tool_calls {
            if call.status == ToolCallStatus::NotExecuted {
                continue;
            }
            let offered = inv.tools.offered.iter().any(|t| t == &call.name);
            let step_name = if offered {
                format!("tool_call:{}", call.name)
            } else {
                "tool_call:refused".to_owned()
            };
            lines.push(StepLine {
                run_id: inv.run_id.clone(),
                step_name,
                request_id: Some(call.id.chars().take(64).collect()),
                client_request_id: None,
                model: None,
                usage: None,
                latency_ms: call.latency_ms,
                status: if call.status == ToolCallStatus::Ok {
                    "ok"
                } else {
                    "error"
                },
                error_type: (call.status != ToolCallStatus::Ok)
                    .then(|| call.status.as_str().to_owned()),
            });
        }
    }
    lines
}

/// The step log as JSON lines, each ending in a newline.
pub fn step_log_jsonl(inv: &Investigation) -> String {
    let mut out = String::new();
    for line in step_log(inv) {
        if let Ok(s) = serde_json::to_string(&line) {
            out.push_str(&s);
            out.push('\n');
        }
    }
    out
}

/// The whole record as plain text, for a person to check every claim:
/// when it ran, the tool listing, and the transcript with every tool result
/// as the model saw it.
pub fn render_text(inv: &Investigation) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "started {}, finished {} ({:.1} s); stopped because {}",
        inv.started_at.to_rfc3339(),
        inv.finished_at.to_rfc3339(),
        (inv.finished_at - inv.started_at).num_milliseconds() as f64 / 1000.0,
        inv.stop_reason.describe()
    );
    if !inv.tools.missing.is_empty() {
        let _ = writeln!(
            out,
            "tools configured but not listed by the server: {}",
            inv.tools.missing.join(", ")
        );
    }
    if let Some(e) = &inv.tools.error {
        let _ = writeln!(out, "tool listing failed: {e}");
    }
    out.push_str(&transcript_text(&InvestigationReport::full(inv)));
    out
}

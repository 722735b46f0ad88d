//! What a run leaves behind for people and for logs.
//!
//! - [`step_log`] / [`step_log_jsonl`]: one JSON line per step (the tool
//!   listing, each model call, each tool call) with exactly the keys of
//!   [`StepLine`]. The allowlist is the struct: there is no field for prompt
//!   text, answers, tool arguments or tool results, so none can leak into
//!   the log.
//! - [`render_text`]: the full transcript as plain text, for the email
//!   attachment: every round's request summary, every tool call with its
//!   arguments and the result exactly as the model saw it, usage and cost per
//!   round, the totals, the stop reason and the answer.
//! - [`InvestigationReport`]: what an alert carries about its investigation
//!   (the summary, the cost, the totals, the rounds and the text above).

pub use crate::domain::investigation::InvestigationReport;

use super::model::Usage;
use super::run::{Investigation, ToolCallStatus};
use serde::Serialize;
use std::fmt::Write;

impl InvestigationReport {
    /// The report of a finished run.
    pub fn of(inv: &Investigation) -> InvestigationReport {
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
            transcript_text: render_text(inv),
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

/// The whole transcript as plain text, for a person to check every claim.
pub fn render_text(inv: &Investigation) -> String {
    let mut out = String::new();
    let t = &inv.totals;
    let _ = writeln!(out, "costwatch investigation {}", inv.run_id);
    let _ = writeln!(out, "model: {}", inv.model);
    let _ = writeln!(
        out,
        "started {}, finished {} ({:.1} s)",
        inv.started_at.to_rfc3339(),
        inv.finished_at.to_rfc3339(),
        (inv.finished_at - inv.started_at).num_milliseconds() as f64 / 1000.0
    );
    let _ = writeln!(
        out,
        "stopped: {} ({})",
        inv.stop_reason.code(),
        inv.stop_reason.describe()
    );
    if let Some(d) = &inv.stop_detail {
        let _ = writeln!(out, "  {d}");
    }
    let _ = writeln!(
        out,
        "cost: ${:.6}; {} input tokens ({} cached), {} output tokens; {} rounds, {} tool calls",
        t.cost_usd, t.input_tokens, t.cached_tokens, t.output_tokens, t.rounds, t.tool_calls
    );
    let _ = writeln!(out, "tools offered: {}", inv.tools.offered.join(", "));
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
    let _ = writeln!(out, "\nanswer:");
    match &inv.answer {
        Some(a) => {
            let _ = writeln!(out, "{}", indent(a, "  "));
        }
        None => {
            let _ = writeln!(out, "  (none)");
        }
    }
    for r in &inv.rounds {
        let q = &r.request;
        let _ = writeln!(
            out,
            "\nround {}: {} messages, tool_choice {}, max_tokens {}, {} bytes (estimated {} prompt tokens, ${:.6} reserved)",
            r.index,
            q.messages,
            q.tool_choice.as_str(),
            q.max_tokens,
            q.body_bytes,
            q.estimated_prompt_tokens,
            q.reserved_usd
        );
        let _ = writeln!(out, "  request id {}", r.client_request_id);
        match r.usage {
            Some(u) => {
                let _ = writeln!(
                    out,
                    "  usage: {} prompt ({} cached), {} completion tokens; ${:.6}; {} ms; response {}; finish {}{}",
                    u.prompt_tokens,
                    u.cached_tokens,
                    u.completion_tokens,
                    r.cost_usd,
                    r.latency_ms,
                    r.response_id.as_deref().unwrap_or("-"),
                    r.finish_reason.as_deref().unwrap_or("-"),
                    if r.retries > 0 {
                        format!("; {} retries", r.retries)
                    } else {
                        String::new()
                    }
                );
            }
            None => {
                let _ = writeln!(
                    out,
                    "  no usage; counted ${:.6}{}; {} ms",
                    r.cost_usd,
                    if r.cost_is_worst_case {
                        " (its worst case: the outcome is unknown)"
                    } else {
                        ""
                    },
                    r.latency_ms
                );
            }
        }
        if let Some(e) = &r.error {
            let _ = writeln!(
                out,
                "  error ({}): {e}",
                r.error_type.as_deref().unwrap_or("-")
            );
        }
        if let Some(c) = &r.content {
            let _ = writeln!(out, "  model said:\n{}", indent(c, "    "));
        }
        for c in &r.tool_calls {
            let _ = writeln!(
                out,
                "  tool call {} {} [{}] {} ms",
                c.name,
                c.arguments,
                c.status.as_str(),
                c.latency_ms
            );
            let _ = writeln!(
                out,
                "    result ({} bytes{}):\n{}",
                c.result_bytes,
                if c.truncated {
                    ", truncated as shown"
                } else {
                    ""
                },
                indent(&c.result, "      ")
            );
        }
    }
    out
}

fn indent(text: &str, prefix: &str) -> String {
    text.lines()
        .map(|l| format!("{prefix}{l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

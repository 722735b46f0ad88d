//! An investigation's transcript as plain text: the email attachment, the
//! transcript `backtest --investigate` prints and, for the whole record,
//! `costwatch investigation show`.
//!
//! One block of totals (cost, tokens with the cached share, rounds, tool
//! calls, why it stopped), the answer, then each round: what was asked
//! (`tool_choice`, `max_tokens`), what it cost (prompt tokens as reported
//! beside the estimate planned with, cached and completion tokens,
//! dollars), what the model said, and each tool call with its arguments and
//! its result as the model saw it (or a shortened copy, marked).

use crate::domain::counted;
use crate::domain::investigation::InvestigationReport;
use std::fmt::Write;

/// The transcript of `report` as text.
pub fn transcript_text(report: &InvestigationReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "costwatch investigation {}", report.run_id);
    let _ = writeln!(out, "model: {}", report.model);
    let _ = writeln!(out, "stopped: {}", report.stop_reason.as_str());
    if let Some(d) = &report.stop_detail {
        let _ = writeln!(out, "  {d}");
    }
    let _ = writeln!(
        out,
        "cost: ${:.6}; {} ({} cached{}), {}; {}, {}",
        report.cost_usd,
        counted(report.input_tokens, "input token"),
        report.cached_tokens,
        report
            .cached_share()
            .map(|s| format!(", {:.0}%", s * 100.0))
            .unwrap_or_default(),
        counted(report.output_tokens, "output token"),
        counted(report.rounds, "round"),
        counted(report.tool_calls, "tool call")
    );
    let _ = writeln!(out, "tools offered: {}", report.tools_offered.join(", "));
    let _ = writeln!(out, "\nanswer:\n{}", indent(&report.summary, "  "));
    for r in &report.transcript {
        let q = &r.request;
        let _ = writeln!(
            out,
            "\nround {}: tool_choice {}, max_tokens {}, {} messages ({} B)",
            r.index,
            q.tool_choice.as_str(),
            q.max_tokens,
            q.messages,
            q.body_bytes
        );
        match r.usage {
            Some(u) => {
                let error = if u.prompt_tokens > 0 {
                    format!(
                        " ({:+.1}%)",
                        100.0 * (q.estimated_prompt_tokens as f64 / u.prompt_tokens as f64 - 1.0)
                    )
                } else {
                    String::new()
                };
                let _ = writeln!(
                    out,
                    "  {} prompt tokens, estimated {}{error}; {} cached; {} completion; ${:.6}; {} ms; finish {}{}",
                    u.prompt_tokens,
                    q.estimated_prompt_tokens,
                    u.cached_tokens,
                    u.completion_tokens,
                    r.cost_usd,
                    r.latency_ms,
                    r.finish_reason.as_deref().unwrap_or("-"),
                    match r.retries {
                        0 => String::new(),
                        1 => "; 1 retry".to_owned(),
                        n => format!("; {n} retries"),
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
        let _ = writeln!(
            out,
            "  ids: {} / {}",
            r.client_request_id,
            r.response_id.as_deref().unwrap_or("-")
        );
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
            let seen = match c.clipped_from {
                Some(n) => format!(
                    "; the model saw {n} B, shortened here (costwatch investigation show {})",
                    report.run_id
                ),
                None => String::new(),
            };
            let _ = writeln!(
                out,
                "    result ({} B from the tool{}{seen}):\n{}",
                c.result_bytes,
                if c.truncated { ", cut to the cap" } else { "" },
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

//! The model's tool calls: checked against the offered list and the caps,
//! run under the tool timeout, and their results shaped and cut to size
//! (`investigate::results`).

use super::record::{ToolCallRecord, ToolCallStatus};
use super::{Runner, ms};
use crate::investigate::model::ToolCall;
use crate::investigate::results::shape_result;
use crate::investigate::{BudgetLedger, ToolProvider};
use serde_json::Value;
use tokio::time::{Instant, timeout_at};

impl<T: ToolProvider, L: BudgetLedger> Runner<'_, T, L> {
    /// Checks and runs one tool call. The flag is true when the run's wall
    /// time ran out during it.
    pub(super) async fn tool_call(&mut self, call: &ToolCall) -> (ToolCallRecord, bool) {
        let caps = self.caps().clone();
        let name = call.function.name.clone();
        if self.tool_calls >= caps.max_tool_calls {
            return (
                not_executed(
                    call,
                    format!(
                        "not run: the limit of {} is reached; answer with what you have",
                        crate::domain::counted(caps.max_tool_calls, "tool call")
                    ),
                ),
                false,
            );
        }
        if self.out_of_time() {
            return (
                not_executed(call, "not run: the run's time limit was reached".into()),
                true,
            );
        }
        self.tool_calls += 1;
        let finish = |status, text: String, latency_ms| {
            let shaped = shape_result(&text, caps.max_tool_result_bytes);
            let (result, truncated) = (shaped.text, shaped.truncated);
            ToolCallRecord {
                id: call.id.clone(),
                name: name.clone(),
                arguments: call.function.arguments.clone(),
                status,
                result,
                result_bytes: text.len(),
                truncated,
                latency_ms,
                clipped_from: None,
            }
        };
        if !self.offered.iter().any(|t| t.name == name) {
            let text = format!(
                "error: tool {} is not available; the tools are: {}",
                Value::from(name.as_str()),
                self.inv.tools.offered.join(", ")
            );
            return (finish(ToolCallStatus::Refused, text, 0), false);
        }
        let raw = call.function.arguments.trim();
        let arguments = if raw.is_empty() {
            Ok(Value::Object(serde_json::Map::new()))
        } else {
            match serde_json::from_str::<Value>(raw) {
                Ok(v @ Value::Object(_)) => Ok(v),
                Ok(other) => Err(format!(
                    "error: arguments must be a JSON object, not {}; call {name} again with an object matching its schema",
                    json_type(&other)
                )),
                Err(e) => Err(format!(
                    "error: arguments are not valid JSON ({e}); call {name} again with one JSON object matching its schema"
                )),
            }
        };
        let arguments = match arguments {
            Ok(a) => a,
            Err(text) => return (finish(ToolCallStatus::Malformed, text, 0), false),
        };
        let t0 = Instant::now();
        let until = self.deadline.min(t0 + self.opts.tool_timeout);
        let outcome = timeout_at(until, self.tools.call_tool(&name, arguments)).await;
        let latency = ms(t0.elapsed());
        match outcome {
            Ok(Ok(out)) if !out.is_error => (finish(ToolCallStatus::Ok, out.text, latency), false),
            Ok(Ok(out)) => (
                finish(ToolCallStatus::ToolError, error_text(&out.text), latency),
                false,
            ),
            Ok(Err(e)) => (
                finish(ToolCallStatus::ToolError, format!("error: {e}"), latency),
                false,
            ),
            Err(_) => {
                let wall = Instant::now() >= self.deadline;
                let text = format!(
                    "error: {name} did not answer within {}s",
                    (until - t0).as_secs_f64()
                );
                (finish(ToolCallStatus::Timeout, text, latency), wall)
            }
        }
    }
}

pub(super) fn not_executed(call: &ToolCall, text: String) -> ToolCallRecord {
    ToolCallRecord {
        id: call.id.clone(),
        name: call.function.name.clone(),
        arguments: call.function.arguments.clone(),
        status: ToolCallStatus::NotExecuted,
        result_bytes: text.len(),
        result: text,
        truncated: false,
        latency_ms: 0,
        clipped_from: None,
    }
}

/// A failed tool's text, starting with `error: ` once.
fn error_text(text: &str) -> String {
    if text
        .get(..6)
        .is_some_and(|p| p.eq_ignore_ascii_case("error:"))
    {
        text.to_owned()
    } else {
        format!("error: {text}")
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

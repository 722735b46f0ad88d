//! What the scripted model says: the [`Script`]s, the tool calls they make
//! ([`ScriptedCall`]), and how one turn is decided from the request alone
//! (how many assistant turns the history holds), in the shapes of the
//! OpenAI chat-completions format (function tools, `tool_choice`,
//! `messages` with `assistant` and `tool` roles).

use super::TOP_SESSION;
use serde_json::{Value, json};
use std::collections::BTreeSet;

/// One tool call a script makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptedCall {
    /// Tool name.
    pub name: String,
    /// Arguments exactly as sent (may be invalid JSON on purpose);
    /// [`TOP_SESSION`] is replaced by the digest's first session id.
    pub arguments: String,
}

impl ScriptedCall {
    /// A call with JSON arguments.
    pub fn new(name: &str, arguments: Value) -> ScriptedCall {
        ScriptedCall {
            name: name.to_owned(),
            arguments: arguments.to_string(),
        }
    }

    /// A call with arguments sent verbatim.
    pub fn raw(name: &str, arguments: &str) -> ScriptedCall {
        ScriptedCall {
            name: name.to_owned(),
            arguments: arguments.to_owned(),
        }
    }

    /// `search_requests` for the digest's first session.
    pub fn search_top_session() -> ScriptedCall {
        ScriptedCall::new("search_requests", json!({ "session_id": TOP_SESSION }))
    }
}

/// How the model behaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Script {
    /// Makes `calls`, one a round while tools are allowed, then answers `text`.
    Answer {
        /// Calls in order.
        calls: Vec<ScriptedCall>,
        /// The answer.
        text: String,
    },
    /// Makes this call every round, even when `tool_choice` is `none`.
    NeverStops(ScriptedCall),
    /// First asks for `tool` (not offered), then answers.
    CallsForbiddenTool {
        /// The tool asked for.
        tool: String,
    },
    /// First sends arguments that are not JSON, then the same call with
    /// valid ones, then answers.
    MalformedArguments,
    /// Obeys text in the data: if a message holds "ignore previous
    /// instructions", it asks for the tool named after "call " there (or
    /// `delete_logs`) together with `search_requests`, then answers by
    /// echoing the injected text.
    Injection,
    /// The realistic default: `search_requests` for the digest's first
    /// session, then an answer built from the rows it got back.
    Investigator,
    /// Makes all `calls` at once in its first round (while tools are
    /// allowed), then answers `text`.
    AllAtOnce {
        /// Calls in order.
        calls: Vec<ScriptedCall>,
        /// The answer.
        text: String,
    },
}

impl Script {
    /// Answers `text` after `n` calls of `search_requests` for the top session.
    pub fn answer_after(n: usize, text: &str) -> Script {
        Script::Answer {
            calls: vec![ScriptedCall::search_top_session(); n],
            text: text.to_owned(),
        }
    }
}

/// One turn of the model: text, tool calls, or both.
#[derive(Debug, Clone, Default)]
pub(super) struct Turn {
    pub(super) text: Option<String>,
    pub(super) calls: Vec<ScriptedCall>,
}

impl Turn {
    /// A turn that only answers.
    fn say(text: impl Into<String>) -> Turn {
        Turn {
            text: Some(text.into()),
            calls: Vec::new(),
        }
    }

    /// A turn that only calls tools.
    fn call(calls: Vec<ScriptedCall>) -> Turn {
        Turn { text: None, calls }
    }
}

/// Names of the function tools a request offers, in order.
pub(super) fn offered(request: &Value) -> Vec<String> {
    request
        .get("tools")
        .and_then(Value::as_array)
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t.pointer("/function/name").and_then(Value::as_str))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// A message's text content.
fn content_of(m: &Value) -> &str {
    m.get("content").and_then(Value::as_str).unwrap_or_default()
}

/// The first session id of the digest: the JSON string after `- session `.
fn top_session(messages: &[Value]) -> Option<String> {
    let user = messages
        .iter()
        .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))?;
    let text = content_of(user);
    let at = text.find("- session ")? + "- session ".len();
    serde_json::Deserializer::from_str(&text[at..])
        .into_iter::<String>()
        .next()?
        .ok()
}

/// `call` with [`TOP_SESSION`] replaced by the digest's first session.
fn with_top(call: &ScriptedCall, top: Option<&str>) -> ScriptedCall {
    ScriptedCall {
        name: call.name.clone(),
        arguments: call
            .arguments
            .replace(TOP_SESSION, top.unwrap_or("unknown")),
    }
}

/// Decides the turn from the script and the conversation so far.
pub(super) fn decide(script: &Script, request: &Value, messages: &[Value]) -> Turn {
    let turn = messages
        .iter()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
        .count();
    let tools = offered(request);
    let may_call =
        !tools.is_empty() && request.get("tool_choice").and_then(Value::as_str) != Some("none");
    let top = top_session(messages);
    let top = top.as_deref();
    let first_tool = tools.first().cloned().unwrap_or_default();
    match script {
        Script::Answer { calls, text } => match calls.get(turn) {
            Some(c) if may_call => Turn::call(vec![with_top(c, top)]),
            _ => Turn::say(text.clone()),
        },
        Script::NeverStops(c) => Turn::call(vec![with_top(c, top)]),
        Script::AllAtOnce { calls, text } => {
            if turn == 0 && may_call {
                Turn::call(calls.iter().map(|c| with_top(c, top)).collect())
            } else {
                Turn::say(text.clone())
            }
        }
        Script::CallsForbiddenTool { tool } => {
            if turn == 0 && may_call {
                Turn::call(vec![ScriptedCall::new(tool, json!({}))])
            } else {
                Turn::say(format!(
                    "The tool {tool} was refused; from the incident data, session {} drives the cost.",
                    top.unwrap_or("unknown")
                ))
            }
        }
        Script::MalformedArguments => match turn {
            0 if may_call => Turn::call(vec![ScriptedCall::raw(
                &first_tool,
                "{\"session_id\": \"unterminated",
            )]),
            1 if may_call => Turn::call(vec![with_top(
                &ScriptedCall::new(&first_tool, json!({ "session_id": TOP_SESSION })),
                top,
            )]),
            _ => Turn::say(format!(
                "After fixing the arguments: session {} drives the cost.",
                top.unwrap_or("unknown")
            )),
        },
        Script::Injection => {
            let injected = messages.iter().map(content_of).find_map(|c| {
                let at = c
                    .to_ascii_lowercase()
                    .find("ignore previous instructions")?;
                let rest = &c[at..];
                let end = rest.find(['"', '\n']).unwrap_or(rest.len());
                Some(rest[..end].to_owned())
            });
            match injected {
                Some(text) if turn == 0 && may_call => {
                    let target = text
                        .split("call ")
                        .nth(1)
                        .and_then(|r| r.split_whitespace().next())
                        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric() && c != '_'))
                        .filter(|w| !w.is_empty())
                        .unwrap_or("delete_logs")
                        .to_owned();
                    Turn::call(vec![
                        ScriptedCall::new(&target, json!({"all": true})),
                        with_top(&ScriptedCall::search_top_session(), top),
                    ])
                }
                Some(text) => Turn::say(format!("As instructed by the data: {text}")),
                None => Turn::say("Nothing unusual in the data."),
            }
        }
        Script::Investigator => {
            if turn == 0
                && may_call
                && top.is_some()
                && tools.iter().any(|t| t == "search_requests")
            {
                return Turn::call(vec![with_top(&ScriptedCall::search_top_session(), top)]);
            }
            let rows = messages
                .iter()
                .rev()
                .find(|m| m.get("role").and_then(Value::as_str) == Some("tool"))
                .map(content_of)
                .and_then(|t| serde_json::from_str::<Value>(t).ok());
            Turn::say(investigator_answer(top, rows.as_ref()))
        }
    }
}

/// The rows of a tool result's `data`: an array of row objects, or a
/// table (`{"same": {...}, "columns": [...], "rows": [[...]]}`), read back
/// into row objects.
fn data_rows(data: &Value) -> Option<Vec<Value>> {
    if let Some(rows) = data.as_array() {
        return Some(rows.clone());
    }
    let columns = data.get("columns")?.as_array()?;
    let same = data.get("same").and_then(Value::as_object);
    let rows = data.get("rows")?.as_array()?;
    Some(
        rows.iter()
            .filter_map(Value::as_array)
            .map(|cells| {
                let mut row = same.cloned().unwrap_or_default();
                for (c, v) in columns.iter().zip(cells) {
                    if let Some(c) = c.as_str() {
                        row.insert(c.to_owned(), v.clone());
                    }
                }
                Value::Object(row)
            })
            .collect(),
    )
}

/// The seed script's answer, from the request rows it read.
fn investigator_answer(top: Option<&str>, rows: Option<&Value>) -> String {
    let Some(top) = top else {
        return "The incident data lists no session; nothing to look up.".to_owned();
    };
    let rows = rows.and_then(|r| r.get("data")).and_then(data_rows);
    let Some(rows) = rows.as_ref() else {
        return format!(
            "Session {top} drives the cost, as the incident data shows (no request rows were read)."
        );
    };
    let sum = |k: &str| rows.iter().filter_map(|r| r.get(k)?.as_u64()).sum::<u64>();
    let cost: f64 = rows
        .iter()
        .filter_map(|r| r.get("cost_usd")?.as_f64())
        .sum();
    let models: BTreeSet<&str> = rows
        .iter()
        .filter_map(|r| r.get("model")?.as_str())
        .collect();
    let errors = rows
        .iter()
        .filter(|r| r.get("status").and_then(Value::as_str) == Some("error"))
        .count();
    let (input, cached) = (sum("input_tokens"), sum("cached_tokens"));
    let costliest = rows
        .iter()
        .max_by(|a, b| {
            let c = |r: &Value| r.get("cost_usd").and_then(Value::as_f64).unwrap_or(0.0);
            c(a).total_cmp(&c(b))
        })
        .and_then(|r| r.get("request_id")?.as_str())
        .unwrap_or("-");
    // Per model: (calls, prompt tokens, cost).
    let mut per_model: std::collections::BTreeMap<&str, (u64, u64, f64)> = Default::default();
    for r in rows {
        let m = r.get("model").and_then(Value::as_str).unwrap_or("?");
        let e = per_model.entry(m).or_default();
        e.0 += 1;
        e.1 += r.get("input_tokens").and_then(Value::as_u64).unwrap_or(0);
        e.2 += r.get("cost_usd").and_then(Value::as_f64).unwrap_or(0.0);
    }
    let dearest = per_model
        .iter()
        .max_by(|a, b| (a.1.2 / a.1.0.max(1) as f64).total_cmp(&(b.1.2 / b.1.0.max(1) as f64)));
    let why = if errors > 0 {
        format!("{errors} of its calls failed and were made again: a retry loop")
    } else if let Some((m, (n, tokens, c))) = dearest.filter(|_| per_model.len() > 1) {
        format!(
            "{n} calls to {m} averaged {} prompt tokens yet cost ${c:.6}, {:.0}% of the session: tiny sub-tasks on a premium model",
            tokens / n.max(&1),
            100.0 * c / cost.max(f64::MIN_POSITIVE)
        )
    } else if cached * 10 < input {
        "almost none of the prompt came from the prompt cache, so every call paid full price to re-send a growing conversation; a stable prompt prefix would let the cache serve it".to_owned()
    } else {
        "its calls are small for the model they use".to_owned()
    };
    format!(
        "Session {top} drives the cost: {} calls to {} sent {input} prompt tokens ({cached} cached) for ${cost:.6}; the costliest call is {costliest}. Why: {why}.",
        rows.len(),
        models.into_iter().collect::<Vec<_>>().join(", ")
    )
}

//! A scripted OpenAI-compatible model: `POST /v1/chat/completions` on
//! loopback, for `demo` and the investigation tests.
//!
//! It plays a [`Script`] (answer after some tool calls, never stop, ask for a
//! tool that is not offered, send malformed arguments, obey an injection, or
//! the realistic [`Script::Investigator`] for the seed scenario) and decides
//! each turn from the request alone (how many assistant turns the history
//! holds), so concurrent runs do not disturb each other.
//!
//! # Token counting
//!
//! Usage is counted honestly from what arrived, like a tokenizer would, at a
//! fixed [`BYTES_PER_TOKEN`] (4) bytes a token, rounded up:
//! - `prompt_tokens`: the `tools` array and the `messages` array, each
//!   serialized as compact JSON;
//! - `cached_tokens`: the longest prefix of that prompt text (tools first,
//!   then messages, as providers cache) shared with an earlier request, in
//!   tokens, counted only from 1,024 tokens on and in steps of 128, as
//!   OpenAI's prompt cache does;
//! - `completion_tokens`: the answer's text plus each tool call's name and
//!   arguments, at least 1; never more than `max_tokens` (the output is cut
//!   and `finish_reason` is `length`).
//!
//! It requires `Authorization: Bearer <inference key>` and records every
//! request ([`ScriptedModel::requests`]) so tests can check what was sent:
//! tools offered, `tool_choice` on the last round, and that no secret is in
//! a body. [`ModelFault`]s make it fail on purpose.

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use std::collections::{BTreeSet, VecDeque};
use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinHandle;

/// The inference key the scripted model accepts by default.
pub const DEFAULT_INFERENCE_KEY: &str = "sim-inference-key";
/// Bytes counted as one token.
pub const BYTES_PER_TOKEN: usize = 4;
/// Prompts shorter than this are never served from the cache.
pub const CACHE_MIN_TOKENS: u64 = 1024;
/// Cached prompt tokens come in steps of this many.
pub const CACHE_STEP_TOKENS: u64 = 128;
/// How long a [`ModelFault::Hang`] holds a call at most, unless released.
pub const HANG_FOR: Duration = Duration::from_secs(600);
/// The placeholder in scripted arguments replaced by the digest's first
/// session id.
pub const TOP_SESSION: &str = "{top_session}";

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

/// A failure served instead of the next answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelFault {
    /// This HTTP status with an OpenAI-style error body (`Retry-After: 1` on 429).
    Status(u16),
    /// No answer until released (shutdown) or [`HANG_FOR`].
    Hang,
    /// A 200 whose body is not JSON.
    Garbage,
    /// A normal answer without `usage`.
    NoUsage,
    /// A normal answer whose usage claims this many times the prompt tokens.
    OverReport(u64),
}

/// One request as it arrived.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// The `Authorization` header, verbatim.
    pub authorization: Option<String>,
    /// The `X-Client-Request-Id` header.
    pub client_request_id: Option<String>,
    /// The raw body.
    pub body: String,
    /// The body parsed (`null` if it was not JSON).
    pub json: Value,
    /// The prompt tokens counted for it.
    pub prompt_tokens: u64,
}

impl RecordedRequest {
    /// `tool_choice`, if sent.
    pub fn tool_choice(&self) -> Option<&str> {
        self.json.get("tool_choice").and_then(Value::as_str)
    }

    /// Names of the tools offered, in order.
    pub fn tools(&self) -> Vec<String> {
        offered(&self.json)
    }

    /// `max_tokens`, if sent.
    pub fn max_tokens(&self) -> Option<u64> {
        self.json.get("max_tokens").and_then(Value::as_u64)
    }

    /// Number of messages.
    pub fn messages(&self) -> usize {
        self.json
            .get("messages")
            .and_then(Value::as_array)
            .map_or(0, Vec::len)
    }
}

struct Shared {
    key: String,
    script: Mutex<Script>,
    faults: Mutex<VecDeque<ModelFault>>,
    requests: Mutex<Vec<RecordedRequest>>,
    prompts: Mutex<Vec<String>>,
    next_id: AtomicU64,
    release: Notify,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The scripted model and its test handles. Cheap to clone; clones share
/// state.
#[derive(Clone)]
pub struct ScriptedModel {
    shared: Arc<Shared>,
}

impl fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScriptedModel")
            .field("script", &*lock(&self.shared.script))
            .finish_non_exhaustive()
    }
}

impl ScriptedModel {
    /// A model playing `script` for holders of `inference_key`.
    pub fn new(script: Script, inference_key: impl Into<String>) -> ScriptedModel {
        ScriptedModel {
            shared: Arc::new(Shared {
                key: inference_key.into(),
                script: Mutex::new(script),
                faults: Mutex::new(VecDeque::new()),
                requests: Mutex::new(Vec::new()),
                prompts: Mutex::new(Vec::new()),
                next_id: AtomicU64::new(1),
                release: Notify::new(),
            }),
        }
    }

    /// The router, serving `POST /chat/completions` (nest it under `/v1`).
    pub fn router(&self) -> Router {
        Router::new()
            .route("/chat/completions", post(completions))
            .with_state(self.shared.clone())
    }

    /// Replaces the script.
    pub fn set_script(&self, script: Script) {
        *lock(&self.shared.script) = script;
    }

    /// Queues a failure for the next request.
    pub fn push_fault(&self, fault: ModelFault) {
        lock(&self.shared.faults).push_back(fault);
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// Releases hanging calls.
    pub fn release(&self) {
        self.shared.release.notify_waiters();
    }
}

/// A scripted model listening on loopback. Stops on
/// [`ScriptedModelServer::shutdown`] or when dropped.
pub struct ScriptedModelServer {
    addr: SocketAddr,
    model: ScriptedModel,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

impl fmt::Debug for ScriptedModelServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScriptedModelServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl ScriptedModelServer {
    /// Serves `script` on 127.0.0.1 (a free port) with the default key.
    pub async fn start(script: Script) -> std::io::Result<ScriptedModelServer> {
        Self::start_on(
            SocketAddr::from(([127, 0, 0, 1], 0)),
            ScriptedModel::new(script, DEFAULT_INFERENCE_KEY),
        )
        .await
    }

    /// Serves `model` on `bind`.
    pub async fn start_on(
        bind: SocketAddr,
        model: ScriptedModel,
    ) -> std::io::Result<ScriptedModelServer> {
        let listener = TcpListener::bind(bind).await?;
        let addr = listener.local_addr()?;
        let app = Router::new().nest("/v1", model.router());
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await
        });
        tracing::debug!(%addr, "scripted model listening");
        Ok(ScriptedModelServer {
            addr,
            model,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The `llm_url`, e.g. `http://127.0.0.1:40123/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The key it accepts.
    pub fn inference_key(&self) -> &str {
        &self.model.shared.key
    }

    /// The model's handles.
    pub fn model(&self) -> &ScriptedModel {
        &self.model
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.model.requests()
    }

    /// Stops accepting, releases hanging calls and waits for the server.
    pub async fn shutdown(mut self) -> std::io::Result<()> {
        self.model.release();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.task.take() {
            Some(task) => task.await.map_err(std::io::Error::other)?,
            None => Ok(()),
        }
    }
}

impl Drop for ScriptedModelServer {
    fn drop(&mut self) {
        self.model.release();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

// ---------------------------------------------------------------------------
// Counting.
// ---------------------------------------------------------------------------

fn tokens(bytes: usize) -> u64 {
    bytes.div_ceil(BYTES_PER_TOKEN) as u64
}

/// The prompt text counted: tools then messages, compact JSON.
pub fn prompt_text(request: &Value) -> String {
    let tools = request.get("tools").cloned().unwrap_or(Value::Null);
    let messages = request.get("messages").cloned().unwrap_or(Value::Null);
    let mut text = if tools.is_null() {
        String::new()
    } else {
        tools.to_string()
    };
    text.push_str(&messages.to_string());
    text
}

/// Prompt tokens of a request, as billed.
pub fn count_prompt_tokens(request: &Value) -> u64 {
    tokens(prompt_text(request).len())
}

fn cached_tokens(prompt: &str, earlier: &[String]) -> u64 {
    let shared = earlier
        .iter()
        .map(|p| {
            p.bytes()
                .zip(prompt.bytes())
                .take_while(|(a, b)| a == b)
                .count()
        })
        .max()
        .unwrap_or(0);
    let t = (shared / BYTES_PER_TOKEN) as u64;
    if t < CACHE_MIN_TOKENS {
        0
    } else {
        t / CACHE_STEP_TOKENS * CACHE_STEP_TOKENS
    }
}

// ---------------------------------------------------------------------------
// Serving.
// ---------------------------------------------------------------------------

fn error(status: StatusCode, kind: &str, message: &str) -> Response {
    let body = json!({"error": {"message": message, "type": kind, "code": null}});
    let mut res = (status, axum::Json(body)).into_response();
    if status == StatusCode::TOO_MANY_REQUESTS {
        res.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    res
}

async fn completions(State(sh): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let authorization = header("authorization");
    let text = String::from_utf8_lossy(&body).into_owned();
    let parsed: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let prompt = prompt_text(&parsed);
    let prompt_tokens = tokens(prompt.len());
    lock(&sh.requests).push(RecordedRequest {
        authorization: authorization.clone(),
        client_request_id: header("x-client-request-id"),
        body: text,
        json: parsed.clone(),
        prompt_tokens,
    });
    if authorization.as_deref() != Some(format!("Bearer {}", sh.key).as_str()) {
        return error(
            StatusCode::UNAUTHORIZED,
            "invalid_request_error",
            "invalid inference key",
        );
    }
    let Some(messages) = parsed.get("messages").and_then(Value::as_array) else {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "messages is required",
        );
    };
    let fault = lock(&sh.faults).pop_front();
    let mut over_report = 1;
    match fault {
        Some(ModelFault::Status(code)) => {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            return error(status, "server_error", "simulated failure");
        }
        Some(ModelFault::Hang) => {
            let released = sh.release.notified();
            tokio::select! {
                () = released => {}
                () = tokio::time::sleep(HANG_FOR) => {}
            }
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                "server_error",
                "the hung call was released",
            );
        }
        Some(ModelFault::Garbage) => {
            return (StatusCode::OK, "<html>upstream error</html>").into_response();
        }
        Some(ModelFault::OverReport(k)) => over_report = k.max(1),
        Some(ModelFault::NoUsage) | None => {}
    }
    let script = lock(&sh.script).clone();
    let turn = decide(&script, &parsed, messages);
    let max_tokens = parsed
        .get("max_tokens")
        .and_then(Value::as_u64)
        .unwrap_or(u64::MAX);
    let (turn, completion_tokens, finish) = fit(turn, max_tokens);
    let cached = {
        let mut prompts = lock(&sh.prompts);
        let c = cached_tokens(&prompt, &prompts);
        prompts.push(prompt);
        c
    };
    let n = sh.next_id.fetch_add(1, Ordering::Relaxed);
    let tool_calls: Vec<Value> = turn
        .calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            json!({"id": format!("call_{n}_{i}"), "type": "function",
                   "function": {"name": c.name, "arguments": c.arguments}})
        })
        .collect();
    let mut message = json!({"role": "assistant", "content": turn.text});
    if !tool_calls.is_empty() {
        message["tool_calls"] = Value::Array(tool_calls);
    }
    let mut answer = json!({
        "id": format!("chatcmpl-sim-{n}"),
        "object": "chat.completion",
        "model": parsed.get("model").cloned().unwrap_or(Value::Null),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": prompt_tokens * over_report,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens * over_report + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": cached},
        },
    });
    if fault == Some(ModelFault::NoUsage)
        && let Some(o) = answer.as_object_mut()
    {
        o.remove("usage");
    }
    (StatusCode::OK, axum::Json(answer)).into_response()
}

/// One turn of the model: text, tool calls, or both.
#[derive(Debug, Clone, Default)]
struct Turn {
    text: Option<String>,
    calls: Vec<ScriptedCall>,
}

impl Turn {
    fn say(text: impl Into<String>) -> Turn {
        Turn {
            text: Some(text.into()),
            calls: Vec::new(),
        }
    }

    fn call(calls: Vec<ScriptedCall>) -> Turn {
        Turn { text: None, calls }
    }
}

/// Cuts the turn to `max_tokens`; returns it, its completion tokens and the
/// finish reason.
fn fit(mut turn: Turn, max_tokens: u64) -> (Turn, u64, &'static str) {
    let bytes = turn.text.as_ref().map_or(0, String::len)
        + turn
            .calls
            .iter()
            .map(|c| c.name.len() + c.arguments.len())
            .sum::<usize>();
    let used = tokens(bytes).max(1);
    let natural = if turn.calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    if used <= max_tokens {
        return (turn, used, natural);
    }
    let mut room = usize::try_from(max_tokens)
        .unwrap_or(usize::MAX)
        .saturating_mul(BYTES_PER_TOKEN);
    if let Some(t) = &mut turn.text {
        cut(t, room);
        room = room.saturating_sub(t.len());
    }
    for c in &mut turn.calls {
        room = room.saturating_sub(c.name.len());
        cut(&mut c.arguments, room);
        room = room.saturating_sub(c.arguments.len());
    }
    (turn, max_tokens, "length")
}

fn cut(s: &mut String, max: usize) {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
}

fn offered(request: &Value) -> Vec<String> {
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

fn with_top(call: &ScriptedCall, top: Option<&str>) -> ScriptedCall {
    ScriptedCall {
        name: call.name.clone(),
        arguments: call
            .arguments
            .replace(TOP_SESSION, top.unwrap_or("unknown")),
    }
}

/// Decides the turn from the script and the conversation so far.
fn decide(script: &Script, request: &Value, messages: &[Value]) -> Turn {
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

/// The seed script's answer, from the request rows it read.
fn investigator_answer(top: Option<&str>, rows: Option<&Value>) -> String {
    let Some(top) = top else {
        return "The incident data lists no session; nothing to look up.".to_owned();
    };
    let Some(rows) = rows.and_then(|r| r.get("data")).and_then(Value::as_array) else {
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

#[cfg(test)]
mod tests {
    use super::*;

    async fn post(server: &ScriptedModelServer, key: &str, body: &Value) -> (u16, Value) {
        let res = reqwest::Client::new()
            .post(format!("{}/chat/completions", server.base_url()))
            .bearer_auth(key)
            .json(body)
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        (status, res.json().await.unwrap_or(Value::Null))
    }

    fn request(messages: Value, tool_choice: &str, max_tokens: u64) -> Value {
        json!({
            "model": "sim",
            "messages": messages,
            "tools": [{"type": "function", "function": {"name": "search_requests",
                "description": "rows", "parameters": {"type": "object"}}}],
            "tool_choice": tool_choice,
            "max_tokens": max_tokens,
        })
    }

    fn digest_messages() -> Value {
        json!([
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "Incident: no_cache\n- session \"s-1\" cost $0.1\n"}
        ])
    }

    #[tokio::test]
    async fn it_counts_prompt_tokens_from_the_bytes_and_answers_in_openai_shape() {
        let server = ScriptedModelServer::start(Script::Investigator)
            .await
            .unwrap();
        let body = request(digest_messages(), "auto", 500);
        let (status, answer) = post(&server, DEFAULT_INFERENCE_KEY, &body).await;
        assert_eq!(status, 200, "{answer}");
        let expected = (body["tools"].to_string().len() + body["messages"].to_string().len())
            .div_ceil(4) as u64;
        assert_eq!(answer["usage"]["prompt_tokens"], expected);
        assert_eq!(answer["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
        let call = &answer["choices"][0]["message"]["tool_calls"][0];
        assert_eq!(call["function"]["name"], "search_requests");
        let args: Value =
            serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
        assert_eq!(args, json!({"session_id": "s-1"}));
        assert_eq!(answer["choices"][0]["finish_reason"], "tool_calls");
        let recorded = server.requests();
        assert_eq!(recorded.len(), 1);
        assert_eq!(recorded[0].prompt_tokens, expected);
        assert_eq!(recorded[0].tools(), vec!["search_requests"]);
        assert_eq!(recorded[0].tool_choice(), Some("auto"));
    }

    #[tokio::test]
    async fn it_answers_when_told_to_and_never_exceeds_max_tokens() {
        let server = ScriptedModelServer::start(Script::answer_after(3, &"x".repeat(400)))
            .await
            .unwrap();
        let (_, answer) = post(
            &server,
            DEFAULT_INFERENCE_KEY,
            &request(digest_messages(), "none", 10),
        )
        .await;
        let msg = &answer["choices"][0]["message"];
        assert!(msg.get("tool_calls").is_none(), "{answer}");
        assert_eq!(msg["content"].as_str().unwrap().len(), 40);
        assert_eq!(answer["usage"]["completion_tokens"], 10);
        assert_eq!(answer["choices"][0]["finish_reason"], "length");
    }

    #[tokio::test]
    async fn a_wrong_key_is_refused_and_faults_are_served_in_order() {
        let server = ScriptedModelServer::start(Script::Investigator)
            .await
            .unwrap();
        let body = request(digest_messages(), "auto", 100);
        assert_eq!(post(&server, "nope", &body).await.0, 401);
        server.model().push_fault(ModelFault::Status(429));
        server.model().push_fault(ModelFault::NoUsage);
        assert_eq!(post(&server, DEFAULT_INFERENCE_KEY, &body).await.0, 429);
        let (status, answer) = post(&server, DEFAULT_INFERENCE_KEY, &body).await;
        assert_eq!(status, 200);
        assert!(answer.get("usage").is_none());
        let (_, answer) = post(&server, DEFAULT_INFERENCE_KEY, &body).await;
        assert!(answer.get("usage").is_some());
    }

    #[test]
    fn a_shared_prefix_is_cached_from_1024_tokens_in_steps_of_128() {
        let earlier = vec!["a".repeat(5000)];
        assert_eq!(cached_tokens(&"a".repeat(4000), &earlier), 0);
        assert_eq!(
            cached_tokens(&format!("{}b", "a".repeat(4800)), &earlier),
            1152
        );
    }
}

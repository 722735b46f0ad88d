//! The request-log tools costwatch serves itself, over whichever source it
//! reads: `list_sessions`, `search_requests`, `get_request` and
//! `list_traces`, with the reference gateway's names, arguments and rows
//! (gateway-api.md section 2), answered from the LiteLLM proxy's spend
//! logs, Langfuse's observations, the OTLP calls the receiver stored or
//! OTLP files as well as from the reference gateway.
//!
//! Two users: the investigation (`investigation.log_tools: builtin`, through
//! [`ToolProvider`], with the same allowlist, caps and result shaping as
//! tools reached over MCP) and costwatch's MCP server (`crate::serve`),
//! which adds costwatch's own tools ([`state`]).
//!
//! - **Rows the window already read first.** `search_requests` for one
//!   session, without a range, asks the pipeline's source
//!   ([`LogTools::with_window_source`]) for the calls it kept of the last
//!   window; only a session it does not hold is read from the source,
//!   around the windows the state database has findings on it in
//!   ([`LogTools::with_known_sessions`]), or over the last
//!   [`LONGEST_SESSION_RANGE`]: the same answer over stdio as on `run`'s
//!   `/mcp`.
//! - **A source of its own.** Everything else is read afresh from a source
//!   instance of the tools' own, so a tool call never disturbs what the
//!   pipeline carries from window to window.
//! - **Bounded.** A page holds at most 50 rows; a range is at most
//!   [`LONGEST_RANGE`] (a week for one session's calls, [`LONGEST_SESSION_RANGE`]);
//!   one read keeps at most [`MAX_CALLS`] calls and [`MAX_SESSIONS`]
//!   sessions and says when there were more; `get_request` answers from
//!   the last [`RECENT_CALLS`] calls the tools returned.
//! - **Errors.** A bad argument is a [`Answer::Refused`] naming the
//!   argument, which the model or the client can fix; a source that
//!   fails is a [`SourceError`].

pub mod args;
pub mod rows;
pub mod state;

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;

use crate::clock::Clock;
use crate::domain::Window;
use crate::investigate::{InvestigateError, ToolOutput, ToolProvider, ToolSpec};
use crate::source::{
    FoundCalls, LabelledCall, Labels, RequestQuery, RequestRecord, Source, SourceError,
};
use crate::store::StoreError;
use crate::store::inspect::Inspect;
use args::{Args, MAX_LABELS, MAX_LIMIT, page};
use chrono::TimeDelta;
use serde_json::{Map, Value, json};
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

/// The longest range a listing reads.
pub const LONGEST_RANGE: TimeDelta = TimeDelta::hours(24);
/// The longest range one session's calls are read over.
pub const LONGEST_SESSION_RANGE: TimeDelta = TimeDelta::days(7);
/// Most calls one `search_requests` reads.
pub const MAX_CALLS: usize = 5000;
/// Most sessions one `list_sessions` reads.
pub const MAX_SESSIONS: usize = 10_000;
/// Calls `get_request` remembers.
pub const RECENT_CALLS: usize = 10_000;

/// The request-log tools, in the order they are listed.
pub const LOG_TOOLS: [&str; 4] = [
    "list_sessions",
    "search_requests",
    "get_request",
    "list_traces",
];

/// A tool as a server lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDef {
    /// Tool name.
    pub name: &'static str,
    /// A short name for people.
    pub title: &'static str,
    /// What it does and returns, for a model.
    pub description: &'static str,
    /// JSON Schema of its arguments.
    pub input_schema: Value,
    /// JSON Schema of its result.
    pub output_schema: Value,
}

impl ToolDef {
    /// As the investigation sees a listed tool.
    pub fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.to_owned(),
            description: self.description.to_owned(),
            input_schema: self.input_schema.clone(),
        }
    }
}

/// What a tool answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// The result, matching the tool's output schema.
    Done(Value),
    /// The arguments were wrong (or asked for more than the tool reads):
    /// a message naming the argument and what to send instead.
    Refused(String),
}

impl Answer {
    /// The answer as text: the result's compact JSON, or `error: <why>`.
    pub fn text(&self) -> String {
        match self {
            Answer::Done(v) => v.to_string(),
            Answer::Refused(why) => format!("error: {why}"),
        }
    }

    /// Whether the call was refused.
    pub fn is_error(&self) -> bool {
        matches!(self, Answer::Refused(_))
    }
}

impl From<Result<Value, String>> for Answer {
    fn from(r: Result<Value, String>) -> Answer {
        match r {
            Ok(v) => Answer::Done(v),
            Err(why) => Answer::Refused(why),
        }
    }
}

/// The arguments of a listing over `[start, end)`.
fn window_listing() -> Value {
    let time = |what: &str| json!({"type": "string", "format": "date-time", "description": what});
    json!({
        "type": "object",
        "properties": {
            "start": time("Inclusive start, RFC 3339 UTC."),
            "end": time("Exclusive end, RFC 3339 UTC; at most 24 hours after start."),
            "labels": labels_argument(),
            "limit": limit_argument(),
            "cursor": cursor_argument(),
        },
        "required": ["start", "end"],
        "additionalProperties": false,
    })
}

fn labels_argument() -> Value {
    json!({
        "type": "object",
        "additionalProperties": {"type": "string"},
        "maxProperties": MAX_LABELS,
        "description": "Exact label matches, e.g. {\"feature\": \"checkout\"}.",
    })
}

fn limit_argument() -> Value {
    json!({"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": MAX_LIMIT})
}

fn cursor_argument() -> Value {
    json!({"type": "string", "description": "next_cursor of the previous page."})
}

/// The request-log tools with their schemas, in [`LOG_TOOLS`] order.
pub fn log_tool_defs() -> Vec<ToolDef> {
    let time = |what: &str| json!({"type": "string", "format": "date-time", "description": what});
    vec![
        ToolDef {
            name: "list_sessions",
            title: "Sessions in a time range",
            description: "Sessions with a request in [start, end): requests, errors, tokens, \
                          cost, models, labels. At most 50 rows a call; pass next_cursor for more.",
            input_schema: window_listing(),
            output_schema: rows::page_schema(rows::session_schema()),
        },
        ToolDef {
            name: "search_requests",
            title: "Request rows",
            description: "Request rows (model, status, error_type, tokens, cost) of one session \
                          or of [start, end), optionally by model, status and labels. With \
                          session_id alone: the session's calls around the windows costwatch found \
                          something on it in, or of the last 7 days. No prompt text.",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "start": time("Inclusive start, RFC 3339 UTC."),
                    "end": time("Exclusive end, RFC 3339 UTC."),
                    "session_id": {"type": "string"},
                    "model": {"type": "string", "description": "Model id, e.g. gpt-6-luna."},
                    "status": {"type": "string", "enum": ["success", "error"]},
                    "labels": labels_argument(),
                    "limit": limit_argument(),
                    "cursor": cursor_argument(),
                },
                "additionalProperties": false,
            }),
            output_schema: rows::page_schema(rows::request_schema()),
        },
        ToolDef {
            name: "get_request",
            title: "One request row",
            description: "One request row by request_id, among the calls read recently \
                          (search_requests first).",
            input_schema: json!({
                "type": "object",
                "properties": {"request_id": {"type": "string"}},
                "required": ["request_id"],
                "additionalProperties": false,
            }),
            output_schema: rows::request_schema(),
        },
        ToolDef {
            name: "list_traces",
            title: "Trace aggregates",
            description: "Trace aggregates in [start, end). costwatch groups calls by session, \
                          so this lists none: use list_sessions.",
            input_schema: window_listing(),
            output_schema: rows::object(json!({
                "data": {"type": "array", "items": {"type": "object"}},
                "next_cursor": {"type": ["string", "null"]},
                "note": {"type": "string"},
            })),
        },
    ]
}

/// The calls `get_request` can answer from, oldest forgotten first.
#[derive(Default)]
struct Recent {
    by_id: HashMap<String, LabelledCall>,
    order: VecDeque<String>,
}

impl Recent {
    fn remember(&mut self, calls: &[LabelledCall]) {
        for c in calls {
            let id = &c.call.request_id;
            if self.by_id.insert(id.clone(), c.clone()).is_none() {
                self.order.push_back(id.clone());
            }
        }
        while self.order.len() > RECENT_CALLS {
            if let Some(old) = self.order.pop_front() {
                self.by_id.remove(&old);
            }
        }
    }
}

/// A future of [`WindowCalls::calls_of`].
type CallsFuture<'a> =
    std::pin::Pin<Box<dyn Future<Output = Result<Vec<RequestRecord>, SourceError>> + Send + 'a>>;

/// The source the windows are read through, asked for the calls it kept of
/// one session ([`Source::session_requests`]), behind a pointer.
pub trait WindowCalls: Send + Sync {
    /// The calls of `session_id` the last window read.
    fn calls_of<'a>(&'a self, session_id: &'a str) -> CallsFuture<'a>;
}

impl<S: Source> WindowCalls for S {
    fn calls_of<'a>(&'a self, session_id: &'a str) -> CallsFuture<'a> {
        Box::pin(self.session_requests(session_id))
    }
}

/// A future of [`KnownSessions::span_of`].
type SpanFuture<'a> =
    std::pin::Pin<Box<dyn Future<Output = Result<Option<Window>, StoreError>> + Send + 'a>>;

/// Where costwatch found something on a session: the state database's
/// findings, so a session asked for without a range is read where it was.
pub trait KnownSessions: Send + Sync {
    /// The windows with a finding on `session_id`, first to last.
    fn span_of<'a>(&'a self, session_id: &'a str) -> SpanFuture<'a>;
}

impl<T: Inspect> KnownSessions for T {
    fn span_of<'a>(&'a self, session_id: &'a str) -> SpanFuture<'a> {
        Box::pin(self.session_span(session_id))
    }
}

/// The request-log tools over a source.
pub struct LogTools<S> {
    source: S,
    window_source: Option<Arc<dyn WindowCalls>>,
    known: Option<Arc<dyn KnownSessions>>,
    clock: Arc<dyn Clock>,
    allowlist: Option<Vec<String>>,
    recent: Mutex<Recent>,
}

impl<S> std::fmt::Debug for LogTools<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogTools")
            .field("allowlist", &self.allowlist)
            .finish_non_exhaustive()
    }
}

impl<S: Source> LogTools<S> {
    /// The tools over `source`, an instance of their own (see the module
    /// docs), reading "now" from `clock`.
    pub fn new(source: S, clock: Arc<dyn Clock>) -> LogTools<S> {
        LogTools {
            source,
            window_source: None,
            known: None,
            clock,
            allowlist: None,
            recent: Mutex::new(Recent::default()),
        }
    }

    /// Answers one session's calls from what `pipeline` (the source the
    /// windows are read through) kept of the last window, when it holds
    /// the session.
    pub fn with_window_source(mut self, pipeline: Arc<dyn WindowCalls>) -> LogTools<S> {
        self.window_source = Some(pipeline);
        self
    }

    /// Reads a session asked for without a range around the windows
    /// `known` found something on it in.
    pub fn with_known_sessions(mut self, known: Arc<dyn KnownSessions>) -> LogTools<S> {
        self.known = Some(known);
        self
    }

    /// Lists and calls only `allowlist`'s tools, in its order (the
    /// investigation's `investigation.tools`).
    pub fn allowlisted(mut self, allowlist: Vec<String>) -> LogTools<S> {
        self.allowlist = Some(allowlist);
        self
    }

    /// Runs tool `name` with `arguments` (a JSON object or null).
    pub async fn call(&self, name: &str, arguments: &Value) -> Result<Answer, SourceError> {
        let empty = Map::new();
        let map = match arguments {
            Value::Null => &empty,
            Value::Object(m) => m,
            _ => return Ok(Answer::Refused("arguments: expected a JSON object".into())),
        };
        let a = Args(map);
        match name {
            "list_sessions" => self.list_sessions(&a).await,
            "search_requests" => self.search_requests(&a).await,
            "get_request" => Ok(self.get_request(&a).into()),
            "list_traces" => Ok(list_traces(&a).into()),
            other => Ok(Answer::Refused(format!(
                "unknown tool `{other}`; tools: {}",
                LOG_TOOLS.join(", ")
            ))),
        }
    }

    async fn list_sessions(&self, a: &Args<'_>) -> Result<Answer, SourceError> {
        let checked = (|| {
            a.only(&["start", "end", "labels", "limit", "cursor"])?;
            let range = a
                .range(LONGEST_RANGE)?
                .ok_or("start and end are required")?;
            let fp = a.fingerprint("list_sessions");
            Ok::<_, String>((range, a.labels()?, a.limit()?, a.position(fp)?, fp))
        })();
        let (range, labels, limit, from, fp) = match checked {
            Ok(c) => c,
            Err(why) => return Ok(Answer::Refused(why)),
        };
        let mut sessions = Vec::new();
        let mut more = false;
        self.source
            .sessions(range, |s| {
                if !has_labels(&s.labels, &labels) {
                    return;
                }
                if sessions.len() < MAX_SESSIONS {
                    sessions.push(s);
                } else {
                    more = true;
                }
            })
            .await?;
        if more {
            return Ok(Answer::Refused(format!(
                "more than {MAX_SESSIONS} sessions in the range; ask for a shorter one or filter by labels"
            )));
        }
        let rows = sessions.iter().map(rows::session).collect();
        Ok(Answer::Done(page(rows, from, limit, fp)))
    }

    async fn search_requests(&self, a: &Args<'_>) -> Result<Answer, SourceError> {
        let checked = (|| {
            a.only(&[
                "start",
                "end",
                "session_id",
                "model",
                "status",
                "labels",
                "limit",
                "cursor",
            ])?;
            let session_id = a.optional_str("session_id")?.filter(|s| !s.is_empty());
            let longest = match session_id {
                Some(_) => LONGEST_SESSION_RANGE,
                None => LONGEST_RANGE,
            };
            let range = a.range(longest)?;
            if session_id.is_none() && range.is_none() {
                return Err("give session_id, or start and end".to_owned());
            }
            let model = a.optional_str("model")?;
            let status = a.choice("status", &["success", "error"])?;
            let fp = a.fingerprint("search_requests");
            Ok::<_, String>((
                session_id,
                range,
                model,
                status,
                a.labels()?,
                a.limit()?,
                a.position(fp)?,
                fp,
            ))
        })();
        let (session_id, range, model, status, labels, limit, from, fp) = match checked {
            Ok(c) => c,
            Err(why) => return Ok(Answer::Refused(why)),
        };
        let found = self.find(session_id, range).await?;
        if found.more {
            return Ok(Answer::Refused(format!(
                "more than {MAX_CALLS} calls match; give session_id or a shorter range"
            )));
        }
        let calls: Vec<LabelledCall> = found
            .calls
            .into_iter()
            .filter(|c| model.is_none_or(|m| c.call.model == m))
            .filter(|c| status.is_none_or(|s| rows::status(c.call.status) == s))
            .filter(|c| has_labels(&c.labels, &labels))
            .collect();
        let shown: Vec<LabelledCall> = calls.iter().skip(from).take(limit).cloned().collect();
        self.recent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remember(&shown);
        let rows = calls.iter().map(rows::request).collect();
        Ok(Answer::Done(page(rows, from, limit, fp)))
    }

    /// The calls of `session_id` and/or `range`: the window's first.
    async fn find(
        &self,
        session_id: Option<&str>,
        range: Option<Window>,
    ) -> Result<FoundCalls, SourceError> {
        if let (Some(id), None, Some(pipeline)) = (session_id, range, &self.window_source)
            && let Ok(calls) = pipeline.calls_of(id).await
        {
            let calls: Vec<LabelledCall> = calls
                .into_iter()
                .map(|call| LabelledCall {
                    call,
                    labels: Labels::new(),
                })
                .collect();
            return Ok(FoundCalls { calls, more: false });
        }
        let range = match (range, session_id) {
            (Some(range), _) => range,
            (None, Some(id)) => self.session_range(id).await,
            (None, None) => {
                let now = self.clock.now();
                Window {
                    start: now - LONGEST_RANGE,
                    end: now,
                }
            }
        };
        let query = RequestQuery {
            session_id: session_id.map(str::to_owned),
            range,
            max_calls: MAX_CALLS,
        };
        self.source.requests(&query).await
    }

    /// Where a session asked for without a range is read: a day either
    /// side of the windows with a finding on it (their last
    /// [`LONGEST_SESSION_RANGE`] at the most), or the last
    /// [`LONGEST_SESSION_RANGE`] when nothing was found on it, whichever
    /// transport asks.
    async fn session_range(&self, session_id: &str) -> Window {
        let day = TimeDelta::days(1);
        let found = match &self.known {
            Some(known) => known.span_of(session_id).await.ok().flatten(),
            None => None,
        };
        match found {
            Some(span) => {
                let end = span.end + day;
                Window {
                    start: (span.start - day).max(end - LONGEST_SESSION_RANGE),
                    end,
                }
            }
            None => {
                let now = self.clock.now();
                Window {
                    start: now - LONGEST_SESSION_RANGE,
                    end: now,
                }
            }
        }
    }

    fn get_request(&self, a: &Args<'_>) -> Result<Value, String> {
        a.only(&["request_id"])?;
        let id = a.required_str("request_id")?;
        let recent = self.recent.lock().unwrap_or_else(PoisonError::into_inner);
        match recent.by_id.get(id) {
            Some(c) => Ok(rows::request(c)),
            None => Err(format!(
                "request_id: `{id}` is not among the calls read recently; \
                 call search_requests with its session_id first"
            )),
        }
    }
}

/// `list_traces`: checked like any listing; costwatch keeps no traces.
fn list_traces(a: &Args<'_>) -> Result<Value, String> {
    a.only(&["start", "end", "labels", "limit", "cursor"])?;
    a.range(LONGEST_RANGE)?
        .ok_or("start and end are required")?;
    a.labels()?;
    a.limit()?;
    Ok(json!({
        "data": [],
        "next_cursor": null,
        "note": "costwatch groups calls by session and keeps no traces: use list_sessions",
    }))
}

/// Whether `labels` has every pair of `wanted`.
fn has_labels(labels: &Labels, wanted: &[(String, String)]) -> bool {
    wanted.iter().all(|(k, v)| labels.get(k) == Some(v))
}

impl<S: Source> ToolProvider for LogTools<S> {
    /// The tools, or the allowlisted ones in allowlist order.
    async fn list_tools(&self) -> Result<Vec<ToolSpec>, InvestigateError> {
        let defs = log_tool_defs();
        Ok(match &self.allowlist {
            None => defs.iter().map(ToolDef::spec).collect(),
            Some(allow) => allow
                .iter()
                .filter_map(|name| defs.iter().find(|d| d.name == name))
                .map(ToolDef::spec)
                .collect(),
        })
    }

    /// Calls an allowlisted tool; any other name is refused.
    async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
    ) -> Result<ToolOutput, InvestigateError> {
        if let Some(allow) = &self.allowlist
            && !allow.iter().any(|a| a == name)
        {
            tracing::warn!(tool = %crate::printable::printable(name), "refused a tool outside the allowlist");
            return Err(InvestigateError::Rejected(format!(
                "tool `{name}` is not allowed; allowed tools: {}",
                allow.join(", ")
            )));
        }
        match self.call(name, &arguments).await {
            Ok(answer) => Ok(ToolOutput {
                text: answer.text(),
                is_error: answer.is_error(),
            }),
            Err(e) if e.is_retryable() => Err(InvestigateError::Transient(e.to_string())),
            Err(e) => Err(InvestigateError::Rejected(e.to_string())),
        }
    }
}

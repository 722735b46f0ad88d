//! Spans into call rows: which spans are model calls, and each call's
//! session, model, tokens, outcome and labels.

use super::attrs::{self, Attrs};
use super::settings::{AttrRef, SessionFallback, SpanMapping};
use super::usage::usage;
use crate::limits::{MAX_ID_BYTES, MAX_LABEL_KEY_BYTES, MAX_LABELS};
use crate::source::rows::CallRow;
use crate::source::{Labels, RequestStatus};
use chrono::{DateTime, Utc};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::common::v1::{InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use std::sync::Arc;

/// `gen_ai.operation.name` values of model calls.
const CALL_OPERATIONS: &[&str] = &["chat", "text_completion", "generate_content"];

/// OpenLLMetry's `llm.request.type` values of model calls, read when a
/// span has no `gen_ai.operation.name`.
const LEGACY_CALL_TYPES: &[&str] = &["chat", "completion"];

/// Longest label value kept, in characters; longer values are cut.
const MAX_LABEL_CHARS: usize = 256;

/// Longest `error_type` kept, in characters.
const MAX_ERROR_CHARS: usize = 200;

/// One GenAI call span, mapped.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanCall {
    /// The span's trace id, lowercase hex.
    pub trace_id: String,
    /// The call; `request_id` is the span id, lowercase hex.
    pub row: CallRow,
    /// Whether `row.session_id` is the span's own conversation id
    /// (`gen_ai.conversation.id` or `session.id`) rather than the fallback:
    /// a conversation id seen on another span of the trace takes the
    /// fallback's place.
    pub conversation: bool,
}

/// What a request's spans gave.
#[derive(Debug, Default)]
pub struct Mapped {
    /// The model-call spans that became calls, in the request's order.
    pub calls: Vec<SpanCall>,
    /// Model-call spans that could not be used.
    pub rejected: u64,
    /// Why the first of them was rejected (`span 4bf92f3577b34da6: ...`).
    pub first_rejection: Option<String>,
    /// Calls kept that carry no token counts and did not fail (counted as
    /// 0 tokens).
    pub without_usage: u64,
    /// Spans that are not model calls (tools, agents, embeddings, HTTP,
    /// ...), dropped.
    pub other_spans: u64,
    /// `(trace id, conversation id)` of every span that carries a
    /// conversation id, model call or not, first per trace: the official
    /// OpenAI instrumentation writes it on the `invoke_agent` span around
    /// the calls, not on the calls.
    pub conversations: Vec<(String, String)>,
}

/// Maps every span of `req`: GenAI model-call spans become calls; other
/// spans are counted in `other_spans` and dropped (not rejected);
/// model-call spans that cannot be used (no model, no/invalid span id, a
/// start time outside [accept_from, accept_until]) are rejected with a
/// reason.
pub fn map_spans(
    req: &ExportTraceServiceRequest,
    mapping: &SpanMapping,
    accept_from: DateTime<Utc>,
    accept_until: DateTime<Utc>,
) -> Mapped {
    let mut out = Mapped::default();
    let mut traces_named = std::collections::HashSet::new();
    for rs in &req.resource_spans {
        let resource = Attrs(rs.resource.as_ref().map_or(&[][..], |r| &r.attributes));
        let from_resource = if mapping.resource_labels {
            resource_labels(resource.0)
        } else {
            Labels::new()
        };
        for ss in &rs.scope_spans {
            let ctx = Context {
                mapping,
                resource,
                resource_labels: &from_resource,
                accept: (accept_from, accept_until),
                scope: ss.scope.as_ref().filter(|s| !s.name.is_empty()),
                keys: Default::default(),
            };
            ctx.map_scope(&ss.spans, &mut out, &mut traces_named);
        }
    }
    out
}

/// The call rows' [`instrumentation`](CallRow::instrumentation) of a
/// span of `scope`: `[scope name, scope version, provider, server.address,
/// model]` as JSON, each cut to [`MAX_LABEL_CHARS`]. An instrumentation
/// that writes a cache-read count only when it is above 0 does so for
/// every service it runs in; what may differ is whether the provider
/// behind an endpoint returns the count for a model, so a key names the
/// instrumentation and that endpoint's model, not the service.
fn instrumentation(
    scope: &InstrumentationScope,
    provider: &str,
    server: &str,
    model: &str,
) -> String {
    let parts = [
        scope.name.as_str(),
        scope.version.as_str(),
        provider,
        server,
        model,
    ]
    .map(|p| attrs::bounded(p, MAX_LABEL_CHARS));
    serde_json::to_string(&parts).unwrap_or_default()
}

impl Context<'_> {
    /// Maps one scope's spans into `out`.
    fn map_scope(
        &self,
        spans: &[Span],
        out: &mut Mapped,
        traces_named: &mut std::collections::HashSet<String>,
    ) {
        for span in spans {
            if let Some(found) = conversation_of(span)
                && traces_named.insert(found.0.clone())
            {
                out.conversations.push(found);
            }
            if !is_model_call(Attrs(&span.attributes)) {
                out.other_spans += 1;
                continue;
            }
            match self.call(span) {
                Ok((call, reported)) => {
                    if !reported && call.row.status == RequestStatus::Success {
                        out.without_usage += 1;
                    }
                    out.calls.push(call);
                }
                Err(reason) => {
                    out.rejected += 1;
                    if out.first_rejection.is_none() {
                        out.first_rejection = Some(format!("{}: {reason}", name(span)));
                    }
                }
            }
        }
    }
}

/// The trace and conversation id of a span that carries one (and valid
/// ids of bounded length).
fn conversation_of(span: &Span) -> Option<(String, String)> {
    let id = Attrs(&span.attributes).text("gen_ai.conversation.id")?;
    if id.is_empty() || id.len() > MAX_ID_BYTES {
        return None;
    }
    let trace = id_hex(&span.trace_id, 16, "trace id").ok()?;
    Some((trace, id))
}

/// Whether a span is a model call: `gen_ai.operation.name` is one, or,
/// without it, OpenLLMetry's `llm.request.type` is.
fn is_model_call(attrs: Attrs<'_>) -> bool {
    match attrs.str("gen_ai.operation.name") {
        Some(op) => CALL_OPERATIONS.contains(&op),
        None => attrs
            .str("llm.request.type")
            .is_some_and(|t| LEGACY_CALL_TYPES.contains(&t)),
    }
}

/// What every span of one resource is mapped with.
struct Context<'a> {
    mapping: &'a SpanMapping,
    resource: Attrs<'a>,
    resource_labels: &'a Labels,
    accept: (DateTime<Utc>, DateTime<Utc>),
    /// The instrumentation scope, where it has a name (nothing else tells
    /// one instrumentation from another).
    scope: Option<&'a InstrumentationScope>,
    /// The scope's [`instrumentation`] keys made so far, shared by the
    /// calls that have them.
    keys: std::cell::RefCell<std::collections::HashMap<String, Arc<str>>>,
}

impl Context<'_> {
    /// One model-call span as a call, and whether it reported usage; the
    /// error says why it cannot be used.
    fn call(&self, span: &Span) -> Result<(SpanCall, bool), String> {
        let attrs = Attrs(&span.attributes);
        let span_id = id_hex(&span.span_id, 8, "span id")?;
        let trace_id = id_hex(&span.trace_id, 16, "trace id")?;
        let created_at = self.start(span)?;
        let model = attrs
            .text("gen_ai.response.model")
            .or_else(|| attrs.text("gen_ai.request.model"))
            .ok_or("no gen_ai.request.model or gen_ai.response.model")?;
        at_most("model", &model)?;
        let used = usage(attrs, self.mapping.input_tokens)?;
        let (session_id, conversation) = self.session(attrs, &trace_id)?;
        let (status, http_status, error_type) = outcome(span, attrs);
        let provider = attrs
            .text("gen_ai.provider.name")
            .or_else(|| attrs.text("gen_ai.system"));
        let instrumentation = self.scope.map(|scope| {
            let server = attrs.str("server.address").unwrap_or_default();
            let key = instrumentation(
                scope,
                provider.as_deref().unwrap_or_default(),
                server,
                &model,
            );
            let mut keys = self.keys.borrow_mut();
            keys.entry(key)
                .or_insert_with_key(|k| Arc::from(k.as_str()))
                .clone()
        });
        let row = CallRow {
            request_id: span_id,
            session_id,
            created_at,
            model,
            status,
            http_status,
            error_type,
            input_tokens: used.input,
            cached_tokens: used.cache_read,
            cache_reported: used.cache_read_reported,
            instrumentation,
            cache_write_tokens: used.cache_write,
            output_tokens: used.output,
            cost_usd: None,
            labels: self.labels(attrs),
            provider,
        };
        Ok((
            SpanCall {
                trace_id,
                row,
                conversation,
            },
            used.reported,
        ))
    }

    /// The span's start time, within the accepted range.
    fn start(&self, span: &Span) -> Result<DateTime<Utc>, String> {
        let nanos = span.start_time_unix_nano;
        if nanos == 0 {
            return Err("no start time".to_owned());
        }
        let at = i64::try_from(nanos)
            .map(DateTime::from_timestamp_nanos)
            .map_err(|_| format!("start time {nanos} is out of range"))?;
        let (from, until) = self.accept;
        if at < from || at > until {
            return Err(format!(
                "start time {} is outside the accepted range {} to {}",
                at.to_rfc3339(),
                from.to_rfc3339(),
                until.to_rfc3339()
            ));
        }
        Ok(at)
    }

    /// The session: `gen_ai.conversation.id`, else `session.id` (the
    /// span's own: `true`), else the fallback (`false`).
    fn session(&self, attrs: Attrs<'_>, trace_id: &str) -> Result<(Option<String>, bool), String> {
        let (field, id, own) = if let Some(id) = attrs.text("gen_ai.conversation.id") {
            ("gen_ai.conversation.id".to_owned(), Some(id), true)
        } else if let Some(id) = attrs.text("session.id") {
            ("session.id".to_owned(), Some(id), true)
        } else {
            match &self.mapping.fallback {
                SessionFallback::Trace => ("trace id".to_owned(), Some(trace_id.to_owned()), false),
                SessionFallback::Attr(a) => (a.to_string(), self.value(attrs, a), false),
                SessionFallback::None => (String::new(), None, false),
            }
        };
        if let Some(id) = &id {
            at_most(&field, id)?;
        }
        Ok((id, own))
    }

    /// The attribute `a` names, as text.
    fn value(&self, span: Attrs<'_>, a: &AttrRef) -> Option<String> {
        match a {
            AttrRef::Span(k) => span.text(k),
            AttrRef::Resource(k) => self.resource.text(k),
        }
    }

    /// The configured labels, then the resource's up to the limit.
    fn labels(&self, span: Attrs<'_>) -> Labels {
        let mut labels = Labels::new();
        for (name, a) in &self.mapping.labels {
            if let Some(v) = self.value(span, a) {
                labels.insert(name.clone(), attrs::bounded(&v, MAX_LABEL_CHARS));
            }
        }
        for (k, v) in self.resource_labels {
            if labels.len() >= MAX_LABELS {
                break;
            }
            if !self.mapping.labels.contains_key(k) {
                labels.insert(k.clone(), v.clone());
            }
        }
        labels
    }
}

/// Every non-empty string attribute of the resource under its own name,
/// values cut to [`MAX_LABEL_CHARS`], at most [`MAX_LABELS`] of them.
fn resource_labels(resource: &[KeyValue]) -> Labels {
    let mut labels = Labels::new();
    for kv in resource {
        if labels.len() >= MAX_LABELS {
            break;
        }
        if kv.key.is_empty() || kv.key.len() > MAX_LABEL_KEY_BYTES || labels.contains_key(&kv.key) {
            continue;
        }
        if let Some(Value::StringValue(s)) = kv.value.as_ref().and_then(|v| v.value.as_ref())
            && !s.is_empty()
        {
            labels.insert(kv.key.clone(), attrs::bounded(s, MAX_LABEL_CHARS));
        }
    }
    labels
}

/// Whether the call failed, its HTTP status and its kind of failure.
fn outcome(span: &Span, attrs: Attrs<'_>) -> (RequestStatus, Option<u16>, Option<String>) {
    let http = attrs
        .int("http.response.status_code")
        .and_then(|n| u16::try_from(n).ok())
        .filter(|n| (100..=599).contains(n));
    let failed = span
        .status
        .as_ref()
        .is_some_and(|s| s.code == StatusCode::Error as i32);
    if !failed {
        return (RequestStatus::Success, http, None);
    }
    let error_type = attrs
        .text("error.type")
        .map(|t| python_class(&t).to_owned())
        .or_else(|| {
            span.status
                .as_ref()
                .map(|s| s.message.clone())
                .filter(|m| !m.is_empty())
        })
        .map(|e| attrs::bounded(&e, MAX_ERROR_CHARS));
    let from_type = attrs
        .text("error.type")
        .filter(|t| t.len() == 3 && t.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|t| t.parse::<u16>().ok())
        .filter(|n| (100..=599).contains(n));
    let from_message = span
        .status
        .as_ref()
        .and_then(|s| status_in_message(&s.message));
    (
        RequestStatus::Error,
        http.or(from_type).or(from_message),
        error_type,
    )
}

/// `openai.RateLimitError` from `<class 'openai.RateLimitError'>`: the
/// official OpenAI instrumentation (2.4b0) passes the exception's class
/// where the conventions want its name, and the SDK writes its `str()`.
fn python_class(t: &str) -> &str {
    t.strip_prefix("<class '")
        .and_then(|r| r.strip_suffix("'>"))
        .unwrap_or(t)
}

/// The HTTP status in the OpenAI Python SDK's error message, which the
/// status message carries when no attribute does:
/// `Error code: 429 - {'error': ...}`.
fn status_in_message(message: &str) -> Option<u16> {
    let rest = message.strip_prefix("Error code: ")?;
    let digits = rest.get(..3)?;
    let after = rest.get(3..)?;
    (digits.bytes().all(|b| b.is_ascii_digit()) && (after.is_empty() || after.starts_with(' ')))
        .then(|| digits.parse::<u16>().ok())
        .flatten()
        .filter(|n| (100..=599).contains(n))
}

/// A trace or span id as lowercase hex: `len` bytes, not all zero.
fn id_hex(id: &[u8], len: usize, what: &str) -> Result<String, String> {
    if id.is_empty() {
        return Err(format!("no {what}"));
    }
    if id.len() != len {
        return Err(format!("{what} is {} bytes, not {len}", id.len()));
    }
    if id.iter().all(|b| *b == 0) {
        return Err(format!("{what} is all zeros"));
    }
    Ok(hex::encode(id))
}

/// An id-like value of at most [`MAX_ID_BYTES`] bytes.
fn at_most(field: &str, value: &str) -> Result<(), String> {
    if value.len() > MAX_ID_BYTES {
        return Err(format!(
            "{field} is {} bytes, above the limit of {MAX_ID_BYTES}",
            value.len()
        ));
    }
    Ok(())
}

/// How a rejection names a span: its id, else its name.
fn name(span: &Span) -> String {
    if span.span_id.len() == 8 {
        format!("span {}", hex::encode(&span.span_id))
    } else if !span.name.is_empty() {
        format!("span \"{}\"", attrs::shorten(&span.name))
    } else {
        "a span without an id".to_owned()
    }
}

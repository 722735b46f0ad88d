//! A call as the CLIENT span the OpenAI instrumentation writes, its session
//! as the resource of the process that made it, and the order in which a
//! fleet of exporters hands the spans over (see the module documentation of
//! [`super`] for the sources).

use crate::cursor::fnv1a;
use crate::dataset::{Dataset, SimRequest};
use crate::langfuse::status_message;
use chrono::{DateTime, Duration, Utc};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, Status};
use std::collections::{BTreeMap, HashMap};

/// The instrumentation scope of every span: the module that asks for its
/// tracer (`get_tracer(__name__, "")`).
pub const SCOPE_NAME: &str = "opentelemetry.instrumentation.openai_v2";

/// The schema the instrumentation's tracer names.
pub const SCHEMA_URL: &str = "https://opentelemetry.io/schemas/1.30.0";

/// The host the instrumented clients call (their `base_url`): the gateway.
pub const SERVER_ADDRESS: &str = "llm-gateway.internal";

/// The port of [`SERVER_ADDRESS`]; the instrumentation leaves out 443 only.
pub const SERVER_PORT: i64 = 8443;

/// `service.name` of a session without a `feature` label.
pub const DEFAULT_SERVICE: &str = "agent";

/// How many spans of one session go out before the next session's turn.
const TURN: usize = 3;

/// How long spans wait to be exported: the batch span processor's default
/// schedule delay (`OTEL_BSP_SCHEDULE_DELAY`, 5000 ms). Spans that ended
/// within one such stretch go out together, sessions taking turns.
const HORIZON: Duration = Duration::seconds(5);

/// A resource's attributes, as names and string values.
type Attributes = [(String, String)];

/// Resource attributes every process carries besides its labels.
const SDK_ATTRIBUTES: [(&str, &str); 2] = [
    ("telemetry.sdk.name", "opentelemetry"),
    ("telemetry.sdk.language", "python"),
];

/// The trace of a session: 16 bytes derived from its id, the same trace the
/// Langfuse stand-in gives it ([`crate::langfuse::trace_id_of`]).
pub fn trace_id(session_id: &str) -> [u8; 16] {
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&fnv1a(&["trace", session_id]).to_be_bytes());
    id[8..].copy_from_slice(&fnv1a(&["trace-low", session_id]).to_be_bytes());
    id
}

/// The span of a call: the 16 hex digits of a `req_<16 hex>` id as bytes
/// (unique as the ids are), else 8 bytes hashed from the id; never all zero,
/// which OTLP reserves for "no span".
pub fn span_id(request_id: &str) -> [u8; 8] {
    let parsed = request_id
        .strip_prefix("req_")
        .filter(|hex| hex.len() == 16)
        .and_then(|hex| u64::from_str_radix(hex, 16).ok());
    let id = parsed.unwrap_or_else(|| fnv1a(&["span", request_id]));
    if id == 0 { 1 } else { id }.to_be_bytes()
}

/// The resource attributes of a process serving a session with `labels`:
/// `service.name` (the `feature` label, else [`DEFAULT_SERVICE`]), every
/// label under its own name, and the SDK's own attributes. A label named
/// like one of those is not repeated.
pub fn resource_attributes(labels: &BTreeMap<String, String>) -> Vec<(String, String)> {
    let service = labels
        .get("feature")
        .map_or(DEFAULT_SERVICE, String::as_str);
    let fixed = |k: &str| k == "service.name" || SDK_ATTRIBUTES.iter().any(|(s, _)| *s == k);
    let mut attrs = vec![("service.name".to_owned(), service.to_owned())];
    attrs.extend(
        labels
            .iter()
            .filter(|(k, _)| !fixed(k))
            .map(|(k, v)| (k.clone(), v.clone())),
    );
    attrs.extend(
        SDK_ATTRIBUTES
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    attrs
}

/// Every call of `dataset` created in `[from, to)` as one span, in export
/// requests of at most `spans_per_request` spans (at least one), in the
/// order a fleet of exporters sends them (see [`super`]).
pub fn export_requests(
    dataset: &Dataset,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    spans_per_request: usize,
) -> Vec<ExportTraceServiceRequest> {
    let calls = dataset.requests_in(from, to, &[], None);
    let mut resources: HashMap<&str, Vec<(String, String)>> = HashMap::new();
    for r in &calls {
        resources.entry(&r.session_id).or_insert_with(|| {
            let labels = dataset
                .session(&r.session_id)
                .map_or(&r.labels, |s| &s.labels);
            resource_attributes(labels)
        });
    }
    send_order(calls)
        .chunks(spans_per_request.max(1))
        .map(|chunk| request_of(chunk, &resources))
        .collect()
}

/// The calls as the exporters hand them over: in the order they ended,
/// cut at every [`HORIZON`] (a batch span processor exports what ended
/// since its last export); within one horizon, each session's spans in
/// the order they ended, sessions taking turns of [`TURN`] spans in an
/// order hashed from their ids.
fn send_order(calls: Vec<&SimRequest>) -> Vec<&SimRequest> {
    let mut by_horizon: BTreeMap<i64, Vec<&SimRequest>> = BTreeMap::new();
    let horizon_ms = HORIZON.num_milliseconds().max(1);
    for r in calls {
        let slot = end_of(r).timestamp_millis().div_euclid(horizon_ms);
        by_horizon.entry(slot).or_default().push(r);
    }
    by_horizon.into_values().flat_map(taking_turns).collect()
}

/// Calls that ended within one horizon, each session's in the order they
/// ended, sessions taking turns of [`TURN`] spans in an order hashed from
/// their ids.
fn taking_turns(calls: Vec<&SimRequest>) -> Vec<&SimRequest> {
    let mut by_session: BTreeMap<(u64, &str), Vec<&SimRequest>> = BTreeMap::new();
    for r in calls {
        let key = (fnv1a(&["otlp-order", &r.session_id]), r.session_id.as_str());
        by_session.entry(key).or_default().push(r);
    }
    let mut queues: Vec<std::vec::IntoIter<&SimRequest>> = by_session
        .into_values()
        .map(|mut spans| {
            spans.sort_by(|a, b| (end_of(a), &a.request_id).cmp(&(end_of(b), &b.request_id)));
            spans.into_iter()
        })
        .collect();
    let mut order = Vec::new();
    while !queues.is_empty() {
        for q in &mut queues {
            order.extend(q.by_ref().take(TURN));
        }
        queues.retain(|q| q.len() > 0);
    }
    order
}

/// One export request: the spans grouped by resource, in the order each
/// resource first appears.
fn request_of(
    calls: &[&SimRequest],
    resources: &HashMap<&str, Vec<(String, String)>>,
) -> ExportTraceServiceRequest {
    let mut groups: Vec<(&Attributes, Vec<Span>)> = Vec::new();
    for r in calls {
        let attrs = resources
            .get(r.session_id.as_str())
            .map_or(&[][..], Vec::as_slice);
        let span = span_of(r);
        match groups.iter_mut().find(|(a, _)| *a == attrs) {
            Some((_, spans)) => spans.push(span),
            None => groups.push((attrs, vec![span])),
        }
    }
    let resource_spans = groups
        .into_iter()
        .map(|(attrs, spans)| ResourceSpans {
            resource: Some(Resource {
                attributes: attrs.iter().map(|(k, v)| string_kv(k, v)).collect(),
                ..Resource::default()
            }),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: SCOPE_NAME.to_owned(),
                    ..InstrumentationScope::default()
                }),
                spans,
                schema_url: SCHEMA_URL.to_owned(),
            }],
            schema_url: String::new(),
        })
        .collect();
    ExportTraceServiceRequest { resource_spans }
}

/// When the call ended: its start plus its latency.
fn end_of(r: &SimRequest) -> DateTime<Utc> {
    r.created_at + Duration::milliseconds(i64::try_from(r.latency_ms).unwrap_or(i64::MAX / 2))
}

/// Nanoseconds since the epoch (0 before it or past 2262).
fn unix_nanos(t: DateTime<Utc>) -> u64 {
    t.timestamp_nanos_opt()
        .and_then(|n| u64::try_from(n).ok())
        .unwrap_or(0)
}

/// The span of one call.
pub(super) fn span_of(r: &SimRequest) -> Span {
    let mut attrs = vec![
        string_kv("gen_ai.operation.name", "chat"),
        string_kv("gen_ai.request.model", &r.model),
        string_kv("gen_ai.provider.name", "openai"),
        string_kv("gen_ai.system", "openai"),
        string_kv("server.address", SERVER_ADDRESS),
        int_kv("server.port", SERVER_PORT),
    ];
    let status = if r.is_error() {
        let error_type = match (&r.error_type, r.http_status) {
            (Some(kind), _) => kind.clone(),
            (None, 0) => "_OTHER".to_owned(),
            (None, status) => status.to_string(),
        };
        attrs.push(string_kv("error.type", &error_type));
        if r.http_status != 0 {
            attrs.push(int_kv(
                "http.response.status_code",
                i64::from(r.http_status),
            ));
        }
        Status {
            message: status_message(r),
            code: StatusCode::Error as i32,
        }
    } else {
        attrs.push(string_kv("gen_ai.response.model", &r.model));
        attrs.push(string_kv("gen_ai.response.id", &r.request_id));
        attrs.push(int_kv("gen_ai.usage.input_tokens", tokens(r.input_tokens)));
        attrs.push(int_kv(
            "gen_ai.usage.output_tokens",
            tokens(r.output_tokens),
        ));
        // Written whenever the API reports it, 0 included, as the
        // instrumentation's `response_extractors.py` does.
        attrs.push(int_kv(
            "gen_ai.usage.cache_read.input_tokens",
            tokens(r.cached_tokens),
        ));
        if r.cache_write_tokens > 0 {
            attrs.push(int_kv(
                "gen_ai.usage.cache_creation.input_tokens",
                tokens(r.cache_write_tokens),
            ));
        }
        Status::default()
    };
    attrs.push(string_kv("gen_ai.conversation.id", &r.session_id));
    Span {
        trace_id: trace_id(&r.session_id).to_vec(),
        span_id: span_id(&r.request_id).to_vec(),
        name: format!("chat {}", r.model),
        kind: SpanKind::Client as i32,
        start_time_unix_nano: unix_nanos(r.created_at),
        end_time_unix_nano: unix_nanos(end_of(r)),
        attributes: attrs,
        status: Some(status),
        ..Span::default()
    }
}

fn tokens(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn string_kv(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(Value::StringValue(value.to_owned())),
        }),
        ..KeyValue::default()
    }
}

fn int_kv(key: &str, value: i64) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(Value::IntValue(value)),
        }),
        ..KeyValue::default()
    }
}

/// A span's end in nanoseconds since the epoch, as `DateTime` counts them.
pub(super) fn end_nanos(span: &Span) -> i64 {
    i64::try_from(span.end_time_unix_nano).unwrap_or(i64::MAX)
}

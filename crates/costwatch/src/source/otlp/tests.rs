//! Builders of OTLP requests shared by the tests of decoding, mapping and
//! the files reader.

mod decode;
mod files;
mod map;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, Status};

/// 2024-05-01T12:00:00Z in nanoseconds.
const T0: u64 = 1_714_564_800_000_000_000;

/// One second in nanoseconds.
const SEC: u64 = 1_000_000_000;

fn attr(key: &str, value: Value) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue { value: Some(value) }),
        ..KeyValue::default()
    }
}

fn text(key: &str, value: &str) -> KeyValue {
    attr(key, Value::StringValue(value.to_owned()))
}

fn int(key: &str, value: i64) -> KeyValue {
    attr(key, Value::IntValue(value))
}

/// A span of trace `trace` with span id `id` (both as the last bytes),
/// started `at` seconds after [`T0`].
fn span(trace: u8, id: u8, at: u64, attributes: Vec<KeyValue>) -> Span {
    Span {
        trace_id: [&[0xab; 15][..], &[trace]].concat(),
        span_id: [&[0x4b; 7][..], &[id]].concat(),
        name: "chat".to_owned(),
        start_time_unix_nano: T0 + at * SEC,
        end_time_unix_nano: T0 + at * SEC + SEC,
        attributes,
        ..Span::default()
    }
}

/// A chat span with a request model and input/output tokens.
fn chat(trace: u8, id: u8, at: u64, model: &str, input: i64, output: i64) -> Span {
    span(
        trace,
        id,
        at,
        vec![
            text("gen_ai.operation.name", "chat"),
            text("gen_ai.request.model", model),
            int("gen_ai.usage.input_tokens", input),
            int("gen_ai.usage.output_tokens", output),
        ],
    )
}

/// The span with `more` attributes added.
fn with(mut span: Span, more: Vec<KeyValue>) -> Span {
    span.attributes.extend(more);
    span
}

/// The span with status `ERROR` and `message`.
fn failed(mut span: Span, message: &str) -> Span {
    span.status = Some(Status {
        message: message.to_owned(),
        code: StatusCode::Error as i32,
    });
    span
}

/// One resource with these attributes, sending `spans` in one scope.
fn request(resource: Vec<KeyValue>, spans: Vec<Span>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: resource,
                ..Resource::default()
            }),
            scope_spans: vec![ScopeSpans {
                spans,
                ..ScopeSpans::default()
            }],
            ..ResourceSpans::default()
        }],
    }
}

/// The hex id of span `id` as [`span`] makes it.
fn span_hex(id: u8) -> String {
    format!("4b4b4b4b4b4b4b{id:02x}")
}

/// The hex id of trace `trace` as [`span`] makes it.
fn trace_hex(trace: u8) -> String {
    format!("{}{trace:02x}", "ab".repeat(15))
}

//! Calls as spans (every call of a range once, its figures, failures, the
//! resources, the order), the file exporter's lines and rotation, and the
//! OTLP/HTTP client against a receiver in the test.

use super::*;
use crate::dataset::{Dataset, SimRequest, SimSession, Truth};
use crate::http::{Listening, bearer};
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use chrono::{DateTime, Duration, Utc};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTracePartialSuccess, ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode as SpanStatus;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, Span};
use prost::Message;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

mod files;
mod post;
mod spans;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/seed-window.json");

fn ts(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

fn fixture() -> Dataset {
    Dataset::from_fixture(FIXTURE).unwrap()
}

/// Every span of the requests with the resource attributes it was sent
/// under, in the order sent.
fn flatten(requests: &[ExportTraceServiceRequest]) -> Vec<(BTreeMap<String, String>, Span)> {
    let mut out = Vec::new();
    for request in requests {
        for rs in &request.resource_spans {
            let resource = strings(&rs.resource.as_ref().unwrap().attributes);
            for ss in &rs.scope_spans {
                let scope = ss.scope.as_ref().unwrap();
                assert_eq!(scope.name, SCOPE_NAME);
                assert_eq!(ss.schema_url, SCHEMA_URL);
                for span in &ss.spans {
                    out.push((resource.clone(), span.clone()));
                }
            }
        }
    }
    out
}

fn strings(attrs: &[KeyValue]) -> BTreeMap<String, String> {
    attrs
        .iter()
        .filter_map(|kv| match kv.value.as_ref()?.value.as_ref()? {
            Value::StringValue(s) => Some((kv.key.clone(), s.clone())),
            _ => None,
        })
        .collect()
}

fn attr<'a>(span: &'a Span, key: &str) -> Option<&'a Value> {
    let mut found = span.attributes.iter().filter(|kv| kv.key == key);
    let first = found.next();
    assert!(found.next().is_none(), "{key} twice");
    first.and_then(|kv| kv.value.as_ref()?.value.as_ref())
}

fn str_attr<'a>(span: &'a Span, key: &str) -> Option<&'a str> {
    match attr(span, key)? {
        Value::StringValue(s) => Some(s),
        other => panic!("{key} is not a string: {other:?}"),
    }
}

fn int_attr(span: &Span, key: &str) -> Option<i64> {
    match attr(span, key)? {
        Value::IntValue(n) => Some(*n),
        other => panic!("{key} is not an int: {other:?}"),
    }
}

fn hexs(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn nanos(t: DateTime<Utc>) -> u64 {
    u64::try_from(t.timestamp_nanos_opt().unwrap()).unwrap()
}

fn span_count(requests: &[ExportTraceServiceRequest]) -> usize {
    flatten(requests).len()
}

fn call(
    id: &str,
    session: &str,
    at: &str,
    (status, http, error): (&str, u16, Option<&str>),
    (input, cached, write, output): (u64, u64, u64, u64),
) -> SimRequest {
    SimRequest {
        request_id: id.to_owned(),
        session_id: session.to_owned(),
        created_at: ts(at),
        model: "gpt-6-luna".to_owned(),
        status: status.to_owned(),
        http_status: http,
        error_type: error.map(str::to_owned),
        input_tokens: input,
        cached_tokens: cached,
        cache_write_tokens: write,
        output_tokens: output,
        cost_usd: 0.01,
        latency_ms: 1500,
        labels: BTreeMap::new(),
    }
}

fn session(id: &str, labels: &[(&str, &str)], requests: Vec<SimRequest>) -> SimSession {
    let labels: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    SimSession {
        session_id: id.to_owned(),
        labels: labels.clone(),
        requests: requests
            .into_iter()
            .map(|mut r| {
                r.labels = labels.clone();
                r
            })
            .collect(),
        fixed_row: None,
    }
}

const OK: (&str, u16, Option<&str>) = ("success", 200, None);

/// Two sessions of one feature, one without labels; a cached and an
/// uncached success, a cache write, a rate limit and a bare 500.
fn small() -> Dataset {
    let sessions = vec![
        session(
            "s-a",
            &[("feature", "support"), ("env", "prod")],
            vec![
                call(
                    "req_00000000000000a1",
                    "s-a",
                    "2026-10-11T10:00:00Z",
                    OK,
                    (1200, 0, 0, 80),
                ),
                call(
                    "req_00000000000000a2",
                    "s-a",
                    "2026-10-11T10:00:05Z",
                    OK,
                    (1300, 1024, 0, 90),
                ),
                call(
                    "req_00000000000000a3",
                    "s-a",
                    "2026-10-11T10:00:09Z",
                    ("error", 429, Some("RateLimitError")),
                    (0, 0, 0, 0),
                ),
            ],
        ),
        session(
            "s-b",
            &[("feature", "support"), ("env", "prod")],
            vec![call(
                "req_00000000000000b1",
                "s-b",
                "2026-10-11T10:00:02Z",
                OK,
                (2000, 0, 512, 40),
            )],
        ),
        session(
            "s-c",
            &[],
            vec![call(
                "req_00000000000000c1",
                "s-c",
                "2026-10-11T10:00:03Z",
                ("error", 500, None),
                (0, 0, 0, 0),
            )],
        ),
    ];
    Dataset::new(Vec::new(), sessions, Truth::default())
}

fn small_spans() -> HashMap<String, (BTreeMap<String, String>, Span)> {
    let d = small();
    let requests = export_requests(
        &d,
        ts("2026-10-11T00:00:00Z"),
        ts("2026-10-12T00:00:00Z"),
        100,
    );
    assert_eq!(requests.len(), 1);
    flatten(&requests)
        .into_iter()
        .map(|(res, span)| (hexs(&span.span_id), (res, span)))
        .collect()
}

fn small_span(request_id: &str) -> (BTreeMap<String, String>, Span) {
    small_spans().remove(&hexs(&span_id(request_id))).unwrap()
}

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

#[test]
fn every_call_of_the_range_is_one_span_with_its_figures() {
    let d = fixture();
    let (from, to) = (ts("2026-10-11T11:25:00Z"), ts("2026-10-11T11:30:00Z"));
    let expected = d.requests_in(from, to, &[], None);
    let total = d.request_count();
    assert!(
        expected.len() > 10 && expected.len() < total,
        "the range cuts the fixture"
    );
    let requests = export_requests(&d, from, to, 7);
    assert_eq!(requests.len(), expected.len().div_ceil(7));
    assert!(
        requests
            .iter()
            .all(|r| span_count(std::slice::from_ref(r)) <= 7)
    );

    let mut spans: HashMap<Vec<u8>, (BTreeMap<String, String>, Span)> = HashMap::new();
    for (res, span) in flatten(&requests) {
        assert!(
            spans.insert(span.span_id.clone(), (res, span)).is_none(),
            "a span id twice"
        );
    }
    assert_eq!(spans.len(), expected.len());
    for r in &expected {
        let (res, span) = spans.get(span_id(&r.request_id).as_slice()).unwrap();
        let s = d.session(&r.session_id).unwrap();
        assert_eq!(span.name, format!("chat {}", r.model));
        assert_eq!(span.kind, SpanKind::Client as i32);
        assert_eq!(span.trace_id, trace_id(&r.session_id).to_vec());
        assert_eq!(
            hexs(&span.trace_id),
            crate::langfuse::trace_id_of(&r.session_id)
        );
        assert!(span.parent_span_id.is_empty());
        assert_eq!(span.start_time_unix_nano, nanos(r.created_at));
        assert_eq!(
            span.end_time_unix_nano - span.start_time_unix_nano,
            r.latency_ms * 1_000_000
        );
        assert_eq!(str_attr(span, "gen_ai.operation.name"), Some("chat"));
        assert_eq!(str_attr(span, "gen_ai.system"), Some("openai"));
        assert_eq!(str_attr(span, "gen_ai.provider.name"), Some("openai"));
        assert_eq!(
            str_attr(span, "gen_ai.request.model"),
            Some(r.model.as_str())
        );
        assert_eq!(
            str_attr(span, "gen_ai.conversation.id"),
            Some(r.session_id.as_str())
        );
        assert_eq!(str_attr(span, "server.address"), Some(SERVER_ADDRESS));
        assert_eq!(int_attr(span, "server.port"), Some(SERVER_PORT));
        let status = span.status.as_ref().unwrap();
        if r.is_error() {
            assert_eq!(status.code, SpanStatus::Error as i32);
            assert!(
                status.message.starts_with("Error code: 429"),
                "{}",
                status.message
            );
            assert_eq!(str_attr(span, "error.type"), Some("RateLimitError"));
            assert_eq!(int_attr(span, "gen_ai.usage.input_tokens"), None);
        } else {
            assert_eq!(status.code, SpanStatus::Unset as i32);
            assert_eq!(
                str_attr(span, "gen_ai.response.id"),
                Some(r.request_id.as_str())
            );
            assert_eq!(
                str_attr(span, "gen_ai.response.model"),
                Some(r.model.as_str())
            );
            assert_eq!(
                int_attr(span, "gen_ai.usage.input_tokens"),
                Some(r.input_tokens as i64)
            );
            assert_eq!(
                int_attr(span, "gen_ai.usage.output_tokens"),
                Some(r.output_tokens as i64)
            );
            let cached = int_attr(span, "gen_ai.usage.cache_read.input_tokens");
            assert_eq!(cached.unwrap_or(0), r.cached_tokens as i64);
        }
        // The labels come back as string resource attributes.
        for (k, v) in &s.labels {
            assert_eq!(res.get(k), Some(v), "label {k}");
        }
        let feature = s.labels.get("feature").map_or("agent", String::as_str);
        assert_eq!(res.get("service.name").map(String::as_str), Some(feature));
        assert_eq!(
            res.get("telemetry.sdk.language").map(String::as_str),
            Some("python")
        );
        assert_eq!(res.len(), s.labels.len() + 3, "{res:?}");
    }
}

#[test]
fn spans_are_not_sent_in_time_order() {
    let d = fixture();
    let requests = export_requests(
        &d,
        ts("2026-10-11T11:00:00Z"),
        ts("2026-10-11T12:00:00Z"),
        10,
    );
    let starts: Vec<u64> = flatten(&requests)
        .iter()
        .map(|(_, s)| s.start_time_unix_nano)
        .collect();
    assert_eq!(starts.len(), d.request_count());
    assert!(starts.windows(2).any(|w| w[0] > w[1]), "time-sorted");
    // The same data gives the same requests.
    assert_eq!(
        requests,
        export_requests(
            &d,
            ts("2026-10-11T11:00:00Z"),
            ts("2026-10-11T12:00:00Z"),
            10
        )
    );
}

#[test]
fn cache_reads_are_written_zero_included_and_writes_only_when_made() {
    let (_, uncached) = small_span("req_00000000000000a1");
    assert_eq!(int_attr(&uncached, "gen_ai.usage.input_tokens"), Some(1200));
    assert_eq!(
        int_attr(&uncached, "gen_ai.usage.cache_read.input_tokens"),
        Some(0),
        "a measured zero, not a missing figure"
    );
    assert_eq!(
        int_attr(&uncached, "gen_ai.usage.cache_creation.input_tokens"),
        None
    );

    let (_, cached) = small_span("req_00000000000000a2");
    assert_eq!(int_attr(&cached, "gen_ai.usage.input_tokens"), Some(1300));
    assert_eq!(
        int_attr(&cached, "gen_ai.usage.cache_read.input_tokens"),
        Some(1024)
    );
    assert_eq!(int_attr(&cached, "gen_ai.usage.output_tokens"), Some(90));

    let (_, written) = small_span("req_00000000000000b1");
    assert_eq!(
        int_attr(&written, "gen_ai.usage.cache_creation.input_tokens"),
        Some(512)
    );
    assert_eq!(
        int_attr(&written, "gen_ai.usage.cache_read.input_tokens"),
        Some(0)
    );
}

#[test]
fn failed_calls_carry_an_error_and_no_usage() {
    let (_, limited) = small_span("req_00000000000000a3");
    let (_, broken) = small_span("req_00000000000000c1");
    for span in [&limited, &broken] {
        assert_eq!(span.status.as_ref().unwrap().code, SpanStatus::Error as i32);
        for kv in &span.attributes {
            assert!(!kv.key.starts_with("gen_ai.usage."), "{}", kv.key);
            assert!(!kv.key.starts_with("gen_ai.response."), "{}", kv.key);
        }
        assert_eq!(str_attr(span, "gen_ai.operation.name"), Some("chat"));
    }
    assert_eq!(str_attr(&limited, "error.type"), Some("RateLimitError"));
    assert_eq!(int_attr(&limited, "http.response.status_code"), Some(429));
    assert!(
        limited
            .status
            .as_ref()
            .unwrap()
            .message
            .contains("RateLimitError"),
        "{:?}",
        limited.status
    );
    assert_eq!(str_attr(&broken, "error.type"), Some("500"));
    assert_eq!(int_attr(&broken, "http.response.status_code"), Some(500));
    assert_eq!(broken.status.as_ref().unwrap().message, "Error code: 500");
}

#[test]
fn spans_are_grouped_by_resource() {
    let d = small();
    let requests = export_requests(
        &d,
        ts("2026-10-11T00:00:00Z"),
        ts("2026-10-12T00:00:00Z"),
        100,
    );
    let rs: &Vec<ResourceSpans> = &requests[0].resource_spans;
    assert_eq!(rs.len(), 2, "s-a and s-b share their process");
    let by_service: HashMap<String, usize> = rs
        .iter()
        .map(|r| {
            let attrs = strings(&r.resource.as_ref().unwrap().attributes);
            (attrs["service.name"].clone(), r.scope_spans[0].spans.len())
        })
        .collect();
    assert_eq!(by_service.get("support"), Some(&4));
    assert_eq!(by_service.get(DEFAULT_SERVICE), Some(&1));
    // One trace per session, several sessions per resource.
    let traces: BTreeSet<Vec<u8>> = flatten(&requests)
        .into_iter()
        .map(|(_, s)| s.trace_id)
        .collect();
    assert_eq!(traces.len(), 3);
    // A cut of one span per request still sends every span once.
    let one_each = export_requests(
        &d,
        ts("2026-10-11T00:00:00Z"),
        ts("2026-10-12T00:00:00Z"),
        0,
    );
    assert_eq!(one_each.len(), 5);
    assert_eq!(span_count(&one_each), 5);
}

#[test]
fn span_ids_are_the_request_ids_or_a_hash_of_them() {
    assert_eq!(
        span_id("req_4164d8399f767c45"),
        [0x41, 0x64, 0xd8, 0x39, 0x9f, 0x76, 0x7c, 0x45]
    );
    assert_ne!(span_id("chatcmpl-1"), span_id("chatcmpl-2"));
    assert_ne!(span_id("req_0000000000000000"), [0; 8]);
    assert_ne!(trace_id("a"), trace_id("b"));
}

#[test]
fn json_lines_round_trip_with_hex_ids_and_string_int64s() {
    let d = fixture();
    let requests = export_requests(
        &d,
        ts("2026-10-11T11:00:00Z"),
        ts("2026-10-11T12:00:00Z"),
        20,
    );
    let dir = tempfile::tempdir().unwrap();
    let paths = write_json_lines(dir.path(), &requests, 1000).unwrap();
    assert_eq!(paths, vec![dir.path().join(CURRENT_FILE)]);
    let text = std::fs::read_to_string(&paths[0]).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), requests.len());
    assert!(text.ends_with('\n'));
    for (line, request) in lines.iter().zip(&requests) {
        let raw: serde_json::Value = serde_json::from_str(line).unwrap();
        let obj = raw.as_object().unwrap();
        assert_eq!(obj.keys().collect::<Vec<_>>(), vec!["resourceSpans"]);
        let span = &raw["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
        let trace = span["traceId"].as_str().unwrap();
        assert_eq!(trace.len(), 32);
        assert!(
            trace
                .chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_eq!(span["spanId"].as_str().unwrap().len(), 16);
        let start = span["startTimeUnixNano"].as_str().unwrap();
        assert!(start.parse::<u64>().unwrap() > 1_700_000_000_000_000_000);
        let port = span["attributes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|kv| kv["key"] == "server.port")
            .unwrap();
        assert_eq!(
            port["value"]["intValue"],
            serde_json::json!(SERVER_PORT.to_string())
        );
        assert_eq!(span["kind"], 3);
        let back: ExportTraceServiceRequest = serde_json::from_str(line).unwrap();
        assert_eq!(&back, request);
    }
}

#[test]
fn rotation_writes_several_files_whose_union_is_the_range() {
    let d = fixture();
    let (from, to) = (ts("2026-10-11T11:00:00Z"), ts("2026-10-11T12:00:00Z"));
    let requests = export_requests(&d, from, to, 8);
    assert_eq!(requests.len(), 11);
    let dir = tempfile::tempdir().unwrap();
    let paths = write_json_lines(dir.path(), &requests, 3).unwrap();
    assert_eq!(paths.len(), 4);
    let names: Vec<String> = paths
        .iter()
        .map(|p| p.file_name().unwrap().to_str().unwrap().to_owned())
        .collect();
    assert_eq!(names.last().map(String::as_str), Some(CURRENT_FILE));
    let mut rotated = Vec::new();
    for name in &names[..3] {
        let stamp = name
            .strip_prefix("traces-")
            .and_then(|n| n.strip_suffix(".json"))
            .unwrap();
        let at = chrono::NaiveDateTime::parse_from_str(stamp, "%Y-%m-%dT%H-%M-%S%.3f")
            .unwrap()
            .and_utc();
        assert_eq!(stamp.len(), "2022-09-14T05-02-14.173".len());
        rotated.push(at);
    }
    assert!(rotated.windows(2).all(|w| w[0] < w[1]), "{names:?}");
    assert!(rotated[0] > from && rotated[2] < to + Duration::minutes(5));
    let on_disk: BTreeSet<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(on_disk, names.iter().cloned().collect());

    let mut seen = BTreeSet::new();
    let mut lines = 0;
    for path in &paths {
        for line in std::fs::read_to_string(path).unwrap().lines() {
            lines += 1;
            let request: ExportTraceServiceRequest = serde_json::from_str(line).unwrap();
            for (_, span) in flatten(&[request]) {
                assert!(seen.insert(span.span_id), "a span in two lines");
            }
        }
    }
    assert_eq!(lines, requests.len());
    let expected: BTreeSet<Vec<u8>> = d
        .requests_in(from, to, &[], None)
        .iter()
        .map(|r| span_id(&r.request_id).to_vec())
        .collect();
    assert_eq!(seen, expected);
}

#[test]
fn nothing_to_write_leaves_an_empty_current_file() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write_json_lines(&dir.path().join("new"), &[], 5).unwrap();
    assert_eq!(paths, vec![dir.path().join("new").join(CURRENT_FILE)]);
    assert_eq!(std::fs::read_to_string(&paths[0]).unwrap(), "");
}

/// What the receiver in the test saw, and how it answers.
#[derive(Default)]
struct Receiver {
    /// The answers to give, in order (then 200 with no partial success).
    script: Vec<(StatusCode, Option<&'static str>, Vec<u8>)>,
    /// Requests decoded, with their content type and bearer key.
    seen: Vec<(ExportTraceServiceRequest, String, Option<String>)>,
    /// Spans to reject per request, with this message.
    reject: Option<(i64, &'static str)>,
    hits: usize,
}

type Shared = Arc<Mutex<Receiver>>;

async fn receive(State(rx): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let mut rx = rx.lock().unwrap();
    rx.hits += 1;
    let request = ExportTraceServiceRequest::decode(body).unwrap();
    let content_type = headers[header::CONTENT_TYPE].to_str().unwrap().to_owned();
    let key = bearer(&headers).map(str::to_owned);
    if !rx.script.is_empty() {
        let (status, retry_after, body) = rx.script.remove(0);
        let mut res = (status, body).into_response();
        if let Some(after) = retry_after {
            res.headers_mut()
                .insert(header::RETRY_AFTER, after.parse().unwrap());
        }
        return res;
    }
    rx.seen.push((request, content_type, key));
    let answer = ExportTraceServiceResponse {
        partial_success: rx.reject.map(|(n, m)| ExportTracePartialSuccess {
            rejected_spans: n,
            error_message: m.to_owned(),
        }),
    };
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, PROTOBUF)],
        answer.encode_to_vec(),
    )
        .into_response()
}

async fn receiver(rx: Receiver) -> (Listening, String, Shared) {
    let shared = Arc::new(Mutex::new(rx));
    let app = Router::new()
        .route("/v1/traces", post(receive))
        .with_state(shared.clone());
    let listening = Listening::start("127.0.0.1:0".parse().unwrap(), app)
        .await
        .unwrap();
    let url = format!("http://{}/v1/traces", listening.addr());
    (listening, url, shared)
}

/// Options whose own backoff would outlast the test: only `Retry-After`
/// lets a retry happen in time.
fn patient() -> PostOptions {
    PostOptions {
        max_attempts: 3,
        backoff: std::time::Duration::from_secs(3600),
        max_backoff: std::time::Duration::from_secs(3600),
        max_retry_after: std::time::Duration::from_secs(60),
        timeout: std::time::Duration::from_secs(10),
    }
}

async fn within<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(std::time::Duration::from_secs(20), f)
        .await
        .expect("gave up waiting")
}

#[tokio::test]
async fn posts_protobuf_and_counts_a_partial_success() {
    let d = fixture();
    let requests = export_requests(
        &d,
        ts("2026-10-11T11:00:00Z"),
        ts("2026-10-11T12:00:00Z"),
        30,
    );
    assert_eq!(requests.len(), 3);
    let (server, url, rx) = receiver(Receiver {
        reject: Some((2, "2 spans lacked a name")),
        ..Receiver::default()
    })
    .await;
    let stats = within(post_protobuf(&url, Some("otlp-key"), &requests))
        .await
        .unwrap();
    assert_eq!(stats.requests, 3);
    assert_eq!(stats.rejected_spans, 6);
    assert_eq!(stats.accepted_spans, d.request_count() as u64 - 6);
    assert_eq!(stats.retries, 0);
    assert_eq!(stats.messages, vec!["2 spans lacked a name"; 3]);
    server.shutdown().await.unwrap();
    let rx = rx.lock().unwrap();
    assert_eq!(rx.seen.len(), 3);
    for ((got, content_type, key), sent) in rx.seen.iter().zip(&requests) {
        assert_eq!(got, sent);
        assert_eq!(content_type, PROTOBUF);
        assert_eq!(key.as_deref(), Some("otlp-key"));
    }
}

#[tokio::test]
async fn a_503_is_retried_after_its_retry_after() {
    let d = small();
    let requests = export_requests(
        &d,
        ts("2026-10-11T00:00:00Z"),
        ts("2026-10-12T00:00:00Z"),
        2,
    );
    assert_eq!(requests.len(), 3);
    let (server, url, rx) = receiver(Receiver {
        script: vec![(StatusCode::SERVICE_UNAVAILABLE, Some("0"), Vec::new())],
        ..Receiver::default()
    })
    .await;
    let stats = within(post_protobuf_with(&url, None, &requests, &patient()))
        .await
        .unwrap();
    assert_eq!(stats.retries, 1);
    assert_eq!(stats.waits, vec![std::time::Duration::ZERO]);
    assert_eq!(stats.requests, 3);
    assert_eq!(stats.accepted_spans, 5);
    assert_eq!(stats.rejected_spans, 0);
    server.shutdown().await.unwrap();
    let rx = rx.lock().unwrap();
    assert_eq!(rx.hits, 4);
    assert_eq!(
        rx.seen[0].0, requests[0],
        "the refused request was sent again"
    );
    assert_eq!(rx.seen[0].2, None);
}

#[tokio::test]
async fn without_retry_after_the_backoff_doubles() {
    let d = small();
    let requests = export_requests(
        &d,
        ts("2026-10-11T00:00:00Z"),
        ts("2026-10-12T00:00:00Z"),
        10,
    );
    let (server, url, _rx) = receiver(Receiver {
        script: vec![
            (StatusCode::TOO_MANY_REQUESTS, None, Vec::new()),
            (StatusCode::BAD_GATEWAY, None, Vec::new()),
            (StatusCode::GATEWAY_TIMEOUT, None, Vec::new()),
        ],
        ..Receiver::default()
    })
    .await;
    let ms = std::time::Duration::from_millis;
    let options = PostOptions {
        max_attempts: 4,
        backoff: ms(1),
        max_backoff: ms(3),
        ..PostOptions::default()
    };
    let stats = within(post_protobuf_with(&url, None, &requests, &options))
        .await
        .unwrap();
    assert_eq!(stats.waits, vec![ms(1), ms(2), ms(3)]);
    assert_eq!(stats.accepted_spans, 5);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_refusal_is_not_retried_and_says_why() {
    let d = small();
    let requests = export_requests(
        &d,
        ts("2026-10-11T00:00:00Z"),
        ts("2026-10-12T00:00:00Z"),
        10,
    );
    #[derive(Clone, PartialEq, Message)]
    struct RpcStatus {
        #[prost(int32, tag = "1")]
        code: i32,
        #[prost(string, tag = "2")]
        message: String,
    }
    let body = RpcStatus {
        code: 3,
        message: "invalid trace id".to_owned(),
    }
    .encode_to_vec();
    let (server, url, rx) = receiver(Receiver {
        script: vec![(StatusCode::BAD_REQUEST, None, body)],
        ..Receiver::default()
    })
    .await;
    let err = within(post_protobuf_with(&url, None, &requests, &patient()))
        .await
        .unwrap_err();
    match &err {
        PostError::Rejected {
            index,
            status,
            message,
            ..
        } => {
            assert_eq!((*index, *status), (0, 400));
            assert_eq!(message, "invalid trace id");
        }
        other => panic!("{other:?}"),
    }
    assert!(
        err.to_string()
            .contains("refused with 400: invalid trace id"),
        "{err}"
    );
    assert_eq!(rx.lock().unwrap().hits, 1);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_retry_after_beyond_the_patience_gives_up_at_once() {
    let d = small();
    let requests = export_requests(
        &d,
        ts("2026-10-11T00:00:00Z"),
        ts("2026-10-12T00:00:00Z"),
        10,
    );
    let (server, url, rx) = receiver(Receiver {
        script: vec![(StatusCode::TOO_MANY_REQUESTS, Some("3600"), Vec::new())],
        ..Receiver::default()
    })
    .await;
    let err = within(post_protobuf_with(&url, None, &requests, &patient()))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            PostError::Throttled {
                status: 429,
                attempts: 1,
                index: 0,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(rx.lock().unwrap().hits, 1);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_unreachable_receiver_fails_after_its_attempts() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1/traces", listener.local_addr().unwrap());
    drop(listener);
    let requests = export_requests(
        &small(),
        ts("2026-10-11T00:00:00Z"),
        ts("2026-10-12T00:00:00Z"),
        10,
    );
    let options = PostOptions {
        max_attempts: 2,
        backoff: std::time::Duration::from_millis(1),
        ..PostOptions::default()
    };
    let err = within(post_protobuf_with(&url, None, &requests, &options))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            PostError::Transport {
                attempts: 2,
                index: 0,
                ..
            }
        ),
        "{err:?}"
    );
}

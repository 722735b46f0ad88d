//! The OTLP/HTTP receiver over real loopback HTTP with a real SQLite file
//! (and a real PostgreSQL for outages and replicas): what is stored, what
//! is answered, and that nothing an exporter sends is lost.

use crate::pg::PgCluster;
use crate::support::{clock, sqlite_url, ts};
use chrono::{DateTime, Utc};
use costwatch::ingest::{self as receiver, ReceiverSettings};
use costwatch::ops::metrics::Metrics;
use costwatch::source::RequestStatus;
use costwatch::source::otlp::{self, SpanMapping};
use costwatch::store::{CallStore, SqlStore};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, Status, status};
use prost::Message;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tempfile::TempDir;
use tokio::sync::watch;

const NOW: &str = "2026-10-11T12:00:00Z";

fn kv(key: &str, v: Value) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue { value: Some(v) }),
        ..Default::default()
    }
}

fn s(v: &str) -> Value {
    Value::StringValue(v.to_owned())
}

fn i(v: i64) -> Value {
    Value::IntValue(v)
}

/// A chat span as the official OpenAI instrumentation writes it.
fn chat(span: u8, conversation: &str, at: DateTime<Utc>, input: i64, cached: i64) -> Span {
    let mut attributes = vec![
        kv("gen_ai.operation.name", s("chat")),
        kv("gen_ai.system", s("openai")),
        kv("gen_ai.request.model", s("gpt-4o-mini")),
        kv("gen_ai.response.model", s("gpt-4o-mini-2024-07-18")),
        kv("gen_ai.conversation.id", s(conversation)),
        kv("gen_ai.usage.input_tokens", i(input)),
        kv("gen_ai.usage.output_tokens", i(40)),
    ];
    if cached > 0 {
        attributes.push(kv("gen_ai.usage.cache_read.input_tokens", i(cached)));
    }
    let start = u64::try_from(at.timestamp_nanos_opt().unwrap()).unwrap();
    Span {
        trace_id: vec![7; 16],
        span_id: vec![span; 8],
        name: "chat gpt-4o-mini".to_owned(),
        kind: 3,
        start_time_unix_nano: start,
        end_time_unix_nano: start + 900_000_000,
        attributes,
        ..Default::default()
    }
}

fn failed(span: u8, conversation: &str, at: DateTime<Utc>) -> Span {
    let mut sp = chat(span, conversation, at, 0, 0);
    sp.attributes
        .retain(|a| !a.key.starts_with("gen_ai.usage") && a.key != "gen_ai.response.model");
    sp.attributes.push(kv("error.type", s("RateLimitError")));
    sp.status = Some(Status {
        code: status::StatusCode::Error as i32,
        message: "Error code: 429".to_owned(),
    });
    sp
}

/// Not a model call: an HTTP client span of the same trace.
fn http_span(span: u8, at: DateTime<Utc>) -> Span {
    let mut sp = chat(span, "x", at, 0, 0);
    sp.attributes = vec![kv("http.request.method", s("POST"))];
    sp.name = "POST".to_owned();
    sp
}

fn export(spans: Vec<Span>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![
                    kv("service.name", s("support-agent")),
                    kv("deployment.environment", s("prod")),
                    kv("process.pid", i(4242)),
                ],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

fn settings() -> ReceiverSettings {
    ReceiverSettings {
        receiver: otlp::Receiver {
            listen: "127.0.0.1:0".parse().unwrap(),
            max_request_bytes: 64 * 1024,
            max_requests_per_second: 1000,
            ..otlp::Receiver::default()
        },
        mapping: SpanMapping::default(),
        max_in_flight: 4,
        accept_future: Duration::from_secs(3600),
        store_timeout: Duration::from_secs(10),
        job: "main".into(),
        settle_lag: Duration::from_secs(120),
    }
}

struct Receiver<S> {
    url: String,
    store: S,
    metrics: Arc<Metrics>,
    _stop: watch::Sender<bool>,
}

async fn start<S: CallStore + costwatch::store::Store + Clone + 'static>(
    store: S,
    settings: ReceiverSettings,
) -> Receiver<S> {
    start_at(store, settings, clock(ts(NOW))).await
}

async fn start_at<S: CallStore + costwatch::store::Store + Clone + 'static>(
    store: S,
    settings: ReceiverSettings,
    clock: Arc<dyn costwatch::clock::Clock>,
) -> Receiver<S> {
    let (stop, stop_rx) = watch::channel(false);
    let metrics = Arc::new(Metrics::new());
    let (addr, _task): (SocketAddr, _) =
        receiver::serve(settings, store.clone(), clock, metrics.clone(), stop_rx)
            .await
            .unwrap();
    Receiver {
        url: format!("http://{addr}/v1/traces"),
        store,
        metrics,
        _stop: stop,
    }
}

async fn sqlite(dir: &TempDir) -> SqlStore {
    SqlStore::open(&sqlite_url(dir)).await.unwrap()
}

async fn post(url: &str, content_type: &str, body: Vec<u8>) -> reqwest::Response {
    reqwest::Client::new()
        .post(url)
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .unwrap()
}

async fn post_pb(url: &str, req: &ExportTraceServiceRequest) -> reqwest::Response {
    post(url, "application/x-protobuf", req.encode_to_vec()).await
}

async fn stored<S: CallStore>(store: &S) -> Vec<costwatch::source::rows::CallRow> {
    store
        .calls_page(
            ts("2026-01-01T00:00:00Z"),
            ts("2027-01-01T00:00:00Z"),
            None,
            10_000,
        )
        .await
        .unwrap()
}

fn minute(m: u32) -> DateTime<Utc> {
    ts(NOW) - chrono::TimeDelta::minutes(60 - i64::from(m))
}

#[tokio::test]
async fn protobuf_exports_are_stored_once_and_answered_in_protobuf() {
    let dir = TempDir::new().unwrap();
    let r = start(sqlite(&dir).await, settings()).await;
    let req = export(vec![
        chat(1, "conv-a", minute(1), 1200, 0),
        chat(2, "conv-a", minute(2), 2400, 1024),
        failed(3, "conv-a", minute(3)),
        http_span(4, minute(3)),
    ]);
    let res = post_pb(&r.url, &req).await;
    assert_eq!(res.status(), 200);
    assert_eq!(
        res.headers()["content-type"].to_str().unwrap(),
        "application/x-protobuf"
    );
    let body = ExportTraceServiceResponse::decode(res.bytes().await.unwrap()).unwrap();
    assert!(
        body.partial_success.is_none_or(|p| p.rejected_spans == 0),
        "a clean export is a full success"
    );

    let calls = stored(&r.store).await;
    assert_eq!(
        calls.len(),
        3,
        "the HTTP span is not a model call: {calls:?}"
    );
    assert_eq!(calls[0].request_id, "0101010101010101");
    assert_eq!(calls[0].session_id.as_deref(), Some("conv-a"));
    assert_eq!(calls[0].model, "gpt-4o-mini-2024-07-18");
    assert_eq!(
        (calls[1].input_tokens, calls[1].cached_tokens),
        (2400, 1024)
    );
    assert_eq!(calls[2].status, RequestStatus::Error);
    assert_eq!(calls[2].error_type.as_deref(), Some("RateLimitError"));
    assert_eq!(calls[2].input_tokens, 0, "failed calls report no usage");
    assert_eq!(calls[0].labels["service.name"], "support-agent");
    assert_eq!(calls[0].labels["deployment.environment"], "prod");
    assert!(
        !calls[0].labels.contains_key("process.pid"),
        "only string resource attributes become labels"
    );

    // The exporter retries the same batch (its answer was lost): nothing doubles.
    assert_eq!(post_pb(&r.url, &req).await.status(), 200);
    assert_eq!(stored(&r.store).await.len(), 3);
    let page = r.metrics.render();
    assert!(
        page.contains("costwatch_otlp_spans_total{outcome=\"stored\"} 3"),
        "{page}"
    );
    assert!(
        page.contains("costwatch_otlp_spans_total{outcome=\"duplicate\"} 3"),
        "{page}"
    );
    assert!(
        page.contains("costwatch_otlp_spans_total{outcome=\"other\"} 2"),
        "{page}"
    );
    assert!(
        page.contains("costwatch_otlp_requests_total{outcome=\"accepted\"} 2"),
        "{page}"
    );
}

#[tokio::test]
async fn json_and_gzip_bodies_are_read_too() {
    let dir = TempDir::new().unwrap();
    let r = start(sqlite(&dir).await, settings()).await;
    // OTLP/JSON: hex ids, 64-bit integers as strings, camelCase.
    let json = serde_json::to_vec(&export(vec![chat(9, "conv-j", minute(5), 3000, 0)])).unwrap();
    let text = String::from_utf8(json.clone()).unwrap();
    assert!(text.contains("\"spanId\":\"0909090909090909\""), "{text}");
    let res = post(&r.url, "application/json", json.clone()).await;
    assert_eq!(res.status(), 200);
    assert_eq!(
        res.headers()["content-type"].to_str().unwrap(),
        "application/json"
    );
    let body: serde_json::Value = res.json().await.unwrap();
    assert!(
        body.get("partialSuccess").is_none(),
        "a full success: {body}"
    );

    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&export(vec![chat(10, "conv-g", minute(6), 10, 0)]).encode_to_vec())
        .unwrap();
    let res = reqwest::Client::new()
        .post(&r.url)
        .header("content-type", "application/x-protobuf")
        .header("content-encoding", "gzip")
        .body(gz.finish().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let ids: Vec<String> = stored(&r.store)
        .await
        .into_iter()
        .map(|c| c.request_id)
        .collect();
    assert_eq!(ids, ["0909090909090909", "0a0a0a0a0a0a0a0a"]);
}

#[tokio::test]
async fn bad_bodies_are_refused_with_a_status_that_says_not_to_retry() {
    let dir = TempDir::new().unwrap();
    let r = start(sqlite(&dir).await, settings()).await;

    let res = post(&r.url, "text/plain", b"hello".to_vec()).await;
    assert_eq!(res.status(), 415);
    assert!(res.headers().get("retry-after").is_none());

    // Not protobuf: field 1 as a length-delimited record running past the end.
    let res = post(
        &r.url,
        "application/x-protobuf",
        vec![0x0a, 0xff, 0x01, 0x02],
    )
    .await;
    assert_eq!(res.status(), 400);
    let status = res.bytes().await.unwrap();
    assert!(
        String::from_utf8_lossy(&status).contains("cannot decode"),
        "the body is a google.rpc.Status whose message says why"
    );

    let res = post(
        &r.url,
        "application/json",
        b"{\"resourceSpans\": [".to_vec(),
    )
    .await;
    assert_eq!(res.status(), 400);
    let body: serde_json::Value = res.json().await.unwrap();
    assert_eq!(body["code"], 3, "INVALID_ARGUMENT: {body}");

    let res = post(&r.url, "application/x-protobuf", vec![0u8; 65 * 1024]).await;
    assert_eq!(res.status(), 413);

    // A gzip bomb: small as sent, far over the limit once inflated.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&vec![0u8; 4 * 1024 * 1024]).unwrap();
    let bomb = gz.finish().unwrap();
    assert!(bomb.len() < 64 * 1024);
    let res = reqwest::Client::new()
        .post(&r.url)
        .header("content-type", "application/x-protobuf")
        .header("content-encoding", "gzip")
        .body(bomb)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 413);

    assert!(stored(&r.store).await.is_empty());
    let page = r.metrics.render();
    for outcome in ["unsupported_media_type", "bad_data", "too_large"] {
        assert!(
            page.contains(&format!(
                "costwatch_otlp_requests_total{{outcome=\"{outcome}\"}}"
            )),
            "{outcome}: {page}"
        );
    }
}

#[tokio::test]
async fn spans_out_of_time_or_without_a_model_are_a_partial_success() {
    let dir = TempDir::new().unwrap();
    let r = start(sqlite(&dir).await, settings()).await;
    let mut no_model = chat(3, "conv-p", minute(10), 100, 0);
    no_model.attributes.retain(|a| !a.key.ends_with(".model"));
    let mut streamed = chat(4, "conv-p", minute(11), 0, 0);
    streamed
        .attributes
        .retain(|a| !a.key.starts_with("gen_ai.usage"));
    let req = export(vec![
        chat(1, "conv-p", minute(10), 100, 0),
        // A wrong clock: a day ahead, and a year behind.
        chat(2, "conv-p", ts(NOW) + chrono::TimeDelta::days(1), 100, 0),
        chat(5, "conv-p", ts(NOW) - chrono::TimeDelta::days(365), 100, 0),
        no_model,
        streamed,
    ]);
    let res = post_pb(&r.url, &req).await;
    assert_eq!(res.status(), 200);
    let body = ExportTraceServiceResponse::decode(res.bytes().await.unwrap()).unwrap();
    let partial = body.partial_success.expect("a partial success");
    assert_eq!(partial.rejected_spans, 3, "{partial:?}");
    assert!(!partial.error_message.is_empty());

    let calls = stored(&r.store).await;
    let ids: Vec<&str> = calls.iter().map(|c| c.request_id.as_str()).collect();
    assert_eq!(ids, ["0101010101010101", "0404040404040404"]);
    assert_eq!(calls[1].input_tokens, 0, "kept, with zero tokens");

    // Only the call without usage: stored, and the answer warns of it.
    let res = post_pb(
        &r.url,
        &export(vec![{
            let mut s = chat(6, "conv-p", minute(12), 0, 0);
            s.attributes.retain(|a| !a.key.starts_with("gen_ai.usage"));
            s
        }]),
    )
    .await;
    let body = ExportTraceServiceResponse::decode(res.bytes().await.unwrap()).unwrap();
    let warning = body.partial_success.expect("a warning");
    assert_eq!(warning.rejected_spans, 0);
    assert!(
        warning.error_message.contains("no token usage"),
        "{warning:?}"
    );
}

#[tokio::test]
async fn a_bearer_token_is_required_when_configured() {
    let dir = TempDir::new().unwrap();
    let mut set = settings();
    set.receiver.token = Some(costwatch::secret::Secret::new("s3cret-token"));
    let r = start(sqlite(&dir).await, set).await;
    let req = export(vec![chat(1, "conv-t", minute(1), 100, 0)]).encode_to_vec();
    for auth in [None, Some("Bearer wrong"), Some("s3cret-token")] {
        let mut b = reqwest::Client::new()
            .post(&r.url)
            .header("content-type", "application/x-protobuf");
        if let Some(a) = auth {
            b = b.header("authorization", a);
        }
        let res = b.body(req.clone()).send().await.unwrap();
        assert_eq!(res.status(), 401, "{auth:?}");
    }
    let res = reqwest::Client::new()
        .post(&r.url)
        .header("content-type", "application/x-protobuf")
        .header("authorization", "Bearer s3cret-token")
        .body(req)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(stored(&r.store).await.len(), 1);
}

#[tokio::test]
async fn a_flood_is_told_to_come_back_later() {
    let dir = TempDir::new().unwrap();
    let mut set = settings();
    set.receiver.max_requests_per_second = 2;
    let r = start(sqlite(&dir).await, set).await;
    let mut statuses = Vec::new();
    for n in 0..4u8 {
        let res = post_pb(
            &r.url,
            &export(vec![chat(n + 1, "conv-f", minute(1), 10, 0)]),
        )
        .await;
        if res.status() == 429 {
            assert_eq!(res.headers()["retry-after"], "1");
        }
        statuses.push(res.status().as_u16());
    }
    assert_eq!(statuses[..2], [200, 200]);
    assert!(statuses[2..].contains(&429), "{statuses:?}");
    let accepted = statuses.iter().filter(|s| **s == 200).count();
    assert_eq!(stored(&r.store).await.len(), accepted);
}

#[tokio::test]
async fn a_database_outage_is_a_retryable_error_and_loses_nothing() {
    let pg = PgCluster::start();
    let store = SqlStore::open(&pg.url()).await.unwrap();
    let r = start(store, settings()).await;
    let req = export(vec![
        chat(1, "conv-o", minute(1), 100, 0),
        chat(2, "conv-o", minute(2), 100, 0),
    ]);

    pg.stop();
    let res = post_pb(&r.url, &req).await;
    assert_eq!(
        res.status(),
        503,
        "the exporter keeps the spans and retries"
    );
    assert_eq!(res.headers()["retry-after"], "5");

    pg.start_again();
    // The exporter's retry, once the database is back.
    let mut status = 0;
    for _ in 0..50 {
        status = post_pb(&r.url, &req).await.status().as_u16();
        if status == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(status, 200);
    assert_eq!(stored(&r.store).await.len(), 2);
}

#[tokio::test]
async fn replicas_on_one_postgresql_store_a_span_once() {
    let pg = PgCluster::start();
    let a = start(SqlStore::open(&pg.url()).await.unwrap(), settings()).await;
    let b = start(SqlStore::open(&pg.url()).await.unwrap(), settings()).await;
    let first = export(vec![
        chat(1, "conv-r", minute(1), 100, 0),
        chat(2, "conv-r", minute(2), 100, 0),
    ]);
    let overlap = export(vec![
        chat(2, "conv-r", minute(2), 100, 0),
        chat(3, "conv-r", minute(3), 100, 0),
    ]);
    let (ra, rb) = tokio::join!(post_pb(&a.url, &first), post_pb(&b.url, &overlap));
    assert_eq!((ra.status().as_u16(), rb.status().as_u16()), (200, 200));
    let ids: Vec<String> = stored(&a.store)
        .await
        .into_iter()
        .map(|c| c.request_id)
        .collect();
    assert_eq!(
        ids,
        ["0101010101010101", "0202020202020202", "0303030303030303"]
    );
}

#[tokio::test]
async fn retention_deletes_old_calls_but_never_those_a_window_still_reads() {
    use costwatch::app::receiver::{Retention, sweep};
    use costwatch::store::{Store, WindowStore};
    let dir = TempDir::new().unwrap();
    let store = sqlite(&dir).await;
    let now = ts(NOW);
    let day = chrono::TimeDelta::days(1);
    let rows: Vec<_> = [10, 8, 3, 1]
        .iter()
        .enumerate()
        .map(|(n, days_ago)| costwatch::source::otlp::SpanCall {
            trace_id: format!("{n:032x}"),
            conversation: true,
            row: costwatch::source::rows::CallRow {
                request_id: format!("{n:016x}"),
                session_id: Some("s".into()),
                created_at: now - day * *days_ago,
                model: "m".into(),
                status: RequestStatus::Success,
                http_status: None,
                error_type: None,
                input_tokens: 1,
                cached_tokens: 0,
                cache_reported: true,
                instrumentation: None,
                cache_write_tokens: 0,
                output_tokens: 1,
                cost_usd: None,
                labels: Default::default(),
                provider: None,
            },
        })
        .collect();
    assert_eq!(
        store
            .insert_calls(&rows, &[], now, Duration::ZERO)
            .await
            .unwrap(),
        4
    );
    let retention = Retention {
        keep: Duration::from_secs(7 * 24 * 3600),
        lookback: Duration::from_secs(6 * 3600),
        job: "main".into(),
    };
    // No window read yet: everything stays.
    assert_eq!(sweep(&store, &retention, now).await.unwrap(), 0);
    // The job is stuck 9 days back: what its next window reads stays.
    store
        .init_watermark("main", now - day * 9, now)
        .await
        .unwrap();
    assert_eq!(
        sweep(&store, &retention, now).await.unwrap(),
        1,
        "only the 10-day-old call"
    );
    // Caught up: calls past the retention go.
    store
        .skip_to("main", now - day * 9, now, now)
        .await
        .unwrap();
    assert_eq!(
        sweep(&store, &retention, now).await.unwrap(),
        1,
        "the 8-day-old call"
    );
    let left: Vec<String> = stored(&store)
        .await
        .into_iter()
        .map(|c| c.request_id)
        .collect();
    assert_eq!(left, ["0000000000000002", "0000000000000003"]);
}

/// The official OpenAI instrumentation writes the conversation id on the
/// `invoke_agent` span around the calls, which ends (and is exported) after
/// them: the calls take it on, whichever batch brought it.
#[tokio::test]
async fn calls_take_their_traces_conversation_id_from_an_agent_span_sent_later() {
    let dir = TempDir::new().unwrap();
    late_agent_span_names_the_calls(sqlite(&dir).await).await;
}

#[tokio::test]
async fn calls_take_their_traces_conversation_id_on_postgresql_too() {
    let pg = PgCluster::start();
    late_agent_span_names_the_calls(SqlStore::open(&pg.url()).await.unwrap()).await;
}

async fn late_agent_span_names_the_calls(store: SqlStore) {
    let r = start(store, settings()).await;
    let mut call = chat(1, "unused", minute(1), 500, 0);
    call.attributes
        .retain(|a| a.key != "gen_ai.conversation.id");
    let mut other_trace = chat(2, "unused", minute(2), 500, 0);
    other_trace
        .attributes
        .retain(|a| a.key != "gen_ai.conversation.id");
    other_trace.trace_id = vec![9; 16];
    assert_eq!(
        post_pb(&r.url, &export(vec![call, other_trace]))
            .await
            .status(),
        200
    );
    let before: Vec<Option<String>> = stored(&r.store)
        .await
        .into_iter()
        .map(|c| c.session_id)
        .collect();
    assert_eq!(
        before,
        [Some("07".repeat(16)), Some("09".repeat(16))],
        "until then, the trace is the session"
    );

    let mut agent = http_span(3, minute(0));
    agent.attributes = vec![
        kv("gen_ai.operation.name", s("invoke_agent")),
        kv("gen_ai.conversation.id", s("conv-77")),
    ];
    assert_eq!(post_pb(&r.url, &export(vec![agent])).await.status(), 200);
    let after: Vec<Option<String>> = stored(&r.store)
        .await
        .into_iter()
        .map(|c| c.session_id)
        .collect();
    assert_eq!(after, [Some("conv-77".to_owned()), Some("09".repeat(16))]);
    let drill = r
        .store
        .session_calls("conv-77", ts("2026-01-01T00:00:00Z"), ts(NOW))
        .await
        .unwrap();
    assert_eq!(drill.len(), 1);
    assert_eq!(drill[0].request_id, "0101010101010101");
}

/// A conversation id that arrives once a window may have read the trace's
/// calls names nothing: the calls keep the session they were read under,
/// so no finding is split or counted twice.
#[tokio::test]
async fn a_conversation_id_arriving_after_its_calls_could_be_read_changes_nothing() {
    let dir = TempDir::new().unwrap();
    conversation_arriving_late_names_nothing(sqlite(&dir).await).await;
}

#[tokio::test]
async fn a_conversation_id_arriving_late_changes_nothing_on_postgresql_too() {
    let pg = PgCluster::start();
    conversation_arriving_late_names_nothing(SqlStore::open(&pg.url()).await.unwrap()).await;
}

async fn conversation_arriving_late_names_nothing(store: SqlStore) {
    let fake = Arc::new(costwatch::clock::FakeClock::new(ts(NOW)));
    let r = start_at(store, settings(), fake.clone()).await;
    // A call that started just now: no window has read it yet.
    let mut call = chat(1, "unused", ts(NOW), 500, 0);
    call.attributes
        .retain(|a| a.key != "gen_ai.conversation.id");
    assert_eq!(post_pb(&r.url, &export(vec![call])).await.status(), 200);

    // Three minutes on (settle_lag is two), its window may have been read.
    fake.advance(chrono::TimeDelta::minutes(3));
    let mut agent = http_span(3, ts(NOW));
    agent.attributes = vec![
        kv("gen_ai.operation.name", s("invoke_agent")),
        kv("gen_ai.conversation.id", s("conv-late")),
    ];
    assert_eq!(post_pb(&r.url, &export(vec![agent])).await.status(), 200);
    let later = ts(NOW) + chrono::TimeDelta::hours(1);
    let sessions: Vec<Option<String>> = r
        .store
        .calls_page(ts(NOW), later, None, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.session_id)
        .collect();
    assert_eq!(sessions, [Some("07".repeat(16))], "still the trace");
    let drill = r
        .store
        .session_calls("conv-late", ts(NOW), later)
        .await
        .unwrap();
    assert!(drill.is_empty(), "{drill:?}");
}

/// A span whose window was already read is stored (a replay may read it)
/// but never judged live: `/metrics` and the log say so.
#[tokio::test]
async fn spans_behind_the_watermark_are_counted_as_late() {
    use costwatch::store::WindowStore;
    let dir = TempDir::new().unwrap();
    let store = sqlite(&dir).await;
    store
        .init_watermark("main", minute(30), ts(NOW))
        .await
        .unwrap();
    let r = start(store, settings()).await;
    let req = export(vec![
        chat(1, "c", minute(10), 10, 0),
        chat(2, "c", minute(40), 10, 0),
    ]);
    assert_eq!(post_pb(&r.url, &req).await.status(), 200);
    assert_eq!(stored(&r.store).await.len(), 2);
    let page = r.metrics.render();
    assert!(
        page.contains("costwatch_otlp_spans_total{outcome=\"late\"} 1"),
        "{page}"
    );
}

//! Posting to an OTLP/HTTP receiver.

use super::*;

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
